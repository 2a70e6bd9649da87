"""What hash verification costs a build (issue 12: it must stay under 5% of the build).

Runs ``dwstok build`` in this process on a real corpus (default: the 203 MB
train.parquet with configs/32.3.yaml, 2 workers) with the verification step
(``stages.manifest.first_bad_output``: the sha256 checks of ``up_to_date``, ``require``
and shard markers) timed, three times over one workdir:

1. a fresh build (each stage hashes what it consumes from the stage before);
2. the same build again, every stage up to date (each stage hashes its own outputs and
   what it consumes; a file hashed once is not hashed again while unchanged);
3. ``dwstok verify`` on the result (every output of every stage, always rehashed).

    .venv/bin/python bench/verify_cost.py [--workdir /tmp/vc] [--corpus PATH] [--config PATH]

Prints a Markdown table; writes ``bench/results/verify-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from paths import ROOT, SHARED  # noqa: E402  (bench/ is on sys.path when run as a script)

sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=str(ROOT / "configs" / "32.3.yaml"))
    ap.add_argument("--corpus", default=str(SHARED / "corpus" / "train.parquet"))
    ap.add_argument("--workdir", default="/tmp/dwstok-verify-cost")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    from stages import STAGES
    from stages import manifest as mf
    from stages.verify import verify_workdir

    from dwstok_cli.runner import run_stages

    spent = {"seconds": 0.0, "calls": 0, "bytes": 0}
    real = mf.first_bad_output

    def timed(out_dir, outputs, **kw):
        t0 = time.perf_counter()
        try:
            return real(out_dir, outputs, **kw)
        finally:
            spent["seconds"] += time.perf_counter() - t0
            spent["calls"] += 1
            spent["bytes"] += sum(i.bytes for i in outputs.values())

    mf.first_bad_output = timed
    shutil.rmtree(args.workdir, ignore_errors=True)
    rows = []
    for label in ("fresh build", "up-to-date build"):
        spent.update(seconds=0.0, calls=0, bytes=0)
        t0 = time.perf_counter()
        run_stages(list(STAGES), config=args.config, corpus=(args.corpus,), workdir=args.workdir, workers=args.workers)
        total = time.perf_counter() - t0
        rows.append({"run": label, "total_s": round(total, 3), "verify_s": round(spent["seconds"], 3),
                     "verified_mb": round(spent["bytes"] / 1e6, 1), "checks": spent["calls"]})
    t0 = time.perf_counter()
    checks = verify_workdir(args.workdir)
    v = time.perf_counter() - t0
    assert all(c.status == "ok" for c in checks), [(c.stage, c.status, c.detail) for c in checks]
    rows.append({"run": "dwstok verify", "total_s": round(v, 3), "verify_s": round(v, 3),
                 "verified_mb": round(sum(c.bytes for c in checks) / 1e6, 1), "checks": len(checks)})
    fresh = rows[0]["total_s"]
    print("| run | total s | verification s | verified MB | share of the fresh build |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['run']} | {r['total_s']:.2f} | {r['verify_s']:.3f} | {r['verified_mb']} | "
              f"{100 * r['verify_s'] / fresh:.2f}% |")
    out = ROOT / "bench" / "results" / f"verify-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"config": args.config, "corpus": args.corpus, "workers": args.workers,
                               "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
