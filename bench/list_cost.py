"""What a list of ids costs against the encoding itself, for dwstok and fastokens, on the
second pass (every piece seen before), one pinned CPU, nanoseconds an id.

Per group, best of ``--repeats`` passes over the same documents (the first pass fills
the caches): fastokens' ``encode`` alone (its ids stay in Rust), then with ``.ids``
made and freed; dwstok's ``encode_to_numpy`` and ``encode`` (a list, freed). The
difference between a call with its list and without is what the list costs; what is
left is each encoder's core.

    .venv/bin/python bench/list_cost.py                  # en, code, de, zh
    .venv/bin/python bench/list_cost.py --groups ja th --repeats 9
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from encode_groups import RANKS, SPECIALS, sample  # noqa: E402


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", nargs="+", default=["en", "code", "de", "zh"])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import fastokens

    from dwstok import Tokenizer

    ft = fastokens.Tokenizer.from_tiktoken(str(RANKS), encoding="o200k_base")
    tok = Tokenizer.from_tiktoken(RANKS, pattern="o200k", special_tokens=SPECIALS)
    docs = sample(200, 100, args.groups)
    print("| group | ids | fastokens encode | + list | dwstok to numpy | to list | list: fastokens | list: dwstok |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for g in args.groups:
        texts = [t for lang, t in docs if lang == g]
        if not texts:
            continue
        n = sum(len(tok.encode(t)) for t in texts)
        for t in texts:  # the first pass: every piece into both caches
            ft.encode(t, split_special_tokens=True)
        runs = {
            "ft": lambda: [ft.encode(t, split_special_tokens=True) for t in texts],
            "ft_list": lambda: [len(ft.encode(t, split_special_tokens=True).ids) for t in texts],
            "numpy": lambda: [tok.encode_to_numpy(t).size for t in texts],
            "list": lambda: [len(tok.encode(t)) for t in texts],
        }
        ns = {k: _best(f, args.repeats) * 1e9 / n for k, f in runs.items()}
        print(
            f"| {g} | {n:,} | {ns['ft']:.1f} | {ns['ft_list']:.1f} | {ns['numpy']:.1f} | {ns['list']:.1f} "
            f"| {ns['ft_list'] - ns['ft']:.1f} | {ns['list'] - ns['numpy']:.1f} |"
        )


if __name__ == "__main__":
    main()
