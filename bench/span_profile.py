"""Where the span driver's time goes: CPU cycles a piece in each of its steps, per
language group, on the first pass (pieces new) and the second (every piece seen).

A copy of ``_encode_span``'s block loop with the cycle counter (``llvm.readcyclecounter``)
read between its steps, calling the same step functions (span.py), so each step's code
is the encoder's own; keep the loop in step with ``_encode_span`` when that changes.
One cache for the whole sample (as a corpus run has), warmed on the first MB of dev.

    .venv/bin/python bench/span_profile.py                # every group
    .venv/bin/python bench/span_profile.py --groups ja zh en
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from encode_groups import RANKS, SPECIALS, _warm_texts, sample  # noqa: E402

STEPS = ("list", "hash", "front", "classify", "setup", "merge", "write")


def _kernel():
    import numba
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    from dwstok.bpe import span as SP
    from dwstok.bpe.cache import _cache_views
    from dwstok.bpe.merge import _scratch
    from dwstok.bpe.side_by_side import _merge_side_by_side

    @intrinsic
    def cycles(typingctx):
        def codegen(context, builder, signature, args):
            fn = builder.module.declare_intrinsic("llvm.readcyclecounter", fnty=ir.FunctionType(ir.IntType(64), []))
            return builder.call(fn, [])

        return types.int64(), codegen

    @numba.njit  # not cached: compiled against the step functions as they are now
    def profile(buf, bounds, T, CP, out, w, st):
        """``_encode_span`` over all of ``bounds``, adding each step's cycles to st[0:7];
        st[7:11]: pieces, front misses, misses, merges side by side (a piece's segments with pairs, see atoms.py)."""
        slots, vals, state, keys, front = _cache_views(CP)
        S = _scratch(4096)
        k1 = bounds.size - 1
        nblk = min(SP.PF_BLOCK, max(k1, 1))
        B = SP._block(w, nblk)
        n = 0
        for b0 in range(0, k1, nblk):
            b1 = min(b0 + nblk, k1)
            t0 = cycles()
            SP._make_room(slots, vals, state, keys, b1 - b0)
            ns, nl, n1 = SP._list_by_kind(bounds, b0, b1, B.sidx, B.lidx, B.bidx)
            SP._settle_small(buf, bounds, b0, B.bidx, n1, T.small_ids, B.res, B.hslot)
            t1 = cycles()
            SP._hash_short(buf, bounds, b0, B.sidx, ns, B.heads, B.hq, front)
            SP._hash_long(buf, bounds, b0, B.lidx, nl, B.heads, B.hq, front)
            t2 = cycles()
            ns = SP._front_lookup(buf, bounds, b0, B.sidx, ns, B.heads, B.hq, front, T.whole, T.long_filter, B, True)
            nl = SP._front_lookup(buf, bounds, b0, B.lidx, nl, B.heads, B.hq, front, T.longs, T.long_filter, B, False)
            t3 = cycles()
            nmiss = SP._classify_short(bounds, b0, B.sidx, ns, T.whole, slots, front, B, 0)
            nmiss = SP._classify_long(buf, bounds, b0, B.lidx, nl, T.longs, T.long_filter, T.tok_bytes, T.tok_off, slots, front, B, nmiss)
            t4 = cycles()
            nq = SP._set_up_merges(buf, bounds, b0, nmiss, T.byte_ids, T.atoms, T.atom_pats, T.atom_joins, T.byte_pairs,
                                   T.pairs, T.pair_filter, T.pair_bits, slots, vals, state, keys, front, B)
            t5 = cycles()
            _merge_side_by_side(T, B.bids, B.brk, B.boff, B.bm, B.pkey, B.ppos, B.act, B.binit, np.int64(nq))
            t6 = cycles()
            n = SP._write_out(buf, bounds, b0, b1, T, S, slots, vals, state, keys, front, B, out, n)
            t7 = cycles()
            for i, dt in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6)):
                st[i] += dt
            st[7] += b1 - b0
            st[8] += ns + nl
            st[9] += nmiss
            st[10] += nq
        return n

    return profile, SP


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", nargs="*")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    from dwstok import Tokenizer
    from dwstok.bpe.cache import new_cache
    from dwstok.scanner import get_scanner

    profile, SP = _kernel()
    tok = Tokenizer.from_tiktoken(RANKS, pattern="o200k", special_tokens=SPECIALS)
    T = tok._kernels()[1]
    scan = get_scanner("o200k")
    CP = new_cache(1 << 26)
    w = np.empty(SP.block_words(SP.PF_BLOCK), np.int64)

    def run(docs, stats=None):
        for lang, text in docs:
            buf = np.frombuffer(text.encode(), np.uint8)
            st = np.zeros(11, np.int64)
            profile(buf, scan.bounds(buf), T, CP, np.empty(buf.size + 8, np.uint32), w, st)
            if stats is not None:
                stats[lang] = stats.get(lang, 0) + st

    run([("warm", t) for t in _warm_texts()])
    docs = sample(200, 100, args.groups)
    passes = {"first": {}, "second": {}}
    for stats in passes.values():
        run(docs, stats)
    print("CPU cycles a piece in each step of the span driver (its cycle counter); then front misses,")
    print("cache misses, and merges side by side (segments with pairs to merge), a piece")
    for name, stats in passes.items():
        print(f"\n{name} pass\n")
        print("| group | " + " | ".join(STEPS) + " | all | misses | set up | merged |")
        print("| --- |" + " ---: |" * (len(STEPS) + 4))
        for lang in sorted(stats) + ["all"]:
            s = sum(stats.values()) if lang == "all" else stats[lang]
            cells = [f"{s[i] / s[7]:.1f}" for i in range(7)] + [f"{s[:7].sum() / s[7]:.1f}"]
            cells += [f"{s[i] / s[7]:.2f}" for i in (8, 9, 10)]
            print(f"| {lang} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
