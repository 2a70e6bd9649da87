"""StochasTok (Sims et al., 2025): random splitting of tokens at load time.

A language model trained on canonical BPE ids never sees that ``" strawberry"`` is made of
``" straw"`` + ``"berry"``. StochasTok shows it: while batches are loaded, each token is,
with probability ``p``, replaced by a pair ``(a, b)`` of vocabulary tokens whose bytes
concatenate to it (chosen uniformly among all such pairs), and this is repeated for a
number of iterations so that pieces can split again. The bytes never change, so decoding
a split sequence gives exactly the original text.

The split table is built once from a tokenizer's vocabulary, as flat CSR arrays.
Randomness is per token: the pieces of the token at position ``g`` come from a splitmix64
stream started at a hash of ``(seed, g)``. So the same ``(ids, seed)`` always gives the
same output, no global RNG state is touched, and any stretch of a long stream can be
split on its own (``position=``) with the same result as splitting the whole stream:
this is what lets :class:`dwstok.ShardReader` cut an epoch's windows from the split
stream without splitting everything before them. Splitting each token independently,
``iterations`` times over its pieces, has the same distribution as the paper's passes
over the whole sequence.

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

from ._jit import ix, njit, njit_inline

__all__ = ["SplitTable", "StochasTok", "stochastok"]

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


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

    @property
    def n_splits(self) -> int:
        """How many ``(left, right)`` pairs the table holds (DWSLM's 32.3 model: 61,525)."""
        return len(self.left)

    def splits(self, token: int) -> list[tuple[int, int]]:
        """The ``(left, right)`` pairs of ``token`` (for inspection and tests)."""
        a, b = int(self.start[token]), int(self.start[token + 1])
        return list(zip(self.left[a:b].tolist(), self.right[a:b].tolist()))

    def max_pieces(self) -> int:
        """The most pieces any token can end up in (at most its byte length)."""
        pieces = np.ones(self.n_vocab, dtype=np.int64)
        owner = np.repeat(np.arange(self.n_vocab), np.diff(self.start))
        if owner.size == 0:
            return 1
        # Fixed point of pieces[t] = max(1, max over splits of pieces[a] + pieces[b]);
        # a split's halves are shorter than the token, so it settles within its byte length.
        while True:
            best = np.ones(self.n_vocab, dtype=np.int64)
            np.maximum.at(best, owner, pieces[self.left] + pieces[self.right])
            if np.array_equal(best, pieces):
                return int(pieces.max())
            pieces = best


def threshold(p: float) -> np.uint64:
    """``p`` as a 53-bit threshold: a draw ``r`` splits when ``r >> 11 < threshold(p)``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p!r}")
    return np.uint64(int(p * (1 << 53)))


def leaf_bound(table: SplitTable, iterations: int) -> int:
    """Room for the pieces of one token: ``2 ** iterations``, capped by the table."""
    if iterations <= 16:
        return 1 << iterations
    return min(1 << min(iterations, 62), table.max_pieces())


def epoch_key(seed: int, epoch: int) -> int:
    """The split seed of one training epoch: distinct per ``(seed, epoch)``, 64 bits.

    >>> epoch_key(0, 0) != epoch_key(0, 1) != epoch_key(1, 0)
    True
    """
    z = (int(seed) * 0xD1B54A32D192ED03 + int(epoch) * _GOLDEN + 0x5EED) & _M64
    return _mix_py(_mix_py(z) ^ (int(epoch) & _M64))


def _mix_py(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


@njit_inline
def _mix(z):
    # The splitmix64 finalizer (Steele et al.): 64 well-mixed bits from any 64-bit input.
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit_inline
def _pick(r, k):
    # Lemire's multiply-shift: a uniform index below k from 32 random bits, no division.
    return np.int64(((r & np.uint64(0xFFFFFFFF)) * np.uint64(k)) >> np.uint64(32))


@njit_inline
def first_draw(key, g):
    """The first draw of the token at stream position ``g``: the start of its stream."""
    return _mix(key + np.uint64(g) * np.uint64(0x9E3779B97F4A7C15))


@njit_inline
def splits_once(t, r, n_vocab, start, thr):
    """Where ``t``'s split is in the table when one pass splits it with draw ``r``, else
    -1. Hot loops for one iteration (the paper's setting) call this and not :func:`expand`.

    Measured on the 32.3 shards: the first draw made for every token costs less than a
    mispredicted branch on "has splits" would (50 -> 80 M tokens/s). And a hot loop that
    passes arrays to an inlined helper with a loop inside (:func:`expand`) ran 20 times
    slower once it also wrote an output array (3.6 against 88 M tokens/s): the loops keep
    that call for iterations > 1 only.
    """
    if t < 0 or t >= n_vocab:
        return -1
    lo = start[ix(t)]
    k = start[ix(t + 1)] - lo
    if k > 0 and (r >> np.uint64(11)) < thr:
        return lo + _pick(r, k)
    return -1


@njit
def expand(t, g, key, start, left, right, thr, iterations, stack_t, stack_m, leaves):
    """Write the pieces of token ``t`` at stream position ``g`` to ``leaves``; return
    how many. Depth first, left piece first, so the pieces come out in text order.

    The draws come from the token's own splitmix64 stream, started at a hash of
    ``(key, g)``: a token's split does not depend on any other token. A draw splits a
    piece when its top 53 bits are below ``thr``; its low 32 bits pick the split.
    """
    golden = np.uint64(0x9E3779B97F4A7C15)
    r = first_draw(key, g)
    n_vocab = start.shape[0] - 1
    if t < 0 or t >= n_vocab:
        leaves[0] = t
        return 1
    state = r
    n = 0
    stack_t[0] = t
    stack_m[0] = iterations
    sp = 1
    first = True
    while sp > 0:
        sp -= 1
        x = stack_t[sp]
        m = stack_m[sp]
        lo = start[x]
        k = start[x + 1] - lo
        split = False
        while k > 0 and m > 0:
            m -= 1
            if first:
                first = False
            else:
                state += golden
                r = _mix(state)
            if (r >> np.uint64(11)) < thr:
                j = lo + _pick(r, k)
                stack_t[sp] = right[j]
                stack_m[sp] = m
                stack_t[sp + 1] = left[j]
                stack_m[sp + 1] = m
                sp += 2
                split = True
                break
        if not split:
            leaves[n] = x
            n += 1
    return n


@njit
def _split_kernel(ids, position, key, start, left, right, thr, iterations, n_leaves):
    n = ids.shape[0]
    n_vocab = start.shape[0] - 1
    if iterations == 1:  # the common case, without the general loop's call (see splits_once)
        out = np.empty(2 * n, ids.dtype)
        m = 0
        for i in range(n):  # unsigned indices (ix): 40-58 -> 55-92 M tokens/s
            t = np.int64(ids[ix(i)])
            j = splits_once(t, first_draw(key, position + i), n_vocab, start, thr)
            if j >= 0:
                out[ix(m)] = left[ix(j)]
                out[ix(m + 1)] = right[ix(j)]
                m += 2
            else:
                out[ix(m)] = t
                m += 1
        return out[:m]
    stack_t = np.empty(iterations + 2, np.int64)
    stack_m = np.empty(iterations + 2, np.int64)
    leaves = np.empty(n_leaves, np.int64)
    out = np.empty(n + (n >> 2) + n_leaves, ids.dtype)
    m = 0
    for i in range(n):
        if m + n_leaves > out.shape[0]:
            grown = np.empty(2 * out.shape[0], ids.dtype)
            grown[:m] = out[:m]
            out = grown
        c = expand(np.int64(ids[i]), position + i, key, start, left, right, thr, iterations,
                   stack_t, stack_m, leaves)
        for q in range(c):
            out[m + q] = leaves[q]
        m += c
    return out[:m]


@njit
def _count_kernel(ids, position, key, start, left, right, thr, iterations, n_leaves):
    # The extra tokens splitting adds to ``ids`` (their split length minus len(ids)).
    n_vocab = start.shape[0] - 1
    extra = 0
    if iterations == 1:
        for i in range(ids.shape[0]):
            extra += splits_once(np.int64(ids[i]), first_draw(key, position + i), n_vocab,
                                 start, thr) >= 0
        return extra
    stack_t = np.empty(iterations + 2, np.int64)
    stack_m = np.empty(iterations + 2, np.int64)
    leaves = np.empty(n_leaves, np.int64)
    for i in range(ids.shape[0]):
        extra += expand(np.int64(ids[i]), position + i, key, start, left, right, thr,
                        iterations, stack_t, stack_m, leaves) - 1
    return extra


NO_SPLITS = (np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32), np.uint64(0), 1, 2)
"""Kernel arguments that split nothing (an empty table: every id passes through)."""


def _check(p: float, iterations: int) -> None:
    threshold(p)
    if iterations < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations!r}")


def stochastok(
    ids, table: SplitTable, *, p: float, seed: int, iterations: int = 1, position: int = 0,
    dtype=None,
) -> np.ndarray:
    """Split each token of ``ids`` with probability ``p``, ``iterations`` times over.

    Returns a new array (of ``dtype``, by default that of ``ids``, or int64 for a list);
    ``p=0`` returns the ids unchanged. Ids without a split (bytes, specials, ids outside
    the table) pass through. The output length is at most ``len(ids) * 2**iterations``.
    ``ids[i]`` is split as the token at ``position + i`` of a longer stream, so splitting
    a stream piece by piece gives the same ids as splitting it whole.

    >>> table = SplitTable.from_vocab({0: b"a", 1: b"b", 2: b"ab"})
    >>> stochastok([2, 0], table, p=1.0, seed=1).tolist()
    [0, 1, 0]
    >>> ids = np.array([2, 0, 2, 2, 1] * 20)
    >>> whole = stochastok(ids, table, p=0.5, seed=7)
    >>> parts = [stochastok(ids[:33], table, p=0.5, seed=7),
    ...          stochastok(ids[33:], table, p=0.5, seed=7, position=33)]
    >>> bool((np.concatenate(parts) == whole).all())
    True
    """
    _check(p, iterations)
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"ids must be one-dimensional, got shape {arr.shape}")
    out_dtype = np.dtype(dtype) if dtype is not None else (
        arr.dtype if arr.dtype.kind in "iu" else np.dtype(np.int64)
    )
    if arr.size == 0 or p == 0.0 or iterations == 0:
        return arr.astype(out_dtype, copy=True)
    out = _split_kernel(
        arr if arr.dtype.kind in "iu" else arr.astype(np.int64), np.int64(position),
        np.uint64(int(seed) & _M64), table.start, table.left, table.right, threshold(p),
        int(iterations), leaf_bound(table, iterations),
    )
    return out.astype(out_dtype, copy=False)


class StochasTok:
    """StochasTok settings bound to a split table, for a data loader.

    >>> st = StochasTok(SplitTable.from_vocab({0: b"a", 1: b"b", 2: b"ab"}), p=1.0)
    >>> st([2, 2], seed=0).tolist()
    [0, 1, 0, 1]
    """

    def __init__(self, table: SplitTable, *, p: float, iterations: int = 1):
        _check(p, iterations)
        self.table, self.p, self.iterations = table, float(p), int(iterations)
        self.n_leaves = leaf_bound(table, self.iterations)

    @classmethod
    def from_tokenizer(cls, tok, *, p: float, iterations: int = 1) -> StochasTok:
        return cls(SplitTable.from_tokenizer(tok), p=p, iterations=iterations)

    @property
    def active(self) -> bool:
        """Whether this can split anything (``p > 0``, an iteration, a split in the table)."""
        return self.p > 0.0 and self.iterations > 0 and self.table.n_splits > 0

    def kernel_args(self) -> tuple:
        """``(start, left, right, threshold, iterations, n_leaves)`` for :func:`expand`."""
        if not self.active:
            return NO_SPLITS
        t = self.table
        return (t.start, t.left, t.right, threshold(self.p), self.iterations, self.n_leaves)

    def __call__(self, ids, *, seed: int, position: int = 0) -> np.ndarray:
        return stochastok(ids, self.table, p=self.p, iterations=self.iterations, seed=seed,
                          position=position)

    def extra(self, ids, *, seed: int, position: int = 0) -> int:
        """How many tokens splitting adds to ``ids`` (``len(self(ids)) - len(ids)``),
        without writing them.

        >>> st = StochasTok(SplitTable.from_vocab({0: b"a", 1: b"b", 2: b"ab"}), p=1.0)
        >>> st.extra([2, 0, 2], seed=0)
        2
        """
        arr = np.asarray(ids)
        if arr.size == 0 or not self.active:
            return 0
        if arr.dtype.kind not in "iu":
            arr = arr.astype(np.int64)
        return int(_count_kernel(arr, np.int64(position), np.uint64(int(seed) & _M64),
                                 *self.kernel_args()))

    def __repr__(self) -> str:
        return f"StochasTok(p={self.p}, iterations={self.iterations}, splits={self.table.n_splits:,})"
