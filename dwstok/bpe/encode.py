"""The entry kernels: pretokens (or text, scanned in the same call) to ids, and the Python
wrappers that validate and allocate around them."""

from __future__ import annotations

import numpy as np

from .._jit import as_u8, njit
from ..scanner import scan_range
from .cache import _cache_views, _mark_growth, _new_cache, _new_cache_packed
from .merge import _scratch
from .span import _encode_piece, _encode_span
from .tables import BpeTables, _unpack_tables, pack_tables

FEW_PIECES = 16  # a call with up to this many pieces encodes them one by one, see _encode_fused


@njit
def _encode_bounds(buf, bounds, P, out):
    T = _unpack_tables(P)
    C = _new_cache(buf.size)
    S = _scratch(buf.size)
    return _encode_span(buf, bounds, np.int64(0), bounds.size - 1, T, C, S, out, np.int64(0))  # int64 as elsewhere: one compiled _encode_span, not two


def encode_bounds(buf: np.ndarray, bounds: np.ndarray, tables: BpeTables | np.ndarray) -> np.ndarray:
    """Ids of the pretokens ``buf[bounds[k]:bounds[k+1]]`` (uint32). ``tables`` may come
    packed (:func:`pack_tables`), as a Tokenizer keeps them."""
    P = tables if isinstance(tables, np.ndarray) else pack_tables(tables)
    out = np.empty(max(buf.size, 1), np.uint32)
    n = _encode_bounds(buf, np.asarray(bounds, np.int64), P, out)
    out.resize(n, refcheck=False)  # in place (a realloc): room for one id a byte is 4-5x too much
    return out


@njit
def _encode_docs(data, bounds, doc_bidx, d0, d1, P, out, out_doc):
    """Encode documents d0..d1; the pieces of document d are bounds[doc_bidx[d]:doc_bidx[d+1]+1].
    ``P``: the packed tables."""
    T = _unpack_tables(P)
    C = _new_cache(data.size if d1 <= d0 else bounds[doc_bidx[d1]] - bounds[doc_bidx[d0]])
    S = _scratch(data.size if d1 <= d0 else bounds[doc_bidx[d1]] - bounds[doc_bidx[d0]])
    n = 0
    for d in range(d0, d1):
        out_doc[d - d0] = n
        n = _encode_span(data, bounds, doc_bidx[d], doc_bidx[d + 1], T, C, S, out, n)
    out_doc[d1 - d0] = n
    return n


# ----------------------------------------------------------- fused scan + encode


@njit
def _encode_fused(kind, table, text, P, CP):
    """Ids of UTF-8 ``text`` (bytes or a uint8 array), scanned with the native scanner
    ``kind`` and encoded in one nogil call, as an array of their own.

    ``P`` is the packed tables and ``CP`` a packed cache: one argument each, not 15
    (Numba's dispatcher unboxes each array argument, a large part of a short call). The
    ids go to room for one a byte, then to an array of their size: text has one a 4-5
    bytes, and a view would keep all the room alive. The copy costs less than an
    ``out`` argument would (unboxed by the dispatcher, then shrunk by NumPy).
    """
    buf = as_u8(text)
    T = _unpack_tables(P)
    C = _cache_views(CP)
    bounds = np.empty(buf.size + 1, np.int64)
    nb = scan_range(kind, buf, np.int64(0), buf.size, table, bounds)  # not a literal 0: one compile, shared with _encode_docs_fused
    S = _scratch(buf.size)
    out = np.empty(buf.size, np.uint32)
    n = 0
    if nb > FEW_PIECES:
        n = _encode_span(buf, bounds, np.int64(0), nb, T, C, S, out, np.int64(0))
    else:
        # A few pieces: one by one. Blocking lookups to overlap them pays for itself only
        # over many pieces; its setup (17 arrays) cost more than "hello world" did.
        for k in range(nb):
            if bounds[k + 1] > bounds[k]:
                n = _encode_piece(buf, bounds[k], bounds[k + 1], T, C, S, out, n)
    _mark_growth(CP)
    return out[:n].copy()


def _encode_docs_fused(kind, table, data, offsets, d0, d1, P, CP, out, out_doc):
    """:func:`_encode_docs_fused_kernel` with ``data`` passed read-only, whatever the
    caller's array: Numba compiles a kernel (and the span driver in it) once per
    argument type, and a writable and a read-only array (Arrow's buffers) are two."""
    if data.flags.writeable:
        data = data.view()
        data.flags.writeable = False
    return _encode_docs_fused_kernel(kind, table, data, offsets, d0, d1, P, CP, out, out_doc)


@njit
def _encode_docs_fused_kernel(kind, table, data, offsets, d0, d1, P, CP, out, out_doc):
    """Scan and encode documents d0..d1 (document d = data[offsets[d]:offsets[d+1]]),
    with the packed tables ``P`` and the piece cache ``CP`` (from :func:`new_cache`; it
    may come from earlier calls)."""
    T = _unpack_tables(P)
    C = _cache_views(CP)
    longest = 0
    for d in range(d0, d1):
        longest = max(longest, offsets[d + 1] - offsets[d])
    bounds = np.empty(longest + 1, np.int64)
    S = _scratch(longest)
    n = 0
    for d in range(d0, d1):
        out_doc[d - d0] = n
        s, e = offsets[d], offsets[d + 1]
        if e <= s:
            continue
        nb = scan_range(kind, data, s, e, table, bounds)
        n = _encode_span(data, bounds, np.int64(0), nb, T, C, S, out, n)
    out_doc[d1 - d0] = n
    _mark_growth(CP)
    return n


def encode_native(kind: int, table: np.ndarray, buf: np.ndarray | bytes, tables: np.ndarray, cache=None) -> np.ndarray:
    """Ids of UTF-8 ``buf`` (an array or bytes) pretokenized by the native scanner ``kind`` (uint32).

    ``tables`` is packed (:func:`pack_tables`, made once by the caller; a BpeTables is
    packed per call). ``cache`` (from
    :func:`new_cache`) carries merged pieces over from earlier calls; it must not be
    shared between threads.
    """
    P = tables if isinstance(tables, np.ndarray) else pack_tables(tables)
    return _encode_fused(kind, table, buf, P, _new_cache_packed(len(buf)) if cache is None else cache)
