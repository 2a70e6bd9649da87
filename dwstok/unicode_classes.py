"""The code-point class table the Numba scanners classify characters with.

One ``uint8`` per code point (``0x110000`` entries). The low nibble is the category
the four named patterns care about; the high nibble says which contraction letter
(``s t r e v m l d``) the code point matches case-insensitively, so ``'S`` and the
long s ``'ſ`` (U+017F) count as ``'s`` exactly when the ``regex`` module says so.

The table is *derived from the ``regex`` module itself* (``\\p{Lu}``, ``\\p{N}``,
``\\s``, ``(?i:s)`` …), so the scanners and ``regex.findall`` classify alike. A compact
copy ships in ``dwstok/data/`` (written by ``scripts/gen_unicode_table.py``) so that
importing the scanner costs a zlib inflate, not a pass over every code point; a test
checks that the shipped copy still equals what the installed ``regex`` says.

>>> t = load_table()
>>> int(t[ord("A")] & CAT_MASK) == UPPER, int(t[ord("ſ")] >> 4) == FOLD["s"]
(True, True)
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

N_CODEPOINTS = 0x110000
DATA_PATH = Path(__file__).with_name("data") / "unicode_classes.zlib"

# Categories (low nibble). They partition the code points: the generator checks
# that regex's classes are disjoint and that \p{L} is exactly Lu|Ll|Lt|Lm|Lo.
OTHER = 0  # punctuation, symbols, controls, unassigned, private use, surrogates
UPPER = 1  # \p{Lu} \p{Lt}: in o200k's upper class only
LOWER = 2  # \p{Ll}: in o200k's lower class only
LETTER = 3  # \p{Lm} \p{Lo}: in both of o200k's letter classes
MARK = 4  # \p{M}: in both o200k letter classes, but not \p{L} (so punctuation elsewhere)
NUMBER = 5  # \p{N}
SPACE = 6  # \s other than \r and \n
CRLF = 7  # \r and \n
CAT_MASK = 0x0F

# Contraction letters (high nibble), in the order the kernels test them.
FOLD = {"s": 1, "t": 2, "r": 3, "e": 4, "v": 5, "m": 6, "l": 7, "d": 8}


def build_table() -> np.ndarray:
    """Classify every code point with the ``regex`` module (about 0.3 s)."""
    import regex

    cps = np.arange(N_CODEPOINTS, dtype=np.int64)
    ok = (cps < 0xD800) | (cps >= 0xE000)  # surrogates never occur in valid UTF-8
    valid = cps[ok]
    text = "".join(map(chr, valid.tolist()))

    def member(cls: str) -> np.ndarray:
        hit = np.zeros(len(valid), dtype=bool)
        for m in regex.finditer(f"(?:{cls})+", text):
            hit[m.start() : m.end()] = True
        out = np.zeros(N_CODEPOINTS, dtype=bool)
        out[ok] = hit
        return out

    classes = {
        UPPER: member(r"[\p{Lu}\p{Lt}]"),
        LOWER: member(r"\p{Ll}"),
        LETTER: member(r"[\p{Lm}\p{Lo}]"),
        MARK: member(r"\p{M}"),
        NUMBER: member(r"\p{N}"),
        SPACE: member(r"[^\S\r\n]"),
        CRLF: member(r"[\r\n]"),
    }
    table = np.zeros(N_CODEPOINTS, dtype=np.uint8)
    seen = np.zeros(N_CODEPOINTS, dtype=bool)
    for cat, hit in classes.items():
        if (seen & hit).any():
            raise RuntimeError(f"regex classes overlap at category {cat}")
        seen |= hit
        table[hit] = cat
    letters = classes[UPPER] | classes[LOWER] | classes[LETTER]
    if not np.array_equal(letters, member(r"\p{L}")):
        raise RuntimeError(r"\p{L} is not Lu|Ll|Lt|Lm|Lo in this regex build")
    if not np.array_equal(classes[SPACE] | classes[CRLF], member(r"\s")):
        raise RuntimeError(r"\s classification is inconsistent")
    for letter, code in FOLD.items():
        hit = member(f"(?i:{letter})")
        if (table[hit] >> 4).any():
            raise RuntimeError("a code point folds to two contraction letters")
        table[hit] |= np.uint8(code << 4)
    return table


def pack(table: np.ndarray) -> bytes:
    return zlib.compress(table.tobytes(), 9)


def load_table() -> np.ndarray:
    """The shipped table, or one built from ``regex`` if the data file is missing."""
    try:
        raw = zlib.decompress(DATA_PATH.read_bytes())
    except (OSError, zlib.error):
        return build_table()
    table = np.frombuffer(raw, dtype=np.uint8)
    if table.shape != (N_CODEPOINTS,):
        return build_table()
    return table.copy()  # writable, owned, C-contiguous
