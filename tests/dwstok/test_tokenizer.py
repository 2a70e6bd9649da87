"""Tokenizer API: construction, specials, batches, streams, decoding, bad input."""

from __future__ import annotations

import contextlib
import itertools
import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dwstok import Tokenizer
from dwstok.decoding import TokenIdError
from dwstok.errors import DwstokError, ModelFileError

from .test_bpe import random_merges

NAMED = ["<pad>", "<bos>", "<eos>", "<unk>", "<mask>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>",
         "<sep>", "<code>", "</code>", "<think>", "</think>"]
SPECIALS = {name: i for i, name in enumerate(NAMED + [f"<reserved_{i}>" for i in range(13, 32)])}
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80) | st.text(
    alphabet=list("ab c\n\r\t'sS1234 ١٢語é\u0301😀<>bos|/.,"), max_size=120
)


def dwslm_layout(merges, pattern="o200k"):
    """The trainer's layout: specials 0..31, byte b at 32 + b, merge k at 288 + k."""
    vocab = {32 + b: bytes([b]) for b in range(256)}
    for k, (a, b) in enumerate(merges):
        vocab[288 + k] = a + b
    return Tokenizer.from_vocab_merges(vocab, merges, special_tokens=SPECIALS, pattern=pattern, version="32.1")


@pytest.fixture(scope="module")
def tok():
    merges = [(b" ", b"t"), (b"h", b"e"), (b" t", b"he"), (b"a", b"a"), (b"aa", b"a"), (b"<", b"b")]
    merges += [m for m in random_merges(7, 200, b"ab c<>os|") if m not in merges]
    return dwslm_layout(merges)


def test_golden_from_vocab_merges():
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"a", b"a"), (b"aa", b"a"), (b"aaa", b"b")])
    assert tok.encode("aaabdaaabac") == [258, 100, 258, 97, 99]
    assert tok.n_vocab == 259 and tok.merge_rule == "merges" and tok.pattern_name == "o200k"
    assert tok.merges == [(b"a", b"a"), (b"aa", b"a"), (b"aaa", b"b")]


def test_dwslm_layout(tok):
    assert tok.n_vocab == 288 + len(tok.merges)
    assert tok.vocab[0] == b"<pad>" and tok.vocab[32] == b"\x00" and tok.vocab[32 + 97] == b"a"
    assert tok.vocab[288] == b" t" and tok.special_tokens["</think>"] == 12
    assert tok.encode(" the") == [290]
    assert tok.version == "32.1"


def test_special_names_after_vocab_for_a_sequence():
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"a", b"b")], special_tokens=["<bos>", "<eos>"])
    assert tok.special_tokens == {"<bos>": 257, "<eos>": 258}
    assert tok.n_vocab == 259


@settings(max_examples=150, deadline=None)
@given(text=TEXT)
def test_roundtrip_and_no_special_ids(tok, text):
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert all(i >= 32 for i in ids)
    assert tok.encode_to_numpy(text).tolist() == ids


def _held(a: np.ndarray) -> int:
    """Bytes of the memory ``a`` keeps alive (its base: an array, or Numba's MemInfo)."""
    return a.nbytes if a.base is None else memoryview(a.base).nbytes


def test_encode_to_numpy_holds_no_more_memory_than_its_ids():
    # The kernel writes into room for one id a byte; the array returned must not keep
    # that room alive (a caller keeping one array per document would hold ~5x the ids).
    merges = [(b"a", b"a"), (b"aa", b"aa"), (b"aaaa", b"aaaa")]
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
    ids = tok.encode_to_numpy(" aaaaaaaa" * 100)  # a space and one token per 9 bytes
    assert ids.size == 200
    assert _held(ids) == ids.nbytes


@pytest.mark.parametrize("threads", [1, 2])
def test_encode_utf8_batch_holds_no_more_memory_than_its_ids(threads):
    merges = [(b"a", b"a"), (b"aa", b"aa"), (b"aaaa", b"aaaa")]
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
    docs = [(" aaaaaaaa" * 100).encode()] * 3
    offsets = np.cumsum([0] + [len(d) for d in docs])
    ids, doc = tok.encode_utf8_batch(np.frombuffer(b"".join(docs), np.uint8), offsets, num_threads=threads)
    assert ids.size == 600 and doc.tolist() == [0, 200, 400, 600]
    assert _held(ids) == ids.nbytes


def test_special_text_is_ordinary_unless_allowed(tok):
    text = "<bos>hi<eos><bos>"
    plain = tok.encode(text)
    assert all(i >= 32 for i in plain) and tok.decode(plain) == text
    ids = tok.encode(text, allowed_special={"<bos>"})
    assert ids[0] == 1 and ids[-1] == 1 and 2 not in ids
    assert tok.decode(ids) == text
    assert tok.encode(text, allowed_special="all") == [1, *tok.encode("hi"), 2, 1]
    with pytest.raises(DwstokError, match="allowed_special"):
        tok.encode(text, allowed_special={"<nope>"})


def test_longest_special_first():
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [], special_tokens=["<a>", "<a><b>"])
    assert tok.encode("<a><b><a>", allowed_special="all") == [257, 256]


def test_encode_batch_and_utf8_batch(tok):
    texts = ["the cat", "", "aaaa<bos>", "語 é 😀", " " * 300, "x" * 5000]
    want = [tok.encode(t) for t in texts]
    for threads in (1, 2, 4):
        assert tok.encode_batch(texts, num_threads=threads) == want
    data = np.frombuffer("".join(texts).encode(), np.uint8)
    offsets = np.cumsum([0] + [len(t.encode()) for t in texts])
    ids, doc = tok.encode_utf8_batch(data, offsets, num_threads=2)
    assert ids.dtype == np.uint32 and doc.dtype == np.int64 and doc.size == len(texts) + 1
    assert [ids[doc[i] : doc[i + 1]].tolist() for i in range(len(texts))] == want
    # a slice of a larger buffer (offsets need not start at 0)
    ids, doc = tok.encode_utf8_batch(data, offsets[2:5])
    assert ids.tolist() == want[2] + want[3] and doc.tolist() == [0, len(want[2]), len(want[2]) + len(want[3])]


def test_encode_batch_regex_fallback():
    pat = r"\S+|\s+"
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"a", b"b")], pattern=pat)
    assert tok.pattern_name is None and tok.pattern == pat
    texts = ["ab ab", "", "cab\n\nab"]
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts] == [[256, 32, 256], [], [99, 256, 10, 10, 256]]


@settings(max_examples=120, deadline=None)
@given(text=TEXT, cuts=st.lists(st.integers(0, 200), max_size=8), specials=st.booleans())
def test_encode_iterable_equals_encode(tok, text, cuts, specials):
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    chunks = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    allowed = "all" if specials else ()
    assert list(tok.encode_iterable(iter(chunks), allowed_special=allowed)) == tok.encode(text, allowed_special=allowed)


@pytest.mark.parametrize(
    "text",
    ["don't stop", "a  \n  \n  b", "x \t\n\n   ", "12345678901", "foo   bar", "<bos><eos>", "<bo", "a'll", "HeLLo WoRLD's"],
)
def test_encode_iterable_char_by_char(tok, text):
    for allowed in ((), "all"):
        assert list(tok.encode_iterable(iter(text), allowed_special=allowed)) == tok.encode(text, allowed_special=allowed)


def test_encode_iterable_rdigits_and_long_runs():
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"1", b"2")], pattern="o200k-rdigits")
    text = "1234567 " + "9" * 50 + "12"
    assert list(tok.encode_iterable(iter(text))) == tok.encode(text)
    chunks = ["a" * 1000] * 200 + [" b"]  # a long run in small chunks is not rescanned each time
    assert list(tok.encode_iterable(iter(chunks))) == tok.encode("".join(chunks))


def test_encode_iterable_is_lazy(tok):
    def chunks():
        yield "the cat sat on the mat. " * 10
        raise RuntimeError("stop")

    it = tok.encode_iterable(chunks())
    first = [next(it) for _ in range(5)]
    assert first == tok.encode("the cat sat on the mat.")[:5]


def test_decode_variants(tok):
    ids = tok.encode("héllo 語")
    assert tok.decode_bytes(ids) == "héllo 語".encode()
    assert tok.decode(np.array(ids, np.uint32)) == "héllo 語"
    assert tok.decode([1, *tok.encode("x")]) == "<bos>x"
    split = [32 + b for b in "語".encode()]
    with pytest.raises(UnicodeDecodeError, match="errors='replace'"):
        tok.decode(split[:2])
    assert tok.decode(split[:2], errors="replace") == "\ufffd"


def test_decode_stream(tok):
    text = "a語é😀 b"
    ids = [32 + b for b in text.encode()]
    stream = tok.decode_stream()
    got = [stream.feed(i) for i in ids]
    assert "".join(got) + stream.finish() == text
    assert got[1:4] == ["", "", "語"]  # nothing until the character is whole
    assert "".join(tok.decode_stream(ids)) == text
    s = tok.decode_stream(errors="replace")
    s.feed(ids[1])
    assert s.finish() == "\ufffd"
    s = tok.decode_stream()
    s.feed(ids[1])
    with pytest.raises(UnicodeDecodeError):
        s.finish()


@pytest.mark.parametrize("bad", [[-1], [10**6], [5, 99999], [2**63 + 5]])
def test_decode_out_of_range(tok, bad):
    with pytest.raises(TokenIdError, match="out of range"):
        tok.decode(np.array(bad, np.uint64) if bad[0] > 2**62 else bad)
    with pytest.raises(TokenIdError):
        tok.decode_stream().feed(bad[-1])


def test_decode_gap_id():
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [], special_tokens={"<x>": 300})
    with pytest.raises(TokenIdError, match="not in the vocabulary"):
        tok.decode([280])
    assert tok.decode([300]) == "<x>"


def test_lone_surrogate_names_position(tok):
    with pytest.raises(ValueError, match="position 3"):
        tok.encode("abc\ud800def")
    with pytest.raises(ValueError, match="position 1"):
        tok.encode_batch(["ok", "x\udfff"])
    # In a stream, positions count from the start of the stream, not of the held-back text.
    stream = ["hello world. ", "Next line\n", "more text ", "x\ud800"]
    for allowed in ((), "all"):
        with pytest.raises(ValueError, match="lone surrogate '\\\\ud800' at position 34"):
            list(tok.encode_iterable(stream, allowed_special=allowed))
        with pytest.raises(ValueError, match="position 9"):
            list(tok.encode_iterable(["hello ", "wo", "r\ud800ld"], allowed_special=allowed))
    with pytest.raises(TypeError):
        tok.encode(b"bytes")


def test_bad_models():
    with pytest.raises(ModelFileError, match="one-byte"):
        Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(200)}, [])
    with pytest.raises(ModelFileError, match="neither in vocab"):
        Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"ab", b"c")])


def test_merges_of_a_tiktoken_model(tmp_path):
    # a tiny rank file: the derived merges rebuild every token
    import base64

    extra = [b"ab", b"abc", b"bc", b"abcabc"]
    lines = [base64.b64encode(bytes([b])) + b" %d" % b for b in range(256)]
    lines += [base64.b64encode(t) + b" %d" % (256 + i) for i, t in enumerate(extra)]
    f = tmp_path / "tiny.tiktoken"
    f.write_bytes(b"\n".join(lines) + b"\n")
    tok = Tokenizer.from_tiktoken(f, pattern="gpt2", special_tokens={"<|endoftext|>": 260})
    assert tok.merge_rule == "ranks" and tok.n_vocab == 261
    assert tok.merges == [(b"a", b"b"), (b"ab", b"c"), (b"b", b"c"), (b"abc", b"abc")]
    assert tok.encode("abcabc") == [259] and tok.encode("xabc") == [120, 257]
    assert json.loads(json.dumps(tok.metadata)) == tok.metadata


def test_pickles_for_process_pools(tok):
    import pickle

    tok.encode("warm the piece caches")
    tok.encode_to_numpy("and its pooled numpy path")
    data = pickle.dumps(tok)
    back = pickle.loads(data)
    assert back.encode("the cat <bos>") == tok.encode("the cat <bos>") and back.sha256 == tok.sha256
    assert back.encode_to_numpy("the cat").tolist() == tok.encode("the cat")
    # The tables go once (packed), not again as the views the Tokenizer also keeps; the
    # scanner is made again from the pattern.
    assert len(data) < tok._packed.nbytes + 100_000
    assert back._scanner is tok._scanner  # the same process: get_scanner's cache
    assert np.shares_memory(back._tables.pairs, back._packed)


def test_concurrent_callers_each_take_their_own_piece_cache(tok):
    # Kernels write to the cache they are given; the pool hands one to each caller.
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"the cat {i} sat on the mat {i * i} times, abcabc xabc" for i in range(50)]
    want = [tok.encode(t) for t in texts]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(tok.encode, texts * 20))
    assert got == want * 20
    assert 1 <= len(tok._caches.free) <= 4
    ids, offsets = tok.encode_utf8_batch(*_utf8_batch(texts), num_threads=2)
    assert [ids[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == want


def test_piece_cache_grows_with_use():
    # Short texts keep a small cache; once a quarter full it comes back with 8 times the
    # slots and its entries; a call on more text than a cache was sized for gets a cache
    # sized for it; the biggest cache stays. The ids never change.
    from dwstok import bpe

    merges = [(b"a", b"b"), (b"ab", b"c")]
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
    fresh = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
    free = tok._caches.free
    tok.encode_to_numpy("abc abc")
    ((small, _),) = free.values()
    assert bpe.cache_capacity(small) == tok._caches.MIN_BYTES
    slots = tok._caches.MIN_BYTES // 8
    # distinct pieces that are no token: more than a quarter of the slots, fewer than half
    words = ["".join(p) for p in itertools.product("xyzw", repeat=6)][: slots * 3 // 8]
    text = " ".join(words)
    want = fresh.encode_to_numpy(text).tolist()
    assert tok.encode_to_numpy(text).tolist() == want
    ((grown, _),) = free.values()
    used = int(grown[1])  # state[0]: slots in use
    assert bpe.cache_capacity(grown) == 8 * tok._caches.MIN_BYTES and used >= len(words)
    assert tok.encode_to_numpy(text).tolist() == want
    assert len(free) == 1 and free[0][0] is grown and grown[1] == used  # every piece found in the grown cache
    big = text * 40  # more text than the cache was sized for
    assert tok.encode_to_numpy(big).tolist() == fresh.encode_to_numpy(big).tolist()
    assert bpe.cache_capacity(free[0][0]) >= min(len(big), bpe.CACHE_MAX_CAPACITY)
    # The biggest cache never grows: it starts afresh when half full.
    top = bpe.new_cache(bpe.CACHE_MAX_CAPACITY)
    free[0] = (top, free[0][1])
    tok.encode_to_numpy("abc")
    assert len(free) == 1 and free[0][0] is top


def test_a_cache_past_a_sixteenth_full_is_flagged_soon_once_per_step_not_per_call(monkeypatch):
    # Between a sixteenth and a quarter full, the kernel flags GROW_SOON only when the
    # pool's CACHE_SOON_AT says so: the same texts again add no entries, so the pool's
    # Python code runs once, not on every call; new entries flag it again, and the
    # cache still grows at a quarter, with the same ids. (No spare CPU: the next cache
    # is cleared a slice at a time, so it is not ready, and never flagged again, early.)
    from dwstok import bpe
    from dwstok import tokenizer as tokenizer_module

    monkeypatch.setattr(tokenizer_module, "_spare_cpu", lambda threads: False)

    merges = [(b"a", b"b"), (b"ab", b"c")]
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
    fresh = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
    pool = tok._caches
    handled = []
    real = pool._grown
    pool._grown = lambda cache, threads: handled.append(int(cache[bpe.CACHE_GROW])) or real(cache, threads)
    tok.encode("abc")
    ((small, _),) = pool.free.values()
    slots = int(small[0])
    words = ["".join(p) for p in itertools.product("xyzw", repeat=6)]
    text = " ".join(words[: slots // 8])  # an eighth of the slots: past a sixteenth
    for _ in range(50):
        assert tok.encode(text) == fresh.encode(text)
    assert handled == [bpe.GROW_SOON]
    assert int(small[bpe.CACHE_SOON_AT]) > int(small[1]) and int(small[bpe.CACHE_GROW]) == 0
    more = " ".join(words[slots // 8 : slots // 8 + slots // 64])  # 1/64 of the slots more
    assert tok.encode(more) == fresh.encode(more)
    assert len(handled) == 2
    grow = " ".join(words[: slots * 3 // 8])  # past a quarter
    assert tok.encode_to_numpy(grow).tolist() == fresh.encode_to_numpy(grow).tolist()
    ((cache, _),) = pool.free.values()
    assert bpe.cache_capacity(cache) == 8 * bpe.cache_capacity(small)
    assert tok.encode(grow) == fresh.encode(grow)


def test_every_cache_and_out_has_the_types_the_kernel_was_resolved_for():
    # encode() and encode_to_numpy() call the scanner's compiled kernel without Numba's
    # dispatcher (_jit.compiled_entry), and that checks no types: every cache and out
    # the pool hands out (new, grown, sized for a long text, on huge pages) must have
    # the types the kernel was resolved for, or it would read them as those.
    import numba

    from dwstok import bpe
    from dwstok.tokenizer import _NO_CACHE, _NO_IDS

    merges = [(b"a", b"b")]
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
    fresh = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
    words = ["".join(p) for p in itertools.product("xyzw", repeat=6)]
    for text in ("ab", " ".join(words[:2000]), " ".join(words) * 3):  # new, grown, sized for the text
        tok.encode(text)
        tok.encode_to_numpy(text)
        ((cache, out),) = tok._caches.free.values()
        assert numba.typeof(cache) == numba.typeof(_NO_CACHE)
        assert numba.typeof(out) == numba.typeof(_NO_IDS)
    assert bpe.cache_capacity(cache) > tok._caches.MIN_BYTES
    top = bpe.new_cache(bpe.CACHE_MAX_CAPACITY)  # the biggest, on huge pages where Linux gives them
    assert numba.typeof(top) == numba.typeof(_NO_CACHE)
    tok._caches.free[0] = (top, out)
    text = " ".join(words[:50]) + " abab"
    assert tok.encode(text) == tok.encode_to_numpy(text).tolist() == fresh.encode_to_numpy(text).tolist()


def test_a_cache_of_half_the_most_slots_grows_only_past_three_eighths():
    # The last step only doubles a cache, into the biggest array: a cache of
    # CACHE_SLOTS / 2 slots stays as it is past a quarter full, and grows past 3/8
    # (here past 7/16, where it no longer waits for a successor cleared on a thread
    # of its own). The ids never change.
    from dwstok import bpe

    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"x", b"y")])
    fresh = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"x", b"y")])
    half = bpe.CACHE_SLOTS // 2
    tok.encode_to_numpy("xy")
    free = tok._caches.free
    ((_, ids),) = free.values()
    free[0] = (bpe.new_cache(8 * half), ids)
    # distinct pieces that are no token, in calls on less text than the cache is sized for
    words = ["".join(p) for p in itertools.product("abcdefgh", repeat=6)]
    quarter, past = half * 5 // 16, half * 15 // 32  # 0.31 and 0.47 of the slots

    def encode(part):
        for k in range(0, len(part), 20000):
            text = " ".join(part[k : k + 20000])
            assert tok.encode_to_numpy(text).tolist() == fresh.encode_to_numpy(text).tolist()

    encode(words[:quarter])
    ((cache, _),) = free.values()
    assert int(cache[0]) == half and int(cache[1]) >= quarter  # not grown
    encode(words[quarter:past])
    ((cache, _),) = free.values()
    assert int(cache[0]) == bpe.CACHE_SLOTS and int(cache[1]) >= past  # grown, its entries kept
    text = " ".join(words[:past:7])
    assert tok.encode_to_numpy(text).tolist() == fresh.encode_to_numpy(text).tolist()


def test_piece_cache_grows_into_memory_made_ready_on_another_thread(monkeypatch):
    # With a CPU to spare, a sixteenth full, a cache's successor is cleared on a thread
    # of its own; a quarter full, the cache moves into it once that thread is done (not
    # before, short of 7/16 full). A forked child, where that thread never ran, grows as
    # before. With no CPU to spare, the successor is cleared a slice after each call
    # (see the next test). The ids never change.
    import dwstok.tokenizer as tokenizer_module

    merges = [(b"a", b"b"), (b"ab", b"c")]
    fresh = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
    words = ["".join(p) for p in itertools.product("xyzw", repeat=6)]
    slots = tokenizer_module._CachePool.MIN_BYTES // 8
    soon = " ".join(words[: slots // 8])  # more than a sixteenth of the slots, less than a quarter
    now = " ".join(words[slots // 8 : slots * 3 // 8])  # then past a quarter

    for case in ("spare", "forked", "busy"):
        monkeypatch.setattr(tokenizer_module, "_spare_cpu", lambda threads: case != "busy")
        tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
        pool = tok._caches
        assert tok.encode(soon) == fresh.encode(soon)
        ((small, _),) = pool.free.values()
        nxt = pool._next[id(small)]
        assert nxt.background == (case != "busy")
        if nxt.background:
            assert nxt.ready()[0] == 8 * slots  # cleared, sized 8 times
        if case == "forked":
            monkeypatch.setattr(nxt, "_pid", -1)
        assert tok.encode(now) == fresh.encode(now)
        ((grown, _),) = pool.free.values()
        assert grown[0] == 8 * slots and not pool._next
        assert (grown is nxt._array) == (case != "forked")
        assert tok.encode(soon + " " + now) == fresh.encode(soon + " " + now)
        assert pool.free[0][0] is grown  # every piece found: no growth, no start afresh
        assert grown[1] >= slots * 3 // 8 - 1  # the entries moved with it


def test_piece_cache_without_a_spare_cpu_clears_its_successor_a_slice_after_each_call(monkeypatch):
    # On CPUs the calls keep busy, the successor of a cache a sixteenth full is cleared
    # by the calls that use the cache, each after its work, in proportion to the
    # entries it added: all of it by 3/16 full, before the call that grows (at a
    # quarter), which then only moves the entries.
    import dwstok.tokenizer as tokenizer_module
    from dwstok import bpe

    monkeypatch.setattr(tokenizer_module, "_spare_cpu", lambda threads: False)
    merges = [(b"a", b"b"), (b"ab", b"c")]
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
    fresh = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
    words = ["".join(p) for p in itertools.product("xyzw", repeat=6)]
    slots = tokenizer_module._CachePool.MIN_BYTES // 8
    pool = tok._caches
    at = slots // 16 + 8
    assert tok.encode(" ".join(words[:at])) == fresh.encode(" ".join(words[:at]))
    ((small, _),) = pool.free.values()
    nxt = pool._next[id(small)]
    assert not nxt.background and nxt._cleared == 0
    cleared = [0]
    while not nxt.done():
        text = " ".join(words[at : at + slots // 32])
        at += slots // 32
        assert tok.encode(text) == fresh.encode(text)
        assert pool.free[0][0] is small and pool._next[id(small)] is nxt  # not grown yet
        assert nxt._cleared > cleared[-1]  # a slice after each call
        cleared.append(nxt._cleared)
    assert len(cleared) > 3 and small[1] <= 3 * slots // 16 + slots // 32
    size, a = 8 * slots, nxt._array  # cleared as a new cache: the head, the slots (-1), the front
    assert a[0] == size and not a[1:8].any() and (a[8 : 8 + 4 * size] == -1).all() and not a[8 + 7 * size :].any()
    rest = " ".join(words[at : slots * 3 // 8])  # past a quarter: it grows
    assert tok.encode(rest) == fresh.encode(rest)
    ((grown, _),) = pool.free.values()
    assert grown is nxt._array and grown[0] == 8 * slots and not pool._next
    everything = " ".join(words[: slots * 3 // 8])
    assert tok.encode(everything) == fresh.encode(everything)
    assert pool.free[0][0] is grown and grown[1] >= slots * 3 // 8 - 1  # every entry moved with it
    # A batch on 2 threads takes caches sized for _THREADED_CACHE_BYTES from the start
    # (2^18 slots); the same batch on one thread, the pool's small ones.
    big = [" ".join(words)] * 6  # enough text to run on 2 threads
    want = [fresh.encode(d) for d in big]
    for threads in (1, 2):
        tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
        tok.encode("ab")  # (the kernels loaded: a first batch without them may take another way)
        assert tok.encode_batch(big, num_threads=threads) == want
        sizes = {bpe.cache_capacity(c) for c, _ in tok._caches.free.values()}
        if threads == 1:
            assert max(sizes) < tokenizer_module._THREADED_CACHE_BYTES
        else:
            assert sizes == {tokenizer_module._THREADED_CACHE_BYTES}  # (one or two: a thread may take both ranges)
    docs = [" ".join(words[i * slots // 8 : (i + 1) * slots // 8]) for i in range(2)]
    # Calls on 2 threads that keep the CPUs busy: no slices (they slowed such batches
    # down); each cache grows when it must. (Caches as small as one thread's, so that
    # these docs pass a sixteenth.)
    monkeypatch.setattr(tokenizer_module, "_THREADED_CACHE_BYTES", tokenizer_module._CachePool.MIN_BYTES)
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
    assert tok.encode_batch(docs, num_threads=2) == [fresh.encode(d) for d in docs]
    assert tok._caches._next and all(v is False for v in tok._caches._next.values())


def test_piece_cache_grows_when_no_thread_can_start(monkeypatch):
    # At interpreter shutdown, or at a limit on threads, Thread.start raises: the call
    # must not fail for it, and the cache grows on the calling thread.
    import threading

    import dwstok.tokenizer as tokenizer_module

    def refuse(self):
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(tokenizer_module, "_spare_cpu", lambda threads: True)
    monkeypatch.setattr(threading.Thread, "start", refuse)
    merges = [(b"a", b"b"), (b"ab", b"c")]
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
    fresh = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, merges)
    words = ["".join(p) for p in itertools.product("xyzw", repeat=6)]
    slots = tokenizer_module._CachePool.MIN_BYTES // 8
    for text in (" ".join(words[: slots // 8]), " ".join(words[slots // 8 : slots * 3 // 8])):
        assert tok.encode(text) == fresh.encode(text)
    ((grown, _),) = tok._caches.free.values()
    assert grown[0] == 8 * slots and not tok._caches._next


def test_single_calls_write_ids_to_pooled_room_but_return_their_own():
    # A call's kernel writes its ids to room that goes back to the pool: what a call
    # returns must be its own, unchanged by later calls; room bigger than MAX_IDS is
    # dropped after its call, not kept.
    import numpy as np

    from dwstok import bpe

    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"a", b"b")])
    first = tok.encode_to_numpy("ab ab ab")
    as_list = tok.encode("ab " * 50)  # past FILL_FROM: the list is filled from cached ints
    tok.encode_to_numpy("zzzz " * 40)
    assert first.tolist() == [256, 32, 256, 32, 256] and first.flags.owndata
    assert as_list == [256, 32] * 49 + [256, 32]
    ((_, room),) = tok._caches.free.values()
    assert room.size == tok._caches.MIN_IDS
    tok._caches.MAX_IDS = 64
    text = "ab " * 2000
    assert tok.encode(text) == [256, 32] * 2000
    ((_, room),) = tok._caches.free.values()
    assert room.size == 0  # dropped: the next call makes room again
    assert tok.encode_to_numpy("ab").tolist() == [256]
    sc = tok._scanner
    kernel = bpe.fused_kernel(sc.kind)
    cache = bpe.new_cache(64)
    with pytest.raises(ValueError, match="room"):
        kernel(sc.kind, sc.table, b"abc", tok._native[0], cache, np.empty(2, np.uint32))


def test_threads_with_texts_of_every_size_get_their_own_ids():
    # Room for ids is pooled: callers on several threads, with texts that fit the room and
    # texts that make it grow, must each get their own ids, and arrays already returned
    # must not change.
    from concurrent.futures import ThreadPoolExecutor

    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"a", b"b"), (b"ab", b"c")])
    texts = [("abc " * n + f"x{n}") for n in (1, 3, 700, 5, 2000, 40, 9000, 2)] * 6
    want = [tok.encode(t) for t in texts]
    with ThreadPoolExecutor(4) as ex:
        arrays = list(ex.map(tok.encode_to_numpy, texts))
        lists = list(ex.map(tok.encode, texts))
    assert lists == want
    assert [a.tolist() for a in arrays] == want


@pytest.mark.parametrize("nwords", [3000, 5])
def test_grown_cache_finds_pieces_of_every_length(nwords):
    # Growing moves each slot and rehashes it from its words (heads, then the tail in
    # keys): pieces of 1 to 40 bytes must all be found again, none merged twice. The
    # copy asks for new slots ahead of placing them (bpe.cache._COPY_AHEAD): many
    # entries, and fewer than it asks ahead for.
    import random

    from dwstok import bpe

    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"x", b"y")])
    rng = random.Random(7)
    words = sorted({"".join(rng.choice("xyzwé") for _ in range(rng.randint(1, 40))) for _ in range(nwords)})
    text = " ".join(words)
    want = tok.encode_to_numpy(text).tolist()
    assert tok.encode_to_numpy(text).tolist() == want  # a first call caches only some
    ((cache, ids),) = tok._caches.free.values()
    assert cache[1] > (2000 if nwords > 100 else 2)
    cache = bpe.grown_cache(cache, 64 * bpe.cache_capacity(cache))
    used = int(cache[1])
    tok._caches.free[0] = (cache, ids)
    assert tok.encode_to_numpy(text).tolist() == want
    assert tok._caches.free[0][0] is cache and cache[1] == used  # all found: nothing added


def _utf8_batch(texts):
    import numpy as np

    bufs = [t.encode() for t in texts]
    offsets = np.zeros(len(bufs) + 1, np.int64)
    np.cumsum([len(b) for b in bufs], out=offsets[1:])
    return np.frombuffer(b"".join(bufs), np.uint8), offsets


def test_a_batch_encoded_again_finds_each_range_s_pieces_in_the_same_cache():
    # On 2 threads a batch runs in ranges, each with a pooled cache. A range asks for the
    # cache of its index (modulo the threads), so the same documents encoded again find
    # their pieces where they left them instead of merging them again in the other cache.
    rng = random.Random(7)
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"x", b"y")])
    fresh = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"x", b"y")])
    words = sorted({"".join(rng.choice("xyzw") for _ in range(9)) for _ in range(800)})
    texts = [" ".join(words[:400]), " ".join(words[400:])]  # two ranges, no piece in both
    want = [fresh.encode(t) for t in texts]
    pool = tok._caches
    # Two caches in the pool, as two threads leave them (a first batch may leave one:
    # when its first range is done before the second starts, both run in one cache).
    first, second = pool.take(1, slot=1), pool.take(1, slot=0)
    assert (first[2], second[2]) == (1, 0)  # a new cache takes the slot asked for
    pool.give(*first)
    pool.give(*second)
    assert tok.encode_batch(texts, num_threads=2) == want
    entries = {slot: int(cache[1]) for slot, (cache, _) in pool.free.items()}
    assert entries == {0: 400, 1: 398}  # range k in slot k: each cache holds one text's pieces
    for _ in range(8):
        assert tok.encode_batch(texts, num_threads=2) == want
        # nothing merged again: no cache took in the other range's pieces
        assert {slot: int(cache[1]) for slot, (cache, _) in pool.free.items()} == entries


_T = __import__("dwstok.tokenizer", fromlist=["_SPLIT_MIN"])
SPLIT_MIN, FEW_TEXTS = _T._SPLIT_MIN, _T._FEW_TEXTS  # read before conftest sets them to 0


def test_a_small_batch_runs_on_the_calling_thread_and_a_large_one_on_the_pool(tok, monkeypatch):
    import dwstok.tokenizer as T

    monkeypatch.setattr(T, "_SPLIT_MIN", SPLIT_MIN)
    monkeypatch.setattr(T, "_FEW_TEXTS", FEW_TEXTS)
    real = T._thread_pool
    pooled = []
    monkeypatch.setattr(T, "_thread_pool", lambda n: pooled.append(n) or real(n))
    small = ["Hello world, 2026! Grüße, 你好." * 20] * 8  # under 64 KB
    want = [tok.encode(t) for t in small]
    assert tok.encode_batch(small, num_threads=2) == want
    ids, doc = tok.encode_utf8_batch(*_utf8_batch(small), num_threads=2)
    assert [ids[a:b].tolist() for a, b in zip(doc[:-1], doc[1:])] == want
    assert pooled == []  # both on this thread
    big = [t * 40 for t in small]  # 8 documents, about 300 KB
    want = [tok.encode(t) for t in big]
    assert tok.encode_batch(big, num_threads=2) == want
    assert set(pooled) == {1}  # its ranges went to this thread and a pool of 1
    pooled.clear()
    ids, doc = tok.encode_utf8_batch(*_utf8_batch(big), num_threads=2)
    assert [ids[a:b].tolist() for a, b in zip(doc[:-1], doc[1:])] == want
    assert set(pooled) == {1}
    pooled.clear()
    assert tok.encode_batch(big[:4], num_threads=2) == want[:4]  # few texts, but 99k characters: threads
    assert set(pooled) == {1}


@contextlib.contextmanager
def _ranges_on_two_threads(monkeypatch, pool_busy: bool = True):
    """Batches cut into as many ranges as they may be, on 2 threads; with ``pool_busy``,
    the pool's one thread held on an event until the block ends. Yields that task (None
    when the pool is free)."""
    import threading

    import dwstok.tokenizer as T

    monkeypatch.setattr(T, "_SPLIT_MIN", 1)
    monkeypatch.setattr(T, "_RANGE_BYTES", 1)
    gate = threading.Event()
    busy = T._thread_pool(1).submit(gate.wait, 60) if pool_busy else None
    try:
        yield busy
    finally:
        gate.set()
    assert busy is None or busy.result() is True


def test_the_calling_thread_runs_the_ranges_that_no_pool_thread_has_started(tok, monkeypatch):
    # The pool's one thread is busy elsewhere: the batch still finishes, every range
    # encoded by the calling thread, in order, and nothing waits for the pool.
    texts = ["Hello world, 2026! Grüße, 你好. " * (50 + i) for i in range(9)]
    want = [tok.encode(t) for t in texts]
    with _ranges_on_two_threads(monkeypatch) as busy:
        ids, doc = tok.encode_utf8_batch(*_utf8_batch(texts), num_threads=2)
        assert [ids[a:b].tolist() for a, b in zip(doc[:-1], doc[1:])] == want
        assert tok.encode_batch(texts, num_threads=2) == want
        assert not busy.done()
    assert tok.encode_batch(texts, num_threads=2) == want  # the pool free again: the same ids


@pytest.mark.parametrize("pool_busy", [True, False])
def test_a_batch_reports_its_first_failing_range_whoever_ran_it(tok, monkeypatch, pool_busy):
    # Two documents with a lone surrogate, in the second range and in a later one: the
    # error names the first, whether this thread or the pool encoded the ranges.
    texts = ["Hello world, 2026! " * 40 for _ in range(8)]
    texts[1] = "ab\ud800" + texts[1]
    texts[6] = "abcde\udc00" + texts[6]
    with _ranges_on_two_threads(monkeypatch, pool_busy):
        for _ in range(5):
            with pytest.raises(ValueError, match="^document 1: .* at position 2"):
                tok.encode_batch(texts, num_threads=2)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_batch_names_the_document_that_is_no_text(tok, monkeypatch, threads):
    # Past the texts encoded one by one, the error says which document it is, counted
    # from the batch's first, whichever range and thread it falls in.
    import dwstok.tokenizer as T

    monkeypatch.setattr(T, "_FEW_TEXTS", 2)
    texts = ["Hello world, 2026! " * 40 for _ in range(8)]
    for at, bad, error in ((6, None, TypeError), (3, "x\udfff", ValueError), (0, b"ab", TypeError)):
        with _ranges_on_two_threads(monkeypatch, pool_busy=False):
            with pytest.raises(error, match=f"^document {at}: "):
                tok.encode_batch(texts[:at] + [bad] + texts[at + 1 :], num_threads=threads)


def test_a_batch_is_split_by_its_bytes_not_its_characters(tok, monkeypatch):
    # Gurmukhi is 3 bytes a character in UTF-8: a batch of 1.5 _SPLIT_MIN bytes has half
    # that many characters, and still goes to two ranges, cut about where the bytes halve.
    import dwstok.tokenizer as T

    monkeypatch.setattr(T, "_SPLIT_MIN", SPLIT_MIN)
    monkeypatch.setattr(T, "_RANGE_BYTES", SPLIT_MIN)
    texts = ["ਪੰਜਾਬੀ ਭਾਸ਼ਾ " * (SPLIT_MIN // 200) for _ in range(10)] + ["short"] * 10
    assert sum(map(len, texts)) < SPLIT_MIN < sum(len(t.encode()) for t in texts)
    seen = []
    encode_range = T.Tokenizer._encode_range
    monkeypatch.setattr(T.Tokenizer, "_encode_range", lambda self, data, offsets, *a: seen.append(offsets.size - 1) or encode_range(self, data, offsets, *a))
    assert tok.encode_batch(texts, num_threads=2) == [tok.encode(t) for t in texts]
    assert len(seen) == 2 and sum(seen) == 20 and 4 <= min(seen) <= 6


@pytest.mark.parametrize("n", [1, 3, 4, 5, 9])  # one by one up to _FEW_TEXTS, then one range
def test_a_batch_of_one_range_hands_back_its_own_lists(tok, n, monkeypatch):
    import dwstok.tokenizer as T

    monkeypatch.setattr(T, "_FEW_TEXTS", FEW_TEXTS)
    monkeypatch.setattr(T, "_SPLIT_MIN", SPLIT_MIN)
    texts = (["one text", "and another", "", "Grüße, 你好 2026"] * 3)[:n]
    got = tok.encode_batch(texts, num_threads=1)
    assert got == [tok.encode(t) for t in texts]
    got[0].append(-1)  # a list of the caller's own: nothing else holds it
    assert tok.encode_batch(texts, num_threads=1)[0] == tok.encode(texts[0])
    for bad in (7, b"bytes"):  # (an int has no length: the 2-thread call goes on to the cut)
        for threads in (1, 2):
            with pytest.raises(TypeError, match=f"expected str, got {type(bad).__name__}"):
                tok.encode_batch(texts[: n - 1] + [bad], num_threads=threads)
    with pytest.raises(ValueError, match="num_threads"):
        tok.encode_batch(texts, num_threads=0)
