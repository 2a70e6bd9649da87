"""The span driver: the pieces ``buf[bounds[k]:bounds[k+1]]`` of a span to ids.

Each piece is its byte, a token emitted whole, a cached result, or a merge
(``_encode_pieces`` says it plainly). ``_encode_span`` takes the same steps reordered for
memory: the tables are far bigger than the CPU's caches, so each lookup is a wait on
memory, and waits that do not depend on one another can overlap. Pieces go in blocks of
``PF_BLOCK``, each block in steps:

1. list the pieces by kind (one or two bytes, up to 8, more) without a branch, settle
   those of one or two bytes from a table of their ids, then hash the others and
   prefetch their slot in the cache's front table, each kind in a loop of its own
   (mixed text mispredicts a branch on the kind);
   1b. a piece of up to FRONT_MAX bytes found in the front table is settled, ids and
   all; for the rest the ``whole`` (or ``longs``) slot is prefetched;
2. classify, again a loop per kind (each list keeps block order, which the pending ids
   below rely on): a token emitted whole is settled (and put in the front); for the
   rest the cache slot is prefetched, and a piece of up to ``SIDE_MAX`` bytes that is
   found there with up to three ids is settled too, else set up for merging (while its
   parts fit in the block's room) and put in the cache at once, its ids pending, so
   that its repeats in the same block are not merged again;
3. merge those pieces side by side (side_by_side.py);
4. write out in order, taking cached and longer pieces one by one, and caching what was
   merged (in the front too, if it has up to three ids).

Each piece is still merged by the same quadratic scan, so ids are unchanged. The steps
are inlined functions given only the arrays they read: a helper call per piece that
passed the whole ``BpeTables`` cost a quarter of the time in reference counting, while
inlined helpers and calls once a block cost nothing measurable.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._intrinsics import load8 as _load8
from .._intrinsics import prefetch as _prefetch
from .._intrinsics import flat as _flat
from .._intrinsics import ix as _ix
from .._jit import njit_inline, njit_no_nrt
from .cache import CACHE_MAX, PENDING, _cache_get, _cache_put
from ..hashing import _avalanche, _hash_bytes, _hash_from_head, _hash_pair, _pack8, _same_words
from .merge import SMALL, _merge_alone
from .parts import CUT, _first_parts
from .side_by_side import _merge_side_by_side
from .tables import FRONT_ID, LONG_FILTER_OVER, _filter_word, _may_hold, _pack_ids, _whole_lookup

SIDE_MAX = 96  # pieces up to this many bytes merge side by side (CJK runs are 20-100 bytes)
FRONT_MAX = 16  # pieces up to this many bytes go in the cache's front table
PF_BLOCK = 512  # pieces looked up (and short ones merged) together
SEGMENTS = 4  # merges a block has room for, a piece; a piece cut in more than fit merges whole


@njit_inline
def _encode_pieces(buf, bounds, k0, k1, T, C, S, out, n):
    """The pieces k0 <= k < k1 one by one into out[n:]; return the new n. Each is its
    byte, a token emitted whole, a cached result, or a merge (then cached).

    One loop with one return, inlined once a call: written as an inlined function per
    piece (with a return per case), each piece had paid reference counting on the 22
    arrays of the tables, cache and scratch it was handed, and took three times as long
    (bench/results/encode-few-pieces-20261202.md).
    """
    ids, rk, H = S
    for k in range(k0, k1):
        s = bounds[k]
        e = bounds[k + 1]
        if e - s <= 1:
            if e > s:
                out[n] = T.byte_ids[buf[s]]
                n += 1
            continue
        h = _hash_bytes(buf, s, e)
        t = _whole_lookup(T, buf, s, e, h)
        if t >= 0:
            out[n] = t
            n += 1
            continue
        cacheable = e - s <= CACHE_MAX
        if cacheable:
            m = _cache_get(C, buf, s, e, h, out, n)
            if m >= 0:
                n = m
                continue
        m = _merge_alone(buf, s, e, T, ids, rk, H, out, np.int64(n))  # int64: never a literal 0, a compile of its own
        if cacheable:
            _cache_put(C, buf, s, e, h, out, n, m)
        n = m
    return n


class _Block(NamedTuple):
    """Work arrays of a block: by piece j (its place in the block), or by merge q."""

    hq: np.ndarray  # hash of piece j
    heads: np.ndarray  # its bytes 0-7, packed
    nexts: np.ndarray  # its bytes 8-15 (set in step 2)
    res: np.ndarray  # >= 0: its one to three ids, packed (_pack_ids); -1: cached or long; -2: merged side by side
    res2: np.ndarray  # with res -2: where its parts start in bids
    res3: np.ndarray  # with res -2: its first parts, or -1 - q: its one merge
    hslot: np.ndarray  # the cache slot step 2b found it in (-1: none)
    sidx: np.ndarray  # step 1 lists the pieces of 3-8 bytes,
    lidx: np.ndarray  # those over 8,
    bidx: np.ndarray  # and those of one or two
    misses: np.ndarray  # pieces of at most SIDE_MAX bytes that are no token
    bids: np.ndarray  # the parts of the pieces merged side by side; -1 where a merge took one away
    # merge q (a piece, or a segment of one): parts at bids[boff[q]:], pair ranks at brk[boff[q]:]
    brk: np.ndarray
    boff: np.ndarray
    bm: np.ndarray  # parts left
    pkey: np.ndarray  # pending pair lookups of merge q: key and position, two a merge
    ppos: np.ndarray
    act: np.ndarray  # merges still going
    binit: np.ndarray  # merge q still has to look up its first ranks
    pslot: np.ndarray  # piece j's cache slot, put there in step 2b to merge side by side (-1: none)


@njit_inline
def block_words(nblk):
    """int64 words of the work arrays of a block of ``nblk`` pieces (``_block``)."""
    r = SMALL * nblk  # room for the parts of the block's merges
    nq = SEGMENTS * nblk  # and for their merges, a segment each
    return 12 * nblk + 7 * nq + (r + 1) // 2 + r + (nq + 7) // 8


@njit_inline
def span_work(npieces):
    """The work words ``_encode_span`` needs for spans of up to ``npieces`` pieces: its
    callers allocate them, as it runs without Numba's runtime."""
    return np.empty(block_words(min(PF_BLOCK, max(npieces, 1))), np.int64)


@njit_inline
def _block(w, nblk):
    """The work arrays of a block, as consecutive views of ``w`` (``block_words(nblk)``
    words): one allocation a call instead of one an array (see
    bench/results/encode-experiments-20261202-1730.md)."""
    r = SMALL * nblk  # room for the parts of the block's merges
    nq = SEGMENTS * nblk
    at = 0
    hq = w[at : at + nblk].view(np.uint64)
    at += nblk
    heads = w[at : at + nblk].view(np.uint64)
    at += nblk
    nexts = w[at : at + nblk]
    nexts[:] = 0
    at += nblk
    res = w[at : at + nblk]
    at += nblk
    res2 = w[at : at + nblk]
    at += nblk
    res3 = w[at : at + nblk]
    at += nblk
    hslot = w[at : at + nblk]
    at += nblk
    sidx = w[at : at + nblk]
    at += nblk
    lidx = w[at : at + nblk]
    at += nblk
    bidx = w[at : at + nblk]
    at += nblk
    misses = w[at : at + nblk]
    at += nblk
    bids = w[at : at + (r + 1) // 2].view(np.int32)[:r]
    at += (r + 1) // 2
    brk = w[at : at + r]
    at += r
    boff = w[at : at + nq]
    at += nq
    bm = w[at : at + nq]
    at += nq
    pkey = w[at : at + 2 * nq]
    at += 2 * nq
    ppos = w[at : at + 2 * nq]
    at += 2 * nq
    act = w[at : at + nq]
    at += nq
    pslot = w[at : at + nblk]
    at += nblk
    flags = w[at : at + (nq + 7) // 8]  # (w[at:] had cleared all the rest of w)
    flags[:] = 0
    binit = flags.view(np.bool_)[:nq]
    return _Block(hq, heads, nexts, res, res2, res3, hslot, sidx, lidx, bidx, misses, bids, brk, boff, bm, pkey, ppos, act, binit, pslot)


@njit_no_nrt
def _encode_span(buf, bounds, k0, k1, T, C, S, out, n, w):
    """Encode the pieces buf[bounds[k]:bounds[k+1]], k0 <= k < k1, into out[n:]; return n.

    ``T``: the tables; ``C``: the piece cache's views; ``S``: scratch for merging alone;
    ``w``: work words (``span_work``), blocks as large as they hold up to ``PF_BLOCK``.
    ``out`` past the ids written may be written too (two ids at most, within ``out``):
    each call, or each thread, needs an ``out`` of its own.
    Compiled without Numba's runtime: the dozens of views a call and a block make cost
    no reference counts, which had been a large share of a short document's time.
    """
    slots, vals, state, keys, front = C
    fit = min(PF_BLOCK, w.size // 80)  # block_words(n) <= 80 n
    while fit < PF_BLOCK and block_words(fit + 1) <= w.size:
        fit += 1
    if fit < 1:
        raise ValueError("_encode_span: work array too small (use span_work)")
    nblk = min(fit, max(k1 - k0, 1))
    B = _block(w, nblk)
    for b0 in range(k0, k1, nblk):
        b1 = min(b0 + nblk, k1)
        _make_room(slots, vals, state, keys, b1 - b0)
        # 1. list by kind, settle pieces of one or two bytes, hash and prefetch
        ns, nl, n1 = _list_by_kind(bounds, b0, b1, B.sidx, B.lidx, B.bidx)
        _settle_small(buf, bounds, b0, B.bidx, n1, T.small_ids, B.res, B.hslot)
        _hash_short(buf, bounds, b0, B.sidx, ns, B.heads, B.hq, front)
        _hash_long(buf, bounds, b0, B.lidx, nl, B.heads, B.hq, front)
        # 1b. pieces seen before, from the front table; the rest go on
        ns = _front_lookup(buf, bounds, b0, B.sidx, ns, B.heads, B.hq, front, T.whole, T.long_filter, B, True)
        nl = _front_lookup(buf, bounds, b0, B.lidx, nl, B.heads, B.hq, front, T.longs, T.long_filter, B, False)
        # 2a. a token emitted whole, or a miss
        nmiss = _classify_short(bounds, b0, B.sidx, ns, T.whole, slots, front, B, 0)
        nmiss = _classify_long(buf, bounds, b0, B.lidx, nl, T.longs, T.long_filter, T.tok_bytes, T.tok_off, slots, front, B, nmiss)
        # 2b. the misses: in the cache, else set up to merge
        nq = _set_up_merges(buf, bounds, b0, nmiss, T.byte_ids, T.atoms, T.atom_pats, T.atom_joins, T.byte_pairs, T.pairs, T.pair_filter, T.pair_bits, slots, vals, state, keys, front, B)
        # 3. merge side by side
        _merge_side_by_side(T, B.bids, B.brk, B.boff, B.bm, B.pkey, B.ppos, B.act, B.binit, np.int64(nq))  # never a literal 0: one compile
        # 4. write out
        n = _write_out(buf, bounds, b0, b1, T, S, slots, vals, state, keys, front, B, out, n)
    return n


@njit_inline
def _make_room(slots, vals, state, keys, npieces):
    """Start the cache afresh if a block of ``npieces`` might not fit.

    Here, never inside a block: steps 2b and 4 both write to the cache and step 4 reads
    the slots step 2b found. A block adds at most one entry a piece; what finds no room
    (a tiny cache) is not cached.
    """
    size = slots.shape[0]
    if 2 * (state[0] + npieces) > size or 8 * state[1] > 7 * vals.size or 8 * state[2] > 7 * keys.size:
        for i in range(size):
            slots[_ix(i), 2] = -1
        state[0] = 0
        state[1] = 0
        state[2] = 0
        state[3] += 1  # the pool gives a cache that starts afresh a bigger one


@njit_inline
def _list_by_kind(bounds, b0, b1, sidx, lidx, bidx):
    """List the pieces b0..b1 by kind, without a branch: ``(ns, nl, n1)`` pieces of 3-8
    bytes in ``sidx``, of more in ``lidx``, of one or two (or none) in ``bidx``."""
    ns = 0
    nl = 0
    n1 = 0
    for k in range(b0, b1):
        m = bounds[_ix(k + 1)] - bounds[_ix(k)]
        sidx[_ix(ns)] = k - b0
        lidx[_ix(nl)] = k - b0
        bidx[_ix(n1)] = k - b0
        ns += (m >= 3) & (m <= 8)
        nl += m > 8
        n1 += m <= 2
    return ns, nl, n1


@njit_inline
def _settle_small(buf, bounds, b0, bidx, n1, small_ids, res, hslot):
    """A piece of one or two bytes is settled from ``small_ids`` (an empty piece, which
    no scanner makes: none)."""
    for a in range(n1):
        j = bidx[_ix(a)]
        s = bounds[_ix(b0 + j)]
        m = bounds[_ix(b0 + j + 1)] - s
        if m > 0:
            first = np.int64(buf[_ix(s)])
            last = np.int64(buf[_ix(s + m - 1)])  # (the same byte for one)
            # without a branch on m: first, or 256 + first * 256 + last
            res[_ix(j)] = small_ids[_ix(first + (m - 1) * (256 + 255 * first + last))]
        else:
            res[_ix(j)] = -1
            hslot[_ix(j)] = -1


@njit_inline
def _hash_short(buf, bounds, b0, sidx, ns, heads, hq, front):
    """Hash the pieces of 3-8 bytes (as _hash_bytes: the packed head says it all), keep
    their packed heads, and prefetch their front slot."""
    fflat = _flat(front)
    fmask = front.shape[0] - 1
    nbuf = buf.size
    for a in range(ns):
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
        h = _avalanche((head ^ (np.uint64(m) << np.uint64(56))) * np.uint64(0x9E3779B97F4A7C15))
        hq[_ix(j)] = h
        _prefetch(fflat, np.int64(h & np.uint64(fmask)) * 4)


@njit_inline
def _hash_long(buf, bounds, b0, lidx, nl, heads, hq, front):
    """Hash the pieces over 8 bytes (as _hash_bytes), keep their packed heads, and
    prefetch their front slot."""
    fflat = _flat(front)
    fmask = front.shape[0] - 1
    for a in range(nl):
        j = lidx[_ix(a)]
        s = bounds[_ix(b0 + j)]
        e = bounds[_ix(b0 + j + 1)]
        head = _pack8(buf, s, e)
        heads[_ix(j)] = head
        h = _hash_from_head(buf, s, e, head)
        hq[_ix(j)] = h
        _prefetch(fflat, np.int64(h & np.uint64(fmask)) * 4)


@njit_inline
def _front_put(front, h, hd, nd, m, id0, id1, id2):
    """Put a piece of ``m`` bytes (2 to FRONT_MAX) with one to three ids (``id1``,
    ``id2``: -1 if it has fewer) in its front slot, in place of what was there."""
    f = np.int64(h & np.uint64(front.shape[0] - 1))
    front[_ix(f), 0] = hd
    front[_ix(f), 1] = nd
    front[_ix(f), 2] = (np.int64(m) << 32) | (1 + (id1 >= 0) + (id2 >= 0))
    front[_ix(f), 3] = _pack_ids(id0, id1, id2)


@njit_inline
def _front_lookup(buf, bounds, b0, idx, count, heads, hq, front, table, long_filter, B, short):
    """Pieces ``idx[:count]`` found in the front table are settled; return how many are
    not, now first in ``idx`` (in order), their slot in ``table`` (``whole`` for the
    list of pieces of 3-8 bytes, ``longs`` for the longer ones) prefetched, unless
    ``long_filter`` rules the piece out. ``short`` (a constant where it is called): the
    pieces have 3-8 bytes, no bytes 8-15 to compare.

    Settled here, ids and all, not by a reference to the slot: a piece put in the front
    later in the block may take the same slot. Called once a list, as the lists are
    classified (a loop of their own each)."""
    tflat = _flat(table)
    tmask = table.shape[0] - 1
    fmask = front.shape[0] - 1
    nmiss = 0
    for a in range(count):
        j = idx[_ix(a)]
        s = bounds[_ix(b0 + j)]
        e = bounds[_ix(b0 + j + 1)]
        m = e - s
        h = hq[_ix(j)]
        f = np.int64(h & np.uint64(fmask))
        if (short or m <= FRONT_MAX) and (front[_ix(f), 2] >> 32) == m and front[_ix(f), 0] == np.int64(heads[_ix(j)]):
            if front[_ix(f), 1] == (0 if short else np.int64(_pack8(buf, s + 8, e))):
                B.res[_ix(j)] = front[_ix(f), 3]  # packed as res keeps them
                continue
        idx[_ix(nmiss)] = j
        nmiss += 1
        if short or m <= LONG_FILTER_OVER or _may_hold(long_filter, h):
            row = np.int64(h & np.uint64(tmask)) * table.shape[1]
            _prefetch(tflat, row)
            if not short:  # a row of ``longs`` (24 bytes) may straddle two lines: its last word too
                _prefetch(tflat, row + 2)
    return nmiss


@njit_inline
def _classify_short(bounds, b0, sidx, ns, whole, slots, front, B, nmiss):
    """Pieces of 3-8 bytes: a token from ``whole`` (put in the front), else a miss
    (cache slot prefetched)."""
    hq, heads, nexts, res, hslot, misses = B.hq, B.heads, B.nexts, B.res, B.hslot, B.misses
    cflat = _flat(slots)
    cmask = slots.shape[0] - 1
    wmask = whole.shape[0] - 1
    for a in range(ns):
        j = sidx[_ix(a)]
        m = bounds[_ix(b0 + j + 1)] - bounds[_ix(b0 + j)]
        h = hq[_ix(j)]
        nexts[_ix(j)] = 0
        hd = np.int64(heads[_ix(j)])
        t = -1
        i = np.int64(h & np.uint64(wmask))
        while True:  # as _lookup_short, written out: no helper call per piece
            meta = whole[_ix(i), 1]
            if meta < 0:
                break
            if whole[_ix(i), 0] == hd and (meta >> 32) == m:
                t = meta & 0xFFFFFFFF
                break
            i = (i + 1) & wmask
        if t >= 0:
            res[_ix(j)] = _pack_ids(t, -1, -1)
            _front_put(front, h, hd, 0, m, t, -1, -1)
            continue
        res[_ix(j)] = -1
        hslot[_ix(j)] = -1
        _prefetch(cflat, np.int64(h & np.uint64(cmask)) * 4)
        misses[_ix(nmiss)] = j  # m <= 8 <= SIDE_MAX
        nmiss += 1
    return nmiss


@njit_inline
def _classify_long(buf, bounds, b0, lidx, nl, longs, long_filter, tok_bytes, tok_off, slots, front, B, nmiss):
    """Pieces over 8 bytes: a token from ``longs`` (put in the front up to FRONT_MAX
    bytes), else a miss (cache slot prefetched), merged side by side if it has at most
    SIDE_MAX bytes.

    A piece over LONG_FILTER_OVER bytes is looked up only if ``long_filter`` lets it
    pass: such pieces (most Han and kana runs) are rarely tokens, and a lookup that
    finds none had been a wait on ``longs`` (megabytes) a piece, and probes of varying
    length (bench/results/session44-20261206.md)."""
    hq, heads, nexts, res, hslot, misses = B.hq, B.heads, B.nexts, B.res, B.hslot, B.misses
    cflat = _flat(slots)
    cmask = slots.shape[0] - 1
    lmask = longs.shape[0] - 1
    for a in range(nl):
        j = lidx[_ix(a)]
        s = bounds[_ix(b0 + j)]
        e = bounds[_ix(b0 + j + 1)]
        m = e - s
        h = hq[_ix(j)]
        nd = np.int64(_pack8(buf, s + 8, e))
        nexts[_ix(j)] = nd
        hd = np.int64(heads[_ix(j)])
        t = -1
        i = np.int64(h & np.uint64(lmask))
        look = m <= LONG_FILTER_OVER or _may_hold(long_filter, h)
        while look:  # as _lookup_long, written out
            meta = longs[_ix(i), 2]
            if meta < 0:
                break
            if longs[_ix(i), 0] == hd and longs[_ix(i), 1] == nd and (meta >> 32) == m:
                tt = meta & 0xFFFFFFFF
                if m <= 16 or _same_words(tok_bytes, tok_off[_ix(tt)] + 16, buf, s + 16, m - 16):
                    t = tt
                    break
            i = (i + 1) & lmask
        if t >= 0:
            res[_ix(j)] = _pack_ids(t, -1, -1)
            if m <= FRONT_MAX:
                _front_put(front, h, hd, nd, m, t, -1, -1)
            continue
        res[_ix(j)] = -1
        hslot[_ix(j)] = -1
        _prefetch(cflat, np.int64(h & np.uint64(cmask)) * 4)
        if m <= SIDE_MAX:
            misses[_ix(nmiss)] = j
            nmiss += 1
    return nmiss


@njit_inline
def _set_up_merges(buf, bounds, b0, nmiss, byte_ids, atoms, atom_pats, atom_joins, byte_pairs, pairs, pair_filter, bits, slots, vals, state, keys, front, B):
    """Step 2b: each miss is in the cache (its slot was prefetched in 2a), or is set up
    to merge side by side while its parts fit in the block's room; return how many
    merges it set up (listed in ``act``).

    A piece set up to merge goes in the cache at once, its ids pending until step 4
    writes them: the same piece later in the block then finds it instead of merging again.
    A piece with atoms is a merge a segment of two parts or more (see atoms.py), while
    the room for merges holds one a part; its pairs across cuts are never looked up.
    """
    hq, heads, nexts, res, res2, res3, hslot, misses = B.hq, B.heads, B.nexts, B.res, B.res2, B.res3, B.hslot, B.misses
    bids, brk, boff, bm, ppos, act, binit, pslot = B.bids, B.brk, B.boff, B.bm, B.ppos, B.act, B.binit, B.pslot
    cmask = slots.shape[0] - 1
    pmask = pairs.size - 1
    used = 0
    nq = 0
    for a in range(nmiss):
        j = misses[_ix(a)]
        s = bounds[_ix(b0 + j)]
        e = bounds[_ix(b0 + j + 1)]
        m = e - s
        hd = np.int64(heads[_ix(j)])
        nd = nexts[_ix(j)]
        i = np.int64(hq[_ix(j)] & np.uint64(cmask))
        found = False
        while True:  # as _probe, written out
            meta = slots[_ix(i), 2]
            if meta < 0:
                break
            if (meta >> 32) == m and slots[_ix(i), 0] == hd and slots[_ix(i), 1] == nd:
                if m <= 16 or _same_words(keys, slots[_ix(i), 3] >> 32, buf, s + 16, m - 16):
                    found = True
                    break
            i = (i + 1) & cmask
        if found:
            vn = slots[_ix(i), 2] & 0xFFFFFFFF
            v0 = slots[_ix(i), 3] & 0xFFFFFFFF
            if vn <= 3:  # one to three ids (not PENDING): settled as a token is
                id0 = np.int64(vals[_ix(v0)])
                id1 = np.int64(vals[_ix(v0 + 1)]) if vn >= 2 else -1
                id2 = np.int64(vals[_ix(v0 + 2)]) if vn == 3 else -1
                res[_ix(j)] = _pack_ids(id0, id1, id2)
                if m <= FRONT_MAX:
                    _front_put(front, hq[_ix(j)], hd, nd, m, id0, id1, id2)
                continue
            hslot[_ix(j)] = i  # step 4 reads the slot, filled or pending
            _prefetch(vals, v0)  # and copies them
            continue
        if used + m > bids.size or nq == boff.size:  # (a piece has at most as many parts as bytes)
            continue  # no room left in this block: step 4 merges it alone
        res[_ix(j)] = -2
        pslot[_ix(j)] = -1
        if 2 * (state[0] + 1) <= cmask + 1 and state[2] + max(m - 16, 0) <= keys.size:
            # as _put_slot, written out
            while slots[_ix(i), 2] >= 0:
                i = (i + 1) & cmask
            slots[_ix(i), 0] = hd
            slots[_ix(i), 1] = nd
            slots[_ix(i), 2] = (np.int64(m) << 32) | PENDING
            slots[_ix(i), 3] = state[2] << 32
            for jj in range(max(m - 16, 0)):
                keys[_ix(state[2] + jj)] = buf[_ix(s + 16 + jj)]
            state[0] += 1
            state[2] += max(m - 16, 0)
            pslot[_ix(j)] = i
        base = used
        mp = _first_parts(buf, s, e, byte_ids, atoms, atom_pats, atom_joins, bits, bids, base)
        used += mp
        res2[_ix(j)] = base  # its parts, merged in place: step 4 skips the -1s merges leave
        res3[_ix(j)] = mp
        q0 = nq
        if mp == m:  # bytes only: ranks from the dense table, one merge
            for i in range(m - 1):
                brk[_ix(base + i)] = byte_pairs[np.int64(buf[_ix(s + i)]) * 256 + buf[_ix(s + i + 1)]]
            boff[_ix(nq)] = base
            bm[_ix(nq)] = m
            res3[_ix(j)] = -1 - nq  # step 4 copies the merge's parts left
            nq += 1
        else:  # atoms: a merge a segment of two parts or more, while there is room
            cuts = np.int64(nq + mp < boff.size)
            st = base  # where the segment starts
            for i in range(base + 1, base + mp):  # without a branch on the cuts, as _first_parts
                c = np.int64(bids[_ix(i)])
                cut = (c >> 30) & 1
                c &= ~np.int64(CUT)
                bids[_ix(i)] = c
                # the pair's lookup (none across a cut), prefetched now and read in the
                # first round of step 3 (the filter's word too, tested then: as in step 3)
                key = (np.int64(bids[_ix(i - 1)]) << bits) | c
                h = _hash_pair(key)
                _prefetch(pair_filter, _filter_word(pair_filter, h) * (1 - cut))
                _prefetch(pairs, np.int64(h & np.uint64(pmask)) * (1 - cut))
                brk[_ix(i - 1)] = key
                cut &= cuts
                boff[_ix(nq)] = st  # the segment so far, kept if i cuts it
                bm[_ix(nq)] = i - st
                nq += cut & np.int64(i - st > 1)
                st += cut * (i - st)
            boff[_ix(nq)] = st
            bm[_ix(nq)] = base + mp - st
            nq += np.int64(base + mp - st > 1)
        for q in range(q0, nq):
            binit[_ix(q)] = mp != m
            ppos[_ix(2 * q)] = -1
            ppos[_ix(2 * q + 1)] = -1
            act[_ix(q)] = q
    return nq


@njit_inline
def _write_out(buf, bounds, b0, b1, T, S, slots, vals, state, keys, front, B, out, n):
    """Step 4: the ids of pieces b0..b1 to out[n:] in order; return the new n.

    Settled and side-by-side pieces are copied; the rest are looked up in the cache
    (pieces over SIDE_MAX bytes were not, in step 2b) or merged alone: pieces over
    SIDE_MAX bytes, those that found no room in step 2b, and repeats of a piece whose
    ids are pending. What was merged goes in the cache, and in the front table if it
    has up to FRONT_MAX bytes and three ids.
    """
    hq, heads, nexts, res, res2, res3, hslot = B.hq, B.heads, B.nexts, B.res, B.res2, B.res3, B.hslot
    bids, bm, pslot = B.bids, B.bm, B.pslot
    ids, rk, H = S
    cmask = slots.shape[0] - 1
    last = out.size - 1
    for k in range(b0, b1):
        j = k - b0
        r0 = res[_ix(j)]
        if r0 >= 0:  # one to three ids, without a branch on how many: out[n + 1] and
            r2 = (r0 >> 21) & FRONT_ID  # out[n + 2] are written either way (then
            r3 = r0 >> 42  # overwritten, or past the end), last to first
            out[_ix(min(n + 2, last))] = r3
            out[_ix(min(n + 1, last))] = r2
            out[_ix(n)] = r0 & FRONT_ID
            n += 1 + (r2 != FRONT_ID) + (r3 != FRONT_ID)
            continue
        s = bounds[_ix(k)]
        e = bounds[_ix(k + 1)]
        m = e - s
        if m == 0:
            continue
        n0 = n
        fill = -1  # the piece's cache slot whose ids are pending
        done = False  # nothing more to put in the cache
        if r0 <= -2:
            base = res2[_ix(j)]
            r3 = res3[_ix(j)]
            if r3 < 0:  # one merge: its parts left
                q = -1 - r3
                for i in range(bm[_ix(q)]):
                    out[_ix(n + i)] = bids[_ix(base + i)]
                n += bm[_ix(q)]
            else:
                for i in range(r3):  # its parts, less those merged away (-1)
                    v = bids[_ix(base + i)]
                    out[_ix(min(n, last))] = v
                    n += v >= 0
            fill = pslot[_ix(j)]
            done = fill < 0  # its key found no room in the cache
        else:
            hit = hslot[_ix(j)]
            if m > SIDE_MAX and m <= CACHE_MAX:  # not looked up in step 2b
                hd = np.int64(heads[_ix(j)])
                nd = nexts[_ix(j)]
                i = np.int64(hq[_ix(j)] & np.uint64(cmask))
                found = False
                while True:  # as _probe, written out
                    meta = slots[_ix(i), 2]
                    if meta < 0:
                        break
                    if (meta >> 32) == m and slots[_ix(i), 0] == hd and slots[_ix(i), 1] == nd:
                        if m <= 16 or _same_words(keys, slots[_ix(i), 3] >> 32, buf, s + 16, m - 16):
                            found = True
                            break
                    i = (i + 1) & cmask
                hit = i if found else -1
            if hit >= 0:
                vn = slots[_ix(hit), 2] & 0xFFFFFFFF
                if vn != PENDING:  # (as _cache_get)
                    v0 = slots[_ix(hit), 3] & 0xFFFFFFFF
                    for jj in range(vn):
                        out[_ix(n + jj)] = vals[_ix(v0 + jj)]
                    n += vn
                    done = True
                else:
                    fill = hit  # its first copy found no room for its ids
            if not done:
                n = _merge_alone(buf, s, e, T, ids, rk, H, out, np.int64(n))
        cnt = n - n0
        if m <= FRONT_MAX and cnt <= 3:
            id1 = np.int64(out[_ix(n0 + 1)]) if cnt >= 2 else -1
            id2 = np.int64(out[_ix(n0 + 2)]) if cnt == 3 else -1
            _front_put(front, hq[_ix(j)], np.int64(heads[_ix(j)]), nexts[_ix(j)], m, out[_ix(n0)], id1, id2)
        if done:
            continue
        if fill >= 0:  # the ids of a slot step 2b put in the cache, if they fit
            if state[1] + cnt <= vals.size:
                for jj in range(cnt):
                    vals[_ix(state[1] + jj)] = out[_ix(n0 + jj)]
                slots[_ix(fill), 2] = (np.int64(m) << 32) | cnt
                slots[_ix(fill), 3] = (slots[_ix(fill), 3] & ~np.int64(0xFFFFFFFF)) | state[1]
                state[1] += cnt
            continue
        # remember it (as _cache_put; the block start made room for a slot)
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
            vals[_ix(state[1] + jj)] = out[_ix(n0 + jj)]
        for jj in range(tail):
            keys[_ix(state[2] + jj)] = buf[_ix(s + 16 + jj)]
        state[0] += 1
        state[1] += cnt
        state[2] += tail
    return n
