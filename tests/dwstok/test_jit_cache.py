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
