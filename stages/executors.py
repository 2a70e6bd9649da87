"""Executors only schedule: ``executor.map(fn, items) -> iterator of results, in order``.

A stage never knows which executor runs it. ``fn`` must be a module-level function and
``items`` picklable; each call does one shard's whole job (read, compute, write its
files and marker), so results are small summaries.

- ``LocalExecutor(workers)``: a process pool; ``workers=1`` runs inline, in this process.
  A stage whose shard job spends its time outside the GIL (Arrow I/O and nogil Numba
  kernels) says so with ``map(..., gil_free=True)`` and gets threads instead: no worker
  processes to spawn, and the model is loaded once (a spawned worker spends about 1.8 s
  of CPU on imports, the model and the Numba cache before its first shard).
- ``RayExecutor(address, workers)``: one Ray task per item on an existing cluster
  (``ray.init(address=...)``).

Progress goes to ``executor.progress`` (a ``Progress``; the CLI plugs in rich bars or
plain log lines). ``map`` reports each finished item as it completes, in completion
order, while still yielding results in input order.

>>> ex = LocalExecutor(workers=1)
>>> list(ex.map(abs, [-1, 2, -3]))
[1, 2, 3]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from dwstok.errors import ConfigError


class Progress:
    """Receives progress from stages and executors. This base class ignores it all.

    ``start`` opens a task (``total_bytes`` may be None when unknown); ``advance`` moves
    it; ``note`` is a one-line message such as "count: up to date".
    """

    def start(self, label: str, *, total_bytes: int | None = None, total_items: int | None = None) -> None:
        pass

    def advance(self, *, bytes: int = 0, docs: int = 0, items: int = 0) -> None:
        pass

    def finish(self, ok: bool = True) -> None:
        pass

    def note(self, message: str) -> None:
        pass


def _measure(result: Any) -> tuple[int, int]:
    """(bytes, docs) a result accounts for: attributes or keys named so, else zero."""
    if isinstance(result, dict):
        return int(result.get("bytes", 0) or 0), int(result.get("docs", 0) or 0)
    return int(getattr(result, "bytes", 0) or 0), int(getattr(result, "docs", 0) or 0)


class Executor:
    """Base class. Subclasses implement ``_run(fn, items, done)`` yielding in order."""

    name = "base"

    def __init__(self, workers: int = 1, progress: Progress | None = None):
        if not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"workers must be a positive integer, got {workers!r}")
        self.workers = workers
        self.progress = progress or Progress()

    def map(
        self,
        fn: Callable[[Any], Any],
        items: Iterable[Any],
        *,
        label: str = "",
        total_bytes: int | None = None,
        gil_free: bool = False,
    ) -> Iterator[Any]:
        """Apply ``fn`` to each item; yield results in input order.

        ``total_bytes`` (e.g. the input size) lets the progress bar show an ETA; each
        finished result advances it by its ``bytes``/``docs``. ``gil_free``: ``fn``
        spends its time outside the GIL, so threads run it in parallel (a hint; only
        the local executor uses it).
        """
        items = list(items)
        self.progress.start(label, total_bytes=total_bytes, total_items=len(items))

        def done(result: Any) -> None:
            b, d = _measure(result)
            self.progress.advance(bytes=b, docs=d, items=1)

        ok = False
        try:
            yield from self._run(fn, items, done, gil_free)
            ok = True
        finally:
            self.progress.finish(ok=ok)

    def _run(self, fn, items: Sequence[Any], done, gil_free: bool = False) -> Iterator[Any]:  # pragma: no cover
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def describe(self) -> str:
        return f"{self.name} ({self.workers} worker{'s' if self.workers != 1 else ''})"


class LocalExecutor(Executor):
    """A process pool on this machine; ``workers=1`` runs inline (no subprocess)."""

    name = "local"

    def _run(self, fn, items, done, gil_free=False):
        if self.workers == 1 or len(items) <= 1:
            for it in items:
                r = fn(it)
                done(r)
                yield r
            return
        import concurrent.futures as cf
        import multiprocessing as mp

        n = min(self.workers, len(items))
        if gil_free:
            pool = cf.ThreadPoolExecutor(max_workers=n, thread_name_prefix="dwstok-map")
        else:
            # spawn, not fork: the parent may hold pyarrow/numba threads, and a forked
            # child of a multithreaded process can deadlock on a lock some thread held.
            pool = cf.ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn"))
        with pool:
            futures = [pool.submit(fn, it) for it in items]
            for f in futures:
                f.add_done_callback(_ignore)
            pending = set(futures)
            results: dict[int, Any] = {}
            index = {f: i for i, f in enumerate(futures)}
            nxt = 0
            try:
                while nxt < len(futures):
                    finished, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
                    for f in finished:
                        results[index[f]] = f.result()  # re-raises a worker's error
                        done(results[index[f]])
                    while nxt in results:
                        yield results.pop(nxt)
                        nxt += 1
            except BaseException:
                for f in pending:
                    f.cancel()
                raise


def _ignore(_f) -> None:
    pass


class RayExecutor(Executor):
    """One Ray task per item on an existing cluster.

    ``address`` is passed to ``ray.init`` ("auto", "ray://host:10001", "host:6379");
    None starts a private local Ray instance with ``workers`` CPUs. Ray's own workers
    import this package, so the cluster must run the same dwstok install.
    """

    name = "ray"

    def __init__(self, workers: int = 1, progress: Progress | None = None, *, address: str | None = None):
        super().__init__(workers, progress)
        self.address = address
        self._started = False

    def connect(self):
        """The ``ray`` module, connected to the cluster (or a private one started)."""
        try:
            import ray
        except ImportError:
            raise ConfigError("the ray executor needs Ray: pip install 'dwstok[ray]'") from None
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False}
            if self.address:
                kwargs["address"] = self.address
            else:
                kwargs["num_cpus"] = self.workers
            try:
                ray.init(**kwargs)
            except ConnectionError as e:
                raise ConfigError(f"cannot connect to Ray at {self.address}: {e}") from None
            self._started = True
        return ray

    def _run(self, fn, items, done, gil_free=False):
        if not items:
            return
        ray = self.connect()
        # Ray can only wrap Python functions; a trampoline also takes builtins and
        # functools.partial objects.
        remote = ray.remote(num_cpus=1, max_retries=0)(_apply)
        # Submit at most `workers` tasks ahead, so a huge corpus does not queue every
        # shard at once; results still come back in input order.
        refs: list[Any] = []
        results: dict[int, Any] = {}
        inflight: dict[Any, int] = {}
        nxt_submit = 0
        nxt_yield = 0
        window = max(self.workers, 1) * 2
        try:
            while nxt_yield < len(items):
                while nxt_submit < len(items) and len(inflight) < window:
                    ref = remote.remote(fn, items[nxt_submit])
                    refs.append(ref)
                    inflight[ref] = nxt_submit
                    nxt_submit += 1
                ready, _ = ray.wait(list(inflight), num_returns=1)
                for ref in ready:
                    i = inflight.pop(ref)
                    try:
                        results[i] = ray.get(ref)
                    except ray.exceptions.RayTaskError as e:
                        # Re-raise the worker's own exception (InputError etc.).
                        cause = e.as_instanceof_cause()
                        raise (getattr(e, "cause", None) or cause) from None
                    done(results[i])
                while nxt_yield in results:
                    yield results.pop(nxt_yield)
                    nxt_yield += 1
        except BaseException:
            for ref in inflight:
                ray.cancel(ref, force=True)
            raise

    def close(self) -> None:
        if self._started:
            import ray

            ray.shutdown()
            self._started = False


def _apply(fn, item):
    return fn(item)


EXECUTORS = ("local", "ray")


def make_executor(
    name: str = "local",
    workers: int | None = None,
    *,
    address: str | None = None,
    progress: Progress | None = None,
) -> Executor:
    """An executor by name; ``workers`` defaults to the number of CPUs."""
    workers = workers or (os.cpu_count() or 1)
    if name == "local":
        return LocalExecutor(workers, progress)
    if name == "ray":
        return RayExecutor(workers, progress, address=address)
    raise ConfigError(f"unknown executor {name!r}: use one of {', '.join(EXECUTORS)}")
