"""Numba BPE kernels: pretokens in, token ids out.

A piece is merged by always applying the lowest-ranked adjacent pair, the leftmost one
among equal ranks (this decides runs such as ``aaa`` or three spaces). For models built
by dwstok the pairs are the merges, ranked by creation order; for tiktoken rank files
every pair whose concatenation is a token merges at that token's rank, which is what
tiktoken's ``_byte_pair_merge`` does.

A model becomes a :class:`BpeTables` of flat arrays:

- ``pairs``: an open-addressing hash of ``(left id, right id)`` → rank, one int64 a
  slot, and ``rank_new``: rank → the id it makes; ``byte_pairs``: the ranks of pairs of
  single bytes as a dense 256×256 array, for the first round. For tiktoken files only
  one split per token is kept (the last merge of its own bytes; see ``build_tables``).
- ``whole`` and ``longs``: hashes of token bytes → id for the tokens that a piece equal
  to them encodes to directly: under tiktoken's rule every token, under plain merge
  order only the tokens that merging their own bytes reproduces. Most pretokens of real
  text hit them. A slot holds the token's bytes (up to 8 in ``whole``, up to 16 in
  ``longs``) and its length, so a lookup touches one slot and nothing else.
- ``atoms`` and ``atom_pats``: characters whose bytes always become one token before
  they meet a neighbour (see atoms.py); merging starts from that token.

Pieces that miss are merged: by the quadratic scan tiktoken uses when they start with
up to ``QUAD_PARTS`` parts, else with a 4-ary heap over a linked list, O(n log n), so a
10 MB piece with no boundaries (a million spaces) is no trap. Merged pieces go into a
cache that outlives the call (a pool in the Tokenizer), so a repeated word costs one
lookup.

Pieces are taken in blocks of ``PF_BLOCK``: all are hashed and their table slots
prefetched first, and the short pieces of a block that need merging are merged side by
side, one step each in turn, with the pair lookups of the next step prefetched, so that
waits on memory overlap instead of following one another (``_encode_span``).

Where the time goes (o200k, dev corpus, 16 MB, one core): the tables do not fit in the
core's cache, so lookups wait on memory, and a helper call that passes many arrays costs
atomic reference-count updates, which is why the per-piece loop (``_encode_span``) is
written out flat while ``_encode_piece`` keeps the same steps readable. About 178 ms in
all (89 MB/s batch, kernel only). A sampling profile of a first pass: ``_encode_span``
44% (lookups, cache, setting up merges), ``_merge_side_by_side`` 26%, scanning 18%, the
heap merge of pieces over 96 bytes 5%. A second pass over the same text (every piece
cached) takes about 94 ms. The hottest instructions are prefetches and the loads they
served: the kernels wait on memory even with a block of lookups in flight.

>>> import numpy as np
>>> t = build_tables(
...     [bytes([b]) for b in range(256)] + [b"aa", b"aaa", b"aaab"],
...     np.array([97, 256, 257]), np.array([97, 97, 98]), np.array([256, 257, 258]),
...     rule="merges",
... )
>>> buf = np.frombuffer(b"aaabdaaabac", np.uint8)
>>> encode_bounds(buf, np.array([0, 11]), t).tolist()
[258, 100, 258, 97, 99]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._intrinsics import load8 as _load8
from ._intrinsics import prefetch as _prefetch
from ._jit import ix as _ix
from ._jit import as_u8, njit, njit_inline
from .scanner import scan_range

SMALL = 20  # _encode_span has room for this many parts a piece on average for merging side by side
SIDE_MAX = 96  # pieces up to this many bytes merge side by side (CJK runs are 20-100 bytes)
QUAD_PARTS = 24  # up to this many first parts merge by the quadratic scan; more use the heap
SWEEP_PARTS = 64  # from this many, first a few sweeps a rank at a time (_merge_sweeps)
HEAP_SCRATCH = 4096  # pieces up to this many bytes merge in preallocated heap arrays
CACHE_MAX = 1 << 16  # longest piece kept in the piece cache
NO_RANK = np.int64(1 << 40)
PENDING = np.int64(0xFFFFFFFF)  # a cache slot's number of ids while they are being merged
FEW_PIECES = 16  # a call with up to this many pieces encodes them one by one, see _encode_fused
PF_BLOCK = 512  # pieces looked up (and short ones merged) together, see _encode_span




class BpeTables(NamedTuple):
    """Flat arrays of one model, ready for the kernels."""

    tok_bytes: np.ndarray  # uint8: every token's bytes, back to back
    tok_off: np.ndarray  # int64 [n_vocab + 1]: token i = tok_bytes[tok_off[i]:tok_off[i+1]]
    byte_ids: np.ndarray  # int32 [256]: id of the one-byte token
    pairs: np.ndarray  # int64: ((left << pair_bits | right) << (63 - 2 pair_bits)) | rank; -1 = empty
    pair_bits: int  # bits of an id in a pair key
    rank_new: np.ndarray  # int32: the id a merge of each rank makes; empty when that is the rank itself
    byte_pairs: np.ndarray  # int64 [65536]: rank of the pair of bytes (b1, b2) at b1 * 256 + b2, or NO_RANK
    whole: np.ndarray  # int64 [size, 2]: tokens of up to 8 bytes: bytes packed, (length << 32) | id; -1 = empty
    atoms: np.ndarray  # int64 [0x10000] by code point: (pattern start << 32) | (patterns << 24) | id; -1 = none
    atom_pats: np.ndarray  # int64: neighbour patterns that forbid an atom, see _atom_table
    longs: np.ndarray  # int64 [size, 3]: longer tokens: bytes 0-7 and 8-15 packed, (length << 32) | id


# Field order of a packed model (see pack_tables): the arrays, then pair_bits.
_PACKED_FIELDS = ("tok_bytes", "tok_off", "byte_ids", "pairs", "rank_new", "byte_pairs", "whole", "atoms", "atom_pats", "longs")
_PACKED_DTYPES = {f: np.dtype(np.uint8 if f == "tok_bytes" else np.int32 if f in ("byte_ids", "rank_new") else np.int64) for f in _PACKED_FIELDS}
_HEADER = 32  # int64 words before the first array: (start, count) per array, then pair_bits


_HUGE_PAGE = 1 << 21


def huge_page_array(nwords: int) -> np.ndarray:
    """An uninitialized int64 array that starts on a 2 MB boundary when it is 4 MB or more.

    Why: the tables and the piece caches are read at random, and at 4 KB a page they
    span more pages than the TLB holds. NumPy asks Linux for 2 MB pages for arrays of
    4 MB and more, but a 2 MB page maps an aligned 2 MB only, and an array starts where
    malloc put it: o200k's 15 MB of tables got 6-12 MB of huge pages, now all 14. Dev
    encoded in one call: first pass 169-175 ms -> 158-166, second 80-84 -> 74-79.
    The 2 MB before the boundary are never touched, so they take no memory.
    """
    if nwords * 8 < 2 * _HUGE_PAGE:
        return np.empty(nwords, np.int64)
    raw = np.empty(nwords * 8 + _HUGE_PAGE, np.uint8)
    skip = -raw.ctypes.data % _HUGE_PAGE
    return raw[skip : skip + nwords * 8].view(np.int64)


def on_huge_pages(a: np.ndarray) -> np.ndarray:
    """``a`` (int64), or a copy from a 2 MB boundary if it is 4 MB or more and starts elsewhere
    (an unpickled one: see :func:`huge_page_array`)."""
    if a.nbytes < 2 * _HUGE_PAGE or a.ctypes.data % _HUGE_PAGE == 0:
        return a
    b = huge_page_array(a.size)
    b[:] = a
    return b


def pack_tables(T: BpeTables) -> np.ndarray:
    """All of ``T`` in one int64 array: a header of where each array starts and how many
    items it has, then the arrays, each from an 8-byte boundary.

    Why: a call into Numba unboxes every array argument, about 60 ns each. The tables as
    11 arrays cost 0.85 us of the 4.4 a short call took; as one array they cost one.
    The kernels take views of it again (``_unpack_tables``), which costs nothing.

    >>> t = build_tables([bytes([b]) for b in range(256)], [], [], [], rule="merges")
    >>> back = unpack_tables(pack_tables(t))
    >>> all(np.array_equal(a, b) for a, b in zip(back, t))
    True
    """
    arrays = [np.ascontiguousarray(getattr(T, f), _PACKED_DTYPES[f]) for f in _PACKED_FIELDS]
    words = [(a.nbytes + 7) // 8 for a in arrays]
    P = huge_page_array(_HEADER + sum(words))
    P[:] = 0
    at = _HEADER
    for i, (a, w) in enumerate(zip(arrays, words)):
        P[2 * i], P[2 * i + 1] = at, a.size
        P[at : at + w].view(np.uint8)[: a.nbytes] = a.reshape(-1).view(np.uint8)
        at += w
    P[2 * len(arrays)] = T.pair_bits
    return P


def unpack_tables(P: np.ndarray) -> BpeTables:
    """The tables in ``P`` (from :func:`pack_tables`) as views, no copy (the kernels'
    own unpacking, so there is one reading of the layout)."""
    return _unpack_tables(P)


@njit_inline
def _unpack_tables(P):
    # (start, count) of field i of _PACKED_FIELDS at P[2i], P[2i + 1]; pair_bits at P[20]
    return BpeTables(
        P[P[0] : P[0] + (P[1] + 7) // 8].view(np.uint8)[: P[1]],
        P[P[2] : P[2] + P[3]],
        P[P[4] : P[4] + (P[5] + 1) // 2].view(np.int32)[: P[5]],
        P[P[6] : P[6] + P[7]],
        P[20],
        P[P[8] : P[8] + (P[9] + 1) // 2].view(np.int32)[: P[9]],
        P[P[10] : P[10] + P[11]],
        P[P[12] : P[12] + P[13]].reshape(P[13] // 2, 2),
        P[P[14] : P[14] + P[15]],
        P[P[16] : P[16] + P[17]],
        P[P[18] : P[18] + P[19]].reshape(P[19] // 3, 3),
    )


# ---------------------------------------------------------------------------- hashing


@njit_inline
def _pack8(buf, start, end):
    """The first (up to) 8 bytes of buf[start:end] as one little-endian integer."""
    n = min(end - start, 8)
    if n <= 0:
        return np.uint64(0)
    if start + 8 <= buf.size:
        sh = np.uint64(64 - 8 * n)
        return (_load8(buf, start) << sh) >> sh
    v = np.uint64(0)
    for i in range(n):
        v |= np.uint64(buf[start + i]) << np.uint64(8 * i)
    return v


@njit_inline
def _hash_bytes(buf, start, end):
    # The packed head and the length, then the tail 8 bytes at a time, then an avalanche
    # so the low bits used as the slot are well mixed.
    h = _pack8(buf, start, end) ^ (np.uint64(end - start) << np.uint64(56))
    h *= np.uint64(0x9E3779B97F4A7C15)
    for i in range(start + 8, end, 8):
        h ^= _pack8(buf, i, end)
        h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(29)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(32)
    return h


@njit
def _hash_pair(key):
    h = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    return h ^ (h >> np.uint64(31))


@njit_inline
def _rank_of_key(pairs, key, shift, pmask):
    """Rank of the pair ``key = left << bits | right`` in ``pairs``, or NO_RANK."""
    i = np.int64(_hash_pair(key) & np.uint64(pmask))
    while True:
        v = pairs[_ix(i)]
        if v < 0:
            return NO_RANK
        if (v >> shift) == key:
            return v & ((np.int64(1) << shift) - 1)
        i = (i + 1) & pmask


@njit_inline
def _pair_rank(T, left, right):
    """Rank of the pair (left, right), or NO_RANK when it does not merge.

    A slot is one int64, ``(left << bits | right) << shift | rank``: half the size of a
    key/value pair, so a large table (o200k: 450k pairs) stays in cache better; the
    table is too big for L2 anyway, and these lookups are what merging costs.
    """
    bits = T.pair_bits
    key = (np.int64(left) << bits) | np.int64(right)
    return _rank_of_key(T.pairs, key, 63 - 2 * bits, T.pairs.size - 1)


@njit_inline
def _new_id(T, rank):
    return np.int32(rank) if T.rank_new.size == 0 else T.rank_new[_ix(rank)]


@njit_inline
def _same_bytes(a, a0, b, b0, n):
    for i in range(n):
        if a[a0 + i] != b[b0 + i]:
            return False
    return True


@njit_inline
def _whole_lookup(T, buf, start, end, h):
    """Id of the token spelled by buf[start:end] if it is emitted whole, else -1."""
    return _lookup_in(T.whole, T.longs, T.tok_bytes, T.tok_off, buf, start, end, h)


@njit_inline
def _lookup_in(whole, longs, tok_bytes, tok_off, buf, start, end, h):
    """Up to 8 bytes from ``whole`` (head and length say it all), longer from ``longs``."""
    n = end - start
    head = np.int64(_pack8(buf, start, end))
    if n <= 8:
        size = whole.shape[0]
        i = np.int64(h & np.uint64(size - 1))
        while True:
            meta = whole[i, 1]
            if meta < 0:
                return -1
            if whole[i, 0] == head and (meta >> 32) == n:
                return meta & 0xFFFFFFFF
            i = (i + 1) & (size - 1)
    nxt = np.int64(_pack8(buf, start + 8, end))
    size = longs.shape[0]
    i = np.int64(h & np.uint64(size - 1))
    while True:
        meta = longs[i, 2]
        if meta < 0:
            return -1
        if longs[i, 0] == head and longs[i, 1] == nxt and (meta >> 32) == n:
            t = meta & 0xFFFFFFFF
            if n <= 16 or _same_bytes(tok_bytes, tok_off[t] + 16, buf, start + 16, n - 16):
                return t
        i = (i + 1) & (size - 1)


# ---------------------------------------------------------------------- table building


@njit
def _build_pairs(lefts, rights, ranks, bits, size):
    shift = 63 - 2 * bits
    pairs = np.full(size, -1, np.int64)
    for j in range(lefts.size):
        key = (np.int64(lefts[j]) << bits) | np.int64(rights[j])
        i = np.int64(_hash_pair(key) & np.uint64(size - 1))
        while pairs[i] != -1 and (pairs[i] >> shift) != key:
            i = (i + 1) & (size - 1)
        v = (key << shift) | np.int64(ranks[j])
        if pairs[i] == -1 or v < pairs[i]:  # a repeated pair keeps its lowest rank
            pairs[i] = v
    return pairs


@njit
def _build_byte_pairs(T):
    out = np.full(65536, NO_RANK, np.int64)
    for a in range(256):
        for b in range(256):
            if T.byte_ids[a] >= 0 and T.byte_ids[b] >= 0:
                out[a * 256 + b] = _pair_rank(T, T.byte_ids[a], T.byte_ids[b])
    return out


def _tables(tok_bytes, tok_off, byte_ids, lefts, rights, ranks, news, whole, longs, *, atoms=True) -> BpeTables:
    n_ids = max(int(tok_off.size - 1), 2)
    bits = int(n_ids - 1).bit_length()
    max_rank = int(ranks.max()) if ranks.size else 0
    if 3 * bits > 63 or max_rank >= 1 << (63 - 2 * bits):
        raise ValueError("vocabulary too large for the pair table (over 2 million ids)")
    rank_new = np.full(max_rank + 1, -1, np.int32)
    rank_new[ranks] = news
    # Ranks no pair has (tiktoken: tokens no split of which is a pair of tokens) are never
    # looked up; give them their own value so that rank == id models skip the table.
    gaps = rank_new < 0
    rank_new[gaps] = np.flatnonzero(gaps)
    pairs = _build_pairs(lefts, rights, ranks, bits, _pow2_at_least(max(len(lefts), 1) * 4 // 3))
    if np.array_equal(rank_new, np.arange(rank_new.size)):
        rank_new = np.zeros(0, np.int32)  # rank == id (tiktoken): skip a dependent load per merge
    none = np.zeros(0, np.int64)
    t = BpeTables(tok_bytes, tok_off, byte_ids, pairs, bits, rank_new, none, whole, none, none, longs)
    t = t._replace(byte_pairs=_build_byte_pairs(t))
    if not atoms:
        return t
    from .atoms import atom_table  # atoms.py merges with this module's kernels

    atoms, atom_pats = atom_table(t, lefts, rights, ranks)
    return t._replace(atoms=atoms, atom_pats=atom_pats)


def _whole_tables(tok_bytes, tok_off, ids):
    """``(whole, longs)`` for the tokens ``ids`` (the first id of equal bytes wins).

    ``whole`` holds tokens of up to 8 bytes: a slot is the packed bytes and the length,
    so a lookup touches one slot and nothing else; at 148k o200k tokens and a load of
    0.57 it is 4 MB. ``longs`` holds the longer ones with bytes 8-15 packed too, so a
    piece of up to 16 bytes is confirmed from its slot alone; longer ones compare the
    rest in ``tok_bytes``.
    """
    lens = tok_off[ids + 1] - tok_off[ids]
    short, long_ = ids[lens <= 8], ids[lens > 8]
    empty = np.full((16, 3), -1, np.int64)
    whole = _build_whole(tok_bytes, tok_off, short, _pow2_at_least(max(len(short), 1) * 7 // 4), empty)
    longs = _build_longs(tok_bytes, tok_off, long_, _pow2_at_least(2 * max(len(long_), 1)), whole)
    return whole, longs


@njit
def _build_whole(tok_bytes, tok_off, ids, size, longs):
    table = np.full((size, 2), -1, np.int64)
    for j in range(ids.size):
        t = ids[j]
        a, b = tok_off[t], tok_off[t + 1]
        h = _hash_bytes(tok_bytes, a, b)
        if _lookup_in(table, longs, tok_bytes, tok_off, tok_bytes, a, b, h) >= 0:
            continue  # the first id with these bytes wins
        i = np.int64(h & np.uint64(size - 1))
        while table[i, 1] >= 0:
            i = (i + 1) & (size - 1)
        table[i, 0] = np.int64(_pack8(tok_bytes, a, b))
        table[i, 1] = ((b - a) << 32) | t
    return table


@njit
def _split_pairs(tok_bytes, tok_off, ids, whole, longs):
    """All (left, right, token) with left + right == token, both halves tokens.

    Under tiktoken's rule these are exactly the pairs that can merge.
    """
    total = 0
    for j in range(ids.size):
        t = ids[j]
        total += max(tok_off[t + 1] - tok_off[t] - 1, 0)
    lefts = np.empty(total, np.int32)
    rights = np.empty(total, np.int32)
    news = np.empty(total, np.int32)
    n = 0
    for j in range(ids.size):
        t = ids[j]
        a, b = tok_off[t], tok_off[t + 1]
        for c in range(a + 1, b):
            left = _lookup_in(whole, longs, tok_bytes, tok_off, tok_bytes, a, c, _hash_bytes(tok_bytes, a, c))
            if left < 0:
                continue
            right = _lookup_in(whole, longs, tok_bytes, tok_off, tok_bytes, c, b, _hash_bytes(tok_bytes, c, b))
            if right < 0:
                continue
            lefts[n] = left
            rights[n] = right
            news[n] = t
            n += 1
    return lefts[:n], rights[:n], news[:n]


def _pow2_at_least(n: int) -> int:
    return 1 << max(4, int(n - 1).bit_length())


def build_tables(tokens, lefts, rights, news, *, rule: str, ranks=None, skip=()) -> BpeTables:
    """Tables for a model.

    ``tokens``: list of bytes indexed by id (``b""`` for ids that are not tokens);
    ``lefts/rights/news``: the merges (``rule="merges"``, rank = position) — ignored
    for ``rule="ranks"``, where every split of a token into two tokens merges at the
    token's rank (``ranks``, default the id). ``skip``: ids never emitted by encoding
    (specials, gaps).
    """
    lens = np.fromiter((len(t) for t in tokens), np.int64, len(tokens))
    tok_off = np.zeros(len(tokens) + 1, np.int64)
    np.cumsum(lens, out=tok_off[1:])
    tok_bytes = np.frombuffer(b"".join(tokens), np.uint8).copy()
    if tok_bytes.size == 0:
        tok_bytes = np.zeros(1, np.uint8)
    skip_mask = np.zeros(len(tokens), bool)
    skip_mask[list(skip)] = True
    skip_mask |= lens == 0
    candidates = np.flatnonzero(~skip_mask).astype(np.int32)
    byte_ids = np.full(256, -1, np.int32)
    singles = candidates[lens[candidates] == 1]
    for t in singles[::-1]:  # the lowest id of a byte wins
        byte_ids[tokens[t][0]] = t
    if rule == "ranks":
        whole, longs = _whole_tables(tok_bytes, tok_off, candidates)
        lefts, rights, news = _split_pairs(tok_bytes, tok_off, candidates, whole, longs)
        rank_of = news.astype(np.int64) if ranks is None else np.asarray(ranks, np.int64)[news]
        full = _tables(tok_bytes, tok_off, byte_ids, lefts, rights, rank_of, news, whole, longs, atoms=False)
        # Keep one split per token: the two parts merging its own bytes ends with. Merging
        # never puts two parts side by side unless merging their bytes alone passes
        # through those two parts (what happens inside a span only depends on the span),
        # so no other split is ever looked up with effect. o200k: 450k pairs -> 200k, a
        # table half the size, and every merge is a lookup in it.
        keep = _last_splits(full, lefts, rights, news)
        lefts, rights, news, rank_of = lefts[keep], rights[keep], news[keep], rank_of[keep]
        return _tables(tok_bytes, tok_off, byte_ids, lefts, rights, rank_of, news, whole, longs)
    if rule != "merges":
        raise ValueError(f"unknown merge rule {rule!r}")
    lefts = np.asarray(lefts, np.int32)
    rights = np.asarray(rights, np.int32)
    news = np.asarray(news, np.int32)
    no_whole = (np.full((16, 2), -1, np.int64), np.full((16, 3), -1, np.int64))
    t0 = _tables(tok_bytes, tok_off, byte_ids, lefts, rights, np.arange(lefts.size, dtype=np.int64), news, *no_whole)
    # Which tokens may be emitted whole: those that plain merge order rebuilds from
    # their own bytes (under merge order a token can be unreachable from its bytes).
    multi = candidates[lens[candidates] > 1]
    ok = _self_encodes(t0, multi)
    keep = np.concatenate([singles, multi[ok]]).astype(np.int32)
    keep.sort()
    whole, longs = _whole_tables(tok_bytes, tok_off, keep)
    return t0._replace(whole=whole, longs=longs)


@njit
def _build_longs(tok_bytes, tok_off, ids, size, whole):
    table = np.full((size, 3), -1, np.int64)
    for j in range(ids.size):
        t = ids[j]
        a, b = tok_off[t], tok_off[t + 1]
        h = _hash_bytes(tok_bytes, a, b)
        if _lookup_in(whole, table, tok_bytes, tok_off, tok_bytes, a, b, h) >= 0:
            continue  # the first id with these bytes wins
        i = np.int64(h & np.uint64(size - 1))
        while table[i, 2] >= 0:
            i = (i + 1) & (size - 1)
        table[i, 0] = np.int64(_pack8(tok_bytes, a, b))
        table[i, 1] = np.int64(_pack8(tok_bytes, a + 8, b))
        table[i, 2] = ((b - a) << 32) | t
    return table


@njit
def _last_splits(T, lefts, rights, news):
    """keep[j]: merging the bytes of token news[j] ends by merging lefts[j] with rights[j]."""
    keep = np.zeros(lefts.size, np.bool_)
    n = T.tok_off.size - 1
    last = np.full((n, 2), -1, np.int64)  # per token: its final two parts, if it rebuilds itself
    done = np.zeros(n, np.bool_)
    longest = 1
    for t in range(n):
        longest = max(longest, T.tok_off[t + 1] - T.tok_off[t])
    ids = np.empty(longest, np.int64)
    rk = np.empty(longest, np.int64)
    for j in range(news.size):
        t = news[j]
        if not done[t]:
            done[t] = True
            a, b = T.tok_off[t], T.tok_off[t + 1]
            m = b - a
            for i in range(m):
                ids[i] = T.byte_ids[T.tok_bytes[a + i]]
            for i in range(m - 1):
                rk[i] = _pair_rank(T, ids[i], ids[i + 1])
            l2 = -1
            r2 = -1
            while m > 1:  # as _merge, noting the last two parts
                if m == 2:
                    l2 = ids[0]
                    r2 = ids[1]
                best = NO_RANK
                bi = -1
                for i in range(m - 1):
                    if rk[i] < best:
                        best = rk[i]
                        bi = i
                if bi < 0:
                    break
                ids[bi] = _new_id(T, best)
                for jj in range(bi + 1, m - 1):
                    ids[jj] = ids[jj + 1]
                for jj in range(bi + 1, m - 2):
                    rk[jj] = rk[jj + 1]
                m -= 1
                if bi > 0:
                    rk[bi - 1] = _pair_rank(T, ids[bi - 1], ids[bi])
                if bi < m - 1:
                    rk[bi] = _pair_rank(T, ids[bi], ids[bi + 1])
            if m == 1 and ids[0] == t:
                last[t, 0] = l2
                last[t, 1] = r2
        keep[j] = last[t, 0] == lefts[j] and last[t, 1] == rights[j]
    return keep


@njit
def _self_encodes(T, ids):
    ok = np.zeros(ids.size, np.bool_)
    out = np.empty(max(T.tok_bytes.size, 1), np.int32)
    S = _scratch()
    for j in range(ids.size):
        t = ids[j]
        a, b = T.tok_off[t], T.tok_off[t + 1]
        n = _merge(T.tok_bytes, a, b, T, S, out, 0, NO_RANK)
        ok[j] = n == 1 and out[0] == t
    return ok


# ------------------------------------------------------------------------------ merging


@njit
def _scratch(nbytes=HEAP_SCRATCH):
    h = min(HEAP_SCRATCH, max(nbytes, SMALL + 1))
    heap = (np.empty(h, np.int32), np.empty(h, np.int64), np.empty(h, np.int64), np.empty(3 * h, np.int64), np.empty(h, np.int64))
    return (np.empty(SMALL, np.int32), np.empty(SMALL, np.int64), heap)



@njit_inline
def _first_parts(buf, s, e, byte_ids, atoms, pats, ids, base):
    """Write the parts merging starts from for buf[s:e] to ids[base:]; return their count.

    One byte each, except that a character that is an atom (see atoms.py) starts as its
    token, unless a pattern says its neighbour here might join it first. The count is
    ``e - s`` exactly when no atom was used. Atoms need valid UTF-8 around them: after a
    stray byte, or before a continuation byte, a character starts as bytes.
    The tables come as arrays (``T.byte_ids, T.atoms, T.atom_pats``), not as ``T``:
    inlined into ``_encode_span``'s loop, each array passed costs reference counting.
    """
    m = 0
    i = s
    prev_ok = True  # the bytes before i end with a whole character, or i is the start
    while i < e:
        c = np.int64(buf[_ix(i)])
        if c < 0xC2 or c >= 0xF0 or atoms.size == 0:
            ids[_ix(base + m)] = byte_ids[_ix(c)]
            m += 1
            i += 1
            prev_ok = c < 0x80
            continue
        n = 2 if c < 0xE0 else 3
        cp = -1
        if i + n <= e and (buf[_ix(i + 1)] & 0xC0) == 0x80:
            if n == 2:
                cp = ((c & 0x1F) << 6) | (buf[_ix(i + 1)] & 0x3F)
            elif (buf[_ix(i + 2)] & 0xC0) == 0x80:
                cp = ((c & 0xF) << 12) | (np.int64(buf[_ix(i + 1)] & 0x3F) << 6) | (buf[_ix(i + 2)] & 0x3F)
                if cp < 0x800:
                    cp = -1  # overlong
        if cp < 0:
            ids[_ix(base + m)] = byte_ids[_ix(c)]
            m += 1
            i += 1
            prev_ok = False
            continue
        a = atoms[_ix(cp)]
        if a >= 0 and prev_ok and (i + n == e or (buf[_ix(i + n)] & 0xC0) != 0x80):
            p0 = a >> 32
            for q in range(p0, p0 + ((a >> 24) & 0xFF)):
                code = pats[_ix(q)]
                k = code & 7
                if (code >> 3) & 1 == 0:
                    j = i - k
                    if j < s:
                        continue
                else:
                    j = i + n
                    if j + k > e:
                        continue
                v = np.int64(0)
                for u in range(k):
                    v |= np.int64(buf[_ix(j + u)]) << (8 * u)
                if v == code >> 4:
                    a = -1  # this neighbour may take a part of the character first
                    break
        if a >= 0 and prev_ok and (i + n == e or (buf[_ix(i + n)] & 0xC0) != 0x80):
            ids[_ix(base + m)] = a & 0xFFFFFF
            m += 1
        else:
            for u in range(n):
                ids[_ix(base + m + u)] = byte_ids[buf[_ix(i + u)]]
            m += n
        i += n
        prev_ok = True
    return m


@njit_inline
def _first_ranks(buf, s, e, m, T, ids, rk, base, max_rank):
    """rk[base + i] = rank of the pair of parts i, i + 1 (NO_RANK if it does not merge)."""
    if m == e - s:  # bytes only: the dense table
        for i in range(m - 1):
            r = T.byte_pairs[np.int64(buf[_ix(s + i)]) * 256 + buf[_ix(s + i + 1)]]
            rk[_ix(base + i)] = r if r < max_rank else NO_RANK
    else:
        for i in range(m - 1):
            rk[_ix(base + i)] = _pair_rank(T, ids[_ix(base + i)], ids[_ix(base + i + 1)])


@njit_inline
def _merge(buf, s, e, T, S, out, n, max_rank):
    """Merge the bytes buf[s:e] into out[n:], return the new n. Pairs of rank >= max_rank never merge."""
    nb = e - s
    H = S[2]
    if nb <= SMALL:
        ids, rk = S[0], S[1]
    else:
        if nb > H[0].size:
            H = (np.empty(nb, np.int32), np.empty(nb, np.int64), np.empty(nb, np.int64), np.empty(3 * nb, np.int64), np.empty(nb, np.int64))
        ids, rk = H[0], H[4]
    if max_rank == NO_RANK:  # atoms hold only when every merge may happen
        m = _first_parts(buf, s, e, T.byte_ids, T.atoms, T.atom_pats, ids, 0)
    else:
        m = nb
        for i in range(m):
            ids[_ix(i)] = T.byte_ids[buf[_ix(s + i)]]
    _first_ranks(buf, s, e, m, T, ids, rk, 0, max_rank)
    if m > QUAD_PARTS:
        if m >= SWEEP_PARTS:
            m = _merge_sweeps(T, ids, rk, m, max_rank)
        if m > QUAD_PARTS:
            return _merge_heap(T, H, m, out, n, max_rank)
    # The same scan as tiktoken's _byte_pair_merge: the first minimum is the leftmost.
    while m > 1:
        best = NO_RANK
        bi = -1
        for i in range(m - 1):
            if rk[_ix(i)] < best:
                best = rk[_ix(i)]
                bi = i
        if bi < 0:
            break
        ids[_ix(bi)] = _new_id(T, best)
        for j in range(bi + 1, m - 1):
            ids[_ix(j)] = ids[_ix(j + 1)]
        for j in range(bi + 1, m - 2):
            rk[_ix(j)] = rk[_ix(j + 1)]
        m -= 1
        if bi > 0:
            r = _pair_rank(T, ids[_ix(bi - 1)], ids[_ix(bi)])
            rk[_ix(bi - 1)] = r if r < max_rank else NO_RANK
        if bi < m - 1:
            r = _pair_rank(T, ids[_ix(bi)], ids[_ix(bi + 1)])
            rk[_ix(bi)] = r if r < max_rank else NO_RANK
    for i in range(m):
        out[_ix(n + i)] = ids[_ix(i)]
    return n + m


@njit
def _merge_sweeps(T, ids, rk, m, max_rank):
    """Merge the ``m`` parts in ``ids`` (pair ranks in ``rk``) a rank at a time, for at
    most 8 passes' worth over them; return how many parts are left, for the heap.

    Each sweep takes the lowest rank and merges its pairs from left to right in one pass
    over the parts: what merging pair by pair does, as long as no pair a merge makes
    ranks lower (a pair it makes never has the same rank). One that does stops the
    sweep there, and the next sweep starts from that rank. Long runs of a few tokens
    merge this way in a few sweeps: dev's box-drawing lines, up to 8.8 KB, took 18 ns a
    byte in the heap, a pop and two pushes a merge. Pieces whose merges all have ranks
    of their own spend the 8 passes and go to the heap: never a pass per merge.
    """
    budget = 8 * m
    while m > QUAD_PARTS and budget > 0:
        budget -= m
        r = NO_RANK
        for i in range(m - 1):
            r = min(r, rk[_ix(i)])
        if r == NO_RANK:
            return m
        v = _new_id(T, r)
        w = 0
        i = 0
        stop = False
        while i < m:
            if not stop and i < m - 1 and rk[_ix(i)] == r:
                ids[_ix(w)] = v
                if w > 0:  # the pair on the left, with what the sweep made of it
                    rl = _pair_rank(T, ids[_ix(w - 1)], v)
                    rl = rl if rl < max_rank else NO_RANK
                    rk[_ix(w - 1)] = rl
                    stop = rl < r
                rr = NO_RANK
                if i + 2 < m:  # the pair on the right, with the part as it is now
                    rr = _pair_rank(T, v, ids[_ix(i + 2)])
                    rr = rr if rr < max_rank else NO_RANK
                    stop = stop or rr < r
                rk[_ix(w)] = rr
                w += 1
                i += 2
            else:
                ids[_ix(w)] = ids[_ix(i)]
                rk[_ix(w)] = rk[_ix(i)]
                w += 1
                i += 1
        rk[_ix(w - 1)] = NO_RANK
        m = w
    return m


@njit_inline
def _heap_push(heap, size, key):
    # A 4-ary heap: half the levels of a binary one, and the four children of a node
    # share a cache line, so a pop waits on memory half as often.
    i = size
    while i > 0:
        p = (i - 1) >> 2
        if heap[_ix(p)] <= key:
            break
        heap[_ix(i)] = heap[_ix(p)]
        i = p
    heap[_ix(i)] = key
    return size + 1


@njit_inline
def _heap_pop(heap, size):
    """Remove heap[0]; return the new size."""
    size -= 1
    last = heap[_ix(size)]
    i = 0
    while True:
        c = 4 * i + 1
        if c >= size:
            break
        best = c
        v = heap[_ix(c)]
        for d in range(c + 1, min(c + 4, size)):
            w = heap[_ix(d)]
            if w < v:
                v = w
                best = d
        if v >= last:
            break
        heap[_ix(i)] = v
        i = best
    if size > 0:
        heap[_ix(i)] = last
    return size


@njit
def _merge_heap(T, H, m, out, n, max_rank):
    # The m first parts are in H's ids, the ranks of their pairs in its rk. A min-heap of
    # (rank << 32 | part) over a linked list of parts: among equal ranks the heap yields
    # the leftmost pair, the same choice as the quadratic scan. Entries go stale when a
    # neighbour merges; they are checked against the live pair's rank, kept in rk[_ix(i)] for
    # the pair that starts at part i, when popped instead of being removed (no pair
    # lookup to find them stale).
    ids, nxt, prv, heap, rk = H
    size = 0
    for i in range(m):
        nxt[_ix(i)] = i + 1
        prv[_ix(i)] = i - 1
    nxt[_ix(m - 1)] = -1
    for i in range(m - 1):
        if rk[_ix(i)] < NO_RANK:
            size = _heap_push(heap, size, (rk[_ix(i)] << 32) | i)
    rk[_ix(m - 1)] = NO_RANK
    while size > 0:
        key = heap[0]
        size = _heap_pop(heap, size)
        r = key >> 32
        i = key & 0xFFFFFFFF
        if ids[_ix(i)] < 0:
            continue
        j = nxt[_ix(i)]
        if j < 0:
            continue
        if rk[_ix(i)] != r:
            continue
        v = _new_id(T, r)
        ids[_ix(i)] = v
        ids[_ix(j)] = -1
        k = nxt[_ix(j)]
        nxt[_ix(i)] = k
        rk[_ix(i)] = NO_RANK
        if k >= 0:
            prv[_ix(k)] = i
            r3 = _pair_rank(T, v, ids[_ix(k)])
            if r3 < max_rank:
                rk[_ix(i)] = r3
                size = _heap_push(heap, size, (r3 << 32) | i)
        p = prv[_ix(i)]
        if p >= 0:
            r3 = _pair_rank(T, ids[_ix(p)], v)
            rk[_ix(p)] = r3 if r3 < max_rank else NO_RANK
            if r3 < max_rank:
                size = _heap_push(heap, size, (r3 << 32) | p)
    i = 0
    while i >= 0:
        out[_ix(n)] = ids[_ix(i)]
        n += 1
        i = nxt[_ix(i)]
    return n


# -------------------------------------------------------------------------------- cache


# Most slots a cache gets; it starts afresh when half full. Dev (16 MB) has 149k distinct
# pieces that are no token: at 2^18 slots the cache started afresh in the middle of it
# and merged their later repeats again. A first pass took 216.5 ms against 199.9 at 2^19
# (medians of 6), a second pass over the same text 215.8 against 113.8.
CACHE_SLOTS = 1 << 19
CACHE_MAX_CAPACITY = 8 * CACHE_SLOTS  # bytes of text the biggest cache is sized for


_CACHE_HEAD = 8  # int64 words before a packed cache's slots: 64 bytes, so slots never straddle a line
CACHE_RESETS = 4  # the word of a packed cache that counts how often it started afresh
CACHE_GROW = 5  # the word a kernel sets when the cache should grow (see _mark_growth)


@njit
def _new_cache_packed(nbytes):
    """A cache of merged pieces sized for ``nbytes`` of text (it may outlive the call),
    as one int64 array, so that a call hands it to a kernel as one argument.

    A slot is 32 bytes, two to a cache line: the piece's bytes 0-7 and 8-15 packed, then
    ``(length << 32) | number of ids`` (-1: empty), then ``(start of its bytes from 16 on
    in keys << 32) | start of its ids in vals``. So a piece of up to 16 bytes is found,
    or found missing, from its slot alone. ``vals`` has room for 4 ids a slot and
    ``keys`` for 8 bytes (dev's pieces average 3.9 ids and 9 bytes past the 16th, and
    at most half the slots are used). The array: a head of 8 words (the number of
    slots; ``state``: used slots, vals, key bytes and how often it started afresh), the
    slots, ``vals`` (2 int32 a word), then ``keys`` (8 bytes a word).
    """
    P = np.empty(_CACHE_HEAD + 7 * _cache_slots(nbytes), np.int64)
    _clear_cache(P)
    return P


@njit
def _cache_slots(nbytes):
    """Slots of a cache for ``nbytes`` of text: one per 8, a power of 2, 64 to CACHE_SLOTS."""
    size = 64
    while size < nbytes // 8 and size < CACHE_SLOTS:
        size *= 2
    return size


@njit_inline
def _clear_cache(P):
    size = (P.size - _CACHE_HEAD) // 7
    P[:_CACHE_HEAD] = 0
    P[0] = size
    P[_CACHE_HEAD : _CACHE_HEAD + 4 * size] = -1


@njit_inline
def _cache_views(P):
    """``(slots, vals, state, keys)`` of a packed cache, as views."""
    size = P[0]
    at = _CACHE_HEAD
    slots = P[at : at + 4 * size].reshape(size, 4)
    vals = P[at + 4 * size : at + 6 * size].view(np.int32)
    keys = P[at + 6 * size : at + 7 * size].view(np.uint8)
    return slots, vals, P[1:5], keys


def cache_capacity(cache: np.ndarray) -> int:
    """Bytes of text a packed cache was sized for (its slots times 8)."""
    return (cache.size - _CACHE_HEAD) // 7 * 8


@njit_inline
def _mark_growth(CP):
    """Flag a packed cache for growing once a quarter of its slots are used (it starts
    afresh at half), or when it had to start afresh, unless it has the most slots."""
    size = CP[0]
    CP[CACHE_GROW] = size < CACHE_SLOTS and (4 * CP[1] > size or CP[CACHE_RESETS] > 0)


@njit
def _copy_cache(CP, NP):
    """Clear ``NP`` and put the entries of the smaller cache ``CP`` in it (as _cache_put).

    Also how :func:`new_cache` clears a cache (``CP`` then has no slots): one compiled
    entry for both, so the first cache a process makes also loads the code that grows
    one. Loading a kernel from Numba's cache takes 4-5 ms on its first call, which had
    fallen inside whatever call first grew a cache (dev in one batch: 6.8 ms to grow
    instead of 2.2).
    """
    _clear_cache(NP)
    slots, vals, _, keys = _cache_views(CP)
    nslots, nvals, nstate, nkeys = _cache_views(NP)
    size = nslots.shape[0]
    buf = np.empty(CACHE_MAX + 16, np.uint8)
    for k in range(slots.shape[0]):
        meta = slots[k, 2]
        cnt = meta & 0xFFFFFFFF
        if meta < 0 or cnt == PENDING:
            continue
        m = meta >> 32
        tail = max(m - 16, 0)
        v0, k0 = slots[k, 3] & 0xFFFFFFFF, slots[k, 3] >> 32
        # the slot's hash, from the piece's bytes: the packed head and next 8, then the tail
        for j in range(min(m, 8)):
            buf[j] = (slots[k, 0] >> (8 * j)) & 0xFF
        for j in range(8, min(m, 16)):
            buf[j] = (slots[k, 1] >> (8 * (j - 8))) & 0xFF
        for j in range(tail):
            buf[16 + j] = keys[k0 + j]
        i = np.int64(_hash_bytes(buf, 0, m) & np.uint64(size - 1))
        while nslots[i, 2] >= 0:
            i = (i + 1) & (size - 1)
        nslots[i, 0] = slots[k, 0]
        nslots[i, 1] = slots[k, 1]
        nslots[i, 2] = meta
        nslots[i, 3] = (nstate[2] << 32) | nstate[1]
        for j in range(cnt):
            nvals[nstate[1] + j] = vals[v0 + j]
        for j in range(tail):
            nkeys[nstate[2] + j] = keys[k0 + j]
        nstate[0] += 1
        nstate[1] += cnt
        nstate[2] += tail


def grown_cache(cache: np.ndarray, nbytes: int | None = None) -> np.ndarray:
    """``cache`` sized for ``nbytes`` of text (default: 8 times its slots; at most
    ``CACHE_SLOTS``), its entries kept."""
    size = int(_cache_slots(8 * cache_capacity(cache) if nbytes is None else nbytes))
    if 8 * size <= cache_capacity(cache):
        cache[CACHE_GROW] = 0
        return cache
    bigger = huge_page_array(_CACHE_HEAD + 7 * size)  # by NumPy: see new_cache
    _copy_cache(cache, bigger)
    return bigger


@njit
def _new_cache(nbytes):
    """A fresh cache as ``(slots, vals, state, keys)``, for one call."""
    return _cache_views(_new_cache_packed(nbytes))


def new_cache(nbytes: int = 1 << 22) -> np.ndarray:
    """A piece cache to keep across calls (one per thread: kernels write to it), sized
    for ``nbytes`` of text: a slot per 8 bytes, from 64 to ``CACHE_SLOTS``.

    Allocated by NumPy, which asks Linux for huge pages for arrays of 4 MB and more
    (Numba's allocator does not), from a 2 MB boundary (:func:`huge_page_array`). Made
    by Numba, the biggest cache (28 MB) took 8.6-10 ms and its first use another 6 ms of
    page faults; made by NumPy, 2.0 ms and 1.3-3.1 ms.
    """
    P = huge_page_array(_CACHE_HEAD + 7 * int(_cache_slots(nbytes)))
    _copy_cache(_NO_SLOTS, P)  # clears it; see _copy_cache for why not _clear_cache
    return P


_NO_SLOTS = np.zeros(_CACHE_HEAD, np.int64)  # a packed cache of 0 slots: nothing to copy


@njit_inline
def _cache_find(C, buf, s, e, h):
    """The slot of buf[s:e] in the cache, or -1."""
    slots, vals, state, keys = C
    size = slots.shape[0]
    m = e - s
    hd = np.int64(_pack8(buf, s, e))
    nd = np.int64(_pack8(buf, s + 8, e))
    i = np.int64(h & np.uint64(size - 1))
    while True:
        meta = slots[i, 2]
        if meta < 0:
            return -1
        if (meta >> 32) == m and slots[i, 0] == hd and slots[i, 1] == nd:
            if m <= 16 or _same_bytes(keys, slots[i, 3] >> 32, buf, s + 16, m - 16):
                return -1 if meta & 0xFFFFFFFF == PENDING else i
        i = (i + 1) & (size - 1)


@njit_inline
def _cache_get(C, buf, s, e, h, out, n):
    i = _cache_find(C, buf, s, e, h)
    if i < 0:
        return -1
    slots, vals, state, keys = C
    v0, vn = slots[i, 3] & 0xFFFFFFFF, slots[i, 2] & 0xFFFFFFFF
    for j in range(vn):
        out[n + j] = vals[v0 + j]
    return n + vn


@njit_inline
def _cache_put(C, buf, s, e, h, out, n0, n1):
    slots, vals, state, keys = C
    size = slots.shape[0]
    m = e - s
    cnt = n1 - n0
    tail = max(m - 16, 0)
    if 2 * (state[0] + 1) > size or state[1] + cnt > vals.size or state[2] + tail > keys.size:
        slots[:, 2] = -1  # full: start afresh rather than evict one by one
        state[0] = 0
        state[1] = 0
        state[2] = 0
        state[3] += 1
        if cnt > vals.size or tail > keys.size:
            return
    i = np.int64(h & np.uint64(size - 1))
    while slots[i, 2] >= 0:
        i = (i + 1) & (size - 1)
    slots[i, 0] = np.int64(_pack8(buf, s, e))
    slots[i, 1] = np.int64(_pack8(buf, s + 8, e))
    slots[i, 2] = (np.int64(m) << 32) | cnt
    slots[i, 3] = (state[2] << 32) | state[1]
    for j in range(cnt):
        vals[state[1] + j] = out[n0 + j]
    for j in range(tail):
        keys[state[2] + j] = buf[s + 16 + j]
    state[0] += 1
    state[1] += cnt
    state[2] += tail


# ------------------------------------------------------------------------------ encoding


@njit
def _merge_side_by_side(T, bids, brk, boff, bm, pkey, ppos, act, binit, nq):
    """Step 3 of ``_encode_span``: merge pieces ``0..nq`` of a block side by side.

    Piece q's parts are ``bids[boff[q]:boff[q] + bm[q]]`` and its pair ranks are in
    ``brk`` (pair keys if ``binit[q]``: the lookups were prefetched in step 2b). Each
    round takes one merge step of every piece still merging (in ``act``), so the pair
    lookups a step needs are prefetched a whole round before they are read. Each step
    is ``_merge``'s quadratic scan, so ids are unchanged.
    """
    pairs = T.pairs
    rank_new = T.rank_new
    bits = T.pair_bits
    shift = 63 - 2 * bits
    pmask = pairs.size - 1
    rank_is_id = rank_new.size == 0
    nact = nq
    while nact > 0:
        w = 0
        for a in range(nact):
            q = act[_ix(a)]
            base = boff[_ix(q)]
            if binit[_ix(q)]:  # the first ranks of a piece with atoms (keys in brk)
                binit[_ix(q)] = False
                for pa in range(bm[_ix(q)] - 1):
                    brk[_ix(base + pa)] = _rank_of_key(pairs, brk[_ix(base + pa)], shift, pmask)
            for side in range(2):  # the lookups prefetched last round (as _pair_rank)
                pos = ppos[_ix(2 * q + side)]
                if pos < 0:
                    continue
                brk[_ix(base + pos)] = _rank_of_key(pairs, pkey[_ix(2 * q + side)], shift, pmask)
            mm = bm[_ix(q)]
            best = NO_RANK
            bi = -1
            for i in range(mm - 1):  # the first minimum is the leftmost
                if brk[_ix(base + i)] < best:
                    best = brk[_ix(base + i)]
                    bi = i
            if bi < 0:
                continue  # done
            bids[_ix(base + bi)] = np.int32(best) if rank_is_id else rank_new[_ix(best)]
            for jj in range(bi + 1, mm - 1):
                bids[_ix(base + jj)] = bids[_ix(base + jj + 1)]
            for jj in range(bi + 1, mm - 2):
                brk[_ix(base + jj)] = brk[_ix(base + jj + 1)]
            mm -= 1
            bm[_ix(q)] = mm
            for side in range(2):  # the pairs on both sides of the new token
                pa = bi - 1 + side
                ppos[_ix(2 * q + side)] = -1
                if pa < 0 or pa + 1 >= mm:
                    continue
                key = (np.int64(bids[_ix(base + pa)]) << bits) | np.int64(bids[_ix(base + pa + 1)])
                _prefetch(pairs, np.int64(_hash_pair(key) & np.uint64(pmask)))
                pkey[_ix(2 * q + side)] = key
                ppos[_ix(2 * q + side)] = pa
            if mm > 1:
                act[_ix(w)] = q
                w += 1
        nact = w


@njit
def _encode_span(buf, bounds, k0, k1, T, C, S, out, n):
    """Encode the pieces buf[bounds[k]:bounds[k+1]], k0 <= k < k1, into out[n:]; return n.

    The steps per piece are those of ``_encode_piece`` (its byte, a token emitted whole,
    a cached result, or a merge), reordered for memory: the tables are far bigger than
    the caches, so each lookup is a wait on memory, and waits that do not depend on one
    another can overlap. Pieces go in blocks of ``PF_BLOCK``:

    1. list the pieces by kind (a byte, up to 8 bytes, more) without a branch, settle
       the bytes, then hash the others and prefetch their ``whole`` (or ``longs``) slot,
       each kind in a loop of its own: mixed text mispredicts a branch on the kind
       (dev: first pass 184.8 -> 178.2 ms, second pass 99.8 -> 93.7, medians of 10);
    2. classify, again a loop per kind (each list keeps block order, which the pending
       ids below rely on): a token emitted whole is settled; for the rest the cache slot
       is prefetched, and a piece of up to ``SIDE_MAX`` bytes that is not in the cache is
       set up for merging (while its parts fit in ``bids``) and put in the cache at once,
       its ids pending, so that its repeats in the same block are not merged again (on
       dev they had been a fifth of all merges);
    3. merge those pieces side by side (``_merge_side_by_side``);
    4. write out in order, taking cached and longer pieces one by one, and caching what
       was merged.

    Each piece is still merged by the same quadratic scan, so ids are unchanged.
    Mostly flat per piece on purpose: split into per-piece helpers that took ``T`` (a
    NamedTuple of 11 arrays), reference counting took a quarter of the time. Inlined
    helpers given only the arrays they read (``_first_parts``, ``_rank_of_key``) cost
    nothing measurable (dev: 154.4 vs 154.6 ms), nor do calls once a block.
    """
    tok_bytes = T.tok_bytes
    tok_off = T.tok_off
    byte_ids = T.byte_ids
    pairs = T.pairs
    byte_pairs = T.byte_pairs
    whole = T.whole
    longs = T.longs
    lmask = longs.shape[0] - 1
    lflat = longs.reshape(longs.size)
    bits = T.pair_bits
    pmask = pairs.size - 1
    wmask = whole.shape[0] - 1
    slots, vals, state, keys = C
    cmask = slots.shape[0] - 1
    ids, rk, H = S
    wflat = whole.reshape(whole.size)
    cflat = slots.reshape(slots.size)
    nblk = min(PF_BLOCK, max(k1 - k0, 1))
    hq = np.empty(nblk, np.uint64)
    heads = np.empty(nblk, np.uint64)  # each piece's first 8 bytes, packed
    nexts = np.zeros(nblk, np.int64)  # and its bytes 8-15 (set in step 2)
    misses = np.empty(nblk, np.int64)  # pieces of at most SIDE_MAX bytes that are no token
    sidx = np.empty(nblk, np.int64)  # step 1 lists the pieces of 2-8 bytes,
    lidx = np.empty(nblk, np.int64)  # those over 8,
    bidx = np.empty(nblk, np.int64)  # and those of one byte
    nbuf = buf.size
    res = np.empty(nblk, np.int64)  # >= 0: the token; -1: cached or long; -2 - q: merged at q
    bids = np.empty(nblk * SMALL, np.int32)  # merge q: parts at bids[boff[_ix(q)]:], pair ranks at brk[boff[_ix(q)]:]
    brk = np.empty(nblk * SMALL, np.int64)
    boff = np.empty(nblk, np.int64)
    bm = np.empty(nblk, np.int64)  # parts left
    pkey = np.empty(2 * nblk, np.int64)  # pending pair lookups of merge q: key and position
    ppos = np.empty(2 * nblk, np.int64)
    act = np.empty(nblk, np.int64)
    binit = np.zeros(nblk, np.bool_)  # merge q still has to look up its first ranks
    pslot = np.empty(nblk, np.int64)  # merge q's cache slot, put there in step 2b (-1: none)
    hslot = np.empty(nblk, np.int64)  # the cache slot step 2b found piece j in (-1: none)
    atoms = T.atoms
    atom_pats = T.atom_pats
    for b0 in range(k0, k1, nblk):
        b1 = min(b0 + nblk, k1)
        # The cache starts afresh here if need be, never inside a block: steps 2b and 4
        # both write to it and step 4 reads the slots step 2b found. A block adds at most
        # one entry a piece; what finds no room (a tiny cache) is not cached.
        if 2 * (state[0] + b1 - b0) > cmask + 1 or 8 * state[1] > 7 * vals.size or 8 * state[2] > 7 * keys.size:
            for i in range(cmask + 1):
                slots[_ix(i), 2] = -1
            state[0] = 0
            state[1] = 0
            state[2] = 0
            state[3] += 1  # the pool gives a cache that starts afresh a bigger one
        # -- 1. hash (as _hash_bytes) and prefetch. The pieces are first listed by kind,
        # without a branch, so that each kind is then taken in a loop of its own instead
        # of branching on the kind piece by piece (a branch that mixed text mispredicts)
        ns = 0
        nl = 0
        n1 = 0
        for k in range(b0, b1):
            m = bounds[_ix(k + 1)] - bounds[_ix(k)]
            sidx[_ix(ns)] = k - b0
            lidx[_ix(nl)] = k - b0
            bidx[_ix(n1)] = k - b0
            ns += (m >= 2) & (m <= 8)
            nl += m > 8
            n1 += m <= 1
        for a in range(n1):  # a byte: its id (an empty piece, which no scanner makes: none)
            j = bidx[_ix(a)]
            s = bounds[_ix(b0 + j)]
            if bounds[_ix(b0 + j + 1)] > s:
                res[_ix(j)] = byte_ids[buf[_ix(s)]]
            else:
                res[_ix(j)] = -1
                hslot[_ix(j)] = -1
        for a in range(ns):  # 2-8 bytes: the packed head says it all
            j = sidx[_ix(a)]
            s = bounds[_ix(b0 + j)]
            m = bounds[_ix(b0 + j + 1)] - s
            if s + 8 <= nbuf:
                sh = np.uint64(64 - 8 * m)
                head = (_load8(buf, s) << sh) >> sh
            else:
                head = np.uint64(0)
                for i in range(m):
                    head |= np.uint64(buf[_ix(s + i)]) << np.uint64(8 * i)
            heads[_ix(j)] = head
            h = (head ^ (np.uint64(m) << np.uint64(56))) * np.uint64(0x9E3779B97F4A7C15)
            h ^= h >> np.uint64(29)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(32)
            hq[_ix(j)] = h
            _prefetch(wflat, np.int64(h & np.uint64(wmask)) * 2)
        for a in range(nl):  # over 8 bytes: the head, then 8 bytes at a time
            j = lidx[_ix(a)]
            s = bounds[_ix(b0 + j)]
            e = bounds[_ix(b0 + j + 1)]
            m = e - s
            if s + 8 <= nbuf:
                head = _load8(buf, s)
            else:
                head = np.uint64(0)
                for i in range(8):
                    head |= np.uint64(buf[_ix(s + i)]) << np.uint64(8 * i)
            heads[_ix(j)] = head
            h = (head ^ (np.uint64(m) << np.uint64(56))) * np.uint64(0x9E3779B97F4A7C15)
            for i in range(s + 8, e, 8):  # as _pack8, written out: no helper call per piece
                w = np.uint64(0)
                if i + 8 <= nbuf:
                    sh = np.uint64(64 - 8 * min(e - i, 8))
                    w = (_load8(buf, i) << sh) >> sh
                else:
                    for u in range(min(e - i, 8)):
                        w |= np.uint64(buf[_ix(i + u)]) << np.uint64(8 * u)
                h ^= w
                h *= np.uint64(0xFF51AFD7ED558CCD)
            h ^= h >> np.uint64(29)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(32)
            hq[_ix(j)] = h
            _prefetch(lflat, np.int64(h & np.uint64(lmask)) * 3)
        # -- 2a. classify: a token emitted whole, or a miss (each list keeps block order,
        # which steps 2b and 4 rely on for repeats of a piece)
        nq = 0
        nmiss = 0
        for a in range(ns):  # up to 8 bytes: `whole` (as _lookup_in)
            j = sidx[_ix(a)]
            m = bounds[_ix(b0 + j + 1)] - bounds[_ix(b0 + j)]
            h = hq[_ix(j)]
            hd = np.int64(heads[_ix(j)])
            nexts[_ix(j)] = 0
            t = -1
            i = np.int64(h & np.uint64(wmask))
            while True:
                meta = whole[_ix(i), 1]
                if meta < 0:
                    break
                if whole[_ix(i), 0] == hd and (meta >> 32) == m:
                    t = meta & 0xFFFFFFFF
                    break
                i = (i + 1) & wmask
            if t >= 0:
                res[_ix(j)] = t
                continue
            res[_ix(j)] = -1
            hslot[_ix(j)] = -1
            _prefetch(cflat, np.int64(h & np.uint64(cmask)) * 4)
            misses[_ix(nmiss)] = j  # m <= 8 <= SIDE_MAX
            nmiss += 1
        for a in range(nl):  # over 8 bytes: `longs` (as _lookup_in)
            j = lidx[_ix(a)]
            s = bounds[_ix(b0 + j)]
            e = bounds[_ix(b0 + j + 1)]
            m = e - s
            h = hq[_ix(j)]
            hd = np.int64(heads[_ix(j)])
            nd = np.int64(0)  # bytes 8-15, packed
            if s + 16 <= nbuf:
                sh = np.uint64(64 - 8 * min(m - 8, 8))
                nd = np.int64((_load8(buf, s + 8) << sh) >> sh)
            else:
                for u in range(min(m - 8, 8)):
                    nd |= np.int64(buf[_ix(s + 8 + u)]) << (8 * u)
            nexts[_ix(j)] = nd
            t = -1
            i = np.int64(h & np.uint64(lmask))
            while True:
                meta = longs[_ix(i), 2]
                if meta < 0:
                    break
                if longs[_ix(i), 0] == hd and longs[_ix(i), 1] == nd and (meta >> 32) == m:
                    tt = meta & 0xFFFFFFFF
                    same = True
                    if m > 16:
                        o = tok_off[_ix(tt)]
                        for jj in range(16, m):
                            if tok_bytes[_ix(o + jj)] != buf[_ix(s + jj)]:
                                same = False
                                break
                    if same:
                        t = tt
                        break
                i = (i + 1) & lmask
            if t >= 0:
                res[_ix(j)] = t
                continue
            res[_ix(j)] = -1
            hslot[_ix(j)] = -1
            _prefetch(cflat, np.int64(h & np.uint64(cmask)) * 4)
            if m <= SIDE_MAX:
                misses[_ix(nmiss)] = j
                nmiss += 1
        # -- 2b. pieces of up to SIDE_MAX bytes that are no token: in the cache (its slot
        # was prefetched in 2a; prefetching it for every piece in step 1 wasted five in
        # six), else set up to merge, as long as their bytes fit in what is left of bids
        used = 0
        for a in range(nmiss):
            j = misses[_ix(a)]
            s = bounds[_ix(b0 + j)]
            e = bounds[_ix(b0 + j + 1)]
            m = e - s
            h = hq[_ix(j)]
            hd = np.int64(heads[_ix(j)])
            nd = nexts[_ix(j)]
            # in the cache? (as _cache_find; step 4 reads the slot, filled or pending)
            i = np.int64(h & np.uint64(cmask))
            hit = False
            while True:
                meta = slots[_ix(i), 2]
                if meta < 0:
                    break
                if (meta >> 32) == m and slots[_ix(i), 0] == hd and slots[_ix(i), 1] == nd:
                    hit = True
                    ks = slots[_ix(i), 3] >> 32
                    for jj in range(16, m):
                        if keys[_ix(ks + jj - 16)] != buf[_ix(s + jj)]:
                            hit = False
                            break
                    if hit:
                        break
                i = (i + 1) & cmask
            if hit:
                hslot[_ix(j)] = i
                _prefetch(vals, slots[_ix(i), 3] & 0xFFFFFFFF)  # step 4 copies them
                continue
            if used + m > bids.size:
                continue  # no room left in this block: step 4 merges it alone
            q = nq
            nq += 1
            res[_ix(j)] = -2 - q
            base = used
            boff[_ix(q)] = base
            # Put it in the cache now, its ids pending until step 4 writes them: the same
            # piece later in this block then finds it here instead of merging again.
            tail = max(m - 16, 0)
            pslot[_ix(q)] = -1
            if 2 * (state[0] + 1) <= cmask + 1 and state[2] + tail <= keys.size:
                while slots[_ix(i), 2] >= 0:
                    i = (i + 1) & cmask
                slots[_ix(i), 0] = hd
                slots[_ix(i), 1] = nd
                slots[_ix(i), 2] = (np.int64(m) << 32) | PENDING
                slots[_ix(i), 3] = state[2] << 32
                for jj in range(tail):
                    keys[state[2] + jj] = buf[_ix(s + 16 + jj)]
                state[0] += 1
                state[2] += tail
                pslot[_ix(q)] = i
            mp = _first_parts(buf, s, e, byte_ids, atoms, atom_pats, bids, base)
            bm[_ix(q)] = mp
            used += mp
            binit[_ix(q)] = mp != m
            if mp == m:  # bytes only: ranks from the dense table
                for i in range(m - 1):
                    brk[_ix(base + i)] = byte_pairs[np.int64(buf[_ix(s + i)]) * 256 + buf[_ix(s + i + 1)]]
            else:  # atoms: pair lookups, prefetched now and read in the first round of step 3
                for i in range(mp - 1):
                    key = (np.int64(bids[_ix(base + i)]) << bits) | np.int64(bids[_ix(base + i + 1)])
                    _prefetch(pairs, np.int64(_hash_pair(key) & np.uint64(pmask)))
                    brk[_ix(base + i)] = key
            ppos[_ix(2 * q)] = -1
            ppos[_ix(2 * q + 1)] = -1
            act[_ix(q)] = q
        # -- 3. merge the short pieces side by side (each as _merge's quadratic scan)
        _merge_side_by_side(T, bids, brk, boff, bm, pkey, ppos, act, binit, nq)
        # -- 4. write out
        for k in range(b0, b1):
            j = k - b0
            r0 = res[_ix(j)]
            if r0 >= 0:
                out[_ix(n)] = r0
                n += 1
                continue
            s = bounds[_ix(k)]
            e = bounds[_ix(k + 1)]
            m = e - s
            if m == 0:
                continue
            n0 = n
            fill = -1  # the piece's cache slot whose ids are pending
            if r0 <= -2:
                q = -2 - r0
                base = boff[_ix(q)]
                for i in range(bm[_ix(q)]):
                    out[_ix(n + i)] = bids[_ix(base + i)]
                n += bm[_ix(q)]
                fill = pslot[_ix(q)]
                if fill < 0:
                    continue  # its key found no room in the cache
            else:
                hit = hslot[_ix(j)]
                if m > SIDE_MAX and m <= CACHE_MAX:  # not looked up in step 2b (as _cache_find)
                    hd = np.int64(heads[_ix(j)])
                    nd = nexts[_ix(j)]
                    i = np.int64(hq[_ix(j)] & np.uint64(cmask))
                    while True:
                        meta = slots[_ix(i), 2]
                        if meta < 0:
                            break
                        if (meta >> 32) == m and slots[_ix(i), 0] == hd and slots[_ix(i), 1] == nd:
                            hit = i
                            ks = slots[_ix(i), 3] >> 32
                            for jj in range(16, m):
                                if keys[_ix(ks + jj - 16)] != buf[_ix(s + jj)]:
                                    hit = -1
                                    break
                            if hit >= 0:
                                break
                        i = (i + 1) & cmask
                if hit >= 0:
                    vn = slots[_ix(hit), 2] & 0xFFFFFFFF
                    if vn != PENDING:  # (as _cache_get)
                        v0 = slots[_ix(hit), 3] & 0xFFFFFFFF
                        for jj in range(vn):
                            out[_ix(n + jj)] = vals[_ix(v0 + jj)]
                        n += vn
                        continue
                    fill = hit  # its first copy found no room for its ids
                # -- merge (as _merge): pieces over SIDE_MAX bytes, those that found no
                # room in step 2b, and those whose ids are pending
                n = _merge_any(buf, s, e, T, ids, rk, H, out, n)
            cnt = n - n0
            if fill >= 0:  # -- the ids of a slot step 2b put in the cache
                if state[1] + cnt <= vals.size:
                    for jj in range(cnt):
                        vals[state[1] + jj] = out[_ix(n0 + jj)]
                    slots[_ix(fill), 2] = (np.int64(m) << 32) | cnt
                    slots[_ix(fill), 3] = (slots[_ix(fill), 3] & ~np.int64(0xFFFFFFFF)) | state[1]
                    state[1] += cnt
                continue
            # -- remember it (as _cache_put; the block start made room for a slot)
            tail = max(m - 16, 0)
            if m > CACHE_MAX or 2 * (state[0] + 1) > cmask + 1 or state[1] + cnt > vals.size or state[2] + tail > keys.size:
                continue
            i = np.int64(hq[_ix(j)] & np.uint64(cmask))
            while slots[_ix(i), 2] >= 0:
                i = (i + 1) & cmask
            slots[_ix(i), 0] = np.int64(heads[_ix(j)])
            slots[_ix(i), 1] = nexts[_ix(j)]
            slots[_ix(i), 2] = (np.int64(m) << 32) | cnt
            slots[_ix(i), 3] = (state[2] << 32) | state[1]
            for jj in range(cnt):
                vals[state[1] + jj] = out[_ix(n0 + jj)]
            for jj in range(tail):
                keys[state[2] + jj] = buf[_ix(s + 16 + jj)]
            state[0] += 1
            state[1] += cnt
            state[2] += tail
    return n


@njit
def _merge_any(buf, s, e, T, ids, rk, H, out, n):
    return _merge(buf, s, e, T, (ids, rk, H), out, n, NO_RANK)


@njit_inline
def _encode_piece(buf, s, e, T, C, S, out, n):
    """One piece: its byte, a token emitted whole, a cached result, or a merge."""
    if e - s == 1:
        out[n] = T.byte_ids[buf[s]]
        return n + 1
    h = _hash_bytes(buf, s, e)
    t = _whole_lookup(T, buf, s, e, h)
    if t >= 0:
        out[n] = t
        return n + 1
    cacheable = e - s <= CACHE_MAX
    if cacheable:
        m = _cache_get(C, buf, s, e, h, out, n)
        if m >= 0:
            return m
    m = _merge(buf, s, e, T, S, out, n, NO_RANK)
    if cacheable:
        _cache_put(C, buf, s, e, h, out, n, m)
    return m


@njit
def _encode_bounds(buf, bounds, P, out):
    T = _unpack_tables(P)
    C = _new_cache(buf.size)
    S = _scratch(buf.size)
    return _encode_span(buf, bounds, 0, bounds.size - 1, T, C, S, out, np.int64(0))  # int64 as elsewhere: one compiled _encode_span, not two


def encode_bounds(buf: np.ndarray, bounds: np.ndarray, tables: BpeTables | np.ndarray) -> np.ndarray:
    """Ids of the pretokens ``buf[bounds[k]:bounds[k+1]]`` (uint32). ``tables`` may come
    packed (:func:`pack_tables`), as a Tokenizer keeps them."""
    P = tables if isinstance(tables, np.ndarray) else pack_tables(tables)
    out = np.empty(max(buf.size, 1), np.uint32)
    n = _encode_bounds(buf, np.asarray(bounds, np.int64), P, out)
    out.resize(n, refcheck=False)  # in place (a realloc): room for one id a byte is 4-5x too much
    return out


@njit
def _encode_docs(data, bounds, doc_bidx, d0, d1, P, out, out_doc):
    """Encode documents d0..d1; the pieces of document d are bounds[doc_bidx[d]:doc_bidx[d+1]+1].
    ``P``: the packed tables."""
    T = _unpack_tables(P)
    C = _new_cache(data.size if d1 <= d0 else bounds[doc_bidx[d1]] - bounds[doc_bidx[d0]])
    S = _scratch(data.size if d1 <= d0 else bounds[doc_bidx[d1]] - bounds[doc_bidx[d0]])
    n = 0
    for d in range(d0, d1):
        out_doc[d - d0] = n
        n = _encode_span(data, bounds, doc_bidx[d], doc_bidx[d + 1], T, C, S, out, n)
    out_doc[d1 - d0] = n
    return n


# ----------------------------------------------------------- fused scan + encode


@njit
def _encode_fused(kind, table, text, P, CP):
    """Ids of UTF-8 ``text`` (bytes or a uint8 array), scanned with the native scanner
    ``kind`` and encoded in one nogil call, as an array of their own.

    ``P`` is the packed tables and ``CP`` a packed cache: one argument each, not 15 (a
    short call spent 1.25 us of its 4.4 in Numba's dispatcher unboxing arrays). The ids
    go to room for one a byte, then to an array of their size: text has one a 4-5
    bytes, and a view would keep all the room alive (per document on dev: 64 MB instead
    of 13). The copy is 0.1% of the time; the dispatcher unboxing an ``out`` argument
    and NumPy shrinking it cost a short call 0.5 us.
    """
    buf = as_u8(text)
    T = _unpack_tables(P)
    C = _cache_views(CP)
    bounds = np.empty(buf.size + 1, np.int64)
    nb = scan_range(kind, buf, 0, buf.size, table, bounds)
    S = _scratch(buf.size)
    out = np.empty(buf.size, np.uint32)
    n = 0
    if nb > FEW_PIECES:
        n = _encode_span(buf, bounds, 0, nb, T, C, S, out, np.int64(0))
    else:
        # A few pieces: one by one. Blocking lookups to overlap them pays for itself only
        # over many pieces; its setup (17 arrays) cost more than "hello world" did.
        for k in range(nb):
            if bounds[k + 1] > bounds[k]:
                n = _encode_piece(buf, bounds[k], bounds[k + 1], T, C, S, out, n)
    _mark_growth(CP)
    return out[:n].copy()


@njit
def _encode_docs_fused(kind, table, data, offsets, d0, d1, P, CP, out, out_doc):
    """Scan and encode documents d0..d1 (document d = data[offsets[d]:offsets[d+1]]),
    with the packed tables ``P`` and the piece cache ``CP`` (from :func:`new_cache`; it
    may come from earlier calls)."""
    T = _unpack_tables(P)
    C = _cache_views(CP)
    longest = 0
    for d in range(d0, d1):
        longest = max(longest, offsets[d + 1] - offsets[d])
    bounds = np.empty(longest + 1, np.int64)
    S = _scratch(longest)
    n = 0
    for d in range(d0, d1):
        out_doc[d - d0] = n
        s, e = offsets[d], offsets[d + 1]
        if e <= s:
            continue
        nb = scan_range(kind, data, s, e, table, bounds)
        n = _encode_span(data, bounds, 0, nb, T, C, S, out, n)
    out_doc[d1 - d0] = n
    _mark_growth(CP)
    return n


def encode_native(kind: int, table: np.ndarray, buf: np.ndarray | bytes, tables: np.ndarray, cache=None) -> np.ndarray:
    """Ids of UTF-8 ``buf`` (an array or bytes) pretokenized by the native scanner ``kind`` (uint32).

    ``tables`` is packed (:func:`pack_tables`, made once by the caller; a BpeTables is
    packed per call). ``cache`` (from
    :func:`new_cache`) carries merged pieces over from earlier calls; it must not be
    shared between threads.
    """
    P = tables if isinstance(tables, np.ndarray) else pack_tables(tables)
    return _encode_fused(kind, table, buf, P, _new_cache_packed(len(buf)) if cache is None else cache)


@njit
def _merge_ids(T, token, max_rank, out):
    """Parts of a token's bytes after all merges below max_rank (for deriving merges)."""
    S = _scratch()
    return _merge(T.tok_bytes, T.tok_off[token], T.tok_off[token + 1], T, S, out, 0, max_rank)


def split_token(tables: BpeTables, token: int, rank: int) -> np.ndarray:
    """Parts of a token's bytes merged with every pair ranked below ``rank``.

    For a tiktoken model this is the merge that creates the token (two parts).
    """
    out = np.empty(int(tables.tok_off[token + 1] - tables.tok_off[token]) + 1, np.int32)
    n = _merge_ids(tables, token, np.int64(rank), out)
    return out[:n]


# ------------------------------------------------------------------------------ decoding


@njit
def _decode(ids, tok_bytes, tok_off, out):
    n = 0
    for k in range(ids.size):
        t = ids[k]
        a, b = tok_off[t], tok_off[t + 1]
        for i in range(a, b):
            out[n] = tok_bytes[i]
            n += 1
    return n


def decode_ids(ids: np.ndarray, tables: BpeTables) -> bytes:
    """Bytes of already validated ids."""
    lens = tables.tok_off[ids + 1] - tables.tok_off[ids]
    out = np.empty(int(lens.sum()), np.uint8)
    _decode(ids, tables.tok_bytes, tables.tok_off, out)
    return out.tobytes()
