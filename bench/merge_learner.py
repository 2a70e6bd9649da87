"""The merge learner alone: peak RSS per unique piece, merge-loop seconds, merges sha256.

1. ``prepare``: slices of the train split (the first N MB of text, as ``bench/memory.py``
   cuts them), ``pretokenize`` + ``count`` through the CLI for each config, then the train
   stage's inputs (pieces, weights after ``balance.alpha``, forced Han merges) saved as
   ``<work>/<config>-<N>MB.npz``. Done once; the files are cached.
2. ``run``: each (config, slice) in a fresh process that loads the .npz, then calls
   ``learn_merges`` as the train stage does. Peak RSS is ``ru_maxrss`` of that process
   minus its RSS just before the call (the inputs, which the caller owns, and imports);
   the fitted slope (least squares over the slices) is the kernel's bytes per unique
   piece. ``rustbpe`` (``--rustbpe``) trains on the same slice's texts, 2 threads, in a
   process of its own: its wall time and peak RSS are the peer's.

    .venv/bin/python bench/merge_learner.py prepare --sizes 25,100,203
    .venv/bin/python bench/merge_learner.py run --sizes 25,100,203 --label after --repeat 3

Results: ``bench/results/merge-learner-<label>-<time>.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from paths import ROOT  # noqa: E402  (bench/ is on sys.path when run as a script)

CONFIGS = ("32.1", "32.3")


def _rss_now() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def prepare(args) -> None:
    from memory import corpus_slice, run_stage

    work = Path(args.workdir)
    for size in [int(s) for s in args.sizes.split(",")]:
        corpus = corpus_slice(size, work)
        for name in CONFIGS:
            out = work / f"{name}-{size}MB.npz"
            if out.exists():
                continue
            config = str(ROOT / "configs" / f"{name}.yaml")
            wd = work / f"wd-{name}-{size}"
            run_stage("pretokenize", config, corpus, wd, ROOT, workers=2)
            run_stage("count", config, corpus, wd, ROOT, workers=2)
            code = (
                "import sys, json, numpy as np\n"
                "from pathlib import Path\n"
                "from stages.config import load_config\n"
                "from stages.count import read_pieces\n"
                "from stages.train import piece_weights\n"
                "from dwstok.training import binary_buffers, han_forced_merges, lang_weights\n"
                "config = load_config(sys.argv[1]); up = Path(sys.argv[2]) / 'count'\n"
                "table, langs = read_pieces(up / 'pieces.arrow')\n"
                "stats = json.loads((up / 'stats.json').read_text())\n"
                "weights = piece_weights(table, langs, lang_weights(stats['bytes_by_lang'], config.balance.alpha))\n"
                "data, offsets = binary_buffers(table.column('piece'))\n"
                "forced = []\n"
                "if config.han.enabled:\n"
                "    forced = han_forced_merges(stats['han'], coverage=config.han.coverage, count=config.han.count).merges\n"
                "fl = np.frombuffer(b''.join(a for a, _ in forced), np.uint8)\n"
                "fr = np.frombuffer(b''.join(b for _, b in forced), np.uint8)\n"
                "flen = np.array([[len(a), len(b)] for a, b in forced], np.int64).reshape(-1, 2)\n"
                "np.savez(sys.argv[3], data=data, offsets=offsets, weights=weights, n_merges=config.n_merges,\n"
                "         fl=fl, fr=fr, flen=flen, max_token_bytes=config.train.max_token_bytes or 0)\n"
            )
            subprocess.run([sys.executable, "-c", code, config, str(wd), str(out)], check=True, cwd=ROOT,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
            print(f"prepared {out}", flush=True)


def _load(path: Path):
    import numpy as np

    z = np.load(path)
    forced, i, j = [], 0, 0
    for la, lb in z["flen"].tolist():
        forced.append((z["fl"][i : i + la].tobytes(), z["fr"][j : j + lb].tobytes()))
        i += la
        j += lb
    return z["data"], z["offsets"], z["weights"], int(z["n_merges"]), forced, int(z["max_token_bytes"]) or None


def child(path: str) -> dict:
    from dwstok.merge_learner import learn_merges

    data, offsets, weights, n_merges, forced, mtb = _load(Path(path))
    # Compile (or load from the cache) on a tiny input first: the figures are the kernel's.
    learn_merges(b"abab", [0, 4], [1], 2)
    base = _rss_now()
    t0 = time.perf_counter()
    r = learn_merges(data, offsets, weights, n_merges, forced=forced, max_token_bytes=mtb)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    h = hashlib.sha256()
    for a, b in r.merges:
        h.update(a.hex().encode() + b" " + b.hex().encode() + b"\n")
    return {"seconds": seconds, "peak_rss": peak, "rss_before": base, "kernel_peak": peak - base,
            "unique_pieces": int(offsets.shape[0] - 1), "piece_bytes": int(offsets[-1] - offsets[0]),
            "merges": len(r.merges), "merges_sha256": h.hexdigest(),
            "counts_sha256": hashlib.sha256(r.counts.tobytes()).hexdigest()}


def rustbpe_child(corpus: str, vocab: int) -> dict:
    import pyarrow.parquet as pq
    import rustbpe

    from dwstok.patterns import PATTERNS

    texts = pq.read_table(corpus, columns=["text"]).column("text").to_pylist()
    base = _rss_now()
    t0 = time.perf_counter()
    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(iter(texts), vocab, pattern=PATTERNS["o200k"])
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"seconds": seconds, "peak_rss": peak, "rss_before": base}


def _spawn(argv: list[str], env_extra: dict | None = None, repo: Path = ROOT) -> dict:
    env = dict(os.environ, PYTHONPATH=str(repo), **(env_extra or {}))
    p = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True, env=env, cwd=ROOT)
    if p.returncode != 0:
        raise SystemExit(p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def run(args) -> dict:
    import numpy as np

    work = Path(args.workdir)
    sizes = [int(s) for s in args.sizes.split(",")]
    out = {"label": args.label, "baseline": args.baseline, "load_avg": os.getloadavg(), "rows": []}
    for name in args.configs.split(","):
        for size in sizes:
            npz = str(work / f"{name}-{size}MB.npz")
            runs, base_runs = [], []
            for _ in range(args.repeat):  # interleaved, so both see the same load
                if args.baseline:
                    base_runs.append(_spawn(["--child", npz], repo=Path(args.baseline)))
                runs.append(_spawn(["--child", npz]))
            row = {"config": name, "size_mb": size, **{k: v for k, v in runs[0].items() if k not in ("seconds",)}}
            row["seconds_all"] = [round(r["seconds"], 3) for r in runs]
            row["seconds"] = statistics.median(r["seconds"] for r in runs)
            row["kernel_peak"] = min(r["kernel_peak"] for r in runs)
            assert len({r["merges_sha256"] for r in runs}) == 1
            if base_runs:
                row["baseline_seconds_all"] = [round(r["seconds"], 3) for r in base_runs]
                row["baseline_seconds"] = statistics.median(r["seconds"] for r in base_runs)
                row["baseline_kernel_peak"] = min(r["kernel_peak"] for r in base_runs)
                row["baseline_merges_equal"] = all(r["merges_sha256"] == row["merges_sha256"] for r in base_runs)
                row["baseline_counts_equal"] = all(r["counts_sha256"] == row["counts_sha256"] for r in base_runs)
            if args.with_rustbpe and name == "32.1":
                rb = [_spawn(["--rustbpe", str(work / f"train-{size}MB.parquet")], {"RAYON_NUM_THREADS": "2"})
                      for _ in range(args.repeat)]
                row["rustbpe_seconds_all"] = [round(r["seconds"], 3) for r in rb]
                row["rustbpe_seconds"] = statistics.median(r["seconds"] for r in rb)
                row["rustbpe_peak_rss"] = max(r["peak_rss"] for r in rb)
            out["rows"].append(row)
            print(json.dumps(row), flush=True)
        rows = [r for r in out["rows"] if r["config"] == name]
        if len(rows) >= 2:
            slope, base = np.polyfit([r["unique_pieces"] for r in rows], [r["kernel_peak"] for r in rows], 1)
            out[f"slope_{name}"] = {"bytes_per_piece": float(slope), "base_bytes": float(base)}
            print(f"{name}: kernel peak = {base / 1e6:.1f} MB + {slope:.1f} B x unique pieces", flush=True)
            if rows[0].get("baseline_kernel_peak"):
                s0, b0 = np.polyfit([r["unique_pieces"] for r in rows], [r["baseline_kernel_peak"] for r in rows], 1)
                out[f"baseline_slope_{name}"] = {"bytes_per_piece": float(s0), "base_bytes": float(b0)}
                print(f"{name} baseline: kernel peak = {b0 / 1e6:.1f} MB + {s0:.1f} B x unique pieces", flush=True)
    out["load_avg_end"] = os.getloadavg()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", nargs="?")
    ap.add_argument("--child")
    ap.add_argument("--rustbpe")
    ap.add_argument("--workdir", default=str(ROOT / "work"))
    ap.add_argument("--sizes", default="25,100,203")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--label", default="after")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--baseline", help="checkout whose learner runs interleaved with this one (PYTHONPATH)")
    ap.add_argument("--with-rustbpe", dest="with_rustbpe", action="store_true")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
    elif args.rustbpe:
        print(json.dumps(rustbpe_child(args.rustbpe, 32768)))
    elif args.cmd == "prepare":
        prepare(args)
    elif args.cmd == "run":
        result = run(args)
        path = ROOT / "bench" / "results" / f"merge-learner-{args.label}-{time.strftime('%Y%m%d-%H%M%S')}.json"
        path.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {path}")
    else:
        ap.error("prepare or run")


if __name__ == "__main__":
    main()
