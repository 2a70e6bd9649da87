"""Benchmark the build pipeline on a real corpus.

1. Every stage (pretokenize, count, train, export, encode-shards) run through the real
   CLI, one command per stage in a fresh process, at 1 and at 2 workers: wall time and
   peak RSS (the whole process tree, sampled; plus the largest single process). The two
   runs' output hashes are compared (they must be byte-identical).
2. encode-shards throughput, tokens/s and MB/s, against tiktoken's
   ``encode_ordinary_batch`` on the exported ``.tiktoken`` and fastokens' batch encode on
   the exported ``tokenizer.json`` at the same thread count (= dwstok's worker count).
   dwstok's figure includes reading Parquet and writing shards (and process start and
   model load); the peers get the texts already in memory. Each peer runs in a fresh
   process, warmed up on other text, timed on its first pass over the corpus.
3. Bytes/token per language of 32.1, 32.2 and 32.3 (and GPT-4o's o200k_base for
   reference) on the dev split. 32.1 and 32.2 share pretokenize/count (same pattern).

    .venv/bin/python bench/pipeline.py                  # the full run (tens of minutes)
    .venv/bin/python bench/pipeline.py --quick --repeat 1   # smoke test: dev split, demo config

Results are printed as Markdown tables and written to ``<workdir>/pipeline.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from paths import ROOT, SHARED  # noqa: E402  (bench/ is on sys.path when run as a script)
STAGES = ("pretokenize", "count", "train", "export", "encode-shards")


# -- measuring a child process tree ------------------------------------------------------
def run_measured(cmd: list[str], *, env: dict | None = None) -> dict:
    """Run ``cmd``; wall seconds, peak RSS of the process tree (sum) and of one process."""
    import resource

    import psutil

    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    peak_tree = peak_one = 0
    stop = threading.Event()

    def sample():
        nonlocal peak_tree, peak_one
        try:
            p = psutil.Process(proc.pid)
        except psutil.Error:
            return
        while not stop.is_set():
            total = 0
            try:
                procs = [p] + p.children(recursive=True)
            except psutil.Error:
                break
            for q in procs:
                try:
                    rss = q.memory_info().rss
                except psutil.Error:
                    continue
                total += rss
                peak_one = max(peak_one, rss)
            peak_tree = max(peak_tree, total)
            stop.wait(0.05)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    stop.set()
    th.join()
    seconds = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{err[-3000:]}")
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_rss_tree": peak_tree,
            "peak_rss_one": peak_one, "stdout": out, "stderr": err}


def dwstok_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("dwstok")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "from dwstok_cli.main import cli; cli()"]


def run_stage(stage: str, config: str, corpus: str, workdir: Path, workers: int) -> dict:
    cmd = dwstok_cmd() + [stage, config, "--corpus", corpus, "--workdir", str(workdir),
                          "--workers", str(workers), "--json"]
    r = run_measured(cmd)
    summary = json.loads(r["stdout"])
    if isinstance(summary, list):
        summary = summary[0]
    return {"stage": stage, "workers": workers, "seconds": r["seconds"], "cpu_seconds": r["cpu_seconds"],
            "peak_rss_tree": r["peak_rss_tree"], "peak_rss_one": r["peak_rss_one"],
            "status": summary["status"], "output_hash": summary["output_hash"],
            "counts": summary["counts"], "timings": summary["timings"]}


def warm_up(config: str, dev: str, workdir: Path) -> None:
    """Run all stages once on 300 dev documents, so that Numba's on-disk cache holds every
    kernel and no measured run pays for JIT compilation."""
    import pyarrow.parquet as pq

    workdir.mkdir(parents=True, exist_ok=True)
    small = workdir / "small.parquet"
    pq.write_table(pq.read_table(dev).slice(0, 300), small)
    for stage in STAGES:
        run_stage(stage, config, str(small), workdir, 1)


# -- peers -----------------------------------------------------------------------------
_PEER = textwrap.dedent(
    """
    import json, sys, time
    import pyarrow.parquet as pq
    kind, export_dir, corpus, warm, threads = sys.argv[1:6]
    threads = int(threads)
    texts = pq.read_table(corpus, columns=["text"]).column("text").to_pylist()
    warm_texts = pq.read_table(warm, columns=["text"]).column("text").to_pylist()[:200]
    if kind == "tiktoken":
        sys.path.insert(0, {root!r})
        from stages.export import load_tiktoken
        enc = load_tiktoken(export_dir)
        run = lambda t: sum(map(len, enc.encode_ordinary_batch(t, num_threads=threads)))
    else:
        import numpy as np
        import fastokens
        tok = fastokens.Tokenizer.from_file(export_dir + "/tokenizer.json")
        def run(t):
            ids, offs = tok.encode_batch_flat(t, split_special_tokens=True)
            return len(ids) // 4
    import resource
    run(warm_texts)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    n = run(texts)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    print(json.dumps({{"seconds": dt, "cpu_seconds": cpu, "tokens": n,
                      "bytes": sum(len(t.encode()) for t in texts)}}))
    """
)


def run_peer(kind: str, export_dir: Path, corpus: str, warm: str, threads: int) -> dict:
    # fastokens: rayon's variable and its own BPE thread count
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), FASTOKENS_BPE_THREADS=str(threads))
    cmd = [sys.executable, "-c", _PEER.format(root=str(ROOT)), kind, str(export_dir), corpus,
           warm, str(threads)]
    r = run_measured(cmd, env=env)
    d = json.loads(r["stdout"].strip().splitlines()[-1])
    d["peak_rss_one"] = r["peak_rss_one"]
    d["process_cpu_seconds"] = r["cpu_seconds"]  # whole process, loading included
    return d


# -- bytes per token -------------------------------------------------------------------
def bytes_per_token(models: dict[str, object], dev: str) -> dict[str, dict[str, float]]:
    """{model: {lang: bytes/token}} on the dev split, encoded with encode_utf8_batch."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t = pq.read_table(dev, columns=["text", "lang"])
    text = t.column("text").combine_chunks().cast(pa.large_string())
    bufs = text.buffers()
    offsets = np.frombuffer(bufs[1], np.int64)[text.offset:text.offset + len(text) + 1]
    data = np.frombuffer(bufs[2], np.uint8)
    enc = pc.dictionary_encode(t.column("lang").combine_chunks())
    li = enc.indices.to_numpy(zero_copy_only=False)
    langs = enc.dictionary.to_pylist()
    nbytes = np.bincount(li, weights=np.diff(offsets), minlength=len(langs))
    out = {}
    for name, tok in models.items():
        ids, doc = tok.encode_utf8_batch(data, offsets)
        ntok = np.bincount(li, weights=np.diff(doc), minlength=len(langs))
        row = {g: round(float(nbytes[j] / ntok[j]), 3) for j, g in enumerate(langs) if ntok[j]}
        row["all"] = round(float(nbytes.sum() / ntok.sum()), 3)
        out[name] = row
    return out


# -- main ------------------------------------------------------------------------------
def mb(x: float) -> str:
    return f"{x / 1e6:,.0f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=str(SHARED / "corpus" / "train.parquet"))
    ap.add_argument("--dev", default=str(SHARED / "corpus" / "dev.parquet"))
    ap.add_argument("--configs", default=str(ROOT / "configs"), help="folder with 32.1/32.2/32.3.yaml")
    ap.add_argument("--workdir", default=str(ROOT / "work" / "bench-pipeline"))
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: the dev split as corpus, the demo config, one version")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of encode-shards and of each peer; the median is reported")
    ap.add_argument("--keep", action="store_true", help="keep earlier outputs (stages may be up to date)")
    args = ap.parse_args(argv)

    work = Path(args.workdir)
    if work.exists() and not args.keep:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    configs = Path(args.configs)
    corpus = args.dev if args.quick else args.corpus
    main_cfg = str(configs / ("demo.yaml" if args.quick else "32.3.yaml"))
    results: dict = {"corpus": corpus, "dev": args.dev, "config": main_cfg, "cpus": os.cpu_count()}

    # 1. stages at 1 and 2 workers
    print(f"# dwstok pipeline benchmark\n\ncorpus {corpus}, config {main_cfg}, {os.cpu_count()} CPUs\n")
    t0 = time.perf_counter()
    warm_up(main_cfg, args.dev, work / "warmup")
    print(f"  warm-up (JIT compile into Numba's cache, not measured): {time.perf_counter() - t0:.1f} s")
    stage_rows = []
    for n in args.workers:
        wd = work / f"w{n}"
        for stage in STAGES:
            r = run_stage(stage, main_cfg, corpus, wd, n)
            if stage == "encode-shards" and args.repeat > 1:
                runs = [r]
                for _ in range(args.repeat - 1):
                    shutil.rmtree(wd / stage)
                    runs.append(run_stage(stage, main_cfg, corpus, wd, n))
                r = dict(sorted(runs, key=lambda x: x["seconds"])[len(runs) // 2])
                r["all_seconds"] = [round(x["seconds"], 2) for x in runs]
            stage_rows.append(r)
            print(f"  {stage} @ {n} worker(s): {r['seconds']:.1f} s, "
                  f"peak RSS {mb(r['peak_rss_tree'])} MB", flush=True)
    results["stages"] = stage_rows
    print("\n## Stages\n")
    print("| stage | workers | wall s | CPU s | peak RSS tree MB | peak RSS one process MB |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in stage_rows:
        print(f"| {r['stage']} | {r['workers']} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} "
              f"| {mb(r['peak_rss_tree'])} | {mb(r['peak_rss_one'])} |")
    same = {}
    for stage in STAGES:
        hashes = {r["output_hash"] for r in stage_rows if r["stage"] == stage}
        same[stage] = len(hashes) == 1
    results["identical_across_workers"] = same
    print(f"\nOutputs identical across worker counts: {same}")

    # 2. encode-shards throughput vs peers
    enc_rows = [r for r in stage_rows if r["stage"] == "encode-shards"]
    export_dir = work / f"w{args.workers[0]}" / "export"
    print("\n## encode-shards throughput\n")
    print(f"(median of {args.repeat} runs, each a first pass in a fresh process)\n")
    print("| encoder | threads | seconds | CPU s | tokens | MB/s | Mtokens/s | Mtokens/s/core | vs tiktoken |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    tp = []
    for r in enc_rows:
        n = r["workers"]
        tokens, nbytes = r["counts"]["tokens"], r["counts"]["bytes"]
        peers = {}
        for k in ("tiktoken", "fastokens"):
            runs = [run_peer(k, export_dir, corpus, args.dev, n) for _ in range(args.repeat)]
            peers[k] = dict(sorted(runs, key=lambda x: x["seconds"])[len(runs) // 2])
            peers[k]["all_seconds"] = [round(x["seconds"], 2) for x in runs]
        rows = [("dwstok encode-shards (process wall, incl. start, Parquet, shards)", r["seconds"],
                 r["cpu_seconds"], tokens, nbytes),
                ("dwstok encode-shards (map only)", r["timings"].get("map_s") or r["seconds"],
                 None, tokens, nbytes)]
        rows += [(k, p["seconds"], p["cpu_seconds"], p["tokens"], p["bytes"]) for k, p in peers.items()]
        tt = peers["tiktoken"]["bytes"] / peers["tiktoken"]["seconds"]
        for name, sec, cpu, ntok, nb in rows:
            cpu_s = f"{cpu:.2f}" if cpu is not None else "–"
            print(f"| {name} | {n} | {sec:.2f} | {cpu_s} | {ntok:,} | {nb / sec / 1e6:.1f} | "
                  f"{ntok / sec / 1e6:.2f} | {ntok / sec / 1e6 / n:.2f} | {nb / sec / tt:.2f}x |")
            tp.append({"encoder": name, "threads": n, "seconds": sec, "cpu_seconds": cpu,
                       "tokens": ntok, "bytes": nb})
        for k, p in peers.items():
            if p["tokens"] != tokens:
                print(f"  note: {k} produced {p['tokens']:,} tokens, dwstok {tokens:,}")
    results["throughput"] = tp

    # 3. bytes/token per language on dev
    from dwstok.tokenizer import Tokenizer

    models = {}
    w_main = work / f"w{args.workers[0]}"
    if args.quick:
        models[Path(main_cfg).stem] = Tokenizer.load(w_main / "train" / "model.json")
    else:
        models["32.3"] = Tokenizer.load(w_main / "train" / "model.json")
        n = max(args.workers)
        w1 = work / "v32.1"
        for stage in ("pretokenize", "count", "train"):
            r = run_stage(stage, str(configs / "32.1.yaml"), corpus, w1, n)
            print(f"  32.1 {stage}: {r['seconds']:.1f} s", flush=True)
        w2 = work / "v32.2"
        w2.mkdir(exist_ok=True)
        for stage in ("pretokenize", "count"):  # same pattern and corpus: reuse
            if not (w2 / stage).exists():
                shutil.copytree(w1 / stage, w2 / stage)
        for stage in ("pretokenize", "count", "train"):
            r = run_stage(stage, str(configs / "32.2.yaml"), corpus, w2, n)
            print(f"  32.2 {stage}: {r['seconds']:.1f} s ({r['status']})", flush=True)
        models = {"32.1": Tokenizer.load(w1 / "train" / "model.json"),
                  "32.2": Tokenizer.load(w2 / "train" / "model.json"), **models}
        o200k = SHARED / "reftok" / "o200k_base.tiktoken"
        if o200k.exists():
            meta = json.loads((SHARED / "reftok" / "encodings.json").read_text())["encodings"]["o200k_base"]
            models["o200k_base (ref)"] = Tokenizer.from_tiktoken(
                o200k, pattern="o200k", special_tokens=meta["special_tokens"])
    bpt = bytes_per_token(models, args.dev)
    results["bytes_per_token"] = bpt
    langs = sorted({g for row in bpt.values() for g in row if g != "all"})
    print("\n## Bytes per token on the dev split (higher = fewer tokens)\n")
    names = list(bpt)
    print("| lang | " + " | ".join(names) + " |")
    print("| --- | " + " | ".join("---" for _ in names) + " |")
    for g in langs + ["all"]:
        print(f"| {g} | " + " | ".join(f"{bpt[m].get(g, float('nan')):.2f}" for m in names) + " |")

    (work / "pipeline.json").write_text(json.dumps(results, indent=1))
    print(f"\nresults: {work / 'pipeline.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
