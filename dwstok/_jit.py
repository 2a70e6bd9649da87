"""Numba flags in one place.

Every kernel is ``@njit`` from here: cached on disk, GIL released, no fastmath (ids must
be exact). ``NUMBA_DISABLE_JIT=1`` turns the kernels back into readable Python.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numba
import numpy as np


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
    stamp = hashlib.sha256()
    for folder in sources:
        for f in sorted(folder.rglob("*.py")):
            st = f.stat()
            stamp.update(f"{f.relative_to(folder)} {st.st_size} {st.st_mtime_ns}\n".encode())
    cache = package / "__pycache__"
    mark = cache / "kernels.stamp"
    try:
        if mark.exists() and mark.read_text() == stamp.hexdigest():
            return
        for f in [*package.rglob("__pycache__/*.nbi"), *package.rglob("__pycache__/*.nbc")]:
            f.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        mark.write_text(stamp.hexdigest())
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


drop_stale_cache(Path(__file__).parent, [Path(__file__).parent])
ensure_writable_cache()

njit = numba.njit(cache=True, nogil=True)
"""Decorator for kernels: ``@njit``."""


def njit_parallel(fn):
    """Decorator for the few kernels that use ``numba.prange``."""
    return numba.njit(cache=True, nogil=True, parallel=True)(fn)


njit_inline = numba.njit(cache=True, nogil=True, inline="always")
"""For small helpers called per byte or per lookup from other kernels: inlined at the
Numba IR level, so passing arrays costs no reference-count traffic per call."""


@njit_inline
def ix(i):
    """``i`` as an unsigned array index: ``a[ix(i)]``.

    For a signed index Numba emits the negative-index wraparound (``a[-1]``) on every
    access, three instructions that LLVM can rarely prove away. The hot loops index
    with this instead: side-by-side merging ran 13% faster, the whole encoder 11%
    (the scanner gained nothing measurable, so it does not use it).
    Only for indices that are never negative.
    """
    return np.uint64(i)


def as_u8(buf):
    """``buf`` as a uint8 array, inside a kernel: a ``bytes`` object passed as it is
    (0.2 us cheaper than ``np.frombuffer`` in Python before the call), or an array."""
    return np.frombuffer(buf, np.uint8) if isinstance(buf, bytes) else buf


@numba.extending.overload(as_u8, inline="always")
def _as_u8(buf):
    if isinstance(buf, numba.types.Bytes):
        return lambda buf: np.frombuffer(buf, np.uint8)
    return lambda buf: buf
