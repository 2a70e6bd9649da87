"""Han: how many Han characters are single tokens, and what share of the Han character
occurrences in the eval corpus come out as single tokens.

Han is ``\\p{Han}`` (as the build's Han counts). An occurrence counts as a single token
when the encoder emitted exactly that character's token.

>>> han_tokens([b"\\xe4\\xb8\\x80", b"a", "\\u4e00\\u4e00".encode()])
[0]
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from dwstok.training import han_char_counts, han_pattern


def _is_han_char(text: str) -> bool:
    return len(text) == 1 and han_pattern().fullmatch(text) is not None


def han_tokens(vocab: Sequence[bytes]) -> list[int]:
    """Indices of the tokens that are exactly one Han character."""
    out = []
    for i, b in enumerate(vocab):
        if 3 <= len(b) <= 4:
            try:
                s = b.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if _is_han_char(s):
                out.append(i)
    return out


def corpus_han(corpus) -> dict[str, int]:
    """Han character -> occurrences in the eval corpus."""
    if corpus.data.size == 0:
        return {}
    return han_char_counts(corpus.data, np.array([0, corpus.data.size]), np.array([1]))


def han_section(corpus, models, references) -> dict:
    """Per tokenizer: the Han characters that are single tokens, the share of the corpus's
    Han occurrences that are of those characters (``share``: the coverage the build's
    forcing targets), and for models the share emitted as that one token (``emitted``:
    lower, as a Han character also goes into tokens of several characters)."""
    occ = corpus_han(corpus)
    total = sum(occ.values())
    rows = {}
    for s in [*models, *references]:
        vocab = s.tokens if s.kind == "model" else s.vocab_bytes()
        single = han_tokens(vocab)
        chars = {vocab[i].decode("utf-8") for i in single}
        covered = sum(n for c, n in occ.items() if c in chars)
        row = {"single_token_chars": len(chars), "share": (covered / total) if total else None}
        if s.kind == "model":
            if s.ids is not None:
                emitted = int(s.token_counts()[single].sum()) if single else 0
                row["emitted"] = (emitted / total) if total else None
            forced = (s.tok.metadata or {}).get("han") or {}
            row["forced_chars"] = forced.get("n_chars", 0)
            row["forced_merges"] = forced.get("n_merges", 0)
        rows[s.name] = row
    return {"distinct_chars": len(occ), "occurrences": total, "tokenizers": rows}
