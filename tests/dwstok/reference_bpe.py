"""A readable pure-Python twin of the BPE kernels (the oracle their tests compare to).

Both rules, straight from their definitions, quadratic and obviously right:

- ``merge_order``: repeatedly apply the lowest-ranked listed merge to the leftmost
  adjacent pair that matches it (HF ``ignore_merges: false``);
- ``tiktoken_ranks``: tiktoken's ``_byte_pair_merge``: a piece that is a token is
  emitted whole; otherwise repeatedly merge the leftmost adjacent pair whose
  concatenation has the lowest rank.

>>> merges = {(b"a", b"a"): 0, (b"aa", b"a"): 1, (b"aaa", b"b"): 2}
>>> merge_order(b"aaab", merges)
[b'aaab']
"""

from __future__ import annotations


def merge_order(piece: bytes, merges: dict[tuple[bytes, bytes], int]) -> list[bytes]:
    parts = [bytes([b]) for b in piece]
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            r = merges.get((parts[i], parts[i + 1]))
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts


def tiktoken_ranks(piece: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    if piece in ranks:
        return [piece]
    parts = [bytes([b]) for b in piece]
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts
