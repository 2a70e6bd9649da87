"""``_intrinsics.rows`` and ``flat``, the views the kernels make of their tables, cache and
blocks, against NumPy's reshape of the same arrays: in a kernel with Numba's runtime, in
one without (as ``_encode_span`` is compiled), and as Python."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from dwstok._intrinsics import flat, rows
from dwstok._jit import njit, njit_no_nrt


@njit
def _views(P, start, stop, ncols):
    r = rows(P[start:stop], ncols)
    return r, flat(r)


@njit_no_nrt
def _write_through(P, start, stop, ncols):
    """Writes through a view of a view, without the runtime (no owner to count); returns
    what the views read back and their shapes and strides."""
    r = rows(P[start:stop], ncols)
    f = flat(r)
    r[r.shape[0] - 1, ncols - 1] = -7
    f[0] = -5
    return r[0, 0] + f[f.size - 1], r.shape[0], r.shape[1], r.strides[0], r.strides[1], f.size, f.strides[0]


@pytest.mark.parametrize(("start", "stop", "ncols"), [(0, 12, 4), (3, 15, 3), (8, 8, 4), (5, 7, 2), (0, 40, 1)])
def test_views_equal_numpy_reshape(start, stop, ncols):
    P = np.arange(100, dtype=np.int64) * 3
    r, f = _views(P, start, stop, ncols)
    want = P[start:stop].reshape(-1, ncols)
    assert r.shape == want.shape and r.strides == want.strides and (r == want).all()
    assert f.shape == (stop - start,) and (f == P[start:stop]).all()
    # views of P, not copies, and as Python the same
    assert stop == start or (np.shares_memory(r, P) and np.shares_memory(f, P))
    assert (rows(P[start:stop], ncols) == want).all() and (flat(want) == P[start:stop]).all()


def test_a_view_keeps_its_array_alive():
    P = np.arange(64, dtype=np.int64)
    r, f = _views(P, 8, 48, 4)
    del P
    gc.collect()
    assert r[9].tolist() == [44, 45, 46, 47] and f[-1] == 47


def test_views_write_through_without_the_runtime():
    P = np.arange(30, dtype=np.int64)
    got = _write_through(P, 6, 18, 3)
    assert got == (-5 + -7, 4, 3, 24, 8, 12, 8)
    assert P[6] == -5 and P[17] == -7 and P[5] == 5 and P[18] == 18
