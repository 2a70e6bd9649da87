"""Atoms: characters whose bytes merge into one token before they meet their neighbours.

Merging starts from single bytes, so a Chinese character costs two merges before the
interesting ones begin, and a 60-byte run of Han costs about 40 merges that every
encoder repeats. For most characters the outcome of those first merges is fixed: the
character's bytes become one token, whatever surrounds it. Starting such a character
as that token (an *atom*) gives exactly the same ids with a third of the merges.

When is that safe? Merge the character's bytes alone and let ``R`` be the highest rank
used. In a text, the merge with the lowest rank always goes first, so while the
character is still in parts, one of its own merges (rank ``<= R``) is pending and beats
any pair that joins one of its edge parts to a neighbour if that pair ranks above
``R``. Nor may a neighbour join the finished token below ``R``: that pair could not exist
yet at that point of the byte-level merge. So the character is an atom next to any
neighbour ``x`` for which no such pair ranks ``<= R``. The neighbours that do are few
(typically a space before a Han character: ``" \\xe7"`` is an o200k token), and they
are recorded as *patterns*: the last (left side) or first (right side) up to 4 bytes of
the neighbouring token. At encode time a character starts as its atom only if no
pattern matches the bytes next to it inside the piece; a match means the neighbour may
be that token, so the character starts as bytes, as before.

The patterns assume valid UTF-8 around the character (a neighbour ends or starts at a
character boundary); the encoder checks that, and otherwise also starts from bytes.

Only code points below U+10000 are tabled (64k entries), which covers Cyrillic, Greek,
Arabic, Indic scripts, kana, Hangul and Han; other characters start as bytes.

Two atoms side by side also cut a piece when no token holds the two characters side by
side (``atom_joins``): a merge across them would make a token that holds both whole, so
none happens, and each segment between such cuts merges on its own. A run of Han or
kana, one piece of 10-30 characters, is then mostly segments of one or two characters.

>>> import numpy as np
>>> from dwstok import Tokenizer
>>> tok = Tokenizer.from_vocab_merges({i: bytes([i]) for i in range(256)}, [(b"\\xe4", b"\\xb8"), (b"\\xe4\\xb8", b"\\x80")])
>>> atom_id(tok._tables, ord("一")) == tok.encode("一")[0]
True
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .bpe.build import filter_of
from .bpe.parts import SPACE_BEFORE, _char23
from .bpe.tables import NO_RANK, _new_id, _pair_rank
from .hashing import _hash_pair

MAX_PATTERNS = 8  # a character with more forbidding neighbours is no atom
# The commonest pattern by far, a space on the left (" \xe7" and the like are o200k
# tokens), is a flag in the atom's word instead of an item of its list, so that most
# atoms of Han and kana text have an empty list: a loop over a list of varying length,
# once a character, mispredicts its exit (bench/results/session44-20261206.md).
_LEFT_SPACE = (0x20 << 4) | 1  # that pattern's code (see _pattern)


def atom_table(T, lefts, rights, ranks) -> tuple[np.ndarray, np.ndarray]:
    """``(atoms, patterns)`` for the tables ``T`` whose pairs are (lefts, rights) → ranks."""
    n = T.tok_off.size - 1
    if n == 0 or lefts.size == 0:
        return np.full(0x10000, -1, np.int64), np.zeros(1, np.int64)
    lefts = np.asarray(lefts, np.int64)
    rights = np.asarray(rights, np.int64)
    ranks = np.asarray(ranks, np.int64)
    by_left = _group(lefts, n)
    by_right = _group(rights, n)
    starts_ok, ends_ok = _boundary_flags(T.tok_bytes, T.tok_off)
    return _build(T, lefts, rights, ranks, by_left, by_right, starts_ok, ends_ok)


JOIN_BITS_A_PAIR = 8  # so that two atoms that no token joins pass the filter about one time in twenty


def atom_joins(T, atoms) -> np.ndarray:
    """The filter of pairs of atoms that some token of ``T`` holds side by side, by
    their ids: two bits a pair in one int64 word, as ``pair_filter``; a pair not in it
    may pass, which only forgoes a cut.

    Sized by the distinct pairs (16k in o200k, against 136k with repeats): the encoder
    tests it once a Han or kana character as a new piece is set up, so it should stay in
    L1 or L2 (bench/results/session44-20261206.md)."""
    return filter_of(_distinct(_join_hashes(T.tok_bytes, T.tok_off, atoms, T.pair_bits)), JOIN_BITS_A_PAIR)


@njit
def _join_hashes(tok_bytes, tok_off, atoms, bits):
    """The hashes (``_hash_pair``) of the pairs of atoms side by side in a token, with
    repeats."""
    hashes = np.empty(tok_bytes.size // 2 + 1, np.uint64)  # a pair ends a character of 2 bytes or more
    count = 0
    for t in range(tok_off.size - 1):
        prev = np.int64(-1)  # the atom just before i, if the byte before i ends one
        i = tok_off[t]
        b = tok_off[t + 1]
        while i < b:
            c = np.int64(tok_bytes[i])
            n = 2 if 0xC2 <= c < 0xE0 else 3 if 0xE0 <= c < 0xF0 else 0
            cp = _char23(tok_bytes, i, b, c) if n > 0 else np.int64(-1)
            if cp < 0:
                prev = -1
                i += 1
                continue
            a = atoms[cp]
            a = a & 0xFFFFFF if a >= 0 else np.int64(-1)
            if a >= 0 and prev >= 0:
                hashes[count] = _hash_pair((prev << bits) | a)
                count += 1
            prev = a
            i += n
    return hashes[:count]


@njit
def _distinct(hashes):
    """``hashes`` without repeats, in order of first sight (an open-addressing set, not
    np.unique's sort: a model load pays for it)."""
    size = 16
    while size <= 2 * hashes.size:
        size *= 2
    mask = size - 1
    seen = np.zeros(size, np.uint64)
    out = np.empty_like(hashes)
    n = 0
    has_zero = False
    for h in hashes:
        if h == 0:  # 0 marks an empty slot
            if not has_zero:
                has_zero = True
                out[n] = h
                n += 1
            continue
        i = np.int64(h & np.uint64(mask))
        while seen[i] != 0 and seen[i] != h:
            i = (i + 1) & mask
        if seen[i] == 0:
            seen[i] = h
            out[n] = h
            n += 1
    return out[:n]


def atom_id(T, cp: int) -> int:
    """The token a character starts as when it is an atom, else -1."""
    v = int(T.atoms[cp]) if cp < T.atoms.size else -1
    return -1 if v < 0 else v & 0xFFFFFF


@njit
def _group(keys, n):
    """Pair indices grouped by key: indices of key k are idx[off[k]:off[k+1]]."""
    off = np.zeros(n + 1, np.int64)
    for k in keys:
        off[k + 1] += 1
    off = np.cumsum(off)
    pos = off[:-1].copy()
    idx = np.empty(keys.size, np.int64)
    for j in range(keys.size):
        idx[pos[keys[j]]] = j
        pos[keys[j]] += 1
    return off, idx


@njit
def _boundary_flags(tok_bytes, tok_off):
    """starts_ok[t]: t can start at a character boundary (its first byte is no continuation
    byte); ends_ok[t]: t can end at one (its last character is complete, or it is at most
    three continuation bytes)."""
    n = tok_off.size - 1
    starts_ok = np.zeros(n, np.bool_)
    ends_ok = np.zeros(n, np.bool_)
    for t in range(n):
        a, b = tok_off[t], tok_off[t + 1]
        if b <= a:
            continue
        starts_ok[t] = (tok_bytes[a] & 0xC0) != 0x80
        k = 0
        i = b - 1
        while i >= a and (tok_bytes[i] & 0xC0) == 0x80 and k < 4:
            k += 1
            i -= 1
        if i < a:
            ends_ok[t] = k <= 3
        else:
            c = tok_bytes[i]
            need = 1 if c < 0x80 else 2 if (c & 0xE0) == 0xC0 else 3 if (c & 0xF0) == 0xE0 else 4 if (c & 0xF8) == 0xF0 else 0
            ends_ok[t] = need == k + 1
    return starts_ok, ends_ok


@njit
def _pattern(tok_bytes, a, b, side):
    """Up to 4 bytes of a neighbour (its last ones on the left side, first on the right)
    as ``(bytes little-endian << 4) | (side << 3) | count``."""
    n = min(b - a, 4)
    s = b - n if side == 0 else a
    v = np.int64(0)
    for i in range(n):
        v |= np.int64(tok_bytes[s + i]) << (8 * i)
    return (v << 4) | (side << 3) | n


@njit
def _build(T, lefts, rights, ranks, by_left, by_right, starts_ok, ends_ok):
    atoms = np.full(0x10000, -1, np.int64)
    pats = np.empty(0x10000 * 4, np.int64)
    npats = 0
    b = np.empty(3, np.int64)
    ids = np.empty(3, np.int64)
    edges = np.empty((2, 4), np.int64)  # the parts at the left / right edge, stage by stage
    mine = np.empty(MAX_PATTERNS, np.int64)
    for cp in range(0x80, 0x10000):
        if 0xD800 <= cp < 0xE000:
            continue
        if cp < 0x800:
            m = 2
            b[0] = 0xC0 | (cp >> 6)
            b[1] = 0x80 | (cp & 0x3F)
        else:
            m = 3
            b[0] = 0xE0 | (cp >> 12)
            b[1] = 0x80 | ((cp >> 6) & 0x3F)
            b[2] = 0x80 | (cp & 0x3F)
        ok = True
        for i in range(m):
            ids[i] = T.byte_ids[b[i]]
            ok = ok and ids[i] >= 0
        if not ok:
            continue
        # merge the character alone, as _merge does, noting its edge parts and top rank
        top = -1
        ne = 0
        while m > 1:
            edges[0, ne] = ids[0]
            edges[1, ne] = ids[m - 1]
            ne += 1
            best = NO_RANK
            bi = -1
            for i in range(m - 1):
                r = _pair_rank(T, ids[i], ids[i + 1])
                if r < best:
                    best = r
                    bi = i
            if bi < 0:
                break
            top = max(top, best)
            ids[bi] = _new_id(T, best)
            for j in range(bi + 1, m - 1):
                ids[j] = ids[j + 1]
            m -= 1
        if m != 1:
            continue
        edges[0, ne] = ids[0]
        edges[1, ne] = ids[0]
        ne += 1
        # the neighbours that could join an edge part (or the token) at rank <= top
        k = 0
        for side in range(2):
            for q in range(ne):
                p = edges[side, q]
                off, idx = by_right if side == 0 else by_left
                for jj in range(off[p], off[p + 1]):
                    j = idx[jj]
                    if ranks[j] > top:
                        continue
                    x = lefts[j] if side == 0 else rights[j]
                    if not (ends_ok[x] if side == 0 else starts_ok[x]):
                        continue  # cannot sit next to a whole character
                    code = _pattern(T.tok_bytes, T.tok_off[x], T.tok_off[x + 1], side)
                    seen = False
                    for u in range(k):
                        seen = seen or mine[u] == code
                    if seen:
                        continue
                    if k == MAX_PATTERNS:
                        ok = False
                        break
                    mine[k] = code
                    k += 1
                if not ok:
                    break
            if not ok:
                break
        if not ok or ids[0] >= 1 << 24:
            continue
        if npats + k > pats.size:
            pats = np.concatenate((pats, np.empty(pats.size, np.int64)))
        flag = np.int64(0)
        kept = 0
        for u in range(k):
            if mine[u] == _LEFT_SPACE:
                flag = SPACE_BEFORE
            else:
                mine[kept] = mine[u]
                kept += 1
        k = kept
        pats[npats : npats + k] = mine[:k]
        atoms[cp] = (npats << 32) | flag | (k << 24) | ids[0]
        npats += k
    return atoms, pats[: max(npats, 1)].copy()
