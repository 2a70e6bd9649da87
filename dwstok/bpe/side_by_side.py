"""Merging the short pieces of a block side by side, one step of each in turn, so that the
pair lookups of a piece's next step are prefetched a whole round before they are read:
waits on memory overlap instead of following one another."""

from __future__ import annotations

import numpy as np

from .._intrinsics import prefetch as _prefetch
from .._intrinsics import ix as _ix
from .._jit import njit_no_nrt
from ..hashing import _hash_pair
from .tables import NO_RANK, _filter_word, _filtered_rank


@njit_no_nrt
def _merge_side_by_side(T, bids, brk, boff, bm, pkey, ppos, act, binit, nact):
    """Step 3 of ``_encode_span``: merge the ``nact`` merges listed in ``act`` (pieces,
    or segments of one, see atoms.py) side by side.

    Merge q's parts are ``bids[boff[q]:boff[q] + bm[q]]`` and its pair ranks are in
    ``brk`` (pair keys if ``binit[q]``: their filter words and lookups were prefetched in
    step 2b). Each round takes one merge step of every merge still going (in ``act``),
    so the pair lookups a step needs are prefetched a whole round before they are read.
    Each step is ``_merge``'s quadratic scan, so ids are unchanged.
    """
    pairs = T.pairs
    pair_filter = T.pair_filter
    rank_new = T.rank_new
    bits = T.pair_bits
    shift = 63 - 2 * bits
    pmask = pairs.size - 1
    rank_is_id = rank_new.size == 0
    while nact > 0:
        w = 0
        for a in range(nact):
            q = act[_ix(a)]
            base = boff[_ix(q)]
            if binit[_ix(q)]:  # the first ranks of a piece with atoms (keys in brk)
                binit[_ix(q)] = False
                for pa in range(bm[_ix(q)] - 1):
                    key = brk[_ix(base + pa)]
                    brk[_ix(base + pa)] = _filtered_rank(pairs, pair_filter, key, _hash_pair(key), shift, pmask)
            for side in range(2):  # the lookups prefetched last round, filter first (as _pair_rank)
                pos = ppos[_ix(2 * q + side)]
                if pos < 0:
                    continue
                key = pkey[_ix(2 * q + side)]
                brk[_ix(base + pos)] = _filtered_rank(pairs, pair_filter, key, _hash_pair(key), shift, pmask)
            mm = bm[_ix(q)]
            best = NO_RANK
            bi = -1
            for i in range(mm - 1):  # the first minimum is the leftmost
                if brk[_ix(base + i)] < best:
                    best = brk[_ix(base + i)]
                    bi = i
            if bi < 0:
                continue  # done
            bids[_ix(base + bi)] = np.int32(best) if rank_is_id else rank_new[_ix(best)]
            for jj in range(bi + 1, mm - 1):
                bids[_ix(base + jj)] = bids[_ix(base + jj + 1)]
            for jj in range(bi + 1, mm - 2):
                brk[_ix(base + jj)] = brk[_ix(base + jj + 1)]
            mm -= 1
            bm[_ix(q)] = mm
            bids[_ix(base + mm)] = -1  # (step 4 skips it)
            for side in range(2):  # the pairs on both sides of the new token
                pa = bi - 1 + side
                ppos[_ix(2 * q + side)] = -1
                if pa < 0 or pa + 1 >= mm:
                    continue
                key = (np.int64(bids[_ix(base + pa)]) << bits) | np.int64(bids[_ix(base + pa + 1)])
                h = _hash_pair(key)
                # the filter's word and the pair's slot, both read next round: the
                # filter, 128 KB, is mostly out of L1 and often out of L2 by then
                _prefetch(pair_filter, _filter_word(pair_filter, h))
                _prefetch(pairs, np.int64(h & np.uint64(pmask)))
                pkey[_ix(2 * q + side)] = key
                ppos[_ix(2 * q + side)] = pa
            if mm > 1:
                act[_ix(w)] = q
                w += 1
        nact = w

