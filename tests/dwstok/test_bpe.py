"""BPE kernels against the pure-Python twin, on random models and random pieces."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dwstok import Tokenizer, bpe
from dwstok.bpe import cache as bpe_cache
from dwstok.bpe import merge, span, sweeps
from dwstok.bpe import encode as bpe_encode

from .reference_bpe import merge_order, tiktoken_ranks

BYTES = [bytes([b]) for b in range(256)]


def random_merges(seed: int, n: int, alphabet: bytes = b"ab c") -> list[tuple[bytes, bytes]]:
    rng = random.Random(seed)
    tokens = [bytes([c]) for c in alphabet]
    merges, seen = [], set()
    for _ in range(n * 4):
        if len(merges) == n:
            break
        pair = (rng.choice(tokens), rng.choice(tokens))
        if pair in seen or len(pair[0] + pair[1]) > 12:
            continue
        seen.add(pair)
        merges.append(pair)
        if pair[0] + pair[1] not in tokens:
            tokens.append(pair[0] + pair[1])
    return merges


def merges_tables(merges):
    tokens = list(BYTES)
    index = {t: i for i, t in enumerate(tokens)}
    triples = []
    for a, b in merges:
        if a + b not in index:
            index[a + b] = len(tokens)
            tokens.append(a + b)
        triples.append((index[a], index[b], index[a + b]))
    t = np.array(triples, np.int64).reshape(-1, 3)
    return tokens, bpe.build_tables(tokens, t[:, 0], t[:, 1], t[:, 2], rule="merges")


def ranks_tables(seed: int, n: int, alphabet: bytes = b"ab c"):
    rng = random.Random(seed)
    extra = set()
    while len(extra) < n:
        extra.add(bytes(rng.choice(alphabet) for _ in range(rng.randint(2, 8))))
    extra = sorted(extra)
    rng.shuffle(extra)
    tokens = list(BYTES) + extra
    return tokens, bpe.build_tables(tokens, (), (), (), rule="ranks")


def encode(tables, text: bytes, cuts=()) -> list[int]:
    bounds = np.array(sorted({0, len(text), *cuts}), np.int64)
    return bpe.encode_bounds(np.frombuffer(text, np.uint8), bounds, tables).tolist()


def test_golden_aaabdaaabac():
    tokens, t = merges_tables([(b"a", b"a"), (b"aa", b"a"), (b"aaa", b"b")])
    assert encode(t, b"aaabdaaabac") == [258, 100, 258, 97, 99]


def test_leftmost_among_equal_ranks():
    _, t = merges_tables([(b"a", b"a")])
    assert encode(t, b"aaa") == [256, 97]
    _, t = merges_tables([(b" ", b" "), (b"  ", b" ")])
    assert encode(t, b"   ") == [257]
    assert encode(t, b"    ") == [256, 256]  # "  " + "  ": the first merge wins everywhere first


def test_unreachable_token_is_not_emitted_whole():
    # "abc" is made from (a, bc); merging "abc" from bytes gives (ab, c) first, and
    # plain merge order never makes "abc" from it, so the piece "abc" is two tokens.
    _, t = merges_tables([(b"a", b"b"), (b"b", b"c"), (b"a", b"bc")])
    assert encode(t, b"abc") == [256, 99]
    assert merge_order(b"abc", {(b"a", b"b"): 0, (b"b", b"c"): 1, (b"a", b"bc"): 2}) == [b"ab", b"c"]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 60), data=st.data())
def test_merge_order_matches_reference(seed, n, data):
    merges = random_merges(seed, n)
    tokens, t = merges_tables(merges)
    ranks = {m: k for k, m in enumerate(merges)}
    index = {tok: i for i, tok in enumerate(tokens)}
    text = data.draw(st.text(alphabet="ab c", max_size=400)).encode()
    # whole text as one piece (long ones take the heap path) ...
    want = [index[p] for p in merge_order(text, ranks)]
    assert encode(t, text) == want
    # ... and as repeated pieces (the cache)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=20))
    bounds = sorted({0, len(text), *cuts})
    want = [index[p] for s, e in zip(bounds, bounds[1:]) for p in merge_order(text[s:e], ranks)]
    assert encode(t, text + text, [*cuts, len(text), *(c + len(text) for c in cuts)]) == want + want


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 80), data=st.data())
def test_tiktoken_rule_matches_reference(seed, n, data):
    tokens, t = ranks_tables(seed, n)
    ranks = {tok: i for i, tok in enumerate(tokens)}
    text = data.draw(st.text(alphabet="ab c", max_size=400)).encode()
    assert encode(t, text) == [ranks[p] for p in tiktoken_ranks(text, ranks)]
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=20))
    bounds = sorted({0, len(text), *cuts})
    want = [ranks[p] for s, e in zip(bounds, bounds[1:]) for p in tiktoken_ranks(text[s:e], ranks)]
    assert encode(t, text, cuts) == want


def test_pair_filter_passes_every_pair_and_rules_out_most_others():
    from dwstok._jit import njit
    from dwstok.hashing import _hash_pair
    from dwstok.bpe.tables import _may_merge

    @njit
    def passes(pair_filter, keys):
        return np.array([_may_merge(pair_filter, _hash_pair(k)) for k in keys])

    _, t = ranks_tables(7, 3000, alphabet=b"abcdefghij ")
    shift = 63 - 2 * t.pair_bits
    keys = t.pairs[t.pairs >= 0] >> shift
    assert keys.size > 1000
    assert passes(t.pair_filter, keys).all()
    rng = np.random.default_rng(1)
    n_ids = t.tok_off.size - 1
    others = (rng.integers(0, n_ids, 20_000) << t.pair_bits) | rng.integers(0, n_ids, 20_000)
    absent = np.setdiff1d(others, keys)
    assert passes(t.pair_filter, absent).mean() < 0.2  # about 5 bits a pair, two set: about one in ten


def test_long_filter_passes_every_long_token_and_changes_no_ids():
    """A piece over LONG_FILTER_OVER bytes is looked up in ``longs`` only if
    ``long_filter`` lets it pass: every such token does, few other pieces do, and the
    ids are those of a filter that lets everything pass."""
    from dwstok._jit import njit
    from dwstok.bpe.tables import LONG_FILTER_OVER, _may_hold
    from dwstok.hashing import _hash_bytes

    @njit
    def passes(f, buf, bounds):
        return np.array([_may_hold(f, _hash_bytes(buf, bounds[i], bounds[i + 1])) for i in range(bounds.size - 1)])

    def word(lo, hi):
        return bytes(rng.choice(b"abcdefgh") for _ in range(rng.randint(lo, hi)))

    rng = random.Random(11)
    longs = sorted({word(LONG_FILTER_OVER + 1, 60) for _ in range(300)})
    shorter = sorted({word(9, LONG_FILTER_OVER) for _ in range(100)})  # in longs too, never filtered
    tokens = list(BYTES) + longs + shorter
    t = bpe.build_tables(tokens, (), (), (), rule="ranks")

    def pieces(ps):
        return np.frombuffer(b"".join(ps), np.uint8), np.cumsum([0] + [len(p) for p in ps]).astype(np.int64)

    assert passes(t.long_filter, *pieces(longs)).all()
    others = [p for p in (word(LONG_FILTER_OVER + 1, 60) for _ in range(3000)) if p not in set(longs)]
    assert passes(t.long_filter, *pieces(others)).mean() < 0.05  # 16 bits a token: about one in a hundred
    everything = t._replace(long_filter=np.full_like(t.long_filter, -1))
    ps = rng.sample(longs, 100) + rng.sample(shorter, 50) + others[:200]
    rng.shuffle(ps)
    text = b"".join(ps)
    cuts = np.cumsum([len(p) for p in ps]).tolist()
    ids = {p: i for i, p in enumerate(tokens)}
    want = [x for p in ps for x in ([ids[p]] if p in ids else list(p))]  # no merges: a token whole, else bytes
    assert encode(t, text, cuts) == want
    assert encode(everything, text, cuts) == want


def test_pair_filter_changes_no_ids():
    # The same model with a filter that rules nothing out (every pair looked up).
    _, t = ranks_tables(3, 400, alphabet=b"abcd ")
    everything = t._replace(pair_filter=np.full_like(t.pair_filter, -1))
    rng = random.Random(5)
    for _ in range(30):
        text = bytes(rng.choice(b"abcd ") for _ in range(rng.randint(1, 300)))
        cuts = [rng.randint(0, len(text)) for _ in range(rng.randint(0, 8))]
        assert encode(t, text, cuts) == encode(everything, text, cuts)


@pytest.mark.parametrize("unit", [b"a", b" ", b"7", b"ab", "語".encode()])
def test_long_piece_heap_equals_quadratic_reference(unit):
    # A piece far above the quadratic threshold (heap path) against the reference.
    build = [(unit[:k], unit[k : k + 1]) for k in range(1, len(unit))]
    merges = build + [(unit, unit), (unit * 2, unit * 2), (unit * 4, unit), (unit * 4, unit * 4)]
    tokens, t = merges_tables(merges)
    index = {tok: i for i, tok in enumerate(tokens)}
    ranks = {m: k for k, m in enumerate(merges)}
    for reps in (777, 778, 779, 781):
        text = unit * reps
        assert encode(t, text) == [index[p] for p in merge_order(text, ranks)]


def test_sweeps_stop_where_a_merge_makes_a_lower_rank():
    # Long pieces merge a rank at a time (sweeps._merge_sweeps). Under tiktoken's rule "aba"
    # may rank before "ab": merging the first "ab" of "abab..." makes the pair (ab, a),
    # which merges next, before the second "ab" does; a sweep that merged every "ab"
    # first would give "ab ab ab ..." instead of "aba b aba b ...".
    tokens = list(BYTES) + [b"aba", b"ab", b"abab", b"ba", b"cc"]
    t = bpe.build_tables(tokens, (), (), (), rule="ranks")
    ranks = {tok: i for i, tok in enumerate(tokens)}
    for text in (b"ab" * 40, b"ab" * 41 + b"a", b"c" + b"ab" * 50, b"abab" * 30 + b"cab" * 20, b"cc" * 70 + b"ab" * 70):
        assert len(text) >= sweeps.SWEEP_PARTS
        assert encode(t, text) == [ranks[p] for p in tiktoken_ranks(text, ranks)], text[:20]


@pytest.mark.parametrize("size", [1_000_000, pytest.param(10_000_000, marks=pytest.mark.slow)])
def test_megabytes_without_boundaries_are_not_quadratic(size):
    # One piece of `size` bytes: the heap path is O(n log n); the quadratic scan would
    # take hours here.
    _, t = merges_tables([(b"a", b"a"), (b"aa", b"aa"), (b"aaaa", b"aaaa")])
    text = b"a" * size
    ids = encode(t, text)
    assert len(ids) == size // 8 and set(ids) == {258}
    ids = encode(t, text + b"a")
    assert ids[-1] == 97 and len(ids) == size // 8 + 1


def test_decode_ids_roundtrip():
    tokens, t = merges_tables(random_merges(1, 30))
    text = b"ab c cab  abba" * 50
    ids = np.array(encode(t, text), np.int64)
    assert bpe.decode_ids(ids, t) == text


def test_split_token_gives_the_creating_merge():
    tokens, t = ranks_tables(3, 40)
    for i in range(256, len(tokens)):
        parts = bpe.split_token(t, i, i)
        assert b"".join(tokens[p] for p in parts) == tokens[i]


def test_flat_span_kernel_equals_readable_piece_steps():
    # _encode_span is _encode_pieces written out flat; both must give the same ids.
    import numba

    @numba.njit  # not cached on disk, see test_many_blocks_of_pieces_with_a_cache_that_keeps_emptying
    def by_pieces(buf, bounds, T, out):
        C = bpe_cache._new_cache(buf.size)
        S = merge._scratch(buf.size)
        return span._encode_pieces(buf, bounds, np.int64(0), bounds.size - 1, T, C, S, out, np.int64(0))

    tokens, t = ranks_tables(11, 60)
    rng = random.Random(5)
    text = "".join(rng.choice(["ab", " c", "abba", "  ", "c" * 30, "a b c"]) for _ in range(400)).encode()
    buf = np.frombuffer(text, np.uint8)
    bounds = np.array(sorted({0, len(text), *rng.sample(range(len(text)), 300)}), np.int64)
    out = np.empty(len(text), np.uint32)
    n = by_pieces(buf, bounds, t, out)
    assert out[:n].tolist() == bpe.encode_bounds(buf, bounds, t).tolist()


def test_empty_pieces_give_no_ids():
    # No scanner makes an empty piece, but bounds that repeat must not read garbage.
    tokens, t = ranks_tables(11, 60)
    rng = random.Random(9)
    text = "".join(rng.choice(["ab", " c", "abba", "  ", "c" * 30, "a"]) for _ in range(300)).encode()
    buf = np.frombuffer(text, np.uint8)
    cuts = sorted({0, len(text), *rng.sample(range(len(text)), 200)})
    doubled = np.array(sorted(cuts + rng.sample(cuts, 100)), np.int64)  # empty pieces between repeats
    assert bpe.encode_bounds(buf, doubled, t).tolist() == bpe.encode_bounds(buf, np.array(cuts, np.int64), t).tolist()


def test_cache_kept_across_calls_and_reset_when_full():
    from dwstok.scanner import get_scanner

    sc = get_scanner("gpt2")
    tokens, t = ranks_tables(13, 80)
    cache = bpe.new_cache(64)  # tiny: fills and starts afresh many times
    rng = random.Random(2)
    for _ in range(200):
        text = " ".join("".join(rng.choice("abc") for _ in range(rng.randint(1, 30))) for _ in range(20)).encode()
        buf = np.frombuffer(text, np.uint8)
        want = bpe.encode_native(sc.kind, sc.table, buf, t).tolist()
        assert bpe.encode_native(sc.kind, sc.table, buf, t, cache).tolist() == want


@pytest.mark.parametrize("rule", ["ranks", "merges"])
def test_few_pieces_one_by_one_match_the_blocked_path(rule):
    # A call with up to FEW_PIECES pieces encodes them one by one (_encode_pieces); more
    # go through the blocked _encode_span. Both, with a fresh or a tiny (often emptied)
    # cache, give the reference ids.
    from dwstok.scanner import get_scanner

    sc = get_scanner("gpt2")
    t, ref = _tables_and_reference(rule, 31)
    rng = random.Random(4)
    cache = bpe.new_cache(64)
    for n_pieces in [1, 2, bpe_encode.FEW_PIECES - 1, bpe_encode.FEW_PIECES, bpe_encode.FEW_PIECES + 1, 3 * bpe_encode.FEW_PIECES]:
        for _ in range(30):
            words = ["".join(rng.choice("ab c") for _ in range(rng.randint(1, 12))).replace(" ", "") or "a" for _ in range(n_pieces)]
            text = " ".join(words).encode()
            buf = np.frombuffer(text, np.uint8)
            bounds = sc.bounds(buf)
            assert bounds.size - 1 == n_pieces
            want = [i for k in range(n_pieces) for i in ref(text[bounds[k] : bounds[k + 1]])]
            assert bpe.encode_native(sc.kind, sc.table, buf, t).tolist() == want
            assert bpe.encode_native(sc.kind, sc.table, buf, t, cache).tolist() == want


def _tables_and_reference(rule: str, seed: int):
    """Small random tables of either rule, and a pure-Python reference encoder of a piece."""
    if rule == "ranks":
        tokens, t = ranks_tables(seed, 80)
        ranks = {tok: i for i, tok in enumerate(tokens)}
        ref = lambda p: [ranks[x] for x in tiktoken_ranks(p, ranks)]  # noqa: E731
    else:
        merges = random_merges(seed, 60)
        tokens, t = merges_tables(merges)
        ranks = {m: k for k, m in enumerate(merges)}
        index = {tok: i for i, tok in enumerate(tokens)}
        ref = lambda p: [index[x] for x in merge_order(p, ranks)]  # noqa: E731
    return t, ref


def _joined(pieces: list[bytes]):
    """The pieces as one buffer and their bounds."""
    bounds = np.zeros(len(pieces) + 1, np.int64)
    np.cumsum([len(p) for p in pieces], out=bounds[1:])
    return np.frombuffer(b"".join(pieces), np.uint8), bounds


@pytest.mark.parametrize("rule", ["ranks", "merges"])
def test_many_blocks_of_pieces_with_a_cache_that_keeps_emptying(rule):
    # _encode_span works in blocks of PF_BLOCK pieces and merges a block's short pieces
    # side by side; a tiny cache empties between looking a piece up and writing it out.
    t, ref = _tables_and_reference(rule, 21)
    rng = random.Random(8)
    pieces = [bytes(rng.choice(b"ab c") for _ in range(rng.choice([1, 2, 3, 5, 9, 20, 21, 40]))) for _ in range(120)]
    text_pieces = [rng.choice(pieces) for _ in range(5 * span.PF_BLOCK + 7)]
    buf, bounds = _joined(text_pieces)
    want = [i for p in text_pieces for i in ref(p)]
    assert bpe.encode_bounds(buf, bounds, t).tolist() == want
    import numba

    # Not cached on disk: a cached copy would keep the _encode_span it was compiled with
    # (Numba checks only this file's stamp), and crash once dwstok.bpe changes its layouts.
    @numba.njit
    def with_cache(buf, bounds, T, C, out):
        return span._encode_span(buf, bounds, 0, bounds.size - 1, T, C, merge._scratch(buf.size), out, 0, span.span_work(bounds.size - 1))

    @numba.njit
    def with_work(buf, bounds, T, C, out, w):
        return span._encode_span(buf, bounds, 0, bounds.size - 1, T, C, merge._scratch(buf.size), out, 0, w)

    out = np.empty(buf.size, np.uint32)
    n = with_cache(buf, bounds, t, bpe_cache._new_cache(64), out)
    assert out[:n].tolist() == want
    # Work words for blocks of 7 pieces: blocks as large as they hold, same ids.
    n = with_work(buf, bounds, t, bpe_cache._new_cache(64), out, np.empty(span.block_words(7) + 3, np.int64))
    assert out[:n].tolist() == want
    with pytest.raises(ValueError, match="work array too small"):
        with_work(buf, bounds, t, bpe_cache._new_cache(64), out, np.empty(span.block_words(1) - 1, np.int64))
    # A span of fewer pieces than the work words hold uses its block's words only: it
    # had cleared all the rest, up to 200 KB for each short document of a batch.
    w = np.full(span.block_words(span.PF_BLOCK), 7, np.int64)
    few_buf, few_bounds = _joined(text_pieces[:5])
    n = with_work(few_buf, few_bounds, t, bpe_cache._new_cache(64), out, w)
    assert out[:n].tolist() == [i for p in text_pieces[:5] for i in ref(p)]
    assert (w[span.block_words(5) :] == 7).all()
    # Room for many slots but few ids: pieces put in the cache in step 2b keep their ids
    # pending, and their repeats in the block must merge on their own.
    slots = np.full((4096, 4), -1, np.int64)
    front = np.zeros((16, 4), np.int64)  # a tiny front table: slots taken over often
    cache = (slots, np.empty(40, np.int32), np.zeros(4, np.int64), np.empty(64, np.uint8), front)
    one = span.PF_BLOCK  # one block: the cache does not start afresh before the end
    one_buf, one_bounds = _joined(text_pieces[:one])
    n = with_cache(one_buf, one_bounds, t, cache, out)
    assert out[:n].tolist() == [i for p in text_pieces[:one] for i in ref(p)]
    assert ((slots[:, 2] >= 0) & ((slots[:, 2] & 0xFFFFFFFF) == bpe_cache.PENDING)).any()
    for _ in range(2):  # all blocks, starting from a cache left with pending slots
        n = with_cache(buf, bounds, t, cache, out)
        assert out[:n].tolist() == want


@pytest.mark.parametrize("rule", ["ranks", "merges"])
def test_block_of_long_pieces_overflows_side_by_side_room(rule):
    # Pieces of up to SIDE_MAX bytes merge side by side while their parts fit in the
    # block's room (PF_BLOCK * SMALL); a block of long distinct pieces overflows it and
    # the rest merge one by one in step 4. Both must give the reference ids.
    t, ref = _tables_and_reference(rule, 23)
    rng = random.Random(9)
    pieces = [bytes(rng.choice(b"ab c") for _ in range(rng.randint(span.SIDE_MAX // 2, span.SIDE_MAX + 3))) for _ in range(span.PF_BLOCK + 50)]
    assert sum(map(len, pieces[: span.PF_BLOCK])) > span.PF_BLOCK * merge.SMALL  # the first block overflows
    buf, bounds = _joined(pieces)
    want = [i for p in pieces for i in ref(p)]
    assert bpe.encode_bounds(buf, bounds, t).tolist() == want


def test_big_tables_and_caches_start_on_a_huge_page():
    # A 2 MB page maps an aligned 2 MB only; arrays of 4 MB and more start on one, so
    # that all of them can be (a copy that starts elsewhere, as unpickled, is moved).
    big = bpe.huge_page_array(1 << 20)  # 8 MB
    assert big.ctypes.data % (1 << 21) == 0 and big.size == 1 << 20
    cache = bpe.new_cache(bpe.CACHE_MAX_CAPACITY)
    assert cache.ctypes.data % (1 << 21) == 0
    assert (cache[bpe_cache._CACHE_HEAD : bpe_cache._CACHE_HEAD + 4 * cache[0]].reshape(-1, 4)[:, 2] == -1).all()
    elsewhere = np.arange(1 << 20, dtype=np.int64)[1:]  # starts 8 bytes past an allocation
    moved = bpe.on_huge_pages(elsewhere)
    assert moved.ctypes.data % (1 << 21) == 0 and np.array_equal(moved, elsewhere)
    small = np.arange(10, dtype=np.int64)
    assert bpe.on_huge_pages(small) is small and bpe.huge_page_array(10).size == 10


def _vm_flags(address):
    """The VmFlags of the mapping that holds ``address`` (Linux's smaps)."""
    lines = open("/proc/self/smaps").read().splitlines()
    inside = False
    for line in lines:
        head = line.split()[0]
        if "-" in head and ":" not in head:
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside and head == "VmFlags:":
            return line.split()[1:]
    raise AssertionError("no mapping holds the address")


@pytest.mark.skipif(
    not os.path.exists("/sys/kernel/mm/transparent_hugepage"), reason="Linux with transparent huge pages only"
)
def test_a_cold_huge_page_moves_the_rest_of_a_cache_to_small_pages(monkeypatch):
    # On a VM that backs memory lazily, the first touch of a 2 MB page can take 20 ms.
    # Once one page of an array took over _COLD_S, the rest of it goes on small pages
    # (MADV_NOHUGEPAGE: "nh" in its mapping's flags), and is filled all the same; caches
    # made and grown that way find every piece again.
    from dwstok.bpe import pages

    words = pages._PAGE_WORDS
    monkeypatch.setattr(pages, "_cold_seen", False)
    monkeypatch.setattr(pages, "_COLD_S", 60.0)  # no page is cold
    b = bpe.huge_page_array(4 * words)
    assert pages.fill_words(b, 0, b.size, 5) is False and (b == 5).all()
    assert "nh" not in _vm_flags(b.ctypes.data + 3 * (1 << 21)) and not pages._cold_seen
    monkeypatch.setattr(pages, "_COLD_S", -1.0)  # every page is
    a = bpe.huge_page_array(4 * words)
    assert pages.fill_words(a, 10, 4 * words - 5, -1) is True
    assert (a[10 : 4 * words - 5] == -1).all()
    assert "nh" not in _vm_flags(a.ctypes.data) and "nh" in _vm_flags(a.ctypes.data + 3 * (1 << 21))
    assert pages.fill_words(a, 0, 10, 3, watch=False) is False and (a[:10] == 3).all()
    # Once one page was cold, a new array goes on small pages from its first page on,
    # without waiting for a cold one of its own.
    monkeypatch.setattr(pages, "_COLD_S", 60.0)
    c = bpe.huge_page_array(4 * words)
    assert pages.fill_words(c, 0, c.size, 6) is True and (c == 6).all()
    assert "nh" in _vm_flags(c.ctypes.data) and "nh" in _vm_flags(c.ctypes.data + 3 * (1 << 21))
    d = bpe.huge_page_array(4 * words)  # filled from inside its second page: from that page on
    assert pages.fill_words(d, words + 10, d.size, 7) is True and (d[words + 10 :] == 7).all()
    assert "nh" not in _vm_flags(d.ctypes.data) and "nh" in _vm_flags(d.ctypes.data + (1 << 21))

    monkeypatch.setattr(pages, "_COLD_S", -1.0)
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"x", b"y")])
    rng = random.Random(3)
    words_ = sorted({"".join(rng.choice("xyzw") for _ in range(rng.randint(1, 30))) for _ in range(4000)})
    text = " ".join(words_)
    want = tok.encode_to_numpy(text).tolist()
    ((cache, ids),) = tok._caches.free.values()
    for grown in (bpe.grown_cache(cache, bpe.CACHE_MAX_CAPACITY), bpe.new_cache(bpe.CACHE_MAX_CAPACITY)):
        assert "nh" in _vm_flags(grown.ctypes.data + grown.nbytes - 8)
        tok._caches.free[0] = (grown, ids)
        assert tok.encode_to_numpy(text).tolist() == want
    step = bpe.NextCache(bpe.new_cache(1 << 20), background=False)
    ready = step.ready()
    assert int(ready[0]) == step.size and "nh" in _vm_flags(ready.ctypes.data + ready.nbytes - 8)
    assert (bpe_cache._cache_views(ready)[0][:, 2] == -1).all()


def _rss_kb(address, nbytes):
    """KB of the pages of [address, address + nbytes) that are in memory (mincore)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    lo = address - address % 4096
    npages = -(-(address + nbytes - lo) // 4096)
    vec = (ctypes.c_ubyte * npages)()
    assert libc.mincore(ctypes.c_void_p(lo), ctypes.c_size_t(npages * 4096), vec) == 0
    return 4 * sum(v & 1 for v in vec)


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="Linux only")
def test_populate_faults_in_small_pages_and_leaves_their_contents(monkeypatch):
    # Once a cold huge page sent a process to small pages, fill_words faults an array's
    # pages in with one madvise (MADV_POPULATE_WRITE) before writing them. The pages are
    # then in memory, what was written before stays, and the fill is as asked; on a
    # kernel without it (EINVAL) populating stops for good, and fills still work.
    import errno
    import mmap

    from dwstok.bpe import pages

    words = pages._PAGE_WORDS
    # fresh pages of its own (an array from malloc may reuse memory the suite touched)
    area = mmap.mmap(-1, 4 * words * 8, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    a = np.frombuffer(area, np.int64)
    pages._small_pages(a, 0)
    a[:10] = 9  # touched before: kept
    start, end = 2 * words, 3 * words
    assert _rss_kb(a.ctypes.data + start * 8, (end - start) * 8) == 0  # nothing touched there yet
    monkeypatch.setattr(pages, "_can_populate", True)
    pages._populate(a, start, end)
    if pages._can_populate:  # (a kernel before 5.14 has no MADV_POPULATE_WRITE)
        assert _rss_kb(a.ctypes.data + start * 8, (end - start) * 8) == (end - start) * 8 // 1024
    assert (a[:10] == 9).all() and (a[start:end] == 0).all()
    monkeypatch.setattr(pages, "_cold_seen", True)
    calls = []
    monkeypatch.setattr(pages, "_populate", lambda arr, lo, hi: calls.append((lo, hi)))
    assert pages.fill_words(a, words, 4 * words, -1, watch=False) is False
    assert calls == [(words, 4 * words)] and (a[words:] == -1).all() and (a[:10] == 9).all()
    monkeypatch.setattr(pages, "_cold_seen", False)  # warm huge pages: no populate
    assert pages.fill_words(a, 0, words, 4, watch=False) is False and calls == [(words, 4 * words)]
    monkeypatch.undo()
    monkeypatch.setattr(pages, "_can_populate", True)
    monkeypatch.setattr(pages, "_libc", lambda: type("L", (), {"madvise": staticmethod(lambda *x: -1)})())
    monkeypatch.setattr(pages.ctypes, "get_errno", lambda: errno.EINVAL)
    pages._populate(a, 0, words)
    assert pages._can_populate is False


@pytest.mark.parametrize("slots, soon, goal", [(1 << 17, 1, 3), (bpe_cache.CACHE_SLOTS // 2, 4, 5)])
def test_the_next_cache_is_cleared_for_the_entries_past_a_sixteenth(slots, soon, goal):
    # NextCache clears the memory of the cache a cache grows into in slices, in
    # proportion to the entries added from where GROW_SOON begins (a sixteenth of its
    # slots), all of it a sixteenth before it grows (at a quarter, so by 3/16). The call
    # that crossed the mark pays for its entries past it too: a big call (a batch of 1
    # MB) had left all of it to later calls. The step into the biggest cache has its
    # marks later (soon at 4/16, grows at 6/16): its first slice had cleared all of it.
    cache = bpe.new_cache(8 * slots)
    size = int(cache[0])
    assert size == slots
    assert bpe_cache._grow_marks(size)[1] == soon
    begin, end = soon * size // 16, goal * size // 16
    for used, share in ((begin, 0.0), (begin + (end - begin) // 4, 0.25), ((begin + end) // 2, 0.5), (end, 1.0)):
        cache[1] = used
        step = bpe.NextCache(cache, background=False)
        step.advance(cache)
        assert step._cleared == int(share * step._total)
        assert step.done() == (share == 1.0)
    cache[1] = 0
    assert not bpe.NextCache(cache, background=False).done()


def test_kernels_without_the_runtime_leak_no_reference_to_the_tables():
    # _encode_span and _encode_scanned run without Numba's runtime: nothing they do may
    # keep a reference to the arrays they are given, or a tokenizer's tables (and the
    # cache) would never be freed.
    import gc
    import weakref

    from dwstok import Tokenizer

    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"a", b"b"), (b"ab", b"c")])
    text = "abc abd " * 400 + "x"
    ids = tok.encode_to_numpy(text)  # hundreds of pieces: through _encode_span
    assert tok.encode_to_numpy("abc").tolist() == [257]
    assert tok.decode(ids.tolist()) == text
    packed = weakref.ref(tok._native[0])
    del tok, ids
    gc.collect()
    assert packed() is None


@pytest.mark.parametrize("rule", ["ranks", "merges"])
@pytest.mark.parametrize("nbytes", [64, 1 << 12, 1 << 16])
def test_front_table_holds_only_right_ids(rule, nbytes):
    # The cache's front table settles a piece of 2-16 bytes (up to 3 ids) seen before
    # from one slot.
    # Whatever order pieces come in, and however often a small cache starts afresh or a
    # front slot is taken over within a block, every filled front slot must hold its
    # piece's own ids, and calls that use it give the reference ids.
    from dwstok.scanner import get_scanner

    sc = get_scanner("gpt2")
    t, ref = _tables_and_reference(rule, 41)
    rng = random.Random(nbytes)
    words = ["".join(rng.choice("abc") for _ in range(rng.randint(1, 17))) for _ in range(300)]
    cache = bpe.new_cache(nbytes)
    for _ in range(12):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(10, 2 * span.PF_BLOCK))).encode()
        buf = np.frombuffer(text, np.uint8)
        b = sc.bounds(buf)
        want = [i for s, e in zip(b[:-1], b[1:]) for i in ref(bytes(buf[s:e]))]
        assert bpe.encode_native(sc.kind, sc.table, buf, t, cache).tolist() == want
    front = bpe_cache._cache_views(cache)[4]
    filled = 0
    for head, nxt, meta, ids in front.tolist():
        if meta == 0:
            continue
        m, cnt = meta >> 32, meta & 0xFFFFFFFF
        piece = (head.to_bytes(8, "little", signed=True) + nxt.to_bytes(8, "little", signed=True))[:m]
        got = [(ids >> (21 * i)) & span.FRONT_ID for i in range(3)]  # all ones: no id
        assert 2 <= m <= span.FRONT_MAX and ref(piece) == got[:cnt] and all(x == span.FRONT_ID for x in got[cnt:])
        filled += 1
    assert filled >= min(front.shape[0] // 4, 10)  # the front was in use


def test_a_grown_cache_keeps_its_front_entries_in_the_slots_of_their_hash():
    # Growing moves the front too (cache._copy_front): a piece seen before is still
    # settled from one slot, not looked up the slower ways again. Each entry must be
    # where a lookup looks for it: the slot of its hash (_hash_bytes of its bytes, as
    # the span driver hashes a piece) in the bigger front.
    from dwstok.hashing import _hash_bytes
    from dwstok.scanner import get_scanner

    sc = get_scanner("gpt2")
    tokens, t = ranks_tables(43, 300, b"abcd")
    ranks = {tok: i for i, tok in enumerate(tokens)}
    ref = lambda p: [ranks[x] for x in tiktoken_ranks(p, ranks)]  # noqa: E731
    rng = random.Random(5)
    # words of one or two tokens (2-16 bytes): most have up to three ids, as the front keeps
    words = [b"".join(rng.choice(tokens[256:]) for _ in range(rng.randint(1, 2))) for _ in range(600)]
    buf = np.frombuffer(b" ".join(words), np.uint8)
    b = sc.bounds(buf)
    want = [i for s, e in zip(b[:-1], b[1:]) for i in ref(bytes(buf[s:e]))]
    cache = bpe.new_cache(1 << 12)
    assert bpe.encode_native(sc.kind, sc.table, buf, t, cache).tolist() == want
    old = bpe_cache._cache_views(cache)[4].copy()
    grown = bpe.grown_cache(cache, 1 << 16)
    new = bpe_cache._cache_views(grown)[4]
    assert new.shape[0] > old.shape[0]
    entries = [row for row in old.tolist() if row[2] != 0]
    assert len(entries) > 100 and any(row[2] >> 32 > 8 for row in entries)  # pieces of 9-16 bytes too
    for head, nxt, meta, ids in entries:
        m = meta >> 32
        piece = np.frombuffer((head.to_bytes(8, "little", signed=True) + nxt.to_bytes(8, "little", signed=True))[:m], np.uint8)
        f = int(_hash_bytes(piece, 0, m)) & (new.shape[0] - 1)
        assert new[f].tolist() == [head, nxt, meta, ids]
    assert int((new[:, 2] != 0).sum()) == len(entries)
    assert bpe.encode_native(sc.kind, sc.table, buf, t, grown).tolist() == want


def test_front_slot_packs_three_ids():
    # Ids are 21 bits each, FRONT_ID for none (tables refuse a vocabulary with more ids:
    # test_largest_ids_pack_and_more_are_refused).
    front = np.zeros((8, 4), np.int64)
    span._front_put(front, np.uint64(3), 11, 0, 5, 7, 2_000_000, -1)
    assert front[3].tolist() == [11, 0, (5 << 32) | 2, 7 | (2_000_000 << 21) | (span.FRONT_ID << 42)]
    span._front_put(front, np.uint64(12), 12, 99, 13, span.FRONT_ID - 1, 0, 5)  # slot 12 & 7
    assert front[4].tolist() == [12, 99, (13 << 32) | 3, (span.FRONT_ID - 1) | (5 << 42)]
    assert not front[[0, 1, 2, 5, 6, 7]].any()


def _unpacked(r: int) -> list[int]:
    """The ids tables._pack_ids packed in ``r``."""
    return [x for x in (r & span.FRONT_ID, (r >> 21) & span.FRONT_ID, r >> 42) if x != span.FRONT_ID]


@pytest.mark.parametrize("rule", ["ranks", "merges"])
def test_small_ids_hold_the_ids_of_every_piece_of_one_or_two_bytes(rule):
    # The span driver settles a piece of one or two bytes from this table alone, with no
    # lookup, so it must be what the piece encodes to, for all 65,792 of them.
    t, ref = _tables_and_reference(rule, 5)
    assert t.small_ids.shape == (256 + 65536,)
    got = [_unpacked(int(r)) for r in t.small_ids]
    assert got[:256] == [ref(bytes([b])) for b in range(256)]
    want = [ref(bytes([a, b])) for a in range(256) for b in range(256)]
    assert got[256:] == want
    assert sum(len(w) == 1 for w in want) >= 3  # some pairs of b"ab c" merge, the rest do not


def test_largest_ids_pack_and_more_are_refused():
    # A settled piece's ids are packed 21 bits each (tables._pack_ids), as the front table
    # keeps them, with FRONT_ID for none. The largest vocabulary the tables take has ids
    # up to FRONT_ID - 1, which must come out right whether a byte, a token found whole
    # (short or long), or one of a cached piece's ids; one id more is refused.
    top = span.FRONT_ID - 1
    tokens = [b""] * (top + 1)
    tokens[:256] = BYTES
    tokens[300] = b"cd"
    tokens[top - 2] = b"ab"  # rank = id: these merge last
    tokens[top - 1] = b"abc"
    tokens[top] = b"abcdefghijk"  # in the table of longer tokens
    t = bpe.build_tables(tokens, (), (), (), rule="ranks")
    ranks = {tok: i for i, tok in enumerate(tokens) if tok}
    words = [b"ab", b"abc", b"cd", b"abab", b"abcab", b"cdab", b"x", b"abcdefghijk", b"abcdefghijkab", b"ababab"]
    rng = random.Random(3)
    pieces = [rng.choice(words) for _ in range(3 * span.PF_BLOCK)]  # blocks 2 and 3: all seen before
    buf, bounds = _joined(pieces)
    want = [ranks[x] for p in pieces for x in tiktoken_ranks(p, ranks)]
    assert max(want) == top
    assert bpe.encode_bounds(buf, bounds, t).tolist() == want
    with pytest.raises(ValueError, match="vocabulary too large: 2097152 ids, at most 2097151"):
        bpe.build_tables([*tokens, b"zz"], (), (), (), rule="ranks")
