"""One run at a time per workdir: an exclusive lock on ``<workdir>/.dwstok.lock``.

Two runs writing into one workdir can interleave stages of two configs (train from one,
export from the other) and remove each other's staging files. Every command that writes
into a workdir holds this lock for its whole run; a second run waits for it
(``wait=True``) or stops at once with ``WorkdirLockedError`` naming the holder's pid.
The lock is an OS file lock (``filelock``), so it is released when its holder exits,
however it exits (``kill -9`` included); the file stays and is reused.

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> with workdir_lock(d):
...     pass
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from dwstok.errors import DwstokError

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
    import filelock

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / LOCK_FILE
    lock = filelock.FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        if not wait:
            raise WorkdirLockedError(
                f"another dwstok run ({_holder(path)}) holds {workdir}: wait for it to finish, "
                "or pass --wait"
            ) from None
        if on_wait is not None:
            on_wait(f"waiting for another dwstok run ({_holder(path)}) that holds {workdir}")
        try:
            lock.acquire(timeout=-1 if timeout is None else timeout)
        except filelock.Timeout:
            raise WorkdirLockedError(
                f"another dwstok run ({_holder(path)}) still holds {workdir} after "
                f"{timeout:g} s of waiting"
            ) from None
    try:
        _write_pid(path)
        yield path
    finally:
        lock.release()


def _write_pid(path: Path) -> None:
    # Only the holder writes here (the file is never truncated by an opener), so a
    # waiting run can say whom it waits for.
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    finally:
        os.close(fd)


def _holder(path: Path) -> str:
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return "pid unknown"
    return f"pid {pid}"
