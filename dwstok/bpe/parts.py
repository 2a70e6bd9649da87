"""The parts a piece starts merging from, and the ranks of their pairs."""

from __future__ import annotations

import numpy as np

from .._intrinsics import ix as _ix
from .._jit import njit_inline
from ..hashing import _hash_pair
from .tables import NO_RANK, _may_merge, _pair_rank

SPACE_BEFORE = np.int64(1 << 31)  # in an atom's word: a space just before it forbids it (atoms.py)
CUT = np.int32(1 << 30)  # in a first part's id: no merge joins it to the part before (bit 30)
CUT_RANK = NO_RANK + 1  # the rank of a pair across a cut: it never merges, nor is looked up


@njit_inline
def _char23(buf, i, e, c):
    """The code point of the two- or three-byte character at buf[i] (lead byte ``c``,
    0xC2 <= c < 0xF0), or -1 if it is cut short by ``e``, a continuation byte is wrong,
    or it is overlong. (The one decoder of the atom paths: _first_parts and
    atoms._join_hashes must agree on which characters are atoms.)"""
    if c < 0xE0:
        if i + 2 > e or (buf[_ix(i + 1)] & 0xC0) != 0x80:
            return np.int64(-1)
        return ((c & 0x1F) << 6) | np.int64(buf[_ix(i + 1)] & 0x3F)
    if i + 3 > e or (buf[_ix(i + 1)] & 0xC0) != 0x80 or (buf[_ix(i + 2)] & 0xC0) != 0x80:
        return np.int64(-1)
    cp = ((c & 0xF) << 12) | (np.int64(buf[_ix(i + 1)] & 0x3F) << 6) | np.int64(buf[_ix(i + 2)] & 0x3F)
    return cp if cp >= 0x800 else np.int64(-1)  # (below: overlong)


@njit_inline
def _first_parts(buf, s, e, byte_ids, atoms, pats, joins, bits, ids, base):
    """Write the parts merging starts from for buf[s:e] to ids[base:]; return their count.

    One byte each, except that a character that is an atom (see atoms.py) starts as its
    token, unless a pattern says its neighbour here might join it first. The count is
    ``e - s`` exactly when no atom was used. Atoms need valid UTF-8 around them: after a
    stray byte, or before a continuation byte, a character starts as bytes.
    An atom that follows an atom no token joins it to has ``CUT`` set in its id: the
    parts before and from it merge apart (callers clear the flag).
    The tables come as arrays (``T.byte_ids, T.atoms, T.atom_pats, T.atom_joins``), not
    as ``T``: inlined into the loops of kernels that run with Numba's runtime
    (``_merge``), each array passed costs reference counting.
    """
    m = 0
    i = s
    prev_ok = True  # the bytes before i end with a whole character, or i is the start
    pa = np.int64(-1)  # the last part's id if it is an atom
    while i < e:
        c = np.int64(buf[_ix(i)])
        if c < 0xC2 or c >= 0xF0 or atoms.size == 0:
            ids[_ix(base + m)] = byte_ids[_ix(c)]
            m += 1
            i += 1
            prev_ok = c < 0x80
            pa = -1
            continue
        n = 2 if c < 0xE0 else 3
        cp = _char23(buf, i, e, c)
        if cp < 0:
            ids[_ix(base + m)] = byte_ids[_ix(c)]
            m += 1
            i += 1
            prev_ok = False
            pa = -1
            continue
        a = atoms[_ix(cp)]
        # an atom, with a whole character before it and none cut off after it
        ok = a >= 0 and prev_ok and (i + n == e or (buf[_ix(i + n)] & 0xC0) != 0x80)
        if ok and (a & SPACE_BEFORE) != 0 and i > s and buf[_ix(i - 1)] == 0x20:
            ok = False  # a space before it may take a part of the character first
        if ok:
            p0 = a >> 32
            for q in range(p0, p0 + ((a >> 24) & 0x7F)):
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
                    ok = False  # this neighbour may take a part of the character first
                    break
        if ok:
            a &= 0xFFFFFF
            if n == 3:  # (cuts between two-byte letters are rare: not looked for)
                # without a branch: whether a cut follows a Han character is a coin toss
                may = _may_merge(joins, _hash_pair((pa << bits) | a))
                cut = np.int64(pa >= 0) & (np.int64(may) ^ 1)
                ids[_ix(base + m)] = np.int32(a | (cut << 30))
                pa = a
            else:
                ids[_ix(base + m)] = a
                pa = -1
            m += 1
        else:
            for u in range(n):
                ids[_ix(base + m + u)] = byte_ids[buf[_ix(i + u)]]
            m += n
            pa = -1
        i += n
        prev_ok = True
    return m


@njit_inline
def _first_ranks(buf, s, e, T, rk, max_rank):
    """rk[i] = rank of the pair of bytes i, i + 1 of buf[s:e] (NO_RANK if it does not
    merge below max_rank), from the dense table. (Parts with atoms: merge.py.)"""
    for i in range(e - s - 1):
        r = T.byte_pairs[np.int64(buf[_ix(s + i)]) * 256 + buf[_ix(s + i + 1)]]
        rk[_ix(i)] = r if r < max_rank else NO_RANK


@njit_inline
def _atom_ranks(T, ids, rk, m):
    """The ranks of the pairs of the ``m`` first parts in ``ids`` (clearing their
    ``CUT`` flags), ``CUT_RANK`` for a pair across a cut, not looked up; return how
    many cuts there are. One loop of lookups that do not wait on one another."""
    cuts = 0
    for i in range(1, m):
        c = ids[_ix(i)]
        if c & CUT:
            ids[_ix(i)] = c ^ CUT
            rk[_ix(i - 1)] = CUT_RANK
            cuts += 1
        else:
            rk[_ix(i - 1)] = _pair_rank(T, ids[_ix(i - 1)], c)
    return cuts
