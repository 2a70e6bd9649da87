"""Merging one piece: its first parts, then the quadratic scan, sweeps or the heap by
how many parts it starts with; a piece that atoms cut (see atoms.py), segment by
segment."""

from __future__ import annotations

import numpy as np

from .._intrinsics import ix as _ix
from .._jit import njit, njit_inline, njit_no_nrt
from .heap import _merge_heap
from .parts import CUT_RANK, _atom_ranks, _first_parts, _first_ranks
from .quadratic import QUAD_PARTS, _merge_scan
from .sweeps import SWEEP_PARTS, _merge_sweeps
from .tables import NO_RANK, BpeTables, _new_id

SMALL = 20  # parts of a piece that merges in the small scratch arrays (and on average side by side)
HEAP_SCRATCH = 4096  # pieces up to this many bytes merge in preallocated heap arrays


@njit_inline
def scratch_words(nbytes):
    """int64 words of the work arrays of :func:`_scratch_in` for ``nbytes``."""
    h = min(HEAP_SCRATCH, max(nbytes, SMALL + 1))
    return SMALL // 2 + SMALL + (h + 1) // 2 + 6 * h


@njit_inline
def _scratch_in(w, nbytes):
    """Work arrays for merging, as views of ``w`` (``scratch_words(nbytes)`` words):
    ``(ids, rk, heap arrays)``, the heap's sized for pieces of up to ``min(nbytes,
    HEAP_SCRATCH)`` bytes (a longer piece allocates its own)."""
    h = min(HEAP_SCRATCH, max(nbytes, SMALL + 1))
    a = SMALL // 2 + SMALL
    b = a + (h + 1) // 2
    heap = (w[a:b].view(np.int32)[:h], w[b : b + h], w[b + h : b + 2 * h], w[b + 2 * h : b + 5 * h], w[b + 5 * h : b + 6 * h])
    return (w[: SMALL // 2].view(np.int32), w[SMALL // 2 : a], heap)


@njit
def _scratch(nbytes=HEAP_SCRATCH):
    """:func:`_scratch_in` on an array of its own: views of one array, one allocation a
    call instead of seven."""
    return _scratch_in(np.empty(scratch_words(nbytes), np.int64), nbytes)


@njit_inline
def _heap_arrays(nb):
    """The heap arrays of ``_scratch_in`` (ids, next, previous, heap, ranks) for a piece of
    ``nb`` bytes, as arrays of their own: for a piece longer than the preallocated ones."""
    return (np.empty(nb, np.int32), np.empty(nb, np.int64), np.empty(nb, np.int64), np.empty(3 * nb, np.int64), np.empty(nb, np.int64))


@njit_inline
def _merge(buf, s, e, T, S, out, n, max_rank):
    """Merge the bytes buf[s:e] into out[n:], return the new n. Pairs of rank >= max_rank never merge."""
    H = S[2]
    if e - s > H[0].size:
        H = _heap_arrays(e - s)
    return _merge_in(buf, s, e, T, S[0], S[1], H, out, n, max_rank)


@njit_inline
def _merge_in(buf, s, e, T, ids, rk, H, out, n, max_rank):
    """``_merge`` in scratch that holds the piece: ``ids, rk`` for up to SMALL bytes, the
    heap arrays ``H`` for up to ``H[0].size``. Allocates nothing, so that a kernel without
    Numba's runtime can inline it."""
    nb = e - s
    if nb > SMALL:
        ids, rk = H[0], H[4]
    if max_rank == NO_RANK:  # atoms hold only when every merge may happen
        m = _first_parts(buf, s, e, T.byte_ids, T.atoms, T.atom_pats, T.atom_joins, T.pair_bits, ids, 0)
        if m != nb:  # atoms: pairs across a cut never merge
            if _atom_ranks(T, ids, rk, m):
                return _merge_segments(T, ids, rk, H, m, out, n)
            return _merged(T, ids, rk, H, m, out, n, max_rank)
    else:
        m = nb
        for i in range(m):
            ids[_ix(i)] = T.byte_ids[buf[_ix(s + i)]]
    _first_ranks(buf, s, e, T, rk, max_rank)
    return _merged(T, ids, rk, H, m, out, n, max_rank)


@njit_inline
def _merge_segments(T, ids, rk, H, m, out, n):
    """Merge the ``m`` parts in ``ids`` (ranks in ``rk``, ``CUT_RANK`` at the cuts)
    segment by segment into out[n:]; return the new n. Most segments of a Han or kana
    run are one character or two."""
    st = 0
    for i in range(1, m + 1):
        if i < m and rk[_ix(i - 1)] != CUT_RANK:
            continue
        k = i - st
        if k == 1:
            out[_ix(n)] = ids[_ix(st)]
            n += 1
        elif k == 2 and rk[_ix(st)] < NO_RANK:
            out[_ix(n)] = _new_id(T, rk[_ix(st)])
            n += 1
        elif k <= QUAD_PARTS:
            k = _merge_scan(T, ids, rk, st, k, NO_RANK)
            for j in range(k):
                out[_ix(n + j)] = ids[_ix(st + j)]
            n += k
        else:  # rare in a segment: views, for sweeps and the heap
            n = _merged(T, ids[st:], rk[st:], (ids[st:], H[1], H[2], H[3], rk[st:]), k, out, n, NO_RANK)
        st = i
    return n


@njit_inline
def _merged(T, ids, rk, H, m, out, n, max_rank):
    """Merge the ``m`` parts in ``ids`` with pair ranks ``rk`` into out[n:] by the
    quadratic scan, sweeps or the heap by their count; return the new n. ``H``'s ids
    and ranks are ``ids`` and ``rk`` when there are more than QUAD_PARTS."""
    if m > QUAD_PARTS:
        if m >= SWEEP_PARTS:
            m = _merge_sweeps(T, ids, rk, m, max_rank)
        if m > QUAD_PARTS:
            return _merge_heap(T, H, m, out, n, max_rank)
    m = _merge_scan(T, ids, rk, 0, m, max_rank)
    for i in range(m):
        out[_ix(n + i)] = ids[_ix(i)]
    return n + m


@njit
def _merge_long(buf, s, e, T, ids, rk, out, n):
    """``_merge_fits`` for a piece longer than the preallocated heap arrays, in arrays of
    its own: the one allocation a merge may need, which a kernel without Numba's runtime
    cannot make. The merging itself is compiled once, in ``_merge_fits``, which also
    compiles faster without the runtime (bench/results/session58-20261207.md).
    """
    return _merge_fits(buf, s, e, T, ids, rk, _heap_arrays(e - s), out, n)


@njit_no_nrt
def _merge_fits(buf, s, e, T, ids, rk, H, out, n):
    """Merge buf[s:e] into out[n:] with every merge allowed, in the heap arrays ``H``,
    which must hold it (``e - s <= H[0].size``); return the new n. The one compiled copy
    of the merge that the span driver, one-by-one pieces (``_encode_pieces``) and
    ``_self_encodes`` share, through ``_merge_alone``.

    Without Numba's runtime: the views and tuples of views a merge makes took and
    dropped a reference each (bench/results/session58-20261207.md)."""
    return _merge_in(buf, s, e, T, ids, rk, H, out, n, NO_RANK)


@njit_inline
def _merge_alone(buf, s, e, T, ids, rk, H, out, n):
    """Merge buf[s:e] into out[n:] with every merge allowed; return the new n: by
    ``_merge_fits`` if it fits the heap arrays ``H``, else by ``_merge_long``, which
    allocates its own. What the span driver, one-by-one pieces and ``_self_encodes`` call."""
    if e - s <= H[0].size:
        return _merge_fits(buf, s, e, T, ids, rk, H, out, n)
    return _merge_long(buf, s, e, T, ids, rk, out, n)


@njit
def _merge_ids(T, token, max_rank, out):
    """Parts of a token's bytes after all merges below max_rank (for deriving merges)."""
    S = _scratch(np.int64(HEAP_SCRATCH))
    return _merge(T.tok_bytes, T.tok_off[token], T.tok_off[token + 1], T, S, out, np.int64(0), max_rank)


def split_token(tables: BpeTables, token: int, rank: int) -> np.ndarray:
    """Parts of a token's bytes merged with every pair ranked below ``rank``.

    For a tiktoken model this is the merge that creates the token (two parts).
    """
    out = np.empty(int(tables.tok_off[token + 1] - tables.tok_off[token]) + 1, np.uint32)  # as the encoder's
    n = _merge_ids(tables, token, np.int64(rank), out)
    return out[:n].astype(np.int32)
