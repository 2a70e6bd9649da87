"""Long training runs report their merge count while the kernel runs."""

import threading
import time

import numpy as np

from dwstok.merge_learner import _interruptible, learn_merges


def _slow_kernel(stop):
    for step in range(25):
        stop[1] = step
        time.sleep(0.1)
    return "done"


def test_progress_is_reported_from_the_waiting_thread_while_the_kernel_runs():
    stop = np.zeros(2, np.int64)
    seen = []
    assert _interruptible(lambda: _slow_kernel(stop), stop, seen.append) == "done"
    assert len(seen) >= 1 and all(0 < n < 25 for n in seen) and seen == sorted(seen)


def test_progress_is_reported_off_the_main_thread_too():
    # The CLI runs stages in a worker thread (signals stay with the main thread).
    stop = np.zeros(2, np.int64)
    seen = []
    t = threading.Thread(target=lambda: _interruptible(lambda: _slow_kernel(stop), stop, seen.append))
    t.start()
    t.join()
    assert seen


def test_the_kernel_counts_its_merges_and_progress_changes_nothing():
    data = np.frombuffer(b"aaabdaaabac" * 3, np.uint8)
    plain = learn_merges(data, np.array([0, 33]), np.array([1]), 3)
    seen = []
    reported = learn_merges(data, np.array([0, 33]), np.array([1]), 3, on_progress=seen.append)
    assert reported.merges == plain.merges and reported.counts.tolist() == plain.counts.tolist()


def test_merges_are_handed_on_in_order_while_the_kernel_runs():
    rng = np.random.default_rng(5)
    pieces = [bytes(rng.integers(97, 123, rng.integers(2, 12)).tolist()) for _ in range(30000)]
    data = np.frombuffer(b"".join(pieces), np.uint8)
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in pieces])])
    weights = rng.integers(1, 50, len(pieces))
    plain = learn_merges(data, offsets, weights, 2000)
    batches = []
    got = learn_merges(data, offsets, weights, 2000, on_merges=lambda first, m: batches.append((first, list(m))))
    assert got.merges == plain.merges
    assert [f for f, _ in batches] == [sum(len(m) for _, m in batches[:i]) for i in range(len(batches))]
    assert [p for _, m in batches for p in m] == plain.merges


def test_a_merge_read_before_the_kernel_settled_it_is_read_again(monkeypatch):
    # The kernel writes merge i before it sets stop[1] past i; were a write seen late,
    # the check at the end starts the merges over (first = 0) with the final ones.
    import dwstok.merge_learner as ML

    batches = []

    def kernel(ids, offsets, weights, fl, fr, n, max_len, stop, cap0, pool0, hot, threads, par_min, left, right, count):
        left[:3], right[:3] = [97, 98, 97], [98, 99, 99]
        left[0] = 120  # wrong, for now
        stop[1] = 3
        deadline = time.monotonic() + 10
        while not batches and time.monotonic() < deadline:  # the waiting thread reads merges 0 and 1
            time.sleep(0.005)
        left[0] = 97
        return 3

    monkeypatch.setattr(ML, "_learn_kernel", kernel)
    r = learn_merges(b"abcabc", [0, 6], [1], 3, on_merges=lambda first, m: batches.append((first, list(m))))
    assert r.merges == [(b"a", b"b"), (b"b", b"c"), (b"a", b"c")]
    assert batches[0] == (0, [(b"x", b"b"), (b"b", b"c")])
    assert batches[-1] == (0, r.merges)
