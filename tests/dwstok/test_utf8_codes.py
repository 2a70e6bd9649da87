"""The intrinsics the scanner's UTF-8 windows stand on, against Python's own decoding:
``utf8_codes`` (every code point of 64 bytes at once), ``code_at``/``set_code`` and the
class masks read back from what they wrote."""

from __future__ import annotations

import random

import numpy as np

from dwstok._intrinsics import code_at, code_masks_intrinsic, set_code, utf8_codes
from dwstok._jit import njit

_masks = code_masks_intrinsic([1, 2, 7])


@njit
def _decode(buf, i, dst, k):
    utf8_codes(buf, i, dst, k)
    got = np.empty(64, np.int64)
    for j in range(64):
        got[j] = code_at(dst, k, j)
    return got


@njit
def _classes(dst, k, at, values):
    for m in range(at.shape[0]):
        set_code(dst, k, at[m], values[m])
    return _masks(dst, k)


def test_every_character_of_two_or_three_bytes_decodes_where_it_starts():
    rng = random.Random(3)
    for _ in range(200):
        chars = [chr(rng.choice([rng.randrange(0x80, 0x800), rng.randrange(0x800, 0xD800), rng.randrange(0xE000, 0x10000), rng.randrange(0x20, 0x7F)])) for _ in range(40)]
        raw = "".join(chars).encode()
        buf = np.frombuffer(raw + b"  ", np.uint8)
        dst = np.full(20, -1, np.int64)
        got = _decode(buf, 0, dst, 3)
        at = 0
        for ch in chars:
            if at >= 64:
                break
            if ord(ch) >= 0x80:
                assert got[at] == ord(ch), (ch, at)
            at += len(ch.encode())
        assert (dst[:3] == -1).all() and (dst[19:] == -1).all()  # only its 16 words


def test_class_masks_read_what_set_code_wrote():
    dst = np.zeros(16, np.int64)
    at = np.array([0, 5, 63, 17, 40], np.int64)
    values = np.array([1, 2, 0x71, 7, 0x12], np.int64)  # high nibbles (fold letters) ignored
    ones, twos, sevens = _classes(dst, 0, at, values)
    assert int(ones) == (1 << 0) | (1 << 63) and int(twos) == (1 << 5) | (1 << 40) and int(sevens) == 1 << 17
