"""Pretokenizer scanners: hand-written Numba kernels over UTF-8 bytes.

Public API (stable; other modules build on it):

- ``get_scanner(pattern) -> Scanner`` with ``pattern`` a name from ``dwstok.patterns``
  (``"o200k"``, ``"o200k-rdigits"``, ``"cl100k"``, ``"gpt2"``) or any pattern string;
  cached. Named patterns get a native scanner, anything else the ``regex`` module.
- ``Scanner.name`` (``str | None``), ``Scanner.pattern`` (``str``), ``Scanner.is_native``,
  ``Scanner.kind`` (``int``: one of the ``KIND_*`` constants, ``-1`` for the regex
  fallback) and ``Scanner.table`` (the code-point class table to pass to the kernels).
- ``Scanner.bounds(buf) -> np.ndarray[int64]``: byte offsets ``[0, e1, ..., len(buf)]``
  of the pretokens of UTF-8 ``buf`` (``bytes`` or a uint8 array). The named patterns
  tile the text, so consecutive offsets delimit every pretoken.
- ``Scanner.pieces(text) -> list[str]``: the same as ``regex.findall(pattern, text)``.
- For callers inside their own ``@njit`` kernels (the BPE encoder), two nogil kernels:

  ``scan_into(kind, buf, table, out) -> n`` writes ``out[0] = 0``, ``out[1..n]`` the end
  of each pretoken, ``out[n] = len(buf)``; ``out`` needs ``len(buf) + 1`` slots.

  ``scan_range(kind, buf, start, end, table, out) -> n`` does the same for the text
  ``buf[start:end]`` (as if it were the whole input: lookaheads stop at ``end``),
  writing absolute offsets ``out[0] = start .. out[n] = end`` (``end - start + 1`` slots).

  ``kind`` is ``Scanner.kind`` (must not be -1) and ``table`` is ``Scanner.table``. The
  table is an argument, not a global, so that the compiled code stays small.

>>> s = get_scanner("o200k")
>>> s.pieces("I'm 2026's best-ever scanner!\\n")
['I'm', ' ', '202', '6', "'s", ' best', '-ever', ' scanner', '!\\n']
>>> s.bounds("héllo wörld".encode()).tolist()
[0, 6, 13]

The kernels are memory-safe on any bytes (a truncated or invalid sequence is classed
as punctuation), but only valid UTF-8 is guaranteed to split as ``regex`` does.

How each kernel mirrors its pattern: the patterns are alternations tried in order with
greedy (o200k) or possessive (cl100k, gpt2) quantifiers, and every alternative that
backtracks does so in a way that can be resolved by one forward scan over a run of one
class (the last mark/Lm/Lo in a run of upper-case letters, the last \\r/\\n in a run of
white space, the start of the last white-space character). So each kernel scans every
byte a bounded number of times: linear time whatever the input.
"""

from __future__ import annotations

import functools

import numpy as np
import regex

from ._jit import njit
from .errors import InputError
from .patterns import resolve
from .unicode_classes import (
    CAT_MASK,
    CRLF,
    FOLD,
    LETTER,
    LOWER,
    MARK,
    NUMBER,
    OTHER,
    SPACE,
    UPPER,
    load_table,
)

KIND_REGEX = -1
KIND_O200K = 0
KIND_O200K_RDIGITS = 1
KIND_CL100K = 2
KIND_GPT2 = 3
KINDS = {"o200k": KIND_O200K, "o200k-rdigits": KIND_O200K_RDIGITS, "cl100k": KIND_CL100K, "gpt2": KIND_GPT2}

_F_S, _F_T, _F_R, _F_E = FOLD["s"], FOLD["t"], FOLD["r"], FOLD["e"]
_F_V, _F_M, _F_L, _F_D = FOLD["v"], FOLD["m"], FOLD["l"], FOLD["d"]
_APOS, _SP, _CR, _LF, _SLASH = 0x27, 0x20, 0x0D, 0x0A, 0x2F


# ---------------------------------------------------------------- decoding


@njit
def _step(buf, i, end, table):
    """(table entry, start of next code point) for the code point at byte ``i``."""
    b = np.int64(buf[i])
    if b < 0x80:
        return table[b], i + 1
    if b < 0xE0:
        if i + 2 > end:
            return np.uint8(OTHER), end
        return table[((b & 0x1F) << 6) | (np.int64(buf[i + 1]) & 0x3F)], i + 2
    if b < 0xF0:
        if i + 3 > end:
            return np.uint8(OTHER), end
        cp = ((b & 0x0F) << 12) | ((np.int64(buf[i + 1]) & 0x3F) << 6) | (np.int64(buf[i + 2]) & 0x3F)
        return table[cp], i + 3
    if i + 4 > end:
        return np.uint8(OTHER), end
    cp = (
        ((b & 0x07) << 18)
        | ((np.int64(buf[i + 1]) & 0x3F) << 12)
        | ((np.int64(buf[i + 2]) & 0x3F) << 6)
        | (np.int64(buf[i + 3]) & 0x3F)
    )
    if cp >= table.shape[0]:
        return np.uint8(OTHER), i + 4
    return table[cp], i + 4


@njit
def _cat(buf, i, end, table):
    """Category of the code point at ``i``, or -1 at the end of the text."""
    if i >= end:
        return -1
    e, _ = _step(buf, i, end, table)
    return np.int64(e & CAT_MASK)


@njit
def _contraction(buf, k, end, table):
    """End of ``(?i:'s|'t|'re|'ve|'m|'ll|'d)`` at ``k``, or ``k`` if it does not match."""
    if k + 1 >= end or buf[k] != _APOS:
        return k
    e1, k1 = _step(buf, k + 1, end, table)
    f = e1 >> 4
    if f == _F_S or f == _F_T or f == _F_M or f == _F_D:
        return k1
    if (f == _F_R or f == _F_V or f == _F_L) and k1 < end:
        e2, k2 = _step(buf, k1, end, table)
        f2 = e2 >> 4
        if (f2 == _F_E and f != _F_L) or (f2 == _F_L and f == _F_L):
            return k2
    return k


@njit
def _contraction_ascii(buf, k, end):
    """End of case-sensitive ``'(?:[sdmt]|ll|ve|re)`` at ``k`` (gpt2), or ``k``."""
    if k + 1 >= end or buf[k] != _APOS:
        return k
    c = buf[k + 1]
    if c == 0x73 or c == 0x64 or c == 0x6D or c == 0x74:  # s d m t
        return k + 2
    if k + 2 < end:
        c2 = buf[k + 2]
        if (c == 0x6C and c2 == 0x6C) or ((c == 0x76 or c == 0x72) and c2 == 0x65):  # ll ve re
            return k + 3
    return k


@njit
def _run(buf, k, end, table, c1, c2, c3):
    """End of the maximal run of categories c1/c2/c3 starting at ``k``."""
    while k < end:
        e, k2 = _step(buf, k, end, table)
        c = e & CAT_MASK
        if c != c1 and c != c2 and c != c3:
            break
        k = k2
    return k


@njit
def _newlines(buf, k, end, slash):
    """End of ``[\\r\\n]*`` (``[\\r\\n/]*`` with ``slash``) at ``k``."""
    while k < end:
        b = buf[k]
        if b == _CR or b == _LF or (slash and b == _SLASH):
            k += 1
        else:
            break
    return k


@njit
def _spaces(buf, i, end, table):
    """Scan the white-space run at ``i``: (its end, end of its last \\r/\\n or -1,
    start of its last character)."""
    k = i
    last_nl = -1
    last = i
    while k < end:
        e, k2 = _step(buf, k, end, table)
        c = e & CAT_MASK
        if c == CRLF:
            last_nl = k2
        elif c != SPACE:
            break
        last = k
        k = k2
    return k, last_nl, last


@njit
def _digits(buf, i, end, table, out, n, group, from_right):
    """Emit the pieces of the digit run at ``i``: every digit (group 0), groups of
    ``group`` from the left, or from the right. Returns (run end, new n)."""
    k = i
    count = 0
    while k < end:
        e, k2 = _step(buf, k, end, table)
        if e & CAT_MASK != NUMBER:
            break
        count += 1
        k = k2
    if group == 0:
        n += 1
        out[n] = k
        return k, n
    lim = group
    if from_right and count % group != 0:
        lim = count % group
    p = i
    g = 0
    while p < k:
        _, p = _step(buf, p, end, table)
        g += 1
        if g == lim or p == k:
            n += 1
            out[n] = p
            g = 0
            lim = group
    return k, n


# ---------------------------------------------------------------- o200k


@njit
def _o200k_letters(buf, p, end, table):
    """The two letter alternatives of o200k at ``p`` (after the optional prefix):
    (end of ``U*L+``, or -1; end of ``U+L*``, or -1), U = [Lu Lt Lm Lo M], L = [Ll Lm Lo M].

    ``U*`` runs greedily over [Lu Lt Lm Lo M]; if an Ll follows, ``L+`` takes the run
    of [Ll Lm Lo M] after it. Otherwise ``U*`` backtracks to its last Lm/Lo/M, which
    ``L+`` then matches alone (the character after it is Lu/Lt or ends the run)."""
    k = p
    last_both = -1
    while k < end:
        e, k2 = _step(buf, k, end, table)
        c = e & CAT_MASK
        if c == UPPER:
            pass
        elif c == LETTER or c == MARK:
            last_both = k2
        else:
            break
        k = k2
    if k < end:
        e, k2 = _step(buf, k, end, table)
        if e & CAT_MASK == LOWER:
            return _run(buf, k2, end, table, LOWER, LETTER, MARK), k
    return last_both, (k if k > p else -1)


@njit
def _o200k_piece(buf, i, end, table):
    """End of the o200k match at ``i`` (the character at ``i`` is not a digit)."""
    e, j = _step(buf, i, end, table)
    c = e & CAT_MASK
    # [^\r\n\p{L}\p{N}]?[U]*[L]+(?i:'s|...)?  then  [^\r\n\p{L}\p{N}]?[U]+[L]*(...)?
    if c == UPPER or c == LOWER or c == LETTER:
        m1, m2 = _o200k_letters(buf, i, end, table)
        return _contraction(buf, m1 if m1 >= 0 else m2, end, table)
    if c == MARK:
        # As a prefix first; if that fails, the mark alone is the [L]+ of the
        # first alternative (U* backtracks to it), before the second is tried.
        m1, m2 = _o200k_letters(buf, j, end, table)
        return _contraction(buf, m1 if m1 >= 0 else j, end, table)
    if c != CRLF:  # OTHER or SPACE as the optional prefix
        nc = _cat(buf, j, end, table)
        if nc == UPPER or nc == LOWER or nc == LETTER or nc == MARK:
            m1, m2 = _o200k_letters(buf, j, end, table)
            return _contraction(buf, m1 if m1 >= 0 else m2, end, table)
        # ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
        if c == OTHER:
            return _newlines(buf, _run(buf, j, end, table, OTHER, MARK, OTHER), end, True)
        if buf[i] == _SP and (nc == OTHER or nc == MARK):
            return _newlines(buf, _run(buf, j, end, table, OTHER, MARK, OTHER), end, True)
    # \s*[\r\n]+ | \s+(?!\S) | \s+
    w, last_nl, last = _spaces(buf, i, end, table)
    if last_nl >= 0:
        return last_nl
    if w == end or last == i:
        return w
    return last


@njit
def _scan_o200k(buf, start, end, table, out, from_right):
    n = 0
    out[0] = start
    i = start
    while i < end:
        e, j = _step(buf, i, end, table)
        if e & CAT_MASK == NUMBER:
            i, n = _digits(buf, i, end, table, out, n, 3, from_right)
            continue
        i = _o200k_piece(buf, i, end, table)
        n += 1
        out[n] = i
    return n


# ---------------------------------------------------------------- cl100k, gpt2


@njit
def _cl100k_piece(buf, i, end, table):
    """End of the cl100k match at ``i`` (not a digit)."""
    e, j = _step(buf, i, end, table)
    c = e & CAT_MASK
    # '(?i:[sdmt]|ll|ve|re)
    k = _contraction(buf, i, end, table)
    if k > i:
        return k
    # [^\r\n\p{L}\p{N}]?+\p{L}++
    if c == UPPER or c == LOWER or c == LETTER:
        return _run(buf, j, end, table, UPPER, LOWER, LETTER)
    nc = _cat(buf, j, end, table)
    if c != CRLF and (nc == UPPER or nc == LOWER or nc == LETTER):
        return _run(buf, j, end, table, UPPER, LOWER, LETTER)
    # ' ?[^\s\p{L}\p{N}]++[\r\n]*+'
    if c == OTHER or c == MARK:
        return _newlines(buf, _run(buf, j, end, table, OTHER, MARK, OTHER), end, False)
    if buf[i] == _SP and (nc == OTHER or nc == MARK):
        return _newlines(buf, _run(buf, j, end, table, OTHER, MARK, OTHER), end, False)
    # \s++$ | \s*[\r\n] | \s+(?!\S) | \s
    w, last_nl, last = _spaces(buf, i, end, table)
    if w == end:
        return w
    if last_nl >= 0:
        return last_nl
    if last > i:
        return last
    return j


@njit
def _scan_cl100k(buf, start, end, table, out):
    n = 0
    out[0] = start
    i = start
    while i < end:
        e, j = _step(buf, i, end, table)
        if e & CAT_MASK == NUMBER:
            i, n = _digits(buf, i, end, table, out, n, 3, False)
            continue
        i = _cl100k_piece(buf, i, end, table)
        n += 1
        out[n] = i
    return n


@njit
def _gpt2_piece(buf, i, end, table):
    """End of the gpt2 (r50k) match at ``i``."""
    e, j = _step(buf, i, end, table)
    c = e & CAT_MASK
    # '(?:[sdmt]|ll|ve|re)
    k = _contraction_ascii(buf, i, end)
    if k > i:
        return k
    p = i
    if buf[i] == _SP and j < end:  # the optional space of ' ?\p{L}++' etc.
        nc = _cat(buf, j, end, table)
        if nc != SPACE and nc != CRLF:
            p = j
            c = nc
    if c == UPPER or c == LOWER or c == LETTER:
        return _run(buf, p, end, table, UPPER, LOWER, LETTER)
    if c == NUMBER:
        return _run(buf, p, end, table, NUMBER, NUMBER, NUMBER)
    if c == OTHER or c == MARK:
        return _run(buf, p, end, table, OTHER, MARK, OTHER)
    # \s++$ | \s+(?!\S) | \s
    w, last_nl, last = _spaces(buf, i, end, table)
    if w == end:
        return w
    if last > i:
        return last
    return j


@njit
def _scan_gpt2(buf, start, end, table, out):
    n = 0
    out[0] = start
    i = start
    while i < end:
        i = _gpt2_piece(buf, i, end, table)
        n += 1
        out[n] = i
    return n


# ---------------------------------------------------------------- entry points


@njit
def scan_range(kind, buf, start, end, table, out):
    """Pretoken bounds of ``buf[start:end]`` into ``out`` (absolute offsets); returns n."""
    if kind == KIND_O200K:
        return _scan_o200k(buf, start, end, table, out, False)
    if kind == KIND_O200K_RDIGITS:
        return _scan_o200k(buf, start, end, table, out, True)
    if kind == KIND_CL100K:
        return _scan_cl100k(buf, start, end, table, out)
    if kind == KIND_GPT2:
        return _scan_gpt2(buf, start, end, table, out)
    return -1


@njit
def scan_into(kind, buf, table, out):
    """Pretoken bounds of all of ``buf`` into ``out``; returns the number of pretokens."""
    return scan_range(kind, buf, 0, buf.shape[0], table, out)


@njit
def _char_offsets(buf, bounds):
    """Byte offsets -> code-point offsets (bounds ascending, on character starts)."""
    res = np.empty_like(bounds)
    chars = 0
    k = 0
    for t in range(bounds.shape[0]):
        b = bounds[t]
        while k < b:
            if (buf[k] & 0xC0) != 0x80:
                chars += 1
            k += 1
        res[t] = chars
    return res


# ---------------------------------------------------------------- Python side


@functools.lru_cache(maxsize=1)
def _table() -> np.ndarray:
    return load_table()


def _as_bytes_array(buf) -> np.ndarray:
    if isinstance(buf, np.ndarray):
        if buf.dtype != np.uint8 or buf.ndim != 1:
            raise InputError(f"expected UTF-8 bytes or a 1-D uint8 array, got {buf.dtype} {buf.shape}")
        return np.ascontiguousarray(buf)
    if isinstance(buf, str):
        raise InputError("bounds() takes UTF-8 bytes; encode the str first (or use pieces())")
    return np.frombuffer(buf, dtype=np.uint8)


class Scanner:
    """A pretokenizer: a native Numba scanner for the named patterns, ``regex`` otherwise.

    >>> get_scanner("gpt2").pieces("Hello world's 123")
    ['Hello', ' world', "'s", ' 123']
    """

    def __init__(self, pattern: str):
        self.name, self.pattern = resolve(pattern)
        self.kind = KINDS.get(self.name, KIND_REGEX) if self.name else KIND_REGEX
        self.is_native = self.kind != KIND_REGEX
        self.table = _table()
        self._re = regex.compile(self.pattern)

    def __repr__(self) -> str:
        what = self.name or repr(self.pattern)
        return f"Scanner({what}, native={self.is_native})"

    def bounds(self, buf) -> np.ndarray:
        arr = _as_bytes_array(buf)
        if not self.is_native:
            return self._regex_bounds(arr)
        out = np.empty(arr.shape[0] + 1, dtype=np.int64)
        n = scan_into(self.kind, arr, self.table, out)
        return out[: n + 1].copy()

    def pieces(self, text: str) -> list[str]:
        if not self.is_native:
            return self._re.findall(text)
        data = text.encode("utf-8")
        b = self.bounds(data)
        if len(data) != len(text):
            b = _char_offsets(np.frombuffer(data, dtype=np.uint8), b)
        b = b.tolist()
        return [text[s:e] for s, e in zip(b[:-1], b[1:])]

    def _regex_bounds(self, arr: np.ndarray) -> np.ndarray:
        text = arr.tobytes().decode("utf-8")
        out = [0]
        pos = 0
        for piece in self._re.findall(text):
            pos += len(piece.encode("utf-8"))
            out.append(pos)
        if pos != arr.shape[0]:
            raise ValueError("pattern does not tile the text")
        return np.asarray(out, dtype=np.int64)


@functools.lru_cache(maxsize=None)
def get_scanner(pattern: str) -> Scanner:
    """The (cached) scanner for a pattern name or pattern string."""
    return Scanner(pattern)
