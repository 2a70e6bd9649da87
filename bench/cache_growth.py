"""What growing the piece cache costs: the call that finds a cache a quarter full moves
its entries into one with 4 times the slots (2^17 -> 2^19 here), on the calling thread.

Each run is a fresh process (a grown cache's memory is first touched in it, as in a
user's process), pinned to one CPU, so that no spare CPU clears the new cache ahead.
It fills a cache with the benchmark sample's pieces (bench/encode_groups.py) until it
is a quarter full, then times ``grown_cache``. With ``--baseline``, runs alternate with
that checkout's code.

    .venv/bin/python bench/cache_growth.py --runs 8 [--baseline /tmp/wt]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from encode_groups import RANKS, SPECIALS, sample  # noqa: E402


def _child() -> None:
    from dwstok import Tokenizer
    from dwstok.bpe import cache as C
    from dwstok.bpe.encode import _encode_fused_o200k

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    tok = Tokenizer.from_tiktoken(RANKS, pattern="o200k", special_tokens=SPECIALS)
    P = tok._kernels()[0]
    scan = tok._scanner
    cache = C.new_cache(1 << 20)
    for _, text in sample(200, 100, None):
        buf = np.frombuffer(text.encode(), np.uint8)
        _encode_fused_o200k(scan.kind, scan.table, buf, P, cache, np.empty(buf.size + 16, np.uint32))
        if 4 * cache[1] > cache[0]:
            break
    t0 = time.perf_counter()
    grown = C.grown_cache(cache)
    ms = (time.perf_counter() - t0) * 1e3
    print(f"{cache[1]} {cache[0]} {grown[0]} {ms:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--baseline", type=Path, help="a checkout whose dwstok/ to time too")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child()
        return
    roots = {"this": None} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    times: dict[str, list[float]] = {k: [] for k in roots}
    for _ in range(args.runs):
        for name, root in roots.items():
            env = dict(os.environ) | ({"PYTHONPATH": str(root)} if root else {})
            out = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, check=True)
            entries, before, after, ms = out.stdout.split()
            times[name].append(float(ms))
    print(f"grown_cache: {entries} entries, {before} -> {after} slots, ms in fresh processes ({args.runs} each)")
    for name, ts in times.items():
        print(f"{name:8} median {np.median(ts):6.2f}  min {min(ts):6.2f}  max {max(ts):6.2f}  all {' '.join(f'{t:.1f}' for t in ts)}")


if __name__ == "__main__":
    main()
