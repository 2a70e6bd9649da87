"""Named pretokenizer patterns.

Each name has a hand-written Numba scanner (``dwstok.scanner``); any other pattern
string falls back to the ``regex`` module.

>>> resolve("o200k")[0]
'o200k'
>>> resolve(PATTERNS["cl100k"])[0]
'cl100k'
"""

from __future__ import annotations

_CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
_UPPER = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"
_LOWER = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"


def _o200k(digits: str) -> str:
    return "|".join(
        [
            rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+{_CONTRACTIONS}",
            rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*{_CONTRACTIONS}",
            digits,
            r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
            r"\s*[\r\n]+",
            r"\s+(?!\S)",
            r"\s+",
        ]
    )


# GPT-4o's pattern, exactly as tiktoken 0.14 spells it.
O200K = _o200k(r"\p{N}{1,3}")
# DWSLM 32.3: digit runs split from the right (`1234567` -> `1|234|567`).
O200K_RDIGITS = _o200k(r"\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))")
CL100K = (
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
    r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s"
)
GPT2 = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"

PATTERNS: dict[str, str] = {
    "o200k": O200K,
    "o200k-rdigits": O200K_RDIGITS,
    "cl100k": CL100K,
    "gpt2": GPT2,
}


def resolve(pattern: str) -> tuple[str | None, str]:
    """Return ``(name, pattern_string)`` for a pattern name or a pattern string.

    ``name`` is None when the string is not one of the named patterns.
    """
    if pattern in PATTERNS:
        return pattern, PATTERNS[pattern]
    for name, pat in PATTERNS.items():
        if pat == pattern:
            return name, pat
    return None, pattern
