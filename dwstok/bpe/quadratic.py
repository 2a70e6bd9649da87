"""The quadratic scan tiktoken's ``_byte_pair_merge`` uses: find the lowest-ranked pair,
merge it, look up its two new neighbours, repeat. Fastest for a piece of few parts."""

from __future__ import annotations

from .._intrinsics import ix as _ix
from .._jit import njit_inline
from .tables import NO_RANK, _new_id, _pair_rank

QUAD_PARTS = 24  # up to this many first parts merge by the quadratic scan; more use the heap


@njit_inline
def _merge_scan(T, ids, rk, b, m, max_rank):
    """Merge the ``m`` parts at ``ids[b:]`` (pair ranks at ``rk[b:]``) in place; return
    how many are left. Pairs of rank >= max_rank never merge.

    The first minimum of ``rk`` is the leftmost pair of the lowest rank, which is the
    tie rule. (An offset, not a view: a view made in a kernel with Numba's runtime
    costs reference counting, and a piece in segments has dozens.)
    """
    while m > 1:
        best = NO_RANK
        bi = -1
        for i in range(b, b + m - 1):
            if rk[_ix(i)] < best:
                best = rk[_ix(i)]
                bi = i
        if bi < 0:
            break
        e = b + m
        ids[_ix(bi)] = _new_id(T, best)
        for j in range(bi + 1, e - 1):
            ids[_ix(j)] = ids[_ix(j + 1)]
        for j in range(bi + 1, e - 2):
            rk[_ix(j)] = rk[_ix(j + 1)]
        m -= 1
        e -= 1
        if bi > b:
            r = _pair_rank(T, ids[_ix(bi - 1)], ids[_ix(bi)])
            rk[_ix(bi - 1)] = r if r < max_rank else NO_RANK
        if bi < e - 1:
            r = _pair_rank(T, ids[_ix(bi)], ids[_ix(bi + 1)])
            rk[_ix(bi)] = r if r < max_rank else NO_RANK
    return m
