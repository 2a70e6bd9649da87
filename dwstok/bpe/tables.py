"""A model as flat arrays (:class:`BpeTables`), packed into one array, and the lookups in it.

- ``pairs``: an open-addressing hash of ``(left id, right id)`` → rank, one int64 a
  slot, and ``rank_new``: rank → the id it makes; ``byte_pairs``: the ranks of pairs of
  single bytes as a dense 256×256 array, for the first round; ``pair_filter``: a bit
  filter of the pairs small enough to stay in the CPU's L2, which answers most lookups
  of a pair that does not merge without touching ``pairs``.
- ``whole`` and ``longs``: hashes of token bytes → id for the tokens that a piece equal
  to them encodes to directly. A slot holds the token's bytes (up to 8 in ``whole``, up
  to 16 in ``longs``) and its length, so a lookup touches one slot and nothing else.
- ``atoms`` and ``atom_pats``: characters whose bytes always become one token before
  they meet a neighbour (see atoms.py); merging starts from that token.
  ``atom_joins``: a bit filter of the pairs of atoms that some token holds side by
  side; two atoms side by side that are not in it never join, so a piece merges as the
  segments cut between them.
- ``small_ids``: the ids of every piece of one or two bytes, packed, so that the span
  driver settles such a piece by one load, with no hash and no lookup.
- ``long_filter``: a bit filter of the tokens over ``LONG_FILTER_OVER`` bytes (4k of
  o200k's 200k), small enough to stay in L1: a longer piece that it rules out is no
  token, and is not looked up in ``longs`` (Han and kana runs are such pieces).

How they are built is in build.py.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._intrinsics import ix as _ix
from .._intrinsics import rows as _rows
from .._jit import njit, njit_inline
from ..hashing import _hash_pair, _pack8, _same_words
from ..limits import MAX_IDS
from .pages import huge_page_array

NO_RANK = np.int64(1 << 40)
FRONT_ID = MAX_IDS  # ids are packed 21 bits each, all ones for none (no id reaches it: limits.py)
LONG_FILTER_OVER = 16  # tokens of more bytes than this are in ``long_filter``


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
    pair_filter: np.ndarray  # int64 [2^k]: two bits set a pair in pairs, see _may_merge
    atom_joins: np.ndarray  # int64 [2^k]: the same kind of filter of atom pairs some token holds, see atoms.py
    long_filter: np.ndarray  # int64 [2^k]: the same kind of filter of the tokens over LONG_FILTER_OVER bytes, by hash
    small_ids: np.ndarray  # int64 [256 + 65536]: the ids of every piece of one byte (at b) or two (at 256 + b1 * 256 + b2), packed as _pack_ids


# Field order of a packed model (see pack_tables): the arrays, then pair_bits.
_PACKED_FIELDS = ("tok_bytes", "tok_off", "byte_ids", "pairs", "rank_new", "byte_pairs", "whole", "atoms", "atom_pats", "longs", "pair_filter", "atom_joins", "long_filter", "small_ids")
_PACKED_DTYPES = {f: np.dtype(np.uint8 if f == "tok_bytes" else np.int32 if f in ("byte_ids", "rank_new") else np.int64) for f in _PACKED_FIELDS}
_HEADER = 32  # int64 words before the first array: (start, count) per array, then pair_bits


def pack_tables(T: BpeTables) -> np.ndarray:
    """All of ``T`` in one int64 array: a header of where each array starts and how many
    items it has, then the arrays, each from an 8-byte boundary.

    Why: a call into Numba unboxes every array argument, so one array costs a call a
    tenth of what 11 do. The kernels take views of it again (``_unpack_tables``), which
    costs nothing.

    >>> from dwstok.bpe import build_tables
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
    own unpacking, so there is one reading of the layout; run as Python, NumPy views
    the same way, and nothing is compiled for it)."""
    return getattr(_unpack_tables, "py_func", _unpack_tables)(P)


@njit_inline
def _unpack_tables(P):
    # (start, count) of field i of _PACKED_FIELDS at P[2i], P[2i + 1]; pair_bits at P[28]
    return BpeTables(
        P[P[0] : P[0] + (P[1] + 7) // 8].view(np.uint8)[: P[1]],
        P[P[2] : P[2] + P[3]],
        P[P[4] : P[4] + (P[5] + 1) // 2].view(np.int32)[: P[5]],
        P[P[6] : P[6] + P[7]],
        P[28],
        P[P[8] : P[8] + (P[9] + 1) // 2].view(np.int32)[: P[9]],
        P[P[10] : P[10] + P[11]],
        _rows(P[P[12] : P[12] + P[13]], 2),
        P[P[14] : P[14] + P[15]],
        P[P[16] : P[16] + P[17]],
        _rows(P[P[18] : P[18] + P[19]], 3),
        P[P[20] : P[20] + P[21]],
        P[P[22] : P[22] + P[23]],
        P[P[24] : P[24] + P[25]],
        P[P[26] : P[26] + P[27]],
    )


# ---------------------------------------------------------------------------- pairs


@njit_inline
def _rank_at(pairs, key, h, shift, pmask):
    """Rank of the pair ``key = left << bits | right`` (hash ``h = _hash_pair(key)``) in
    ``pairs``, or NO_RANK."""
    i = np.int64(h & np.uint64(pmask))
    while True:
        v = pairs[_ix(i)]
        if v < 0:
            return NO_RANK
        if (v >> shift) == key:
            return v & ((np.int64(1) << shift) - 1)
        i = (i + 1) & pmask


@njit_inline
def _may_merge(pair_filter, h):
    """False if the pair with hash ``h`` (``_hash_pair``) is surely not in ``pairs``.

    Most pairs an encoder looks up in Han, Thai or Indic text do not merge. ``pairs``
    is megabytes, so each such lookup waits on memory; the filter is about 5
    bits a pair (128 KB for o200k), one word a lookup with two bits to test. A pair in
    ``pairs`` always passes; one not in it passes at most about one time in ten, and is
    then looked up as before. The word is no sure hit in L2 either: side-by-side
    merging prefetches it (``_filter_word``) with the pair's slot and tests it a round
    later (bench/results/session29-20261205.md).
    """
    return _may_hold(pair_filter, h)


@njit_inline
def _may_hold(f, h):
    """False if no key with hash ``h`` was put in the filter ``f`` (``_filter_add``)."""
    w = f[_ix(_filter_word(f, h))]
    m = _filter_bits(h)
    return (np.uint64(w) & m) == m


@njit_inline
def _filter_word(pair_filter, h):
    """The word of ``pair_filter`` that holds the bits of the pair with hash ``h``."""
    return np.int64((h >> np.uint64(32)) & np.uint64(pair_filter.size - 1))


@njit_inline
def _filter_add(f, h):
    """Set the bits of the pair with hash ``h`` in the filter ``f`` (uint64 words), as
    ``_may_merge`` tests them."""
    f[_filter_word(f, h)] |= _filter_bits(h)


@njit_inline
def _filter_bits(h):
    """The two bits of a filter word that the pair with hash ``h`` sets."""
    one = np.uint64(1)
    return (one << ((h >> np.uint64(20)) & np.uint64(63))) | (one << ((h >> np.uint64(26)) & np.uint64(63)))


@njit_inline
def _pair_rank(T, left, right):
    """Rank of the pair (left, right), or NO_RANK when it does not merge.

    A slot is one int64, ``(left << bits | right) << shift | rank``: half the size of a
    key/value pair, so a large table stays in cache better; the table is too big for L2
    anyway, and these lookups are what merging costs. ``pair_filter`` answers most
    pairs that do not merge first.
    """
    bits = T.pair_bits
    key = (np.int64(left) << bits) | np.int64(right)
    return _filtered_rank(T.pairs, T.pair_filter, key, _hash_pair(key), 63 - 2 * bits, T.pairs.size - 1)


@njit_inline
def _filtered_rank(pairs, pair_filter, key, h, shift, pmask):
    """``_rank_at`` after ``_may_merge``. A function of its own, given arrays: with the
    early return in ``_pair_rank``, which is given ``T``, Numba counted references to
    every table on every lookup."""
    if not _may_merge(pair_filter, h):
        return NO_RANK
    return _rank_at(pairs, key, h, shift, pmask)


@njit_inline
def _new_id(T, rank):
    """The id a merge of ``rank`` makes."""
    return np.int32(rank) if T.rank_new.size == 0 else T.rank_new[_ix(rank)]


# ---------------------------------------------------------------------------- packed ids


@njit_inline
def _pack_ids(id0, id1, id2):
    """Up to three ids (``id1``, ``id2``: -1 if it has fewer) in one word, 21 bits each,
    FRONT_ID for none: as ``small_ids`` and the cache's front table keep them, and as
    the span driver holds a settled piece (one store and one load a piece instead of
    three). Ids are below FRONT_ID, as ``build._tables`` makes sure (``limits.MAX_IDS``).

    >>> hex(int(_pack_ids.py_func(5, 6, -1)))
    '0x7ffffc0000c00005'
    """
    return np.int64(id0) | ((np.int64(id1) & FRONT_ID) << 21) | ((np.int64(id2) & FRONT_ID) << 42)


# ---------------------------------------------------------------------------- whole tokens


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
        return _lookup_short(whole, head, n, h)
    return _lookup_long(longs, tok_bytes, tok_off, buf, start, n, head, np.int64(_pack8(buf, start + 8, end)), h)


@njit_inline
def _lookup_short(whole, head, n, h):
    """Id of the token of ``n <= 8`` bytes packed in ``head`` (hash ``h``) in ``whole``, or -1."""
    size = whole.shape[0]
    i = np.int64(h & np.uint64(size - 1))
    while True:
        meta = whole[_ix(i), 1]
        if meta < 0:
            return -1
        if whole[_ix(i), 0] == head and (meta >> 32) == n:
            return meta & 0xFFFFFFFF
        i = (i + 1) & (size - 1)


@njit_inline
def _lookup_long(longs, tok_bytes, tok_off, buf, start, n, head, nxt, h):
    """Id of the token buf[start:start + n] (``n > 8``; bytes 0-7 packed in ``head``, 8-15
    in ``nxt``) in ``longs``, or -1. Bytes past the 16th are compared in ``tok_bytes``."""
    size = longs.shape[0]
    i = np.int64(h & np.uint64(size - 1))
    while True:
        meta = longs[_ix(i), 2]
        if meta < 0:
            return -1
        if longs[_ix(i), 0] == head and longs[_ix(i), 1] == nxt and (meta >> 32) == n:
            t = meta & 0xFFFFFFFF
            if n <= 16 or _same_words(tok_bytes, tok_off[_ix(t)] + 16, buf, start + 16, n - 16):
                return t
        i = (i + 1) & (size - 1)


# ---------------------------------------------------------------------------- decoding


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
