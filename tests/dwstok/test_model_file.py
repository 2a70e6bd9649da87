"""The native model artifact: round trips, hash checks, refusals."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dwstok import Tokenizer
from dwstok.errors import ModelFileError, PatternMismatchError
from dwstok.model_file import content_hash, token_bytes, token_text

from .test_tokenizer import dwslm_layout
from .test_bpe import random_merges


@pytest.fixture(scope="module")
def tok():
    merges = [(b"\xe8", b"\xaa"), (b"\\", b"x"), (b" ", b"t")] + random_merges(3, 100, b"ab c\\")
    return Tokenizer.from_vocab_merges(
        {32 + b: bytes([b]) for b in range(256)} | {288 + k: a + b for k, (a, b) in enumerate(merges)},
        merges,
        special_tokens={f"<s{i}>": i for i in range(32)},
        pattern="o200k-rdigits",
        version="32.3",
        metadata={"corpus": "dev", "alpha": 0.7},
    )


@given(st.binary(max_size=40))
def test_token_text_roundtrip(b):
    assert token_bytes(token_text(b)) == b


def test_token_text_is_readable():
    assert token_text(" the".encode()) == " the"
    assert token_text("語".encode()[:2]) == "\\xe8\\xaa"
    assert token_text(b"\\x41") == "\\x5cx41"


def test_save_load_roundtrip(tok, tmp_path):
    path = tmp_path / "model.json"
    tok.save(path)
    back = Tokenizer.load(path, expect_pattern="o200k-rdigits", expect_version="32.3")
    assert back.vocab == tok.vocab and back.merges == tok.merges
    assert back.special_tokens == tok.special_tokens and back.pattern == tok.pattern
    assert back.pattern_name == "o200k-rdigits" and back.version == "32.3" and back.merge_rule == "merges"
    assert back.metadata == {"corpus": "dev", "alpha": 0.7}
    assert back.sha256 == tok.sha256 == json.loads(path.read_text())["sha256"]
    text = "ab c\\x 語 1234567 <s1>"
    assert back.encode(text) == tok.encode(text)
    # human-inspectable: one vocab entry per line, header first
    lines = path.read_text().splitlines()
    assert lines[1].startswith('"format": "dwstok-model"') and '[129, "a"],' in lines


def test_tiktoken_model_roundtrip(tmp_path, reftok):
    tok = Tokenizer.from_tiktoken(reftok / "r50k_base.tiktoken", pattern="gpt2", special_tokens={"<|endoftext|>": 50256})
    tok.save(tmp_path / "r50k.json")
    back = Tokenizer.load(tmp_path / "r50k.json", expect_pattern=tok.pattern)
    assert back.merge_rule == "ranks" and back.n_vocab == 50257 and back.sha256 == tok.sha256
    assert back.encode(" SolidGoldMagikarp") == [43453]


def test_hash_mismatch(tok, tmp_path):
    path = tmp_path / "m.json"
    tok.save(path)
    text = path.read_text().replace('[129, "a"]', '[129, "b"]')
    path.write_text(text)
    with pytest.raises(ModelFileError, match="hash check"):
        Tokenizer.load(path)


def test_truncated_and_corrupted(tok, tmp_path):
    path = tmp_path / "m.json"
    tok.save(path)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ModelFileError, match="truncated or corrupted"):
        Tokenizer.load(path)
    path.write_bytes(b"\x00\xff" + raw)
    with pytest.raises(ModelFileError, match="not valid JSON"):
        Tokenizer.load(path)
    c = json.loads(raw)
    del c["merges"]
    path.write_text(json.dumps(c))
    with pytest.raises(ModelFileError, match="lacks the key 'merges'"):
        Tokenizer.load(path)
    with pytest.raises(ModelFileError, match="does not exist"):
        Tokenizer.load(tmp_path / "nope.json")


def test_inconsistent_content_with_valid_hash(tok, tmp_path):
    # a hand-edited file whose hash was recomputed still has to make sense
    c = json.loads(json.dumps(tok._content()))
    c["merges"][0][2] = 40
    c["sha256"] = content_hash(c)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(c))
    with pytest.raises(ModelFileError, match="inconsistent"):
        Tokenizer.load(path)


def test_wrong_format(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"format": "other"}))
    with pytest.raises(ModelFileError, match="not a dwstok model"):
        Tokenizer.load(path)
    path.write_text(json.dumps({"format": "dwstok-model", "format_version": 99}))
    with pytest.raises(ModelFileError, match="format_version 99"):
        Tokenizer.load(path)


def test_expectations(tok, tmp_path):
    path = tmp_path / "m.json"
    tok.save(path)
    with pytest.raises(PatternMismatchError, match=r"built with pattern 'o200k-rdigits', but 'o200k' was expected"):
        Tokenizer.load(path, expect_pattern="o200k")
    with pytest.raises(PatternMismatchError, match=r"version '32.3', but version '32.2' was expected"):
        Tokenizer.load(path, expect_version="32.2")
    Tokenizer.load(path, expect_pattern=tok.pattern)  # the pattern string works as well as the name


def test_save_is_atomic_and_leaves_no_temp(tok, tmp_path):
    path = tmp_path / "sub" / "model.json"
    tok.save(path)
    tok.save(path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.json"]


def test_dwslm_layout_file(tmp_path):
    tok = dwslm_layout([(b"a", b"b"), (b"ab", b"c")])
    tok.save(tmp_path / "m.json")
    c = json.loads((tmp_path / "m.json").read_text())
    assert c["specials"]["<pad>"] == 0 and c["vocab"][0] == [32, "\x00"] and c["merges"] == [[129, 130, 288], [288, 131, 289]]
