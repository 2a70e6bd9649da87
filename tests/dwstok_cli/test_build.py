"""`dwstok build`: all five stages, then all up to date; same bytes for 1 and 2 workers."""

import json

import pytest

from dwstok_cli.main import cli

STAGES = ["pretokenize", "count", "train", "export", "encode-shards"]

for _m in ("dwstok.training", "stages.export", "stages.encode_shards"):
    pytest.importorskip(_m)


def build(runner, cfg, corpus, work, workers):
    args = ["build", str(cfg), "--corpus", str(corpus), "--workdir", str(work), "--workers", str(workers), "--json"]
    r = runner.invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert (doc["schema"], doc["ok"], doc["exit_code"]) == ("dwstok-run/1", True, 0)
    return doc["stages"]


def test_build_all_stages(runner, tmp_path, small_config, small_parquet):
    a = build(runner, small_config, small_parquet, tmp_path / "a", 1)
    assert [s["stage"] for s in a] == STAGES and all(s["status"] == "done" for s in a)
    again = build(runner, small_config, small_parquet, tmp_path / "a", 1)
    assert all(s["status"] == "up to date" for s in again)
    b = build(runner, small_config, small_parquet, tmp_path / "b", 2)
    for sa, sb in zip(a, b):
        assert sa["outputs"] == sb["outputs"], sa["stage"]
    r = runner.invoke(cli, ["info", str(tmp_path / "a" / "train" / "model.json"), "--json"])
    info = json.loads(r.stdout)
    assert info["kind"] == "dwstok model" and info["version"] == "t1" and info["n_vocab"] == 400


def test_build_until_train(runner, tmp_path, small_config, small_parquet):
    """--until stops after that stage, with the same outputs as the stage commands."""
    args = ["--corpus", str(small_parquet), "--workdir", str(tmp_path / "a"), "--workers", "1", "--json"]
    r = runner.invoke(cli, ["build", str(small_config), "--until", "train", *args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    until = json.loads(r.stdout)["stages"]
    assert [s["stage"] for s in until] == STAGES[:3]
    assert not (tmp_path / "a" / "export").exists()
    args[3] = str(tmp_path / "b")
    for s, ref in zip(STAGES[:3], until):
        r = runner.invoke(cli, [s, str(small_config), *args], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["stages"][0]["outputs"] == ref["outputs"], s


def test_build_stage_names_match():
    from dwstok_cli.options import BUILD_STAGES
    from stages import STAGES as stages

    assert BUILD_STAGES == tuple(stages) == tuple(STAGES)
