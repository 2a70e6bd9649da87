"""The merge learner, BPE training's kernel: weighted unique pieces in, merges out.

Pieces come in Arrow's binary layout: piece ``i`` is ``data[offsets[i]:offsets[i+1]]``,
seen ``weights[i]`` times (any non-negative int64: a count, or a count scaled by a
language weight). Pair counts are built once, then updated locally at each merge:

- every byte of every piece is a slot in one table, linked to its neighbours in the
  piece; a merge rewrites the left slot of each site and unlinks the right one, so
  its cost is the number of sites, however long the pieces (a piece of 8 KB that
  takes part in thousands of merges is never rescanned);
- every pair keeps the slots where it starts. All of a pair's occurrences appear in
  one step (the first count, or the merge that made its newer token), so that list
  is one segment of a pool, written once; entries that went stale are recognised
  by their tokens and skipped, and the pool is compacted instead of grown when full;
- a max-heap holds one entry per pair. Only pairs that contain the newest token can
  gain count, and they are new, so every other pair's entry is an upper bound of its
  true count: a popped entry whose count is out of date is pushed back with the
  current count, and the first up-to-date entry popped is the true maximum.

Tie rule: the highest count wins; among equal counts the pair whose
``(bytes(left), bytes(right))`` is lexicographically greatest. Ties are broken by
comparing the tokens' bytes, so the order never depends on ids or hash order.
Within a piece a merge replaces left to right without overlaps (``aaaa`` -> ``aa aa``).

>>> r = learn_merges(np.frombuffer(b"aaabdaaabac", np.uint8), np.array([0, 11]),
...                  np.array([1]), 3)
>>> r.merges
[(b'a', b'a'), (b'aa', b'a'), (b'aaa', b'b')]
>>> r.counts.tolist(), r.stopped_early
([4, 2, 2], False)
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple, Sequence

import numpy as np

from ._jit import njit
from .errors import ConfigError, InputError

_EMPTY = np.int64(-1)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


class TrainResult(NamedTuple):
    merges: list[tuple[bytes, bytes]]
    """Merges in rank order (forced ones first)."""
    counts: np.ndarray
    """Winning weighted count of each merge (0 for forced merges)."""
    stopped_early: bool
    """True when fewer than ``n_merges`` merges were learned: no pair was left."""


# ---------------------------------------------------------------------------- kernels


@njit
def _grow(a, size):
    out = np.empty(max(size, 2 * a.shape[0]), a.dtype)
    out[: a.shape[0]] = a
    return out


@njit
def _slot(keys, mask, key):
    """Slot of ``key`` in the open-addressing table, or the empty slot where it goes."""
    # Fibonacci hashing: the top bits of the product depend on every bit of the key.
    h = np.int64((np.uint64(key) * _GOLDEN) >> np.uint64(32)) & mask
    while keys[h] != key and keys[h] != _EMPTY:
        h = (h + 1) & mask
    return h


@njit
def _cmp_tokens(t1, t2, tstart, tlen, tbytes):
    """Compare the bytes of two tokens: -1, 0 or 1."""
    if t1 == t2:
        return 0
    s1 = tstart[t1]
    s2 = tstart[t2]
    n1 = tlen[t1]
    n2 = tlen[t2]
    for i in range(min(n1, n2)):
        x = tbytes[s1 + i]
        y = tbytes[s2 + i]
        if x != y:
            return -1 if x < y else 1
    if n1 == n2:
        return 0
    return -1 if n1 < n2 else 1


@njit
def _above(c1, p1, c2, p2, pl, pr, tstart, tlen, tbytes):
    """True when heap entry (count c1, pair p1) outranks (c2, p2)."""
    if c1 != c2:
        return c1 > c2
    r = _cmp_tokens(pl[p1], pl[p2], tstart, tlen, tbytes)
    if r != 0:
        return r > 0
    return _cmp_tokens(pr[p1], pr[p2], tstart, tlen, tbytes) > 0


@njit
def _sift_up(hc, hp, i, pl, pr, tstart, tlen, tbytes):
    c = hc[i]
    p = hp[i]
    while i > 0:
        parent = (i - 1) >> 1
        if not _above(c, p, hc[parent], hp[parent], pl, pr, tstart, tlen, tbytes):
            break
        hc[i] = hc[parent]
        hp[i] = hp[parent]
        i = parent
    hc[i] = c
    hp[i] = p


@njit
def _sift_down(hc, hp, n, pl, pr, tstart, tlen, tbytes):
    i = 0
    c = hc[0]
    p = hp[0]
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and _above(
            hc[child + 1], hp[child + 1], hc[child], hp[child], pl, pr, tstart, tlen, tbytes
        ):
            child += 1
        if not _above(hc[child], hp[child], c, p, pl, pr, tstart, tlen, tbytes):
            break
        hc[i] = hc[child]
        hp[i] = hp[child]
        i = child
    hc[i] = c
    hp[i] = p


# Fields of a slot's row: its token (-1 once merged away), the next and previous live
# slots of its piece (-1 at the ends), the pair that starts at it (-1 at a piece end),
# and its piece (whose weight is looked up, not copied into every slot: 20 bytes a
# slot instead of 24).
_TOK, _NXT, _PRV, _PID, _PIECE = range(5)


@njit
def _weight(S, p, weights):
    return weights[S[p, _PIECE]]


@njit
def _compact(occ, seg_start, seg_len, pc, pl, pr, S, n_pairs):
    """Drop the segments of spent pairs and stale entries; return the pool's new end.

    Segments lie in pair order, so they can slide down in place.
    """
    used = 0
    for q in range(n_pairs):
        start = seg_start[q]
        n = seg_len[q]
        seg_start[q] = used
        seg_len[q] = 0
        if pc[q] <= 0:
            continue
        a = pl[q]
        b = pr[q]
        for e in range(start, start + n):
            p = occ[e]
            nx = S[p, _NXT]
            if S[p, _TOK] == a and nx != -1 and S[nx, _TOK] == b:
                occ[used] = p
                used += 1
                seg_len[q] += 1
    return used


@njit
def _learn_kernel(data, offsets, weights, forced_left, forced_right, n_merges, max_len, stop):
    n_pieces = offsets.shape[0] - 1
    n_forced = forced_left.shape[0]
    n_tokens_max = 256 + n_merges

    # Token bytes (for the tie rule): token t is tbytes[tstart[t]:tstart[t] + tlen[t]].
    tstart = np.empty(n_tokens_max, np.int64)
    tlen = np.empty(n_tokens_max, np.int64)
    tbytes = np.empty(4096, np.uint8)
    for t in range(256):
        tstart[t] = t
        tlen[t] = 1
        tbytes[t] = t
    tb_used = 256

    # Slots: one per byte of the pieces that can hold a pair (weight > 0, two bytes or
    # more), linked per piece. A merge writes the new token into the left slot and
    # unlinks the right one. One row per slot keeps a site within a cache line or two.
    n_pos = 0
    for w in range(n_pieces):
        if weights[w] > 0 and offsets[w + 1] - offsets[w] >= 2:
            n_pos += offsets[w + 1] - offsets[w]
    S = np.empty((n_pos, 5), np.int32)
    pos = 0
    for w in range(n_pieces):
        n = offsets[w + 1] - offsets[w]
        if weights[w] <= 0 or n < 2:
            continue
        s0 = offsets[w]
        for k in range(n):
            S[pos + k, _TOK] = data[s0 + k]
            S[pos + k, _PRV] = pos + k - 1
            S[pos + k, _NXT] = pos + k + 1
            S[pos + k, _PIECE] = w
        S[pos, _PRV] = -1
        S[pos + n - 1, _NXT] = -1
        pos += n

    # Pairs: (left, right, weighted count) and where their occurrences are. A pair's
    # adjacencies all appear in one step -- the initial count for byte pairs, else the
    # merge that made its newer token -- so its occurrence list is one segment of the
    # `occ` pool, written once and never edited: entries that went stale (the slot
    # changed since) are recognised by their tokens and skipped.
    cap = 1 << 17
    pl = np.empty(cap, np.int32)
    pr = np.empty(cap, np.int32)
    pc = np.zeros(cap, np.int64)
    seg_start = np.empty(cap, np.int64)
    seg_len = np.empty(cap, np.int64)
    n_pairs = 0
    # (left, right) -> pair, for forced merges.
    keys = np.full(1 << 18, _EMPTY, np.int64)
    vals = np.empty(1 << 18, np.int32)
    mask = np.int64((1 << 18) - 1)

    # The initial count: byte pairs through a dense 256 x 256 table, then their
    # occurrence segments by counting sort (slots ascending within each).
    byte_pair = np.full(65536, -1, np.int32)
    for p in range(n_pos):
        if S[p, _NXT] == -1:
            S[p, _PID] = -1
            continue
        x = S[p, _TOK]
        y = S[p + 1, _TOK]
        q = byte_pair[x * 256 + y]
        if q == -1:
            q = n_pairs
            n_pairs += 1
            byte_pair[x * 256 + y] = q
            pl[q] = x
            pr[q] = y
            pc[q] = 0
            seg_len[q] = 0
            key = (np.int64(x) << 32) | np.int64(y)
            s = _slot(keys, mask, key)
            keys[s] = key
            vals[s] = q
        pc[q] += _weight(S, p, weights)
        seg_len[q] += 1
        S[p, _PID] = q
    occ = np.empty(max(1024, n_pos + n_pos // 4), np.int32)
    used = 0
    for q in range(n_pairs):
        seg_start[q] = used
        used += seg_len[q]
        seg_len[q] = 0
    for p in range(n_pos):
        q = S[p, _PID]
        if q != -1:
            occ[seg_start[q] + seg_len[q]] = p
            seg_len[q] += 1

    # Heap of (count, pair): one live entry per pair with a positive count.
    hc = np.empty(max(1024, n_pairs), np.int64)
    hp = np.empty(max(1024, n_pairs), np.int32)
    hn = 0
    for q in range(n_pairs):
        hc[hn] = pc[q]
        hp[hn] = q
        hn += 1
        _sift_up(hc, hp, hn - 1, pl, pr, tstart, tlen, tbytes)

    # Per step: the pairs (t, c) and (c, t) made by the new token c, found by t, and
    # the slots where they occur (grouped into segments at the end of the step).
    left_of_c = np.empty(n_tokens_max, np.int32)
    left_step = np.full(n_tokens_max, -1, np.int64)
    right_of_c = np.empty(n_tokens_max, np.int32)
    right_step = np.full(n_tokens_max, -1, np.int64)
    new_pair = np.empty(1024, np.int32)
    new_slot = np.empty(1024, np.int32)

    out_left = np.empty(n_merges, np.int32)
    out_right = np.empty(n_merges, np.int32)
    out_count = np.zeros(n_merges, np.int64)

    for step in range(n_merges):
        if stop[0]:  # the caller was interrupted (see _interruptible)
            return out_left, out_right, out_count, step
        stop[1] = step  # merges done so far, which the waiting thread may report
        # Choose the pair.
        if step < n_forced:
            a = forced_left[step]
            b = forced_right[step]
            key = (np.int64(a) << 32) | np.int64(b)
            s = _slot(keys, mask, key)
            best = vals[s] if keys[s] == key else -1
            cnt = np.int64(0)
        else:
            best = -1
            cnt = np.int64(0)
            while hn > 0:
                top_c = hc[0]
                top_p = hp[0]
                hn -= 1
                if hn > 0:
                    hc[0] = hc[hn]
                    hp[0] = hp[hn]
                    _sift_down(hc, hp, hn, pl, pr, tstart, tlen, tbytes)
                cur = pc[top_p]
                if max_len > 0 and tlen[pl[top_p]] + tlen[pr[top_p]] > max_len:
                    # Too long, for good: a pair's tokens never change, so it is dropped.
                    continue
                if cur == top_c:
                    best = top_p
                    cnt = cur
                    break
                if cur > 0:  # the count fell since this entry was pushed: requeue
                    hc[hn] = cur
                    hp[hn] = top_p
                    hn += 1
                    _sift_up(hc, hp, hn - 1, pl, pr, tstart, tlen, tbytes)
            if best == -1:
                return out_left, out_right, out_count, step
            a = pl[best]
            b = pr[best]
        c = 256 + step
        out_left[step] = a
        out_right[step] = b
        out_count[step] = cnt
        n_new = tlen[a] + tlen[b]
        if tb_used + n_new > tbytes.shape[0]:
            tbytes = _grow(tbytes, tb_used + n_new)
        tbytes[tb_used : tb_used + tlen[a]] = tbytes[tstart[a] : tstart[a] + tlen[a]]
        tbytes[tb_used + tlen[a] : tb_used + n_new] = tbytes[tstart[b] : tstart[b] + tlen[b]]
        tstart[c] = tb_used
        tlen[c] = n_new
        tb_used += n_new
        if best == -1:
            continue  # a forced merge that never occurs

        first_new = n_pairs
        n_occ_new = 0
        for e in range(seg_start[best], seg_start[best] + seg_len[best]):
            p = occ[e]
            q = S[p, _NXT]
            if S[p, _TOK] != a or q == -1 or S[q, _TOK] != b:
                continue  # stale, or consumed by an earlier site of this merge
            if a == b:
                # A run of a's merges pairwise from its left end (aaa -> aa a), so
                # start at the run's first slot; the whole run is done at once.
                while S[p, _PRV] != -1 and S[S[p, _PRV], _TOK] == a:
                    p = S[p, _PRV]
            while True:
                q = S[p, _NXT]
                wt = _weight(S, p, weights)
                x = S[p, _PRV]
                y = S[q, _NXT]
                # Remove the pairs around the site: (x, a), (a, b), (b, y).
                if x != -1:
                    pc[S[x, _PID]] -= wt
                pc[S[p, _PID]] -= wt
                if y != -1:
                    pc[S[q, _PID]] -= wt
                # Merge.
                S[p, _TOK] = c
                S[q, _TOK] = -1
                S[p, _NXT] = y
                S[p, _PID] = -1
                if y != -1:
                    S[y, _PRV] = p
                # Add (x, c) and (c, y); both are new pairs, as c is new.
                for side in range(2):
                    if side == 0:
                        if x == -1:
                            continue
                        at = x
                        first = S[x, _TOK]
                        second = c
                    else:
                        if y == -1:
                            continue
                        at = p
                        first = c
                        second = S[y, _TOK]
                    # (c, c) is filed under left_of_c only.
                    if second == c:
                        nq = left_of_c[first] if left_step[first] == step else -1
                    else:
                        nq = right_of_c[second] if right_step[second] == step else -1
                    if nq == -1:
                        nq = n_pairs
                        n_pairs += 1
                        if nq == pl.shape[0]:
                            pl = _grow(pl, 0)
                            pr = _grow(pr, 0)
                            pc = _grow(pc, 0)
                            seg_start = _grow(seg_start, 0)
                            seg_len = _grow(seg_len, 0)
                        pl[nq] = first
                        pr[nq] = second
                        pc[nq] = 0
                        seg_len[nq] = 0
                        if second == c:
                            left_of_c[first] = nq
                            left_step[first] = step
                        else:
                            right_of_c[second] = nq
                            right_step[second] = step
                        key = (np.int64(first) << 32) | np.int64(second)
                        s = _slot(keys, mask, key)
                        keys[s] = key
                        vals[s] = nq
                        if 2 * n_pairs > keys.shape[0]:  # keep the load factor under 1/2
                            keys = np.full(2 * keys.shape[0], _EMPTY, np.int64)
                            vals = np.empty(keys.shape[0], np.int32)
                            mask = np.int64(keys.shape[0] - 1)
                            for r in range(n_pairs):
                                kk = (np.int64(pl[r]) << 32) | np.int64(pr[r])
                                ss = _slot(keys, mask, kk)
                                keys[ss] = kk
                                vals[ss] = r
                    pc[nq] += wt
                    seg_len[nq] += 1
                    S[at, _PID] = nq
                    if n_occ_new == new_pair.shape[0]:
                        new_pair = _grow(new_pair, 0)
                        new_slot = _grow(new_slot, 0)
                    new_pair[n_occ_new] = nq
                    new_slot[n_occ_new] = at
                    n_occ_new += 1
                if a != b:
                    break
                p = y
                if p == -1 or S[p, _TOK] != a or S[p, _NXT] == -1 or S[S[p, _NXT], _TOK] != a:
                    break

        # File the step's occurrences into one segment per new pair (counting sort),
        # and queue the new pairs with their final counts.
        if used + n_occ_new > occ.shape[0]:
            # The pool is the big allocation: squeeze out dead entries before growing it.
            used = _compact(occ, seg_start, seg_len, pc, pl, pr, S, first_new)
            if 4 * (used + n_occ_new) > 3 * occ.shape[0]:
                bigger = np.empty(max(used + n_occ_new, occ.shape[0] * 3 // 2), np.int32)
                bigger[:used] = occ[:used]
                occ = bigger
        for q in range(first_new, n_pairs):
            seg_start[q] = used
            used += seg_len[q]
            seg_len[q] = 0
        for i in range(n_occ_new):
            q = new_pair[i]
            occ[seg_start[q] + seg_len[q]] = new_slot[i]
            seg_len[q] += 1
        for q in range(first_new, n_pairs):
            if pc[q] > 0:
                if hn == hc.shape[0]:
                    hc = _grow(hc, 0)
                    hp = _grow(hp, 0)
                hc[hn] = pc[q]
                hp[hn] = q
                hn += 1
                _sift_up(hc, hp, hn - 1, pl, pr, tstart, tlen, tbytes)

    return out_left, out_right, out_count, n_merges


# ---------------------------------------------------------------------------- wrapper


def pieces_to_arrays(pieces: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Pack byte strings into ``(data, offsets)`` in Arrow's binary layout.

    >>> data, offsets = pieces_to_arrays([b"ab", b"c"])
    >>> data.tobytes(), offsets.tolist()
    (b'abc', [0, 2, 3])
    """
    offsets = np.zeros(len(pieces) + 1, np.int64)
    if pieces:
        np.cumsum([len(p) for p in pieces], out=offsets[1:])
    data = np.frombuffer(b"".join(pieces), np.uint8)
    return data, offsets


def _forced_ids(forced: Sequence[tuple[bytes, bytes]]) -> tuple[np.ndarray, np.ndarray]:
    """Resolve forced merges to token ids; each side must already be a token."""
    ids = {bytes([b]): b for b in range(256)}
    left = np.empty(len(forced), np.int32)
    right = np.empty(len(forced), np.int32)
    for i, pair in enumerate(forced):
        try:
            lb, rb = (bytes(x) for x in pair)
        except (TypeError, ValueError):
            raise ConfigError(f"forced merge #{i} is not a pair of byte strings: {pair!r}") from None
        for side in (lb, rb):
            if side not in ids:
                raise ConfigError(
                    f"forced merge #{i} {pair!r}: {side!r} is not a byte or an earlier forced merge"
                )
        if lb + rb in ids:
            raise ConfigError(f"forced merge #{i} {pair!r} repeats the token {lb + rb!r}")
        left[i] = ids[lb]
        right[i] = ids[rb]
        ids[lb + rb] = 256 + i
    return left, right


def learn_merges(
    data,
    offsets,
    weights,
    n_merges: int,
    *,
    forced: Sequence[tuple[bytes, bytes]] = (),
    max_token_bytes: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> TrainResult:
    """Learn up to ``n_merges`` merges (forced ones included, and ranked first).

    ``data`` (uint8) and ``offsets`` (int64, ``n + 1`` ascending entries) hold the unique
    pieces in Arrow's binary layout; ``weights`` (int64 >= 0) says how often each occurs.
    ``max_token_bytes`` caps a learned token's length (HF's ``max_token_length``): pairs
    that would make a longer token are never merged. None learns exactly as without it.
    ``on_progress(merges_done)`` is called about every second from the calling thread
    while the kernel runs (the CLI turns it into merges/s and an ETA).

    >>> learn_merges(b"aaaaaaaa", [0, 8], [1], 3, max_token_bytes=4).merges
    [(b'a', b'a'), (b'aa', b'aa')]
    """
    data = np.ascontiguousarray(np.frombuffer(data, np.uint8) if isinstance(data, bytes) else data)
    offsets = np.ascontiguousarray(offsets)
    weights = np.ascontiguousarray(weights)
    if data.dtype != np.uint8 or data.ndim != 1:
        raise InputError(f"data must be a 1-d uint8 array, got {data.dtype} with {data.ndim} dims")
    if offsets.ndim != 1 or offsets.shape[0] < 1 or not np.issubdtype(offsets.dtype, np.integer):
        raise InputError("offsets must be a 1-d integer array with at least one entry")
    offsets = offsets.astype(np.int64, copy=False)
    n_pieces = offsets.shape[0] - 1
    if weights.ndim != 1 or weights.shape[0] != n_pieces:
        raise InputError(f"weights must have one entry per piece ({n_pieces}), got {weights.shape}")
    if not np.issubdtype(weights.dtype, np.integer) and n_pieces:
        raise InputError(f"weights must be integers (fixed point), got {weights.dtype}")
    weights = weights.astype(np.int64, copy=False)
    if offsets[0] < 0 or offsets[-1] > data.shape[0] or np.any(np.diff(offsets) < 0):
        raise InputError("offsets must ascend within the data buffer")
    if n_pieces and (weights.min() < 0 or weights.max() >= 2**62):
        raise InputError("weights must be non-negative and below 2**62")
    n_merges = int(n_merges)
    if n_merges < 0:
        raise ConfigError(f"n_merges must be >= 0, got {n_merges}")
    if len(forced) > n_merges:
        raise ConfigError(f"{len(forced)} forced merges do not fit in {n_merges} merges")
    # The largest possible pair count must fit in int64.
    if n_pieces:
        bound = float(np.dot(weights.astype(np.float64), np.diff(offsets).astype(np.float64)))
        if bound >= 2.0**62:
            exact = sum(int(w) * int(n) for w, n in zip(weights.tolist(), np.diff(offsets).tolist()))
            if exact >= 2**63:
                raise InputError("weights are too large: a pair count could overflow int64")
    if n_pieces + 1 >= 2**31 or data.shape[0] >= 2**40:
        raise InputError("too many pieces for one training run (at most 2**31 - 2)")

    if max_token_bytes is not None:
        max_token_bytes = int(max_token_bytes)
        if max_token_bytes < 2:
            raise ConfigError(f"max_token_bytes must be at least 2 (a merge makes two bytes), got {max_token_bytes}")
        for a, b in forced:
            if len(a) + len(b) > max_token_bytes:
                raise ConfigError(f"forced merge {(a, b)!r} makes a token longer than max_token_bytes={max_token_bytes}")
    if n_merges > 2**31 - 257:
        raise ConfigError(f"{n_merges:,} merges do not fit: token ids must fit in 31 bits (lower vocab_size)")
    fl, fr = _forced_ids(forced)
    # Each learned merge uses up at least one pair of adjacent bytes, so no more than
    # this many can be learned: the kernel's arrays need no room for more (a vocab_size
    # of 10**11 was a MemoryError).
    lengths = np.diff(offsets)
    room = len(forced) + int(np.maximum(lengths - 1, 0)[weights > 0].sum()) if n_pieces else len(forced)
    stop = np.zeros(2, np.int64)  # [0]: set to stop the kernel; [1]: merges it has done
    left, right, count, n_done = _interruptible(
        lambda: _learn_kernel(data, offsets, weights, fl, fr, min(n_merges, room), max_token_bytes or 0, stop),
        stop,
        on_progress,
    )
    tokens = [bytes([b]) for b in range(256)]
    merges = []
    for i in range(int(n_done)):
        pair = (tokens[left[i]], tokens[right[i]])
        merges.append(pair)
        tokens.append(pair[0] + pair[1])
    return TrainResult(merges, count[:n_done].copy(), int(n_done) < n_merges)


def _interruptible(call, stop: np.ndarray, on_progress: Callable[[int], None] | None = None):
    """Run ``call`` (a long nogil kernel) in a helper thread while this thread waits.

    Python runs signal handlers in the main thread only, between bytecodes. A Ctrl-C
    that lands while the main thread is inside a kernel, or inside the compiler's ctypes
    callbacks on a first run, surfaced as a SystemError or a crash. Waiting here instead
    turns it into a plain KeyboardInterrupt; ``stop[0] = 1`` makes the kernel return at
    its next merge, so the helper thread ends too (after at most 2 s it is left to
    finish on its own: it may still be compiling).
    """
    import threading

    if threading.current_thread() is not threading.main_thread() and on_progress is None:
        return call()
    box: dict = {}

    def target() -> None:
        try:
            box["result"] = call()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = e

    t = threading.Thread(target=target, name="dwstok-learn", daemon=True)
    t.start()
    try:
        last = time.monotonic()
        while t.is_alive():
            t.join(0.1)
            if on_progress is not None and time.monotonic() - last >= 1.0:
                last = time.monotonic()
                on_progress(int(stop[1]))
    except BaseException:
        stop[0] = 1
        t.join(2.0)
        raise
    if "error" in box:
        raise box["error"]
    return box["result"]

