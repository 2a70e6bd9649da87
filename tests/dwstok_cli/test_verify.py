"""`dwstok verify`, and the CLI side of issue 12: a build is what its manifest says, or
it fails with a typed exit code (5 another config, 4 a corrupt or crafted file, 3 a
model short of vocab_size)."""

import json

import pytest

from dwstok_cli.main import cli

STAGES = ["pretokenize", "count", "train", "export", "encode-shards"]

pytest.importorskip("dwstok.training")


@pytest.fixture
def built(runner, tmp_path, small_config, small_parquet):
    work = tmp_path / "w"
    args = ["build", str(small_config), "--corpus", str(small_parquet), "--workdir", str(work), "--workers", "1"]
    r = runner.invoke(cli, args)
    assert r.exit_code == 0, r.output
    return work


def verify(runner, work, *extra):
    return runner.invoke(cli, ["verify", str(work), *extra])


def test_verify_a_good_build(runner, built):
    r = verify(runner, built)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == STAGES
    assert all(ln.split()[1] == "ok" and "version t1, pattern o200k" in ln for ln in lines)
    js = json.loads(verify(runner, built, "--json").stdout)
    assert [(c["stage"], c["status"]) for c in js] == [(s, "ok") for s in STAGES]


def test_verify_names_a_corrupt_file(runner, built):
    p = built / "encode-shards" / "part-00002.arrow"
    b = bytearray(p.read_bytes())
    b[len(b) // 2] ^= 0x40
    p.write_bytes(bytes(b))
    r = verify(runner, built)
    assert r.exit_code == 4
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("encode-shards")][0]
    assert "FAILED" in line and f"{p} does not match the size and sha256" in line
    assert r.stderr.splitlines()[-1] == f"Error: {built}: encode-shards failed verification (see above)"


def test_verify_finds_a_broken_chain(runner, tmp_path, built, small_parquet):
    """pretokenize rebuilt with another pattern, count and later not: they are stale."""
    cfg = tmp_path / "other.yaml"
    cfg.write_text('version: "t1"\npattern: o200k-rdigits\nvocab_size: 400\ncorpus:\n  shard_bytes: 1\n')
    r = runner.invoke(cli, ["pretokenize", str(cfg), "--corpus", str(small_parquet), "--workdir", str(built)])
    assert r.exit_code == 0, r.output
    r = verify(runner, built)
    assert r.exit_code == 4
    status = {ln.split()[0]: ln for ln in r.stdout.splitlines()}
    assert status["pretokenize"].split()[1] == "ok"
    assert "built from another 'pretokenize' result" in status["count"]
    # the rest still follows from count
    assert all(status[s].split()[1] == "ok" for s in ("train", "export", "encode-shards"))


def test_verify_an_empty_workdir(runner, tmp_path):
    (tmp_path / "w").mkdir()
    r = verify(runner, tmp_path / "w")
    assert r.exit_code == 3 and "holds no finished stage" in r.stderr
    assert [ln.split()[1:3] for ln in r.stdout.splitlines()] == [["not", "built"]] * 5


def test_count_and_train_with_another_config_exit_5_naming_both(runner, tmp_path, built):
    cfg = tmp_path / "other.yaml"
    cfg.write_text('version: "t3"\npattern: o200k-rdigits\nvocab_size: 400\ncorpus:\n  shard_bytes: 1\n')
    for stage in ("count", "train"):
        r = runner.invoke(cli, [stage, str(cfg), "--workdir", str(built)])
        assert r.exit_code == 5, r.output
        line = r.stderr.splitlines()[-1]
        assert line.startswith(f"Error: {built}/") and "pattern o200k (" in line and "pattern o200k-rdigits (" in line
        assert "small.yaml" in line and "other.yaml" in line


def test_build_rebuilds_a_corrupted_model(runner, built, small_config, small_parquet):
    model = built / "train" / "model.json"
    good = model.read_bytes()
    b = bytearray(good)
    b[good.index(b'"vocab"') + 30] ^= 0x01
    model.write_bytes(bytes(b))
    r = runner.invoke(cli, ["export", str(small_config), "--workdir", str(built)])
    assert r.exit_code == 4 and f"Error: {model} does not match" in r.stderr
    args = ["build", str(small_config), "--corpus", str(small_parquet), "--workdir", str(built), "--json"]
    r = runner.invoke(cli, args)
    assert r.exit_code == 0, r.output
    assert [s["status"] for s in json.loads(r.stdout)["stages"]] == ["up to date", "up to date", "done", "up to date", "up to date"]
    assert model.read_bytes() == good


def test_crafted_manifest_stops_the_build_with_exit_4(runner, tmp_path, built, small_config, small_parquet):
    canary = tmp_path / "canary.txt"
    canary.write_text("alive")
    p = built / "export" / "_manifest.json"
    d = json.loads(p.read_text())
    d["outputs"]["../../canary.txt"] = {"sha256": "0" * 64, "bytes": 5}
    d["config_hash"] = "0" * 64
    p.write_text(json.dumps(d))
    args = ["build", str(small_config), "--corpus", str(small_parquet), "--workdir", str(built)]
    r = runner.invoke(cli, args)
    assert r.exit_code == 4
    assert r.stderr.splitlines()[-1].startswith(f"Error: {p} names '../../canary.txt', a path outside")
    assert canary.read_text() == "alive"


def test_undersized_model_exit_3_then_allowed_and_reported(runner, tmp_path, small_parquet):
    cfg = tmp_path / "big.yaml"
    cfg.write_text('version: "t1"\npattern: o200k\nvocab_size: 9000\ncorpus:\n  shard_bytes: 1\n')
    work = tmp_path / "w"
    args = ["build", str(cfg), "--corpus", str(small_parquet), "--workdir", str(work)]
    r = runner.invoke(cli, args)
    assert r.exit_code == 3
    line = r.stderr.splitlines()[-1]
    assert "the corpus ran out of pairs to merge: the model reached" in line and "allow_smaller: true" in line
    reached = int(line.split("reached ")[1].split(" tokens")[0].replace(",", ""))
    cfg.write_text(cfg.read_text() + "train:\n  allow_smaller: true\n")
    r = runner.invoke(cli, args)
    assert r.exit_code == 0, r.output
    for target in ("train", "train/model.json"):
        info = json.loads(runner.invoke(cli, ["info", str(work / target), "--json"]).stdout)
        assert info.get("n_vocab", info.get("counts", {}).get("vocab_size")) == reached
        assert info["vocab_size_requested"] == 9000
    assert json.loads((work / "export" / "tiktoken.json").read_text())["n_vocab"] == reached
