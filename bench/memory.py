"""Peak memory of ``count`` and ``train`` per unique piece, and what pruning costs.

1. ``memory``: slices of the train split (the first N MB of text), each run through
   ``pretokenize``, then ``count`` and ``train`` as separate CLI processes (``--workers 1``),
   with peak RSS read from ``/usr/bin/time -v`` (the process's maximum resident set). The
   slope of peak RSS against unique pieces (least squares over the slices) is the bytes
   each unique piece costs; unique pieces against corpus bytes give the growth exponent.
   ``--repo`` picks the checkout whose code runs (``PYTHONPATH``), so the same script
   measures main ("before") and a branch ("after").
2. ``prune``: trains on the largest slice with ``count.min_count`` 1 (off), 2 and 5, and
   encodes the dev split with each model: bytes/token, unique pieces kept, train peak RSS.

    .venv/bin/python bench/memory.py memory --sizes 25,203 --label after
    .venv/bin/python bench/memory.py memory --sizes 25,203 --label before --repo ../main
    .venv/bin/python bench/memory.py prune --size 203 --min-counts 2,5

Results: ``bench/results/memory-<label>-<time>.json`` and ``prune-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from paths import ROOT, SHARED  # noqa: E402  (bench/ is on sys.path when run as a script)

MB = 1_000_000


def corpus_slice(size_mb: int, work: Path) -> Path:
    """The first rows of train.parquet whose text adds up to ``size_mb`` MB (UTF-8)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out = work / f"train-{size_mb}MB.parquet"
    if out.exists():
        return out
    t = pq.read_table(SHARED / "corpus" / "train.parquet")
    sizes = pc.binary_length(t.column("text").cast("binary")).to_numpy()
    import numpy as np

    n = int(np.searchsorted(np.cumsum(sizes), size_mb * MB)) + 1
    work.mkdir(parents=True, exist_ok=True)
    pq.write_table(t.slice(0, min(n, t.num_rows)), out, compression="zstd")
    return out


def run_stage(stage: str, config: str, corpus: Path, workdir: Path, repo: Path, workers: int = 1) -> dict:
    """One stage as its own CLI process; wall seconds and max RSS (GNU time -v)."""
    env = dict(os.environ, PYTHONPATH=str(repo))
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "dwstok_cli.main", stage, config,
           "--corpus", str(corpus), "--workdir", str(workdir), "--workers", str(workers), "--json"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=repo)
    seconds = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{stage} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
    summary = json.loads(p.stdout)
    if isinstance(summary, dict) and "stages" in summary:  # schema dwstok-run/1
        summary = summary["stages"]
    if isinstance(summary, list):
        summary = summary[0]
    return {"seconds": round(seconds, 2), "peak_rss": rss_kb * 1024, "counts": summary.get("counts", {}),
            "output_hash": summary.get("output_hash")}


def fit_line(x: list[float], y: list[float]) -> tuple[float, float]:
    """Least-squares (slope, intercept)."""
    import numpy as np

    if len(x) < 2:
        return float("nan"), float("nan")
    a, b = np.polyfit(np.asarray(x, float), np.asarray(y, float), 1)
    return float(a), float(b)


def memory(args) -> dict:
    repo = Path(args.repo).resolve()
    config = str((ROOT / args.config).resolve())
    work = Path(args.workdir)
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        corpus = corpus_slice(size, work)
        wd = work / f"{args.label}-{size}"
        run_stage("pretokenize", config, corpus, wd, repo, workers=args.pretokenize_workers)
        c = run_stage("count", config, corpus, wd, repo)
        t = run_stage("train", config, corpus, wd, repo)
        row = {"size_mb": size, "corpus_bytes": corpus.stat().st_size, "unique_pieces": c["counts"]["unique_pieces"],
               "text_bytes": c["counts"]["bytes"], "count": c, "train": t}
        rows.append(row)
        print(f"{size} MB: {row['unique_pieces']:,} unique pieces; count {c['peak_rss'] / MB:.0f} MB "
              f"({c['seconds']} s), train {t['peak_rss'] / MB:.0f} MB ({t['seconds']} s)", flush=True)
    u = [r["unique_pieces"] for r in rows]
    out = {"label": args.label, "repo": str(repo), "config": args.config, "rows": rows}
    for stage in ("count", "train"):
        slope, base = fit_line(u, [r[stage]["peak_rss"] for r in rows])
        out[f"{stage}_bytes_per_piece"] = slope
        out[f"{stage}_base_bytes"] = base
    import math

    if len(rows) >= 2:
        xs = [math.log(r["text_bytes"]) for r in rows]
        ys = [math.log(r["unique_pieces"]) for r in rows]
        out["growth_exponent"], _ = fit_line(xs, ys)
    print(json.dumps({k: v for k, v in out.items() if k != "rows"}, indent=1))
    return out


def prune(args) -> dict:
    """Bytes/token on dev of models trained with count.min_count = 1 (off), 2, 5."""
    import numpy as np
    import pyarrow.parquet as pq
    import yaml

    repo = Path(args.repo).resolve()
    work = Path(args.workdir)
    corpus = corpus_slice(args.size, work)
    raw = yaml.safe_load((ROOT / args.config).read_text())
    dev = pq.read_table(SHARED / "corpus" / "dev.parquet", columns=["text"]).column("text").to_pylist()
    dev_bytes = sum(len(t.encode("utf-8")) for t in dev)
    env = dict(os.environ, PYTHONPATH=str(repo))
    rows = []
    for mc in [1] + [int(x) for x in args.min_counts.split(",")]:
        cfg = dict(raw)
        if mc > 1:
            cfg["count"] = {"min_count": mc}
        path = work / f"prune-{mc}.yaml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        wd = work / f"prune-{args.size}"  # pretokenize is shared; count and train re-run per setting
        run_stage("pretokenize", str(path), corpus, wd, repo, workers=args.pretokenize_workers)
        c = run_stage("count", str(path), corpus, wd, repo)
        t = run_stage("train", str(path), corpus, wd, repo)
        code = ("import sys, json, pyarrow.parquet as pq; from dwstok import Tokenizer;"
                "tok = Tokenizer.load(sys.argv[1]);"
                "texts = pq.read_table(sys.argv[2], columns=['text']).column('text').to_pylist();"
                "print(sum(len(x) for x in tok.encode_batch(texts)))")
        p = subprocess.run([sys.executable, "-c", code, str(wd / "train" / "model.json"),
                            str(SHARED / "corpus" / "dev.parquet")], capture_output=True, text=True, env=env, check=True)
        tokens = int(p.stdout.strip())
        rows.append({"min_count": mc, "unique_pieces": c["counts"]["unique_pieces"], "count_peak_rss": c["peak_rss"],
                     "train_peak_rss": t["peak_rss"], "train_seconds": t["seconds"], "dev_tokens": tokens,
                     "dev_bytes_per_token": dev_bytes / tokens})
        print(rows[-1], flush=True)
    base = rows[0]["dev_bytes_per_token"]
    for r in rows:
        r["bytes_per_token_change_pct"] = 100.0 * (r["dev_bytes_per_token"] / base - 1.0)
    del np
    return {"size_mb": args.size, "config": args.config, "dev_bytes": dev_bytes, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("memory", "prune"):
        s = sub.add_parser(name)
        s.add_argument("--config", default="configs/32.3.yaml")
        s.add_argument("--repo", default=str(ROOT), help="checkout whose code runs (PYTHONPATH)")
        s.add_argument("--workdir", default="/tmp/dwstok-memory")
        s.add_argument("--pretokenize-workers", type=int, default=2)
        s.add_argument("--label", default="after")
    sub.choices["memory"].add_argument("--sizes", default="25,203")
    sub.choices["prune"].add_argument("--size", type=int, default=203)
    sub.choices["prune"].add_argument("--min-counts", default="2,5")
    args = ap.parse_args()
    result = memory(args) if args.cmd == "memory" else prune(args)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = f"memory-{args.label}-{stamp}.json" if args.cmd == "memory" else f"prune-{stamp}.json"
    out = ROOT / "bench" / "results" / name
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
