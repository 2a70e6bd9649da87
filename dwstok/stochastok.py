"""StochasTok (Sims et al., 2025): random splitting of tokens at load time.

A language model trained on canonical BPE ids never sees that ``" strawberry"`` is made of
``" straw"`` + ``"berry"``. StochasTok shows it: while batches are loaded, each token is,
with probability ``p``, replaced by a pair ``(a, b)`` of vocabulary tokens whose bytes
concatenate to it (chosen uniformly among all such pairs), and this is repeated for a
number of iterations so that pieces can split again. The bytes never change, so decoding
a split sequence gives exactly the original text.

The split table is built once from a tokenizer's vocabulary, as flat CSR arrays; the kernel
draws from its own splitmix64 stream started at an explicit seed, so the same
``(ids, seed)`` always gives the same output and no global RNG state is touched.

>>> vocab = {i: bytes([i]) for i in range(256)}
>>> vocab.update({256: b"ab", 257: b"bc", 258: b"abc"})
>>> table = SplitTable.from_vocab(vocab)
>>> table.splits(258)
[(97, 257), (256, 99)]
>>> out = stochastok([258, 258], table, p=1.0, seed=0)
>>> b"".join(vocab[i] for i in out.tolist())
b'abcabc'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

import numpy as np

from ._jit import njit

__all__ = ["SplitTable", "StochasTok", "stochastok"]


class SplitTable(NamedTuple):
    """Every way to write a token as two tokens, in flat arrays.

    The splits of token ``t`` are ``(left[k], right[k])`` for
    ``k in range(start[t], start[t + 1])``, ordered by cut position.
    """

    start: np.ndarray  # int64[n_vocab + 1]
    left: np.ndarray  # int32[n_splits]
    right: np.ndarray  # int32[n_splits]

    @classmethod
    def from_vocab(
        cls, vocab: Mapping[int, bytes], *, exclude: Iterable[int] = ()
    ) -> SplitTable:
        """Build the table from ``id -> bytes``; ids in ``exclude`` never split nor appear.

        Specials must be excluded: their "bytes" are their names, and ``<bos>`` must never
        turn into ``<b`` + ``os>``.
        """
        excluded = set(int(i) for i in exclude)
        by_bytes: dict[bytes, int] = {}
        for i, b in vocab.items():
            if i not in excluded:
                # if two ids share bytes (not the case in a BPE vocab), keep the lowest
                by_bytes.setdefault(bytes(b), int(i))
        n_vocab = max(vocab) + 1 if vocab else 0
        counts = np.zeros(n_vocab, dtype=np.int64)
        left: list[int] = []
        right: list[int] = []
        # Built once per tokenizer (~0.1 s for 32k tokens), so a plain loop is fine here.
        for t in range(n_vocab):
            b = vocab.get(t)
            if b is None or t in excluded or len(b) < 2:
                continue
            for cut in range(1, len(b)):
                a_id = by_bytes.get(b[:cut])
                if a_id is None:
                    continue
                b_id = by_bytes.get(b[cut:])
                if b_id is None:
                    continue
                left.append(a_id)
                right.append(b_id)
                counts[t] += 1
        start = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(counts, out=start[1:])
        return cls(start, np.asarray(left, dtype=np.int32), np.asarray(right, dtype=np.int32))

    @classmethod
    def from_tokenizer(cls, tok) -> SplitTable:
        """Build the table of a :class:`dwstok.Tokenizer` (specials excluded)."""
        return cls.from_vocab(tok.vocab, exclude=tok.special_tokens.values())

    @property
    def n_vocab(self) -> int:
        return len(self.start) - 1

    def splits(self, token: int) -> list[tuple[int, int]]:
        """The ``(left, right)`` pairs of ``token`` (for inspection and tests)."""
        a, b = int(self.start[token]), int(self.start[token + 1])
        return list(zip(self.left[a:b].tolist(), self.right[a:b].tolist()))


@njit
def _splitmix64(state):
    # One step of splitmix64 (Steele et al.): returns (new_state, 64 random bits).
    state = state + np.uint64(0x9E3779B97F4A7C15)
    z = state
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return state, z


@njit
def _stochastok_kernel(ids, start, left, right, p, iterations, seed):
    state = np.uint64(seed)
    # 53 random bits -> a double in [0, 1); compare against p.
    scale = 1.0 / 9007199254740992.0
    n_vocab = start.shape[0] - 1
    cur = np.empty(ids.shape[0], dtype=np.int64)
    for i in range(ids.shape[0]):
        cur[i] = ids[i]
    n = ids.shape[0]
    for _ in range(iterations):
        nxt = np.empty(2 * n, dtype=np.int64)
        m = 0
        for i in range(n):
            t = cur[i]
            state, r = _splitmix64(state)
            if t < n_vocab and t >= 0:
                lo = start[t]
                k = start[t + 1] - lo
            else:
                k = 0
            if k > 0 and (r >> np.uint64(11)) * scale < p:
                state, r2 = _splitmix64(state)
                j = lo + np.int64(r2 % np.uint64(k))
                nxt[m] = left[j]
                nxt[m + 1] = right[j]
                m += 2
            else:
                nxt[m] = t
                m += 1
        cur = nxt[:m]
        n = m
    return cur


def stochastok(
    ids, table: SplitTable, *, p: float, seed: int, iterations: int = 1, dtype=None
) -> np.ndarray:
    """Split each token of ``ids`` with probability ``p``, ``iterations`` times over.

    Returns a new array (of ``dtype``, by default that of ``ids``, or int64 for a list);
    ``p=0`` returns the ids unchanged. Ids without a split (bytes, specials, ids outside
    the table) pass through. The output length is at most ``len(ids) * 2**iterations``.

    >>> table = SplitTable.from_vocab({0: b"a", 1: b"b", 2: b"ab"})
    >>> stochastok([2, 0], table, p=1.0, seed=1).tolist()
    [0, 1, 0]
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p!r}")
    if iterations < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations!r}")
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"ids must be one-dimensional, got shape {arr.shape}")
    out_dtype = np.dtype(dtype) if dtype is not None else (
        arr.dtype if arr.dtype.kind in "iu" else np.dtype(np.int64)
    )
    if arr.size == 0 or p == 0.0 or iterations == 0:
        return arr.astype(out_dtype, copy=True)
    seed_u = int(seed) & 0xFFFFFFFFFFFFFFFF
    out = _stochastok_kernel(
        arr.astype(np.int64, copy=False), table.start, table.left, table.right,
        float(p), int(iterations), np.uint64(seed_u),
    )
    return out.astype(out_dtype)


@njit
def _stochastok_rows_kernel(rows, start, left, right, p, iterations, seeds, out):
    # Each row is expanded with its own seed, then cut (or, if nothing split, kept) to
    # out.shape[1] tokens; rows are independent, so the result does not depend on how
    # windows are grouped into batches.
    width = out.shape[1]
    for r in range(rows.shape[0]):
        ex = _stochastok_kernel(rows[r], start, left, right, p, iterations, seeds[r])
        for j in range(width):
            out[r, j] = ex[j]


class StochasTok:
    """StochasTok settings bound to a split table, for a data loader.

    >>> st = StochasTok(SplitTable.from_vocab({0: b"a", 1: b"b", 2: b"ab"}), p=1.0)
    >>> st([2, 2], seed=0).tolist()
    [0, 1, 0, 1]
    """

    def __init__(self, table: SplitTable, *, p: float, iterations: int = 1):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p must be in [0, 1], got {p!r}")
        if iterations < 0:
            raise ValueError(f"iterations must be >= 0, got {iterations!r}")
        self.table, self.p, self.iterations = table, float(p), int(iterations)

    @classmethod
    def from_tokenizer(cls, tok, *, p: float, iterations: int = 1) -> StochasTok:
        return cls(SplitTable.from_tokenizer(tok), p=p, iterations=iterations)

    def __call__(self, ids, *, seed: int) -> np.ndarray:
        return stochastok(ids, self.table, p=self.p, iterations=self.iterations, seed=seed)

    def rows(self, rows: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """Expand each row of a 2-D array with its own seed; keep the first ``width`` ids.

        Expansion only lengthens a row, so every output row is full; the tail of the
        expanded row (tokens pushed past the width) is dropped.
        """
        rows = np.asarray(rows)
        if rows.ndim != 2 or len(seeds) != rows.shape[0]:
            raise ValueError("rows must be 2-D with one seed per row")
        out = np.empty(rows.shape, dtype=rows.dtype)
        if self.p == 0.0 or self.iterations == 0 or rows.size == 0:
            out[...] = rows
            return out
        _stochastok_rows_kernel(
            rows.astype(np.int64, copy=False), self.table.start, self.table.left,
            self.table.right, self.p, self.iterations,
            np.asarray(seeds, dtype=np.uint64), out,
        )
        return out
