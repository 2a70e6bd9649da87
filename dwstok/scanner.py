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

  ``kind`` is ``Scanner.kind`` (must not be -1: check ``Scanner.is_native``) and
  ``table`` is ``Scanner.table``. The table is an argument, not a global, so that the
  compiled code stays small. Both kernels are nogil, allocate nothing and run in
  linear time (the slots of ``out`` past ``out[n]`` are theirs to work in, and hold
  nothing after); an unknown ``kind`` returns -1. Typical use::

      @njit
      def encode_many(kind, buf, starts, table, bounds):
          for d in range(starts.shape[0] - 1):
              n = scan_range(kind, buf, starts[d], starts[d + 1], table, bounds)
              # bounds[0] == starts[d], ..., bounds[n] == starts[d + 1]

>>> s = get_scanner("o200k")
>>> s.pieces("I'm 2026's best-ever scanner!\\n")
["I'm", ' ', '202', '6', "'s", ' best', '-ever', ' scanner', '!\\n']
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

from ._intrinsics import byte_masks_intrinsic, clz, code_at, code_masks_intrinsic, ctz, load8, set_code, utf8_codes
from ._intrinsics import ix as _ix
from ._jit import njit, njit_inline, njit_no_nrt, read_only
from .errors import ConfigError, InputError
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
    b = np.int64(buf[_ix(i)])
    if b < 0x80:
        return table[_ix(b)], i + 1
    if b < 0xE0:
        if i + 2 > end:
            return np.uint8(OTHER), end
        return table[_ix(((b & 0x1F) << 6) | (np.int64(buf[_ix(i + 1)]) & 0x3F))], i + 2
    if b < 0xF0:
        if i + 3 > end:
            return np.uint8(OTHER), end
        cp = ((b & 0x0F) << 12) | ((np.int64(buf[_ix(i + 1)]) & 0x3F) << 6) | (np.int64(buf[_ix(i + 2)]) & 0x3F)
        return table[_ix(cp)], i + 3
    if i + 4 > end:
        return np.uint8(OTHER), end
    cp = (
        ((b & 0x07) << 18)
        | ((np.int64(buf[_ix(i + 1)]) & 0x3F) << 12)
        | ((np.int64(buf[_ix(i + 2)]) & 0x3F) << 6)
        | (np.int64(buf[_ix(i + 3)]) & 0x3F)
    )
    if cp >= table.shape[0]:
        return np.uint8(OTHER), i + 4
    return table[_ix(cp)], i + 4


_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_HIGH = np.uint64(0x8080808080808080)
_ADD_A = np.uint64(0x1F1F1F1F1F1F1F1F)  # + 0x1F sets bit 7 of a byte from 'a' (0x61) up
_ADD_Z = np.uint64(0x0505050505050505)  # + 0x05 sets it from '{' (0x7B) up


# ---------------------------------------------------------------- windows
#
# The o200k kernels spend most of their time deciding, piece by piece, which
# alternative of the pattern applies: a branch on the class of the first character
# that text makes unpredictable, and another on where each run ends. The pieces
# follow from the classes of the characters and of their neighbours alone, so
# ``_window`` finds all pieces of up to 64 bytes at once with 64-bit masks (bit j:
# byte j), the idea of fastokens' pretokenizer. ASCII classes come from vector
# compares (``byte_masks_intrinsic``); for characters of two and three bytes, vector
# ops decode every code point at once and the class table is read once a character,
# with no branch on its length or class; the pieces come from shifts and ands, with
# no branch per piece. What the masks do not model ends the window or leaves it to
# the scalar loop: a slash right after a line break, a contraction right after
# another, four-byte or invalid UTF-8, digits beyond ASCII, a mark that does not
# follow a letter, an upper-case letter right after Lm/Lo or a mark, and the last 64
# bytes of the buffer.
#
# A multi-byte character sets the bits of all its bytes in its class's masks, so a
# run of a class is a run of bits as for ASCII. Where the pattern counts characters,
# not bytes, the masks find the character's first byte: a punctuation run of one
# character, and the last character of a white-space run.
#
# A piece start does not depend on what came before it (the pattern has no
# lookbehind), so the window is segmented as if its text began there. Only its last
# run of a class and the last three bytes may depend on bytes past the window, so a
# window keeps the starts before both, and the next window begins at the last of them.

# a-z, A-Z, 0-9, \s but \r\n, space, apostrophe, \r\n, slash, bytes of 0x80 or more
_ascii_classes = byte_masks_intrinsic(
    [[(0x61, 26)], [(0x41, 26)], [(0x30, 10)], [(0x09, 1), (0x0B, 2), (0x20, 1)], [(0x20, 1)], [(_APOS, 1)],
     [(_CR, 1), (_LF, 1)], [(_SLASH, 1)], [(0x80, 128)]]
)
# after an apostrophe: s t m d (one letter), r v (then e), e, l (twice); either case
_contraction_letters = byte_masks_intrinsic([[(0x73, 2), (0x6D, 1), (0x64, 1)], [(0x72, 1), (0x76, 1)], [(0x65, 1)], [(0x6C, 1)]], fold=True)
# UTF-8: continuation bytes, leads of two and of three bytes, and the bytes a window
# leaves to the scalar loop (the overlong leads C0 C1, leads of four bytes, F5-FF)
_utf8_classes = byte_masks_intrinsic([[(0x80, 64)], [(0xC2, 30)], [(0xE0, 16)], [(0xC0, 2), (0xF0, 16)]])
# the classes _utf8_masks writes over the code points (utf8_codes, set_code)
_code_classes = code_masks_intrinsic([UPPER, LOWER, LETTER, MARK, NUMBER, SPACE, CRLF], CAT_MASK)

_ONE = np.uint64(1)
_TWO = np.uint64(2)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_ZERO = np.uint64(0)


@njit_inline
def _utf8_masks(buf, i, w, table, out, k):
    """Class masks of the characters of two and three bytes in the ``w`` bytes at ``i``,
    with ``out[k:k + 16]`` as room to work in.

    Returns ``(w, cont, upper, lower, both, mark, space, odd)``: ``w`` cut before the
    first byte that is not part of a whole, valid character of at most three bytes;
    ``cont`` the continuation bytes; the class masks (all bytes of each character;
    ``both`` is Lm/Lo and marks, in both of o200k's letter classes; ``mark`` and ``odd``
    only their first bytes); ``odd`` the characters the window does not model (numbers,
    and \r\n, which has no longer form).
    """
    cont, l2, l3, bad = _utf8_classes(buf, i)
    valid = _ALL >> np.uint64(64 - w)
    expect = ((l2 | l3) << _ONE) | (l3 << _TWO)
    broken = ((cont ^ expect) | bad) & valid
    if broken != 0:
        w = np.int64(ctz(broken))
    # the last character must end inside the window
    if w >= 1 and ((l2 | l3) >> np.uint64(w - 1)) & _ONE:
        w -= 1
    elif w >= 2 and (l3 >> np.uint64(w - 2)) & _ONE:
        w -= 2
    if w < 8:
        return w, cont, _ZERO, _ZERO, _ZERO, _ZERO, _ZERO, _ZERO
    valid = _ALL >> np.uint64(64 - w)
    heads = (l2 | l3) & valid  # the first byte of each character
    cont &= valid
    # every byte's code point at once, then one table lookup a character, its class
    # written over its code point, then every class's mask at once
    utf8_codes(buf, i, out, k)
    leads = heads
    while leads != 0:
        j = np.int64(ctz(leads))
        leads &= leads - _ONE
        set_code(out, k, j, np.int64(table[_ix(code_at(out, k, j))]))
    upper, lower, both, mark, number, space, crlf = _code_classes(out, k)
    upper &= heads
    lower &= heads
    mark &= heads
    both = (both & heads) | mark
    space &= heads
    # each class over its character's continuation bytes
    for _ in range(2):
        upper |= (upper << _ONE) & cont
        lower |= (lower << _ONE) & cont
        both |= (both << _ONE) & cont
        space |= (space << _ONE) & cont
    return w, cont, upper, lower, both, mark, space, (number | crlf) & heads


@njit_inline
def _window(buf, i, end, table, out, n, from_right):
    """Write the pieces that start in the text at piece start ``i`` (up to 64 bytes) to
    ``out[n+1:]``; return ``(n, start of the last piece written)``, ``i`` itself when
    it wrote none.

    The pieces are the pattern's, as the scalar loop finds them (this text is too short
    for a window: one needs 64 bytes of buffer):

    >>> get_scanner("o200k").pieces("Hello world, it's 12345 ok")
    ['Hello', ' world', ',', " it's", ' ', '123', '45', ' ok']
    """
    w = min(end - i, 64)
    lo, up, dg, ws, sp, ap, nl, sl, hi = _ascii_classes(buf, i)
    # punctuation takes [\r\n/]* after it: a slash right after \r or \n is rare, left
    # to the scalar loop
    stop = sl & (nl << _ONE)
    c1 = c_rv = c_e = c_l = _ZERO
    few = hi & (_ALL >> np.uint64(64 - w))
    if few != 0 and (i + 66 > buf.shape[0] or n + 17 > out.shape[0]):
        # near the end of the buffer, or of out, _utf8_masks has no room to work in:
        # the window ends before the first longer character
        stop |= hi
        few = _ZERO
    if few == 0:
        # ASCII, most windows: _starts compiled without what longer characters need
        if ap & ((lo | up) << _ONE) != 0:
            c1, c_rv, c_e, c_l = _contraction_letters(buf, i)
        bits, last = _starts(w, stop, from_right, lo, up, dg, ws, sp, ap, nl, c1, c_rv, c_e, c_l, _ZERO, _ZERO, _ZERO, False)
    else:
        w, cont, up_u, lo_u, both, mark, ws_u, odd = _utf8_masks(buf, i, w, table, out, n + 1)
        up |= up_u
        lo |= lo_u
        # an upper-case letter right after Lm/Lo or a mark (U* may give the run back), a
        # mark after no letter (a prefix, or a piece alone), and \p{N} beyond ASCII
        # (\p{N}{1,3} counts characters)
        stop |= odd | (up & (both << _ONE)) | (mark & ~((lo | up | both) << _ONE))
        apl = ap & ((lo | up | both) << _ONE)
        if apl != 0 and w >= 8:
            c1, c_rv, c_e, c_l = _contraction_letters(buf, i)
            # a letter beyond ASCII that folds to one of them (the long s): rare, the
            # window ends before its apostrophe. Its table entry, fold letter and all,
            # is where _utf8_masks wrote it over its code point.
            far = ((apl << _ONE) | (apl << _TWO)) & hi & ~cont & (_ALL >> np.uint64(64 - w))
            while far != 0:
                j = np.int64(ctz(far))
                far &= far - _ONE
                if code_at(out, n + 1, j) >> 4 != 0:
                    stop |= apl & ((_ONE << np.uint64(j)) - _ONE)
        bits, last = _starts(w, stop, from_right, lo, up, dg, ws | ws_u, sp, ap, nl, c1, c_rv, c_e, c_l, cont, both, mark, True)
    while bits != 0:  # (none: last is 0)
        n += 1
        out[_ix(n)] = i + np.int64(ctz(bits))
        bits &= bits - _ONE
    return n, i + last


@njit_inline
def _starts(w, stop, from_right, lo, up, dg, ws, sp, ap, nl, c1, c_rv, c_e, c_l, cont, both, mark, utf8):
    """The piece starts a window keeps (bit j: byte j; 0 for none) and the last of them,
    from the classes of its bytes. ``utf8`` is a constant, so that ASCII windows compile
    without what longer characters need. Takes no array: an inlined helper given one
    takes and drops a reference to it."""
    if stop != 0:
        w = min(w, np.int64(ctz(stop)))
    if w < 8:
        return _ZERO, 0
    valid = _ALL >> np.uint64(64 - w)
    lo &= valid
    up &= valid
    dg &= valid
    ws &= valid
    sp &= valid
    ap &= valid
    nl &= valid
    both &= valid
    mark &= valid
    le = lo | up | both
    wh = ws | nl  # \s
    ot = valid & ~(le | dg | wh)  # [^\s\p{L}\p{N}], the apostrophe included
    r_le = le & ~(le << _ONE)  # where each run of a class starts
    r_dg = dg & ~(dg << _ONE)
    r_wh = wh & ~(wh << _ONE)
    r_ot = ot & ~(ot << _ONE)
    # keep starts before the last run (it may go on past the window) and before the
    # last three bytes (a contraction looks two bytes past its apostrophe)
    t = min(63 - np.int64(clz(r_le | r_dg | r_wh | r_ot)), w - 3)
    if t < 2:
        return _ZERO, 0

    # (?i:'s|'t|'re|'ve|'m|'ll|'d) right after letters: the apostrophe and its letters
    # join the word; letters after them start a piece
    ct1 = _ZERO
    ct2 = _ZERO
    apl = ap & (le << _ONE)
    if apl != 0:
        c1 &= le
        c_rv &= le
        c_e &= le
        c_l &= le
        ct1 = apl & (c1 >> _ONE)
        ct2 = apl & (((c_rv >> _ONE) & (c_e >> _TWO)) | ((c_l >> _ONE) & (c_l >> _TWO)))
    ct = ct1 | ct2
    eaten = (ct1 << _ONE) | (ct2 << _ONE) | (ct2 << _TWO)
    if (eaten << _ONE) & ct != 0:  # "it's's": the second is no contraction; rare
        return _ZERO, 0
    after_ct = ((ct1 << _TWO) | (ct2 << np.uint64(3))) & le
    if utf8 and after_ct & mark != 0:  # a mark would start a piece; rare
        return _ZERO, 0

    # \p{N}{1,3}: groups of three from the left (from the right with from_right)
    groups = r_dg
    if dg != 0:
        if from_right:
            d3 = dg & (dg >> _ONE) & (dg >> _TWO)  # bytes j..j+2 are digits
            cur = ((dg & ~(dg >> _ONE) & (valid >> _ONE)) >> _TWO) & d3  # 3 before a run's end
            while cur != 0:
                groups |= cur
                cur = (cur >> np.uint64(3)) & d3
        else:
            d3 = dg & (dg << _ONE) & (dg << _TWO)  # bytes j-2..j are digits
            cur = (r_dg << np.uint64(3)) & d3
            while cur != 0:
                groups |= cur
                cur = (cur << np.uint64(3)) & d3

    # white space: \r and \n right after punctuation end its piece ([\r\n/]*); a run
    # with \r or \n is a piece up to the last of them (\s*[\r\n]+); what is left of
    # it, or a run without, is a piece but for its last character when two or more
    # are followed by something (\s+(?!\S)); that last character, unless \r or \n, is
    # a prefix to letters after it and, if a space, joins punctuation after it
    # ( ?[^\s\p{L}\p{N}]+)
    tail = nl & (ot << _ONE)
    more = tail
    while more != 0:
        more = nl & (more << _ONE) & ~tail
        tail |= more
    later_nl = _ZERO  # white space with \r or \n after it in its run
    more = (nl >> _ONE) & wh
    while more != 0:
        later_nl |= more
        more = ((more & ws) >> _ONE) & wh & ~later_nl
    last_nl = nl & ~later_nl
    last_wh = wh & ~(wh >> _ONE)  # the last byte of each run
    # a punctuation run of one character that starts a piece and is followed by
    # letters is their prefix; after a space it joined that space instead
    lead = r_ot & ~(sp << _ONE) & ~ct
    if utf8:
        back = (last_wh & cont) >> _ONE
        last_ch = (last_wh & ~cont) | (back & ~cont) | ((back & cont) >> _ONE)  # its character
        # the run's end is where the carry from its start, through its own
        # continuation bytes, stops
        own = lead | (ot & cont)
        lone = ((own + lead) ^ own) & own & ot & ~(ot >> _ONE) & (le >> _ONE)
    else:
        last_ch = last_wh
        lone = lead & ~(ot >> _ONE) & (le >> _ONE)
    prefixed = ((last_wh & ws & (le >> _ONE)) << _ONE) | (lone << _ONE)
    starts = (
        groups
        | (r_wh & ~tail)
        | (((tail | last_nl) << _ONE) & ws)
        | (last_ch & ws & (wh << _ONE))
        | (r_ot & ~(sp << _ONE) & ~ct)
        | (r_le & ~prefixed & ~eaten)
        | (up & (lo << _ONE) & ~eaten)  # lower then upper case: [A-Z]*[a-z]+ ends
        | after_ct
    )
    bits = starts & ~_ONE & (_ALL >> np.uint64(64 - t))
    if bits == 0:
        return _ZERO, 0
    return bits, 63 - np.int64(clz(bits))


# ---------------------------------------------------------------- kernels
#
# Each pattern is one flat loop. Only ``_step`` (small, inlined by LLVM) is called:
# a call that passes arrays to a non-inlined helper costs two atomic refcount
# updates, which made a helper-per-alternative version several times slower.
# The loops run without Numba's runtime (``njit_no_nrt``): with it, the inlined
# 64-byte window took and dropped a reference to buf, table and out each time.
# Their indexes, never negative, go through ``_ix``: without it Numba adds a
# negative-index wraparound to every access (bench/results/session48-20261207.md).


@njit_no_nrt
def _scan_o200k(buf, start, end, table, out, from_right):
    n = 0
    out[0] = start
    i = start
    # A window is tried at every piece start, but where one found two pieces or
    # fewer (text of long runs: th, ta) the scalar loop is as fast, so the next
    # tries wait, longer each time, unless the text is ASCII.
    retry = start
    misses = 0
    while i < end:
        if i + 8 <= end and i + 64 <= buf.shape[0] and (i >= retry or (load8(buf, i) & _HIGH) == 0):
            n0 = n
            n, k = _window(buf, i, end, table, out, n, from_right)
            if n - n0 > 2:
                i = k
                misses = 0
                continue
            retry = k + (64 << min(misses, 4))
            misses += 1
            if k > i:
                i = k
                continue
        e, j = _step(buf, i, end, table)
        c = e & CAT_MASK
        if c == NUMBER:
            # \p{N}{1,3}, or with from_right \p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})):
            # the whole run is split at once (linear even for a million digits).
            k = j
            count = 1
            while k < end:
                e2, k2 = _step(buf, k, end, table)
                if e2 & CAT_MASK != NUMBER:
                    break
                count += 1
                k = k2
            lim = 3
            if from_right and count % 3 != 0:
                lim = count % 3
            g = 0
            while i < k:
                e2, i = _step(buf, i, end, table)
                g += 1
                if g == lim or i == k:
                    n += 1
                    out[_ix(n)] = i
                    g = 0
                    lim = 3
            continue

        # [^\r\n\p{L}\p{N}]?U*L+C?  |  [^\r\n\p{L}\p{N}]?U+L*C?
        # with U = [Lu Lt Lm Lo M], L = [Ll Lm Lo M], C the contractions.
        # U* runs greedily over U; if an Ll follows, L+ takes the L-run after it.
        # Otherwise U* backtracks to the last Lm/Lo/M of its run, which L+ matches
        # alone (what follows it is Lu/Lt or not a letter). Only if the run has none
        # does the second alternative take the whole U-run.
        m = -1
        p = -1
        mark_alone = -1
        if c == UPPER or c == LOWER or c == LETTER:
            p = i
        elif c == MARK:
            # A mark is first tried as the prefix; if that fails, it is itself the
            # L+ of the first alternative, before the second one is tried.
            p = j
            mark_alone = j
        elif c != CRLF:
            p = j  # OTHER or SPACE as the optional prefix
        if p >= 0:
            k = p
            last_both = -1
            low = -1
            if p == i:  # the letter at i is decoded already
                if c == LOWER:
                    low = j
                elif c == LETTER:
                    last_both = j
                k = j
            while low < 0 and k < end:
                e2, k2 = _step(buf, k, end, table)
                c2 = e2 & CAT_MASK
                if c2 == LOWER:
                    low = k2
                    break
                if c2 == LETTER or c2 == MARK:
                    last_both = k2
                elif c2 != UPPER:
                    break
                k = k2
            if low >= 0:
                # ASCII a-z, 8 bytes at a time: lower-case ASCII runs are most of the
                # bytes this loop walks, and a byte-by-byte loop pays a table lookup a
                # byte and a mispredicted exit a word. Bit 7 of each byte of the word
                # says a-z or not; the first that is not is found by counting trailing
                # zeros. Written out, not a helper: an inlined helper given ``buf`` took
                # and dropped a reference to it, two atomic operations a word.
                k = low
                while k + 8 <= end:
                    w = load8(buf, k)
                    x = w & _LOW7
                    other = (((x + _ADD_A) & ~(x + _ADD_Z) & ~w) & _HIGH) ^ _HIGH
                    if other != 0:
                        k += ctz(other) >> 3
                        break
                    k += 8
                else:  # no break: fewer than 8 bytes left, one at a time
                    while k < end and 0x61 <= buf[_ix(k)] <= 0x7A:
                        k += 1
                # The run goes on through Ll/Lm/Lo/M (and a-z after them). Here an ASCII
                # byte ends it, a-z having been taken: one compare instead of a lookup.
                if k < end and buf[_ix(k)] >= 0x80:
                    while k < end:
                        e2, k2 = _step(buf, k, end, table)
                        c2 = e2 & CAT_MASK
                        if c2 != LOWER and c2 != LETTER and c2 != MARK:
                            break
                        k = k2
                m = k
            elif last_both >= 0:
                m = last_both
            elif mark_alone >= 0:
                m = mark_alone
            elif k > p:
                m = k
        if m >= 0:
            # (?i:'s|'t|'re|'ve|'m|'ll|'d)?
            if m + 1 < end and buf[_ix(m)] == _APOS:
                e1, k1 = _step(buf, m + 1, end, table)
                f = e1 >> 4
                if f == _F_S or f == _F_T or f == _F_M or f == _F_D:
                    m = k1
                elif (f == _F_R or f == _F_V or f == _F_L) and k1 < end:
                    e2, k2 = _step(buf, k1, end, table)
                    f2 = e2 >> 4
                    if (f2 == _F_E and f != _F_L) or (f2 == _F_L and f == _F_L):
                        m = k2
            n += 1
            out[_ix(n)] = m
            i = m
            continue

        # ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
        punct = c == OTHER
        if not punct and buf[_ix(i)] == _SP and j < end:
            e2, k2 = _step(buf, j, end, table)
            c2 = e2 & CAT_MASK
            punct = c2 == OTHER or c2 == MARK
        if punct:
            k = j
            while k < end:
                e2, k2 = _step(buf, k, end, table)
                c2 = e2 & CAT_MASK
                if c2 != OTHER and c2 != MARK:
                    break
                k = k2
            while k < end and (buf[_ix(k)] == _CR or buf[_ix(k)] == _LF or buf[_ix(k)] == _SLASH):
                k += 1
            n += 1
            out[_ix(n)] = k
            i = k
            continue

        # \s*[\r\n]+ (ends after the run's last \r/\n) | \s+(?!\S) (all of the run
        # at the end of the text, else all but its last character) | \s+
        k = i
        last_nl = -1
        last = i
        while k < end:
            e2, k2 = _step(buf, k, end, table)
            c2 = e2 & CAT_MASK
            if c2 == CRLF:
                last_nl = k2
            elif c2 != SPACE:
                break
            last = k
            k = k2
        if last_nl >= 0:
            m = last_nl
        elif k == end or last == i:
            m = k
        else:
            m = last
        if m <= i:  # unreachable for valid input; never let a bug loop or overflow out
            m = j
        n += 1
        out[_ix(n)] = m
        i = m
    return n


@njit_no_nrt
def _scan_cl100k(buf, start, end, table, out):
    n = 0
    out[0] = start
    i = start
    while i < end:
        e, j = _step(buf, i, end, table)
        c = e & CAT_MASK
        if c == NUMBER:
            # \p{N}{1,3}+
            g = 0
            while i < end:
                e2, k2 = _step(buf, i, end, table)
                if e2 & CAT_MASK != NUMBER:
                    break
                i = k2
                g += 1
                if g == 3:
                    n += 1
                    out[_ix(n)] = i
                    g = 0
            if g > 0:
                n += 1
                out[_ix(n)] = i
            continue

        # '(?i:[sdmt]|ll|ve|re)
        m = -1
        if buf[_ix(i)] == _APOS and j < end:
            e1, k1 = _step(buf, j, end, table)
            f = e1 >> 4
            if f == _F_S or f == _F_T or f == _F_M or f == _F_D:
                m = k1
            elif (f == _F_R or f == _F_V or f == _F_L) and k1 < end:
                e2, k2 = _step(buf, k1, end, table)
                f2 = e2 >> 4
                if (f2 == _F_E and f != _F_L) or (f2 == _F_L and f == _F_L):
                    m = k2
        if m < 0:
            nc = -1
            nj = j
            if j < end:
                e2, nj = _step(buf, j, end, table)
                nc = e2 & CAT_MASK
            # [^\r\n\p{L}\p{N}]?+\p{L}++  (p: where the rest of the letter run starts)
            p = -1
            if c == UPPER or c == LOWER or c == LETTER:
                p = j
            elif c != CRLF and (nc == UPPER or nc == LOWER or nc == LETTER):
                p = nj
            if p >= 0:
                k = p
                while k < end:
                    e2, k2 = _step(buf, k, end, table)
                    c2 = e2 & CAT_MASK
                    if c2 != UPPER and c2 != LOWER and c2 != LETTER:
                        break
                    k = k2
                m = k
            elif c == OTHER or c == MARK or (buf[_ix(i)] == _SP and (nc == OTHER or nc == MARK)):
                # ' ?[^\s\p{L}\p{N}]++[\r\n]*+'
                k = nj if (nc == OTHER or nc == MARK) else j
                while k < end:
                    e2, k2 = _step(buf, k, end, table)
                    c2 = e2 & CAT_MASK
                    if c2 != OTHER and c2 != MARK:
                        break
                    k = k2
                while k < end and (buf[_ix(k)] == _CR or buf[_ix(k)] == _LF):
                    k += 1
                m = k
            else:
                # \s++$ | \s*[\r\n] | \s+(?!\S) | \s
                k = i
                last_nl = -1
                last = i
                while k < end:
                    e2, k2 = _step(buf, k, end, table)
                    c2 = e2 & CAT_MASK
                    if c2 == CRLF:
                        last_nl = k2
                    elif c2 != SPACE:
                        break
                    last = k
                    k = k2
                if k == end:
                    m = k
                elif last_nl >= 0:
                    m = last_nl
                elif last > i:
                    m = last
                else:
                    m = j
        if m <= i:  # unreachable for valid input; never let a bug loop or overflow out
            m = j
        n += 1
        out[_ix(n)] = m
        i = m
    return n


@njit_no_nrt
def _scan_gpt2(buf, start, end, table, out):
    n = 0
    out[0] = start
    i = start
    while i < end:
        e, j = _step(buf, i, end, table)
        c = e & CAT_MASK
        m = -1
        # '(?:[sdmt]|ll|ve|re)  (case-sensitive in r50k)
        if buf[_ix(i)] == _APOS and j < end:
            b1 = buf[_ix(j)]
            if b1 == 0x73 or b1 == 0x64 or b1 == 0x6D or b1 == 0x74:  # s d m t
                m = j + 1
            elif j + 1 < end:
                b2 = buf[_ix(j + 1)]
                if (b1 == 0x6C and b2 == 0x6C) or ((b1 == 0x76 or b1 == 0x72) and b2 == 0x65):
                    m = j + 2
        if m < 0:
            # ' ?\p{L}++ | ?\p{N}++ | ?[^\s\p{L}\p{N}]++': the optional space
            # joins whatever non-space follows it.
            p = j  # where the rest of the run starts
            if buf[_ix(i)] == _SP and j < end:
                e2, k2 = _step(buf, j, end, table)
                c2 = e2 & CAT_MASK
                if c2 != SPACE and c2 != CRLF:
                    p = k2
                    c = c2
            if c == UPPER or c == LOWER or c == LETTER:
                c1, c2, c3 = UPPER, LOWER, LETTER
            elif c == NUMBER:
                c1, c2, c3 = NUMBER, NUMBER, NUMBER
            elif c == OTHER or c == MARK:
                c1, c2, c3 = OTHER, MARK, MARK
            else:
                c1 = -1
                c2 = -1
                c3 = -1
            if c1 >= 0:
                k = p
                while k < end:
                    e2, k2 = _step(buf, k, end, table)
                    cc = e2 & CAT_MASK
                    if cc != c1 and cc != c2 and cc != c3:
                        break
                    k = k2
                m = k
            else:
                # \s++$ | \s+(?!\S) | \s
                k = i
                last = i
                while k < end:
                    e2, k2 = _step(buf, k, end, table)
                    cc = e2 & CAT_MASK
                    if cc != SPACE and cc != CRLF:
                        break
                    last = k
                    k = k2
                if k == end:
                    m = k
                elif last > i:
                    m = last
                else:
                    m = j
        if m <= i:  # unreachable for valid input; never let a bug loop or overflow out
            m = j
        n += 1
        out[_ix(n)] = m
        i = m
    return n


# ---------------------------------------------------------------- entry points


@njit
def scan_range(kind, buf, start, end, table, out):
    """Pretoken bounds of ``buf[start:end]`` into ``out`` (absolute offsets); returns n."""
    if kind == KIND_O200K or kind == KIND_O200K_RDIGITS:  # one call: one compile, not one per flag
        return _scan_o200k(buf, start, end, table, out, kind == KIND_O200K_RDIGITS)
    if kind == KIND_CL100K:
        return _scan_cl100k(buf, start, end, table, out)
    if kind == KIND_GPT2:
        return _scan_gpt2(buf, start, end, table, out)
    return -1


@njit
def _segments_o200k(kind, buf, seg, table, out, per_seg):
    """:func:`scan_segments` for o200k and o200k-rdigits (DWSLMTok's): only their scanner
    compiles, not all three as through ``scan_range``."""
    n = 0
    out[0] = seg[0] if seg.shape[0] else 0
    for i in range(seg.shape[0] - 1):
        per_seg[i] = 0
        if seg[i + 1] > seg[i]:
            per_seg[i] = _scan_o200k(buf, seg[i], seg[i + 1], table, out[n:], kind == KIND_O200K_RDIGITS)
            n += per_seg[i]
    return n


@njit
def _segments_any(kind, buf, seg, table, out, per_seg):
    """:func:`scan_segments` for the other scanners."""
    n = 0
    out[0] = seg[0] if seg.shape[0] else 0
    for i in range(seg.shape[0] - 1):
        per_seg[i] = 0
        if seg[i + 1] > seg[i]:
            per_seg[i] = scan_range(kind, buf, seg[i], seg[i + 1], table, out[n:])
            n += per_seg[i]
    return n


def scan_segments(kind: int, buf, seg, table, out, per_seg) -> int:
    """Pretoken bounds of every segment ``buf[seg[i]:seg[i+1]]`` into ``out`` (absolute
    offsets, ``out[0] = seg[0]``, segments back to back); ``per_seg[i]`` = the pieces of
    segment i. Returns the number of pieces.

    >>> s = get_scanner("o200k")
    >>> buf = np.frombuffer(b"Hi there1234", np.uint8)
    >>> out, per = np.empty(13, np.int64), np.empty(2, np.int64)
    >>> n = scan_segments(s.kind, buf, np.array([0, 8, 12]), s.table, out, per)
    >>> out[: n + 1].tolist(), per.tolist()
    ([0, 2, 8, 11, 12], [2, 2])
    """
    fn = _segments_o200k if kind in (KIND_O200K, KIND_O200K_RDIGITS) else _segments_any
    # read-only, whoever made it: the encoder scans read-only text, one compile for both
    return fn(kind, read_only(buf), seg, table, out, per_seg)


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
        if not self.is_native:
            _ = self._re  # a pattern regex cannot compile fails here, not at the first text

    @functools.cached_property
    def _re(self):
        """The pattern in ``regex``, the scanner of a pattern with no native one; compiled
        when first needed, so that a process encoding with a native one never imports
        ``regex``."""
        import regex

        return regex.compile(self.pattern)

    def __repr__(self) -> str:
        what = self.name or repr(self.pattern)
        return f"Scanner({what}, native={self.is_native})"

    def bounds(self, buf) -> np.ndarray:
        arr = _as_bytes_array(buf)
        if not self.is_native:
            return self._regex_bounds(arr)
        out = np.empty(arr.shape[0] + 1, dtype=np.int64)
        n = scan_segments(self.kind, arr, np.array([0, arr.shape[0]], np.int64), self.table, out, np.empty(1, np.int64))
        return out[: n + 1].copy()

    def pieces(self, text: str) -> list[str]:
        if not self.is_native:
            return [m.group() for m in self._re.finditer(text)]  # findall, whatever the groups
        data = text.encode("utf-8")
        b = self.bounds(data)
        if len(data) != len(text):
            b = _char_offsets(np.frombuffer(data, dtype=np.uint8), b)
        b = b.tolist()
        return [text[s:e] for s, e in zip(b[:-1], b[1:])]

    def _regex_bounds(self, arr: np.ndarray) -> np.ndarray:
        try:
            text = arr.tobytes().decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"text is not valid UTF-8 at byte {e.start}") from None
        ends = []
        pos = 0
        for m in self._re.finditer(text):
            if m.start() != pos:
                break
            if m.end() > pos:  # empty matches delimit nothing
                ends.append(m.end())
                pos = m.end()
        if pos != len(text):
            raise ConfigError(
                f"pretokenizer pattern {self.pattern!r} does not match the text at character "
                f"{pos} ({text[pos : pos + 10]!r}); a pattern must match every character"
            )
        # code-point offsets -> byte offsets, vectorized over the whole text
        cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        nbytes = 1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000)
        at = np.concatenate([[0], np.cumsum(nbytes)])
        return at[np.asarray([0] + ends, dtype=np.int64)]


@functools.lru_cache(maxsize=None)
def get_scanner(pattern: str) -> Scanner:
    """The (cached) scanner for a pattern name or pattern string."""
    return Scanner(pattern)
