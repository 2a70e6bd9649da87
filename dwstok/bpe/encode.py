"""The entry kernels: pretokens (or text, scanned in the same call) to ids, and the Python
wrappers that validate and allocate around them."""

from __future__ import annotations

import numba
import numpy as np

from .._intrinsics import pointer
from .._jit import as_u8, njit, njit_inline, njit_no_nrt, read_only
from ..pylist import list_into
from ..scanner import KIND_CL100K, KIND_GPT2, KIND_O200K, KIND_O200K_RDIGITS, _scan_cl100k, _scan_gpt2, _scan_o200k
from .cache import CACHE_GROW, _cache_views, _mark_growth, _new_cache, _new_cache_packed
from .merge import _scratch, _scratch_in, scratch_words
from .span import PF_BLOCK, _encode_pieces, _encode_span, block_words, span_work
from .tables import BpeTables, _unpack_tables, pack_tables

FEW_PIECES = 16  # a text (or a batch's document) with up to this many pieces encodes them one by one


@njit
def _encode_bounds(buf, bounds, P, out):
    T = _unpack_tables(P)
    C = _new_cache(buf.size)
    S = _scratch(buf.size)
    W = span_work(bounds.size - 1)
    return _encode_span(buf, bounds, np.int64(0), bounds.size - 1, T, C, S, out, np.int64(0), W)  # int64 as elsewhere: one compiled _encode_span, not two


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
    W = span_work(PF_BLOCK)
    n = 0
    for d in range(d0, d1):
        out_doc[d - d0] = n
        n = _encode_span(data, bounds, doc_bidx[d], doc_bidx[d + 1], T, C, S, out, np.int64(n), W)
    out_doc[d1 - d0] = n
    return n


# ----------------------------------------------------------- fused scan + encode
#
# One entry kernel per scanner (o200k and o200k-rdigits share one, by a flag), not one
# that picks the scanner by ``kind`` at run time: a kernel compiles everything it may
# call, and a model only ever uses one scanner. The Python functions below pick the kernel.


@njit_inline
def _work_words(nbytes):
    """int64 words of the work array for a text of ``nbytes`` bytes (:func:`_work_views`)."""
    return nbytes + 1 + scratch_words(nbytes) + block_words(min(PF_BLOCK, max(nbytes, 1)))


@njit_inline
def _work_views(w, nbytes):
    """``(bounds, S, W)`` for a text of ``nbytes`` bytes, as views of ``w``
    (``_work_words(nbytes)`` words): room for its piece bounds, the merge scratch
    (``_scratch``) and the span driver's work words (``span_work``). One allocation a
    call, not three (on a short text each cost about as much as scanning it)."""
    sw = scratch_words(nbytes)
    return w[: nbytes + 1], _scratch_in(w[nbytes + 1 : nbytes + 1 + sw], nbytes), w[nbytes + 1 + sw :]


@njit_inline
def _work(nbytes):
    """:func:`_work_views` of a new array."""
    return _work_views(np.empty(_work_words(nbytes), np.int64), nbytes)


@njit
def _encode_fused_o200k(kind, table, text, P, CP, out):
    """The ids of ``text`` scanned as o200k (``kind``: with digits from the right or
    not) into ``out`` (room for one a byte); return how many.

    Into the caller's ``out``, not an array of its own: a kernel's new array costs more
    to hand back to Python than a short text costs to encode, and a caller
    making a list needs no array at all. A few pieces are
    encoded one by one: blocking lookups to overlap them pays for itself only over many
    pieces; its setup (17 arrays) cost more than "hello world" did.

    The three kernels differ in their scanner only; what follows the scan is one
    kernel of its own that all three call (``_encode_scanned``), not an inlined body:
    Numba copies an inlined body, with all that was inlined into it, at each level.
    """
    buf = as_u8(text)
    if out.size < buf.size:
        raise ValueError("out has room for fewer ids than the text has bytes")
    w = np.empty(_work_words(buf.size), np.int64)
    nb = _scan_o200k(buf, np.int64(0), buf.size, table, w[: buf.size + 1], kind == KIND_O200K_RDIGITS)  # as scan_range: one compile
    return _encode_scanned(buf, w, nb, P, CP, out)


@njit
def _encode_fused_cl100k(kind, table, text, P, CP, out):
    """As :func:`_encode_fused_o200k`, scanned as cl100k."""
    buf = as_u8(text)
    if out.size < buf.size:
        raise ValueError("out has room for fewer ids than the text has bytes")
    w = np.empty(_work_words(buf.size), np.int64)
    nb = _scan_cl100k(buf, np.int64(0), buf.size, table, w[: buf.size + 1])
    return _encode_scanned(buf, w, nb, P, CP, out)


@njit
def _encode_fused_gpt2(kind, table, text, P, CP, out):
    """As :func:`_encode_fused_o200k`, scanned as GPT-2."""
    buf = as_u8(text)
    if out.size < buf.size:
        raise ValueError("out has room for fewer ids than the text has bytes")
    w = np.empty(_work_words(buf.size), np.int64)
    nb = _scan_gpt2(buf, np.int64(0), buf.size, table, w[: buf.size + 1])
    return _encode_scanned(buf, w, nb, P, CP, out)


@njit_no_nrt
def _encode_scanned(buf, w, nb, P, CP, out):
    """The fused kernels' encoding of the ``nb`` pieces they scanned into the work array
    ``w`` (:func:`_work_views`; the kernels above allocate it, as this cannot).

    Without Numba's runtime, like ``_encode_span``: the views of the tables, the cache
    and the work array that a call makes cost no reference counts. Handed over as views
    (the bounds, the merge scratch and the span driver's words: ten arrays), each had
    been counted up and down on every call, which cost a short text more than encoding
    it (bench/results/session57-20261207.md).
    """
    T = _unpack_tables(P)
    C = _cache_views(CP)
    bounds, S, W = _work_views(w, buf.size)
    if nb > FEW_PIECES:
        n = _encode_span(buf, bounds, np.int64(0), nb, T, C, S, out, np.int64(0), W)
    else:
        n = _encode_pieces(buf, bounds, np.int64(0), nb, T, C, S, out, np.int64(0))
    _mark_growth(CP)
    return n


@njit_no_nrt
def _encode_few(buf, bounds, nb, T, C, S, out, n):
    """A batch's document of up to ``FEW_PIECES`` pieces, scanned into ``bounds``, one
    piece at a time into out[n:]; return the new n. ``_encode_span``'s blocks set up a
    score of work arrays, which cost such a document more than its lookups
    (bench/results/session31-20261205.md). A function of its own, so that the batch
    kernels call ``_encode_span`` as before for the rest: another call in between had
    made documents of 20-30 pieces slower."""
    return _encode_pieces(buf, bounds, np.int64(0), nb, T, C, S, out, n)


_FUSED = {KIND_O200K: _encode_fused_o200k, KIND_O200K_RDIGITS: _encode_fused_o200k, KIND_CL100K: _encode_fused_cl100k, KIND_GPT2: _encode_fused_gpt2}


# -------------------------------------------------------- lists, for encode()
#
# On a short text, ``encode()`` is mostly its call: Numba converts each array argument
# to an array with a reference-counted owner, made and freed per call. So the list
# kernels take the model's arrays (scanner table, packed tables, the shared ints of
# dwstok.pylist) by the address of a descriptor (``list_consts``) and view them inside,
# with no owner; only the pool's cache and ``out`` come as arrays.

_CONSTS = 7  # words of a descriptor: kind, then the address and size of table, P and L
GROWS = 1 << 32  # what a list kernel adds to its count of ids when the cache is due to grow


def list_consts(kind: int, table: np.ndarray, P: np.ndarray, L: np.ndarray) -> np.ndarray:
    """The descriptor whose address (``.ctypes.data``) a list kernel takes: ``kind``,
    then the address and size of the scanner's ``table`` (uint8), the packed tables
    ``P`` (int64) and pylist's table ``L`` (uint64). Whoever passes the address keeps the
    descriptor and the three arrays alive while the kernel runs.

    >>> d = list_consts(0, np.zeros(4, np.uint8), np.zeros(2, np.int64), np.zeros(1, np.uint64))
    >>> d[[0, 2, 4, 6]].tolist()
    [0, 4, 2, 1]
    """
    for a, dtype in ((table, np.uint8), (P, np.int64), (L, np.uint64)):
        if a.dtype != dtype or not a.flags.c_contiguous:
            got = f"{a.dtype}" if a.flags.c_contiguous else f"a strided {a.dtype} array"
            raise TypeError(f"list_consts takes contiguous {np.dtype(dtype)} arrays, not {got}")
    return np.array([kind, table.ctypes.data, table.size, P.ctypes.data, P.size, L.ctypes.data, L.size], np.int64)


@njit_inline
def _consts(d):
    """``(kind, table, P, L)`` from the descriptor at address ``d`` (see list_consts)."""
    D = numba.carray(pointer(d), _CONSTS, np.int64)
    table = numba.carray(pointer(D[1]), D[2], np.uint8)
    P = numba.carray(pointer(D[3]), D[4], np.int64)
    L = numba.carray(pointer(D[5]), D[6], np.uint64)
    return D[0], table, P, L


@njit_inline
def _listed(box, out, n, L, CP):
    """The list kernels' end: the ``n`` ids in ``out`` as a new list in ``box``
    (dwstok.pylist.list_into), and ``n``, plus ``GROWS`` if the cache ``CP`` is due to
    grow (so the caller need not read it)."""
    list_into(box, out, n, L)
    return n + GROWS if CP[CACHE_GROW] else n


@njit
def _list_fused_o200k(text, d, CP, out, box):
    """:func:`_encode_fused_o200k` with the arrays of descriptor ``d`` (see list_consts),
    then :func:`_listed`."""
    kind, table, P, L = _consts(d)
    return _listed(box, out, _encode_fused_o200k(kind, table, text, P, CP, out), L, CP)


@njit
def _list_fused_cl100k(text, d, CP, out, box):
    kind, table, P, L = _consts(d)
    return _listed(box, out, _encode_fused_cl100k(kind, table, text, P, CP, out), L, CP)


@njit
def _list_fused_gpt2(text, d, CP, out, box):
    kind, table, P, L = _consts(d)
    return _listed(box, out, _encode_fused_gpt2(kind, table, text, P, CP, out), L, CP)


_LIST_FUSED = {KIND_O200K: _list_fused_o200k, KIND_O200K_RDIGITS: _list_fused_o200k, KIND_CL100K: _list_fused_cl100k, KIND_GPT2: _list_fused_gpt2}


def list_kernel(kind: int):
    """For scanner ``kind``, the kernel ``f(text, d, CP, out, box) -> n (+ GROWS)`` that
    encodes as :func:`fused_kernel` does and puts the ids in ``box[0]`` as a list;
    ``d``: the address of a :func:`list_consts` descriptor."""
    return _LIST_FUSED[kind]


def fused_kernel(kind: int):
    """The kernel ``f(kind, table, text, P, CP, out) -> n`` that :func:`_encode_fused`
    calls for scanner ``kind``: a caller that encodes many short texts can keep it, and
    an ``out`` (uint32, room for one id a byte), and save a call and an array a text."""
    return _FUSED[kind]


def _encode_fused(kind, table, text, P, CP):
    """Ids of UTF-8 ``text`` (bytes or a uint8 array), scanned with the native scanner
    ``kind`` and encoded in one nogil call, as an array of their own.

    ``P`` is the packed tables and ``CP`` a packed cache: one argument each, not 15
    (Numba's dispatcher unboxes each array argument, a large part of a short call).
    """
    out = np.empty(max(len(text), 1), np.uint32)
    n = _FUSED[kind](kind, table, text, P, CP, out)
    out.resize(n, refcheck=False)  # in place: room for one id a byte is 4-5x too much
    return out


def _encode_docs_fused(kind, table, data, offsets, d0, d1, P, CP, out, out_doc):
    """Scan and encode documents d0..d1 (document d = data[offsets[d]:offsets[d+1]]),
    with the packed tables ``P`` and the piece cache ``CP`` (from :func:`new_cache`; it
    may come from earlier calls).

    ``data`` goes to the kernel read-only, whatever the caller's array: Numba compiles a
    kernel (and the span driver in it) once per argument type, and a writable and a
    read-only array (Arrow's buffers) are two."""
    return _DOCS_FUSED[kind](kind, table, read_only(data), offsets, d0, d1, P, CP, out, out_doc)


@njit_inline
def _docs_scratch(offsets, d0, d1, P, CP):
    T = _unpack_tables(P)
    C = _cache_views(CP)
    longest = 0
    for d in range(d0, d1):
        longest = max(longest, offsets[d + 1] - offsets[d])
    bounds, S, W = _work(longest)
    return T, C, bounds, S, W


@njit
def _encode_docs_fused_o200k(kind, table, data, offsets, d0, d1, P, CP, out, out_doc):
    T, C, bounds, S, W = _docs_scratch(offsets, d0, d1, P, CP)
    n = 0
    for d in range(d0, d1):
        out_doc[d - d0] = n
        s, e = offsets[d], offsets[d + 1]
        if e > s:
            nb = _scan_o200k(data, s, e, table, bounds, kind == KIND_O200K_RDIGITS)
            if nb > FEW_PIECES:
                n = _encode_span(data, bounds, np.int64(0), nb, T, C, S, out, np.int64(n), W)
            else:
                n = _encode_few(data, bounds, nb, T, C, S, out, np.int64(n))
    out_doc[d1 - d0] = n
    _mark_growth(CP)
    return n


@njit
def _encode_docs_fused_cl100k(kind, table, data, offsets, d0, d1, P, CP, out, out_doc):
    T, C, bounds, S, W = _docs_scratch(offsets, d0, d1, P, CP)
    n = 0
    for d in range(d0, d1):
        out_doc[d - d0] = n
        s, e = offsets[d], offsets[d + 1]
        if e > s:
            nb = _scan_cl100k(data, s, e, table, bounds)
            if nb > FEW_PIECES:
                n = _encode_span(data, bounds, np.int64(0), nb, T, C, S, out, np.int64(n), W)
            else:
                n = _encode_few(data, bounds, nb, T, C, S, out, np.int64(n))
    out_doc[d1 - d0] = n
    _mark_growth(CP)
    return n


@njit
def _encode_docs_fused_gpt2(kind, table, data, offsets, d0, d1, P, CP, out, out_doc):
    T, C, bounds, S, W = _docs_scratch(offsets, d0, d1, P, CP)
    n = 0
    for d in range(d0, d1):
        out_doc[d - d0] = n
        s, e = offsets[d], offsets[d + 1]
        if e > s:
            nb = _scan_gpt2(data, s, e, table, bounds)
            if nb > FEW_PIECES:
                n = _encode_span(data, bounds, np.int64(0), nb, T, C, S, out, np.int64(n), W)
            else:
                n = _encode_few(data, bounds, nb, T, C, S, out, np.int64(n))
    out_doc[d1 - d0] = n
    _mark_growth(CP)
    return n


_DOCS_FUSED = {
    KIND_O200K: _encode_docs_fused_o200k,
    KIND_O200K_RDIGITS: _encode_docs_fused_o200k,
    KIND_CL100K: _encode_docs_fused_cl100k,
    KIND_GPT2: _encode_docs_fused_gpt2,
}


def encode_native(kind: int, table: np.ndarray, buf: np.ndarray | bytes, tables: np.ndarray, cache=None) -> np.ndarray:
    """Ids of UTF-8 ``buf`` (an array or bytes) pretokenized by the native scanner ``kind`` (uint32).

    ``tables`` is packed (:func:`pack_tables`, made once by the caller; a BpeTables is
    packed per call). ``cache`` (from
    :func:`new_cache`) carries merged pieces over from earlier calls; it must not be
    shared between threads.
    """
    P = tables if isinstance(tables, np.ndarray) else pack_tables(tables)
    return _encode_fused(kind, table, buf, P, _new_cache_packed(len(buf)) if cache is None else cache)
