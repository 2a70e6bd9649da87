"""Numba flags in one place.

Every kernel is ``@njit`` from here: cached on disk, GIL released, no fastmath (ids must
be exact). ``NUMBA_DISABLE_JIT=1`` turns the kernels back into readable Python.
"""

from __future__ import annotations

import numba
import numpy as np

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
