"""Numba flags in one place.

Every kernel is ``@njit`` from here: cached on disk, GIL released, no fastmath (ids must
be exact). ``NUMBA_DISABLE_JIT=1`` turns the kernels back into readable Python.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numba
import numpy as np


def source_stamp(*folders: Path) -> str:
    """A hash of the name, size and mtime of every ``*.py`` under ``folders``."""
    stamp = hashlib.sha256()
    for folder in folders:
        for f in sorted(folder.rglob("*.py")):
            st = f.stat()
            stamp.update(f"{f.relative_to(folder)} {st.st_size} {st.st_mtime_ns}\n".encode())
    return stamp.hexdigest()


def drop_stale_cache(package: Path, sources: list[Path]) -> None:
    """Empty the Numba disk cache of ``package`` and its subpackages when a ``*.py`` under ``sources`` changed.

    Numba checks a cached kernel against the stamp of its own file only, yet a kernel
    compiles in the kernels it calls from other files (bpe/encode.py's call scan_range in
    scanner.py). After an edit to scanner.py alone, the cached bpe kernels would still
    run the old scanner. So a stamp of every source's size and mtime sits next to the
    cache, and a different stamp empties it (everything compiles again, once). Only the
    cache in ``__pycache__`` is checked; one under ``NUMBA_CACHE_DIR`` is not. A folder we
    cannot write (an installed copy) is left as it is.
    """
    stamp = source_stamp(*sources)
    cache = package / "__pycache__"
    mark = cache / "kernels.stamp"
    try:
        if mark.exists() and mark.read_text() == stamp:
            return
        for f in [*package.rglob("__pycache__/*.nbi"), *package.rglob("__pycache__/*.nbc")]:
            f.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        mark.write_text(stamp)
    except OSError:
        pass


def ensure_writable_cache() -> str | None:
    """Give Numba a writable cache folder when it has none; return it, else None.

    Numba caches a kernel in ``__pycache__`` next to its source, else in
    ``~/.cache/numba``, else nowhere: then ``@njit(cache=True)`` raises at import time.
    That is the usual case in a container running as an arbitrary UID (read-only
    site-packages, no home). Then the kernels cache in ``<tmp>/dwstok-numba-<uid>``
    (exported as ``NUMBA_CACHE_DIR``, so worker processes use it too) and one line on
    stderr says so.
    """
    import os
    import sys
    import tempfile

    if numba.config.DISABLE_JIT or numba.config.CACHE_LOCATOR_CLASSES:
        return None
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    locators = list(getattr(impl, "_locator_classes", []))
    if not locators:  # another Numba: let it decide
        return None
    if any(cls.from_function(ensure_writable_cache, __file__) is not None for cls in locators):
        return None
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    fallback = Path(tempfile.gettempdir()) / f"dwstok-numba-{uid}"
    tried = ", ".join(filter(None, [numba.config.CACHE_DIR, str(Path(__file__).parent / "__pycache__"), "~/.cache/numba"]))
    try:
        fallback.mkdir(mode=0o700, exist_ok=True)
        tempfile.TemporaryFile(dir=fallback).close()
    except OSError as e:
        from .errors import ConfigError

        raise ConfigError(
            f"no writable folder for Numba's compiled kernels (tried {tried}, {fallback}: "
            f"{e.strerror or e}): set NUMBA_CACHE_DIR to a writable folder"
        ) from None
    numba.config.CACHE_DIR = str(fallback)
    os.environ["NUMBA_CACHE_DIR"] = str(fallback)
    print(
        f"dwstok: no writable Numba cache ({tried}); caching compiled kernels in {fallback}. "
        "Set NUMBA_CACHE_DIR to choose the folder.",
        file=sys.stderr,
    )
    return str(fallback)


# Modules whose kernels are dwstok's (see own_kernels): the compile notice names them,
# and their cached kernels load without Numba's registries.
_OWN = ["dwstok."]


def own_kernels(prefix: str) -> None:
    """Count the kernels of modules named ``prefix...`` as dwstok's (a package that
    compiles kernels with these decorators, such as the pipeline's stages, calls this)."""
    if prefix not in _OWN:
        _OWN.append(prefix)


def _is_own(module: str | None) -> bool:
    return bool(module) and module.startswith(tuple(_OWN))


class _CompileNotice:
    """Says once on stderr that kernels are being compiled, when Numba compiles one of ours.

    Numba fires a ``numba:compile`` event only when a kernel is not in its disk cache, so
    a warm cache prints nothing. The first compile of a process prints the line (and sets
    ``DWSTOK_COMPILE_NOTICE=0`` so that worker processes started later stay quiet); a
    run would otherwise sit silent for seconds. With ``DWSTOK_COMPILE_LOG`` set to a
    file, every compile of a dwstok kernel appends ``pid seconds name`` to it (what
    bench/cold_start.py adds up).
    """

    def __init__(self):
        import os

        self.said = os.environ.get("DWSTOK_COMPILE_NOTICE") == "0"
        self.log = os.environ.get("DWSTOK_COMPILE_LOG")
        self.started = []

    def on_start(self, name: str) -> None:
        import os
        import sys
        import time

        if not self.said:
            self.said = True
            os.environ["DWSTOK_COMPILE_NOTICE"] = "0"
            print(f"dwstok: compiling kernels, once per install: {name} first; later runs load them from the cache", file=sys.stderr, flush=True)
        self.started.append(time.perf_counter())

    def on_end(self, name: str) -> None:
        import os
        import time

        t = time.perf_counter() - self.started.pop()
        if self.log and not self.started:  # a kernel compiled for its own sake, not inside another
            with open(self.log, "a") as f:
                f.write(f"{os.getpid()} {t:.3f} {name}\n")


def _install_compile_notice() -> None:
    from numba.core import event

    notice = _CompileNotice()

    class Listener(event.Listener):
        def on_start(self, ev):
            d = ev.data.get("dispatcher") if isinstance(ev.data, dict) else None
            fn = getattr(d, "py_func", None)
            if fn is not None and _is_own(fn.__module__):
                notice.on_start(fn.__qualname__)
                ev.data["_dwstok"] = True

        def on_end(self, ev):
            if isinstance(ev.data, dict) and ev.data.get("_dwstok"):
                notice.on_end(ev.data["dispatcher"].py_func.__qualname__)

    event.register("numba:compile", Listener())


def _load_cached_without_refresh() -> bool:
    """Load dwstok's kernels from the disk cache without Numba's registries; True if installed.

    Before it loads any cached kernel, Numba refreshes its CPU target: it imports and
    installs the typing and lowering registries of everything it can compile (NumPy's
    functions, typed containers, random, linalg, cffi...), once per process. Compiling
    needs them; running object code that was compiled already does not, and a stage
    process that only loads cached kernels paid for the refresh all the same. For a
    kernel of ours the load here initialises only what that object code links against:
    the runtime (NRT) and the hash secret's symbols (those of Numba's C helpers and the
    math library are in place from the start). A compile (a cache miss, or any other
    Numba function) still refreshes first, in the compiler. Another Numba, whose cache
    lacks these parts, keeps its own load.
    """
    from numba.core import caching

    cache = getattr(caching, "Cache", None)
    original = getattr(cache, "load_overload", None)
    if original is None or not all(hasattr(cache, a) for a in ("_load_overload", "_guard_against_spurious_io_errors")):
        return False
    if getattr(original, "dwstok", False):
        return True

    def load_overload(self, sig, target_context):
        if not _is_own(getattr(getattr(self, "_py_func", None), "__module__", None)):
            return original(self, sig, target_context)
        import numba.cpython.hashing  # noqa: F401  (adds the _Py_HashSecret_* symbols)
        from numba.core.runtime import rtsys

        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    load_overload.dwstok = True
    cache.load_overload = load_overload
    return True


drop_stale_cache(Path(__file__).parent, [Path(__file__).parent])
ensure_writable_cache()
if not numba.config.DISABLE_JIT:
    _install_compile_notice()
    _load_cached_without_refresh()

# ``_nrt=True`` set, not left to the default: unset, a kernel first compiled as the
# callee of a ``njit_no_nrt`` kernel inherits its caller's "no runtime" and cannot allocate.
njit = numba.njit(cache=True, nogil=True, _nrt=True)
"""Decorator for kernels: ``@njit``."""


def njit_parallel(fn):
    """Decorator for the few kernels that use ``numba.prange``."""
    return numba.njit(cache=True, nogil=True, parallel=True, _nrt=True)(fn)


njit_no_nrt = numba.njit(cache=True, nogil=True, _nrt=False)
"""For kernels that allocate nothing and run once per call of a short text, or that
inline a helper taking arrays in their hot loop: compiled without Numba's runtime, so
making a view or passing an array costs no reference count (an atomic add or subtract
each, a good share of a short call). An allocation inside one does not compile; its
callers own every array it is given. ``_nrt`` is Numba's own option for this."""

njit_inline = numba.njit(cache=True, nogil=True, inline="always", _nrt=True)
"""For small helpers called per byte or per lookup from other kernels: inlined at the
Numba IR level, so passing arrays costs no reference-count traffic per call."""


@njit_inline
def ix(i):
    """``i`` as an unsigned array index: ``a[ix(i)]``.

    For a signed index Numba emits the negative-index wraparound (``a[-1]``) on every
    access, three instructions that LLVM can rarely prove away. The hot loops index
    with this instead: side-by-side merging and the whole encoder ran faster with it
    (the scanner gained nothing measurable, so it does not use it).
    Only for indices that are never negative.
    """
    return np.uint64(i)


def read_only(a: np.ndarray) -> np.ndarray:
    """``a`` as a kernel should get it: itself if read-only, else a read-only view (the
    caller's array stays writable). Numba compiles a kernel once per argument type, and
    a writable and a read-only array (Arrow's buffers, ``bytes``) are two.

    >>> a = np.zeros(3, np.uint8)
    >>> read_only(a).flags.writeable, a.flags.writeable
    (False, True)
    """
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def as_u8(buf):
    """``buf`` as a uint8 array, inside a kernel: a ``bytes`` object passed as it is
    (cheaper than ``np.frombuffer`` in Python before the call), or an array."""
    return np.frombuffer(buf, np.uint8) if isinstance(buf, bytes) else buf


@numba.extending.overload(as_u8, inline="always")
def _as_u8(buf):
    if isinstance(buf, numba.types.Bytes):
        return lambda buf: np.frombuffer(buf, np.uint8)
    return lambda buf: buf


def compiled_entry(dispatcher, *examples):
    """The compiled function a kernel runs for arguments of the types of ``examples``
    (loaded from the cache, or compiled, now), to call without the dispatcher.

    Why: on each call the dispatcher works out the type of every argument and looks up
    the matching compiled function, a good share of ``encode()``'s call on a short text
    (bench/results/session30-20261205.md). A caller that makes arguments of the same
    types every time can skip that.

    The returned function still converts its arguments, but it does not check their
    types: call it only with arguments of exactly the examples' types (an array of
    another dtype would be read as this one). Under ``NUMBA_DISABLE_JIT`` this is the
    plain function.

    >>> @numba.njit
    ... def add(a, b):
    ...     return a + b
    >>> compiled_entry(add, 1, 2)(40, 2)
    42
    """
    if numba.config.DISABLE_JIT:
        return dispatcher
    sig = tuple(dispatcher.typeof_pyval(a) for a in examples)
    if sig not in dispatcher.overloads:
        dispatcher.compile(sig)  # a cached kernel loads; any other compiles
    return dispatcher.overloads[sig].entry_point
