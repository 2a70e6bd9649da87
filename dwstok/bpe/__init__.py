"""Numba BPE kernels: pretokens in, token ids out.

A piece is merged by always applying the lowest-ranked adjacent pair, the leftmost one
among equal ranks (this decides runs such as ``aaa`` or three spaces). A model becomes
flat arrays (tables.py, built in build.py). Most pretokens of real text are a token
whole and are found in one lookup; the rest are merged, and merged pieces go into a
cache that outlives the call (cache.py), so a repeated word costs one lookup.

A piece is merged (merge.py) by the quadratic scan tiktoken uses when it starts with
up to ``QUAD_PARTS`` parts (quadratic.py), else with a 4-ary heap over a linked list,
O(n log n) (heap.py), after a few sweeps a rank at a time for long runs (sweeps.py).
The span driver (span.py) takes pieces in blocks and merges a block's short pieces
side by side (side_by_side.py), so that waits on memory overlap. encode.py holds the
entry kernels. Where the time goes: bench/results/bpe-kernels.md.

>>> import numpy as np
>>> t = build_tables(
...     [bytes([b]) for b in range(256)] + [b"aa", b"aaa", b"aaab"],
...     np.array([97, 256, 257]), np.array([97, 97, 98]), np.array([256, 257, 258]),
...     rule="merges",
... )
>>> buf = np.frombuffer(b"aaabdaaabac", np.uint8)
>>> encode_bounds(buf, np.array([0, 11]), t).tolist()
[258, 100, 258, 97, 99]
"""

from __future__ import annotations

from .build import build_tables
from .cache import CACHE_GROW, CACHE_MAX_CAPACITY, CACHE_RESETS, CACHE_SLOTS, CACHE_SOON_AT, GROW_SOON, NextCache, cache_capacity, grown_cache, new_cache
from .encode import GROWS, _encode_docs, _encode_docs_fused, _encode_fused, encode_bounds, encode_native, fused_kernel, list_consts, list_kernel
from .merge import split_token
from .pages import huge_page_array, on_huge_pages
from .quadratic import QUAD_PARTS
from .tables import NO_RANK, BpeTables, decode_ids, pack_tables, unpack_tables

# The Tokenizer calls the entry kernels _encode_fused, _encode_docs and _encode_docs_fused
# directly (one Python call less a short encode than through a wrapper).
__all__ = [
    "CACHE_GROW",
    "CACHE_MAX_CAPACITY",
    "CACHE_RESETS",
    "CACHE_SLOTS",
    "CACHE_SOON_AT",
    "GROW_SOON",
    "GROWS",
    "NO_RANK",
    "NextCache",
    "QUAD_PARTS",
    "BpeTables",
    "build_tables",
    "cache_capacity",
    "decode_ids",
    "encode_bounds",
    "encode_native",
    "list_consts",
    "list_kernel",
    "fused_kernel",
    "grown_cache",
    "huge_page_array",
    "new_cache",
    "on_huge_pages",
    "pack_tables",
    "split_token",
    "unpack_tables",
]
