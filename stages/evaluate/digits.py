"""Digits: how numbers split, whether digit tokens follow place value, and how many
two- and three-digit groups are single tokens.

A digit token (ASCII digits only) is *aligned* when each of its ends is an end of its
digit run or lies a multiple of three digits before the run's end: ``1|234|567`` is
aligned, ``123|456|7`` is not.

>>> data = np.frombuffer(b"1234567 2026", np.uint8)   # 123|456|7| |2|026
>>> aligned_share(data, np.array([0, 3, 6, 7, 8, 9, 12]), np.array([1, 1, 1, 0, 1, 1], bool))
(5, 2)
"""

from __future__ import annotations

import numpy as np

EXAMPLES = ("1234567", "$1,000,000", "2000年", "2026")


def aligned_share(data: np.ndarray, starts: np.ndarray, is_digit_token: np.ndarray, doc_offsets=None) -> tuple[int, int]:
    """``(digit tokens, aligned ones)``; token k spans ``data[starts[k]:starts[k+1]]``
    (``starts`` has one more entry than there are tokens). A run never goes on across
    ``doc_offsets`` (documents lie back to back in ``data``)."""
    # Digit runs from the digits' positions alone (cheap next to a pass over every byte).
    pos = np.flatnonzero((data >= 48) & (data <= 57))
    if pos.size == 0:
        return 0, 0
    brk = np.diff(pos) != 1
    if doc_offsets is not None:
        brk |= np.isin(pos[1:], np.asarray(doc_offsets)[1:-1])
    cut = np.flatnonzero(brk) + 1
    run_starts = pos[np.r_[0, cut]]
    run_ends = pos[np.r_[cut - 1, pos.size - 1]] + 1
    s = starts[:-1][is_digit_token]
    e = starts[1:][is_digit_token]
    k = np.searchsorted(run_starts, s, side="right") - 1
    rs, re_ = run_starts[k], run_ends[k]
    ok = ((s == rs) | ((re_ - s) % 3 == 0)) & ((e == re_) | ((re_ - e) % 3 == 0))
    return int(s.size), int(ok.sum())


def _single(pieces: list[bytes], text: str) -> bool:
    real = [p for p in pieces if p.strip()]
    return len(real) == 1 and real[0].strip() == text.encode()


def digits_section(corpus, models, references) -> dict:
    rows = {}
    two = [f"{i:02d}" for i in range(100)]
    three = [f"{i:03d}" for i in range(1000)]
    for s in [*models, *references]:
        row = {
            "examples": {x: [p.decode("utf-8", "backslashreplace") for p in s.pieces(x)] for x in EXAMPLES},
            "two_digit_tokens": sum(_single(s.pieces(x), x) for x in two),
            "three_digit_tokens": sum(_single(s.pieces(x), x) for x in three),
        }
        if s.kind == "model" and s.ids is not None:
            lens = np.array([len(b) for b in s.tokens], np.int64)
            digit = np.array([bool(b) and b.isdigit() and b.isascii() for b in s.tokens], bool)
            starts = np.concatenate([[0], np.cumsum(lens[s.ids])])
            n_digit, n_ok = aligned_share(corpus.data, starts, digit[s.ids], corpus.offsets)
            row["digit_tokens"] = n_digit
            row["aligned"] = n_ok
            row["aligned_share"] = n_ok / n_digit if n_digit else None
        rows[s.name] = row
    return {"examples": list(EXAMPLES), "tokenizers": rows}
