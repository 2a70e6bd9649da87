"""The Numba trainer equals the brute-force trainer merge for merge."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dwstok.errors import ConfigError, InputError
from dwstok.merge_learner import learn_merges, pieces_to_arrays

from .brute_bpe import brute_bpe


def run_both(pieces, weights, n_merges, forced=(), threads=1):
    data, offsets = pieces_to_arrays(pieces)
    got = learn_merges(data, offsets, np.array(weights, np.int64), n_merges, forced=forced, threads=threads)
    want = brute_bpe(pieces, weights, n_merges, forced)
    assert got.merges == want.merges
    assert got.counts.tolist() == want.counts
    assert got.stopped_early == want.stopped_early
    return got


def _random_corpus(seed, n, alphabet, max_len):
    rng = random.Random(seed)
    pieces = sorted({bytes(rng.choice(alphabet) for _ in range(rng.randint(1, max_len))) for _ in range(n)})
    return pieces, [rng.randint(1, 50) for _ in pieces]


CORPORA = {
    # name: (pieces, weights, n_merges)
    "run_odd": ([b"aaaaaaa"], [1], 10),
    "runs_of_every_length": ([b"a" * n for n in range(1, 12)], [1] * 11, 20),
    "alternating": ([b"abababab"], [3], 10),
    "alternating_odd": ([b"abababa", b"babab"], [2, 5], 10),
    "golden": ([b"aaabdaaabac"], [1], 10),
    "all_ties": ([bytes([c, c + 1]) for c in range(97, 120, 2)], [1] * 12, 20),
    "ties_prefix_bytes": ([b"xay", b"xaby", b"xab", b"ay", b"aby"], [1, 1, 1, 1, 1], 12),
    "ties_same_left": ([b"za", b"zb", b"zc", b"az", b"bz"], [2, 2, 2, 2, 2], 8),
    "count_falls_to_zero": ([b"abc", b"bcd", b"cde", b"abcde"], [5, 4, 3, 1], 12),
    "new_pair_already_queued": ([b"abab", b"cc", b"abcc", b"ccab"], [4, 3, 2, 2], 10),
    "single_bytes": ([b"a", b"b", b"c"], [9, 9, 9], 5),
    "empty": ([], [], 5),
    "empty_piece": ([b"", b"ab"], [7, 1], 3),
    "zero_weights": ([b"ab", b"cd", b"cdcd"], [0, 1, 0], 5),
    "huge_weights": ([b"abc", b"bcd", b"cab"], [10**17, 10**17 + 1, 3 * 10**16], 6),
    "all_256_bytes": ([bytes(range(256)), bytes(range(255, -1, -1)), bytes(range(0, 256, 2))], [1, 2, 3], 300),
    "mixed_scripts": (
        [s.encode() for s in ["héllo", " wörld", "日本語", "日本", "Привет", " при", "🙂🙂", "كتاب", "नमस्ते"]],
        [5, 4, 3, 7, 2, 6, 1, 2, 2],
        40,
    ),
    "rare_language_wins": ([b" the", b" then", "漢字".encode(), "字".encode()], [10, 10, 1000, 900], 8),
    "spaces_and_newlines": ([b" " * 9, b"\n\n\n", b" \n", b"  x"], [3, 2, 5, 1], 12),
    "palindromes": ([b"abcba", b"abba", b"aabaa", b"baaab"], [1, 2, 3, 4], 12),
    "runs_next_to_merges": ([b"baaa", b"aaab", b"baaab", b"aaaa"], [3, 3, 2, 1], 10),
    "duplicate_pieces": ([b"ab", b"ab", b"abc"], [1, 2, 1], 4),
    "more_merges_than_possible": ([b"abcdef", b"fedcba"], [1, 1], 50),
    "medium_random_small_alphabet": (*_random_corpus(1, 300, b"ab", 24), 80),
    "medium_random": (*_random_corpus(2, 400, b"abcde ", 30), 120),
}


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_matches_brute_force(name):
    pieces, weights, n = CORPORA[name]
    run_both(pieces, weights, n)


FORCED = {
    "prefix_chain": ([b"abcabc", b"abd", b"xy"], [3, 2, 9], [(b"a", b"b"), (b"ab", b"c")], 6),
    "never_occurs": ([b"abab", b"cd"], [1, 2], [(b"q", b"z"), (b"qz", b"a")], 5),
    "forced_is_the_best_pair": ([b"aaaa", b"ab"], [5, 1], [(b"a", b"a")], 4),
    "han_like": (
        [s.encode() for s in ["的一是", "一的", "是是", "abc"]],
        [4, 3, 2, 9],
        [(b"\xe7", b"\x9a"), (b"\xe7\x9a", b"\x84"), (b"\xe4", b"\xb8"), (b"\xe4\xb8", b"\x80")],
        10,
    ),
    "all_forced": ([b"abc"], [1], [(b"a", b"b"), (b"ab", b"c")], 2),
}


@pytest.mark.parametrize("name", sorted(FORCED))
def test_forced_merges_match_brute_force(name):
    pieces, weights, forced, n = FORCED[name]
    got = run_both(pieces, weights, n, forced)
    assert got.merges[: len(forced)] == forced
    assert got.counts[: len(forced)].tolist() == [0] * len(forced)


@pytest.mark.parametrize("name", ["medium_random", "medium_random_small_alphabet", "all_256_bytes", "mixed_scripts", "runs_of_every_length"])
def test_growth_paths_match_brute_force(name, monkeypatch):
    # Room for one pair and one listing: every step grows the pair arrays and the
    # table, and fills the pool (compaction, purging stale listings, growth).
    import dwstok.merge_learner as ml

    monkeypatch.setattr(ml, "_CAP0", 1)
    monkeypatch.setattr(ml, "_POOL0", 1)
    pieces, weights, n = CORPORA[name]
    run_both(pieces, weights, n)


@pytest.fixture
def every_step_on_threads(monkeypatch):
    """Every merge rewrites its pieces on the threads asked for (up to 4, whatever the
    machine's CPUs), each thread from a room of one listing, so that the threads' rows
    grow and their new pairs are numbered across threads at every step."""
    import numba

    import dwstok.merge_learner as ml

    monkeypatch.setattr(ml, "_PAR_MIN", 1)
    monkeypatch.setattr(ml, "_POOL0", 1)
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", max(4, numba.config.NUMBA_NUM_THREADS))


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("name", sorted(CORPORA))
def test_threads_match_brute_force(name, threads, every_step_on_threads):
    pieces, weights, n = CORPORA[name]
    run_both(pieces, weights, n, threads=threads)


@pytest.mark.parametrize("name", sorted(FORCED))
def test_threads_with_forced_merges(name, every_step_on_threads):
    pieces, weights, forced, n = FORCED[name]
    assert run_both(pieces, weights, n, forced, threads=2).merges[: len(forced)] == forced


def test_threads_on_a_medium_corpus_give_the_same_merges_and_counts(every_step_on_threads):
    pieces, weights = _random_corpus(5, 3000, b"abcdefgh  ", 40)
    data, offsets = pieces_to_arrays(pieces)
    w = np.array(weights, np.int64)
    one = learn_merges(data, offsets, w, 600)
    for threads in (2, 4):
        got = learn_merges(data, offsets, w, 600, threads=threads)
        assert got.merges == one.merges and got.counts.tolist() == one.counts.tolist()


def test_one_learner_at_a_time_runs_on_threads():
    """Numba's workqueue layer aborts the process when two threads launch parallel
    kernels at once: a second learner, while one holds the claim, runs on one thread."""
    import dwstok.merge_learner as ml

    assert ml._parallel_claim(1) == 1
    claimed = ml._parallel_claim(2)
    try:
        assert claimed == min(2, ml.numba.config.NUMBA_NUM_THREADS)
        assert ml._parallel_claim(2) == 1  # the lock is held
        run_both(*CORPORA["medium_random"][:2], 30, threads=2)  # and still learns, on one thread
    finally:
        if claimed > 1:
            ml._PARALLEL.release()
    assert ml._parallel_claim(2) == claimed  # released after each learner
    if claimed > 1:
        ml._PARALLEL.release()


_TWO_AT_ONCE = """
import threading, numpy as np
import dwstok.merge_learner as ml
ml._PAR_MIN = 1
rng = np.random.default_rng(3)
pieces = [bytes(rng.choice(list(b"abcdef "), rng.integers(1, 30))) for _ in range(2000)]
data, offsets = ml.pieces_to_arrays(pieces)
w = rng.integers(1, 40, len(pieces))
want = ml.learn_merges(data, offsets, w, 300).merges
out = []
def run():
    for _ in range(5):
        out.append(ml.learn_merges(data, offsets, w, 300, threads=2).merges == want)
ts = [threading.Thread(target=run) for _ in range(2)]
[t.start() for t in ts]
[t.join() for t in ts]
print(sum(out), len(out))
"""


@pytest.mark.parametrize("layer", ["workqueue", "default"])
def test_two_learners_at_once_in_one_process(layer):
    """Under Numba's workqueue layer, two threads launching parallel kernels at once
    abort the process: two learners in two threads must not (and learn the same)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_THREADING_LAYER=layer)
    r = subprocess.run([sys.executable, "-c", _TWO_AT_ONCE], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["10", "10"]


def test_the_threads_are_capped(monkeypatch):
    import dwstok.merge_learner as ml

    monkeypatch.setattr(ml.numba.config, "NUMBA_NUM_THREADS", 64)
    claimed = ml._parallel_claim(64)
    ml._PARALLEL.release()
    assert claimed == ml._MAX_THREADS


def test_a_forked_child_of_a_parent_that_ran_on_threads_learns_on_one(monkeypatch):
    """GNU OpenMP cannot start threads in a child forked after its parent did."""
    import dwstok.merge_learner as ml

    monkeypatch.setattr(ml, "_parallel_used", True)
    monkeypatch.setattr(ml, "_forked_after_use", False)
    ml._after_fork_in_child()
    assert ml._forked_after_use and ml._parallel_claim(2) == 1
    run_both(*CORPORA["medium_random"][:2], 30, threads=2)


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2"])
def test_bad_thread_counts_are_refused(threads):
    with pytest.raises(ConfigError, match="threads"):
        learn_merges(b"abab", [0, 4], [1], 2, threads=threads)


@pytest.mark.parametrize("hot", [1, 3])
@pytest.mark.parametrize("name", ["medium_random", "medium_random_small_alphabet", "all_ties", "ties_same_left",
                                  "count_falls_to_zero", "new_pair_already_queued", "huge_weights", "mixed_scripts"])
def test_small_heap_matches_brute_force(name, hot, monkeypatch):
    # A heap of one or three pairs at a time: nearly every pick empties it and refills it
    # from the cold list, and most requeues and new pairs fall below its threshold.
    import dwstok.merge_learner as ml

    monkeypatch.setattr(ml, "_HOT", hot)
    pieces, weights, n = CORPORA[name]
    run_both(pieces, weights, n)


@pytest.mark.parametrize("name", sorted(FORCED))
def test_small_heap_with_forced_merges(name, monkeypatch):
    import dwstok.merge_learner as ml

    monkeypatch.setattr(ml, "_HOT", 1)
    pieces, weights, forced, n = FORCED[name]
    assert run_both(pieces, weights, n, forced).merges[: len(forced)] == forced


def test_small_heap_with_max_token_bytes(monkeypatch):
    # pairs too long are dropped at the pick, whether they came from the heap or the cold list
    import dwstok.merge_learner as ml

    pieces, weights, n = CORPORA["medium_random"]
    data, offsets = pieces_to_arrays(pieces)
    want = learn_merges(data, offsets, np.array(weights), n, max_token_bytes=3)
    monkeypatch.setattr(ml, "_HOT", 1)
    got = learn_merges(data, offsets, np.array(weights), n, max_token_bytes=3)
    assert got.merges == want.merges and got.counts.tolist() == want.counts.tolist()
    assert max(len(a + b) for a, b in got.merges) <= 3


def test_counts_past_2_to_the_32():
    # int64 counts: weights near 2**40 (a 100 GB corpus counts a piece up to ~2**35 times,
    # times a fixed-point language weight) sum past 2**32 without wrapping.
    pieces = [b"abab", b"abc", b"bcbc", b"ca"]
    weights = [2**40 + 3, 2**39 + 1, 3 * 2**38, 2**33 + 7]
    got = run_both(pieces, weights, 8)
    assert got.counts.max() > 2**32


def test_golden_counts():
    data, offsets = pieces_to_arrays([b"aaabdaaabac"])
    r = learn_merges(data, offsets, np.array([1]), 3)
    assert r.merges == [(b"a", b"a"), (b"aa", b"a"), (b"aaa", b"b")]
    assert r.counts.tolist() == [4, 2, 2]
    assert not r.stopped_early


def test_stops_early_and_says_so():
    data, offsets = pieces_to_arrays([b"abc"])
    r = learn_merges(data, offsets, np.array([1]), 10)
    assert len(r.merges) == 2 and r.stopped_early


def test_scaled_weights_give_the_same_merges():
    pieces, weights = _random_corpus(3, 200, b"abcd", 16)
    data, offsets = pieces_to_arrays(pieces)
    a = learn_merges(data, offsets, np.array(weights), 60)
    b = learn_merges(data, offsets, np.array(weights) * (1 << 20), 60)
    assert a.merges == b.merges
    assert (b.counts == a.counts * (1 << 20)).all()


def test_arrow_slices_with_nonzero_first_offset():
    data, offsets = pieces_to_arrays([b"zzzz", b"abab", b"abc"])
    r = learn_merges(data, offsets[1:], np.array([2, 1]), 3)
    assert r.merges == brute_bpe([b"abab", b"abc"], [2, 1], 3).merges


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(weights=np.array([-1])), InputError),
        (dict(weights=np.array([1.5])), InputError),
        (dict(weights=np.array([1, 2])), InputError),
        (dict(weights=np.array([2**62])), InputError),
        (dict(offsets=np.array([0, 99])), InputError),
        (dict(offsets=np.array([3, 1])), InputError),
        (dict(n_merges=-1), ConfigError),
        (dict(forced=[(b"a", b"b")] * 2), ConfigError),  # repeats the token b"ab"
        (dict(forced=[(b"ab", b"c")]), ConfigError),  # b"ab" is not a token yet
        (dict(forced=[(b"a", b"b")], n_merges=0), ConfigError),
    ],
)
def test_bad_arguments(kwargs, error):
    args = dict(data=np.frombuffer(b"abc", np.uint8), offsets=np.array([0, 3]), weights=np.array([1]), n_merges=3)
    args.update(kwargs)
    with pytest.raises(error):
        learn_merges(**args)


def test_overflowing_weights_are_refused():
    data, offsets = pieces_to_arrays([b"ab" * 8, b"abab"])
    with pytest.raises(InputError, match="overflow"):
        learn_merges(data, offsets, np.array([2**61, 2**61]), 3)


pieces_st = st.lists(st.binary(min_size=1, max_size=14).map(lambda b: bytes(x % 4 + 97 for x in b)), max_size=14)


@settings(max_examples=150, deadline=None)
@given(
    pieces=pieces_st,
    weights=st.lists(st.integers(0, 40), min_size=14, max_size=14),
    n=st.integers(0, 40),
)
def test_hypothesis_matches_brute_force(pieces, weights, n):
    run_both(pieces, weights[: len(pieces)], n)


@settings(max_examples=60, deadline=None)
@given(
    pieces=st.lists(st.binary(min_size=1, max_size=10), max_size=10),
    weights=st.lists(st.sampled_from([1, 2, 3, 10**12, 10**15]), min_size=10, max_size=10),
    n=st.integers(0, 30),
)
def test_hypothesis_any_bytes(pieces, weights, n):
    run_both(pieces, weights[: len(pieces)], n)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pieces=st.lists(st.binary(min_size=1, max_size=12), max_size=12),
    weights=st.lists(st.integers(0, 9), min_size=12, max_size=12),
    n=st.integers(0, 30),
    threads=st.integers(2, 4),
)
def test_hypothesis_threads_match_brute_force(pieces, weights, n, threads, every_step_on_threads):
    # (the fixture sets module constants only: the same for every example)
    run_both(pieces, weights[: len(pieces)], n, threads=threads)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(30))
def test_fuzz_medium_corpora(seed):
    rng = random.Random(seed)
    alphabet = rng.choice([b"ab", b"abc", b"a b", bytes(range(97, 105)), "日本語".encode()])
    pieces, weights = _random_corpus(seed, rng.randint(50, 600), alphabet, rng.randint(4, 40))
    run_both(pieces, weights, rng.randint(20, 200))
