"""Numba flags in one place.

Every kernel is ``@njit`` from here: cached on disk, GIL released, no fastmath (ids must
be exact). ``NUMBA_DISABLE_JIT=1`` turns the kernels back into readable Python.
"""

from __future__ import annotations

import numba

njit = numba.njit(cache=True, nogil=True)
"""Decorator for kernels: ``@njit``."""


def njit_parallel(fn):
    """Decorator for the few kernels that use ``numba.prange``."""
    return numba.njit(cache=True, nogil=True, parallel=True)(fn)


njit_inline = numba.njit(cache=True, nogil=True, inline="always")
"""For small helpers called per byte or per lookup from other kernels: inlined at the
Numba IR level, so passing arrays costs no reference-count traffic per call."""
