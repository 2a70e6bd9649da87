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
