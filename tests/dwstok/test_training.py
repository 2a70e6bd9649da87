"""train_bpe end to end, language weights, Han forcing and the DWSLMTok id layout."""

from __future__ import annotations

import collections
import gzip
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import regex

from dwstok import train_bpe
from dwstok.errors import ConfigError, InputError
from dwstok.patterns import PATTERNS
from dwstok.training import (
    LANG_WEIGHT_SCALE,
    build_tokenizer,
    count_pieces,
    han_char_counts,
    han_forced_merges,
    lang_weights,
)
from dwstok.merge_learner import learn_merges, pieces_to_arrays

from .brute_bpe import brute_bpe

TEXTS = [
    "The quick brown fox jumps over the lazy dog. The dog sleeps.\n",
    "Le renard brun rapide saute par-dessus le chien paresseux.\n\n",
    "def f(x):\n    return x + 1234567  # comment\n",
    "日本語のテキストです。中文的文本是这样的。的的的一一是\n",
    "Привет, мир! Как дела?   ",
    "aaaa bbbb aaaa   aaaa\t\tcccc",
]
LANGS = ["en", "fr", "code", "ja", "ru", "en"]


def test_golden():
    tok = train_bpe(["aaabdaaabac"], 259)
    assert tok.merges == [(b"a", b"a"), (b"aa", b"a"), (b"aaa", b"b")]
    assert tok.encode("aaabdaaabac") == [258, 100, 258, 97, 99]
    assert tok.decode([258, 100, 258, 97, 99]) == "aaabdaaabac"


def test_golden_from_a_txt_file(tmp_path):
    p = tmp_path / "golden.txt"
    p.write_text("aaabdaaabac", encoding="utf-8")
    for source in (p, str(p), [p]):
        assert train_bpe(source, 259).merges == [(b"a", b"a"), (b"aa", b"a"), (b"aaa", b"b")]


def test_counts_equal_regex_findall():
    table = count_pieces(TEXTS, pattern="o200k")
    got = dict(zip(table.column("piece").to_pylist(), table.column("count").to_pylist()))
    want = collections.Counter(p.encode() for t in TEXTS for p in regex.findall(PATTERNS["o200k"], t))
    assert got == dict(want)


def test_merges_equal_brute_force_on_text():
    pieces = collections.Counter(p.encode() for t in TEXTS for p in regex.findall(PATTERNS["o200k"], t))
    keys = sorted(pieces)
    want = brute_bpe(keys, [pieces[k] for k in keys], 60)
    tok = train_bpe(TEXTS, 256 + 60)
    assert tok.merges == want.merges


def test_specials_are_hard_boundaries_and_take_the_first_ids():
    texts = ["ab<|s|>ab<|s|>ab", "<|s|><|s|>x<|e|>y", "xy" * 3]
    tok = train_bpe(texts, 2 + 256 + 20, special_tokens=["<|s|>", "<|e|>"])
    assert tok.vocab[0] == b"<|s|>" or tok.encode("<|s|>", allowed_special="all") == [0]
    assert tok.encode("<|e|>", allowed_special="all") == [1]
    assert tok.vocab[2 + ord("a")] == b"a"
    # '<' and '|' only ever occur inside specials, so no merge may contain them,
    # and "x<|e|>y" must not let x and y meet.
    assert not any(b"<" in a + b or b"|" in a + b for a, b in tok.merges)
    pieces = collections.Counter()
    for t in texts:
        for part in regex.split(r"<\|s\|>|<\|e\|>", t):
            pieces.update(p.encode() for p in regex.findall(PATTERNS["o200k"], part))
    keys = sorted(pieces)
    assert tok.merges == brute_bpe(keys, [pieces[k] for k in keys], 20).merges


def test_vocab_size_too_small():
    with pytest.raises(ConfigError):
        train_bpe(["abc"], 255)


def test_stops_early_on_a_tiny_corpus():
    tok = train_bpe(["abc"], 256 + 50)
    # (a, b) and (b, c) tie; (b"b", b"c") is the greater pair of byte strings.
    assert tok.merges == [(b"b", b"c"), (b"a", b"bc")]
    assert tok.metadata["stopped_early"] is True


def test_empty_corpus():
    assert train_bpe([], 300).merges == []


def test_training_pieces_round_trip_and_never_grow(corpus_dir):
    texts = pq.read_table(corpus_dir / "dev.parquet", columns=["text"]).column("text").to_pylist()[:300]
    tok = train_bpe(texts, 256 + 600)
    table = count_pieces(texts)
    for piece in table.column("piece").to_pylist():
        s = piece.decode("utf-8")
        ids = tok.encode(s)
        assert len(ids) <= len(piece)
        assert tok.decode(ids) == s


# ---------------------------------------------------------------------------- sources


def test_jsonl_parquet_and_text_agree(tmp_path):
    jl = tmp_path / "c.jsonl"
    jl.write_text("".join(json.dumps({"text": t, "lang": g}) + "\n" for t, g in zip(TEXTS, LANGS)), encoding="utf-8")
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress(jl.read_bytes()))
    pqf = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": TEXTS, "lang": LANGS}), pqf)
    want = train_bpe(TEXTS, 256 + 40).merges
    for source in (jl, gz, pqf, [str(jl)]):
        assert train_bpe(source, 256 + 40).merges == want
    want_w = train_bpe(TEXTS, 256 + 40, alpha=0.3, lang=LANGS).merges
    assert train_bpe(pqf, 256 + 40, alpha=0.3).merges == want_w
    assert train_bpe(jl, 256 + 40, alpha=0.3).merges == want_w


def test_bad_sources(tmp_path):
    with pytest.raises(InputError):
        train_bpe(tmp_path / "missing.txt", 300)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\nnot json\n', encoding="utf-8")
    with pytest.raises(InputError, match="bad.jsonl:2"):
        train_bpe(bad, 300)
    with pytest.raises(ConfigError, match="language"):
        train_bpe(["abc"], 300, alpha=0.5)


# ---------------------------------------------------------------------------- weights


def test_lang_weights_alpha_one_is_exactly_uniform():
    w = lang_weights({"en": 40_000_000, "fr": 10_000_000, "he": 3, "none": 0}, 1.0)
    assert w == {"en": LANG_WEIGHT_SCALE, "fr": LANG_WEIGHT_SCALE, "he": LANG_WEIGHT_SCALE, "none": 0}


def test_lang_weights_formula():
    sizes = {"en": 700, "fr": 200, "ja": 100}
    for alpha in (0.0, 0.3, 0.7):
        w = lang_weights(sizes, alpha)
        q = {g: n / 1000 for g, n in sizes.items()}
        norm = sum(v**alpha for v in q.values())
        for g in sizes:
            assert w[g] == round((q[g] ** alpha / norm) / q[g] * LANG_WEIGHT_SCALE)
    # alpha = 0: every group ends up with the same total weight.
    w0 = lang_weights(sizes, 0.0)
    totals = [sizes[g] * w0[g] for g in sizes]
    assert max(totals) - min(totals) <= max(sizes.values())
    with pytest.raises(ConfigError):
        lang_weights(sizes, -0.1)


def test_alpha_one_reproduces_unweighted_training():
    """32.2 with both fixes off == 32.1: the weighted path with alpha = 1, merge for merge."""
    texts = TEXTS * 3 + ["xyz xyz xyz the the"]
    langs = LANGS * 3 + ["en"]
    table = count_pieces(texts, lang=langs, with_lang=True)
    by_lang = collections.Counter()
    for p, g, c in zip(*(table.column(k).to_pylist() for k in ("piece", "lang", "count"))):
        by_lang[g] += len(p) * c
    w = lang_weights(by_lang, 1.0)
    weighted = collections.Counter()
    plain = collections.Counter()
    for p, g, c in zip(*(table.column(k).to_pylist() for k in ("piece", "lang", "count"))):
        weighted[p] += c * w[g]
        plain[p] += c
    keys = sorted(plain)
    data, offsets = pieces_to_arrays(keys)
    a = learn_merges(data, offsets, np.array([plain[k] for k in keys]), 120)
    b = learn_merges(data, offsets, np.array([weighted[k] for k in keys]), 120)
    assert a.merges == b.merges
    assert train_bpe(texts, 256 + 120).merges == a.merges


def test_weights_let_a_rare_language_win():
    texts = ["the the the the the the", "語語"]
    langs = ["en", "ja"]
    plain = train_bpe(texts, 257)
    balanced = train_bpe(texts, 257, alpha=0.0, lang=langs)
    assert plain.merges[0] == (b"t", b"h")
    assert balanced.merges[0][0] + balanced.merges[0][1] in ("語".encode()[:2], "語".encode()[1:])


# ---------------------------------------------------------------------------- Han


def test_han_plan_order_and_shared_prefixes():
    counts = {"的": 10, "一": 10, "是": 7, "𠀀": 5, "丁": 1}
    plan = han_forced_merges(counts, count=5)
    # Descending count, then code point: 一 (U+4E00) before 的 (U+7684).
    assert plan.chars == ["一", "的", "是", "𠀀", "丁"]
    built = set()
    for a, b in plan.merges:
        assert len(a) == 1 or a in built
        built.add(a + b)
    for ch in plan.chars:
        assert ch.encode() in built
    # 一 and 丁 share the prefix e4 b8; 是 and 的 are e6 98 af / e7 9a 84.
    assert plan.merges.count((b"\xe4", b"\xb8")) == 1
    assert plan.n_merges == len(plan.merges) == 2 + 2 + 2 + 3 + 1
    assert plan.coverage == 1.0


def test_han_plan_by_coverage():
    counts = {"的": 50, "一": 30, "是": 15, "不": 5}
    assert han_forced_merges(counts, coverage=0.5).chars == ["的"]
    assert han_forced_merges(counts, coverage=0.8).chars == ["的", "一"]
    assert han_forced_merges(counts, coverage=0.81).chars == ["的", "一", "是"]
    assert han_forced_merges(counts, coverage=0.0).n_chars == 0
    plan = han_forced_merges(counts, coverage=0.9)
    assert plan.coverage == pytest.approx(0.95)
    with pytest.raises(ConfigError):
        han_forced_merges(counts, coverage=0.5, count=3)


def test_han_char_counts_match_regex():
    texts = ["中文的文本是这样的。日本語のテキスト", "𠀀𠀁 abc ⺀ 々 〇"]
    table = count_pieces(texts)
    data, offsets = pieces_to_arrays(table.column("piece").to_pylist())
    got = han_char_counts(data, offsets, table.column("count").to_numpy())
    want = collections.Counter(ch for t in texts for ch in regex.findall(r"\p{Han}", t))
    assert got == dict(want)


def test_train_with_han_forcing():
    texts = ["的的的一一是 the the the", "中文的文本是这样的"]
    tok = train_bpe(texts, 256 + 30, han_count=3)
    table = count_pieces(texts)
    data, offsets = pieces_to_arrays(table.column("piece").to_pylist())
    counts = han_char_counts(data, offsets, table.column("count").to_numpy())
    assert counts["的"] == 5 and counts["一"] == 2
    plan = han_forced_merges(counts, count=3)
    assert plan.chars == ["的", "一", "文"]
    assert tok.merges[: plan.n_merges] == plan.merges
    for ch in plan.chars:
        assert len(tok.encode(ch)) == 1
    assert tok.metadata["han"]["chars"] == 3
    with pytest.raises(ConfigError, match="Han"):
        train_bpe(texts, 256 + 2, han_count=3)


def test_build_tokenizer_layout():
    merges = [(b"a", b"b"), (b"ab", b"c")]
    tok = build_tokenizer(merges, special_tokens=["<pad>", "<bos>"], pattern="o200k", version="32.1")
    assert tok.vocab[2 + 0x61] == b"a"
    assert tok.vocab[2 + 256] == b"ab" and tok.vocab[2 + 257] == b"abc"
    assert tok.merges == merges
    assert tok.encode("abc") == [259]
    with pytest.raises(ConfigError):
        build_tokenizer(merges, special_tokens=["<pad>", "<pad>"])


def test_counts_do_not_depend_on_batches_or_threads(monkeypatch):
    import dwstok.training as train_mod

    texts = TEXTS * 5
    langs = LANGS * 5
    want = count_pieces(texts, lang=langs, with_lang=True, threads=1).sort_by([("piece", "ascending"), ("lang", "ascending")])
    monkeypatch.setattr(train_mod, "_CHUNK_BYTES", 50)
    for threads in (1, 2):
        got = count_pieces(texts, lang=langs, with_lang=True, threads=threads)
        assert got.sort_by([("piece", "ascending"), ("lang", "ascending")]).equals(want)
    assert train_bpe(texts, 256 + 50).merges == train_mod.train_bpe(texts, 256 + 50).merges


def test_model_content_is_what_the_built_tokenizer_saves():
    from dwstok import model_file
    from dwstok.training import build_tokenizer, model_content

    # (b"ab", b"c") and (b"a", b"bc") both make b"abc": the second keeps its own id and
    # the last merge refers to the first b"abc".
    merges = [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c"), (b"a", b"bc"), (b"abc", b"\xff"), (b"\\", b"\x00")]
    kw = dict(special_tokens=["<pad>", "<bos>"], pattern="o200k-rdigits", version="32.3", metadata={"x": [1, "é"]})
    want = build_tokenizer(merges, **kw)._content()
    got = model_content(merges, **kw)
    assert got == want
    lines = model_file.dumps(got).splitlines()
    assert lines[lines.index('"merges": [') + 5] == json.dumps(got["merges"][4]) + ","
    assert json.loads(model_file.dumps(got)) == got


def test_model_builder_in_batches_makes_model_contents_file():
    from dwstok import model_file
    from dwstok.training import ModelBuilder, model_content

    merges = [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c"), (b"a", b"bc"), (b"abc", b"\xff"), (b"\\", b"\x00"), (b'"', b"]"), (b'"]', b","), (b" ", b"["), (b'"],', b" [")]
    kw = dict(pattern="o200k-rdigits", version="32.3", metadata={"x": [1, "é"], "a": {"z": 1, "b": None}})
    want = model_content(merges, special_tokens=["<pad>", "<bos>"], **kw)
    b = ModelBuilder(["<pad>", "<bos>"])
    for first, n in ((0, 1), (1, 0), (1, 3), (4, 6)):  # an empty batch too
        b.add(first, merges[first : first + n])
    got = b.content(**kw)
    assert got == want and got["sha256"] == want["sha256"] == model_file.content_hash(want)
    assert model_file.dumps(got, b.rows()) == model_file.dumps(want)
    # starting over (the learner read a merge too early) gives the same again
    b.add(0, merges[:2])
    b.add(2, merges[2:])
    assert b.content(**kw) == want and model_file.dumps(b.content(**kw), b.rows()) == model_file.dumps(want)
    with pytest.raises(ValueError, match="merges from 3 given to a builder of 10"):
        b.add(3, merges)
    with pytest.raises(ConfigError, match="merge 0 .* uses a token no earlier merge made"):
        ModelBuilder().add(0, [(b"ab", b"c")])


def test_model_builder_with_no_merges():
    from dwstok import model_file
    from dwstok.training import ModelBuilder, model_content

    b = ModelBuilder()
    got = b.content()
    assert got == model_content([]) and model_file.dumps(got, b.rows()) == model_file.dumps(got)
