"""``Tokenizer``: a thin class over the scanner and BPE kernels.

>>> tok = Tokenizer.from_vocab_merges(
...     {b: bytes([b]) for b in range(256)}, [(b"a", b"a"), (b"aa", b"a"), (b"aaa", b"b")], pattern="gpt2"
... )
>>> tok.encode("aaabdaaabac")
[258, 100, 258, 97, 99]
>>> tok.decode([258, 100])
'aaabd'
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from . import bpe, kernel_cache, model_file
from .decoding import DecodeStream, TokenIdError, check_ids, decode_text, iter_decode
from ._jit import compiled_entry
from .errors import DwstokError, ModelFileError, PatternMismatchError
from .limits import MAX_IDS
from .patterns import resolve
from .pylist import IdLists, split_tolist
from .scanner import get_scanner
from .streaming import run_class, safe_cut

__all__ = ["Tokenizer", "TokenIdError"]

MERGE_RULES = ("merges", "ranks")
_NO_SPECIALS: frozenset = frozenset()
_GROW = bpe.CACHE_GROW  # a local name: read once per call
_GROWS = bpe.GROWS  # added to a list kernel's count of ids when its cache is due to grow
_COUNT = _GROWS - 1  # the count, without it
_NEVER = 1 << 62  # as a cache's CACHE_SOON_AT: no more GROW_SOON
# A batch on several threads is cut into up to this many ranges a thread (none under
# ``_RANGE_BYTES``), taken by whichever thread is free: documents that merge slowly (CJK)
# do not leave the other threads idle, and the lists of a finished range are made while
# the rest are still encoding.
_RANGES_PER_THREAD = 4
_RANGE_BYTES = 1 << 16
# A batch of less text than this (bytes; for encode_batch, as _text_size counts them) runs
# on the calling thread, in one range, whatever the threads asked for. Below it, two
# threads gained 5-15% on text not seen before and lost 15-50% on text whose every piece
# is cached (bench/small_batches.py, bench/results/session59-20261208.md).
_SPLIT_MIN = 1 << 16
# A cache that a batch on several threads takes is sized for at least this much text:
# 2^18 slots, the size each thread's cache reaches within the first megabytes of
# multilingual text. Grown there from the pool's small start, each thread first touched
# the new memory in the middle of a call, and the batch waited for the slower
# (bench/results/session40-20261206.md); this moves that to the first batch on threads.
# A batch on one thread, or a single text, still starts small.
_THREADED_CACHE_BYTES = 8 * (bpe.CACHE_SLOTS // 2)
# encode_batch encodes up to this many texts one by one (as encode_ordinary), if they are
# short (under _SPLIT_MIN in all): a batch's set-up (the UTF-8 buffer, the ranges,
# making the lists) cost more than a call each.
_FEW_TEXTS = 4


def _utf8(text: str, offset: int = 0) -> bytes:
    """``text`` as UTF-8; a lone surrogate is a ValueError naming its position
    (``offset`` + its index, for text that is part of a longer stream)."""
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"text has a lone surrogate {text[e.start]!r} at position {offset + e.start}; it cannot be encoded as UTF-8"
        ) from None


_STR_HEAD = sys.getsizeof("")  # a str's bytes besides its characters (a little more if not ASCII)


def _text_size(texts: Sequence[str]) -> int:
    """About the UTF-8 bytes of the texts, without encoding them: the bytes their
    characters take in memory (CPython keeps 1, 2 or 4 a character, UTF-8 takes 1-3 for
    most scripts). Characters had counted a Gurmukhi batch of 131 KB as 44K, too little
    to split over threads. Any other item has a size too: the batch path names it later.

    >>> _text_size(["abc"]), _text_size(["ਪੰਜਾਬੀ"]) >= 2 * len("ਪੰਜਾਬੀ")
    (3, True)
    """
    return sum(map(sys.getsizeof, texts)) - _STR_HEAD * len(texts)


def _utf8_docs(texts: Iterable[str], first: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(data, offsets)``: the texts as UTF-8 in one buffer, document i at
    ``data[offsets[i]:offsets[i + 1]]`` (as merge_learner.pieces_to_arrays lays out bytes).
    An item that is no str, or has a lone surrogate, is named by its index in the batch
    (``first`` + its index in ``texts``).

    >>> _utf8_docs(["ok", None], first=5)
    Traceback (most recent call last):
    TypeError: document 6: expected str, got NoneType
    """
    texts = texts if isinstance(texts, (list, tuple)) else list(texts)
    try:
        bufs = [_utf8(t) for t in texts]
    except (TypeError, ValueError) as e:  # which one: found again, one by one
        for i, t in enumerate(texts):
            try:
                _utf8(t)
            except (TypeError, ValueError):
                raise type(e)(f"document {first + i}: {e}") from None
        raise
    # (accumulate, not np.cumsum of a list: that converted the list first, a few µs a call)
    offsets = np.fromiter(itertools.accumulate(map(len, bufs), initial=0), np.int64, len(bufs) + 1)
    return np.frombuffer(b"".join(bufs), np.uint8), offsets


_POOLS: dict[int, tuple[int, ThreadPoolExecutor]] = {}
_POOLS_LOCK = threading.Lock()


def _thread_pool(threads: int) -> ThreadPoolExecutor:
    """A pool of ``threads`` threads kept for the process: starting one per batch cost
    more than encoding a short batch. A forked child (a data loader worker) has none of
    its parent's threads, so it makes its own.
    """
    pid = os.getpid()
    held = _POOLS.get(threads)
    if held is None or held[0] != pid:
        with _POOLS_LOCK:
            held = _POOLS.get(threads)
            if held is None or held[0] != pid:
                held = _POOLS[threads] = (pid, ThreadPoolExecutor(threads, thread_name_prefix="dwstok-encode"))
    return held[1]


class _CachePool:
    """Caches of merged pieces that outlive a call, one per concurrent caller.

    Encoding call after call (document by document, or batch after batch of a shard),
    later calls reuse the words earlier ones merged. A kernel writes to its cache, so a
    call takes one for itself and gives it back.

    A cache grows with use, up to 2^19 slots (36 MB, room for the 149k distinct pieces
    that are no token in the 16 MB dev corpus): it is sized for the call that takes it,
    at least ``MIN_BYTES`` (``_THREADED_CACHE_BYTES`` for a batch on several threads),
    and once a quarter full (it would start afresh at half) it
    comes back with 8 times the slots and its entries. So short texts on many threads
    hold 300 KB a thread, not 36 MB. Growing copies the entries: on dev, document by
    document, starting afresh instead was slower. The bigger cache's memory is cleared
    ahead (``NextCache``: on a thread of its own where a CPU is spare, else for calls on
    one thread a slice each time another 1/256 of the slots fill), so that its first
    touch (page faults, at times slow ones) does not fall in one call.
    """

    MIN_BYTES = 1 << 15  # 4096 slots, 300 KB
    MIN_IDS = 1 << 12  # the least room for ids a pooled ``out`` has (16 KB)
    MAX_IDS = 1 << 20  # the most (4 MB): a longer text's room is its own, dropped after its call

    def __init__(self):
        # slot -> (cache, out) in the order given back (popitem takes the last); a cache
        # keeps its slot for good (grown too), so that a caller can ask for it again.
        # Public for Tokenizer.encode and _pooled, which take and give back an entry
        # themselves when neither needs more than a pop and a put.
        self.free: dict[int, tuple] = {}
        self._made: set[int] = set()  # every slot that has a cache
        self._lock = threading.Lock()  # for _made, once a new cache
        self._next: dict[int, bpe.NextCache | bool] = {}  # id(cache) -> what it grows into (False: no NextCache)

    def take(self, nbytes: int, ids: int = 0, slot: int | None = None, threads: int = 1):
        """``(cache, out, slot)`` for a call on ``nbytes`` of text on ``threads`` threads:
        a cache, room for at least ``ids`` uint32 ids (a single call's kernel writes its
        ids there, not to an array of its own), and the cache's slot. Give them back with
        :meth:`give` (``try``/``finally``).

        The cache of ``slot`` if it is free, else the one given back last. A batch's
        ranges ask for a slot each (their index, modulo the threads), so that the same
        documents encoded again find the cache that holds their pieces: on two threads,
        whichever took a range first had taken either cache, and a range of Thai text in
        the other one merged all its pieces again (bench/results/session24-affinity-20261204.md).

        Plain methods, not a context manager: this runs once per document, and a
        generator-based ``with`` cost as much as a short text's kernel. No lock either:
        ``dict.pop`` and ``dict.popitem`` are atomic.
        """
        if threads > 1:
            nbytes = max(nbytes, _THREADED_CACHE_BYTES)
        got = self.free.pop(slot, None) if slot is not None else None
        if got is None:
            try:
                slot, got = self.free.popitem()
            except KeyError:
                return bpe.new_cache(max(nbytes, self.MIN_BYTES)), _room(_NO_IDS, ids, self.MIN_IDS), self._new_slot(slot)
        cache, out = got
        # (a cache of ``size`` words has room for more than ``size`` bytes: one compare
        # settles short calls)
        if nbytes > cache.size and bpe.cache_capacity(cache) < min(nbytes, bpe.CACHE_MAX_CAPACITY):
            cache = bpe.grown_cache(cache, nbytes, self._next.pop(id(cache), None) or None)
        return cache, _room(out, ids, self.MIN_IDS), slot

    def _new_slot(self, want: int | None) -> int:
        """The slot of a new cache: ``want`` if no cache has it yet (the first call of a
        batch's ranges, on threads that reach the pool in any order), else the least free."""
        with self._lock:
            slot = want if want is not None and want not in self._made else next(
                i for i in itertools.count() if i not in self._made
            )
            self._made.add(slot)
        return slot

    def give(self, cache, out, slot: int, threads: int = 1) -> None:
        """Give back what :meth:`take` gave, from a call on ``threads`` threads."""
        if cache[_GROW]:
            cache = self._grown(cache, threads)
        self.free[slot] = (cache, out if out.size <= self.MAX_IDS else _NO_IDS)

    def _grown(self, cache, threads: int):
        """``cache``, or once it is a quarter full the cache it grows into: 8 times the
        slots, with its entries.

        From the time ``cache`` is a sixteenth full, that cache's memory is made ready
        (``NextCache``). When a CPU is left over by the call's threads, on a thread of
        its own, and until it is done, ``cache`` stays (up to 7/16 full, as at half it
        would start afresh, or until it had to start afresh). Else, for calls on one
        thread, a slice each time another 1/256 of the slots fill. On CPUs that a call
        on more threads keeps busy, either slowed a 2-thread batch down
        (bench/results/session16-growth-20261204.md and session20-growth-20261204.md),
        so there it grows on the calling thread.
        """
        nxt = self._next.get(id(cache))  # (one thread has a cache at a time)
        if cache[_GROW] == bpe.GROW_SOON:
            if nxt is None:  # asked once a cache (False: none)
                spare = _spare_cpu(threads)
                nxt = self._next[id(cache)] = (spare or threads == 1) and _next_cache(cache, spare)
            if nxt:
                nxt.advance(cache)
            # Flagged again once another 1/256 of the slots fill (advance clears in slices
            # by the entries), or never if nothing is left to make ready.
            ready = not nxt or nxt.done()
            cache[bpe.CACHE_SOON_AT] = _NEVER if ready else int(cache[1]) + max(1, int(cache[0]) >> 8)
            return cache
        if nxt and nxt.background and not nxt.done() and not cache[bpe.CACHE_RESETS] and 16 * cache[1] <= 7 * cache[0]:
            return cache
        self._next.pop(id(cache), None)
        return bpe.grown_cache(cache, into=nxt or None)


def _next_cache(cache, background: bool) -> bpe.NextCache:
    """``NextCache(cache, background)``, or one cleared a slice at a time where no thread
    can start (at interpreter shutdown, at a limit on threads)."""
    try:
        return bpe.NextCache(cache, background)
    except RuntimeError:
        return bpe.NextCache(cache, False)


def _spare_cpu(threads: int) -> bool:
    """Whether this process may run on more CPUs than ``threads``."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cpus > threads


_NO_IDS = np.empty(0, np.uint32)  # an ``out`` with no room: the first call that needs room makes it
_NO_CACHE = np.empty(0, np.int64)  # a cache's type, as the pool's caches have it (bpe.new_cache)


def _room(out: np.ndarray, ids: int, least: int) -> np.ndarray:
    """``out``, or a new one with room for ``ids`` ids (``least`` at least) if it has not."""
    return out if out.size >= ids else np.empty(max(ids, least), np.uint32)


def _check_threads(num_threads) -> None:
    if num_threads is not None and (not isinstance(num_threads, (int, np.integer)) or num_threads < 1):
        raise ValueError(f"num_threads must be a positive integer or None (all cores), got {num_threads!r}")


def _range_edges(offsets: np.ndarray, threads: int) -> list[int]:
    """Where the ranges of a batch start (and the last ends): contiguous runs of
    documents, cut by ``offsets`` (bytes, or a measure of them), the same number a thread
    (3 ranges on 2 threads had left one idle for a third).

    >>> _range_edges(np.array([0, 5, 9, 200_000, 200_001]), 2)
    [0, 3, 4]
    """
    n_docs = offsets.size - 1
    n_ranges = 1
    if threads > 1:
        per_thread = int(offsets[-1] - offsets[0]) // (_RANGE_BYTES * threads)
        n_ranges = min(n_docs, threads * max(1, min(_RANGES_PER_THREAD, per_thread)))
    if n_ranges == 1:
        return [0, n_docs]
    # integers and one searchsorted: linspace, unique and concatenate had taken 15 µs
    # of a two-thread call that encodes 200 KB in 150 µs of kernel time a thread
    lo, hi = int(offsets[0]), int(offsets[-1])
    edges = [0]
    for c in offsets.searchsorted([lo + (hi - lo) * i // n_ranges for i in range(1, n_ranges)]).tolist() + [n_docs]:
        if c > edges[-1]:
            edges.append(c)
    return edges


def _run_ranges(work, edges: list[int], threads: int) -> Iterator:
    """``work(k, d0, d1)`` of every range k, in order, once all are done: one range on the
    calling thread; more on the calling thread and up to ``threads - 1`` of the process's
    pool, each taking the next range no thread has taken until none is left.

    The calling thread takes range 0 at once, so it never waits while a range is left to
    start. When it only waited for the pool, every batch paid two thread wake-ups before
    its first range began and after its last ended (bench/results/session52-20261207.md);
    when each range was a task of the pool, each cost the calling thread a wake-up call
    (15-20 µs on this VM) before it began its own. A range that fails raises once the
    ranges before it are done (all were taken first), so the first failing range is the
    one reported, whoever ran it; no range is started after one failed.
    """
    n = len(edges) - 1
    if n == 1:
        yield work(0, edges[0], edges[1])
        return
    done: list = [None] * n  # (True, result) or (False, exception) of each range run
    claim = itertools.count()  # the next range: next() is atomic, under the GIL
    failed: list[int] = []

    def take() -> None:
        for k in claim:
            if k >= n or failed:
                return
            try:
                done[k] = (True, work(k, edges[k], edges[k + 1]))
            except Exception as e:  # noqa: BLE001 - raised below, in its turn
                done[k] = (False, e)
                failed.append(k)
                return

    pool = _thread_pool(threads - 1)
    helpers = [pool.submit(take) for _ in range(min(threads, n) - 1)]
    try:
        take()
    except BaseException:  # Ctrl-C in this thread's range: the others start no more
        failed.append(-1)
        for f in helpers:
            f.cancel()
        raise
    for f in helpers:  # a helper that never started has nothing to do (all are taken)
        if not f.cancel():
            f.result()
    for ok, got in done:  # (after a failure: None past it, never reached)
        if not ok:
            raise got
        yield got


def _finished(out: np.ndarray, n: int, out_doc: np.ndarray, finish):
    """A range's ``(ids, doc_offsets)``, or what ``finish`` makes of them."""
    if finish is not None:
        return finish(out[:n], out_doc)
    out.resize(n, refcheck=False)  # in place: room for one id a byte is 4-5x too much
    return out, out_doc


def _specials_in_vocab(vocab: Mapping[int, bytes], names: Sequence[str]) -> tuple[dict[str, int], list[str]]:
    """``({name: vocab id}, [names to number after the vocab])`` for special names.

    A name spelled by a vocab token of two bytes or more takes that token's id (the lowest
    one); a one-byte token stays a byte, which a byte-level model cannot lose.
    """
    wanted = {name.encode("utf-8"): name for name in names}
    held: dict[str, int] = {}
    for i, b in sorted(vocab.items()):
        name = wanted.get(bytes(b))
        if name is not None and len(b) > 1 and name not in held:
            held[name] = int(i)
    return held, [name for name in dict.fromkeys(names) if name not in held]


def _is_index(i: Any) -> bool:
    """Whether ``i`` can be an id: an integer (not a bool), not negative.

    >>> _is_index(3), _is_index(-1), _is_index(True), _is_index(2.0)
    (True, False, False, False)
    """
    return isinstance(i, (int, np.integer)) and not isinstance(i, bool) and i >= 0


@contextlib.contextmanager
def _naming(path: Path):
    """A ModelFileError raised inside, about the content of the file at ``path``, names it.

    >>> with _naming(Path("m/tokenizer.json")):
    ...     raise ModelFileError("vocab id -1 is not an id")
    Traceback (most recent call last):
    dwstok.errors.ModelFileError: m/tokenizer.json: vocab id -1 is not an id
    """
    try:
        yield
    except ModelFileError as e:
        if str(path) in str(e):
            raise
        raise ModelFileError(f"{path}: {e}") from None


class Tokenizer:
    """A byte-level BPE tokenizer: a pretokenizer pattern, a vocabulary, merges, specials.

    Build one with :meth:`load`, :meth:`from_tiktoken` or :meth:`from_vocab_merges`.
    """

    def __init__(
        self,
        *,
        tokens: list[bytes],
        specials: Mapping[str, int],
        merges: Sequence[tuple[int, int, int]],
        merge_rule: str,
        pattern: str,
        version: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ):
        if merge_rule not in MERGE_RULES:
            raise ModelFileError(f"unknown merge_rule {merge_rule!r}; expected one of {MERGE_RULES}")
        self.pattern_name, self.pattern = resolve(pattern)
        self.merge_rule = merge_rule
        self.version = version
        self.metadata = dict(metadata or {})
        self.special_tokens = dict(specials)
        for name, i in self.special_tokens.items():
            if not _is_index(i):
                raise ModelFileError(f"special token {name!r} has a bad id {i!r}")
        n_vocab = max([len(tokens) - 1, *self.special_tokens.values()]) + 1
        if n_vocab > MAX_IDS:  # (before the list below: an id of 10**12 was a MemoryError)
            top = max(self.special_tokens.items(), key=lambda kv: kv[1], default=("", -1))
            what = f"special token {top[0]!r} has id {top[1]:,}" if top[1] >= len(tokens) else f"{len(tokens):,} tokens"
            raise ModelFileError(
                f"{what}: the vocabulary would need {n_vocab:,} ids, more than the {MAX_IDS:,}"
                " the encoder takes (it keeps an id in 21 bits)"
            )
        tokens = list(tokens) + [b""] * (n_vocab - len(tokens))
        for name, i in self.special_tokens.items():
            if tokens[i]:
                raise ModelFileError(f"special token {name!r} has id {i}, which is already the token {tokens[i]!r}")
            tokens[i] = name.encode("utf-8")
        self.n_vocab = n_vocab
        self._tokens = tokens
        self._merge_ids = np.asarray(merges, np.int64).reshape(-1, 3)
        special_ids = set(self.special_tokens.values())
        self._valid = np.fromiter((bool(t) for t in tokens), bool, n_vocab)
        singles = {t[0] for i, t in enumerate(tokens) if len(t) == 1 and i not in special_ids}
        if len(singles) < 256:
            missing = sorted(set(range(256)) - singles)[:8]
            raise ModelFileError(
                f"the vocabulary lacks one-byte tokens for {256 - len(singles)} byte values"
                f" (first: {missing}); a byte-level model needs all 256"
            )
        m = self._merge_ids
        if m.size and (m.min() < 0 or m.max() >= n_vocab or not self._valid[m].all()):
            raise ModelFileError("a merge refers to an id that is not a token")
        for left, right, new in m.tolist() if merge_rule == "merges" else ():
            if tokens[left] + tokens[right] != tokens[new] or new in special_ids:
                raise ModelFileError(
                    f"merge ({left}, {right}) -> {new} is inconsistent: {tokens[left]!r} + {tokens[right]!r}"
                    f" is not {tokens[new]!r}"
                )
        self._scanner = get_scanner(self.pattern)
        self._set_runtime()
        # The kernels' tables now if the kernels are compiled; else on the first call
        # that needs them (while they compile, HF tokenizers encodes: kernel_cache.py).
        self._native_now()

    def _set_runtime(self, packed: np.ndarray | None = None) -> None:
        """What encoding needs beyond the model: caches, and the kernels' tables if
        ``packed`` is given."""
        self._special_res: dict[frozenset, re.Pattern] = {}
        self._caches = _CachePool()
        self._bridge = None
        self._bridge_tried = False
        self._native_lock = threading.Lock()
        self._native: tuple | None = None
        # (list kernel, address of its descriptor, the pool's free entries, what the
        # descriptor points at: see _lister) for encode(), once _encode_list made a list
        self._list_call: tuple | None = None
        if packed is not None:
            self._set_native(packed)

    def _set_native(self, packed: np.ndarray) -> None:
        # The kernels take the tables as one array (one argument to unbox per call, not 11);
        # the tables are views of it, so the arrays are held once.
        packed = bpe.on_huge_pages(packed)  # an unpickled copy starts anywhere
        sc = self._scanner
        # the scanner's own kernel, kept, as its compiled function (no dispatch a call):
        # _encode_bytes gives it these types, the text as bytes and a cache and an out
        # from _CachePool
        fused = None
        if sc.kind >= 0:
            kernel = compiled_entry(bpe.fused_kernel(sc.kind), sc.kind, sc.table, b"", packed, _NO_CACHE, _NO_IDS)
            fused = (kernel, sc.kind, sc.table, packed)
        self._native = (packed, bpe.unpack_tables(packed), fused)

    def _kernels(self) -> tuple:
        """``(packed tables, tables, fused-path arguments)`` for the kernels, built on
        first use, after waiting for a background compile that is under way."""
        with self._native_lock:
            if self._native is None:
                if not kernel_cache.usable():
                    kernel_cache.wait()
                special_ids = set(self.special_tokens.values())
                m = self._merge_ids
                skip = special_ids | {i for i, t in enumerate(self._tokens) if not t}
                tables = bpe.build_tables(self._tokens, m[:, 0], m[:, 1], m[:, 2], rule=self.merge_rule, skip=skip)
                self._set_native(bpe.pack_tables(tables))
        return self._native

    def _native_now(self) -> tuple | None:
        """:meth:`_kernels` if the kernels can run without a long compile, else None."""
        if self._native is None and kernel_cache.usable():
            return self._kernels()
        return self._native

    def _hf(self):
        """The HF bridge (hf_bridge.py) for encoding while the kernels compile, or None."""
        if not self._bridge_tried:
            from .hf_bridge import HfBridge

            try:
                self._bridge = HfBridge.for_tokenizer(self)
            except Exception:  # noqa: BLE001 - any failure means: no bridge, use the kernels
                self._bridge = None
            self._bridge_tried = True
        return self._bridge

    @property
    def _packed(self) -> np.ndarray:
        return self._kernels()[0]

    @property
    def _tables(self) -> bpe.BpeTables:
        return self._kernels()[1]

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_vocab_merges(
        cls,
        vocab: Mapping[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        *,
        special_tokens: Mapping[str, int] | Sequence[str] = (),
        pattern: str = "o200k",
        version: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Tokenizer:
        """A plain merge-order model (``merge_rule="merges"``) from merges in creation order.

        A merge's token is the vocab id with its bytes (the lowest such id not taken by an
        earlier merge), or the next id after the vocab when there is none. Specials: a
        mapping gives their ids. In a sequence of names, a name whose bytes the vocab
        already holds keeps that id (GPT-2's ``vocab.json`` has ``<|endoftext|>`` at 50256,
        and passes it again as a special); the others are numbered after the last id.
        """
        if isinstance(special_tokens, Mapping):
            special_ids, pending = dict(special_tokens), []
        else:
            special_tokens = list(special_tokens)
            special_ids, pending = _specials_in_vocab(vocab, special_tokens)
        reserved = set(special_ids.values())
        bad = next((i for i in vocab if not _is_index(i) or i >= MAX_IDS), None)
        if bad is not None:  # (a negative id had replaced another token; 10**12 was a MemoryError)
            raise ModelFileError(f"vocab id {bad!r} is not an id from 0 to {MAX_IDS - 1:,}")
        size = max([-1, *vocab.keys(), *reserved]) + 1
        tokens = [b""] * size
        by_bytes: dict[bytes, list[int]] = {}
        for i, b in sorted(vocab.items()):
            if i in reserved:
                continue  # a special's slot: the vocab may spell its name, the special wins
            b = bytes(b)
            if not b:
                raise ModelFileError(f"vocab id {i} has empty bytes")
            tokens[i] = b
            by_bytes.setdefault(b, []).append(i)
        claimed: set[int] = set()
        first = {b: ids[0] for b, ids in by_bytes.items()}
        triples = []
        for k, (a, b) in enumerate(merges):
            a, b = bytes(a), bytes(b)
            if a not in first or b not in first:
                missing = a if a not in first else b
                raise ModelFileError(f"merge {k} ({a!r}, {b!r}) uses {missing!r}, which is neither in vocab nor made by an earlier merge")
            ab = a + b
            new = next((i for i in by_bytes.get(ab, ()) if i not in claimed), None)
            if new is None:
                new = len(tokens)
                tokens.append(ab)
                by_bytes.setdefault(ab, []).append(new)
                first.setdefault(ab, new)
            claimed.add(new)
            triples.append((first[a], first[b], new))
        if not isinstance(special_tokens, Mapping):
            after = {name: len(tokens) + j for j, name in enumerate(pending)}
            special_ids = {name: special_ids.get(name, after.get(name)) for name in dict.fromkeys(special_tokens)}
        return cls(
            tokens=tokens,
            specials=special_ids,
            merges=triples,
            merge_rule="merges",
            pattern=pattern,
            version=version,
            metadata=metadata,
        )

    @classmethod
    def from_tiktoken(
        cls,
        path: str | os.PathLike,
        *,
        pattern: str,
        special_tokens: Mapping[str, int],
        version: str | None = None,
    ) -> Tokenizer:
        """A tiktoken rank file (``base64 rank`` lines); ``merge_rule="ranks"``, ids = ranks.

        >>> tok = Tokenizer.from_tiktoken("cl100k_base.tiktoken",
        ...     pattern="cl100k", special_tokens={"<|endoftext|>": 100257})  # doctest: +SKIP
        """
        from .tiktoken_compat import rank_lines

        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ModelFileError(f"cannot read tiktoken file {path}: {e.strerror}") from None
        ranks = rank_lines(path, data)
        tokens = [b""] * (max(ranks.values()) + 1 if ranks else 0)
        for b, r in ranks.items():
            tokens[r] = b
        with _naming(path):
            return cls(
                tokens=tokens,
                specials=special_tokens,
                merges=(),
                merge_rule="ranks",
                pattern=pattern,
                version=version,
                metadata={"source": path.name},
            )

    @classmethod
    def load(
        cls, path: str | os.PathLike, *, expect_pattern: str | None = None, expect_version: str | None = None
    ) -> Tokenizer:
        """Load a model, checking (if given) its pattern and version.

        ``path`` is the native ``model.json`` (its hash checked) or the folder holding it,
        an export folder, its ``tokenizer.json``, or its ``tokenizer.tiktoken`` (with
        ``tiktoken.json`` beside it): every one gives the model's ids.

        >>> tok = Tokenizer.load("work/32.3/export", expect_version="32.3")  # doctest: +SKIP
        """
        from . import export_files

        kind, path = export_files.kind_of(path)
        if kind != "model":
            tok = cls._load_export(kind, path)
            _check_expected(path, tok.pattern, tok.pattern_name, tok.version, expect_pattern, expect_version)
            return tok
        c = model_file.read(path)
        _check_expected(path, c["pattern"], c["pattern_name"], c["version"], expect_pattern, expect_version)
        try:
            size = c["n_vocab"]
            # Checked before the list is allocated: a corrupt n_vocab of 10**12 was a
            # MemoryError. Ids may leave gaps, but not more gaps than tokens.
            n_entries = len(c["vocab"]) + len(c["specials"])
            if not isinstance(size, int) or size < 0 or size > 2 * n_entries + 256:
                raise ModelFileError(f"model file {path} says n_vocab {size} but holds only {n_entries} tokens")
            tokens = [b""] * size
            for i, text in c["vocab"]:
                if type(i) is not int or not 0 <= i < size:  # (-1 had replaced the last token)
                    raise ModelFileError(f"model file {path} has vocab id {i!r}, not an id from 0 to {size - 1}")
                if tokens[i]:
                    raise ModelFileError(f"model file {path} gives vocab id {i} twice")
                tokens[i] = model_file.token_bytes(text)
            merges = [tuple(m) for m in c["merges"]]
            if any(len(m) != 3 for m in merges):
                raise ValueError("merge rows must have 3 ids")
            with _naming(path):
                tok = cls(
                    tokens=tokens,
                    specials=c["specials"],
                    merges=merges,
                    merge_rule=c["merge_rule"],
                    pattern=c["pattern"],
                    version=c["version"],
                    metadata=c["metadata"],
                )
        except (TypeError, ValueError, IndexError) as e:
            raise ModelFileError(f"model file {path} has malformed content ({e})") from None
        if tok.n_vocab != size:
            raise ModelFileError(f"model file {path} says n_vocab {size} but its ids need {tok.n_vocab}")
        return tok

    @classmethod
    def _load_export(cls, kind: str, path: Path) -> Tokenizer:
        from . import export_files, tiktoken_compat

        if kind == "hf":
            m = export_files.hf_model(path)
            with _naming(path):
                return cls.from_vocab_merges(
                    m["vocab"], m["merges"], special_tokens=m["special_tokens"], pattern=m["pattern"],
                    version=m["version"], metadata={"source": path.name},
                )
        meta = tiktoken_compat.read_meta(path)
        ranks_path = tiktoken_compat.meta_path(path).parent / meta["file"]
        tiktoken_compat.read_ranks(ranks_path, expected_sha256=meta["sha256"])  # the pin
        return cls.from_tiktoken(
            ranks_path, pattern=meta["pat_str"], special_tokens=meta["special_tokens"], version=meta.get("version")
        )

    def save(self, path: str | os.PathLike) -> None:
        """Write the native model file (atomically)."""
        model_file.write(path, self._content())

    def _content(self) -> dict[str, Any]:
        special_ids = set(self.special_tokens.values())
        c = {
            "format": model_file.FORMAT,
            "format_version": model_file.FORMAT_VERSION,
            "version": self.version,
            "pattern_name": self.pattern_name,
            "pattern": self.pattern,
            "merge_rule": self.merge_rule,
            "n_vocab": self.n_vocab,
            "specials": dict(sorted(self.special_tokens.items(), key=lambda kv: kv[1])),
            "metadata": self.metadata,
            "vocab": [
                [i, model_file.token_text(t)] for i, t in enumerate(self._tokens) if t and i not in special_ids
            ],
            "merges": self._merge_ids.tolist(),
        }
        c["sha256"] = model_file.content_hash(c)
        return c

    @cached_property
    def sha256(self) -> str:
        """Content hash of the model (the one its native file records)."""
        return self._content()["sha256"]

    # ------------------------------------------------------------------ attributes

    @cached_property
    def vocab(self) -> dict[int, bytes]:
        """Every id → its bytes (a special → its name in UTF-8)."""
        return {i: t for i, t in enumerate(self._tokens) if t}

    @cached_property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """Merges in rank order. For a tiktoken model: the split each token is made from."""
        t = self._tokens
        if self.merge_rule == "merges":
            return [(t[a], t[b]) for a, b, _ in self._merge_ids.tolist()]
        out = []
        specials = set(self.special_tokens.values())
        for i, b in enumerate(t):
            if len(b) < 2 or i in specials:
                continue
            parts = bpe.split_token(self._tables, i, i)
            if len(parts) == 2:
                out.append((t[parts[0]], t[parts[1]]))
        return out

    def __getstate__(self) -> dict:
        # For process pools: the model and the packed tables. Not the views of them (a
        # pickled view is a copy), the piece caches, nor the scanner: its tables (1.1 MB
        # for o200k) come from the pattern, once per process.
        state = dict(self.__dict__)
        for k in ("_caches", "_native", "_native_lock", "_bridge", "_bridge_tried", "_special_res", "_scanner", "_id_lists", "_lister", "_list_call"):
            state.pop(k, None)
        state["_packed_tables"] = self._native[0] if self._native is not None else None
        return state

    def __setstate__(self, state: dict) -> None:
        packed = state.pop("_packed_tables", None)
        self.__dict__.update(state)
        self._scanner = get_scanner(self.pattern)
        self._set_runtime(packed)
        if packed is None:
            self._native_now()

    def __repr__(self) -> str:
        return (
            f"Tokenizer(n_vocab={self.n_vocab}, pattern={self.pattern_name or self.pattern!r},"
            f" version={self.version!r}, merge_rule={self.merge_rule!r})"
        )

    # ------------------------------------------------------------------ encoding

    def _encode_bytes(self, buf: bytes) -> np.ndarray:
        if not buf:
            return np.zeros(0, np.uint32)
        native = self._native or self._native_now()
        if native is None:
            bridge = self._hf()
            if bridge is not None:
                return bridge.encode_bytes(buf)
            native = self._kernels()
        if native[2] is None:
            arr = np.frombuffer(buf, np.uint8)
            return bpe.encode_bounds(arr, self._scanner.bounds(arr), native[0])
        kernel, kind, table, tables = native[2]
        cache, out, slot = self._caches.take(len(buf), len(buf))
        try:
            n = kernel(kind, table, buf, tables, cache, out)  # bytes as they are
            return out[:n].copy()  # out goes back to the pool
        finally:
            self._caches.give(cache, out, slot)

    def _pooled(self, text):
        """``encode_to_numpy(text)`` the usual way, or None where the general way must go:
        no kernels yet, no str, a lone surrogate, an empty pool, a text longer than the
        pooled arrays.

        It takes a free pool entry and gives it back itself, as _CachePool.take and give
        would (give, for a cache due to grow): on a short text each Python call in
        between had cost a tenth of the time (bench/results/session31-20261205.md).
        ``encode()`` does the same for lists, inline.
        """
        call = self._native[2] if self._native is not None else None  # (kernel, kind, scanner table, packed tables)
        if call is None or type(text) is not str:
            return None
        try:
            buf = text.encode()
        except UnicodeEncodeError:
            return None  # _utf8 names the surrogate
        if not buf:
            return np.zeros(0, np.uint32)
        free = self._caches.free
        try:
            slot, got = free.popitem()
        except KeyError:  # none free: the pool makes one
            return None
        cache, out = got
        if len(buf) > len(out) or len(buf) > len(cache):  # take() would make one
            free[slot] = got
            return None
        try:
            n = call[0](call[1], call[2], buf, call[3], cache, out)
            return out[:n].copy()  # out goes back to the pool
        finally:
            if cache[_GROW]:
                self._caches.give(cache, out, slot)
            else:
                free[slot] = got

    def _encode_list(self, buf: bytes) -> list[int]:
        """``_encode_bytes(buf)`` as a list, with no array of its own in between where the
        kernels can make it (then ``encode()`` calls that kernel itself)."""
        native = self._native
        if native is None or native[2] is None or not buf:
            return self._as_list(self._encode_bytes(buf))
        kernel, kind, table, tables = native[2]
        lister = self._lister
        cache, out, slot = self._caches.take(len(buf), len(buf))
        try:
            if lister is None:
                n = kernel(kind, table, buf, tables, cache, out)
                return self._id_lists.to_list(out[:n])
            self._list_call = (lister[0], lister[1], self._caches.free, lister[2])
            box = [None]  # the kernel puts the list here (dwstok.pylist.list_into)
            n = lister[0](buf, lister[1], cache, out, id(box)) & _COUNT
            ids = box[0]
            return out[:n].tolist() if ids is None else ids  # None: no memory (tolist raises)
        finally:
            self._caches.give(cache, out, slot)

    @cached_property
    def _lister(self) -> tuple | None:
        """``(kernel, d, kept)`` that make ``encode()``'s list in the call that encodes:
        the list kernel, the address of its descriptor (bpe.list_consts), and the
        descriptor and the arrays it points at, held here so that they outlive every call
        given the address. None where dwstok.pylist cannot make lists on this interpreter."""
        table = self._id_lists.kernel_table()
        if table is None:
            return None
        _, kind, scan_table, packed = self._native[2]
        consts = bpe.list_consts(kind, scan_table, packed, table)
        kernel = compiled_entry(bpe.list_kernel(kind), b"", 0, _NO_CACHE, _NO_IDS, 0)
        return kernel, consts.ctypes.data, (consts, scan_table, packed, table)

    def _allowed(self, allowed_special) -> frozenset:
        if not allowed_special:  # the usual case, once per call
            return _NO_SPECIALS
        if allowed_special == "all":
            return frozenset(self.special_tokens)
        if isinstance(allowed_special, str):
            allowed_special = {allowed_special}
        allowed = frozenset(allowed_special)
        unknown = allowed - self.special_tokens.keys()
        if unknown:
            raise DwstokError(
                f"allowed_special names {sorted(unknown)} that are not special tokens of this model"
                f" (it has {len(self.special_tokens)}; pass allowed_special='all' for every one)"
            )
        return allowed

    def _special_re(self, allowed: frozenset) -> re.Pattern:
        r = self._special_res.get(allowed)
        if r is None:
            names = sorted(allowed, key=lambda s: (-len(s), s))  # longest match first
            r = self._special_res[allowed] = re.compile("|".join(map(re.escape, names)))
        return r

    def _encode_np(self, text: str, allowed: frozenset) -> np.ndarray:
        if not allowed:
            return self._encode_bytes(_utf8(text))
        _utf8(text)  # surrogate check with the position in the whole text
        parts = []
        pos = 0
        for m in self._special_re(allowed).finditer(text):
            parts.append(self._encode_bytes(_utf8(text[pos : m.start()])))
            parts.append(np.array([self.special_tokens[m.group()]], np.uint32))
            pos = m.end()
        parts.append(self._encode_bytes(_utf8(text[pos:])))
        return np.concatenate(parts)

    def encode(self, text: str, *, allowed_special: Iterable[str] | str = ()) -> list[int]:
        """Token ids of ``text``. Special-token names in the text are ordinary text unless
        listed in ``allowed_special`` (or ``"all"``).

        >>> tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [], special_tokens=["<bos>"])
        >>> tok.encode("<bos>!", allowed_special={"<bos>"}), len(tok.encode("<bos>!"))
        ([256, 33], 6)
        """
        if allowed_special:
            return self._as_list(self._encode_np(text, self._allowed(allowed_special)))
        # The usual way, inline (on a short text a Python call is a tenth of the time):
        # take a free pool entry, call the list kernel (dwstok.pylist.list_into: the list
        # is made in the call that encodes), give the entry back, or to give() when the
        # kernel says the cache is due to grow. The general way (_encode_list) goes first
        # (and resolves the kernel), and where this cannot: no str, a lone surrogate, no
        # free entry, a text longer than the pooled arrays.
        call = self._list_call
        if call is None or type(text) is not str:
            return self._encode_list(_utf8(text))
        try:
            buf = text.encode()
        except UnicodeEncodeError:
            return self._encode_list(_utf8(text))  # (_utf8 names the surrogate)
        if not buf:
            return []
        free = call[2]
        try:
            slot, got = free.popitem()
        except KeyError:  # every entry taken (by other threads)
            return self._encode_list(buf)
        cache, out = got
        if len(buf) > len(out) or len(buf) > len(cache):  # take() makes room
            free[slot] = got
            return self._encode_list(buf)
        n = 0
        try:
            box = [None]  # the kernel puts the list here
            n = call[0](buf, call[1], cache, out, id(box))
            ids = box[0]
            # None: no memory for the list (then tolist raises); read before out goes back
            return out[: n & _COUNT].tolist() if ids is None else ids
        finally:
            if n < _GROWS:
                free[slot] = got
            else:
                self._caches.give(cache, out, slot)

    @cached_property
    def _id_lists(self) -> IdLists:
        return IdLists(self.n_vocab)

    def _as_list(self, ids: np.ndarray) -> list[int]:
        """``ids.tolist()``, for ids below ``n_vocab``, from ints made once (dwstok.pylist).
        Not while the kernels compile: its kernel would compile here, in the foreground."""
        if self._native is None:
            return ids.tolist()
        return self._id_lists.to_list(ids)

    def encode_with_offsets(
        self, text: str, *, allowed_special: Iterable[str] | str = ()
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids of ``text`` and, for each, the ``(start, end)`` character offsets it covers.

        A token whose bytes begin or end inside a character (a split character) covers
        that whole character, so its neighbour covers it too; such tokens are exactly the
        ones whose ``text[start:end]`` is not their own text.

        >>> tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"h", b"i")])
        >>> tok.encode_with_offsets("hi é")
        ([256, 32, 195, 169], [(0, 2), (2, 3), (3, 4), (3, 4)])
        """
        ids = self._encode_np(text, self._allowed(allowed_special))
        buf = np.frombuffer(_utf8(text), np.uint8)
        # char_at[b] = index of the character byte b belongs to (b = len(buf): len(text))
        char_at = np.cumsum(np.append((buf & 0xC0) != 0x80, True)) - 1
        ends = np.cumsum(self._token_lengths[ids])
        starts = ends - self._token_lengths[ids]
        first = char_at[starts]
        last = char_at[np.maximum(ends - 1, 0)] + 1
        # offsets are at most len(text): below n_vocab they come from the cached ints too
        pos = self._as_list if len(text) < self.n_vocab else np.ndarray.tolist
        return self._as_list(ids), list(zip(pos(first), pos(last)))

    @cached_property
    def _token_lengths(self) -> np.ndarray:
        return np.fromiter(map(len, self._tokens), np.int64, len(self._tokens))

    def encode_to_numpy(self, text: str, *, allowed_special: Iterable[str] | str = ()) -> np.ndarray:
        """Like :meth:`encode`, as a uint32 array."""
        if allowed_special:
            return self._encode_np(text, self._allowed(allowed_special))
        ids = self._pooled(text)
        return self._encode_bytes(_utf8(text)) if ids is None else ids

    def encode_ordinary(self, text: str) -> list[int]:
        """``encode`` with no specials parsed (tiktoken's name for it)."""
        return self.encode(text)

    def encode_batch(self, texts: Sequence[str], *, num_threads: int | None = None) -> list[list[int]]:
        """Encode many texts on ``num_threads`` threads (default: all cores), GIL released.

        Less than ``_SPLIT_MIN`` bytes in all (about: ``_text_size``) run on the calling thread, up to
        ``_FEW_TEXTS`` of them one by one (as :meth:`encode_ordinary`): for so little
        text, threads and a batch's set-up cost more than they save.
        """
        if isinstance(texts, (str, bytes)):  # a str is a sequence of one-character documents
            raise TypeError("encode_batch takes a list of texts, got one text: use encode(), or pass [text]")

        def lists(part: np.ndarray, doc: np.ndarray) -> list[list[int]]:
            if self._native is None:  # the bridge's ids: no kernel of ours compiles here
                return split_tolist(part, doc)
            return self._id_lists.to_lists(part, doc)

        if self._native is not None and self._native[2] is not None:  # the kernels run, on a native scanner
            texts = texts if isinstance(texts, (list, tuple)) else list(texts)
            if len(texts) <= _FEW_TEXTS and _text_size(texts) < _SPLIT_MIN:  # a call each costs less than a batch's set-up
                _check_threads(num_threads)
                return [self.encode(t) for t in texts]
            parts = self._encode_text_ranges(texts, num_threads, lists)
        else:
            parts = self._encode_ranges(*_utf8_docs(texts), num_threads, lists)
        parts = list(parts)
        if len(parts) == 1:  # (one range: its lists are the answer, no copy)
            return parts[0]
        out: list[list[int]] = []
        for part_lists in parts:
            out += part_lists
        return out

    def encode_utf8_batch(
        self, data: np.ndarray, offsets: np.ndarray, *, num_threads: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Encode documents held in one UTF-8 buffer (zero-copy from Arrow).

        Document i is ``data[offsets[i]:offsets[i+1]]``. Returns ``(ids, doc_offsets)``:
        flat uint32 ids and the n+1 boundaries of each document's ids. Less than
        ``_SPLIT_MIN`` bytes in all run on the calling thread.
        """
        parts = list(self._encode_ranges(data, offsets, num_threads))
        if not parts:
            return np.zeros(0, np.uint32), np.zeros(1, np.int64)
        if len(parts) == 1:
            return parts[0]
        ids = np.concatenate([p for p, _ in parts])
        doc_offsets = np.empty(sum(od.size - 1 for _, od in parts) + 1, np.int64)
        doc_offsets[0] = 0
        d = base = 0
        for part, od in parts:
            doc_offsets[d + 1 : d + od.size] = od[1:] + base
            d += od.size - 1
            base += part.size
        return ids, doc_offsets

    def _encode_ranges(self, data, offsets, num_threads: int | None, finish=None) -> Iterator:
        """``(ids, doc_offsets)`` of consecutive ranges of the documents, in order, or
        what ``finish(ids, doc_offsets)`` makes of them.

        On one thread, one range; on more, several a thread (``_RANGES_PER_THREAD``), on a
        pool kept for the process, yielded in order once all are done (``_run_ranges``).
        ``finish`` runs on the thread that encoded the range, as soon as it is encoded
        (lists made there hold the GIL while the other threads encode without it); the
        caller's thread would take ranges in order, so a range done first would wait for
        the ones before it.
        """
        _check_threads(num_threads)
        data = np.asarray(data)
        offsets = np.asarray(offsets)
        if data.dtype != np.uint8 or data.ndim != 1:
            raise TypeError("data must be a 1-D uint8 array")
        if offsets.ndim != 1 or offsets.size == 0 or offsets.dtype.kind not in "iu":
            raise TypeError("offsets must be a non-empty 1-D integer array")
        offsets = offsets.astype(np.int64, copy=False)
        if offsets[0] < 0 or offsets[-1] > data.size or (offsets.size > 1 and (offsets[1:] < offsets[:-1]).any()):
            raise ValueError("offsets must be non-decreasing and within data")
        n_docs = offsets.size - 1
        if n_docs == 0:
            return
        kernels = self._native or self._native_now()
        bridge = self._hf() if kernels is None else None
        if bridge is not None:  # compiling: HF, on its own threads
            done = bridge.encode_docs(data, offsets, 0, n_docs)
            if done is not None:
                yield done if finish is None else finish(*done)
                return
        kernels = kernels or self._kernels()
        native = self._scanner.kind >= 0
        if not native:  # the regex fallback scans in Python, before the threads start
            bounds, doc_bidx = self._batch_bounds(data, offsets)
        threads = min(num_threads or os.cpu_count() or 1, n_docs)
        if threads > 1 and offsets[-1] - offsets[0] < _SPLIT_MIN:
            threads = 1
        edges = _range_edges(offsets, threads)

        def work(k: int, d0: int, d1: int):
            if native:
                return self._encode_range(data, offsets, d0, d1, kernels, threads, k % threads, finish)
            out = np.empty(max(int(offsets[d1] - offsets[d0]), 1), np.uint32)
            out_doc = np.empty(d1 - d0 + 1, np.int64)
            n = bpe._encode_docs(data, bounds, doc_bidx, d0, d1, kernels[0], out, out_doc)
            return _finished(out, n, out_doc, finish)

        yield from _run_ranges(work, edges, threads)

    def _encode_text_ranges(self, texts: Sequence[str], num_threads: int | None, finish) -> Iterator:
        """``_encode_ranges`` for ``encode_batch``'s texts, each range's texts made UTF-8
        on the thread that encodes it: ``str.encode`` holds the GIL, but the other
        threads' kernels run meanwhile, where converting them all first, on the calling
        thread, left the others idle."""
        _check_threads(num_threads)
        if not texts:
            return
        kernels = self._native
        threads = min(num_threads or os.cpu_count() or 1, len(texts))
        # (the total first, so that a small batch skips building the cut)
        if threads == 1 or _text_size(texts) < _SPLIT_MIN:  # one range, on this thread: no cut, no pool
            data, offsets = _utf8_docs(texts)
            yield self._encode_range(data, offsets, 0, len(texts), kernels, 1, 0, finish)
            return
        sizes = np.zeros(len(texts) + 1, np.int64)  # cut by sizes in memory (_text_size): bytes are not known yet
        np.cumsum(np.fromiter(map(sys.getsizeof, texts), np.int64, len(texts)), out=sizes[1:])

        def work(k: int, d0: int, d1: int):
            data, offsets = _utf8_docs(texts[d0:d1], d0)
            return self._encode_range(data, offsets, 0, d1 - d0, kernels, threads, k % threads, finish)

        yield from _run_ranges(work, _range_edges(sizes, threads), threads)

    def _encode_range(self, data, offsets, d0: int, d1: int, kernels, threads: int, slot: int, finish):
        """Documents d0..d1 by the fused kernel, with a pooled cache (``threads``: the
        call's, for the pool; ``slot``: the cache to take if it is free)."""
        out = np.empty(max(int(offsets[d1] - offsets[d0]), 1), np.uint32)
        out_doc = np.empty(d1 - d0 + 1, np.int64)
        sc = self._scanner
        cache, ids, slot = self._caches.take(int(offsets[d1] - offsets[d0]), slot=slot, threads=threads)
        try:
            n = bpe._encode_docs_fused(sc.kind, sc.table, data, offsets, d0, d1, kernels[0], cache, out, out_doc)
        finally:
            self._caches.give(cache, ids, slot, threads)
        return _finished(out, n, out_doc, finish)

    def _batch_bounds(self, data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pretoken bounds of every document, as absolute offsets, and where each document's start."""
        parts = []
        counts = np.zeros(offsets.size, np.int64)
        for d in range(offsets.size - 1):
            s, e = int(offsets[d]), int(offsets[d + 1])
            if e > s:
                b = self._scanner.bounds(data[s:e])
                parts.append(b[:-1] + s)
                counts[d + 1] = b.size - 1
            # an empty document has no pieces
        parts.append(np.array([offsets[-1]], np.int64))
        bounds = np.concatenate(parts) if parts else np.array([offsets[-1]], np.int64)
        doc_bidx = np.cumsum(counts)
        return bounds, doc_bidx

    def encode_iterable(self, chunks: Iterable[str], *, allowed_special: Iterable[str] | str = ()) -> Iterator[int]:
        """Ids of the concatenation of ``chunks``, lazily, holding back only what the next
        chunk could still change (the last pretokens, a partial special name).
        """
        allowed = self._allowed(allowed_special)
        max_special = max((len(s) for s in allowed), default=0)
        pending: list[str] = []
        seen = 0  # characters received: a bad character's position counts from the stream's start
        for chunk in chunks:
            if not isinstance(chunk, str):
                raise TypeError(f"encode_iterable needs str chunks, got {type(chunk).__name__}")
            if not chunk:
                continue
            _utf8(chunk, seen)  # checked on arrival, before any of it is held back
            seen += len(chunk)
            if pending and not allowed and run_class(chunk) == run_class(pending[-1][-1]) >= 0:
                # More of the run the text already ends in: nothing new can be cut, so
                # skip the rescan (a long run in small chunks stays linear).
                pending.append(chunk)
                continue
            pending.append(chunk)
            text = "".join(pending) if len(pending) > 1 else chunk
            cut = safe_cut(text, self._scanner, self._special_re(allowed) if allowed else None, max_special)
            if cut > 0:
                yield from self._as_list(self._encode_np(text[:cut], allowed))
                pending = [text[cut:]] if cut < len(text) else []
            else:
                pending = [text]
        if pending:
            yield from self._as_list(self._encode_np("".join(pending), allowed))

    # ------------------------------------------------------------------ decoding

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of ``ids`` (a special gives its name)."""
        return self._decode_checked(check_ids(_as_array(ids), self._valid))

    def _decode_checked(self, ids: np.ndarray) -> bytes:
        native = self._native or self._native_now()
        if native is None:  # the kernels are compiling: no need to wait for them
            return b"".join(map(self._tokens.__getitem__, ids.tolist()))
        return bpe.decode_ids(ids, native[1])

    def decode(self, ids: Iterable[int], *, errors: str = "strict", skip_special_tokens: bool = False) -> str:
        """The text of ``ids``; a special gives its name unless ``skip_special_tokens``.

        A window cut out of a longer id sequence (a training sample, a slice of a shard)
        can start or end inside a character; ``errors="replace"`` shows the cut bytes as
        U+FFFD instead of raising:

        >>> tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [], special_tokens=["<bos>"])
        >>> ids = tok.encode("héllo")
        >>> tok.decode(ids[2:], errors="replace"), tok.decode([256, *ids], skip_special_tokens=True)
        ('\ufffdllo', 'héllo')
        """
        if skip_special_tokens and self.special_tokens:
            arr = check_ids(_as_array(ids), self._valid)
            ids = arr[~np.isin(arr, np.fromiter(self.special_tokens.values(), np.int64))]
        return decode_text(self.decode_bytes(ids), errors)

    def decode_stream(self, ids: Iterable[int] | None = None, *, errors: str = "strict"):
        """A :class:`DecodeStream` to ``feed(id)`` one id at a time; given ``ids``, an
        iterator over the text as characters complete.
        """
        stream = DecodeStream(self._decode_checked, self._valid, errors)
        return stream if ids is None else iter_decode(stream, ids)


def _check_expected(path, pattern: str, pattern_name, version, expect_pattern, expect_version) -> None:
    if expect_pattern is not None:
        want_name, want = resolve(expect_pattern)
        if pattern != want:
            raise PatternMismatchError(
                f"model {path} was built with pattern {pattern_name or pattern!r}, but {want_name or want!r} was expected"
            )
    if expect_version is not None and version != expect_version:
        raise PatternMismatchError(
            f"model {path} is version {version!r}, but version {expect_version!r} was expected"
        )


def _as_array(ids) -> np.ndarray | list:
    if isinstance(ids, np.ndarray):
        return ids
    if isinstance(ids, (list, tuple)):
        return ids
    return list(ids)

