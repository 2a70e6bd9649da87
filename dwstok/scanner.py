"""Pretokenizer scanners (INTERIM: regex-module fallback only; Numba scanners come next).

Public API (stable; other modules build on it):

- ``get_scanner(pattern) -> Scanner`` with ``pattern`` a name from ``dwstok.patterns``
  or any pattern string.
- ``Scanner.bounds(buf) -> np.ndarray[int64]``: byte offsets ``[0, e1, ..., len(buf)]``
  of the pretokens of UTF-8 ``buf`` (``bytes`` or a uint8 array). The named patterns
  tile the text, so consecutive offsets delimit every pretoken.
- ``Scanner.pieces(text) -> list[str]``: the same as ``regex.findall(pattern, text)``.
"""

from __future__ import annotations

import functools

import numpy as np
import regex

from .patterns import resolve


class Scanner:
    def __init__(self, pattern: str):
        self.name, self.pattern = resolve(pattern)
        self._re = regex.compile(self.pattern)
        self.is_native = False

    def pieces(self, text: str) -> list[str]:
        return self._re.findall(text)

    def bounds(self, buf) -> np.ndarray:
        text = bytes(buf).decode("utf-8")
        out = [0]
        pos = 0
        for piece in self._re.findall(text):
            pos += len(piece.encode("utf-8"))
            out.append(pos)
        if pos != len(buf):
            raise ValueError("pattern does not tile the text")
        return np.asarray(out, dtype=np.int64)


@functools.lru_cache(maxsize=None)
def get_scanner(pattern: str) -> Scanner:
    return Scanner(pattern)
