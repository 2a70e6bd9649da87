"""What a piece costs new (merged) and cached, per language group: dwstok beside fastokens.

The first pass of ``bench/encode.py`` pays for merging every piece not seen before; the
second pass only looks pieces up. This separates the two per group: the distinct pieces
of more than ``--min-bytes`` bytes in a group's sample (the ones that merge), one a line,
encoded by a fresh tokenizer (every piece new: its merge, its cache entry), then again
(every piece cached). ``merge`` is the difference: the cost of merging a piece and
caching it. Same text, same process, one pinned core; the ids are checked equal.

    .venv/bin/python bench/new_pieces.py                 # every group
    .venv/bin/python bench/new_pieces.py --groups ja zh th hi --repeats 5
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import encode as E  # noqa: E402  (bench/ is on sys.path when run as a script)


def _pieces(texts: list[str], min_bytes: int) -> list[str]:
    from dwstok.scanner import get_scanner

    scan = get_scanner("o200k")
    return sorted({p for t in texts for p in scan.pieces(t) if len(p.encode()) > min_bytes})


def _time_group(pieces: list[str], repeats: int) -> dict:
    """Best-of-``repeats`` seconds a piece: new and cached, for dwstok and fastokens."""
    import fastokens

    from dwstok import Tokenizer

    text = "\n".join(pieces)  # "\n" is a piece of its own: the pieces stay as they are
    best: dict[str, float] = {}
    for _ in range(repeats):
        dw = Tokenizer.from_tiktoken(E.RANKS, pattern="o200k", special_tokens=E.SPECIALS)
        ft = fastokens.Tokenizer.from_tiktoken(str(E.RANKS), encoding="o200k_base")
        # a pool cache sized for 4 MB of text: one sized for this text alone (a slot per
        # 8 bytes) would fill with its distinct pieces and start afresh
        dw.encode_to_numpy("a\n" * (1 << 21))
        ft.encode("warm up 123")
        times = {}
        for name, run in (("dwstok", lambda: dw.encode_to_numpy(text)), ("fastokens", lambda: ft.encode(text, split_special_tokens=True).ids)):
            t0 = time.perf_counter()
            first = run()
            t1 = time.perf_counter()
            run()
            t2 = time.perf_counter()
            times[name] = (t1 - t0, t2 - t1, list(first))
        if times["dwstok"][2] != times["fastokens"][2]:
            raise SystemExit("dwstok and fastokens gave different ids")
        for name, (new, cached, _) in times.items():
            best[f"{name}_new"] = min(best.get(f"{name}_new", new), new)
            best[f"{name}_cached"] = min(best.get(f"{name}_cached", cached), cached)
    return {k: v / len(pieces) for k, v in best.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", nargs="*", help="language groups (default: all)")
    ap.add_argument("--min-bytes", type=int, default=8, help="only pieces longer than this (default 8)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--group-kb", type=int, default=220)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp) / "sample.arrow"
        E.write_sample(sample, args.group_kb, 100)
        _, groups = E.read_sample(sample)
    print(f"distinct pieces over {args.min_bytes} bytes per group, ns a piece, best of {args.repeats}, one core\n")
    print("| group | pieces | bytes a piece | new: dwstok | new: fastokens | cached: dwstok | cached: fastokens | merge: dwstok | merge: fastokens | merge dwstok / fastokens |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for g in args.groups or list(groups):
        pieces = _pieces(groups[g], args.min_bytes)
        if not pieces:
            continue
        t = _time_group(pieces, args.repeats)
        merge_dw = t["dwstok_new"] - t["dwstok_cached"]
        merge_ft = t["fastokens_new"] - t["fastokens_cached"]
        nbytes = sum(len(p.encode()) for p in pieces) / len(pieces)
        print(
            f"| {g} | {len(pieces)} | {nbytes:.1f} | {t['dwstok_new'] * 1e9:.0f} | {t['fastokens_new'] * 1e9:.0f} | "
            f"{t['dwstok_cached'] * 1e9:.0f} | {t['fastokens_cached'] * 1e9:.0f} | {merge_dw * 1e9:.0f} | {merge_ft * 1e9:.0f} | "
            f"{merge_dw / merge_ft:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
