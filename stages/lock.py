"""One run at a time per workdir: an exclusive lock on ``<workdir>/.dwstok.lock``.

Two runs writing into one workdir can interleave stages of two configs (train from one,
export from the other) and remove each other's staging files. Every command that writes
into a workdir holds this lock for its whole run; a second run waits for it
(``wait=True``) or stops at once with ``WorkdirLockedError`` naming the holder's pid.
The lock is an OS file lock (``flock``, as the ``filelock`` package takes it on Unix;
that package's import alone took 10 ms of every command), so it is released when its
holder exits, however it exits (``kill -9`` included); the file stays and is reused.
Without ``fcntl`` (Windows), ``filelock`` takes it.

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> with workdir_lock(d):
...     pass
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from dwstok.errors import DwstokError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

LOCK_FILE = ".dwstok.lock"
EXIT_LOCKED = 75  # EX_TEMPFAIL: try again later


class WorkdirLockedError(DwstokError):
    """Another dwstok run holds the workdir (exit 75: try again later, or ``--wait``)."""

    exit_code = EXIT_LOCKED


@contextlib.contextmanager
def workdir_lock(
    workdir: str | Path,
    *,
    wait: bool = False,
    timeout: float | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[Path]:
    """Hold ``workdir``'s lock for the body (the workdir is created if needed).

    ``wait=False``: fail at once when another run holds it. ``wait=True``: block until it
    is free, or up to ``timeout`` seconds (None: no limit); ``on_wait`` gets a message
    saying who is waited for.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / LOCK_FILE
    with _file_lock(path) as lock:
        if not lock.acquire(0):
            if not wait:
                raise WorkdirLockedError(
                    f"another dwstok run ({_holder(path)}) holds {workdir}: wait for it to finish, "
                    "or pass --wait"
                )
            if on_wait is not None:
                on_wait(f"waiting for another dwstok run ({_holder(path)}) that holds {workdir}")
            if not lock.acquire(timeout):
                raise WorkdirLockedError(
                    f"another dwstok run ({_holder(path)}) still holds {workdir} after "
                    f"{timeout:g} s of waiting"
                )
        # Only the holder writes here (the file is never truncated by an opener), so a
        # waiting run can say whom it waits for.
        lock.write(f"{os.getpid()}\n".encode())
        yield path


class _Flock:
    """An exclusive ``flock`` on an open file, released by ``close`` (or by the process's end)."""

    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def acquire(self, timeout: float | None) -> bool:
        """Take the lock: at once or not at all (``0``), within ``timeout`` seconds, or
        waiting as long as it takes (``None``). True when taken."""
        if timeout is None:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            return True
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(min(0.05, max(deadline - time.monotonic(), 0)))

    def write(self, data: bytes) -> None:
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def close(self) -> None:
        os.close(self.fd)  # (releases the lock)


class _FileLockPackage:
    """The same through the ``filelock`` package, where there is no ``fcntl``."""

    def __init__(self, path: Path):
        import filelock

        self.path, self.lock, self.held = path, filelock.FileLock(str(path)), False

    def acquire(self, timeout: float | None) -> bool:
        import filelock

        try:
            self.lock.acquire(timeout=-1 if timeout is None else timeout)
        except filelock.Timeout:
            return False
        self.held = True
        return True

    def write(self, data: bytes) -> None:
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, data)
        finally:
            os.close(fd)

    def close(self) -> None:
        if self.held:
            self.lock.release()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[_Flock | _FileLockPackage]:
    lock = (_Flock if fcntl is not None else _FileLockPackage)(path)
    try:
        yield lock
    finally:
        lock.close()


def _holder(path: Path) -> str:
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return "pid unknown"
    return f"pid {pid}"
