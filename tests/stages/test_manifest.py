import json
import subprocess
import sys

import pyarrow as pa
import pytest

from stages import manifest as mf


def test_atomic_path_leaves_target_untouched_on_error(tmp_path):
    p = tmp_path / "out.json"
    mf.write_json(p, {"v": 1})
    with pytest.raises(RuntimeError):
        with mf.atomic_path(p) as tmp:
            tmp.write_text("half-written")
            raise RuntimeError("crash")
    assert json.loads(p.read_text()) == {"v": 1}
    assert [q.name for q in tmp_path.iterdir()] == ["out.json"]


def test_write_table_is_deterministic_and_hashed(tmp_path):
    t = pa.table({"piece": pa.array([b"a", b"bc"], pa.large_binary()), "count": [1, 2]})
    a = mf.write_table(tmp_path / "a.arrow", t, metadata={"k": "v"})
    b = mf.write_table(tmp_path / "b.arrow", t, metadata={"k": "v"})
    assert a == b == mf.hash_file(tmp_path / "a.arrow")
    back = mf.read_table(tmp_path / "a.arrow")
    assert back.equals(t) and back.schema.metadata[b"k"] == b"v"


def test_manifest_round_trip_and_up_to_date(tmp_path):
    info = mf.write_json(tmp_path / "x.json", {"a": 1})
    m = mf.Manifest("s", "c1", "i1", outputs={"x.json": info}, counts={"n": 1}).write(tmp_path)
    back = mf.read_manifest(tmp_path)
    assert back.to_json() == m.to_json()
    assert mf.up_to_date(tmp_path, "s", "c1", "i1").up_to_date
    assert mf.up_to_date(tmp_path, "s", "c2", "i1") is None
    assert mf.up_to_date(tmp_path, "s", "c1", "i2") is None
    assert mf.up_to_date(tmp_path, "other", "c1", "i1") is None
    (tmp_path / "x.json").write_text("truncated")  # size changed
    assert mf.up_to_date(tmp_path, "s", "c1", "i1") is None


def test_require_names_the_command(tmp_path):
    from dwstok.errors import InputError

    with pytest.raises(InputError, match=r"run `dwstok count` first"):
        mf.require(tmp_path / "count", "count")


def test_shard_markers(tmp_path):
    info = mf.write_bytes(tmp_path / "part-00003.arrow", b"data")
    assert mf.shard_done(tmp_path, 3, "k") is None
    mf.mark_shard_done(tmp_path, 3, "k", {"part-00003.arrow": info}, {"docs": 2})
    assert mf.shard_done(tmp_path, 3, "k").stats == {"docs": 2}
    assert mf.shard_done(tmp_path, 3, "other-key") is None
    (tmp_path / "part-00003.arrow").write_bytes(b"dat")
    assert mf.shard_done(tmp_path, 3, "k") is None
    mf.write_bytes(tmp_path / "part-00007.arrow", b"x")
    # a temporary file of a writer that is gone: a process that has exited, not a fixed
    # pid (pid 99 was alive at times, and its file was then rightly kept)
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    (tmp_path / f".part-00001.arrow.tmp-{gone.pid}").write_bytes(b"x")
    mf.remove_stale_parts(tmp_path, keep=5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-00003.arrow", "part-00003.json"]


def test_files_reach_the_disk_before_their_names_and_outputs_before_the_manifest(tmp_path, monkeypatch):
    """Power-loss order: fsync a file, then rename it; fsync the folder, then rename the
    manifest that declares the result complete."""
    import os as _os

    from stages import manifest as mf

    log = []
    real_fsync, real_replace = _os.fsync, _os.replace

    def fsync(fd):
        log.append(("fsync", _os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst):
        log.append(("replace", str(dst)))
        return real_replace(src, dst)

    st = mf.Staging(tmp_path, "demo", "d" * 64)
    monkeypatch.setattr(_os, "fsync", fsync)
    monkeypatch.setattr(_os, "replace", replace)
    info = mf.write_json(st.dir / "x.json", {"a": 1})
    st.commit(mf.Manifest("demo", "d" * 64, "i", outputs={"x.json": info}))
    names = [(op, _os.path.basename(p)) for op, p in log]
    # x.json: its bytes, then its name in staging, then the staging folder
    first = names.index(("replace", "x.json"))
    assert names[first - 1][0] == "fsync" and names[first - 1][1].startswith(".x.json.tmp-")
    # the folder holding the renamed outputs is synced before the manifest moves in
    last = len(names) - 1 - names[::-1].index(("replace", mf.MANIFEST))
    assert ("fsync", tmp_path.name) in names[:last]
    assert (tmp_path / "x.json").is_file() and (tmp_path / mf.MANIFEST).is_file()


def test_scratch_files_are_renamed_into_place_without_waiting_for_the_disk(tmp_path, monkeypatch):
    """``atomic_path(durable=False)`` (count's reduced partitions, which a resumed run
    makes again): no fsync, but still all or nothing under the final name."""
    import os as _os

    from stages import manifest as mf

    synced = []
    monkeypatch.setattr(_os, "fsync", lambda fd: synced.append(fd))
    with mf.atomic_path(tmp_path / "reduced.arrow", durable=False) as tmp:
        tmp.write_bytes(b"rows")
    assert (tmp_path / "reduced.arrow").read_bytes() == b"rows" and synced == []
    with pytest.raises(OSError), mf.atomic_path(tmp_path / "reduced.arrow", durable=False) as tmp:
        tmp.write_bytes(b"half")
        raise OSError("disk full")
    assert [p.name for p in tmp_path.iterdir()] == ["reduced.arrow"]
    assert (tmp_path / "reduced.arrow").read_bytes() == b"rows"
    with mf.atomic_path(tmp_path / "kept.json") as tmp:
        tmp.write_bytes(b"{}")
    assert len(synced) == 2  # the file, then its folder
