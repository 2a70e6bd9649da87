"""Tokenizer.load on what export writes, dwstok.load_tiktoken, the tiktoken_ext plugin,
and decode's options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dwstok
from dwstok import Tokenizer
from dwstok.errors import ModelFileError, PatternMismatchError
from dwstok.tiktoken_compat import plugin_constructors
from tests.small_model import SAMPLE, TEXTS, small_model

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from stages.export import export_tokenizer

    tok = small_model()
    d = tmp_path_factory.mktemp("export")
    export_tokenizer(tok, d)
    train = tmp_path_factory.mktemp("train")
    tok.save(train / "model.json")
    return tok, d, train


@pytest.mark.parametrize(
    "where,rule",
    [
        ("model", "merges"),
        ("train", "merges"),
        ("export", "merges"),
        ("export/tokenizer.json", "merges"),
        ("export/tokenizer.tiktoken", "ranks"),
        ("export/tiktoken.json", "ranks"),
    ],
)
def test_every_export_gives_the_models_ids(exported, where, rule):
    tok, d, train = exported
    path = {"model": train / "model.json", "train": train, "export": d}.get(where) or d / where.split("/", 1)[1]
    got = Tokenizer.load(path, expect_version="t1", expect_pattern="o200k-rdigits")
    assert got.merge_rule == rule and got.version == "t1" and got.special_tokens == tok.special_tokens
    assert got.vocab == tok.vocab and got.n_vocab == tok.n_vocab
    for text in (SAMPLE, TEXTS):
        assert got.encode(text) == tok.encode(text)
        assert got.encode(text, allowed_special="all") == tok.encode(text, allowed_special="all")
    assert got.decode(tok.encode(SAMPLE)) == SAMPLE


def test_cl100k_pattern_comes_back_by_name(tmp_path):
    # the exporter rewrites cl100k's possessive digits for Oniguruma; load maps it back
    from stages.export import export_tokenizer

    tok = small_model(pattern="cl100k")
    export_tokenizer(tok, tmp_path)
    got = Tokenizer.load(tmp_path / "tokenizer.json")
    assert got.pattern_name == "cl100k" and got.encode("12345678 x") == tok.encode("12345678 x")


def test_expectations_are_checked_on_exports(exported):
    _, d, _ = exported
    with pytest.raises(PatternMismatchError, match=r"is version 't1', but version '32.3' was expected"):
        Tokenizer.load(d, expect_version="32.3")
    with pytest.raises(PatternMismatchError, match=r"built with pattern 'o200k-rdigits', but 'o200k' was expected"):
        Tokenizer.load(d / "tokenizer.tiktoken", expect_pattern="o200k")


def test_load_errors_say_what_to_do(exported, tmp_path):
    _, d, _ = exported
    with pytest.raises(ModelFileError, match=r"is a folder with no model.json, tokenizer.json or tiktoken.json"):
        Tokenizer.load(tmp_path)
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "x.tiktoken").write_bytes((d / "tokenizer.tiktoken").read_bytes())
    with pytest.raises(ModelFileError, match=r"tiktoken.json not found: a .tiktoken file needs the tiktoken.json"):
        Tokenizer.load(lone / "x.tiktoken")
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / "tiktoken.json").write_text((d / "tiktoken.json").read_text())
    (stale / "tokenizer.tiktoken").write_bytes((d / "tokenizer.tiktoken").read_bytes()[:-40] + b"\n")
    with pytest.raises(ModelFileError, match=r"does not match the sha256 in its tiktoken.json"):
        Tokenizer.load(stale)
    with pytest.raises(ModelFileError, match=r"does not match the sha256"):
        dwstok.load_tiktoken(stale)
    wordpiece = tmp_path / "tokenizer.json"
    wordpiece.write_text(json.dumps({"version": "1.0", "model": {"type": "WordPiece", "vocab": {}}}))
    with pytest.raises(ModelFileError, match=r"model type 'WordPiece' is not BPE; dwstok loads the byte-level BPE"):
        Tokenizer.load(wordpiece)


def _export_with(d: Path, out: Path, *, ranks: bytes | None = None, meta: dict | None = None,
                 hf: dict | None = None) -> Path:
    """A copy of the export ``d`` in ``out`` with the rank file, the sidecar's keys or the
    HF file replaced; the sidecar's sha256 made to match the rank file, as a crafted or
    half-rewritten export would have it."""
    import hashlib

    out.mkdir()
    for f in d.iterdir():
        (out / f.name).write_bytes(f.read_bytes())
    if ranks is not None:
        (out / "tokenizer.tiktoken").write_bytes(ranks)
    m = json.loads((out / "tiktoken.json").read_text()) | (meta or {})
    m["sha256"] = hashlib.sha256((out / "tokenizer.tiktoken").read_bytes()).hexdigest()
    (out / "tiktoken.json").write_text(json.dumps(m))
    if hf is not None:
        (out / "tokenizer.json").write_text(json.dumps(hf))
    return out


def test_corrupt_ids_are_refused_naming_the_file_and_line(exported, tmp_path):
    """A rank file, tiktoken.json or tokenizer.json whose ids are out of range or given
    twice is refused with the file (and line) named. A rank of -1 had replaced the last
    token (a model whose ids were silently wrong); one of 10**12 was a MemoryError."""
    _, d, _ = exported
    lines = (d / "tokenizer.tiktoken").read_bytes().splitlines(keepends=True)
    tail = lines[-1].split()[0]
    cases = {
        "negative": (lines[:-1] + [tail + b" -1\n"], r"tokenizer.tiktoken:%d gives rank -1: ranks go from 0 to 2,097,150" % len(lines)),
        "huge": (lines[:-1] + [tail + b" 1000000000000\n"], r"tokenizer.tiktoken:%d gives rank 1000000000000" % len(lines)),
        "rank twice": (lines + [b"eno= " + lines[-1].split()[1] + b"\n"], r"tokenizer.tiktoken:%d gives rank \d+ again \(line %d had it\)" % (len(lines) + 1, len(lines))),
        "token twice": (lines + [tail + b" 99999\n"], r"tokenizer.tiktoken:%d gives the token .* again \(line %d had it\)" % (len(lines) + 1, len(lines))),
    }
    for name, (ranks, message) in cases.items():
        bad = _export_with(d, tmp_path / name.replace(" ", "-"), ranks=b"".join(ranks))
        with pytest.raises(ModelFileError, match=str(bad / "tokenizer.tiktoken") + ":"):
            Tokenizer.load(bad / "tiktoken.json")
        with pytest.raises(ModelFileError, match=message):
            Tokenizer.from_tiktoken(bad / "tokenizer.tiktoken", pattern="o200k", special_tokens={})
        with pytest.raises(ModelFileError, match=message):
            dwstok.load_tiktoken(bad)  # the tiktoken plugin reads the same lines
    # a special's id in tiktoken.json: no list of 10**12 entries
    bad = _export_with(d, tmp_path / "special", meta={"special_tokens": {"<bos>": 10**12}})
    with pytest.raises(ModelFileError, match=r"special token '<bos>' has id 1,000,000,000,000: the vocabulary would need"):
        Tokenizer.load(bad / "tiktoken.json")
    with pytest.raises(ModelFileError, match=r"special token '<bos>' has a bad id True"):
        Tokenizer.from_tiktoken(d / "tokenizer.tiktoken", pattern="o200k", special_tokens={"<bos>": True})
    # tokenizer.json: a vocab id out of range, named with the file
    hf = json.loads((d / "tokenizer.json").read_text())
    for n, val in enumerate((-1, 10**12)):
        h = json.loads(json.dumps(hf))
        h["model"]["vocab"][list(h["model"]["vocab"])[100]] = val
        bad = _export_with(d, tmp_path / f"hf{n}", hf=h)
        with pytest.raises(ModelFileError, match=rf"{bad / 'tokenizer.json'}: vocab id {val} is not an id from 0 to 2,097,150"):
            Tokenizer.load(bad / "tokenizer.json")
    # two tokens with one id: a dict by id had kept one, and the ids were not HF's
    h = json.loads(json.dumps(hf))
    names = list(h["model"]["vocab"])
    h["model"]["vocab"][names[300]] = h["model"]["vocab"][names[301]]
    bad = _export_with(d, tmp_path / "hf-twice", hf=h)
    with pytest.raises(ModelFileError, match=rf"the vocab gives id \d+ to both {names[300]!r} and {names[301]!r}; the file is corrupt"):
        Tokenizer.load(bad / "tokenizer.json")
    h["model"]["vocab"][names[300]] = 300.5  # not an integer (int() had made it 300)
    bad = _export_with(d, tmp_path / "hf-float", hf=h)
    with pytest.raises(ModelFileError, match=r"id 300.5 is not an integer"):
        Tokenizer.load(bad / "tokenizer.json")
    # an added token that is not special: HF finds it in any text (the loader had
    # dropped it, and its ids were not HF's)
    h = json.loads(json.dumps(hf))
    h["added_tokens"].append(h["added_tokens"][0] | {"id": len(names) + 5, "content": "hello", "special": False})
    bad = _export_with(d, tmp_path / "hf-added", hf=h)
    with pytest.raises(ModelFileError, match=r"its added token 'hello' is not special \(HF finds it in any text"):
        Tokenizer.load(bad / "tokenizer.json")


@pytest.mark.parametrize("change,message", [
    (lambda v: v.__setitem__(-1, [-1, v[-1][1]]), r"has vocab id -1, not an id from 0 to \d+"),
    (lambda v: v.__setitem__(-1, [v[-2][0], v[-1][1]]), r"gives vocab id \d+ twice"),
    (lambda v: v.__setitem__(-1, [True, v[-1][1]]), r"has vocab id True, not an id"),
])
def test_a_model_file_with_bad_vocab_ids_is_refused_even_with_its_hash_redone(exported, tmp_path, change, message):
    """model.json's hash catches an edit, but not a file whose writer hashed bad ids:
    a vocab id of -1 had replaced the last token, one given twice the first of them."""
    from dwstok import model_file

    _, _, train = exported
    c = json.loads((train / "model.json").read_text())
    change(c["vocab"])
    c["sha256"] = model_file.content_hash(c)
    (tmp_path / "model.json").write_text(json.dumps(c))
    with pytest.raises(ModelFileError, match=rf"model file {tmp_path / 'model.json'} " + message):
        Tokenizer.load(tmp_path / "model.json")


def test_load_tiktoken_is_a_ready_encoding(exported):
    import tiktoken

    tok, d, _ = exported
    for path in (d, d / "tokenizer.tiktoken", d / "tiktoken.json"):
        enc = dwstok.load_tiktoken(path)
        assert isinstance(enc, tiktoken.Encoding) and enc.name == "dwslmtok-t1" and enc.n_vocab == tok.n_vocab
        assert enc.encode_ordinary(TEXTS) == tok.encode(TEXTS)
        assert enc.encode("<bos>x", allowed_special="all") == tok.encode("<bos>x", allowed_special="all")


def test_plugin_constructors(exported, tmp_path):
    import tiktoken

    tok, d, _ = exported
    # a folder holding workdirs: */export/tiktoken.json is found
    (tmp_path / "run" / "export").mkdir(parents=True)
    for f in ("tiktoken.json", "tokenizer.tiktoken"):
        (tmp_path / "run" / "export" / f).write_bytes((d / f).read_bytes())
    cons = plugin_constructors(str(tmp_path))
    assert list(cons) == ["dwslmtok-t1"]
    assert tiktoken.Encoding(**cons["dwslmtok-t1"]()).encode_ordinary(SAMPLE) == tok.encode(SAMPLE)
    # a name given twice, and an export that cannot be read: skipped with a warning
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tiktoken.json").write_text("{")
    with pytest.warns(UserWarning) as w:
        cons = plugin_constructors(os.pathsep.join([str(d), str(tmp_path), str(broken)]))
    assert list(cons) == ["dwslmtok-t1"]
    messages = [str(x.message) for x in w]
    assert any("'dwslmtok-t1' is taken already" in m for m in messages)
    assert any(f"skipping {broken}: cannot read" in m for m in messages)


def test_plugin_registers_by_name_in_tiktoken(exported):
    # a fresh process: tiktoken reads its plugins once, at the first get_encoding
    tok, d, _ = exported
    code = (
        "import json, sys, tiktoken\n"
        "enc = tiktoken.get_encoding('dwslmtok-t1')\n"
        "print(json.dumps([enc.encode_ordinary(sys.argv[1]), 'o200k_base' in tiktoken.list_encoding_names()]))\n"
    )
    env = dict(os.environ, DWSTOK_TIKTOKEN_DIRS=str(d), PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code, SAMPLE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [tok.encode(SAMPLE), True]


def test_decode_skip_special_tokens():
    tok = small_model()
    ids = tok.encode("<bos>统计 fox<eos>", allowed_special="all")
    assert tok.decode(ids) == "<bos>统计 fox<eos>"
    assert tok.decode(ids, skip_special_tokens=True) == "统计 fox"
    assert tok.decode([tok.special_tokens["<pad>"]] * 3, skip_special_tokens=True) == ""


def test_decode_a_window_that_starts_mid_character():
    # bytes only: every UTF-8 byte is its own token, so ids[1:] starts inside "统"
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [], special_tokens=["<bos>"])
    ids = tok.encode("统计 fox")
    with pytest.raises(UnicodeDecodeError, match=r"pass errors='replace'"):
        tok.decode(ids[1:])
    assert tok.decode(ids[1:], errors="replace") == "\ufffd\ufffd计 fox"
    assert tok.decode(ids[1:-1], errors="replace", skip_special_tokens=True) == "\ufffd\ufffd计 fo"
