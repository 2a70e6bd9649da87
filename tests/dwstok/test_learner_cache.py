"""The merge learner loaded from Numba's disk cache, in the cache states that had it crash.

A signature of ``_learn_kernel`` compiled in a process that had loaded its parallel
callees (``_rewrite_threads``, ``_pairs_threads``) from the cache was cached without
the start-up of Numba's threading layer, and the next process that loaded it jumped to
address 0 on its first call (Numba's issue 8578). A read-only ``offsets`` array was one
way to get such a signature: it compiled a second one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

LEARN = """
import sys
import numpy as np
import dwstok.merge_learner as ml
if sys.argv[1] == "unfixed":
    ml._start_threading_layer = lambda: None
offsets = np.array([0, 11])
offsets.flags.writeable = sys.argv[2] == "writable"
r = ml.learn_merges(np.frombuffer(b"aaabdaaabac", np.uint8), offsets, np.array([1]), 3)
print(r.merges == [(b"a", b"a"), (b"aa", b"a"), (b"aaa", b"b")], len(ml._learn_kernel.signatures))
"""


def learn(cache: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT), "DWSTOK_COMPILE_NOTICE": "0"}
    return subprocess.run([sys.executable, "-c", LEARN, *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)


def test_a_learner_compiled_next_to_cached_callees_loads_and_runs(tmp_path):
    cache = tmp_path / "cache"
    assert learn(cache, "fixed", "writable").stdout.split() == ["True", "1"]  # compiles it all
    for f in cache.rglob("merge_learner._learn_kernel-*"):
        f.unlink()  # the learner alone compiles again, its callees load
    assert learn(cache, "fixed", "writable").stdout.split() == ["True", "1"]
    # loaded from the cache: without the start-up the call crashed; with it, it runs
    assert learn(cache, "unfixed", "writable").returncode == -11
    assert learn(cache, "fixed", "writable").stdout.split() == ["True", "1"]
    # a read-only offsets array is copied: the same signature, nothing compiled
    assert learn(cache, "fixed", "read-only").stdout.split() == ["True", "1"]
    assert len(list(cache.rglob("merge_learner._learn_kernel-*.nbc"))) == 1


def test_read_only_arrays_give_the_learner_no_second_signature():
    import dwstok.merge_learner as ml

    data = np.frombuffer(b"aaabdaaabac", np.uint8)
    before = set(ml._learn_kernel.signatures)
    for writable in (True, False):
        offsets, weights = np.array([0, 11]), np.array([1])
        offsets.flags.writeable = weights.flags.writeable = writable
        assert ml.learn_merges(data, offsets, weights, 3).merges == [(b"a", b"a"), (b"aa", b"a"), (b"aaa", b"b")]
    assert len(set(ml._learn_kernel.signatures) - before) <= 1


ONE_EACH = """
import numpy as np
from numba.core.registry import CPUDispatcher
import dwstok.merge_learner as ml
from dwstok.warm import run_learner
data = np.frombuffer(b"aaabdaaabac" * 3, np.uint8)
for threads in (1, 2):  # both paths: the one-thread loops and the prange ones
    run_learner(threads)
    r = ml.learn_merges(data, np.array([0, 11, 22, 33]), np.array([1, 2, 3]), 3, threads=threads,
                        forced=[(b"b", b"a")])
many = sorted(f"{name}:{len(d.signatures)}" for name, d in vars(ml).items()
              if isinstance(d, CPUDispatcher) and name != "_grow" and len(d.signatures) != 1)
print(r.merges[0] == (b"b", b"a"), *many, len(ml._grow.signatures))
"""


def test_each_learner_kernel_compiles_once(tmp_path):
    # Every signature is a compile of seconds on a cold cache, and the build's train stage
    # waits for the learner's. An int32 argument where the others pass int64, or a literal
    # True and False, compiled a helper twice. _grow compiles once per dtype it grows.
    # (An empty cache: a learner loaded from the cache brings none of its callees.)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT), "DWSTOK_COMPILE_NOTICE": "0"}
    out = subprocess.run([sys.executable, "-c", ONE_EACH], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert out.stdout.split() == ["True", "3"], out.stderr
