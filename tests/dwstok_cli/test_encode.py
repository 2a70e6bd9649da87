"""`dwstok encode`: plain and rich terminal output, --json offsets, stdin, specials, --compare."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dwstok_cli.main import cli
from tests.stages.bpe_models import dwslm_model

MERGES = [(b"h", b"e"), (b"t", b"he"), (b" ", b"t"), (b"l", b"l"), (b"he", b"ll"), (b"hell", b"o")]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    tok = dwslm_model(MERGES, pattern="o200k-rdigits", version="32.3")
    path = tmp_path_factory.mktemp("m") / "model.json"
    tok.save(path)
    return str(path), tok


def run(args, **kw):
    return CliRunner().invoke(cli, ["encode", *args], **kw)


def test_plain_terminal(model):
    path, tok = model
    r = run([path, "the 語 hello"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == "dwstok 32.3"
    # tokens cut by "|"; 語 took three tokens (one a byte): marked ³
    assert lines[1] == "the| |語³| |hello"
    ids = tok.encode("the 語 hello")
    assert lines[2] == "ids: " + " ".join(map(str, ids))
    assert "\x1b[" not in r.output
    table = lines[-1].split()
    assert table[-3:] == [f"{tok.n_vocab:,}", str(len(ids)), f"{len('the 語 hello'.encode()) / len(ids):.2f}"]


def test_rich_terminal(model):
    path, _ = model
    r = run([path, "the 語", "--color", "always"])
    assert r.exit_code == 0, r.output
    assert "\x1b[" in r.output and "語" in r.output and "³" in r.output
    assert "|" not in r.output.splitlines()[1]  # tints, not bars, tell tokens apart


def test_show_ids_and_bytes(model):
    path, tok = model
    r = run([path, "hello 語", "--show", "ids"])
    assert r.output.splitlines()[1] == " ".join(map(str, tok.encode("hello 語")))
    r = run([path, "hello 語", "--show", "bytes"])
    assert r.output.splitlines()[1] == "68 65 6c 6c 6f | 20 | e8 | aa | 9e"


def check_json(doc, text):
    spans = [(t["start"], t["end"]) for t in doc["tokens"]]
    for t in doc["tokens"]:
        assert t["text"] == text[t["start"] : t["end"]]
        # a whole token: its text is exactly its bytes; a split one: its bytes are part of its text's
        assert (t["text"].encode() == bytes.fromhex(t["bytes"])) != t["split"]
        if t["split"]:
            assert bytes.fromhex(t["bytes"]) in t["text"].encode() or t["bytes"] == "20"
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert doc["n_tokens"] == len(doc["tokens"])


def test_json_offsets(model):
    path, tok = model
    text = "the 語é 1234567 👨‍👩‍👧"
    r = run([path, text, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["tokenizer"] == "dwstok 32.3" and doc["n_vocab"] == tok.n_vocab
    assert [t["id"] for t in doc["tokens"]] == tok.encode(text)
    check_json(doc, text)
    assert [t["text"] for t in doc["tokens"]][:4] == ["the", " ", "語", "語"]
    assert [t["split"] for t in doc["tokens"]][:4] == [False, False, True, True]


def test_stdin_and_file(model, tmp_path):
    path, tok = model
    for args in ([path], [path, "-"]):
        r = run([*args, "--json"], input="hello\nthe\n")
        assert r.exit_code == 0, r.output
        assert [t["id"] for t in json.loads(r.stdout)["tokens"]] == tok.encode("hello\nthe\n")
    f = tmp_path / "t.txt"
    f.write_bytes("hé".encode())
    assert [t["id"] for t in json.loads(run([path, "--file", str(f), "--json"]).stdout)["tokens"]] == tok.encode("hé")
    f.write_bytes(b"h\xffe")
    r = run([path, "--file", str(f)])
    assert r.exit_code == 3 and r.output.strip() == f"Error: {f} is not UTF-8: byte 1 is 0xff"


def test_allowed_special(model):
    path, tok = model
    ids = lambda args: [t["id"] for t in json.loads(run([path, "<bos>hi", "--json", *args]).stdout)["tokens"]]
    assert ids([]) == tok.encode("<bos>hi") and tok.special_tokens["<bos>"] not in ids([])
    got = ids(["--allowed-special", "<bos>"])
    assert got[0] == tok.special_tokens["<bos>"] and got[1:] == tok.encode("hi")
    r = run([path, "x", "--allowed-special", "<nope>"])
    assert r.exit_code != 0 and "not special tokens of this model" in r.output


def test_bad_input(model, monkeypatch):
    path, _ = model
    r = run([path, "x", "--compare", "gpt3"])
    assert r.exit_code == 3 and r.output.strip() == "Error: --compare names gpt3; choose from gpt2,mistral,o200k"
    monkeypatch.delenv("DWSTOK_REFTOK", raising=False)
    r = run([path, "x", "--compare", "gpt2"])
    assert r.exit_code == 3 and "pass --reference-dir DIR or set DWSTOK_REFTOK" in r.output
    r = run(["/nonexistent/model.json", "x"])
    assert r.exit_code == 3 and "not found" in r.output


def test_compare(model, reftok, tiktoken_cache):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    sentencepiece = pytest.importorskip("sentencepiece")
    path, _ = model
    text = "研究就是在不知道自己在做什么的时候所做的事。 $1,234.5 <bos> 👨‍👩‍👧"
    r = run([path, text, "--json", "--compare", "gpt2,o200k,mistral", "--reference-dir", str(reftok)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)  # (a first use may say on stderr that it compiles a kernel)
    enc = json.loads((reftok / "encodings.json").read_text())["encodings"]
    want = {}
    for name, key in (("gpt2", "r50k_base"), ("o200k", "o200k_base")):
        e = enc[key]
        want[name] = tiktoken.Encoding(
            key, pat_str=e["pat_str"], mergeable_ranks=load_tiktoken_bpe(str(reftok / e["file"])), special_tokens=e["special_tokens"]
        ).encode_ordinary(text)
    want["mistral"] = sentencepiece.SentencePieceProcessor(model_file=str(reftok / "mistral7b_v0.1.tokenizer.model")).encode(text)
    assert {c["name"]: [t["id"] for t in c["tokens"]] for c in doc["compare"]} == want
    for c in doc["compare"]:
        check_json(c, text)
    r = run([path, text, "--compare", "o200k", "--reference-dir", str(reftok)])
    assert r.exit_code == 0 and "GPT-4o (o200k_base)" in r.output and "200,019" in r.output


def test_page_without_references(model, tmp_path, monkeypatch):
    """`dwstok page` with no reference folder shows the models alone; its data files are
    scripts that register one JSON entry each."""
    path, tok = model
    monkeypatch.delenv("DWSTOK_REFTOK", raising=False)
    r = CliRunner().invoke(cli, ["page", path, "--out", str(tmp_path / "site")])
    assert r.exit_code == 0, r.output
    files = sorted(p.name for p in (tmp_path / "site").rglob("*") if p.is_file())
    assert files == ["32.3.js", "dwstok-page.min.js", "index.html"]
    data = (tmp_path / "site" / "data" / "32.3.js").read_text()
    prefix = "(window.DWSTOK_DATA=window.DWSTOK_DATA||[]).push("
    assert data.startswith(prefix) and data.endswith(");\n")
    entry = json.loads(data[len(prefix) : -3])
    assert entry["name"] == "32.3" and entry["n_vocab"] == tok.n_vocab and sum(n for _, n in entry["ranks"]["runs"]) == tok.n_vocab - 32
    assert '<script src="data/32.3.js"></script>' in (tmp_path / "site" / "index.html").read_text()
    r = CliRunner().invoke(cli, ["page", path, "--out", str(tmp_path / "s2"), "--compare", "gpt2"])
    assert r.exit_code == 3 and "pass --reference-dir DIR or set DWSTOK_REFTOK" in r.output
    r = CliRunner().invoke(cli, ["page", path, path, "--out", str(tmp_path / "s3")])
    assert r.exit_code == 3 and "both named '32.3'" in r.output
