"""`dwstok eval`: JSON on stdout, plain tables off a terminal, one error line per mistake."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dwstok_cli.main import cli


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from dwstok.training import train_bpe

    d = tmp_path_factory.mktemp("m")
    texts = ["Hello world, hello 2026 world!", "中文的中文。", "def f(x):\n    return x\n"] * 5
    tok = train_bpe(texts, 288 + 40)
    path = d / "model.json"
    tok.save(path)
    corpus = d / "c.jsonl"
    corpus.write_text("\n".join(json.dumps({"text": t, "lang": lg}) for t, lg in
                                zip(texts, ["en", "zh", "code"] * 5)) + "\n", encoding="utf-8")
    return path, corpus


def test_json_schema(model):
    path, corpus = model
    res = CliRunner().invoke(cli, ["eval", str(path), "--corpus", str(corpus), "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)
    assert r["schema"] == "dwstok-eval/1"
    name = r["tokenizers"][0]
    assert set(r["groups"]) == {"en", "zh", "code"}
    assert r["groups"]["en"]["tokens"][name] > 0 and r["groups"]["en"]["docs"] == 5
    a = r["audit"][name]
    assert {"unreachable", "dead", "rare", "longest"} <= set(a)
    assert all(len(x) == 2 for x in a["longest"])


def test_plain_tables_when_not_a_terminal(model, tmp_path):
    path, corpus = model
    res = CliRunner().invoke(cli, ["eval", str(path), "--corpus", str(corpus), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "Compression: bytes/token per group" in res.stdout
    assert "\x1b[" not in res.stdout and "┏" not in res.stdout  # no colour, no box drawing
    assert (tmp_path / "o" / "report.html").read_text(encoding="utf-8").startswith("<!doctype html>")


@pytest.mark.parametrize(
    "args, code, line",
    [
        (["--compare", "gpt5"], 2, "Error: --compare: unknown reference 'gpt5'; choose from gpt2, cl100k, o200k, mistral"),
        (["--baseline", "nope"], 2, "Error: --baseline 'nope' is none of the tokenizers evaluated"),
        (["--compare", "mistral", "--reference-dir", "{tmp}"], 4, "Error: {tmp}/mistral7b_v0.1.tokenizer.model not found"),
    ],
)
def test_errors_are_one_line(model, tmp_path, args, code, line):
    path, corpus = model
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    res = CliRunner().invoke(cli, ["eval", str(path), "--corpus", str(corpus), *args])
    assert res.exit_code == code, res.output
    assert res.stderr.strip().splitlines()[-1].startswith(line.replace("{tmp}", str(tmp_path)))


def test_missing_model_is_a_model_file_error(tmp_path):
    res = CliRunner().invoke(cli, ["eval", str(tmp_path / "none.json")])
    assert res.exit_code == 4
    assert res.stderr.strip() == f"Error: model {tmp_path / 'none.json'} not found"
