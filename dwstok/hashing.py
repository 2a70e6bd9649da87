"""Hashes of byte strings and of pair keys, shared by the encoder's tables and piece cache
and by the pipeline's piece counts."""

from __future__ import annotations

import numpy as np

from ._intrinsics import load8 as _load8
from ._intrinsics import ix as _ix
from ._jit import njit, njit_inline


@njit_inline
def _pack8(buf, start, end):
    """The first (up to) 8 bytes of buf[start:end] as one little-endian integer."""
    n = min(end - start, 8)
    if n <= 0:
        return np.uint64(0)
    if start + 8 <= buf.size:
        sh = np.uint64(64 - 8 * n)
        return (_load8(buf, start) << sh) >> sh
    v = np.uint64(0)
    for i in range(n):
        v |= np.uint64(buf[start + i]) << np.uint64(8 * i)
    return v


@njit_inline
def _hash_bytes(buf, start, end):
    """Hash of buf[start:end]; its low bits pick a slot."""
    return _hash_from_head(buf, start, end, _pack8(buf, start, end))


@njit_inline
def _hash_from_head(buf, start, end, head):
    """``_hash_bytes`` given ``head = _pack8(buf, start, end)``, which callers keep to
    compare slots with.

    The packed head and the length, then the tail 8 bytes at a time, then an avalanche
    so the low bits used as the slot are well mixed.
    """
    h = head ^ (np.uint64(end - start) << np.uint64(56))
    h *= np.uint64(0x9E3779B97F4A7C15)
    for i in range(start + 8, end, 8):
        h ^= _pack8(buf, i, end)
        h *= np.uint64(0xFF51AFD7ED558CCD)
    return _avalanche(h)


@njit_inline
def _avalanche(h):
    """Mix ``h`` so that its low bits, used as the slot, depend on all of it."""
    h ^= h >> np.uint64(29)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(32)
    return h


@njit
def _hash_pair(key):
    """Hash of a pair key ``left << bits | right``."""
    h = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    return h ^ (h >> np.uint64(31))


@njit_inline
def _same_words(a, a0, b, b0, n):
    """Whether a[a0:a0 + n] == b[b0:b0 + n] (uint8 arrays), 8 bytes at a time: the last
    word overlaps the one before it rather than ending in a loop over single bytes.
    The tails of long pieces (CJK, Indic) ran a byte at a time in the hit path."""
    if n < 8:
        for i in range(n):
            if a[_ix(a0 + i)] != b[_ix(b0 + i)]:
                return False
        return True
    i = 0
    while i + 8 < n:
        if _load8(a, a0 + i) != _load8(b, b0 + i):
            return False
        i += 8
    return _load8(a, a0 + n - 8) == _load8(b, b0 + n - 8)


@njit_inline
def _same_bytes(a, a0, b, b0, n):
    for i in range(n):
        if a[a0 + i] != b[b0 + i]:
            return False
    return True
