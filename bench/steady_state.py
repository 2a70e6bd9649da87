"""Encode speed deep into a corpus run, per language group: dwstok and fastokens in one
process pinned to one CPU, every piece already in both caches, the best of N passes
(each on new ``str`` objects with the same text, as bench/encode.py's second pass).

bench/encode.py times fresh processes, whose first and second passes include caches
growing and memory first touched; this times what is left once they are done.

    .venv/bin/python bench/steady_state.py [--mode flat|list|numpy|batch] [--repeats 7]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import encode as E  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", default="flat", choices=["flat", "list", "numpy", "batch"])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--sample", type=Path, default=Path("/tmp/steady-sample.arrow"))
    a = ap.parse_args()
    if not a.sample.exists():  # the same sample as bench/encode.py's
        E.write_sample(a.sample, 220, 100)
    E._pin(1)
    warm, groups = E.read_sample(a.sample)
    mode = "batch@1" if a.mode == "batch" else a.mode
    ours = E._runner(mode, "dwstok", 1, E.RANKS)
    peer = E._runner("list" if mode == "numpy" else mode, "fastokens", 1, E.RANKS)
    for run in (ours, peer):
        run(warm)
        for texts in groups.values():
            run(texts)
    rows, total = [], [0.0, 0.0]
    for g, texts in groups.items():
        best = []
        for run in (ours, peer):
            b = float("inf")
            for _ in range(a.repeats):
                fresh = [t.encode().decode() for t in texts]
                t0 = time.perf_counter()
                run(fresh)
                b = min(b, time.perf_counter() - t0)
            best.append(b)
        total = [total[0] + best[0], total[1] + best[1]]
        rows.append((g, best[0], best[1]))
    print(f"mode {a.mode}, 1 CPU, best of {a.repeats} passes, every piece cached; ratio = dwstok / fastokens speed\n")
    print("| group | dwstok ms | fastokens ms | ratio |\n| --- | ---: | ---: | ---: |")
    for g, d, f in sorted(rows, key=lambda r: r[2] / r[1]):
        print(f"| {g} | {d * 1e3:.2f} | {f * 1e3:.2f} | {f / d:.2f} |")
    print(f"| **all** | {total[0] * 1e3:.1f} | {total[1] * 1e3:.1f} | **{total[1] / total[0]:.2f}** |")


if __name__ == "__main__":
    main()
