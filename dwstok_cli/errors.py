"""Errors → one ``Error: …`` line and an exit code; tracebacks only with ``--debug``.

Exit codes: 1 other dwstok errors, 2 usage and config errors, 3 bad input, 4 bad model
file, 5 pattern/version mismatch; the machine's refusals, named by path or value:
69 a Ray cluster out of reach, 71 out of memory or a worker process killed, 74 the file
system refused a write (disk full, read-only, no permission, a file where a folder
should be), 75 another run holds the workdir; 70 an internal error (a bug); 130
interrupted (Ctrl-C, SIGINT), 143 terminated (SIGTERM: Slurm, Kubernetes, ``timeout``).
``--debug`` prints the traceback and keeps the exit code.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import click

EXIT_CODES = {
    "ConfigError": 2,
    "InputError": 3,
    "ModelFileError": 4,
    "PatternMismatchError": 5,
}
INTERNAL = 70
OS_ERROR = 71  # EX_OSERR: out of memory, a worker process killed
IO_ERROR = 74  # EX_IOERR: the file system refused a write
INTERRUPTED = 130
TERMINATED = 143

# errno values that mean "the environment refused", with what to do about each.
_FS_ERRNOS = {
    errno.ENOSPC: "free some space or use another --workdir",
    errno.EDQUOT: "free some space or use another --workdir",
    errno.EROFS: "use a writable --workdir",
    errno.EACCES: "check its permissions or use another --workdir",
    errno.EPERM: "check its permissions or use another --workdir",
    errno.ENOTDIR: "a file stands where a folder should be: move it away",
    errno.EEXIST: "a file stands where a folder should be: move it away",
    errno.EISDIR: "a folder stands where a file should be: move it away",
    errno.EIO: "the disk reported an I/O error",
}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread: unwinds like Ctrl-C (staging kept for resume)."""


def _on_sigterm(signum, frame) -> None:
    raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM ends the run like Ctrl-C while the body runs (only the main thread can
    set handlers; the previous handler comes back afterwards)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


_abandoned = threading.Event()


def run_in_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a worker thread while this (main) thread waits for it.

    Python runs signal handlers in the main thread, between bytecodes. A Ctrl-C that
    lands while the main thread is inside a nogil Numba kernel is noticed only when the
    kernel returns (minutes, for training), and one that lands inside the compiler's
    ctypes callbacks on a first run crashed the process (exit -11) or surfaced as a
    SystemError. A main thread that only waits takes the signal at once (the worker
    thread blocks SIGINT and SIGTERM). The worker is then abandoned mid-stage: the CLI
    prints its error line and leaves with ``os._exit`` (worker processes die with it,
    see stages.executors), keeping staging for the resumed run.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        # Signals are the main thread's business. Blocked here, they also stay blocked
        # in the worker processes this thread spawns (a signal mask survives fork and
        # exec): a Ctrl-C sent to the whole process group cannot interrupt a worker
        # still importing, before its initializer ignores SIGINT. (multiprocessing's
        # resource tracker would unblock both in the thread that starts it: the
        # executors start it through stages.executors.start_resource_tracker.)
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the waiting thread
            box["error"] = e

    if threading.current_thread() is not threading.main_thread():
        return fn()
    t = threading.Thread(target=target, name="dwstok-run", daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(0.2)
    except BaseException:
        _abandoned.set()
        raise
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _leave(ctx: click.Context, code: int) -> None:
    """Exit with ``code``; at once (no interpreter shutdown) when a worker thread was
    abandoned mid-stage: shutdown would wait for it, or finalize under its feet."""
    if _abandoned.is_set():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    ctx.exit(code)


def exit_code(exc: BaseException) -> int:
    for cls in type(exc).__mro__:
        if cls.__name__ in EXIT_CODES:
            return EXIT_CODES[cls.__name__]
    return getattr(exc, "exit_code", 1)


def describe(exc: BaseException) -> tuple[str, int] | None:
    """(message, exit code) for an error the environment caused, else None (a bug)."""
    from concurrent.futures.process import BrokenProcessPool

    if isinstance(exc, BrokenProcessPool):
        return (
            "a worker process died (killed by a signal or the out-of-memory killer); "
            "finished shards are kept: re-run to resume, with fewer --workers if memory is short",
            OS_ERROR,
        )
    if isinstance(exc, MemoryError):
        what = _one_line(str(exc))
        return (
            f"out of memory{f' ({what})' if what else ''}: free memory, or lower vocab_size "
            "or the corpus size",
            OS_ERROR,
        )
    if isinstance(exc, OSError) and exc.errno in _FS_ERRNOS:
        path = exc.filename if exc.filename is not None else getattr(exc, "dwstok_path", None)
        where = f" {path}" if path is not None else ""
        return (f"cannot write{where}: {exc.strerror or _one_line(str(exc))}; {_FS_ERRNOS[exc.errno]}", IO_ERROR)
    if isinstance(exc, OSError) and "No space left on device" in str(exc):
        # pyarrow reports a full disk as an OSError without errno.
        path = getattr(exc, "dwstok_path", None)
        where = f" {path}" if path is not None else ""
        return (f"cannot write{where}: No space left on device; {_FS_ERRNOS[errno.ENOSPC]}", IO_ERROR)
    return None


def classify(exc: BaseException) -> tuple[str, int]:
    """(the one-line message, the exit code) the CLI reports for ``exc``; ``--json``
    records the same in its error record.

    >>> from dwstok.errors import InputError
    >>> classify(InputError("no corpus given"))
    ('no corpus given', 3)
    """
    from dwstok.errors import DwstokError

    if isinstance(exc, KeyboardInterrupt):
        if isinstance(exc, Terminated):
            return "terminated (SIGTERM); finished work is kept: re-run to resume", TERMINATED
        return "interrupted; finished work is kept: re-run to resume", INTERRUPTED
    if isinstance(exc, click.ClickException):
        return exc.format_message(), exc.exit_code
    if isinstance(exc, DwstokError):
        return _one_line(str(exc)), exit_code(exc)
    known = describe(exc)
    if known is not None:
        return known
    return (
        f"internal error ({type(exc).__name__}: {_one_line(str(exc))}); "
        "rerun with --debug for the traceback and report it",
        INTERNAL,
    )


class ErrorHandlingGroup(click.Group):
    """A click group whose commands' exceptions become one error line."""

    def invoke(self, ctx: click.Context):
        try:
            with sigterm_as_interrupt():
                return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:
            # `dwstok info x | head`: the reader went away; exit quietly as `cat` would.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(141)
        except KeyboardInterrupt as e:
            message, code = classify(e)
            _show_traceback(ctx)
            click.echo(f"Error: {message}", err=True)
            _leave(ctx, code)
        except Exception as e:  # noqa: BLE001 - the CLI boundary
            message, code = classify(e)
            _show_traceback(ctx)
            click.echo(f"Error: {message}", err=True)
            if getattr(e, "abandon_threads", False):
                _abandoned.set()
            _leave(ctx, code)


def _show_traceback(ctx: click.Context) -> None:
    """Under ``--debug``, print the traceback being handled; the exit code stays typed."""
    if _debug(ctx):
        import traceback

        traceback.print_exc(file=sys.stderr)


def _debug(ctx: click.Context) -> bool:
    return bool((ctx.obj or {}).get("debug")) or "--debug" in sys.argv[1:2]


def _one_line(msg: str) -> str:
    return " ".join(msg.split("\n")).strip()
