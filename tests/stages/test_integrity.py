"""A build is what its manifest says, or it fails (issue 12, items 1, 2, 5, 8, 13):
upstream results are checked for the config that shaped them and for their sha256,
a model short of vocab_size is an error unless allowed, paths read from manifests and
markers stay in their folder, and leftovers of abandoned runs go, live runs' stay."""

import json
import os
import socket
import subprocess
import sys

import pytest

from dwstok.errors import InputError, ModelFileError, PatternMismatchError
from stages import Inputs, count, encode_shards, export, pretokenize, train
from stages import manifest as mf
from stages.executors import LocalExecutor

from .conftest import config, docs, write_parquet

pytest.importorskip("dwstok.training")

ALL = (pretokenize, count, train, export, encode_shards)


def run(cfg, corpus, work, stages=ALL):
    inp = Inputs(corpus=[str(corpus)], workdir=work)
    ex = LocalExecutor(1)
    return [st.run(cfg, inp, work / st.STAGE, ex) for st in stages]


@pytest.fixture
def corpus(tmp_path):
    return write_parquet(tmp_path / "c.parquet", docs(2), row_group_size=4)


def flip_byte(path, at=None):
    """Same size, one byte changed (what size checks cannot see)."""
    b = bytearray(path.read_bytes())
    i = len(b) // 2 if at is None else at
    b[i] ^= 0x01
    path.write_bytes(bytes(b))


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# -- item 1: upstream results must come from this config ----------------------------------
def rdigits(**over):
    return config(version="t3", pattern="o200k-rdigits", **over)


def test_count_and_train_refuse_pieces_split_with_another_pattern(tmp_path, corpus):
    work = tmp_path / "w"
    run(rdigits(), corpus, work, (pretokenize, count, train))
    before = {s: sorted(p.name for p in (work / s).iterdir()) for s in ("count", "train")}
    other = config(version="t1", pattern="o200k")
    for stage in (count, train):
        with pytest.raises(PatternMismatchError) as e:
            run(other, corpus, work, (stage,))
        msg = str(e.value)
        # both sides named: what the upstream was built with, and what this run asks for
        assert "version t3, pattern o200k-rdigits" in msg and "version t1, pattern o200k" in msg
        assert "differ in pattern" in msg and f"`dwstok {stage.UPSTREAM}`" in msg
    assert {s: sorted(p.name for p in (work / s).iterdir()) for s in ("count", "train")} == before


def test_train_refuses_counts_read_with_other_corpus_options(tmp_path, corpus):
    work = tmp_path / "w"
    run(config(), corpus, work, (pretokenize, count))
    with pytest.raises(PatternMismatchError, match="differ in corpus"):
        run(config(corpus={"on_invalid": "skip"}), corpus, work, (train,))


@pytest.mark.parametrize("stage", [export, encode_shards])
@pytest.mark.parametrize(
    "over,section",
    [({"balance": {"alpha": 0.5}}, "balance"), ({"vocab_size": 288 + 50}, "vocab_size"), ({"version": "t2"}, "version")],
)
def test_model_consumers_refuse_a_model_trained_with_another_config(tmp_path, corpus, stage, over, section):
    work = tmp_path / "w"
    run(config(), corpus, work, (pretokenize, count, train))
    with pytest.raises(PatternMismatchError, match=f"differ in {section}"):
        run(config(**over), corpus, work, (stage,))
    assert not (work / stage.STAGE / mf.MANIFEST).exists()


def test_model_consumers_accept_other_corpus_options(tmp_path, corpus):
    """Encoding another corpus, read with other options, with the trained model is fine."""
    work = tmp_path / "w"
    run(config(), corpus, work, (pretokenize, count, train))
    (m,) = run(config(corpus={"on_invalid": "skip"}), corpus, work, (encode_shards,))
    assert m.counts["docs"] > 0


def test_manifests_record_what_built_them(tmp_path, corpus):
    work = tmp_path / "w"
    ms = run(rdigits(), corpus, work)
    want = {
        "pretokenize": {"pattern", "corpus"},
        "count": {"pattern", "corpus"},
        "train": {"pattern", "corpus", "version", "vocab_size", "special_tokens", "han", "balance"},
    }
    for m in ms:
        bw = mf.read_manifest(work / m.stage).built_with
        assert bw["version"] == "t3" and bw["pattern_name"] == "o200k-rdigits"
        assert want.get(m.stage, want["train"]) <= set(bw["sections"])
        assert bw["sections"]["pattern"] == rdigits().hash_of("pattern")


# -- item 2: recorded sha256s are verified where an artifact is consumed ------------------
def test_same_size_corruption_is_rebuilt_by_its_stage_and_refused_downstream(tmp_path, corpus):
    work = tmp_path / "w"
    cfg = config()
    run(cfg, corpus, work, (pretokenize, count, train))
    clean = {p.name: p.read_bytes() for p in (work / "pretokenize").iterdir() if p.is_file()}
    part = work / "pretokenize" / "part-00001.arrow"
    flip_byte(part)
    # Consumed by count: an exit-4 error naming the file, before anything is written.
    with pytest.raises(ModelFileError, match=r"part-00001\.arrow does not match the size and sha256"):
        run(cfg, corpus, work, (count,))
    # Its own stage finds it not up to date and rebuilds just that shard.
    (m,) = run(cfg, corpus, work, (pretokenize,))
    assert not m.up_to_date and m.counts["resumed_shards"] == m.counts["shards"] - 1
    assert {p.name: p.read_bytes() for p in (work / "pretokenize").iterdir() if p.is_file()}.keys() == clean.keys()
    assert part.read_bytes() == clean["part-00001.arrow"]
    assert all(m.up_to_date for m in run(cfg, corpus, work, (count, train)))


def test_corrupted_model_is_rebuilt(tmp_path, corpus):
    work = tmp_path / "w"
    cfg = config()
    run(cfg, corpus, work)
    model = work / "train" / "model.json"
    good = model.read_bytes()
    flip_byte(model, at=good.index(b'"vocab"') + 40)
    with pytest.raises(ModelFileError, match=r"model\.json does not match"):
        run(cfg, corpus, work, (export,))
    ms = run(cfg, corpus, work)
    assert [m.up_to_date for m in ms] == [True, True, False, True, True]
    assert model.read_bytes() == good


def test_same_size_corruption_of_a_token_shard_is_rebuilt(tmp_path, corpus):
    """A flipped id in an encode-shards part: the stage is no longer up to date."""
    work = tmp_path / "w"
    cfg = config()
    run(cfg, corpus, work)
    part = work / "encode-shards" / "part-00000.arrow"
    good = part.read_bytes()
    flip_byte(part, at=len(good) // 3)
    (m,) = run(cfg, corpus, work, (encode_shards,))
    assert not m.up_to_date and m.counts["resumed_shards"] == m.counts["shards"] - 1
    assert part.read_bytes() == good


def test_shard_marker_checks_the_hash(tmp_path):
    info = mf.write_bytes(tmp_path / "part-00003.arrow", b"data")
    mf.mark_shard_done(tmp_path, 3, "k", {"part-00003.arrow": info}, {"docs": 2})
    assert mf.shard_done(tmp_path, 3, "k") is not None
    (tmp_path / "part-00003.arrow").write_bytes(b"dbta")  # same size
    assert mf.shard_done(tmp_path, 3, "k") is None


def test_up_to_date_rehashes_a_file_that_changed_since_it_was_verified(tmp_path):
    info = mf.write_json(tmp_path / "x.json", {"a": 1})
    mf.Manifest("s", "c", "i", outputs={"x.json": info}).write(tmp_path)
    assert mf.up_to_date(tmp_path, "s", "c", "i")
    flip_byte(tmp_path / "x.json")
    assert mf.up_to_date(tmp_path, "s", "c", "i") is None


# -- item 5: a model short of vocab_size ---------------------------------------------------
def test_undersized_model_is_an_error_unless_allowed(tmp_path, corpus):
    work = tmp_path / "w"
    big = config(vocab_size=288 + 5000)
    with pytest.raises(InputError) as e:
        run(big, corpus, work, (pretokenize, count, train))
    msg = str(e.value)
    assert "ran out of pairs" in msg and "vocab_size 5,288" in msg and "allow_smaller: true" in msg
    reached = int(msg.split("reached ")[1].split(" tokens")[0].replace(",", ""))
    assert 288 < reached < 5288
    assert not (work / "train" / mf.MANIFEST).exists()
    (m,) = run(config(vocab_size=288 + 5000, train={"allow_smaller": True}), corpus, work, (train,))
    assert m.counts["vocab_size"] == reached and m.counts["stopped_early"]
    assert m.info["vocab_size_requested"] == 5288
    from dwstok.tokenizer import Tokenizer

    assert Tokenizer.load(work / "train" / "model.json").n_vocab == reached
    # allow_smaller does not change a full-size model's bytes
    a = run(config(), corpus, tmp_path / "a", (pretokenize, count, train))[-1]
    b = run(config(train={"allow_smaller": True}), corpus, tmp_path / "b", (pretokenize, count, train))[-1]
    assert not a.counts["stopped_early"] and a.outputs == b.outputs


# -- item 8: paths from manifests and markers stay in their folder ------------------------
def test_crafted_manifest_cannot_delete_outside_the_workdir(tmp_path, corpus):
    work = tmp_path / "w"
    cfg = config()
    run(cfg, corpus, work, (pretokenize, count))
    canary = tmp_path / "canary.txt"
    canary.write_text("alive")
    p = work / "count" / mf.MANIFEST
    d = json.loads(p.read_text())
    d["outputs"]["../../canary.txt"] = {"sha256": "0" * 64, "bytes": 5}
    d["config_hash"] = "changed"  # so the next run rebuilds count and swaps it in
    p.write_text(json.dumps(d))
    with pytest.raises(ModelFileError, match=r"_manifest\.json names '\.\./\.\./canary\.txt', a path outside"):
        run(cfg, corpus, work, (count,))
    with pytest.raises(ModelFileError, match="a path outside"):
        run(cfg, corpus, work, (train,))
    assert canary.read_text() == "alive"


@pytest.mark.parametrize("name", ["/etc/hostname", "sub/../../x", "", "a\\..\\b"])
def test_unsafe_names_are_refused(tmp_path, name):
    with pytest.raises(ModelFileError, match="a path outside"):
        mf.check_names(tmp_path, [name], "m.json")


def test_symlink_out_of_the_folder_is_refused(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x").write_text("x")
    d = tmp_path / "stage"
    d.mkdir()
    (d / "link").symlink_to(tmp_path / "outside")
    mf.Manifest("s", "c", "i", outputs={"link/x": mf.FileInfo("0" * 64, 1)}).write(d)
    with pytest.raises(ModelFileError, match="'link/x', a path outside"):
        mf.read_manifest(d)
    (d / "sub").mkdir()
    (d / "sub" / "y").write_text("y")
    (d / "alias").symlink_to(d / "sub")
    mf.check_names(d, ["alias/y", "sub/y", "not-there"], "ok")  # links inside are fine
    (d / "dangling").symlink_to(tmp_path / "outside" / "nothing-yet")
    with pytest.raises(ModelFileError, match="'dangling/x', a path outside"):
        mf.check_names(d, ["dangling/x"], "m.json")


def test_crafted_shard_marker_is_refused(tmp_path):
    (tmp_path / "secret").write_bytes(b"data")
    d = tmp_path / "stage"
    d.mkdir()
    mf.mark_shard_done(d, 0, "k", {"../secret": mf.FileInfo(mf.hash_file(tmp_path / "secret").sha256, 4)}, {})
    with pytest.raises(ModelFileError, match=r"part-00000\.json names '\.\./secret'"):
        mf.shard_done(d, 0, "k")


# -- item 13: permissions, leftovers of abandoned runs -------------------------------------
def test_model_file_gets_the_umask_permissions(tmp_path, corpus):
    old = os.umask(0o022)
    try:
        run(config(), corpus, tmp_path / "w", (pretokenize, count, train))
    finally:
        os.umask(old)
    for p in (tmp_path / "w" / "train").iterdir():
        assert p.stat().st_mode & 0o777 == 0o644, p.name


def test_leftovers_of_dead_runs_go_when_the_stage_completes_live_ones_stay(tmp_path, corpus):
    work = tmp_path / "w"
    run(config(), corpus, work, (pretokenize, count))
    out = work / "count"
    dead, live = dead_pid(), os.getppid()
    stale_dir = out / f"{mf.STAGING_PREFIX}{'d' * 16}"
    live_dir = out / f"{mf.STAGING_PREFIX}{'e' * 16}"
    for d, pid in ((stale_dir, dead), (live_dir, live)):
        d.mkdir()
        (d / "pieces.arrow").write_bytes(b"half")
        mf.write_json(d / mf.OWNER, {"pid": pid, "host": socket.gethostname()})
    (out / f".stats.json.tmp-{dead}").write_bytes(b"x")
    (out / f".stats.json.tmp-{live}").write_bytes(b"x")
    # A run that completes (here: a new result for another pattern) cleans up.
    run(config(pattern="o200k-rdigits"), corpus, work, (pretokenize, count))
    names = {p.name for p in out.iterdir()}
    assert stale_dir.name not in names and f".stats.json.tmp-{dead}" not in names
    assert live_dir.name in names and f".stats.json.tmp-{live}" in names


def test_leftover_staging_of_an_up_to_date_config_goes(tmp_path, corpus):
    work = tmp_path / "w"
    cfg = config()
    run(cfg, corpus, work, (pretokenize,))
    out = work / "pretokenize"
    left = mf.staging_dir(out, cfg.hash_of(*pretokenize.CONFIG_KEYS))
    left.mkdir()
    (left / "part-00000.arrow").write_bytes(b"torn")
    (out / f".part-00000.arrow.tmp-{dead_pid()}").write_bytes(b"x")
    (m,) = run(cfg, corpus, work, (pretokenize,))
    assert m.up_to_date
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]
