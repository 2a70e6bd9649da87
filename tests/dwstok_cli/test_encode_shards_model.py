"""`dwstok encode-shards --model PATH --out DIR`: another corpus, an existing model."""

from __future__ import annotations

import json

import pytest

from dwstok_cli.main import cli
from tests.small_model import small_model

pytest.importorskip("dwstok.training")


def invoke(runner, *args):
    return runner.invoke(cli, [str(a) for a in args])


def test_encode_with_a_model_file_into_another_folder(runner, tmp_path, small_config, small_parquet):
    from dwstok.shards import ShardReader
    from tests.stages.conftest import docs

    tok = small_model(pattern="o200k", version="t1")
    model = tmp_path / "elsewhere" / "model.json"
    model.parent.mkdir()
    tok.save(model)
    out = tmp_path / "tokens"
    args = ["encode-shards", small_config, "--corpus", small_parquet, "--model", model, "--out", out, "--workers", 1]
    r = invoke(runner, *args, "--json")
    assert r.exit_code == 0, r.output
    [rec] = json.loads(r.stdout)["stages"]
    assert (rec["stage"], rec["status"], rec["out_dir"]) == ("encode-shards", "done", str(out))
    assert not (tmp_path / "work").exists()  # no workdir made or needed
    reader = ShardReader(out)
    texts = [t for t, _ in docs()]
    assert len(reader) == len(texts)
    assert [list(reader.doc(i)) for i in range(len(texts))] == [tok.encode(t) for t in texts]
    r = invoke(runner, *args)
    assert r.exit_code == 0 and r.stdout == f"encode-shards: up to date ({out})\n"

    # a model of another pattern is refused before anything is written
    other = tmp_path / "other-model.json"
    small_model(pattern="o200k-rdigits", version="t1").save(other)
    r = invoke(runner, "encode-shards", small_config, "--corpus", small_parquet, "--model", other,
               "--out", tmp_path / "tokens2")
    assert r.exit_code == 5, r.output
    assert not (tmp_path / "tokens2").exists() or not any((tmp_path / "tokens2").glob("part-*"))

    # a folder without model.json
    r = invoke(runner, "encode-shards", small_config, "--corpus", small_parquet, "--model", tmp_path / "tokens",
               "--out", tmp_path / "tokens3")
    assert r.exit_code == 3 and "no model.json in this folder" in r.stderr


def test_encode_with_a_train_folder_equals_the_workdirs_own(runner, tmp_path, small_config, small_parquet):
    w = tmp_path / "w"
    r = invoke(runner, "build", small_config, "--corpus", small_parquet, "--workdir", w, "--workers", 1, "-q")
    assert r.exit_code == 0, r.output
    out = tmp_path / "again"
    r = invoke(runner, "encode-shards", small_config, "--corpus", small_parquet, "--model", w / "train",
               "--out", out, "--workers", 1)
    assert r.exit_code == 0, r.output
    parts = sorted(p.name for p in (w / "encode-shards").glob("part-*.arrow"))
    assert parts and parts == sorted(p.name for p in out.glob("part-*.arrow"))
    for name in parts:
        assert (out / name).read_bytes() == (w / "encode-shards" / name).read_bytes()
