"""Whether the kernels are compiled yet, and compiling them in the background.

With an empty Numba cache the kernels take minutes to compile (a fresh CI runner, a new
venv, a new Ray node). Rather than sit through that on the first ``encode``, a
Tokenizer encodes through HF tokenizers (the same ids: see hf_bridge.py) while one
``python -m dwstok.warm --background`` per cache folder compiles everything into the
cache, then switches to the kernels. ``DWSTOK_COMPILE=foreground`` turns this off:
the first call compiles what it needs, in the calling process.

The cache folder holds three files of ours: ``kernels.ready`` (written last by a warm
run that succeeded; it names the sources, Numba and the CPU the kernels were compiled
for), ``learner.ready`` (the same, written once the merge learner is compiled, which a
warm run does first) and ``kernels.lock`` (held by the warm run while it compiles).

A build on a cold cache starts the background compile at its first stage, pretokenize
(:func:`start_early`), so that the merge learner, the longest kernel to compile, compiles
there while the build's own process compiles the scanner; the train stage then waits for
it (:func:`wait_for_learner`) instead of compiling it a second time.

>>> state() in ("ready", "compiling", "cold")  # doctest: +SKIP
True
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

MODES = ("background", "foreground")
_CHECK_EVERY = 0.25  # seconds between looks at the cache folder while kernels compile

_lock = threading.Lock()
_ready = False  # this process knows the kernels are compiled (or compiles them itself)
_last_look = 0.0
_spawned: subprocess.Popen | None = None
_spawned_by = 0  # the pid that started it: a forked child cannot wait for its parent's child


def mode() -> str:
    """``DWSTOK_COMPILE``: ``background`` (the default) or ``foreground``."""
    m = os.environ.get("DWSTOK_COMPILE", "background").strip().lower() or "background"
    if m not in MODES:
        from .errors import ConfigError

        raise ConfigError(f"DWSTOK_COMPILE={m!r}: expected one of {', '.join(MODES)}")
    return m


@lru_cache(maxsize=1)
def cache_dir() -> Path | None:
    """The folder Numba caches dwstok's kernels in (as its locators pick it), or None."""
    from numba.core import caching

    from . import _jit

    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    for cls in getattr(impl, "_locator_classes", []):
        loc = cls.from_function(mode, _jit.__file__)  # any plain function of ours
        if loc is not None:
            return Path(loc.get_cache_path())
    return None


@lru_cache(maxsize=1)
def _mark_text() -> str:
    """What ``kernels.ready`` says when it is current: the sources' stamp, Numba's
    version and the CPU (Numba keys its cache on the CPU too)."""
    import llvmlite.binding as llvm
    import numba

    from . import _jit

    cpu = os.environ.get("NUMBA_CPU_NAME") or llvm.get_host_cpu_name()
    return f"{_jit.source_stamp(Path(_jit.__file__).parent)} numba {numba.__version__} {cpu}\n"


def _paths() -> tuple[Path, Path] | None:
    d = cache_dir()
    return None if d is None else (d / "kernels.ready", d / "kernels.lock")


def _learner_mark() -> Path | None:
    d = cache_dir()
    return None if d is None else d / "learner.ready"


def _write_mark(path: Path | None) -> None:
    if path is None:
        return
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(_mark_text())
    os.replace(tmp, path)


def _is_marked(path: Path | None) -> bool:
    try:
        return path is not None and path.read_text() == _mark_text()
    except OSError:
        return False


def mark_ready() -> None:
    """Say the kernels are compiled (a warm run calls this last)."""
    p = _paths()
    _write_mark(None if p is None else p[0])


def mark_learner_ready() -> None:
    """Say the merge learner is compiled (a warm run calls this after compiling it first)."""
    _write_mark(_learner_mark())


def _marked() -> bool:
    p = _paths()
    return _is_marked(None if p is None else p[0])


def state() -> str:
    """``ready`` (compiled, for these sources), ``compiling`` (a warm run holds the
    lock) or ``cold``."""
    if _marked():
        return "ready"
    p = _paths()
    if p is None:
        return "cold"
    from filelock import FileLock, Timeout  # (here: a warm cache never needs the import, 10 ms)

    lock = FileLock(p[1])
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return "compiling"
    except OSError:  # a read-only cache: nobody compiles there
        return "cold"
    lock.release()
    return "cold"


def usable() -> bool:
    """True when a kernel call will not wait for a compile of minutes: the kernels are
    in the cache, or this process compiles them itself (foreground mode, or the
    background compile failed). Otherwise start the background compile (once) and
    return False. Cheap: the folder is looked at every ``_CHECK_EVERY`` seconds at most.
    """
    global _ready, _last_look, _spawned, _spawned_by
    if _ready:
        return True
    now = time.monotonic()
    if now - _last_look < _CHECK_EVERY:
        return False
    with _lock:
        if _ready:
            return True
        _last_look = now
        import numba

        if numba.config.DISABLE_JIT or mode() == "foreground":
            _ready = True
            return True
        s = state()
        if s == "ready":
            _ready = True
        elif s == "cold":
            if _spawned is not None and _spawned_by != os.getpid():
                _spawned = None  # forked: start one (it steps aside if the first one runs)
            if _spawned is None:
                _spawned, _spawned_by = _start_background(), os.getpid()
                if _spawned is None:  # could not start one: compile here
                    _ready = True
            elif _spawned.poll() is not None:  # it ended without compiling everything
                print(f"dwstok: the background compile ended (exit {_spawned.returncode}; log: {_log_path()}); "
                      "compiling kernels in this process", file=sys.stderr, flush=True)
                _ready = True
        return _ready


def _own_compile_running() -> bool:
    """Whether the background compile this process started is still running (it may not
    have taken the lock yet)."""
    return _spawned is not None and _spawned_by == os.getpid() and _spawned.poll() is None


def start_early() -> None:
    """At the start of a run that will need the kernels: on a cold cache, start the
    background compile now (as :func:`usable` does) rather than when a later stage first
    encodes, so that the merge learner compiles there while this process compiles what
    its first stages need. Nothing if the kernels are ready, or in foreground mode."""
    usable()


def wait_for_learner() -> None:
    """Before the merge learner first runs: if a background compile is at work and has
    not compiled the learner yet (it does that first), wait for it, then the learner
    loads from the cache; compiling it here as well would take as long and share the
    CPUs with it. Return at once when the learner is compiled, when no background
    compile is at work (this process then compiles it), or in foreground mode."""
    import numba

    if numba.config.DISABLE_JIT or mode() == "foreground" or _paths() is None:
        return
    said = False
    while not (_is_marked(_learner_mark()) or _marked()):
        if state() != "compiling" and not _own_compile_running():
            return  # no compile at work (or it ended): this process compiles the learner
        if not said:
            print("dwstok: waiting for the merge learner's kernel, which compiles in the background "
                  "(once per install)", file=sys.stderr, flush=True)
            said = True
        time.sleep(0.05)


def compile_here() -> None:
    """Let this process's kernel calls compile what the cache lacks, in the process."""
    global _ready
    _ready = True


def wait() -> None:
    """Wait for a background compile that is under way (then its kernels load from the
    cache instead of compiling twice); return at once when there is none."""
    global _ready
    said = False
    while not _ready and _paths() is not None:
        s = state()
        if s == "ready" or (s == "cold" and not _own_compile_running()):
            break
        if not said:
            print("dwstok: waiting for the kernels that compile in the background (once per install)", file=sys.stderr, flush=True)
            said = True
        if s == "compiling":
            from filelock import FileLock

            try:
                with FileLock(_paths()[1]):
                    pass
            except OSError:
                break
        else:
            time.sleep(0.05)  # the process this one started has not taken the lock yet
    _ready = True


@contextmanager
def holding_lock():
    """Hold the compile lock (waiting, with a line on stderr, for a background run at
    work); a cache folder we cannot lock is not waited for."""
    p = _paths()
    if p is None:
        yield
        return
    from filelock import FileLock, Timeout

    lock = FileLock(p[1])
    try:
        p[1].parent.mkdir(parents=True, exist_ok=True)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            print("dwstok: waiting for the kernels that compile in the background", file=sys.stderr, flush=True)
            lock.acquire()
    except OSError:
        yield
        return
    try:
        yield
    finally:
        lock.release()


def _log_path() -> Path | None:
    d = cache_dir()
    return None if d is None else d / "kernels.log"


def _start_background() -> subprocess.Popen | None:
    """``python -m dwstok.warm --background`` in its own session (it outlives this
    process if it must, and a Ctrl-C here does not stop it), quiet, at a lower priority."""
    log = _log_path()
    if log is None:
        return None
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as err:
            env = dict(os.environ, DWSTOK_COMPILE="foreground", DWSTOK_COMPILE_NOTICE="0")
            # the same dwstok as this process's, however it came on sys.path
            home = str(Path(__file__).resolve().parent.parent)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [home, env.get("PYTHONPATH")]))
            p = subprocess.Popen(
                [sys.executable, "-m", f"{__package__}.warm", "--background"],  # this package, whatever its name
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
                start_new_session=True, close_fds=True,
            )
    except OSError:
        return None
    print(f"dwstok: compiling kernels in the background (pid {p.pid}), once per install; "
          "encoding through HF tokenizers (the same ids) until they are ready", file=sys.stderr, flush=True)
    return p


_PROBE_GRACE = 1.0  # seconds background_main waits for the lock before it steps aside


def background_main(run) -> int:
    """Body of ``python -m dwstok.warm --background``: run ``run()`` under the lock and
    mark the kernels ready; exit 0 at once if another warm run holds the lock."""
    p = _paths()
    if p is None:
        return 1
    try:
        os.nice(10)  # the process that waits for us comes first
    except OSError:
        pass
    from filelock import FileLock, Timeout

    lock = FileLock(p[1])
    try:
        # not timeout=0: state() takes the lock for a moment to look, and a parent that
        # waits for this run looks every 50 ms; a warm run holds it for a minute
        lock.acquire(timeout=_PROBE_GRACE)
    except Timeout:
        return 0
    try:
        if not _marked():
            run()
            mark_ready()
    finally:
        lock.release()
    return 0
