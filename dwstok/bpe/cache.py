"""The piece cache: merged pieces → their ids, kept across calls (a pool in the Tokenizer),
so that a repeated word costs one lookup.

One int64 array (so a call hands it to a kernel as one argument): a head of 8 words,
then the slots, ``vals``, ``keys`` and ``front``; see ``_new_cache_packed``.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from .._intrinsics import flat as _flat
from .._intrinsics import ix as _ix
from .._intrinsics import prefetch as _prefetch
from .._intrinsics import rows as _rows
from .._jit import njit, njit_inline
from ..hashing import _avalanche, _pack8, _same_words
from .pages import fill_words, huge_page_array

CACHE_MAX = 1 << 16  # longest piece kept in the piece cache
PENDING = np.int64(0xFFFFFFFF)  # a cache slot's number of ids while they are being merged

# Most slots a cache gets; it starts afresh when half full. Big enough that a corpus
# shard's distinct pieces that are no token fit before it starts afresh (a smaller one
# merged their later repeats again; see bench/results/bpe-kernels.md).
CACHE_SLOTS = 1 << 19
# words of the front table a cache slot (a front slot per 2 slots): with one, the
# pieces of other text took over many of a text's front slots before it came back
# (bench/results/session18-utf8-windows-20261204.md)
_FRONT = 2
CACHE_MAX_CAPACITY = 8 * CACHE_SLOTS  # bytes of text the biggest cache is sized for


_CACHE_HEAD = 8  # int64 words before a packed cache's slots: 64 bytes, so slots never straddle a line
CACHE_RESETS = 4  # the word of a packed cache that counts how often it started afresh
CACHE_GROW = 5  # the word a kernel sets when the cache should grow (see _mark_growth)
GROW_SOON = 1  # its values: a sixteenth full (a quarter for the last step), time to make the next cache's memory ready
GROW_NOW = 2  # a quarter full (3/8 for the last step), or it had to start afresh
# The word that says from how many entries on a kernel may flag ``GROW_SOON`` again: the
# pool moves it on each time it has handled the flag (see _mark_growth).
CACHE_SOON_AT = 6
# Where a cache grows (``GROW_NOW``) and where ``GROW_SOON`` begins, in sixteenths of its
# slots; the step into the biggest cache has its own (see _mark_growth).
_GROW_MARKS = (4, 1)
_LAST_GROW_MARKS = (6, 4)


@njit_inline
def _packed_words(size):
    """int64 words of a packed cache of ``size`` slots: 9 a slot (see _new_cache_packed)."""
    return _CACHE_HEAD + (7 + _FRONT) * size


@njit
def _new_cache_packed(nbytes):
    """A cache of merged pieces sized for ``nbytes`` of text (it may outlive the call),
    as one int64 array, so that a call hands it to a kernel as one argument.

    A slot is 32 bytes, two to a cache line: the piece's bytes 0-7 and 8-15 packed, then
    ``(length << 32) | number of ids`` (-1: empty), then ``(start of its bytes from 16 on
    in keys << 32) | start of its ids in vals``. So a piece of up to 16 bytes is found,
    or found missing, from its slot alone. ``vals`` has room for 4 ids a slot and
    ``keys`` for 8 bytes (about what a piece of real text needs, and at most half the
    slots are used). The array: a head of 8 words (the number of
    slots; ``state``: used slots, vals, key bytes and how often it started afresh), the
    slots, ``vals`` (2 int32 a word), ``keys`` (8 bytes a word), then ``front``.

    ``front`` has a slot (4 words) per 2 slots: a piece of 2-16 bytes seen before that
    has one to three ids, direct-mapped by hash: bytes 0-7 and 8-15 packed, ``(length
    << 32) | number of ids`` (0: empty), then the ids, 21 bits each (all ones: none; see
    span._front_put). Tokens emitted whole go there too. So a piece seen before is
    settled by one slot and one compare; the lookups in ``whole``, ``longs`` and the
    slots above, each a probe of varying length, had cost mispredicted branches where
    tokens and merged pieces mix (bench/results/session17-front-20261204.md). The front
    holds its keys and ids itself, so it stays valid when the slots start afresh.
    """
    P = np.empty(_packed_words(_cache_slots(nbytes)), np.int64)
    _clear_cache(P)
    return P


@njit
def _cache_slots(nbytes):
    """Slots of a cache for ``nbytes`` of text: one per 8, a power of 2, 64 to CACHE_SLOTS."""
    size = 64
    while size < nbytes // 8 and size < CACHE_SLOTS:
        size *= 2
    return size


@njit_inline
def _clear_cache(P):
    size = (P.size - _CACHE_HEAD) // (7 + _FRONT)
    P[:_CACHE_HEAD] = 0
    P[0] = size
    P[_CACHE_HEAD : _CACHE_HEAD + 4 * size] = -1
    P[_CACHE_HEAD + 7 * size :] = 0


@njit_inline
def _cache_views(P):
    """``(slots, vals, state, keys, front)`` of a packed cache, as views."""
    size = P[0]
    at = _CACHE_HEAD
    slots = _rows(P[at : at + 4 * size], 4)
    vals = P[at + 4 * size : at + 6 * size].view(np.int32)
    keys = P[at + 6 * size : at + 7 * size].view(np.uint8)
    front = _rows(P[at + 7 * size : at + (7 + _FRONT) * size], 4)
    return slots, vals, P[1:5], keys, front


def _grow_marks(size: int) -> tuple[int, int]:
    """``(now, soon)`` of a cache of ``size`` slots, in sixteenths, as _mark_growth has them."""
    return _LAST_GROW_MARKS if 2 * size == CACHE_SLOTS else _GROW_MARKS


def cache_capacity(cache: np.ndarray) -> int:
    """Bytes of text a packed cache was sized for (its slots times 8)."""
    return (cache.size - _CACHE_HEAD) // (7 + _FRONT) * 8


@njit_inline
def _mark_growth(CP):
    """Flag a packed cache ``GROW_NOW`` once a quarter of its slots are used (it starts
    afresh at half) or when it had to start afresh, ``GROW_SOON`` once a sixteenth are,
    unless it has the most slots. A cache of half the most slots grows only at 3/8
    (soon at a quarter): that last step only doubles it, into the biggest array, whose
    first touch fell inside a call of each thread of a 2-thread batch
    (bench/results/session23-growth-20261204.md); 3/8 still leaves an eighth of its
    slots before it would start afresh.

    ``GROW_SOON`` waits until the cache holds ``CP[CACHE_SOON_AT]`` entries, a word the
    pool moves on each time it has handled the flag (for good once the next cache is
    ready). Flagged on every call, it had sent every call through the pool's Python
    code: short texts whose pieces fill a cache to between a sixteenth and a quarter
    stay there, and each call paid it (bench/results/session31-20261205.md)."""
    size = CP[0]
    now, soon = _LAST_GROW_MARKS if 2 * size == CACHE_SLOTS else _GROW_MARKS
    if size >= CACHE_SLOTS:
        CP[CACHE_GROW] = 0
    elif 16 * CP[1] > now * size or CP[CACHE_RESETS] > 0:
        CP[CACHE_GROW] = GROW_NOW
    elif 16 * CP[1] > soon * size and CP[1] >= CP[CACHE_SOON_AT]:
        CP[CACHE_GROW] = GROW_SOON
    else:
        CP[CACHE_GROW] = 0


_COPY_AHEAD = 16  # entries whose new slot is asked for before the first of them is placed


@njit
def _copy_cache(CP, NP):
    """Put the entries of the smaller cache ``CP`` in ``NP`` (as _cache_put), which must
    be empty (:func:`_fresh_cache`, :class:`NextCache`).

    ``vals`` and ``keys`` are copied whole, to the same offsets, so a slot moves as its
    four words; its hash comes from them (the packed heads, then the tail in ``keys``),
    as :func:`_hash_bytes` makes it from the bytes. Growing is the one slow call in a
    run of short ones, and rebuilding each piece's bytes to hash them had doubled it.
    The new slots are scattered over megabytes: each is asked for ``_COPY_AHEAD``
    entries before it is probed, so that the waits on memory overlap instead of
    following one another. Entries are placed in slot order all the same, so the new
    cache's layout does not depend on how far ahead that is.

    The front moves too (:func:`_copy_front`).

    :func:`new_cache` calls it too (``CP`` then has no slots), so the first cache a
    process makes also loads it: loading a kernel from Numba's cache takes milliseconds
    on its first call, which had fallen inside whatever call first grew a cache.
    """
    slots, vals, state, keys, front = _cache_views(CP)
    nslots, nvals, nstate, nkeys, nfront = _cache_views(NP)
    _copy_front(front, nfront, keys)
    nvals[: state[1]] = vals[: state[1]]
    nkeys[: state[2]] = keys[: state[2]]
    nstate[1] = state[1]
    nstate[2] = state[2]
    cmask = nslots.shape[0] - 1
    nflat = _flat(nslots)
    ring = np.empty((_COPY_AHEAD, 2), np.int64)  # (old slot, its home slot in NP), in order
    got = 0
    for k in range(slots.shape[0]):
        meta = slots[k, 2]
        if meta < 0 or meta & 0xFFFFFFFF == PENDING:
            continue
        i = np.int64(_slot_hash(slots, keys, k) & np.uint64(cmask))
        _prefetch(nflat, i * 4)
        r = got % _COPY_AHEAD
        if got >= _COPY_AHEAD:
            _place(slots, nslots, ring[r, 0], ring[r, 1], cmask)
        ring[r, 0] = k
        ring[r, 1] = i
        got += 1
    for g in range(max(0, got - _COPY_AHEAD), got):
        r = g % _COPY_AHEAD
        _place(slots, nslots, ring[r, 0], ring[r, 1], cmask)
    nstate[0] += got


@njit_inline
def _copy_front(front, nfront, keys):
    """The front's entries into the bigger, empty ``nfront``, each in the slot of its
    hash there. Without them, every piece seen before missed the front once after the
    cache grew, and took the slower lookups again (bench/results/session56-20261207.md).

    Direct-mapped, the slot is the hash's low bits: two entries apart in ``front`` are
    apart in ``nfront`` too (it has more of the same bits), so each goes straight in.
    A front entry starts as a slot does (bytes 0-7, 8-15, length << 32 | ids), so
    :func:`_slot_hash` hashes it; a front piece has at most 16 bytes, so it never reads
    ``keys``.
    """
    nmask = np.uint64(nfront.shape[0] - 1)
    for f in range(front.shape[0]):
        if front[f, 2] == 0:
            continue
        i = np.int64(_slot_hash(front, keys, f) & nmask)
        for c in range(4):
            nfront[i, c] = front[f, c]


@njit_inline
def _slot_hash(slots, keys, k):
    """The hash of the piece in slot ``k`` (as _hash_bytes makes it from its bytes)."""
    m = slots[k, 2] >> 32
    h = np.uint64(slots[k, 0]) ^ (np.uint64(m) << np.uint64(56))
    h *= np.uint64(0x9E3779B97F4A7C15)
    if m > 8:
        h ^= np.uint64(slots[k, 1])
        h *= np.uint64(0xFF51AFD7ED558CCD)
    k0 = slots[k, 3] >> 32
    for j in range(16, m, 8):
        h ^= _pack8(keys, k0 + j - 16, k0 + m - 16)
        h *= np.uint64(0xFF51AFD7ED558CCD)
    return _avalanche(h)


@njit_inline
def _place(slots, nslots, k, i, cmask):
    """Slot ``k`` of ``slots`` into the first free slot of ``nslots`` from ``i`` on."""
    while nslots[i, 2] >= 0:
        i = (i + 1) & cmask
    nslots[i, 0] = slots[k, 0]
    nslots[i, 1] = slots[k, 1]
    nslots[i, 2] = slots[k, 2]
    nslots[i, 3] = slots[k, 3]


def grown_cache(cache: np.ndarray, nbytes: int | None = None, into: NextCache | None = None) -> np.ndarray:
    """``cache`` sized for ``nbytes`` of text (default: 8 times its slots; at most
    ``CACHE_SLOTS``), its entries kept: in ``into``'s slots if they are ready and that size."""
    size = int(_cache_slots(8 * cache_capacity(cache) if nbytes is None else nbytes))
    if 8 * size <= cache_capacity(cache):
        cache[CACHE_GROW] = 0
        return cache
    ready = into.ready() if into is not None and into.size == size else None
    if ready is not None:
        _copy_cache(cache, ready)
        return ready
    bigger = _fresh_cache(size)
    _copy_cache(cache, bigger)
    return bigger


class NextCache:
    """The cache that ``cache`` grows into, cleared while ``cache`` is still in use (from
    ``GROW_SOON`` to ``GROW_NOW``): on a thread of its own where a CPU is spare
    (``background``), else a slice at a time by :meth:`advance`, which the caller calls
    each time a call that used ``cache`` flagged ``GROW_SOON`` (once per 1/256 of its
    slots filled: see _mark_growth).

    Why: clearing the new cache is the first touch of its memory (page faults; on a VM's
    huge pages at times ten to twenty times slower: bench/results/session16-growth-20261204.md),
    the larger part of growing, and it fell inside whichever call filled the cache to a
    quarter: one call of many stalled for it. A slice at a time, the calls pay for it in
    proportion to the entries they added, and only the copy of the entries is
    left to the call that grows. A thread of its own also writes ``vals`` and ``keys``
    (no page of the array is then first touched by a call); slices leave them, as
    :func:`_clear_cache` does, to be touched as they fill.

    >>> nxt = NextCache(new_cache(1 << 15))
    >>> grown_cache(new_cache(1 << 15), into=nxt).size == nxt.ready().size
    True
    >>> step = NextCache(new_cache(1 << 15), background=False)
    >>> step.done(), int(step.ready()[0]) == int(nxt.ready()[0]), step.done()
    (False, True, True)
    """

    def __init__(self, cache: np.ndarray, background: bool = True):
        self.size = int(_cache_slots(8 * cache_capacity(cache)))
        self._pid = os.getpid()
        self._array = huge_page_array(_packed_words(self.size))
        # (start, end, value) of the words to write; slices go through them in order
        self._parts = _clear_parts(self.size, every=background)
        self._total = sum(end - start for start, end, _ in self._parts)
        self._cleared = 0  # of those words, how many are written (a slice at a time)
        self._watch = True  # whether its pages may be cold (see fill_words)
        # the entries from which calls pay: where GROW_SOON begins (a sixteenth of the
        # slots), not the count when this began, or the call that crossed the mark (a
        # big one, at times a quarter of the way to the goal) had paid nothing for its
        # share; the goal is a sixteenth before the cache grows
        now, soon = _grow_marks(int(cache[0]))
        self._used0 = min(int(cache[1]), soon * int(cache[0]) // 16)
        self._goal = (now - 1) * int(cache[0]) // 16
        self._thread = None
        if background:
            self._thread = threading.Thread(target=self._clear, args=(self._total,), name="dwstok-cache", daemon=True)
            self._thread.start()

    @property
    def background(self) -> bool:
        """Whether a thread of its own clears it."""
        return self._thread is not None

    def advance(self, cache: np.ndarray) -> None:
        """Clear the share of the memory due for ``cache``'s entries: all of it a
        sixteenth of its slots before it grows (by 3/16 of them, or 5/16 for the step into
        the biggest cache), so the last slices never fall in the call that grows.
        Nothing for a background one."""
        if self._thread is not None or self._cleared == self._total:
            return
        share = min(1.0, (int(cache[1]) - self._used0) / max(1, self._goal - self._used0))
        due = int(share * self._total)
        if due - self._cleared >= _SLICE_WORDS or due == self._total:
            self._clear(due)

    def done(self) -> bool:
        """Whether :meth:`ready` will not wait (or clear)."""
        if self._thread is not None:
            return not self._thread.is_alive()
        return self._cleared == self._total

    def ready(self) -> np.ndarray | None:
        """The cleared cache: the rest cleared now, or once its thread is done; None in a
        forked child, where that thread never ran to the end."""
        if self._thread is None:
            self._clear(self._total)
            return self._array
        if self._pid != os.getpid():
            return None
        self._thread.join()
        return self._array

    def _clear(self, upto: int) -> None:
        """Write the words of ``_parts`` from ``_cleared`` to ``upto`` (counted through
        them), by NumPy, which releases the GIL to fill."""
        at = 0
        for start, end, value in self._parts:
            lo, hi = start + max(0, self._cleared - at), start + min(end - start, upto - at)
            if lo < hi and fill_words(self._array, lo, hi, value, self._watch):
                self._watch = False
            at += end - start
        if self._cleared == 0 < upto:
            self._array[0] = self.size
        self._cleared = upto


_SLICE_WORDS = 1 << 15  # the least a slice clears (256 KB), so that short calls skip it


def _clear_parts(size: int, every: bool) -> list[tuple[int, int, int]]:
    """``(start, end, value)`` of the words that :func:`_clear_cache` writes in a packed
    cache of ``size`` slots (the head, slots -1: empty, the front 0), and with ``every``
    ``vals`` and ``keys`` too (0)."""
    end = _packed_words(size)
    rest = _CACHE_HEAD + (4 if every else 7) * size
    return [(0, _CACHE_HEAD, 0), (_CACHE_HEAD, _CACHE_HEAD + 4 * size, -1), (rest, end, 0)]


@njit
def _new_cache(nbytes):
    """A fresh cache as ``(slots, vals, state, keys, front)``, for one call."""
    return _cache_views(_new_cache_packed(nbytes))


def new_cache(nbytes: int = 1 << 22) -> np.ndarray:
    """A piece cache to keep across calls (one per thread: kernels write to it), sized
    for ``nbytes`` of text: a slot per 8 bytes, from 64 to ``CACHE_SLOTS``.

    Allocated by NumPy, which asks Linux for huge pages for arrays of 4 MB and more
    (Numba's allocator does not), from a 2 MB boundary (:func:`huge_page_array`): a
    quarter of the time to make and to first touch than one made by Numba. Cleared a
    page at a time by :func:`fill_words`, which moves it to small pages if one is cold.
    """
    P = _fresh_cache(int(_cache_slots(nbytes)))
    _copy_cache(_NO_SLOTS, P)  # loads the code that grows a cache: see _copy_cache
    return P


def _fresh_cache(size: int) -> np.ndarray:
    """An empty packed cache of ``size`` slots, as :func:`_clear_cache` leaves one, on
    huge pages from NumPy (:func:`new_cache`), cleared a page at a time by
    :func:`fill_words` (on small pages from the first cold one).

    >>> P = _fresh_cache(64)
    >>> int(P[0]), int(_cache_views(P)[0][:, 2].max()), int(abs(P[1:_CACHE_HEAD]).sum())
    (64, -1, 0)
    """
    P = huge_page_array(_packed_words(size))
    watch = True
    for start, end, value in _clear_parts(size, every=False):
        if fill_words(P, start, end, value, watch):
            watch = False
    P[0] = size
    return P


_NO_SLOTS = np.zeros(_CACHE_HEAD, np.int64)  # a packed cache of 0 slots: nothing to copy


# -------------------------------------------------------------------- lookups and puts
# Take the cache's arrays, not the tuple: the span driver inlines them in its loops.


@njit_inline
def _probe(slots, keys, buf, s, m, hd, nd, h):
    """``(found, slot)``: the slot of buf[s:s + m] (bytes 0-7 packed in ``hd``, 8-15 in
    ``nd``, hash ``h``), its ids pending or not, else the empty slot that ends its chain."""
    cmask = slots.shape[0] - 1
    i = np.int64(h & np.uint64(cmask))
    while True:
        meta = slots[_ix(i), 2]
        if meta < 0:
            return False, i
        if (meta >> 32) == m and slots[_ix(i), 0] == hd and slots[_ix(i), 1] == nd:
            if m <= 16 or _same_words(keys, slots[_ix(i), 3] >> 32, buf, s + 16, m - 16):
                return True, i
        i = (i + 1) & cmask


@njit_inline
def _put_slot(slots, keys, state, buf, s, m, hd, nd, i, cnt, v0):
    """Put buf[s:s + m] in the first empty slot from ``i``, ``cnt`` ids from ``vals[v0]``
    (``PENDING``: not yet); return the slot. The caller checked that there is room."""
    cmask = slots.shape[0] - 1
    tail = max(m - 16, 0)
    while slots[_ix(i), 2] >= 0:
        i = (i + 1) & cmask
    slots[_ix(i), 0] = hd
    slots[_ix(i), 1] = nd
    slots[_ix(i), 2] = (np.int64(m) << 32) | cnt
    slots[_ix(i), 3] = (state[2] << 32) | v0
    for j in range(tail):
        keys[_ix(state[2] + j)] = buf[_ix(s + 16 + j)]
    state[0] += 1
    state[2] += tail
    return i


@njit_inline
def _put_ids(vals, state, out, n0, cnt):
    """Append out[n0:n0 + cnt] to ``vals``; return where they start."""
    v0 = state[1]
    for j in range(cnt):
        vals[_ix(v0 + j)] = out[_ix(n0 + j)]
    state[1] += cnt
    return v0


@njit_inline
def _cache_find(C, buf, s, e, h):
    """The slot of buf[s:e] in the cache, or -1 (also while its ids are pending)."""
    slots, vals, state, keys, front = C
    found, i = _probe(slots, keys, buf, s, e - s, np.int64(_pack8(buf, s, e)), np.int64(_pack8(buf, s + 8, e)), h)
    if not found or slots[_ix(i), 2] & 0xFFFFFFFF == PENDING:
        return -1
    return i


@njit_inline
def _cache_get(C, buf, s, e, h, out, n):
    """Copy the cached ids of buf[s:e] to out[n:]; return the new n, or -1 if not cached."""
    i = _cache_find(C, buf, s, e, h)
    if i < 0:
        return -1
    slots, vals, state, keys, front = C
    v0, vn = slots[i, 3] & 0xFFFFFFFF, slots[i, 2] & 0xFFFFFFFF
    for j in range(vn):
        out[n + j] = vals[v0 + j]
    return n + vn


@njit_inline
def _cache_put(C, buf, s, e, h, out, n0, n1):
    """Cache out[n0:n1] as the ids of buf[s:e]; a full cache starts afresh first."""
    slots, vals, state, keys, front = C
    size = slots.shape[0]
    m = e - s
    cnt = n1 - n0
    tail = max(m - 16, 0)
    if 2 * (state[0] + 1) > size or state[1] + cnt > vals.size or state[2] + tail > keys.size:
        slots[:, 2] = -1  # full: start afresh rather than evict one by one
        state[0] = 0
        state[1] = 0
        state[2] = 0
        state[3] += 1
        if cnt > vals.size or tail > keys.size:
            return
    i = np.int64(h & np.uint64(size - 1))
    v0 = _put_ids(vals, state, out, n0, cnt)
    _put_slot(slots, keys, state, buf, s, m, np.int64(_pack8(buf, s, e)), np.int64(_pack8(buf, s + 8, e)), i, cnt, v0)
