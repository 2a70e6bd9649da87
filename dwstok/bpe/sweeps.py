"""Merging a long piece a rank at a time, in passes over all its parts."""

from __future__ import annotations

from .._intrinsics import ix as _ix
from .._jit import njit_no_nrt
from .quadratic import QUAD_PARTS
from .tables import NO_RANK, _new_id, _pair_rank

SWEEP_PARTS = 64  # from this many parts, _merge first tries a few sweeps


@njit_no_nrt
def _merge_sweeps(T, ids, rk, m, max_rank):
    """Merge the ``m`` parts in ``ids`` (pair ranks in ``rk``) a rank at a time, for at
    most 8 passes' worth over them; return how many parts are left, for the heap.

    Each sweep takes the lowest rank and merges its pairs from left to right in one pass
    over the parts: what merging pair by pair does, as long as no pair a merge makes
    ranks lower (a pair it makes never has the same rank). One that does stops the
    sweep there, and the next sweep starts from that rank. Long runs of a few tokens
    (box-drawing lines, runs of one character) merge this way in a few sweeps instead
    of a heap pop and two pushes a merge. Pieces whose merges all have ranks of their
    own spend the 8 passes and go to the heap: never a pass per merge.
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
