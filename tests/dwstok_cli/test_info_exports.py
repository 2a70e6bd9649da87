"""`dwstok info` on the export files and on encode-shards' index.json."""

from __future__ import annotations

import json

from dwstok_cli.main import cli
from stages.config import ExportConfig
from stages.export import export_tokenizer
from tests.small_model import small_model


def info(runner, path):
    r = runner.invoke(cli, ["info", str(path), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_info_on_export_files(runner, tmp_path):
    tok = small_model()
    export_tokenizer(tok, tmp_path, ExportConfig(add_bos=True, model_max_length=2048, chat_template="{{ x }}"))
    d = info(runner, tmp_path / "tiktoken.json")
    assert (d["kind"], d["name"], d["n_vocab"], d["special_tokens"]) == ("tiktoken.json", "dwslmtok-t1", tok.n_vocab, 32)
    assert d["model_sha256"] == tok.sha256 and d["ranks_file"] == "tokenizer.tiktoken"
    (tmp_path / "tokenizer.tiktoken").unlink()
    assert info(runner, tmp_path / "tiktoken.json")["ranks_file"] == "tokenizer.tiktoken (missing)"
    d = info(runner, tmp_path / "tokenizer_config.json")
    assert d["roles"]["bos_token"] == "<bos>" and d["roles"]["pad_token"] == "<pad>"
    assert (d["split_special_tokens"], d["add_bos_token"], d["add_eos_token"]) == (True, True, False)
    assert (d["model_max_length"], d["chat_template"], d["version"]) == (2048, "yes", "t1")


def test_info_on_shard_index(runner, tmp_path):
    index = {
        "format": "dwstok-shard/1", "model_sha256": "ab" * 32, "version": "t1", "pattern": "x", "n_vocab": 400,
        "dtype": "uint16", "docs": 3, "tokens": 10, "bytes": 25, "bytes_per_token": 2.5,
        "skipped_docs": 0, "replaced_docs": 0,
        "by_lang": {"en": {"docs": 2, "bytes": 20, "tokens": 5, "bytes_per_token": 4.0},
                    "zh": {"docs": 1, "bytes": 5, "tokens": 5, "bytes_per_token": 1.0}},
        "shards": [{"file": "part-00000.arrow", "source": "a", "docs": 3, "tokens": 10, "bytes": 25}],
    }
    (tmp_path / "index.json").write_text(json.dumps(index))
    d = info(runner, tmp_path / "index.json")
    assert d["kind"] == "token shards index" and d["shards"] == 1 and d["tokens"] == 10
    assert d["bytes_per_token_by_lang"] == {"en": 4.0, "zh": 1.0}
