"""Arrays that start on a 2 MB boundary, so that Linux can map them with huge pages, and
filling one a page at a time, onto small pages once a huge one is slow to first touch."""

from __future__ import annotations

import ctypes
import errno
import functools
import sys
import time

import numpy as np

_HUGE_PAGE = 1 << 21
_PAGE_WORDS = _HUGE_PAGE // 8
# A 2 MB page whose first touch takes longer than this, in CPU time of the thread (so
# neither waiting for the GIL nor other processes count), was not backed by the VM's
# host: such a page takes a hundred times as long as one it backs (bench/first_touch.py,
# bench/results/session22-cache-pages-20261204.md).
_COLD_S = 0.002
_MADV_NOHUGEPAGE = 15
_MADV_POPULATE_WRITE = 23  # Linux 5.14 and later; EINVAL before
_POPULATE_MIN = 1 << 18  # bytes: below this, the faults cost less than the call
_can_populate = True
# Whether a page was cold in this process: the memory of later arrays comes from the
# same pool the host took back, so each new cache had paid for a cold page of its own
# before it moved to small pages (bench/results/session23-growth-20261204.md).
_cold_seen = False


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


def fill_words(a: np.ndarray, start: int, end: int, value: int, watch: bool = True) -> bool:
    """``a[start:end] = value``, a 2 MB page at a time; return True if a page was cold,
    having moved the rest of ``a``, from the page after it, to small pages.

    Why: on a VM whose host backs guest memory lazily and takes back what the guest
    frees (Firecracker with free page reporting), the first touch of a 2 MB page the
    host no longer backs is slow, and most pages of a new array are then cold too: a
    growing piece cache stalled whole runs. 4 KB pages cost the same on such a VM,
    cold or not, more than huge pages that are backed and far less than cold ones, so
    they are used only once a page was seen cold: one cold page, then the
    rest at 4 KB (bench/results/session22-cache-pages-20261204.md), and so is every
    array filled after it in the process (then True at once). Only for arrays
    from :func:`huge_page_array` (at 2 MB boundaries), and with ``watch``. Should
    ``madvise`` fail, the rest stays as it was.

    >>> a = huge_page_array(3 * _PAGE_WORDS)
    >>> fill_words(a, 0, a.size, 7, watch=False), int(a.min()), int(a.max())
    (False, 7, 7)
    """
    global _cold_seen
    if not watch or a.nbytes < 2 * _HUGE_PAGE or a.ctypes.data % _HUGE_PAGE or not sys.platform.startswith("linux"):
        if _cold_seen:  # small pages by now (the rest of a cold array, or a small array)
            _populate(a, start, end)
        a[start:end] = value
        return False
    if _cold_seen:  # this process met a cold page: the next new array's pages are cold too
        _small_pages(a, start // _PAGE_WORDS * _PAGE_WORDS * 8)  # from the page ``start`` is in
        _populate(a, start, end)
        a[start:end] = value
        return True
    lo = start
    while lo < end:
        hi = min(end, (lo // _PAGE_WORDS + 1) * _PAGE_WORDS)
        t0 = time.thread_time()
        a[lo:hi] = value
        if time.thread_time() - t0 > _COLD_S:
            _cold_seen = True
            _small_pages(a, -(-hi // _PAGE_WORDS) * _PAGE_WORDS * 8)  # from the next page boundary
            _populate(a, hi, end)
            a[hi:end] = value
            return True
        lo = hi
    return False


def _populate(a: np.ndarray, start: int, end: int) -> None:
    """Fault in the small pages of ``a[start:end]`` (int64 words) with one ``madvise``
    (MADV_POPULATE_WRITE) instead of a trap a page as they are written, which costs
    more on a VM (bench/results/session38-20261206.md). Contents are unchanged;
    nothing happens on kernels without it, or below ``_POPULATE_MIN`` bytes."""
    global _can_populate
    if not _can_populate or (end - start) * 8 < _POPULATE_MIN or not sys.platform.startswith("linux"):
        return
    lo = a.ctypes.data + start * 8
    lo_page = lo - lo % 4096  # (madvise wants a page boundary; the page is a's or already mapped)
    if _libc().madvise(ctypes.c_void_p(lo_page), ctypes.c_size_t(a.ctypes.data + end * 8 - lo_page), _MADV_POPULATE_WRITE):
        if ctypes.get_errno() == errno.EINVAL:  # the kernel has no MADV_POPULATE_WRITE
            _can_populate = False


def _small_pages(a: np.ndarray, rest: int) -> None:
    """Map ``a`` from ``rest`` bytes into it on small pages (where not yet touched)."""
    if rest < a.nbytes:
        _libc().madvise(ctypes.c_void_p(a.ctypes.data + rest), ctypes.c_size_t(a.nbytes - rest), _MADV_NOHUGEPAGE)


@functools.cache
def _libc():
    """The C library, with ``madvise`` typed."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc
