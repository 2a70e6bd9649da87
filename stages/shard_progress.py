"""Progress from inside a map shard: bytes and documents per record batch.

``executor.map`` advances the progress bar when a shard *finishes*, so a big shard
shows nothing until it is done. A map stage can do better without knowing its
executor: it opens a channel around the map and puts the (picklable) reporter into
each task; the shard function meters every batch and returns only what it has not
reported yet, so the bar still ends exactly at the total.

>>> from stages.executors import LocalExecutor
>>> ex = LocalExecutor(1)
>>> with channel(ex, n_items=1) as rep:
...     m = meter(rep, limit=100)
...     m.add(bytes=60, docs=2); m.add(bytes=60, docs=1)
...     (m.bytes, m.docs)
(100, 3)

- inline (``LocalExecutor`` with one worker, one item, or threads): straight to
  ``executor.progress``, under the lock;
- a local process pool: through a ``multiprocessing.Manager`` queue that a thread of
  this process drains (about 0.3 s to start, once per stage run);
- Ray: the same, through a ``ray.util.queue.Queue`` (an actor on the cluster);
- any other executor: no channel; shards report when they finish, as before.

Calls to ``executor.progress`` are serialised by a lock while the channel is open, and
the queue is drained before each finished shard and before the bar closes, so no
update lands after its shard's own.
"""

from __future__ import annotations

import contextlib
import queue as _queue
import threading
from collections.abc import Iterator
from typing import Any

from .executors import Executor, LocalExecutor, Progress, RayExecutor


class Reporter:
    """What a task carries (``meter(reporter, limit)`` per shard); picklable."""

    def __init__(self, q: Any = None, sink: Any = None):
        self.q = q
        self.sink = sink  # inline only: a callable(bytes, docs); never pickled

    def send(self, nbytes: int, docs: int) -> None:
        if self.sink is not None:
            self.sink(nbytes, docs)
        elif self.q is not None:
            self.q.put((nbytes, docs))

    def __getstate__(self):
        return {"q": self.q, "sink": None}


class Meter:
    """One shard's running total; ``bytes`` never exceeds the shard's planned size."""

    def __init__(self, reporter: Reporter | None, limit: int):
        self.reporter = reporter
        self.limit = limit
        self.bytes = 0
        self.docs = 0

    def add(self, *, bytes: int = 0, docs: int = 0) -> None:
        b = max(0, min(int(bytes), self.limit - self.bytes))
        self.bytes += b
        self.docs += int(docs)
        if self.reporter is not None and (b or docs):
            self.reporter.send(b, int(docs))


def shard_result(outputs, stats, *, shard_bytes: int, shown: Meter | None = None) -> dict:
    """What a map task returns: its outputs, its stats, and the progress still to show.

    The bar counts each shard's planned size, so it ends at exactly 100%: a finished
    shard adds what its batches have not already shown; a resumed one (``shown`` None)
    adds its whole size.
    """
    shown_bytes, shown_docs = (shown.bytes, shown.docs) if shown is not None else (0, 0)
    return {
        "outputs": outputs,
        "stats": stats,
        "resumed": shown is None,
        "bytes": shard_bytes - shown_bytes,
        "docs": stats["docs"] - shown_docs,
    }


def meter(reporter: Reporter | None, limit: int) -> Meter:
    """A shard's meter (it only counts when the task carries no reporter)."""
    return Meter(reporter, limit)


class _Serialised(Progress):
    """Wraps the executor's progress while a channel is open: one lock for all calls,
    and queued batch updates flushed before a shard's own update and before finish."""

    def __init__(self, inner: Progress, q: Any = None):
        self.inner = inner
        self.q = q
        self.lock = threading.Lock()

    def drain(self) -> None:
        if self.q is None:
            return
        # Under the lock from get to advance: whoever drains, a popped update is shown
        # before anyone else's next update.
        with self.lock:
            while True:
                try:
                    b, d = self.q.get_nowait()
                except (_queue.Empty, EOFError, OSError):
                    return
                self.inner.advance(bytes=b, docs=d)

    def start(self, label, *, total_bytes=None, total_items=None):
        with self.lock:
            self.inner.start(label, total_bytes=total_bytes, total_items=total_items)

    def advance(self, *, bytes=0, docs=0, items=0):
        self.drain()
        with self.lock:
            self.inner.advance(bytes=bytes, docs=docs, items=items)

    def finish(self, ok=True):
        self.drain()
        with self.lock:
            self.inner.finish(ok=ok)

    def note(self, message):
        with self.lock:
            self.inner.note(message)


@contextlib.contextmanager
def channel(executor: Executor, n_items: int, *, gil_free: bool = False) -> Iterator[Reporter | None]:
    """Open a progress channel for one ``executor.map`` over ``n_items`` tasks.

    ``gil_free``: the map will run with that flag, so a local executor uses threads of
    this process, and reporters call the (locked) progress directly.
    """
    inline = isinstance(executor, LocalExecutor) and (executor.workers == 1 or n_items <= 1 or gil_free)
    original = executor.progress
    if inline:
        wrapped = _Serialised(original)
        executor.progress = wrapped
        try:
            yield Reporter(sink=lambda b, d: wrapped.advance(bytes=b, docs=d))
        finally:
            executor.progress = original
        return
    if isinstance(executor, LocalExecutor):
        import multiprocessing as mp
        import os
        from multiprocessing.managers import SyncManager

        from .executors import start_resource_tracker, worker_init

        start_resource_tracker()
        # The manager's server process dies with this one, as the pool's workers do.
        manager = SyncManager(ctx=mp.get_context("spawn"))
        manager.start(worker_init, (os.getpid(),))
        try:
            with _pumped(executor, manager.Queue()) as reporter:
                yield reporter
        finally:
            manager.shutdown()
    elif isinstance(executor, RayExecutor):
        executor.connect()  # first: without Ray, a ConfigError that says how to get it
        from ray.util.queue import Queue

        q = Queue()  # an actor: tasks on any node put to it, this process drains it
        try:
            with _pumped(executor, q) as reporter:
                yield reporter
        finally:
            q.shutdown()
    else:
        yield None


@contextlib.contextmanager
def _pumped(executor: Executor, q: Any) -> Iterator[Reporter]:
    """Reporters that put to ``q``, drained into the executor's progress by a thread."""
    original = executor.progress
    wrapped = _Serialised(original, q)
    executor.progress = wrapped
    stop = threading.Event()

    def pump() -> None:
        while not stop.wait(0.2):
            wrapped.drain()

    t = threading.Thread(target=pump, name="dwstok-shard-progress", daemon=True)
    t.start()
    try:
        yield Reporter(q=q)
    finally:
        stop.set()
        t.join()
        executor.progress = original
