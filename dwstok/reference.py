"""BPE from its definition, in plain Python: the spec the kernels implement.

Slow (a quadratic merge loop per pretoken) and obviously right; for spot checks that
must not depend on the kernels, such as the check after every export, which then needs
no compiled kernel, and as the oracle the kernels' tests compare to.

- ``merge_order`` (``merges`` models): repeatedly apply the lowest-ranked listed merge
  to the leftmost adjacent pair that matches it (HF ``ignore_merges: false``);
- ``tiktoken_ranks`` (``ranks`` models): tiktoken's ``_byte_pair_merge``: a piece that is
  a token is emitted whole; otherwise repeatedly merge the leftmost adjacent pair whose
  concatenation has the lowest rank.

>>> merge_order(b"aaab", {(b"a", b"a"): 0, (b"aa", b"a"): 1, (b"aaa", b"b"): 2})
[b'aaab']
>>> from dwstok import Tokenizer
>>> tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"a", b"a"), (b"aa", b"a")])
>>> encode(tok, "aaaa aa")
[256, 256, 32, 256]
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
        merge = lambda piece: merge_order(piece, rank)  # noqa: E731
    else:
        merge = lambda piece: tiktoken_ranks(piece, ids)  # noqa: E731
    out: list[int] = []
    for piece in regex.findall(tok.pattern, text):
        out += [ids[p] for p in merge(piece.encode("utf-8"))]
    return out


def merge_order(piece: bytes, merges: dict[tuple[bytes, bytes], int]) -> list[bytes]:
    """The parts of ``piece`` after its merges (``merges``: pair -> rank)."""
    return _merge(piece, lambda a, b: merges.get((a, b)))


def tiktoken_ranks(piece: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    """The parts of ``piece`` under tiktoken's rule (``ranks``: token bytes -> rank)."""
    return [piece] if piece in ranks else _merge(piece, lambda a, b: ranks.get(a + b))


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
