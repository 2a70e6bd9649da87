"""Where a growing text can be cut so that what comes next cannot change the ids before it.

Used by ``Tokenizer.encode_iterable``. A pretoken's extent depends on the text after it
only within the run of same-class characters it ends in (letters and marks, digits,
whitespace, other) plus a few characters: a contraction (``'ll``), an optional leading
space or punctuation, ``\\s+(?!\\S)`` giving its last space to the next word, ``\\s*[\\r\\n]+``
reaching to the last newline of a whitespace run, right-aligned digit groups reaching to
the end of the digit run, ``\\s++$`` at the end of text. So everything overlapping the
trailing run is held back, plus two more pretokens before it; with specials allowed,
also whatever a partial special name at the end could still turn into.

>>> from dwstok.scanner import get_scanner
>>> text = "Hello world, it's 1234"
>>> cut = safe_cut(text, get_scanner("o200k"), None, 0)
>>> text[:cut], text[cut:]
('Hello world,', " it's 1234")
"""

from __future__ import annotations

import functools
import re

import numpy as np

_CLASSES = (r"\s", r"[\p{L}\p{M}]", r"\p{N}", r"[^\s\p{L}\p{M}\p{N}]")


@functools.lru_cache(maxsize=1)
def _runs():
    """``(run before a position, [one run of each class])``, compiled on first use: a
    process that never streams need not import ``regex``."""
    import regex

    return (
        regex.compile("(?r)(?:" + "|".join(c + "+" for c in _CLASSES) + ")"),
        [regex.compile(c + "+") for c in _CLASSES],
    )


def run_start(text: str, end: int) -> int:
    """Start of the run of same-class characters that ends at ``end``."""
    if end <= 0:
        return 0
    m = _runs()[0].match(text, 0, end)
    return m.start() if m else end


def run_class(text: str) -> int:
    """Class index of ``text`` if it is one run of a single class, else -1."""
    for k, r in enumerate(_runs()[1]):
        if r.fullmatch(text):
            return k
    return -1


def safe_cut(text: str, scanner, special_re: re.Pattern | None, max_special: int) -> int:
    """Largest char offset c such that the ids of ``text[:c]`` are final whatever follows."""
    n = len(text)
    hold = run_start(text, n)
    seg = 0
    if special_re is not None:
        undecided = n - max_special + 1  # a special starting here or later may still grow
        if undecided <= 0:
            return 0
        hold = min(hold, run_start(text, undecided))
        for m in special_re.finditer(text):
            if m.start() >= undecided:
                break
            seg = m.end()
    if hold <= seg:
        return seg
    seg_bytes = text[seg:].encode("utf-8")
    bounds = scanner.bounds(np.frombuffer(seg_bytes, np.uint8))
    hold_b = len(text[seg:hold].encode("utf-8"))
    j = int(np.searchsorted(bounds, hold_b, side="right")) - 1  # pretoken containing hold
    j = max(j - 2, 0)
    cut_b = int(bounds[j])
    return seg + len(seg_bytes[:cut_b].decode("utf-8"))
