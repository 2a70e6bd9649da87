"""A shard's pieces counted by (bytes, language) in a hash table of our own.

Hand-written rather than Arrow's group-by, which pretokenize used before: Arrow first
needs the pieces as a table (one row a piece) and then hashes rows of two keys, and this
took the shard threads longer than scanning and reading together (both are measured in
bench/results/session33-20261205.md).
Here a kernel reads each piece where the scanner left it in the batch's text, and only
a piece not seen before is copied.

The rows come out in the order their pieces were first met, so a shard's table does
not depend on how its text was cut into batches (count sorts them in any case).

>>> import numpy as np
>>> c = PieceCounts()
>>> data = np.frombuffer(b"ab ab ab ab", np.uint8)
>>> c.add(data, np.array([0, 2, 5, 8, 11]), np.array([0, 0, 1, 0], np.int32))
>>> t = c.table(["en", "fr"])
>>> t.column("piece").to_pylist(), t.column("lang").to_pylist(), t.column("count").to_pylist()
([b'ab', b' ab', b' ab'], ['en', 'en', 'fr'], [1, 2, 1])
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import dwstok
from dwstok._intrinsics import ix, prefetch
from dwstok._jit import drop_stale_cache, njit, own_kernels
from dwstok.hashing import _hash_from_head, _pack8, _same_words

from .arrow_compute import arrow_call

drop_stale_cache(Path(__file__).parent, [Path(__file__).parent, Path(dwstok.__file__).parent])
own_kernels("stages.")

# An entry (a distinct piece and language) is 4 words: the piece's first 8 bytes, where
# its bytes start in the arena, (length << 32) | language, and its count. A slot of the
# table holds (31 bits of the hash << 32) | entry, or -1.
_HEAD, _START, _LEN_LANG, _COUNT = range(4)
_ENTRY_WORDS = 4  # the words of an entry, above
_EMPTY = np.int64(-1)
_LANG_MIX = np.uint64(0xD6E8FEB86659FD93)
_AHEAD = 16  # pieces whose slots are asked for before they are read
_PEEK = 8  # pieces whose entries are asked for before they are read (slots in by then)


@njit
def _key_hash(data, s, e, g):
    """Hash of the piece data[s:e] in language g (the table's slot is its low bits)."""
    return _hash_from_head(data, s, e, _pack8(data, s, e)) ^ (np.uint64(g) * _LANG_MIX)


@njit
def _count_pieces(data, offs, lang, i, table, entries, arena, state):
    """Count pieces i, i + 1, ... (piece k is data[offs[k]:offs[k + 1]] in language
    lang[k]) until all are counted or one more might not fit: the table at half full,
    the entries or the arena at their ends. Returns the next piece to count.
    ``state`` is (entries used, arena bytes used).

    A piece's slot is asked for ``_AHEAD`` pieces before it is read, so that the waits
    on the table (a few MB, read at random) overlap. Indexes go through ``ix`` (none is
    negative): Numba adds a negative-index wraparound to every other access."""
    mask = np.uint64(table.size - 1)
    n_e = state[0]
    used = state[1]
    room = min(table.size // 2, entries.shape[0])
    n = offs.size - 1
    flat = entries.reshape(entries.size)  # (for prefetch, which takes a flat index)
    ahead = np.empty(_AHEAD, np.uint64)  # the hashes of pieces i .. i + _AHEAD - 1, by k % _AHEAD
    for k in range(i, min(i + _AHEAD, n)):
        ahead[k % _AHEAD] = _key_hash(data, offs[ix(k)], offs[ix(k + 1)], np.int64(lang[ix(k)]))
        prefetch(table, ahead[k % _AHEAD] & mask)
    for k in range(i, min(i + _PEEK, n)):
        _peek(table, flat, ahead[k % _AHEAD] & mask)
    while i < n:
        s = offs[ix(i)]
        e = offs[ix(i + 1)]
        length = e - s
        if n_e >= room or used + length > arena.size:
            break
        g = np.int64(lang[ix(i)])
        h = ahead[i % _AHEAD]
        if i + _AHEAD < n:
            k = i + _AHEAD
            ahead[k % _AHEAD] = _key_hash(data, offs[ix(k)], offs[ix(k + 1)], np.int64(lang[ix(k)]))
            prefetch(table, ahead[k % _AHEAD] & mask)
        if i + _PEEK < n:
            _peek(table, flat, ahead[(i + _PEEK) % _AHEAD] & mask)
        head = np.int64(_pack8(data, s, e))
        tag = np.int64(h >> np.uint64(33)) << 32
        len_lang = (length << 32) | g
        slot = h & mask
        while True:
            v = table[ix(slot)]
            if v == _EMPTY:
                table[ix(slot)] = tag | n_e
                entries[ix(n_e), _HEAD] = head
                entries[ix(n_e), _START] = used
                entries[ix(n_e), _LEN_LANG] = len_lang
                entries[ix(n_e), _COUNT] = 1
                for k in range(length):
                    arena[ix(used + k)] = data[ix(s + k)]
                used += length
                n_e += 1
                break
            if (v & np.int64(0xFFFFFFFF00000000)) == tag:
                x = v & np.int64(0xFFFFFFFF)
                if (entries[ix(x), _HEAD] == head and entries[ix(x), _LEN_LANG] == len_lang
                        and (length <= 8 or _same_words(arena, entries[ix(x), _START] + 8, data, s + 8, length - 8))):
                    entries[ix(x), _COUNT] += 1
                    break
            slot = (slot + np.uint64(1)) & mask
        i += 1
    state[0] = n_e
    state[1] = used
    return i


@njit
def _peek(table, flat, slot):
    """Ask for the entry that the piece's first slot points to, if any. Its slot was asked
    for ``_AHEAD - _PEEK`` pieces before, so it is read from the cache; the entry (a few
    MB of them, read at random) was the wait that the slot's prefetch left."""
    v = table[ix(slot)]
    if v != _EMPTY:
        prefetch(flat, _ENTRY_WORDS * (v & np.int64(0xFFFFFFFF)))


@njit
def _rehash(table, entries, n_e, arena):
    """Every entry into ``table`` (all -1), as ``_count_pieces`` puts them."""
    mask = np.uint64(table.size - 1)
    for x in range(n_e):
        s = entries[x, _START]
        length = entries[x, _LEN_LANG] >> 32
        g = entries[x, _LEN_LANG] & np.int64(0xFFFFFFFF)
        h = _key_hash(arena, s, s + length, g)
        slot = h & mask
        while table[ix(slot)] != _EMPTY:
            slot = (slot + np.uint64(1)) & mask
        table[ix(slot)] = (np.int64(h >> np.uint64(33)) << 32) | x


class PieceCounts:
    """The distinct (piece, language) of a shard and how often each occurs."""

    def __init__(self, slots: int = 1 << 18):
        # room for half as many distinct pieces as slots; the table grows as it needs
        self.slots = np.full(slots, -1, np.int64)
        self.entries = np.empty((slots // 2, _ENTRY_WORDS), np.int64)
        self.arena = np.empty(slots * 8, np.uint8)
        self.state = np.zeros(2, np.int64)

    def __len__(self) -> int:
        return int(self.state[0])

    def add(self, data: np.ndarray, offs: np.ndarray, lang: np.ndarray) -> None:
        """Count piece k = ``data[offs[k]:offs[k + 1]]`` in language ``lang[k]`` (an
        index into the names ``table`` is given), for every k."""
        n = len(offs) - 1
        i = np.int64(0)
        while i < n:
            i = _count_pieces(data, offs, lang, i, self.slots, self.entries, self.arena, self.state)
            if i < n:
                self._grow(int(offs[i + 1] - offs[i]))

    def _grow(self, piece_bytes: int) -> None:
        n_e, used = (int(x) for x in self.state)
        if n_e >= self.slots.size // 2:
            self.slots = np.full(2 * self.slots.size, -1, np.int64)
            _rehash(self.slots, self.entries, np.int64(n_e), self.arena)
        if n_e >= self.entries.shape[0]:
            self.entries = _grown(self.entries, n_e, 2 * self.entries.shape[0])
        if used + piece_bytes > self.arena.size:
            self.arena = _grown(self.arena, used, max(2 * self.arena.size, used + piece_bytes))

    def table(self, names: list[str]):
        """``(piece, lang, count)`` as an Arrow table, rows in the order first met;
        ``lang`` is ``names[index]``."""
        import pyarrow as pa

        n_e, used = (int(x) for x in self.state)
        e = self.entries[:n_e]
        offsets = np.empty(n_e + 1, np.int64)
        offsets[:n_e] = e[:, _START]
        offsets[n_e] = used
        data = pa.py_buffer(self.arena[:used].copy())
        if used < 2**31 - 1:
            piece = pa.BinaryArray.from_buffers(pa.binary(), n_e, [None, pa.py_buffer(offsets.astype(np.int32)), data])
        else:
            piece = pa.LargeBinaryArray.from_buffers(pa.large_binary(), n_e, [None, pa.py_buffer(offsets), data])
        lang = arrow_call("take", pa.array(names, pa.string()), pa.array((e[:, _LEN_LANG] & 0xFFFFFFFF).astype(np.int32)))
        return pa.table({"piece": piece, "lang": lang, "count": pa.array(e[:, _COUNT].copy())})


def load_kernels() -> None:
    """Run both kernels once on a tiny input, with the types a shard gives them (its
    text in a writable buffer, as Arrow's are), so that they are in Numba's cache or
    loaded from it."""
    c = PieceCounts(slots=2)
    c.add(np.frombuffer(bytearray(b"ab"), np.uint8), np.arange(3, dtype=np.int64), np.zeros(2, np.int32))


def _grown(a: np.ndarray, used: int, size: int) -> np.ndarray:
    out = np.empty((size, *a.shape[1:]), a.dtype)
    out[:used] = a[:used]
    return out
