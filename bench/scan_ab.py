"""A/B of two versions of the o200k scanner in one process, MB/s per language group.

The scanner is a large part of the encoder's steady state, and two fresh processes on a
shared machine differ by more than most scanner changes do, so both versions load side by
side, as in bench/encode_ab.py (copies named ``dwstok_a`` and ``dwstok_b``), and scan
each group's text in turn, alternating, many times; the figure is the best time of
each. The piece bounds of both versions are checked equal first.

    .venv/bin/python bench/scan_ab.py --a /tmp/base --b . [--repeats 15] [--groups ru fr]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from encode_ab import import_copy  # noqa: E402
from encode_groups import sample  # noqa: E402


def _scanner(checkout: Path, name: str):
    mod = import_copy(checkout, name, "scanner")
    s = mod.get_scanner("o200k")
    return lambda buf, out: mod.scan_into(s.kind, buf, s.table, out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", type=Path, required=True, help="checkout of the baseline")
    ap.add_argument("--b", type=Path, default=Path("."), help="checkout of the change")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--group-kb", type=int, default=220)
    ap.add_argument("--groups", nargs="*")
    args = ap.parse_args()
    scan_a, scan_b = _scanner(args.a.resolve(), "dwstok_a"), _scanner(args.b.resolve(), "dwstok_b")
    texts: dict[str, list[str]] = {}
    for lang, text in sample(args.group_kb, 10_000, args.groups):
        texts.setdefault(lang, []).append(text)
    print("| group | MB | a MB/s | b MB/s | b / a | bytes a piece |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    total = [0.0, 0.0, 0]
    for lang in sorted(texts):
        buf = np.frombuffer("".join(texts[lang]).encode(), np.uint8)
        out = np.empty(buf.size + 1, np.int64)
        n = scan_a(buf, out)
        bounds = out[: n + 1].copy()
        if scan_b(buf, out) != n or not np.array_equal(out[: n + 1], bounds):
            raise SystemExit(f"{lang}: the two versions split the text differently")
        best = [np.inf, np.inf]
        for _ in range(args.repeats):
            for k, scan in enumerate((scan_a, scan_b)):
                t = time.perf_counter()
                scan(buf, out)
                best[k] = min(best[k], time.perf_counter() - t)
        a, b = buf.size / best[0] / 1e6, buf.size / best[1] / 1e6
        total[0] += best[0]
        total[1] += best[1]
        total[2] += buf.size
        print(f"| {lang} | {buf.size / 1e6:.2f} | {a:.0f} | {b:.0f} | {b / a:.2f} | {buf.size / n:.1f} |")
    a, b = total[2] / total[0] / 1e6, total[2] / total[1] / 1e6
    print(f"| **all** | {total[2] / 1e6:.2f} | {a:.0f} | {b:.0f} | **{b / a:.2f}** | |")


if __name__ == "__main__":
    main()
