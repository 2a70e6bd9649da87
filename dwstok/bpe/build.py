"""Building :class:`BpeTables` from a model's tokens and merges (or tiktoken ranks).

For models built by dwstok the pairs are the merges, ranked by creation order; for
tiktoken rank files every pair whose concatenation is a token merges at that token's
rank, which is what tiktoken's ``_byte_pair_merge`` does. Only one split per token is
kept then (the last merge of its own bytes; see ``build_tables``).
"""

from __future__ import annotations

import numpy as np

from .._intrinsics import readonly
from .._jit import njit
from ..hashing import _hash_bytes, _hash_pair, _pack8
from ..limits import MAX_IDS
from .merge import HEAP_SCRATCH, _merge_alone, _scratch
from .tables import LONG_FILTER_OVER, NO_RANK, BpeTables, _filter_add, _lookup_in, _lookup_long, _lookup_short, _new_id, _pack_ids, _pair_rank, _whole_lookup


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


FILTER_BITS_A_PAIR = 5  # at least; so that a pair not in the table passes about one time in ten


@njit
def _build_pair_filter(pairs, bits, words):
    """The filter ``_may_merge`` reads: for every pair in ``pairs``, two bits of one of
    ``words`` (a power of two) words, picked by its hash."""
    shift = 63 - 2 * bits
    f = np.zeros(words, np.uint64)
    for v in pairs:
        if v >= 0:
            _filter_add(f, _hash_pair(v >> shift))
    return f.view(np.int64)


def filter_of(hashes, bits_a_key: int) -> np.ndarray:
    """A bit filter of the keys with ``hashes``, as ``pair_filter`` (two bits a key in
    one int64 word, ``_filter_add``), sized for ``bits_a_key`` bits a key."""
    f = np.zeros(_pow2_at_least(-(-hashes.size * bits_a_key // 64)), np.uint64)
    _fill_filter(f, hashes)
    return f.view(np.int64)


@njit
def _fill_filter(f, hashes):
    for h in hashes:
        _filter_add(f, h)


LONG_FILTER_BITS = 16  # so that a piece that is no token passes about one time in a hundred


def _long_filter(tok_bytes, tok_off, longs) -> np.ndarray:
    """The filter of the tokens in ``longs`` of over LONG_FILTER_OVER bytes, by their
    hash (``_hash_bytes``), LONG_FILTER_BITS a token."""
    return filter_of(_long_hashes(tok_bytes, tok_off, longs), LONG_FILTER_BITS)


@njit
def _long_hashes(tok_bytes, tok_off, longs):
    hashes = np.empty(longs.shape[0], np.uint64)
    n = 0
    for i in range(longs.shape[0]):
        meta = longs[i, 2]
        if meta >= 0 and (meta >> 32) > LONG_FILTER_OVER:
            t = meta & 0xFFFFFFFF
            hashes[n] = _hash_bytes(tok_bytes, tok_off[t], tok_off[t + 1])
            n += 1
    return hashes[:n]


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
    if n_ids > MAX_IDS or max_rank >= 1 << (63 - 2 * bits):  # (so 3 * bits <= 63)
        raise ValueError(f"vocabulary too large: {n_ids} ids, at most {MAX_IDS} (the pair table and the piece cache keep an id in 21 bits)")
    rank_new = np.full(max_rank + 1, -1, np.int32)
    rank_new[ranks] = news
    # Ranks no pair has (tiktoken: tokens no split of which is a pair of tokens) are never
    # looked up; give them their own value so that rank == id models skip the table.
    gaps = rank_new < 0
    rank_new[gaps] = np.flatnonzero(gaps)
    pairs = _build_pairs(lefts, rights, ranks, bits, _pow2_at_least(max(len(lefts), 1) * 4 // 3))
    pair_filter = _build_pair_filter(pairs, bits, _pow2_at_least(-(-len(lefts) * FILTER_BITS_A_PAIR // 64)))
    if np.array_equal(rank_new, np.arange(rank_new.size)):
        rank_new = np.zeros(0, np.int32)  # rank == id (tiktoken): skip a dependent load per merge
    none = np.zeros(0, np.int64)
    t = BpeTables(tok_bytes, tok_off, byte_ids, pairs, bits, rank_new, none, whole, none, none, longs, pair_filter, none, none, none)
    t = t._replace(byte_pairs=_build_byte_pairs(t), long_filter=_long_filter(tok_bytes, tok_off, longs))
    if not atoms:
        return t
    from ..atoms import atom_joins, atom_table  # atoms.py merges with the kernels of this package

    atoms, atom_pats = atom_table(t, lefts, rights, ranks)
    return t._replace(atoms=atoms, atom_pats=atom_pats, atom_joins=atom_joins(t, atoms))


@njit
def _build_small_ids(T):
    """``small_ids``: the packed ids of each piece of one byte, then of two, as the
    encoder makes them one by one (``_encode_pieces``): a token emitted whole, else the
    merge of the pair if it has one, else its two bytes. Not through ``_merge_alone``, a
    call a pair, which took ten times as long at every load; tests compare the table
    with tiktoken's ids and with the reference encoder."""
    out = np.empty(256 + 65536, np.int64)
    for b in range(256):
        out[b] = _pack_ids(T.byte_ids[b], -1, -1)
    two = np.empty(2, np.uint8)
    for i in range(65536):
        two[0] = i >> 8
        two[1] = i & 255
        t = _whole_lookup(T, two, 0, 2, _hash_bytes(two, 0, 2))
        r = T.byte_pairs[i]
        if t < 0 and r != NO_RANK:
            t = _new_id(T, r)
        out[256 + i] = _pack_ids(t, -1, -1) if t >= 0 else _pack_ids(T.byte_ids[i >> 8], T.byte_ids[i & 255], -1)
    return out


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
    whole = _build_whole(tok_bytes, tok_off, short, _pow2_at_least(max(len(short), 1) * 7 // 4))
    longs = _build_longs(tok_bytes, tok_off, long_, _pow2_at_least(2 * max(len(long_), 1)))
    return whole, longs


@njit
def _build_whole(tok_bytes, tok_off, ids, size):
    table = np.full((size, 2), -1, np.int64)
    for j in range(ids.size):
        t = ids[j]
        a, b = tok_off[t], tok_off[t + 1]
        h = _hash_bytes(tok_bytes, a, b)
        head = np.int64(_pack8(tok_bytes, a, b))
        if _lookup_short(table, head, b - a, h) >= 0:  # (ids has tokens of up to 8 bytes only)
            continue  # the first id with these bytes wins
        i = np.int64(h & np.uint64(size - 1))
        while table[i, 1] >= 0:
            i = (i + 1) & (size - 1)
        table[i, 0] = head
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
    t = _rule_tables(tokens, lefts, rights, news, rule, ranks, skip)
    # from the finished tables, once: the rules build tables on the way (without
    # ``whole``, or with every split) that encode otherwise
    return t._replace(small_ids=_build_small_ids(t))


def _rule_tables(tokens, lefts, rights, news, rule, ranks, skip) -> BpeTables:
    """``build_tables`` but for ``small_ids``."""
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
    return t0._replace(whole=whole, longs=longs, long_filter=_long_filter(tok_bytes, tok_off, longs))


@njit
def _build_longs(tok_bytes, tok_off, ids, size):
    table = np.full((size, 3), -1, np.int64)
    for j in range(ids.size):
        t = ids[j]
        a, b = tok_off[t], tok_off[t + 1]
        h = _hash_bytes(tok_bytes, a, b)
        head = np.int64(_pack8(tok_bytes, a, b))
        nxt = np.int64(_pack8(tok_bytes, a + 8, b))
        if _lookup_long(table, tok_bytes, tok_off, tok_bytes, a, b - a, head, nxt, h) >= 0:  # (ids: over 8 bytes only)
            continue  # the first id with these bytes wins
        i = np.int64(h & np.uint64(size - 1))
        while table[i, 2] >= 0:
            i = (i + 1) & (size - 1)
        table[i, 0] = head
        table[i, 1] = nxt
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
    out = np.empty(max(T.tok_bytes.size, 1), np.uint32)  # as the encoder's: its heap and sweeps compile once
    sids, srk, sheap = _scratch(np.int64(HEAP_SCRATCH))
    buf = readonly(T.tok_bytes)  # typed as the encoder's text: its compiled merges, not others
    for j in range(ids.size):
        t = ids[j]
        a, b = T.tok_off[t], T.tok_off[t + 1]
        n = _merge_alone(buf, a, b, T, sids, srk, sheap, out, np.int64(0))
        ok[j] = n == 1 and out[0] == t
    return ok
