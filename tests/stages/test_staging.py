"""Staged commits: a failed or crashed run never damages the previous result, and a
re-run after a crash resumes to the same bytes as a clean run."""

import hashlib
import os
import pathlib

import pytest

from dwstok.errors import InputError
from stages import Inputs, count, pretokenize, train
from stages import manifest as mf
from stages.executors import LocalExecutor

from .conftest import config, docs, write_jsonl, write_parquet


def snapshot(d: pathlib.Path) -> dict[str, bytes]:
    """Every regular file directly in ``d`` (staging folders are not part of a result)."""
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def check_whole(d: pathlib.Path) -> mf.Manifest | None:
    """If ``d`` has a manifest, every output it lists is there with its exact sha256."""
    m = mf.read_manifest(d)
    if m is not None:
        for name, info in m.outputs.items():
            assert hashlib.sha256((d / name).read_bytes()).hexdigest() == info.sha256, name
    return m


def same_result(a: pathlib.Path, b: pathlib.Path) -> None:
    """Byte-identical outputs; manifests equal but for timings and resume counts."""
    fa, fb = snapshot(a), snapshot(b)
    ma, mb = mf.Manifest.from_json(mf.read_json(a / mf.MANIFEST)), mf.Manifest.from_json(mf.read_json(b / mf.MANIFEST))
    assert fa.pop(mf.MANIFEST) and fb.pop(mf.MANIFEST)
    assert fa == fb
    assert (ma.outputs, ma.config_hash, ma.inputs_hash) == (mb.outputs, mb.config_hash, mb.inputs_hash)


class Boom(RuntimeError):
    pass


def fail_after(n: int):
    """A callable that does nothing n times, then raises Boom (a crash)."""
    calls = [0]

    def tick(*_a, **_k):
        calls[0] += 1
        if calls[0] > n:
            raise Boom(f"injected crash at call {calls[0]}")

    return tick


# -- the swap itself, crashed at every step ---------------------------------------------
def make_result(d: pathlib.Path, tag: str, names) -> mf.Manifest:
    st = mf.Staging(d, "s", hashlib.sha256(tag.encode()).hexdigest())
    outs = {n: mf.write_bytes(st.dir / n, f"{tag}:{n}".encode() * (1 + len(tag))) for n in names}
    return st, mf.Manifest("s", hashlib.sha256(tag.encode()).hexdigest(), "i", outputs=outs)


def test_swap_crashed_at_every_step_leaves_old_or_new(tmp_path, monkeypatch):
    old_names = ["part-00000.arrow", "part-00000.json", "part-00001.arrow", "part-00001.json", "stats.json"]
    new_names = ["part-00000.arrow", "part-00000.json", "stats.json", "extra.json"]
    real_replace, real_unlink = os.replace, pathlib.Path.unlink
    outcomes = set()
    for k in range(40):
        d = tmp_path / f"k{k}"
        st, m = make_result(d, "old", old_names)
        st.commit(m)
        old = snapshot(d)
        st, m = make_result(d, "new", new_names)
        tick = fail_after(k)

        def replace(a, b, tick=tick):
            tick()
            return real_replace(a, b)

        def unlink(self, missing_ok=False, tick=tick):
            tick()
            return real_unlink(self, missing_ok=missing_ok)

        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(pathlib.Path, "unlink", unlink)
        try:
            st.commit(m)
            crashed = False
        except Boom:
            crashed = True
        finally:
            monkeypatch.setattr(os, "replace", real_replace)
            monkeypatch.setattr(pathlib.Path, "unlink", real_unlink)
        # Whatever a reader finds with a manifest is whole ...
        check_whole(d)
        # ... and after recovery the folder is exactly the old result or the new one.
        mf.recover(d)
        got = check_whole(d)
        assert got is not None
        assert sorted(p.name for p in d.iterdir() if p.is_file()) == sorted([*got.outputs, mf.MANIFEST])
        if got.config_hash == m.config_hash:
            outcomes.add("new")
            assert not any(p.name.startswith(mf.STAGING_PREFIX) for p in d.iterdir())
        else:
            outcomes.add("old")
            assert snapshot(d) == old
        if not crashed:
            break
    assert outcomes == {"old", "new"}  # both sides of the commit point were hit


def test_staging_of_another_config_is_dropped_and_own_is_kept(tmp_path):
    a = mf.Staging(tmp_path, "s", "a" * 64)
    mf.write_bytes(a.dir / "part-00000.arrow", b"x")
    b = mf.Staging(tmp_path, "s", "b" * 64)
    assert not a.dir.exists() and b.dir.is_dir()
    mf.write_bytes(b.dir / "part-00000.arrow", b"y")
    b2 = mf.Staging(tmp_path, "s", "b" * 64)
    assert (b2.dir / "part-00000.arrow").read_bytes() == b"y"


# -- real stages --------------------------------------------------------------------------
def good_and_bad(tmp_path, n_good=40, n_bad=60):
    """A good JSONL file, and a second one whose last document has invalid UTF-8."""
    good = write_jsonl(tmp_path / "a.jsonl", docs(n_good // 10 + 1)[:n_good])
    bad = tmp_path / "b.jsonl"
    write_jsonl(bad, docs(n_bad // 10 + 1)[: n_bad - 1])
    with open(bad, "ab") as f:
        f.write(b'{"text": "broken \xff byte", "lang": "en"}\n')
    return good, bad


def run_stages(cfg, corpus, work, stages=(pretokenize, count, train), workers=1):
    inp = Inputs(corpus=[str(c) for c in corpus], workdir=work)
    ex = LocalExecutor(workers)
    return [mod.run(cfg, inp, work / mod.STAGE, ex) for mod in stages]


def test_failed_rerun_with_new_config_keeps_the_old_result(tmp_path):
    good, bad = good_and_bad(tmp_path)
    small = {"shard_bytes": 1, "split_bytes": 2000}
    old_cfg = config(corpus=small)
    work = tmp_path / "w"
    run_stages(old_cfg, [good], work)
    before = {s: snapshot(work / s) for s in ("pretokenize", "count", "train")}
    new_cfg = config(pattern="o200k-rdigits", corpus=small)
    with pytest.raises(InputError, match=r"b\.jsonl: invalid UTF-8 at byte offset \d+"):
        run_stages(new_cfg, [good, bad], work)
    for s in before:
        assert snapshot(work / s) == before[s], s
    # The old config is still up to date on the old corpus, stage by stage.
    assert all(m.up_to_date for m in run_stages(old_cfg, [good], work))
    # Some shards of the failed run were finished before the bad one: they stay staged.
    staged = [p for p in (work / "pretokenize").iterdir() if p.name.startswith(mf.STAGING_PREFIX)]
    assert len(staged) == 1 and any(q.suffix == ".json" for q in staged[0].iterdir())


@pytest.mark.parametrize(
    "stage,target",
    [(count, "write_pieces"), (train, "read_pieces_weighted")],
)
def test_reduce_stage_failure_keeps_the_old_result(tmp_path, monkeypatch, stage, target):
    good = write_jsonl(tmp_path / "a.jsonl", docs(2))
    work = tmp_path / "w"
    run_stages(config(), [good], work)
    before = snapshot(work / stage.STAGE)
    monkeypatch.setattr(stage, target, fail_after(0))
    new_cfg = config(pattern="o200k-rdigits") if stage is count else config(balance={"alpha": 0.5})
    with pytest.raises(Boom):
        run_stages(new_cfg, [good], work)
    assert snapshot(work / stage.STAGE) == before
    monkeypatch.undo()
    assert run_stages(config(), [good], work)[-1].up_to_date


def test_crash_mid_map_then_rerun_resumes_to_clean_bytes(tmp_path, monkeypatch):
    corpus = write_parquet(tmp_path / "c.parquet", docs(4), row_group_size=4)
    cfg = config()
    clean = tmp_path / "clean"
    (m_clean,) = run_stages(cfg, [corpus], clean, stages=(pretokenize,))
    n = m_clean.counts["shards"]
    assert n >= 6
    work = tmp_path / "w"
    monkeypatch.setattr(pretokenize._ShardCounts, "table", _crash_on_call(pretokenize._ShardCounts.table, 4))
    with pytest.raises(Boom):
        run_stages(cfg, [corpus], work, stages=(pretokenize,))
    assert mf.read_manifest(work / "pretokenize") is None  # nothing looks finished
    assert not any(p.name.startswith("part-") for p in (work / "pretokenize").iterdir())
    monkeypatch.undo()
    (m,) = run_stages(cfg, [corpus], work, stages=(pretokenize,))
    assert m.counts["resumed_shards"] == 3
    same_result(work / "pretokenize", clean / "pretokenize")


def test_crash_mid_commit_then_rerun_is_up_to_date_with_clean_bytes(tmp_path, monkeypatch):
    corpus = write_parquet(tmp_path / "c.parquet", docs(2), row_group_size=4)
    clean, work = tmp_path / "clean", tmp_path / "w"
    run_stages(config(), [corpus], clean, stages=(pretokenize,))
    run_stages(config(pattern="o200k-rdigits"), [corpus], work, stages=(pretokenize,))
    real_swap, real_replace = mf._swap, os.replace

    def swap_crashing_after_3_renames(out_dir, staging):
        tick = fail_after(3)
        with monkeypatch.context() as mp:
            mp.setattr(os, "replace", lambda a, b: (tick(), real_replace(a, b)))
            real_swap(out_dir, staging)

    monkeypatch.setattr(mf, "_swap", swap_crashing_after_3_renames)
    with pytest.raises(Boom):
        run_stages(config(), [corpus], work, stages=(pretokenize,))
    monkeypatch.undo()
    assert mf.read_manifest(work / "pretokenize") is None  # mid-swap: reads as unfinished
    (m,) = run_stages(config(), [corpus], work, stages=(pretokenize,))
    assert m.up_to_date  # the committed result was swapped in, not recomputed
    same_result(work / "pretokenize", clean / "pretokenize")


def test_adding_a_file_reuses_the_committed_shards(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", docs(1))
    b = write_jsonl(tmp_path / "b.jsonl", docs(2))
    work = tmp_path / "w"
    run_stages(config(), [a], work, stages=(pretokenize,))
    (m,) = run_stages(config(), [a, b], work, stages=(pretokenize,))
    assert (m.counts["shards"], m.counts["resumed_shards"]) == (2, 1)
    (clean,) = run_stages(config(), [a, b], tmp_path / "clean", stages=(pretokenize,))
    assert m.outputs == clean.outputs


def _crash_on_call(fn, n):
    """Wrap ``fn`` to raise Boom on its n-th call (1-based)."""
    calls = [0]

    def wrapped(*a, **k):
        calls[0] += 1
        if calls[0] == n:
            raise Boom(f"injected crash in call {n}")
        return fn(*a, **k)

    return wrapped
