"""`dwstok eval` wall time (issue 14): three models and four references on the dev split.

Each run is its own process (`dwstok eval ... --json`, 2 threads), so its wall time
includes imports and loading the references, as a user sees it; the report's own
per-section timings show where the time goes. Models are build workdirs
(`dwstok build configs/32.X.yaml --corpus train.parquet --workdir DIR`).

    .venv/bin/python bench/eval.py --models work/32.1 work/32.2 work/32.3 [--runs 3]
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--corpus", default=str(SHARED / "corpus" / "dev.parquet"))
    ap.add_argument("--parallel", default=str(SHARED / "corpus" / "parallel" / "udhr"))
    ap.add_argument("--compare", default="gpt2,cl100k,o200k,mistral")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None, help="also write report.html here (last run)")
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "dwstok_cli.main", "eval", *args.models, "--corpus", args.corpus,
           "--compare", args.compare, "--reference-dir", str(SHARED / "reftok"), "--parallel", args.parallel,
           "--threads", str(args.threads), "--json"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    walls, reports = [], []
    for i in range(args.runs):
        run = cmd + (["--out", args.out] if args.out and i == args.runs - 1 else [])
        t = time.perf_counter()
        res = subprocess.run(run, capture_output=True, text=True, env=env, cwd=ROOT)
        wall = time.perf_counter() - t
        if res.returncode:
            sys.exit(res.stderr)
        walls.append(wall)
        reports.append(json.loads(res.stdout))
        print(f"run {i + 1}: {wall:.1f} s  {json.dumps(reports[-1]['timings'])}", flush=True)
    r = reports[-1]
    result = {
        "bench": "eval",
        "when": time.strftime("%Y%m%d-%H%M%S"),
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg(),
        "threads": args.threads,
        "models": args.models,
        "references": r["references"],
        "corpus_bytes": r["corpus"]["bytes"],
        "wall_s": walls,
        "median_wall_s": statistics.median(walls),
        "sections_s": [x["timings"] for x in reports],
    }
    out = ROOT / "bench" / "results" / f"eval-{result['when']}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"median wall {result['median_wall_s']:.1f} s over {len(walls)} runs -> {out}")


if __name__ == "__main__":
    main()
