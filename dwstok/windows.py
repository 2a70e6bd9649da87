"""An epoch of training windows, cut from the (split) token stream: layout and kernels.

The stream of an epoch is every document in corpus order, each framed by ``<bos>``
and/or ``<eos>`` if asked, with every canonical token replaced by its StochasTok pieces
(see :mod:`dwstok.stochastok`; none without it). Windows of ``seq_len + 1`` ids are cut
from it at a stride of ``seq_len``, so every piece is an input once and a target once.
Only the final partial window is left out.

Splitting lengthens the stream, so where window ``k`` starts depends on every split
before it. One counting pass per epoch (:func:`count_extras`, a Numba kernel) records
the stream position of every *chunk*: a document's tokens in runs of at most ``CHUNK``.
A window then starts by finding its chunk and splitting from there (:func:`fill`), so
any window, and so any batch, is built in time independent of its index.

>>> layout = Layout.build(np.array([0, 3, 3, 700]))  # documents of 3, 0 and 697 tokens
>>> layout.chunk_doc.tolist(), layout.chunk_start.tolist()
([0, 1, 2, 2, 2], [0, 3, 3, 259, 515, 700])
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._jit import ix, njit
from .stochastok import expand, first_draw, splits_once

__all__ = ["CHUNK", "Layout", "count_extras", "fill", "stream_starts"]

CHUNK = 256
"""Canonical tokens per chunk. A window starts at most one chunk past the point it needs,
so the work a window wastes is bounded by this; the layout and the per-epoch table
take 34 bytes per chunk (about 0.15 MB per million tokens)."""


class Layout(NamedTuple):
    """Chunks of a corpus, fixed for its shards (the same every epoch)."""

    doc_start: np.ndarray  # int64[n_docs + 1]: canonical position of each document
    chunk_doc: np.ndarray  # int64[n_chunks]: the document of each chunk
    chunk_start: np.ndarray  # int64[n_chunks + 1]: canonical position of each chunk
    first: np.ndarray  # bool[n_chunks]: a document's first chunk (after its <bos>)
    last: np.ndarray  # bool[n_chunks]: a document's last chunk (before its <eos>)

    @classmethod
    def build(cls, doc_start: np.ndarray, chunk: int = CHUNK) -> Layout:
        """Chunks from document bounds; an empty document is one empty chunk (it still
        has its ``<bos>``/``<eos>``)."""
        doc_start = np.asarray(doc_start, dtype=np.int64)
        lengths = np.diff(doc_start)
        per_doc = np.maximum(1, -(-lengths // chunk))
        chunk_doc = np.repeat(np.arange(len(lengths), dtype=np.int64), per_doc)
        first_of_doc = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(per_doc, out=first_of_doc[1:])
        k = np.arange(len(chunk_doc), dtype=np.int64) - first_of_doc[chunk_doc]
        chunk_start = np.empty(len(chunk_doc) + 1, dtype=np.int64)
        chunk_start[:-1] = doc_start[chunk_doc] + k * chunk
        chunk_start[-1] = doc_start[-1]
        return cls(doc_start, chunk_doc, chunk_start, k == 0, k == per_doc[chunk_doc] - 1)


def stream_starts(layout: Layout, extras: np.ndarray, *, n_bos: int, n_eos: int) -> np.ndarray:
    """Stream position of each chunk (``n_chunks + 1`` entries, the last the stream's
    length), from the extra tokens splitting added before each chunk start
    (``extras``, ``n_chunks + 1`` entries, 0 without StochasTok).

    A first chunk's region starts with its document's ``<bos>``; a last chunk's ends
    with its ``<eos>``.
    """
    lengths = np.diff(layout.chunk_start) + np.diff(extras)
    lengths += n_bos * layout.first + n_eos * layout.last
    q = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=q[1:])
    return q


@njit
def _count_extras(vals, g0, bounds, xs, bi, x, key, start, left, right, thr, iterations,
                  n_leaves):
    # xs[b] = extra tokens from splitting everything before canonical position bounds[b];
    # called segment by segment, carrying (bi, x) over. One loop per case: see splits_once.
    nb = bounds.shape[0]
    n_vocab = start.shape[0] - 1
    if iterations == 1:
        n = vals.shape[0]
        i = 0
        while i < n:  # a chunk at a time: the token loop inside stays tight
            while bi < nb and bounds[bi] <= g0 + i:
                xs[bi] = x
                bi += 1
            stop = min(n, bounds[bi] - g0) if bi < nb else n
            for a in range(i, stop):
                x += splits_once(np.int64(vals[a]), first_draw(key, g0 + a), n_vocab, start,
                                 thr) >= 0
            i = stop
        return bi, x
    stack_t = np.empty(iterations + 2, np.int64)
    stack_m = np.empty(iterations + 2, np.int64)
    leaves = np.empty(n_leaves, np.int64)
    for i in range(vals.shape[0]):
        g = g0 + i
        while bi < nb and bounds[bi] <= g:
            xs[bi] = x
            bi += 1
        x += expand(np.int64(vals[i]), g, key, start, left, right, thr, iterations,
                    stack_t, stack_m, leaves) - 1
    return bi, x


def count_extras(layout: Layout, segments, key: int, kernel_args: tuple) -> np.ndarray:
    """Extra tokens before each chunk start, counted over ``segments``: ``(g0, values)``
    pairs that cover the canonical tokens in order. ``kernel_args`` is
    :meth:`StochasTok.kernel_args`."""
    bounds = layout.chunk_start
    xs = np.zeros(len(bounds), dtype=np.int64)
    bi, x = 0, 0
    k = np.uint64(key)
    for g0, vals in segments:
        if len(vals):
            bi, x = _count_extras(vals, np.int64(g0), bounds, xs, bi, np.int64(x), k,
                                  *kernel_args)
    xs[bi:] = x
    return xs


@njit
def _fill(out, tok, tok_off, chunks, skips, chunk_doc, chunk_start, doc_start, bos, eos,
          n_bos, n_eos, key, start, left, right, thr, iterations, n_leaves):
    stack_t = np.empty(iterations + 2, np.int64)
    stack_m = np.empty(iterations + 2, np.int64)
    leaves = np.empty(n_leaves, np.int64)
    width = out.shape[1]
    n_docs = doc_start.shape[0] - 1
    n_vocab = start.shape[0] - 1
    for w in range(out.shape[0]):
        c = chunks[w]
        d = chunk_doc[c]
        g = chunk_start[c]
        base = tok_off[w] - g  # tok[base + g] is canonical token g
        skip = skips[w]
        j = 0
        entering = g == doc_start[d]  # a first chunk begins with its document's <bos>
        while j < width and d < n_docs:
            if n_bos and entering:
                if skip > 0:
                    skip -= 1
                else:
                    out[w, j] = bos
                    j += 1
                    if j == width:
                        break
            end = doc_start[d + 1]
            if iterations == 1:  # one loop per case: see splits_once
                while g < end and j < width:
                    t = np.int64(tok[ix(base + g)])
                    s = splits_once(t, first_draw(key, g), n_vocab, start, thr)
                    g += 1
                    if s < 0:
                        if skip > 0:
                            skip -= 1
                        else:
                            out[w, ix(j)] = t
                            j += 1
                    elif skip >= 2:
                        skip -= 2
                    else:
                        if skip == 0:
                            out[w, ix(j)] = left[ix(s)]
                            j += 1
                        skip = 0
                        if j < width:
                            out[w, ix(j)] = right[ix(s)]
                            j += 1
            while g < end and j < width:
                n = expand(np.int64(tok[base + g]), g, key, start, left, right, thr,
                           iterations, stack_t, stack_m, leaves)
                g += 1
                if skip >= n:
                    skip -= n
                    continue
                for q in range(skip, n):
                    if j < width:
                        out[w, j] = leaves[q]
                        j += 1
                skip = 0
            if j == width:
                break
            if n_eos:
                if skip > 0:
                    skip -= 1
                else:
                    out[w, j] = eos
                    j += 1
            d += 1
            entering = True
        if j < width:
            return w  # ran out of stream: the caller asked for a window past the end
    return out.shape[0]


def fill(out, tok, tok_off, chunks, skips, layout: Layout, *, bos: int, eos: int,
         n_bos: int, n_eos: int, key: int, kernel_args: tuple) -> None:
    """Write window ``w`` to ``out[w]``: the stream from ``skips[w]`` ids into chunk
    ``chunks[w]``. ``tok[tok_off[w]:]`` holds the canonical tokens from that chunk's
    start on (at least ``skips[w] + out.shape[1]`` of them, or up to the corpus end)."""
    done = _fill(out, tok, tok_off, chunks, skips, layout.chunk_doc, layout.chunk_start,
                 layout.doc_start, np.int64(bos), np.int64(eos), np.int64(n_bos),
                 np.int64(n_eos), np.uint64(key), *kernel_args)
    if done != out.shape[0]:
        raise IndexError(f"window {done} of the batch runs past the end of the epoch's stream")
