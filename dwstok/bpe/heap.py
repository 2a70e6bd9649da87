"""Merging by a 4-ary heap over a linked list of parts: O(n log n) in the parts, so a
piece of megabytes with no boundaries (a million spaces) is no trap."""

from __future__ import annotations

from .._intrinsics import ix as _ix
from .._jit import njit_inline, njit_no_nrt
from .tables import NO_RANK, _new_id, _pair_rank


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


@njit_no_nrt
def _merge_heap(T, H, m, out, n, max_rank):
    # The m first parts are in H's ids, the ranks of their pairs in its rk. A min-heap of
    # (rank << 32 | part) over a linked list of parts: among equal ranks the heap yields
    # the leftmost pair, the same choice as the quadratic scan. Entries go stale when a
    # neighbour merges; they are checked against the live pair's rank, kept in rk[_ix(i)] for
    # the pair that starts at part i, when popped instead of being removed (no pair
    # lookup to find them stale).
    # Without Numba's runtime: with it, unpacking H and each pair lookup's arrays of T
    # took and dropped references (bench/results/session58-20261207.md).
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
