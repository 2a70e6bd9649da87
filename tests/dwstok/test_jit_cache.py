"""Numba's disk cache is emptied when any source a kernel may compile in changes."""

from dwstok._jit import drop_stale_cache


def test_cache_emptied_when_a_source_changes_and_kept_otherwise(tmp_path):
    pkg, other = tmp_path / "pkg", tmp_path / "other"
    (pkg / "__pycache__").mkdir(parents=True)
    other.mkdir()
    (pkg / "kernels.py").write_text("x = 1\n")
    (other / "scanner.py").write_text("y = 1\n")
    cached = [pkg / "__pycache__" / "kernels.f-10.py311.nbi", pkg / "__pycache__" / "kernels.f-10.py311.1.nbc"]
    pyc = pkg / "__pycache__" / "kernels.cpython-311.pyc"

    def fill():
        for f in [*cached, pyc]:
            f.write_bytes(b"x")

    fill()
    drop_stale_cache(pkg, [pkg, other])  # no stamp yet: emptied
    assert not any(f.exists() for f in cached) and pyc.exists()
    fill()
    drop_stale_cache(pkg, [pkg, other])  # nothing changed: kept
    assert all(f.exists() for f in cached)
    (other / "scanner.py").write_text("y = 22\n")  # a change in another folder
    drop_stale_cache(pkg, [pkg, other])
    assert not any(f.exists() for f in cached) and pyc.exists()


def test_unwritable_cache_is_left_alone(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "kernels.py").write_text("x = 1\n")
    (pkg / "__pycache__").write_text("not a folder")  # mkdir and writes fail
    drop_stale_cache(pkg, [pkg])  # no error


_LEAN = """
import sys
import numpy as np
import numba
import dwstok.merge_learner as ml
from dwstok.scanner import get_scanner
import pyarrow as pa
from stages import piece_counts
from stages.pretokenize import _ShardCounts, split_documents

ml._interruptible = lambda call, stop, on_progress=None, on_wait=None: call()  # in this thread
r = ml.learn_merges(np.frombuffer(b"aaabdaaabac", np.uint8), np.array([0, 11]), np.array([1]), 3)
offs, per_doc = split_documents(get_scanner("o200k"), np.frombuffer(b"hello world 123", np.uint8), np.array([0, 11, 15]))
han = _ShardCounts.count_han(pa.table({"piece": pa.array(["中文".encode()], pa.binary()), "count": pa.array([2], pa.int64())}))
piece_counts.load_kernels()
refreshed = "numba.np.arraymath" in sys.modules  # imported by Numba's refresh of its registries
ok = numba.njit(lambda x: x + 1)(1) == 2  # a compile afterwards refreshes as usual
print(r.merges == [(b"a", b"a"), (b"aa", b"a"), (b"aaa", b"b")], offs.tolist(), per_doc.tolist(), han == {"中": 2, "文": 2}, refreshed, ok)
"""


def test_cached_kernels_load_without_numba_refreshing_its_registries():
    # The first run compiles what the cache lacks; the second only loads: no refresh, same results.
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    runs = [subprocess.run([sys.executable, "-c", _LEAN], capture_output=True, text=True, env=env, cwd=root, timeout=600)
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    assert runs[1].stdout.split() == ["True", "[0,", "5,", "11,", "12,", "15]", "[2,", "2]", "True", "False", "True"]
