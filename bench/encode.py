"""Encoder and scanner speed on the dev corpus, side by side, one thread each.

Every measurement runs in a fresh subprocess: load the tokenizer, warm up (JIT,
allocators) on *other* text (the first documents of train.parquet), then time the
first pass over the dev documents, so that no cache has seen the measured text.
Each is repeated (--repeats) and the median reported, with peak RSS of that process.

    .venv/bin/python bench/encode.py            # table + bench/results/encode-<time>.json
    .venv/bin/python bench/encode.py --repeats 5 --only dwstok-batch tiktoken

Peers: the ``regex`` module's ``findall`` with the same pattern (for the scanner),
tiktoken's ``encode_ordinary`` and fastokens (``Tokenizer.from_tiktoken``), all on
GPT-4o's o200k_base rank file.

One thread each means one core each: every worker pins itself to one CPU before it
imports anything, and ``MB/s cpu`` counts the CPU time of all the process's threads.
fastokens runs its BPE in a pool of its own that ignores ``RAYON_NUM_THREADS`` (it
reads ``FASTOKENS_BPE_THREADS``, which the workers set to 1): unpinned, its
``encode_batch_flat`` used 300 ms of CPU in 167 ms of wall time on dev, two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from paths import ROOT, SHARED  # noqa: E402  (bench/ is on sys.path when run as a script)
RANKS = SHARED / "reftok" / "o200k_base.tiktoken"
SPECIALS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

# name: (kind, what)
CASES = {
    "regex-findall": ("scan", "regex.findall(o200k pattern), per document"),
    "dwstok-scan": ("scan", "dwstok native scanner bounds(), per document"),
    "tiktoken": ("encode", "tiktoken encode_ordinary, per document"),
    "fastokens": ("encode", "fastokens encode(...).ids, per document"),
    "fastokens-flat": ("encode", "fastokens encode_batch_flat, one thread"),
    "dwstok": ("encode", "dwstok encode_to_numpy, per document"),
    "dwstok-batch": ("encode", "dwstok encode_utf8_batch(num_threads=1)"),
}


def _load_texts(split: str, limit_bytes: int | None = None) -> list[str]:
    import pyarrow.parquet as pq

    texts = pq.read_table(SHARED / "corpus" / f"{split}.parquet", columns=["text"]).column("text").to_pylist()
    if limit_bytes is not None:
        out, n = [], 0
        for t in texts:
            out.append(t)
            n += len(t.encode())
            if n >= limit_bytes:
                break
        texts = out
    return texts


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _pin_to_one_cpu() -> None:
    """Run this process (and any thread it starts) on one CPU, the first it may use."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def worker(case: str) -> dict:
    """Run one case in this process; return its figures."""
    _pin_to_one_cpu()
    texts = _load_texts("dev")
    warm = _load_texts("train", 1_000_000)
    nbytes = sum(len(t.encode()) for t in texts)

    if case == "regex-findall":
        import regex

        from dwstok.patterns import PATTERNS

        pat = regex.compile(PATTERNS["o200k"])

        def run(ts):
            return sum(len(pat.findall(t)) for t in ts)

    elif case == "dwstok-scan":
        import numpy as np

        from dwstok.scanner import get_scanner

        sc = get_scanner("o200k")

        def run(ts):
            return sum(sc.bounds(np.frombuffer(t.encode(), np.uint8)).size - 1 for t in ts)

    elif case == "tiktoken":
        import tiktoken
        import tiktoken.load

        from dwstok.patterns import PATTERNS

        enc = tiktoken.Encoding(
            "o200k_base", pat_str=PATTERNS["o200k"], mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(RANKS)),
            special_tokens=SPECIALS,
        )

        def run(ts):
            return sum(len(enc.encode_ordinary(t)) for t in ts)

    elif case in ("fastokens", "fastokens-flat"):
        os.environ["RAYON_NUM_THREADS"] = "1"
        import fastokens

        ft = fastokens.Tokenizer.from_tiktoken(str(RANKS), encoding="o200k_base")
        if case == "fastokens":

            def run(ts):
                return sum(len(ft.encode(t, split_special_tokens=True).ids) for t in ts)

        else:

            def run(ts):
                ids, _ = ft.encode_batch_flat(ts, split_special_tokens=True)
                return len(ids) // 4

    elif case in ("dwstok", "dwstok-batch"):
        import numpy as np

        from dwstok import Tokenizer

        tok = Tokenizer.from_tiktoken(RANKS, pattern="o200k", special_tokens=SPECIALS)
        if case == "dwstok":

            def run(ts):
                return sum(tok.encode_to_numpy(t).size for t in ts)

        else:

            def run(ts):
                bufs = [t.encode() for t in ts]
                offsets = np.zeros(len(bufs) + 1, np.int64)
                np.cumsum([len(b) for b in bufs], out=offsets[1:])
                ids, _ = tok.encode_utf8_batch(np.frombuffer(b"".join(bufs), np.uint8), offsets, num_threads=1)
                return ids.size

    else:
        raise SystemExit(f"unknown case {case}")

    run(warm)
    t0, c0 = time.perf_counter(), time.process_time()  # CPU time of all threads
    count = run(texts)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"case": case, "bytes": nbytes, "count": count, "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": _peak_rss_mb()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", nargs="*", choices=list(CASES))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker)))
        return
    cases = args.only or list(CASES)
    results: dict[str, list[dict]] = {c: [] for c in cases}
    for r in range(args.repeats):  # interleaved, so drifting machine load hits every case alike
        for case in cases:
            env = dict(os.environ, RAYON_NUM_THREADS="1", NUMBA_NUM_THREADS="1", FASTOKENS_BPE_THREADS="1")
            p = subprocess.run(
                [sys.executable, __file__, "--worker", case], capture_output=True, text=True, env=env, check=False
            )
            if p.returncode != 0:
                print(f"{case}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                continue
            results[case].append(json.loads(p.stdout.strip().splitlines()[-1]))
    rows = []
    for case in cases:
        runs = results[case]
        if not runs:
            continue
        kind, what = CASES[case]
        wall = statistics.median(x["wall_s"] for x in runs)
        cpu = statistics.median(x["cpu_s"] for x in runs)
        nb, count = runs[0]["bytes"], runs[0]["count"]
        rows.append(
            {
                "case": case, "kind": kind, "what": what, "runs": len(runs), "bytes": nb,
                "pieces" if kind == "scan" else "tokens": count,
                "MB_per_s": nb / wall / 1e6, "MB_per_s_cpu": nb / cpu / 1e6,
                "per_s": count / wall, "peak_rss_mb": max(x["peak_rss_mb"] for x in runs),
                "wall_s": [x["wall_s"] for x in runs],
            }
        )
    base = {k: next((r["MB_per_s"] for r in rows if r["case"] == k), None) for k in ("regex-findall", "tiktoken")}
    print(f"dev corpus: {rows[0]['bytes'] / 1e6:.1f} MB, median of {args.repeats} fresh-process first passes, one core each")
    print(f"{'case':16} {'MB/s':>8} {'MB/s cpu':>9} {'Mtok|piece/s':>13} {'vs peer':>8} {'peak RSS MB':>12}")
    for r in rows:
        peer = base["regex-findall"] if r["kind"] == "scan" else base["tiktoken"]
        ratio = f"{r['MB_per_s'] / peer:.2f}x" if peer else "-"
        print(
            f"{r['case']:16} {r['MB_per_s']:8.1f} {r['MB_per_s_cpu']:9.1f} {r['per_s'] / 1e6:13.2f} {ratio:>8}"
            f" {r['peak_rss_mb']:12.0f}"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"encode-{time.strftime('%Y%m%d-%H%M%S')}.json"
    meta = {"cpu_count": os.cpu_count(), "loadavg": os.getloadavg(), "python": sys.version.split()[0]}
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
