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
    """Empty ``package``'s Numba disk cache when any ``*.py`` in ``sources`` changed.

    Numba checks a cached kernel against the stamp of its own file only, yet a kernel
    compiles in the kernels it calls from other files (bpe.py's call scan_range in
    scanner.py). After an edit to scanner.py alone, the cached bpe kernels would still
    run the old scanner. So a stamp of every source's size and mtime sits next to the
    cache, and a different stamp empties it (everything compiles again, once). Only the
    cache in ``__pycache__`` is checked; one under ``NUMBA_CACHE_DIR`` is not. A folder we
    cannot write (an installed copy) is left as it is.
    """
    stamp = hashlib.sha256()
    for folder in sources:
        for f in sorted(folder.glob("*.py")):
            st = f.stat()
            stamp.update(f"{f.name} {st.st_size} {st.st_mtime_ns}\n".encode())
    cache = package / "__pycache__"
    mark = cache / "kernels.stamp"
    try:
        if mark.exists() and mark.read_text() == stamp.hexdigest():
            return
        for f in [*cache.glob("*.nbi"), *cache.glob("*.nbc")]:
            f.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        mark.write_text(stamp.hexdigest())
    except OSError:
        pass


drop_stale_cache(Path(__file__).parent, [Path(__file__).parent])

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
