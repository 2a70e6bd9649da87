"""dwstok loading tiktoken's own rank files reproduces tiktoken's ids exactly."""

from __future__ import annotations

import json
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import regex

from dwstok import Tokenizer
from dwstok.bpe.merge import HEAP_SCRATCH

_ASSIGNED = regex.compile(r"\p{Assigned}")

ENCODINGS = {"r50k_base": "gpt2", "cl100k_base": "cl100k", "o200k_base": "o200k"}
TRICKY = list("ab AB\n\r\t '’sStTdDlLvVmMrReE1234١٢३٤ 語日本éÉ\u0301\u0308ǅʰ😀🇺🇸/.,!?-_()<>|\u00a0\u2028\u3000\ue000\U000e0001")


def _known_to_tiktoken(c: str) -> bool:
    """False for code points assigned after the Unicode that tiktoken's regex tables know.

    The scanner classes characters as the installed ``regex`` module does (Unicode 16+),
    tiktoken as Rust's regex crate does (Unicode 15): a letter added since (CJK
    Extension J at U+323B0, and later) is a letter to one and unassigned to the other.
    Python's ``unicodedata`` is older than both, so anything it calls unassigned but
    ``regex`` calls assigned is left out rather than compared.
    """
    return unicodedata.category(c) != "Cn" or not _ASSIGNED.match(c)


TEXT = (
    st.text(st.characters(blacklist_categories=("Cs",)).filter(_known_to_tiktoken), max_size=60)
    | st.text(alphabet=TRICKY, max_size=120)
    | st.lists(st.sampled_from(["don't", " I'M", "  ", "\r\n", " \n ", "123456", " ab'll", "Hello", "ΣΣ", " !!\n/", "\t\t"]), max_size=30).map("".join)
)


@pytest.fixture(scope="module", params=list(ENCODINGS))
def pair(request, reftok, tiktoken_cache):
    import tiktoken
    import tiktoken.load

    name = request.param
    spec = json.loads((reftok / "encodings.json").read_text())["encodings"][name]
    ours = Tokenizer.from_tiktoken(reftok / spec["file"], pattern=ENCODINGS[name], special_tokens=spec["special_tokens"])
    assert ours.pattern == spec["pat_str"]  # the named pattern is tiktoken's exact string
    ranks = tiktoken.load.load_tiktoken_bpe(str(reftok / spec["file"]), expected_hash=spec["sha256"])
    theirs = tiktoken.Encoding(name, pat_str=spec["pat_str"], mergeable_ranks=ranks, special_tokens=spec["special_tokens"])
    return name, ours, theirs


def test_golden(pair):
    name, ours, _ = pair
    if name == "cl100k_base":
        assert ours.encode(" strawberry") == [73700]
        assert ours.encode("strawberry") == [496, 675, 15717]
    if name == "r50k_base":
        assert ours.encode(" SolidGoldMagikarp") == [43453]


@settings(max_examples=300, deadline=None)
@given(text=TEXT)
def test_hypothesis_strings(pair, text):
    _, ours, theirs = pair
    ids = ours.encode(text)
    assert ids == theirs.encode_ordinary(text)
    assert ours.decode(ids) == text


def test_specials(pair):
    _, ours, theirs = pair
    text = "a<|endoftext|>b"
    assert ours.encode(text) == theirs.encode_ordinary(text)
    assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")


def test_every_piece_of_one_or_two_bytes(pair):
    # The encoder settles such pieces from a table (BpeTables.small_ids), with no lookup
    # and no merge: all 65,792 of them must be tiktoken's ids (its BPE of one piece, no
    # pattern: a byte alone is no valid text).
    from .test_bpe import _unpacked

    _, ours, theirs = pair
    got = [_unpacked(r) for r in ours._kernels()[1].small_ids.tolist()]
    pieces = [bytes([b]) for b in range(256)] + [bytes([a, b]) for a in range(256) for b in range(256)]
    assert got == [theirs._encode_single_piece(p) for p in pieces]


def test_long_runs(pair):
    _, ours, theirs = pair
    runs = [" " * 3000 + "x", "a" * 3000, "7" * 3001, "語" * 1500, "\n" * 2000 + " a", "ab" * 1500, "─═" * 700]
    # merged alone in the preallocated heap arrays (up to HEAP_SCRATCH bytes), or past them
    runs += [" " + "é" * 2047 + "a", "a" * HEAP_SCRATCH, "a" * (HEAP_SCRATCH + 1), "ก" * (HEAP_SCRATCH // 3 + 1)]
    for text in runs + ["┌" + "─" * k + "┐" for k in (63, 64, 65, 500, 2917)]:
        assert ours.encode(text) == theirs.encode_ordinary(text)


# Bytes a caller may hand encode_utf8_batch that are no UTF-8: characters cut short, a
# surrogate, an overlong form, past U+10FFFF, a lone continuation byte; between text
# that is, and anything at all.
NOT_UTF8 = [b"\xe2\x94", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xf0\x9f\x98", b"\x80", b"\xff"]
ANY_BYTES = st.lists(
    st.binary(max_size=40) | st.text(alphabet=TRICKY, max_size=40).map(str.encode) | st.sampled_from(NOT_UTF8), max_size=12
).map(b"".join)


@settings(max_examples=150, deadline=None)
@given(docs=st.lists(ANY_BYTES, max_size=6))
def test_any_bytes_decode_back_and_encode_as_they_do_alone(pair, docs):
    """Byte-level BPE has a token for every byte, so bytes that are no UTF-8 encode too:
    each document of a batch decodes back to its bytes, gets the ids it gets alone, and
    tiktoken's where it is UTF-8. The batch's windows and pieces see invalid sequences
    at every offset (``make test-bounds`` runs this with every index checked)."""
    _, ours, theirs = pair
    data = np.frombuffer(b"".join(docs), np.uint8)
    offsets = np.cumsum([0] + [len(d) for d in docs])
    ids, doc = ours.encode_utf8_batch(data, offsets, num_threads=1)
    for i, d in enumerate(docs):
        alone, _ = ours.encode_utf8_batch(np.frombuffer(d, np.uint8), np.array([0, len(d)]), num_threads=1)
        assert ids[doc[i] : doc[i + 1]].tolist() == alone.tolist()
        assert ours.decode_bytes(alone) == d
        try:
            text = d.decode()
        except UnicodeDecodeError:
            continue
        if all(_known_to_tiktoken(c) for c in text):
            assert alone.tolist() == theirs.encode_ordinary(text)


def _dev_docs(corpus_dir, n=None, split="dev"):
    import pyarrow.parquet as pq

    texts = pq.read_table(corpus_dir / f"{split}.parquet", columns=["text"]).column("text").to_pylist()
    if n is not None:
        rng = np.random.default_rng(0)
        texts = [texts[i] for i in sorted(rng.choice(len(texts), n, replace=False))]
    return texts


def _check_docs(ours, theirs, texts):
    data = np.frombuffer("".join(texts).encode(), np.uint8)
    offsets = np.cumsum([0] + [len(t.encode()) for t in texts])
    ids, doc = ours.encode_utf8_batch(data, offsets, num_threads=2)
    bad = [i for i, t in enumerate(texts) if ids[doc[i] : doc[i + 1]].tolist() != theirs.encode_ordinary(t)]
    return bad, ids


def test_dev_sample(pair, corpus_dir):
    _, ours, theirs = pair
    texts = _dev_docs(corpus_dir, 150)
    bad, ids = _check_docs(ours, theirs, texts)
    assert bad == []
    assert ours.decode(ids) == "".join(texts)
    # document by document too (a pooled piece cache carries over between calls)
    assert [i for i, t in enumerate(texts) if ours.encode(t) != theirs.encode_ordinary(t)] == []


def test_short_documents_in_a_batch(pair, corpus_dir):
    # A batch's documents of up to FEW_PIECES pieces are encoded a piece at a time
    # (_encode_few), the others in blocks (_encode_span): both against tiktoken, mixed.
    from dwstok.bpe.encode import FEW_PIECES

    _, ours, theirs = pair
    rng = np.random.default_rng(1)
    texts = []
    for doc in _dev_docs(corpus_dir, 40):
        at = 0
        while at < len(doc) and len(texts) < 3000:
            k = int(rng.integers(1, 160))
            texts.append(doc[at : at + k])
            at += k
    pieces = [ours._scanner.bounds(np.frombuffer(t.encode(), np.uint8)).size - 1 for t in texts]
    assert sum(p <= FEW_PIECES for p in pieces) > 500 and sum(p > FEW_PIECES for p in pieces) > 500
    bad, _ = _check_docs(ours, theirs, texts)
    assert bad == []
    assert ours.encode_batch(texts, num_threads=1) == [theirs.encode_ordinary(t) for t in texts]


@pytest.mark.slow
@pytest.mark.parametrize("split", ["dev", "train"])
def test_whole_corpus(pair, corpus_dir, split):
    name, ours, theirs = pair
    texts = _dev_docs(corpus_dir, split=split)
    bad, _ = _check_docs(ours, theirs, texts)
    print(f"{name} {split}: {len(texts)} documents, {len(bad)} mismatches")
    assert bad == []
