"""A readable brute-force BPE trainer: the oracle for ``dwstok.merge_learner``.

It recounts every pair of every piece before each merge, so it is slow and obviously
right. Tokens are plain ``bytes``; pieces are lists of tokens.

>>> brute_bpe([b"aaabdaaabac"], [1], 3).merges
[(b'a', b'a'), (b'aa', b'a'), (b'aaa', b'b')]
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple, Sequence


class BruteResult(NamedTuple):
    merges: list[tuple[bytes, bytes]]
    counts: list[int]
    stopped_early: bool


def merge_word(word: list[bytes], left: bytes, right: bytes) -> list[bytes]:
    """Replace (left, right) in ``word`` left to right, without overlaps (aaaa -> aa aa)."""
    out: list[bytes] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == left and word[i + 1] == right:
            out.append(left + right)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def count_pairs(words: list[list[bytes]], weights: Sequence[int]) -> Counter:
    counts: Counter = Counter()
    for word, weight in zip(words, weights):
        for pair in zip(word, word[1:]):
            counts[pair] += weight
    return counts


def brute_bpe(
    pieces: Sequence[bytes],
    weights: Sequence[int],
    n_merges: int,
    forced: Sequence[tuple[bytes, bytes]] = (),
) -> BruteResult:
    """Learn ``n_merges`` merges (forced ones first) from weighted pieces."""
    words = [[bytes([b]) for b in piece] for piece in pieces]
    weights = [int(w) for w in weights]
    merges: list[tuple[bytes, bytes]] = []
    counts: list[int] = []
    for left, right in forced:
        words = [merge_word(w, left, right) for w in words]
        merges.append((left, right))
        counts.append(0)
    while len(merges) < n_merges:
        pair_counts = count_pairs(words, weights)
        candidates = [(c, pair) for pair, c in pair_counts.items() if c > 0]
        if not candidates:
            return BruteResult(merges, counts, True)
        # The tie rule: highest count, then the lexicographically greatest
        # (bytes(left), bytes(right)) -- exactly Python's tuple order.
        count, (left, right) = max(candidates)
        words = [merge_word(w, left, right) for w in words]
        merges.append((left, right))
        counts.append(count)
    return BruteResult(merges, counts, False)
