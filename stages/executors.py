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
  (``ray.init(address=...)``); a cluster that does not answer within ``timeout``
  seconds (default 30) is an error, not a hang.

Progress goes to ``executor.progress`` (a ``Progress``; the CLI plugs in rich bars or
plain log lines). ``map`` reports each finished item as it completes, in completion
order, while still yielding results in input order.

>>> ex = LocalExecutor(workers=1)
>>> list(ex.map(abs, [-1, 2, -3]))
[1, 2, 3]
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from dwstok.errors import ConfigError, DwstokError


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

        n = min(self.workers, len(items))
        if gil_free:
            pool = cf.ThreadPoolExecutor(max_workers=n, thread_name_prefix="dwstok-map")
        else:
            import multiprocessing as mp  # (only here: 5 ms a run that maps on threads alone)

            start_resource_tracker()
            # spawn, not fork: the parent may hold pyarrow/numba threads, and a forked
            # child of a multithreaded process can deadlock on a lock some thread held.
            pool = cf.ProcessPoolExecutor(
                max_workers=n,
                mp_context=mp.get_context("spawn"),
                initializer=worker_init,
                initargs=(os.getpid(),),
            )
        try:
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
            except BaseException as e:
                for f in pending:
                    f.cancel()
                if isinstance(e, KeyboardInterrupt):
                    # Ctrl-C or SIGTERM: stop the workers now rather than let them
                    # finish their shards (one can take minutes). They leave temporary
                    # files in the staging folder, which the resumed run cleans.
                    _stop_workers(pool)
                raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _ignore(_f) -> None:
    pass


def _stop_workers(pool) -> None:
    for p in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(Exception):
            p.kill()


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker from this thread, its signal mask kept.

    Call it before this thread spawns its first worker process. The tracker unblocks
    SIGINT and SIGTERM in the thread that starts it, and the CLI's run thread blocks both
    so that the workers it spawns inherit the block (a Ctrl-C sent to the whole process
    group cannot interrupt a worker still importing, before ``worker_init``). A run
    that spawns no process (threads only) starts no tracker.
    """
    from multiprocessing import resource_tracker

    if not hasattr(signal, "pthread_sigmask"):
        resource_tracker.ensure_running()
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    try:
        resource_tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def worker_init(parent_pid: int) -> None:
    """In each worker process (and a Manager's server): leave Ctrl-C to the parent, and
    die with the parent.

    A Ctrl-C at the terminal goes to the whole process group; the parent stops the
    workers itself, so a worker ignores SIGINT rather than print its own traceback.
    A parent killed by ``kill -9`` or the OOM killer cannot stop them, so on Linux the
    kernel sends each worker SIGKILL when its parent dies (PR_SET_PDEATHSIG); elsewhere a
    watchdog thread polls the parent's pid.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not _set_parent_death_signal():
        threading.Thread(target=_watch_parent, args=(parent_pid,), name="dwstok-watchdog", daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before the above took effect
        os._exit(1)


def _set_parent_death_signal() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent_pid: int, interval: float = 0.5) -> None:
    while os.getppid() == parent_pid:
        time.sleep(interval)
    os._exit(1)


class RayExecutor(Executor):
    """One Ray task per item on an existing cluster.

    ``address`` is passed to ``ray.init`` ("auto", "ray://host:10001", "host:6379");
    None starts a private local Ray instance with ``workers`` CPUs. Ray's own workers
    import this package, so the cluster must run the same dwstok install.
    """

    name = "ray"

    def __init__(
        self,
        workers: int = 1,
        progress: Progress | None = None,
        *,
        address: str | None = None,
        timeout: float | None = None,
    ):
        super().__init__(workers, progress)
        self.address = address
        self.timeout = RAY_TIMEOUT if timeout is None else float(timeout)
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
            if self.address:  # a private cluster started here needs no deadline
                _check_reachable(self.address, self.timeout)
            try:
                if self.address and threading.current_thread() is not threading.main_thread():
                    _init_in_thread(ray, kwargs, self.timeout, self.address)
                else:
                    with _deadline(self.timeout if self.address else None, f"Ray at {self.address}"):
                        ray.init(**kwargs)
            except ConnectionError as e:
                raise ClusterUnavailableError(f"cannot connect to Ray at {self.address}: {e}") from None
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


RAY_TIMEOUT = 30.0
"""Seconds to wait for a Ray cluster before giving up (``--ray-timeout``)."""


class ClusterUnavailableError(DwstokError):
    """The Ray cluster cannot be reached (exit 69, EX_UNAVAILABLE)."""

    exit_code = 69


def _host_port(address: str) -> tuple[str, int] | None:
    """``ray://host:10001`` or ``host:6379`` → (host, port); None for ``auto`` and the like."""
    rest = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _check_reachable(address: str, timeout: float) -> None:
    """Fail fast when nothing answers at ``address``: ``ray.init`` itself retries an
    unreachable cluster for minutes."""
    import socket

    hp = _host_port(address)
    if hp is None:
        return
    try:
        socket.create_connection(hp, timeout=timeout).close()
    except TimeoutError:
        raise ClusterUnavailableError(
            f"cannot reach Ray at {address}: no answer within {timeout:g} s "
            "(check --ray-address; --ray-timeout or DWSTOK_RAY_TIMEOUT sets the wait)"
        ) from None
    except OSError as e:
        raise ClusterUnavailableError(
            f"cannot reach Ray at {address}: {e.strerror or e} (check --ray-address and that the cluster runs)"
        ) from None


def _init_in_thread(ray, kwargs: dict[str, Any], timeout: float, address: str) -> None:
    """``ray.init`` in a helper thread, given up after ``timeout`` (off the main thread
    there is no SIGALRM). The error then says to abandon the hung thread."""
    box: dict[str, BaseException] = {}

    def target() -> None:
        try:
            ray.init(**kwargs)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            box["error"] = e

    t = threading.Thread(target=target, name="dwstok-ray-init", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        e = ClusterUnavailableError(
            f"cannot connect to Ray at {address}: no answer within {timeout:g} s "
            "(check --ray-address; --ray-timeout or DWSTOK_RAY_TIMEOUT sets the wait)"
        )
        e.abandon_threads = True  # the CLI exits without waiting for the hung thread
        raise e
    if "error" in box:
        raise box["error"]


@contextlib.contextmanager
def _deadline(seconds: float | None, what: str):
    """Raise ClusterUnavailableError when the body runs longer than ``seconds``.

    A port that answers is not yet a Ray cluster that does; ``ray.init`` would wait for
    it for minutes. SIGALRM interrupts it (main thread, POSIX only; elsewhere no limit).
    ``ray.init`` also sets its own SIGTERM handler, which would turn SIGTERM into exit
    15; the caller's handler is put back.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old_term = signal.getsignal(signal.SIGTERM)
    if seconds is None or not hasattr(signal, "setitimer"):
        try:
            yield
        finally:
            _restore(signal.SIGTERM, old_term)
        return

    def on_alarm(signum, frame):
        raise ClusterUnavailableError(
            f"cannot connect to {what}: no answer within {seconds:g} s "
            "(check --ray-address; --ray-timeout or DWSTOK_RAY_TIMEOUT sets the wait)"
        )

    old_alarm = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _restore(signal.SIGALRM, old_alarm)
        _restore(signal.SIGTERM, old_term)


def _restore(signum, handler) -> None:
    if handler is not None:  # None: set outside Python, cannot be put back
        signal.signal(signum, handler)


EXECUTORS = ("local", "ray")


def available_cpus() -> int:
    """The CPUs this process may run on (``taskset``, cgroup cpusets, Slurm), not the
    machine's count.

    >>> available_cpus() >= 1
    True
    """
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1  # macOS, Windows


def make_executor(
    name: str = "local",
    workers: int | None = None,
    *,
    address: str | None = None,
    progress: Progress | None = None,
    ray_timeout: float | None = None,
) -> Executor:
    """An executor by name; ``workers`` defaults to the CPUs this process may use."""
    workers = workers or available_cpus()
    if name == "local":
        return LocalExecutor(workers, progress)
    if name == "ray":
        return RayExecutor(workers, progress, address=address, timeout=ray_timeout)
    raise ConfigError(f"unknown executor {name!r}: use one of {', '.join(EXECUTORS)}")
