"""The merge learner, BPE training's kernel: weighted unique pieces in, merges out.

Pieces come in Arrow's binary layout: piece ``i`` is ``data[offsets[i]:offsets[i+1]]``,
seen ``weights[i]`` times (any non-negative int64: a count, or a count scaled by a
language weight). Pair counts are built once, then updated locally at each merge:

- the pieces are one flat buffer of token ids (uint16 while the vocabulary fits, else
  int32) laid out like ``data``; a merge rewrites each piece it touches in place, left
  to right, so a piece's run only shrinks. Pieces are short, so rescanning one is a
  cache line or two;
- every pair keeps the pieces it occurs in, each once. All of a pair's occurrences
  appear in one step (the first count, or the merge that made its newer token), so
  that list is one segment of an int32 pool, written once; a piece that lost the pair
  since is rescanned for nothing. When the pool is full or half of it belongs to
  merged pairs, the segments of spent pairs are squeezed out and the pool is fitted
  to the rest; before the pair arrays or their table grow, spent pairs are renumbered
  away (a pair whose count fell to 0 never occurs again);
- a max-heap holds one entry per pair worth considering. Only pairs that contain the
  newest token can gain count, and they are new, so every other pair's entry is an
  upper bound of its true count: a popped entry whose count is out of date is pushed
  back with the current count, and the first up-to-date entry popped is the true
  maximum;
- a merge whose pair is listed in many pieces (the first few thousand merges of a
  large corpus) rewrites them on ``threads`` threads, each a run of the listings into
  rows of its own; the rows are then added up, the new pairs numbered in the order one
  thread finds them, so the pair ids, counts and listings are those of one thread;
- most pairs never win (a few hundred thousand of them, against tens of thousands of
  merges), so they wait unordered in a cold list, all below the heap's threshold.
  When the heap runs out, the ``_HOT`` cold pairs with the highest counts go in and the
  threshold falls to the least of them. A heap this small stays in cache, where one of
  all the pairs did not (bench/results/train-heap-20261202.md).

No array is reassigned inside the per-byte loops: Numba would update its reference
count on every byte, which cost more than the rest of the loop. Room for a step is
made before them.
The indexes in those loops (the first count and the rewrite), in the pair table, in
filing a step's pairs and in the heap, never negative, go through ``_ix`` (as the
encoder's do): without it Numba adds a negative-index wraparound to every access, and
a -1 from a bug would land on the last item, where bounds checks (``make test-bounds``)
cannot see it.

Tie rule: the highest count wins; among equal counts the pair whose
``(bytes(left), bytes(right))`` is lexicographically greatest. Ties are broken by
comparing the tokens' bytes, so the order never depends on ids or hash order.
Within a piece a merge replaces left to right without overlaps (``aaaa`` -> ``aa aa``).

>>> r = learn_merges(np.frombuffer(b"aaabdaaabac", np.uint8), np.array([0, 11]),
...                  np.array([1]), 3)
>>> r.merges
[(b'a', b'a'), (b'aa', b'a'), (b'aaa', b'b')]
>>> r.counts.tolist(), r.stopped_early
([4, 2, 2], False)
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable, NamedTuple, Sequence

import numba
import numpy as np
from numba import prange

from ._intrinsics import ix as _ix
from ._intrinsics import prefetch
from ._jit import njit, njit_parallel
from .errors import ConfigError, InputError

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# Initial room for pairs and listings (the tests shrink them to exercise growth).
_CAP0 = 1 << 17
_POOL0 = 1024
# About how many pairs the heap takes from the cold list at a time (the sizes tried:
# bench/results/train-heap-20261202.md).
_HOT = 4096
# A step whose pair is listed in at least this many pieces rewrites them on all threads.
_PAR_MIN = 4096
# Each thread has rows of its own, 112 bytes a token (3.7 MB at a vocabulary of 32k,
# 22 MB at 200k), so the threads are capped. Not measured beyond 2 CPUs.
_MAX_THREADS = 8


class TrainResult(NamedTuple):
    merges: list[tuple[bytes, bytes]]
    """Merges in rank order (forced ones first)."""
    counts: np.ndarray
    """Winning weighted count of each merge (0 for forced merges)."""
    stopped_early: bool
    """True when fewer than ``n_merges`` merges were learned: no pair was left."""


# ---------------------------------------------------------------------------- kernels


@njit
def _grow(a, size):
    out = np.empty(max(size, 2 * a.shape[0]), a.dtype)
    for i in range(a.shape[0]):  # a loop: slice assignment compiles Numba's broadcasting (3 s)
        out[i] = a[i]
    return out


@njit
def _home(table, x, y):
    """The slot where the probe for pair (x, y) starts."""
    key = (np.int64(x) << 32) | np.int64(y)
    # Fibonacci hashing: the top bits of the product depend on every bit of the key.
    return np.int64((np.uint64(key) * _GOLDEN) >> np.uint64(32)) & (table.shape[0] - 1)


@njit
def _slot(table, pl, pr, x, y):
    """Slot of pair (x, y) in the open-addressing table of pair ids, or the empty slot
    where it goes. The table holds ids only; a slot's pair is read from ``pl``/``pr``."""
    mask = table.shape[0] - 1
    h = _home(table, x, y)
    while table[_ix(h)] != -1 and not (pl[_ix(table[_ix(h)])] == x and pr[_ix(table[_ix(h)])] == y):
        h = (h + 1) & mask
    return h


@njit
def _rehash(size, pl, pr, pc, n_pairs):
    """A table of ``size`` slots (a power of two) holding the pairs still counted.

    A pair whose count fell to 0 never occurs again, so it is never looked up again.
    """
    table = np.full(size, -1, np.int32)
    for r in range(n_pairs):
        if pc[r] > 0:
            table[_slot(table, pl, pr, np.int64(pl[r]), np.int64(pr[r]))] = r  # int64, as every caller's
    return table


@njit
def _cmp_tokens(t1, t2, tstart, tlen, tbytes):
    """Compare the bytes of two tokens: -1, 0 or 1."""
    if t1 == t2:
        return 0
    s1 = tstart[_ix(t1)]
    s2 = tstart[_ix(t2)]
    n1 = tlen[_ix(t1)]
    n2 = tlen[_ix(t2)]
    for i in range(min(n1, n2)):
        x = tbytes[_ix(s1 + i)]
        y = tbytes[_ix(s2 + i)]
        if x != y:
            return -1 if x < y else 1
    if n1 == n2:
        return 0
    return -1 if n1 < n2 else 1


@njit
def _above(c1, p1, c2, p2, pl, pr, tstart, tlen, tbytes):
    """True when heap entry (count c1, pair p1) outranks (c2, p2)."""
    if c1 != c2:
        return c1 > c2
    r = _cmp_tokens(pl[_ix(p1)], pl[_ix(p2)], tstart, tlen, tbytes)
    if r != 0:
        return r > 0
    return _cmp_tokens(pr[_ix(p1)], pr[_ix(p2)], tstart, tlen, tbytes) > 0


@njit
def _sift_up(hc, hp, i, pl, pr, tstart, tlen, tbytes):
    c = hc[_ix(i)]
    p = hp[_ix(i)]
    while i > 0:
        parent = (i - 1) >> 1
        if not _above(c, p, hc[_ix(parent)], hp[_ix(parent)], pl, pr, tstart, tlen, tbytes):
            break
        hc[_ix(i)] = hc[_ix(parent)]
        hp[_ix(i)] = hp[_ix(parent)]
        i = parent
    hc[_ix(i)] = c
    hp[_ix(i)] = p


@njit
def _sift_down(hc, hp, n, pl, pr, tstart, tlen, tbytes):
    i = 0
    c = hc[0]
    p = hp[0]
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and _above(
            hc[_ix(child + 1)], hp[_ix(child + 1)], hc[_ix(child)], hp[_ix(child)], pl, pr, tstart, tlen, tbytes
        ):
            child += 1
        if not _above(hc[_ix(child)], hp[_ix(child)], c, p, pl, pr, tstart, tlen, tbytes):
            break
        hc[_ix(i)] = hc[_ix(child)]
        hp[_ix(i)] = hp[_ix(child)]
        i = child
    hc[_ix(i)] = c
    hp[_ix(i)] = p


@njit
def _find(table, pl, pr, x, y):
    """The pair (x, y), or -1."""
    return table[_ix(_slot(table, pl, pr, x, y))]


@njit
def _bucket(c):
    """A coarse, monotone key of a count c >= 1: the index of its leading bit and the
    two bits below it (0..251).

    >>> [_bucket(c) for c in (1, 2, 3, 4, 5, 7, 8, 2**40)]
    [0, 4, 6, 8, 9, 11, 12, 160]
    """
    n = 0  # the index of the leading bit, by halving the width searched
    x = c
    for width in (32, 16, 8, 4, 2, 1):
        if x >> width:
            x >>= width
            n += width
    sub = (c >> (n - 2)) & 3 if n >= 2 else (c << (2 - n)) & 3
    return 4 * n + sub


@njit
def _refill(cold, nc, pc, hot, hc, hp, pl, pr, tstart, tlen, tbytes):
    """Move about ``hot`` of the cold pairs with the highest counts into the empty heap.

    Returns (pairs left cold, heap size, the heap's threshold: the least count moved).
    Every pair left cold counts less than every pair moved.
    """
    hist = np.zeros(256, np.int64)
    for i in range(nc):
        c = pc[cold[i]]
        if c > 0:
            hist[_bucket(c)] += 1
    b = 255
    acc = hist[b]
    while b > 0 and acc < hot:
        b -= 1
        acc += hist[b]
    k = 0
    hn = 0
    theta = np.int64(0x7FFFFFFFFFFFFFFF)
    for i in range(nc):
        q = cold[i]
        c = pc[q]
        if c <= 0:
            continue
        if _bucket(c) >= b:
            hc[hn] = c
            hp[hn] = q
            hn += 1
            _sift_up(hc, hp, hn - 1, pl, pr, tstart, tlen, tbytes)
            theta = min(theta, c)
        else:
            cold[k] = q
            k += 1
    return k, hn, theta


@njit
def _compact(occ, seg_start, seg_len, pc, n_pairs):
    """Drop the segments of spent pairs; return the pool's new end.

    A pair whose count reached 0 never occurs again (its adjacencies all appear in one
    step). Segments lie in pair order, so they slide down in place.
    """
    used = 0
    for q in range(n_pairs):
        start = seg_start[q]
        n = seg_len[q]
        seg_start[q] = used
        if pc[q] <= 0:
            seg_len[q] = 0
            continue
        for e in range(n):
            occ[used + e] = occ[start + e]
        used += n
    return used


@njit
def _collect(pl, pr, pc, seg_start, seg_len, n_pairs, hc, hp, hn, cold, nc, best, tstart, tlen, tbytes):
    """Renumber the pairs with a positive count to 0..k-1 in order; drop the heap and
    cold-list entries of the others and restore the heap. Returns (k, heap size, cold
    list size, best's new id)."""
    remap = np.empty(n_pairs, np.int32)
    k = 0
    for r in range(n_pairs):
        if pc[r] > 0:
            remap[r] = k
            pl[k] = pl[r]
            pr[k] = pr[r]
            pc[k] = pc[r]
            seg_start[k] = seg_start[r]
            seg_len[k] = seg_len[r]
            k += 1
        else:
            remap[r] = -1
    n = 0
    for i in range(hn):
        r = remap[hp[i]]
        if r != -1:
            hc[n] = hc[i]
            hp[n] = r
            n += 1
            _sift_up(hc, hp, n - 1, pl, pr, tstart, tlen, tbytes)
    m = 0
    for i in range(nc):
        r = remap[cold[i]]
        if r != -1:
            cold[m] = r
            m += 1
    return k, n, m, remap[best]


# Rows of a thread's ``memo`` (by token): the new pair (x, c) of this step (a local id)
# and the piece that last listed it; (c, y) and its piece; the old pairs (x, a) and
# (b, y) whose counts fall (their ids, which ``_charge_lost`` looks up once the pieces
# are rewritten); then the step each of those four was set in. (x, a) and
# (b, y), their steps, and their counts in ``cnt``, are adjacent: sides 0 and 1 of one slice.
_LC, _LP, _RC, _RP, _LA, _RB, _LC_STEP, _RC_STEP, _LA_STEP, _RB_STEP = range(10)
_MEMO_ROWS = 10
# A thread's ``cnt``: its new pairs, its listings, what best lost, and how many tokens
# it has in its two ``touched`` rows.
_N_LOC, _N_EV, _D_BEST, _N_TA, _N_TB = range(5)
_CNT_COLS = 5


@njit
def _rewrite_chunk(t, ids, piece, occ, e, e_end, a, b, c, step, memo, lost, touched, loc, loc_c, loc_n, ev, cnt):
    """Merge (a, b) -> c in the pieces listed at occ[e:e_end], keeping what changes in
    thread ``t``'s own rows, so that threads can share a step (``_file_step`` adds
    them up after).

    Each piece is rewritten left to right in place (read at i, write at j <= i): every
    old adjacency that touches a site loses the piece's weight (summed per pair in
    ``lost``), every adjacency of the result that touches c gains it (a new pair: a
    local id in ``loc``, numbered in the order found), and each new pair lists the
    piece once (in ``ev``). It does not look pairs up: ``_file_step`` does, after.
    Stops before a piece whose listings might not fit in ``ev``; returns where it stopped.
    """
    lc = memo[t, _LC]
    lp = memo[t, _LP]
    rc = memo[t, _RC]
    rp = memo[t, _RP]
    lc_step = memo[t, _LC_STEP]
    rc_step = memo[t, _RC_STEP]
    old_step = memo[t, _LA_STEP : _RB_STEP + 1]
    lost_t = lost[t]
    touched_t = touched[t]
    n_touched = cnt[t, _N_TA : _N_TB + 1]
    ll = loc[t, 0]
    lr = loc[t, 1]
    lcount = loc_c[t]
    lnum = loc_n[t]
    ev_pair = ev[t, 0]
    ev_piece = ev[t, 1]
    n_loc = cnt[t, _N_LOC]
    n_ev = cnt[t, _N_EV]
    d_best = cnt[t, _D_BEST]
    while e < e_end:
        # The listed pieces lie scattered over the id buffer: ask for the start, length
        # and weight of the piece 16 ahead (one cache line), then for the ids of the
        # one 8 ahead (its start asked for 8 pieces ago), so the memory waits overlap.
        if e + 16 < e_end:
            prefetch(piece, 4 * np.int64(occ[_ix(e + 16)]))
        if e + 8 < e_end:
            prefetch(ids, piece[_ix(4 * np.int64(occ[_ix(e + 8)]))])
        w = np.int64(occ[_ix(e)])
        n = piece[_ix(4 * w + 1)]
        if n_ev + n > ev_pair.shape[0]:
            break
        e += 1
        s = piece[_ix(4 * w)]
        # Skip to the first site (a listed piece may have lost the pair since).
        i = 0
        while i < n - 1 and not (ids[_ix(s + i)] == a and ids[_ix(s + i + 1)] == b):
            i += 1
        if i >= n - 1:
            continue
        wt = piece[_ix(4 * w + 2)]
        j = i
        prev_old = np.int64(ids[_ix(s + i - 1)]) if i > 0 else np.int64(-1)  # old token at i - 1
        prev_site = False  # whether old i - 1 was part of a site
        last_new = prev_old  # new token at j - 1
        while i < n:
            tok = np.int64(ids[_ix(s + i)])
            site = tok == a and i + 1 < n and ids[_ix(s + i + 1)] == b
            # The old adjacency (i - 1, i) and the new one (j - 1, j), where they change.
            if i > 0 and (site or prev_site):
                x = prev_old
                y = tok
                # (x, a) is kept by x, on side 0; else x == b (the old i - 1 ended a
                # site) and (b, y) is kept by y, on side 1
                side, k = (0, x) if y == a and site else (1, y)
                if old_step[side, _ix(k)] != step:
                    old_step[side, _ix(k)] = step
                    lost_t[side, _ix(k)] = 0
                    touched_t[side, _ix(n_touched[side])] = k
                    n_touched[side] += 1
                lost_t[side, _ix(k)] += wt
            if site:
                d_best += wt
                nt = np.int64(c)
            else:
                nt = tok
            if j > 0 and (site or last_new == c):
                # The new adjacency (last_new, nt) holds c; (c, c) is filed under lc.
                # A piece lists the pair once: the piece last listed is kept by token.
                if nt == c:
                    nq = lc[_ix(last_new)] if lc_step[_ix(last_new)] == step else -1
                    listed = nq != -1 and lp[_ix(last_new)] == w
                    lp[_ix(last_new)] = w
                else:
                    nq = rc[_ix(nt)] if rc_step[_ix(nt)] == step else -1
                    listed = nq != -1 and rp[_ix(nt)] == w
                    rp[_ix(nt)] = w
                if nq == -1:
                    nq = n_loc
                    n_loc += 1
                    ll[_ix(nq)] = last_new
                    lr[_ix(nq)] = nt
                    lcount[_ix(nq)] = 0
                    lnum[_ix(nq)] = 0
                    if nt == c:
                        lc[_ix(last_new)] = nq
                        lc_step[_ix(last_new)] = step
                    else:
                        rc[_ix(nt)] = nq
                        rc_step[_ix(nt)] = step
                lcount[_ix(nq)] += wt
                if not listed:
                    lnum[_ix(nq)] += 1
                    ev_pair[_ix(n_ev)] = nq
                    ev_piece[_ix(n_ev)] = w
                    n_ev += 1
            ids[_ix(s + j)] = nt
            j += 1
            last_new = nt
            if site:
                prev_old = np.int64(b)
                prev_site = True
                i += 2
            else:
                prev_old = tok
                prev_site = False
                i += 1
        piece[_ix(4 * w + 1)] = j

    cnt[t, _N_LOC] = n_loc
    cnt[t, _N_EV] = n_ev
    cnt[t, _D_BEST] = d_best
    return e


@njit_parallel
def _rewrite_threads(nt, pos, end, ids, piece, occ, a, b, c, step, memo, lost, touched, loc, loc_c, loc_n, ev, cnt):
    """``_rewrite_chunk`` on ``nt`` threads, thread t from pos[t] to end[t] (it moves pos[t]).
    The threads' pieces are disjoint, and each writes only its own rows."""
    for t in prange(nt):
        # (t as int64, as the one-thread call passes it: one compile of _rewrite_chunk)
        pos[t] = _rewrite_chunk(np.int64(t), ids, piece, occ, pos[t], end[t], a, b, c, step,
                                memo, lost, touched, loc, loc_c, loc_n, ev, cnt)


@njit
def _file_step(nt, c, step, best, n_pairs, pl, pr, pc, seg_len, table, memo, lost, touched, loc, loc_c, loc_n,
               cnt, gmap):
    """Add up the threads' rows of a step: number the new pairs (thread 0's in the order
    it found them, then each later thread's that no earlier one found: the order one
    thread alone finds them), put them in the table, and count them, their listings
    (``seg_len``) and what the old pairs lost. ``gmap[t, k]`` is thread t's pair k.
    Returns the new ``n_pairs``."""
    a = pl[_ix(best)]
    b = pr[_ix(best)]
    for t in range(nt):
        # Ask for the new pairs' slots first, so the table's cache misses overlap.
        for k in range(cnt[t, _N_LOC]):
            prefetch(table, _home(table, np.int64(loc[t, 0, k]), np.int64(loc[t, 1, k])))
        for k in range(cnt[t, _N_LOC]):
            x = np.int64(loc[t, 0, k])
            y = np.int64(loc[t, 1, k])
            q = -1
            for u in range(t):
                if y == c:
                    if memo[u, _LC_STEP, _ix(x)] == step:
                        q = gmap[u, _ix(memo[u, _LC, _ix(x)])]
                elif memo[u, _RC_STEP, _ix(y)] == step:
                    q = gmap[u, _ix(memo[u, _RC, _ix(y)])]
                if q != -1:
                    break
            if q == -1:
                q = n_pairs
                n_pairs += 1
                pl[_ix(q)] = x
                pr[_ix(q)] = y
                pc[_ix(q)] = 0
                seg_len[_ix(q)] = 0
                table[_ix(_slot(table, pl, pr, x, y))] = q
            gmap[t, k] = q
            pc[_ix(q)] += loc_c[t, k]
            seg_len[_ix(q)] += loc_n[t, k]
        pc[_ix(best)] -= cnt[t, _D_BEST]
        _charge_lost(t, a, b, pl, pr, pc, table, memo, lost, touched, cnt)
    return n_pairs


@njit
def _charge_lost(t, a, b, pl, pr, pc, table, memo, lost, touched, cnt):
    """Take what thread t's old pairs lost off their counts: (k, a) on side 0, (b, k) on
    side 1, for each touched k.

    The pairs are looked up here, all of a step's together, rather than where the rewrite
    meets them: each lookup is a cache miss or two in a table of megabytes, and asked
    for first (the slots, then the pairs in them) the misses overlap instead of queueing
    behind the rewrite's own.
    """
    for side in range(2):
        rows = touched[t, side]
        n = cnt[t, _N_TA + side]
        for i in range(n):
            k = np.int64(rows[i])
            x, y = (k, np.int64(a)) if side == 0 else (np.int64(b), k)
            prefetch(table, _home(table, x, y))
        q_row = memo[t, _LA + side]
        for i in range(n):
            k = np.int64(rows[i])
            x, y = (k, np.int64(a)) if side == 0 else (np.int64(b), k)
            q = table[_ix(_home(table, x, y))]
            if q != -1:  # the pair itself, or the first of its neighbours in the probe
                prefetch(pl, q)
                prefetch(pr, q)
                prefetch(pc, q)
            q_row[_ix(k)] = q
        for i in range(n):
            k = np.int64(rows[i])
            x, y = (k, np.int64(a)) if side == 0 else (np.int64(b), k)
            q = q_row[_ix(k)]
            if q == -1 or pl[_ix(q)] != x or pr[_ix(q)] != y:  # further along the probe
                q = _find(table, pl, pr, x, y)
            pc[_ix(q)] -= lost[t, side, _ix(k)]  # (q is never -1: the pair was counted)


@njit
def _grow_rows(ev, size):
    """``ev`` ([threads, 2, n]) with room for ``size`` listings a thread."""
    out = np.empty((ev.shape[0], 2, max(size, 2 * ev.shape[2])), ev.dtype)
    for t in range(ev.shape[0]):
        for r in range(2):
            for k in range(ev.shape[2]):
                out[t, r, k] = ev[t, r, k]
    return out


@njit
def _first_pairs(ids, offsets, weights, piece, nt, pool0):
    """The initial count, on ``nt`` threads, each a run of the pieces of about equal
    bytes: fills ``piece``'s rows (see _learn_kernel) and returns, per byte pair
    xy = 256 x + y, its weighted count and the number of pieces it occurs in, then the
    pool ``occ`` (room for half as many more) and its end: the pieces of each byte pair,
    ascending, each once, the pairs' runs in xy order.

    A thread counts into tables of its own, and writes its pieces of a pair after those
    of the threads before it, so the pool is the same on any number of threads."""
    n_pieces = offsets.shape[0] - 1
    off0 = offsets[0]
    for w in range(n_pieces):
        piece[4 * w] = offsets[w] - off0
        piece[4 * w + 1] = offsets[w + 1] - offsets[w] if weights[w] > 0 else 0
        piece[4 * w + 2] = weights[w]
    first = np.empty(nt + 1, np.int64)  # thread t takes pieces first[t]..first[t + 1] - 1
    w = 0
    for t in range(nt):
        # the first piece that starts at or past the thread's share of the bytes (a loop,
        # not np.searchsorted: with it, loading the learner from the cache made Numba
        # refresh its registries; see tests/dwstok/test_jit_cache.py)
        at = off0 + (offsets[n_pieces] - off0) * t // nt
        while w < n_pieces and offsets[w] < at:
            w += 1
        first[t] = w
    first[nt] = n_pieces
    count = np.zeros((nt, 65536), np.int64)  # weighted count, then the thread's next slot in occ
    n = np.zeros((nt, 65536), np.int64)  # pieces counted
    last = np.full((nt, 65536), -1, np.int32)  # the piece last counted (or listed)
    occ = np.empty(0, np.int32)
    if nt > 1:
        _pairs_threads(nt, np.bool_(False), ids, piece, first, count, n, last, occ)  # not a literal: one compile
    else:
        _count_pairs(np.int64(0), ids, piece, first, count, n, last)
    xy_count = np.zeros(65536, np.int64)
    xy_n = np.zeros(65536, np.int64)
    used = np.int64(0)
    for xy in range(65536):
        for t in range(nt):
            xy_count[xy] += count[t, xy]
            xy_n[xy] += n[t, xy]
            count[t, xy] = used
            used += n[t, xy]
            last[t, xy] = -1
    # Room for half as many again: the first merges add listings fast, and a pool that
    # fills at once is squeezed again and again for little (its tail costs no memory
    # until it is written).
    occ = np.empty(max(pool0, used + used // 2), np.int32)
    if nt > 1:
        _pairs_threads(nt, np.bool_(True), ids, piece, first, count, n, last, occ)
    else:
        _list_pairs(np.int64(0), ids, piece, first, count, last, occ)
    return xy_count, xy_n, occ, used


@njit
def _count_pairs(t, ids, piece, first, count, n, last):
    """Thread t's part of the initial count: its pieces' byte pairs, in its own rows."""
    for w in range(first[t], first[t + 1]):
        s = piece[_ix(4 * w)]
        wt = piece[_ix(4 * w + 2)]
        for k in range(piece[_ix(4 * w + 1)] - 1):
            xy = np.int64(ids[_ix(s + k)]) * 256 + np.int64(ids[_ix(s + k + 1)])
            count[t, _ix(xy)] += wt
            if last[t, _ix(xy)] != w:
                last[t, _ix(xy)] = w
                n[t, _ix(xy)] += 1


@njit
def _list_pairs(t, ids, piece, first, at, last, occ):
    """Thread t's listings: each of its pieces once at ``at[t, xy]`` of each byte pair."""
    for w in range(first[t], first[t + 1]):
        s = piece[_ix(4 * w)]
        for k in range(piece[_ix(4 * w + 1)] - 1):
            xy = np.int64(ids[_ix(s + k)]) * 256 + np.int64(ids[_ix(s + k + 1)])
            if last[t, _ix(xy)] != w:
                last[t, _ix(xy)] = w
                occ[_ix(at[t, _ix(xy)])] = w
                at[t, _ix(xy)] += 1


@njit_parallel
def _pairs_threads(nt, listing, ids, piece, first, count, n, last, occ):
    """``_count_pairs`` (or ``_list_pairs``) on ``nt`` threads. Only a learner that holds
    the claim on threads calls it (see _parallel_claim)."""
    for t in prange(nt):
        # (t as int64, as the one-thread call passes it: one compile of each)
        if listing:
            _list_pairs(np.int64(t), ids, piece, first, count, last, occ)
        else:
            _count_pairs(np.int64(t), ids, piece, first, count, n, last)


@njit
def _learn_kernel(ids, offsets, weights, forced_left, forced_right, n_merges, max_len, stop, cap0, pool0, hot,
                  threads, par_min, out_left, out_right, out_count):
    # Merge i goes to out_left[i], out_right[i] and out_count[i] (room for n_merges),
    # and is written before stop[1] is set past i: the caller reads merges while it runs.
    n_pieces = offsets.shape[0] - 1
    n_forced = forced_left.shape[0]
    n_tokens_max = 256 + n_merges

    # Token bytes (for the tie rule): token t is tbytes[tstart[t]:tstart[t] + tlen[t]].
    tstart = np.empty(n_tokens_max, np.int64)
    tlen = np.empty(n_tokens_max, np.int64)
    tbytes = np.empty(4096, np.uint8)
    for t in range(256):
        tstart[t] = t
        tlen[t] = 1
        tbytes[t] = t
    tb_used = 256

    # Pieces: piece w's tokens are ids[start:start + length], with (start, length,
    # weight) = piece[4w:4w + 3], in 32 bytes of their own (Numba starts an array on a
    # 32-byte boundary) so that a merge reads them in one cache line, not three: 28
    # bytes a piece more than a length alone, for 5-12% less time in the kernel
    # (bench/results/session25-learner-threads-20261204.md). A merge rewrites the run
    # in place, left to right, so it only shrinks.
    piece = np.empty(4 * n_pieces, np.int64)

    # Pairs: (left, right, weighted count) and the pieces they occur in. A pair's
    # adjacencies all appear in one step -- the initial count for byte pairs, else the
    # merge that made its newer token -- so its piece list is one segment of the `occ`
    # pool, written once. A piece listed may have lost the pair since; a merge rescans
    # its pieces anyway, so such entries cost a scan and change nothing.
    # The initial count (see _first_pairs) gives the byte pairs' segments in (left,
    # right) order; pair ids follow that order.
    xy_count, xy_pieces, occ, used = _first_pairs(ids, offsets, weights, piece, threads, pool0)
    # Counters start as np.int64, not 0: a literal 0 passed to a kernel compiles it
    # once more, for the literal's type.
    n_pairs = np.int64(0)
    for xy in range(65536):
        n_pairs += xy_pieces[xy] > 0
    cap = max(n_pairs, cap0)
    pl = np.empty(cap, np.int32)
    pr = np.empty(cap, np.int32)
    pc = np.zeros(cap, np.int64)
    seg_start = np.empty(cap, np.int64)
    seg_len = np.zeros(cap, np.int32)
    start = np.int64(0)
    q = 0
    for xy in range(65536):
        if xy_pieces[xy] > 0:
            pl[q] = xy >> 8
            pr[q] = xy & 255
            pc[q] = xy_count[xy]
            seg_start[q] = start
            seg_len[q] = xy_pieces[xy]
            start += xy_pieces[xy]
            q += 1
    # (left, right) -> pair: the pairs whose counts fall at a merge, and forced merges;
    # kept under half full (it grows before a step that could fill it).
    size = 16
    while size < 2 * (n_pairs + 2 * 256 + 2):
        size *= 2
    table = _rehash(size, pl, pr, pc, n_pairs)
    n_table = n_pairs  # pairs in the table
    spent = 0  # listings of merged pairs still in the pool

    # Every pair with a positive count is in the heap of (count, pair), counted at least
    # ``theta``, or in the cold list, counted less. All start cold; the first pick fills
    # the heap.
    hc = np.empty(1024, np.int64)
    hp = np.empty(1024, np.int32)
    hn = np.int64(0)
    cold = np.empty(cap, np.int32)
    for q in range(n_pairs):
        cold[q] = q
    nc = np.int64(n_pairs)
    theta = np.int64(0x7FFFFFFFFFFFFFFF)

    # Per step and thread (see _rewrite_chunk): the new pairs (x, c) and (c, y) made by
    # the new token c, found by x or y; the old pairs (x, a) and (b, y) whose counts
    # fall, found the same way; and the pieces where the new pairs occur (grouped into
    # segments at the end of the step). A step makes at most 2c + 1 new pairs.
    memo = np.full((threads, _MEMO_ROWS, n_tokens_max), -1, np.int32)
    lost = np.empty((threads, 2, n_tokens_max), np.int64)
    touched = np.empty((threads, 2, n_tokens_max), np.int32)
    loc = np.empty((threads, 2, 2 * n_tokens_max + 2), np.int32)
    loc_c = np.empty((threads, 2 * n_tokens_max + 2), np.int64)
    loc_n = np.empty((threads, 2 * n_tokens_max + 2), np.int32)
    gmap = np.empty((threads, 2 * n_tokens_max + 2), np.int32)
    ev = np.empty((threads, 2, max(pool0, 1)), np.int32)
    tcnt = np.zeros((threads, _CNT_COLS), np.int64)
    pos = np.empty(threads, np.int64)
    end = np.empty(threads, np.int64)

    for step in range(n_merges):
        if stop[0]:  # the caller was interrupted (see _interruptible)
            return step
        stop[1] = step  # merges done so far, which the waiting thread may read
        # Choose the pair.
        if step < n_forced:
            a = forced_left[step]
            b = forced_right[step]
            best = _find(table, pl, pr, np.int64(a), np.int64(b))
            cnt = np.int64(0)
        else:
            best = -1
            cnt = np.int64(0)
            while True:
                if hn == 0:
                    if nc == 0:
                        break
                    if nc > hc.shape[0]:
                        hc = _grow(hc, nc)
                        hp = _grow(hp, nc)
                    nc, hn, theta = _refill(cold, nc, pc, hot, hc, hp, pl, pr, tstart, tlen, tbytes)
                    if hn == 0:
                        break
                top_c = hc[0]
                top_p = hp[0]
                hn -= 1
                if hn > 0:
                    hc[0] = hc[hn]
                    hp[0] = hp[hn]
                    _sift_down(hc, hp, hn, pl, pr, tstart, tlen, tbytes)
                cur = pc[top_p]
                if max_len > 0 and tlen[pl[top_p]] + tlen[pr[top_p]] > max_len:
                    # Too long, for good: a pair's tokens never change, so it is dropped.
                    continue
                if cur == top_c:
                    best = top_p
                    cnt = cur
                    break
                if cur >= theta:  # the count fell since this entry was pushed: requeue
                    hc[hn] = cur
                    hp[hn] = top_p
                    hn += 1
                    _sift_up(hc, hp, hn - 1, pl, pr, tstart, tlen, tbytes)
                elif cur > 0:  # fell below the heap's threshold
                    cold[nc] = top_p
                    nc += 1
            if best == -1:
                return step
            a = pl[best]
            b = pr[best]
        c = 256 + step
        out_left[step] = a
        out_right[step] = b
        out_count[step] = cnt
        n_new = tlen[a] + tlen[b]
        if tb_used + n_new > tbytes.shape[0]:
            tbytes = _grow(tbytes, tb_used + n_new)
        for k in range(tlen[a]):
            tbytes[tb_used + k] = tbytes[tstart[a] + k]
        for k in range(tlen[b]):
            tbytes[tb_used + tlen[a] + k] = tbytes[tstart[b] + k]
        tstart[c] = tb_used
        tlen[c] = n_new
        tb_used += n_new
        if best == -1:
            continue  # a forced merge that never occurs

        # Room for this step, made before the loops: an array reassigned inside them
        # costs reference counting on every byte. The step makes at most 2c + 1 new
        # pairs, (t, c) and (c, t), and a piece at most one listing per byte.
        need = n_pairs + 2 * c + 2
        if need > pl.shape[0] or 2 * (need - n_pairs + n_table) > table.shape[0]:
            # Before growing anything, renumber the pairs still counted (spent pairs
            # never occur again), keeping their order, so the pool's segments stay in
            # pair order; the heap keeps the entries of those pairs.
            n_pairs, hn, nc, best = _collect(pl, pr, pc, seg_start, seg_len, n_pairs, hc, hp, hn, cold, nc, best,
                                         tstart, tlen, tbytes)
            need = n_pairs + 2 * c + 2
            # Grow unless the collection freed a quarter of the room: late in training
            # few pairs are spent, and collecting again and again for a few hundred
            # pairs each time (O(pairs) each) cost more than the merges between them.
            if 4 * need > 3 * pl.shape[0]:
                pl = _grow(pl, need)
                pr = _grow(pr, need)
                pc = _grow(pc, need)
                seg_start = _grow(seg_start, need)
                seg_len = _grow(seg_len, need)
                cold = _grow(cold, need)
            size = table.shape[0]
            while 8 * need > 3 * size:  # under 1/2 until the next collection, with room to spare
                size *= 2
            table = _rehash(size, pl, pr, pc, n_pairs)
            n_table = n_pairs
        # Rewrite the pieces, on ``threads`` threads when they are many (each thread a
        # run of the listings), then add up what the threads found.
        first_new = n_pairs
        e = seg_start[best]
        n_list = np.int64(seg_len[best])
        nt = threads if n_list >= par_min else 1
        stop[2] = nt > 1
        for t in range(nt):
            pos[t] = e + n_list * t // nt
            end[t] = e + n_list * (t + 1) // nt
            for k in range(_CNT_COLS):
                tcnt[t, k] = 0
        while True:
            if nt > 1:
                _rewrite_threads(nt, pos, end, ids, piece, occ, a, b, c, step,
                                 memo, lost, touched, loc, loc_c, loc_n, ev, tcnt)
            else:
                pos[0] = _rewrite_chunk(np.int64(0), ids, piece, occ, pos[0], end[0], a, b, c,
                                        step, memo, lost, touched, loc, loc_c, loc_n, ev, tcnt)
            room = np.int64(0)
            for t in range(nt):
                if pos[t] < end[t]:
                    room = max(room, tcnt[t, _N_EV] + piece[4 * np.int64(occ[pos[t]]) + 1])
            if room == 0:
                break
            ev = _grow_rows(ev, room)
        n_pairs = _file_step(nt, c, step, best, n_pairs, pl, pr, pc, seg_len, table, memo, lost, touched, loc,
                             loc_c, loc_n, tcnt, gmap)
        n_table += n_pairs - first_new
        n_occ_new = np.int64(0)
        for t in range(nt):
            n_occ_new += tcnt[t, _N_EV]

        # File the step's pieces into one segment per new pair (counting sort), and
        # queue the new pairs with their final counts.
        # The pool is the big allocation. When it is full, or half of it is spent
        # pairs' listings, squeeze those out, then fit it to what is left (a freed
        # array goes back to the system, so the peak stays near the live listings).
        spent += seg_len[best]
        if used + n_occ_new > occ.shape[0] or 2 * spent > used:
            used = _compact(occ, seg_start, seg_len, pc, first_new)
            spent = np.int64(0)
            fit = max(pool0, (used + n_occ_new) * 5 // 4)
            # (grown whenever under a fifth is left free: squeezing out a few spent
            # listings at a time, the pool was compacted every few merges)
            if fit > occ.shape[0] or 2 * fit < occ.shape[0]:
                resized = np.empty(fit, np.int32)
                for k in range(used):
                    resized[k] = occ[k]
                occ = resized
        for q in range(first_new, n_pairs):
            seg_start[q] = used
            used += seg_len[q]
            seg_len[q] = 0
        most = np.int64(0)
        for t in range(nt):
            most = max(most, tcnt[t, _N_EV])
            for k in range(tcnt[t, _N_EV]):
                q = gmap[t, ev[t, 0, k]]
                occ[seg_start[q] + seg_len[q]] = ev[t, 1, k]
                seg_len[q] += 1
        if ev.shape[2] > 1 << 16 and 8 * most < ev.shape[2]:
            # The first merges list millions of pieces, later ones few: give it back.
            ev = np.empty((threads, 2, max(pool0, 2 * most)), np.int32)
        if hn + n_pairs - first_new > hc.shape[0]:
            hc = _grow(hc, hn + n_pairs - first_new)
            hp = _grow(hp, hn + n_pairs - first_new)
        for q in range(first_new, n_pairs):
            if pc[q] >= theta:
                hc[hn] = pc[q]
                hp[hn] = q
                hn += 1
                _sift_up(hc, hp, hn - 1, pl, pr, tstart, tlen, tbytes)
            elif pc[q] > 0:
                cold[nc] = q
                nc += 1

    return n_merges


# ---------------------------------------------------------------------------- wrapper


def pieces_to_arrays(pieces: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Pack byte strings into ``(data, offsets)`` in Arrow's binary layout.

    >>> data, offsets = pieces_to_arrays([b"ab", b"c"])
    >>> data.tobytes(), offsets.tolist()
    (b'abc', [0, 2, 3])
    """
    offsets = np.zeros(len(pieces) + 1, np.int64)
    if pieces:
        np.cumsum([len(p) for p in pieces], out=offsets[1:])
    data = np.frombuffer(b"".join(pieces), np.uint8)
    return data, offsets


def _forced_ids(forced: Sequence[tuple[bytes, bytes]]) -> tuple[np.ndarray, np.ndarray]:
    """Resolve forced merges to token ids; each side must already be a token."""
    ids = {bytes([b]): b for b in range(256)}
    left = np.empty(len(forced), np.int32)
    right = np.empty(len(forced), np.int32)
    for i, pair in enumerate(forced):
        try:
            lb, rb = (bytes(x) for x in pair)
        except (TypeError, ValueError):
            raise ConfigError(f"forced merge #{i} is not a pair of byte strings: {pair!r}") from None
        for side in (lb, rb):
            if side not in ids:
                raise ConfigError(
                    f"forced merge #{i} {pair!r}: {side!r} is not a byte or an earlier forced merge"
                )
        if lb + rb in ids:
            raise ConfigError(f"forced merge #{i} {pair!r} repeats the token {lb + rb!r}")
        left[i] = ids[lb]
        right[i] = ids[rb]
        ids[lb + rb] = 256 + i
    return left, right


def learn_merges(
    data,
    offsets,
    weights,
    n_merges: int,
    *,
    forced: Sequence[tuple[bytes, bytes]] = (),
    max_token_bytes: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    on_merges: Callable[[int, list[tuple[bytes, bytes]]], None] | None = None,
    threads: int = 1,
) -> TrainResult:
    """Learn up to ``n_merges`` merges (forced ones included, and ranked first).

    ``data`` (uint8) and ``offsets`` (int64, ``n + 1`` ascending entries) hold the unique
    pieces in Arrow's binary layout; ``weights`` (int64 >= 0) says how often each occurs.
    ``max_token_bytes`` caps a learned token's length (HF's ``max_token_length``): pairs
    that would make a longer token are never merged. None learns exactly as without it.
    ``on_progress(merges_done)`` is called about every second from the calling thread
    while the kernel runs (the CLI turns it into merges/s and an ETA).
    ``on_merges(first, merges)`` gets the merges from ``first`` on, a batch at a time
    as the kernel makes them, from the calling thread, which is idle meanwhile (the train
    stage makes the model file's rows); a ``first`` of 0 after others means start over.
    ``threads`` > 1 rewrites the pieces of a merge that touches many on that many
    threads (Numba's ``prange``); the merges are the same on any number.

    >>> learn_merges(b"aaaaaaaa", [0, 8], [1], 3, max_token_bytes=4).merges
    [(b'a', b'a'), (b'aa', b'aa')]
    """
    data = np.ascontiguousarray(np.frombuffer(data, np.uint8) if isinstance(data, bytes) else data)
    offsets = np.ascontiguousarray(offsets)
    weights = np.ascontiguousarray(weights)
    if data.dtype != np.uint8 or data.ndim != 1:
        raise InputError(f"data must be a 1-d uint8 array, got {data.dtype} with {data.ndim} dims")
    if offsets.ndim != 1 or offsets.shape[0] < 1 or not np.issubdtype(offsets.dtype, np.integer):
        raise InputError("offsets must be a 1-d integer array with at least one entry")
    offsets = offsets.astype(np.int64, copy=False)
    n_pieces = offsets.shape[0] - 1
    if weights.ndim != 1 or weights.shape[0] != n_pieces:
        raise InputError(f"weights must have one entry per piece ({n_pieces}), got {weights.shape}")
    if not np.issubdtype(weights.dtype, np.integer) and n_pieces:
        raise InputError(f"weights must be integers (fixed point), got {weights.dtype}")
    weights = weights.astype(np.int64, copy=False)
    # One type for the kernel whatever the caller's arrays are: a read-only one (from
    # np.frombuffer, a memory map) had Numba compile and cache a second signature.
    offsets = offsets if offsets.flags.writeable else offsets.copy()
    weights = weights if weights.flags.writeable else weights.copy()
    if offsets[0] < 0 or offsets[-1] > data.shape[0] or np.any(np.diff(offsets) < 0):
        raise InputError("offsets must ascend within the data buffer")
    if n_pieces and (weights.min() < 0 or weights.max() >= 2**62):
        raise InputError("weights must be non-negative and below 2**62")
    n_merges = int(n_merges)
    if n_merges < 0:
        raise ConfigError(f"n_merges must be >= 0, got {n_merges}")
    if len(forced) > n_merges:
        raise ConfigError(f"{len(forced)} forced merges do not fit in {n_merges} merges")
    # The largest possible pair count must fit in int64.
    if n_pieces:
        # (a ufunc, not np.dot: OpenBLAS runs a dot this long on threads of its own,
        # which then spin for a while)
        bound = float(np.multiply(weights, np.diff(offsets), dtype=np.float64).sum())
        if bound >= 2.0**62:
            exact = sum(int(w) * int(n) for w, n in zip(weights.tolist(), np.diff(offsets).tolist()))
            if exact >= 2**63:
                raise InputError("weights are too large: a pair count could overflow int64")
    if n_pieces + 1 >= 2**31 or data.shape[0] >= 2**40:
        raise InputError("too many pieces for one training run (at most 2**31 - 2)")

    if max_token_bytes is not None:
        max_token_bytes = int(max_token_bytes)
        if max_token_bytes < 2:
            raise ConfigError(f"max_token_bytes must be at least 2 (a merge makes two bytes), got {max_token_bytes}")
        for a, b in forced:
            if len(a) + len(b) > max_token_bytes:
                raise ConfigError(f"forced merge {(a, b)!r} makes a token longer than max_token_bytes={max_token_bytes}")
    if n_merges > 2**31 - 257:
        raise ConfigError(f"{n_merges:,} merges do not fit: token ids must fit in 31 bits (lower vocab_size)")
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ConfigError(f"threads must be a positive integer, got {threads!r}")
    fl, fr = _forced_ids(forced)
    # Each learned merge uses up at least one pair of adjacent bytes, so no more than
    # this many can be learned: the kernel's arrays need no room for more (a vocab_size
    # of 10**11 was a MemoryError).
    lengths = np.diff(offsets)
    room = len(forced) + int(np.maximum(lengths - 1, 0)[weights > 0].sum()) if n_pieces else len(forced)
    del lengths
    n_merges_run = min(n_merges, room)
    # [0]: set to stop the kernel; [1]: merges it has done; [2]: 1 while its steps run on threads
    stop = np.zeros(3, np.int64)
    # The kernel rewrites the pieces as token ids in place: 2 bytes a byte while ids fit.
    ids_dtype = np.uint16 if 256 + n_merges_run <= 1 << 16 else np.int32
    ids = data[offsets[0] : offsets[-1]].astype(ids_dtype) if n_pieces else np.zeros(0, ids_dtype)
    left = np.empty(n_merges_run, np.int32)
    right = np.empty(n_merges_run, np.int32)
    count = np.zeros(n_merges_run, np.int64)
    tokens = [bytes([b]) for b in range(256)]
    merges: list[tuple[bytes, bytes]] = []
    read: list[list[int]] = [[], []]  # the ids of the merges taken while the kernel ran

    def take(done: int, early: bool) -> None:
        """Merges len(merges)..done - 1 to ``merges``, and to ``on_merges``."""
        first = len(merges)
        if done <= first:
            return
        ls, rs = left[first:done].tolist(), right[first:done].tolist()
        if early:
            read[0] += ls
            read[1] += rs
        for a, b in zip(ls, rs):
            pair = (tokens[a], tokens[b])
            merges.append(pair)
            tokens.append(pair[0] + pair[1])
        if on_merges is not None:
            on_merges(first, merges[first:])

    # Merge i is written before the kernel sets stop[1] > i; one more is left as a
    # margin, and the ids taken early are checked against the final ones below.
    threads = _parallel_claim(int(threads))
    _start_threading_layer()

    def kernel() -> int:
        try:
            return _learn_kernel(ids, offsets, weights, fl, fr, n_merges_run, max_token_bytes or 0, stop, _CAP0, _POOL0,
                                 _HOT, threads, _PAR_MIN, left, right, count)
        finally:  # in the thread that ran it: a kernel left running after a Ctrl-C keeps its claim
            if threads > 1:
                _PARALLEL.release()

    n_done = int(_interruptible(
        kernel,
        stop,
        on_progress,
        # (not while the kernel's steps run on threads: they would wait for this one's CPU)
        None if on_merges is None else lambda: stop[2] or take(int(stop[1]) - 1, True),
    ))
    seen = len(read[0])
    if seen and not (np.array_equal(left[:seen], read[0]) and np.array_equal(right[:seen], read[1])):
        del merges[:], tokens[256:]  # (never seen: then the kernel's writes came late)
    take(n_done, False)
    return TrainResult(merges, count[:n_done].copy(), n_done < n_merges)


# Numba's fallback threading layer (workqueue, where neither TBB nor OpenMP is found)
# aborts the process when two threads start parallel kernels at once, and GNU OpenMP
# cannot start them in a process forked from one that has: one learner at a time runs
# on threads, none in a forked child after its parent has.
_PARALLEL = threading.Lock()
_parallel_used = False
_forked_after_use = False


def _start_threading_layer() -> None:
    """Start Numba's threading layer (once a process) before the learner runs.

    The kernel's code calls into it (its ``prange`` steps, and at entry on any number of
    threads). Numba starts it when it loads a cached kernel only if that kernel's own
    compile ran the parallel passes: a signature compiled in a process that had loaded
    its parallel callees from the cache was cached without the start-up (a library read
    back from the cache has no ``reload_init`` to pass on), and in the next process its
    first call jumped to address 0. Numba's issue 8578 is the same bug.
    """
    if numba.config.DISABLE_JIT:
        return
    try:
        from numba.np.ufunc.parallel import _launch_threads
    except ImportError:  # another Numba: its own loading has to do
        return
    _launch_threads()


def _after_fork_in_child() -> None:
    global _forked_after_use
    _forked_after_use = _forked_after_use or _parallel_used


os.register_at_fork(after_in_child=_after_fork_in_child)


def _parallel_claim(threads: int) -> int:
    """How many threads this learner may use: ``threads`` (at most Numba's pool and
    ``_MAX_THREADS``) if no other learner in the process runs on threads, else 1. A
    claim of more than 1 holds ``_PARALLEL`` until the kernel returns."""
    global _parallel_used
    threads = min(threads, numba.config.NUMBA_NUM_THREADS, _MAX_THREADS)
    if threads < 2 or _forked_after_use or not _PARALLEL.acquire(blocking=False):
        return 1
    _parallel_used = True
    return threads


_WAIT_S = 0.01  # how often the waiting thread hands on_merges the merges made meanwhile


def _interruptible(call, stop: np.ndarray, on_progress: Callable[[int], None] | None = None,
                   on_wait: Callable[[], None] | None = None):
    """Run ``call`` (a long nogil kernel) in a helper thread while this thread waits
    (calling ``on_wait()`` every ``_WAIT_S``, if given).

    Python runs signal handlers in the main thread only, between bytecodes. A Ctrl-C
    that lands while the main thread is inside a kernel, or inside the compiler's ctypes
    callbacks on a first run, surfaced as a SystemError or a crash. Waiting here instead
    turns it into a plain KeyboardInterrupt; ``stop[0] = 1`` makes the kernel return at
    its next merge, so the helper thread ends too (after at most 2 s it is left to
    finish on its own: it may still be compiling).
    """
    if threading.current_thread() is not threading.main_thread() and on_progress is None and on_wait is None:
        return call()
    box: dict = {}

    def target() -> None:
        try:
            box["result"] = call()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = e

    t = threading.Thread(target=target, name="dwstok-learn", daemon=True)
    t.start()
    try:
        last = time.monotonic()
        while t.is_alive():
            t.join(0.1 if on_wait is None else _WAIT_S)
            if on_wait is not None:
                on_wait()
            if on_progress is not None and time.monotonic() - last >= 1.0:
                last = time.monotonic()
                on_progress(int(stop[1]))
    except BaseException:
        stop[0] = 1
        t.join(2.0)
        raise
    if "error" in box:
        raise box["error"]
    return box["result"]

