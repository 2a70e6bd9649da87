"""BPE from its definition, in plain Python: the spec the kernels implement.

Slow (a quadratic merge loop per pretoken) and obviously right; for spot checks that
must not depend on the kernels, such as the check after every export, which then needs
no compiled kernel.

- ``merges`` models: repeatedly apply the lowest-ranked merge to the leftmost adjacent
  pair it matches;
- ``ranks`` models (tiktoken): a pretoken that is a token is emitted whole; otherwise
  repeatedly merge the leftmost adjacent pair whose concatenation has the lowest rank.

>>> from dwstok import Tokenizer
>>> tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"a", b"a"), (b"aa", b"a")])
>>> encode(tok, "aaaa aa")
[257, 97, 32, 256]
"""

from __future__ import annotations

import regex


def encode(tok, text: str) -> list[int]:
    """Ids of ``text`` (no specials parsed), as the kernels must give them."""
    tokens = tok._tokens
    specials = set(tok.special_tokens.values())
    ids = {t: i for i, t in enumerate(tokens) if t and i not in specials}
    if tok.merge_rule == "merges":
        rank = {(tokens[a], tokens[b]): r for r, (a, b, _) in enumerate(tok._merge_ids.tolist())}
        merge = lambda piece: _merge(piece, lambda x, y: rank.get((x, y)))  # noqa: E731
    else:
        merge = lambda piece: [piece] if piece in ids else _merge(piece, lambda x, y: ids.get(x + y))  # noqa: E731
    out: list[int] = []
    for piece in regex.findall(tok.pattern, text):
        out += [ids[p] for p in merge(piece.encode("utf-8"))]
    return out


def _merge(piece: bytes, rank_of) -> list[bytes]:
    parts = [bytes([b]) for b in piece]
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            r = rank_of(parts[i], parts[i + 1])
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            return parts
        i = best[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts
