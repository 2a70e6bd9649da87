"""Arrays that start on a 2 MB boundary, so that Linux can map them with huge pages."""

from __future__ import annotations

import numpy as np

_HUGE_PAGE = 1 << 21


def huge_page_array(nwords: int) -> np.ndarray:
    """An uninitialized int64 array that starts on a 2 MB boundary when it is 4 MB or more.

    Why: the tables and the piece caches are read at random, and at 4 KB a page they
    span more pages than the TLB holds. NumPy asks Linux for 2 MB pages for arrays of
    4 MB and more, but a 2 MB page maps an aligned 2 MB only, and an array starts where
    malloc put it, so only part of it would be on huge pages. The 2 MB before the
    boundary are never touched, so they take no memory.
    """
    if nwords * 8 < 2 * _HUGE_PAGE:
        return np.empty(nwords, np.int64)
    raw = np.empty(nwords * 8 + _HUGE_PAGE, np.uint8)
    skip = -raw.ctypes.data % _HUGE_PAGE
    return raw[skip : skip + nwords * 8].view(np.int64)


def on_huge_pages(a: np.ndarray) -> np.ndarray:
    """``a`` (int64), or a copy from a 2 MB boundary if it is 4 MB or more and starts elsewhere
    (an unpickled one: see :func:`huge_page_array`)."""
    if a.nbytes < 2 * _HUGE_PAGE or a.ctypes.data % _HUGE_PAGE == 0:
        return a
    b = huge_page_array(a.size)
    b[:] = a
    return b
