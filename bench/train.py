"""Training benchmark: the dwstok CLI vs rustbpe vs HF tokenizers at several corpus sizes
(issues 3 and 17).

Every measurement runs in its own subprocess, so wall time and peak RSS belong to that
run. All train on the same text with the o200k pattern and vocab 32,768 (configs/32.1.yaml:
no balance, no Han forcing); rustbpe and HF get two threads (RAYON_NUM_THREADS=2) and
their texts already in memory (their wall is the training call only). ``dwstok-cli``
runs what users run: ``dwstok pretokenize``, ``count`` and ``train`` as three processes
with ``--workers 2`` from the Parquet file, artifacts written to disk included; its
wall is the sum of the three processes' and its peak RSS the largest of them.
``dwstok-build`` runs the same stages in one process (``dwstok build --until train``),
and a tool ending in ``@base`` runs on the code at ``--base`` (a before/after in one run).

The code under test has its bytecode written first (``compile_bytecode``), as an
installed package has.

Corpora: the first N MB of text of train.parquet (``--sizes 20,100,203``), written with
the source's row-group size, so a slice shards as the whole file does. Tools run
interleaved, ``--repeat`` times per size; the tables give medians.

Per stage, the breakdown gives each process's wall and peak RSS, the stage's own timings
(from ``--json``) and, for train, the time inside the merge kernel (``learn_s``) against
everything around it (process start, imports, reading, writing).

    .venv/bin/python bench/train.py                             # 20, 100, 203 MB, 3 runs
    .venv/bin/python bench/train.py --sizes 20 --repeat 1 --tools dwstok-cli,rustbpe
    .venv/bin/python bench/train.py --tools dwstok-cli,dwstok-cli@base,dwstok-build,rustbpe --base ../main
    .venv/bin/python bench/train.py --child rustbpe --corpus X.parquet   # one run

Results: ``bench/results/train-<time>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from paths import ROOT, SHARED  # noqa: E402  (bench/ is on sys.path when run as a script)

CORPUS = SHARED / "corpus" / "train.parquet"
MB = 1_000_000
VOCAB = 32768
STAGES = ("pretokenize", "count", "train")


def corpus_slice(size_mb: int, work: Path) -> Path:
    """The first rows of train.parquet whose text adds up to ``size_mb`` MB (UTF-8),
    in row groups of the source's size (the whole split for 203)."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out = work / f"train-{size_mb}MB.parquet"
    if out.exists():
        return out
    pf = pq.ParquetFile(CORPUS)
    rows_per_group = max(1, pf.metadata.num_rows // pf.metadata.num_row_groups)
    t = pf.read()
    sizes = pc.binary_length(t.column("text").cast("binary")).to_numpy()
    n = int(np.searchsorted(np.cumsum(sizes), size_mb * MB)) + 1
    work.mkdir(parents=True, exist_ok=True)
    pq.write_table(t.slice(0, min(n, t.num_rows)), out, compression="zstd", row_group_size=rows_per_group)
    return out


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(tool: str, corpus: Path) -> dict:
    """One in-memory peer run (rustbpe or hf) in this process."""
    import pyarrow.parquet as pq

    sys.path.insert(0, str(ROOT))
    from dwstok.patterns import PATTERNS

    pattern = PATTERNS["o200k"]
    texts = pq.read_table(corpus, columns=["text"]).column("text").to_pylist()
    out: dict = {"tool": tool}
    if tool == "rustbpe":
        import rustbpe

        t0 = time.perf_counter()
        tok = rustbpe.Tokenizer()
        tok.train_from_iterator(iter(texts), VOCAB, pattern=pattern)
        out["wall_s"] = time.perf_counter() - t0
        out["merges"] = tok.vocab_size - 256
    elif tool == "hf":
        from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

        t0 = time.perf_counter()
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        trainer = trainers.BpeTrainer(
            vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
        )
        tok.train_from_iterator(texts, trainer=trainer)
        out["wall_s"] = time.perf_counter() - t0
        out["merges"] = tok.get_vocab_size() - 256
    else:
        raise SystemExit(f"unknown tool {tool}")
    out["peak_rss_mb"] = _peak_rss_mb()
    return out


def _run_wait4(cmd: list[str], env: dict, cwd: Path | None = None) -> tuple[float, float, int, str, str]:
    """(wall s, peak RSS MB, exit code, stdout, stderr) of one process, its peak RSS from
    GNU time (a child forked from this process would inherit this process's high-water
    mark across exec, so the RSS is measured under the small ``time`` process)."""
    with tempfile.NamedTemporaryFile("r") as rss, tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        t0 = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, *cmd], env=env, stdout=fo, stderr=fe, text=True,
                           cwd=cwd)
        wall = time.perf_counter() - t0
        fo.seek(0)
        fe.seek(0)
        kb = int(open(rss.name).read().split()[-1])
        return wall, kb / 1024, p.returncode, fo.read(), fe.read()


def run_cli(corpus: Path, work: Path, tool: str = "dwstok-cli", root: Path = ROOT) -> dict:
    """pretokenize, count, train as three ``dwstok`` processes (--workers 2), or, for
    ``dwstok-build``, as one ``dwstok build --until train``; ``root``: whose code runs."""
    env = dict(os.environ, PYTHONPATH=str(root), NUMBA_NUM_THREADS="2")
    config = ROOT / "configs" / "32.1.yaml"
    wd = work / "w"
    if wd.exists():
        import shutil

        shutil.rmtree(wd)
    # `python -m` puts the working folder ahead of PYTHONPATH: run from `root`, or an
    # @base row started in this checkout imports this checkout's code.
    out: dict = {"tool": tool, "stages": {}, "dwstok": _imported(env, root)}
    opts = [str(config), "--corpus", str(corpus), "--workdir", str(wd), "--workers", "2", "--json", "-q"]
    if tool.startswith("dwstok-build"):
        cmd = [sys.executable, "-m", "dwstok_cli.main", "build", "--until", STAGES[-1], *opts]
        wall, rss, code, so, se = _run_wait4(cmd, env, root)
        if code != 0:
            raise RuntimeError(f"dwstok build failed ({code}):\n{se[-3000:]}")
        recs = json.loads(so)["stages"]
        # one process: its start-up and imports are charged to the first stage
        rest = sum(r["seconds"] for r in recs[1:])
        for rec in recs:
            out["stages"][rec["stage"]] = {"wall_s": rec["seconds"] if rec is not recs[0] else wall - rest,
                                           "peak_rss_mb": rss, "stage_s": rec["seconds"],
                                           "timings": rec["timings"], "counts": rec["counts"]}
    else:
        for stage in STAGES:
            cmd = [sys.executable, "-m", "dwstok_cli.main", stage, *opts]
            wall, rss, code, so, se = _run_wait4(cmd, env, root)
            if code != 0:
                raise RuntimeError(f"dwstok {stage} failed ({code}):\n{se[-3000:]}")
            [rec] = json.loads(so)["stages"]
            out["stages"][stage] = {"wall_s": wall, "peak_rss_mb": rss, "stage_s": rec["seconds"],
                                    "timings": rec["timings"], "counts": rec["counts"]}
    st = out["stages"]
    out["wall_s"] = sum(s["wall_s"] for s in st.values())
    out["peak_rss_mb"] = max(s["peak_rss_mb"] for s in st.values())
    out["kernel_s"] = st["train"]["timings"].get("learn_s", 0.0)
    out["around_kernel_s"] = out["wall_s"] - out["kernel_s"]
    out["unique_pieces"] = st["count"]["counts"].get("unique_pieces")
    out["merges"] = st["train"]["counts"].get("merges")
    out["model_sha256"] = None
    model = wd / "train" / "model.json"
    if model.exists():
        import hashlib

        out["model_sha256"] = hashlib.sha256(model.read_bytes()).hexdigest()
    return out


def compile_bytecode(root: Path) -> None:
    """Write the bytecode of ``root``'s packages, as ``pip install`` (and ``make setup``)
    does: the stage processes then start as an installed dwstok does, instead of compiling
    the sources again in an environment with PYTHONDONTWRITEBYTECODE set."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "dwstok", "stages", "dwstok_cli"], cwd=root, check=True,
                   stdout=subprocess.DEVNULL)


def _imported(env: dict, root: Path) -> str:
    """The folder of the dwstok package that a command run as ``run_cli`` runs it imports."""
    code = "import dwstok, os; print(os.path.dirname(os.path.dirname(dwstok.__file__)))"
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True)
    return p.stdout.strip()


def run_peer(tool: str, corpus: Path) -> dict:
    env = dict(os.environ, RAYON_NUM_THREADS="2", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, __file__, "--child", tool, "--corpus", str(corpus)]
    wall, rss, code, so, se = _run_wait4(cmd, env)
    if code != 0:
        raise RuntimeError(f"{tool} failed ({code}):\n{se[-3000:]}")
    res = json.loads(so.strip().splitlines()[-1])
    res["process_wall_s"] = wall
    res["peak_rss_mb"] = max(res["peak_rss_mb"], rss)
    return res


def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def summarise(runs: dict) -> dict:
    """Medians per size and tool, ratios against rustbpe, per-stage medians."""
    out = {}
    for size, by_tool in runs.items():
        s: dict = {}
        for tool, rs in by_tool.items():
            s[tool] = {"wall_s": _median([r["wall_s"] for r in rs]), "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
                       "runs": len(rs)}
            if tool.startswith("dwstok"):
                s[tool]["kernel_s"] = _median([r["kernel_s"] for r in rs])
                s[tool]["around_kernel_s"] = _median([r["around_kernel_s"] for r in rs])
                s[tool]["unique_pieces"] = rs[0]["unique_pieces"]
                s[tool]["stages"] = {
                    st: {
                        "wall_s": _median([r["stages"][st]["wall_s"] for r in rs]),
                        "stage_s": _median([r["stages"][st]["stage_s"] for r in rs]),
                        "peak_rss_mb": max(r["stages"][st]["peak_rss_mb"] for r in rs),
                        "timings": {k: _median([r["stages"][st]["timings"][k] for r in rs])
                                    for k in rs[0]["stages"][st]["timings"]},
                    }
                    for st in STAGES
                }
                s[tool]["model_sha256"] = sorted({r["model_sha256"] for r in rs})
                s[tool]["dwstok"] = sorted({r.get("dwstok", "") for r in rs})
        rb = s.get("rustbpe", {}).get("wall_s")
        if rb:
            for tool in s:
                s[tool]["vs_rustbpe"] = s[tool]["wall_s"] / rb
            rss = s["rustbpe"]["peak_rss_mb"]
            for tool in s:
                s[tool]["rss_vs_rustbpe"] = s[tool]["peak_rss_mb"] / rss
        out[size] = s
    return out


def markdown(summary: dict, meta: dict) -> str:
    lines = [f"# Training: dwstok CLI vs rustbpe vs HF ({meta['time']})", "",
             f"`{meta['command']}`; vocab {VOCAB}, o200k, 2 workers / 2 threads; medians of "
             f"{meta['repeat']} interleaved runs; load average at start {meta['load_start']}, "
             f"at end {meta['load_end']} (2 cores, shared). dwstok-cli wall = the three CLI processes, "
             "start-up included; dwstok-build = one `dwstok build --until train` process; "
             "@base = the same on the code at " + str(meta.get("base")) + "; peers' wall = their "
             "training call, texts in memory.", "",
             "| corpus | unique pieces | dwstok | dwstok s | rustbpe s | HF s | dwstok / rustbpe | peak RSS dwstok / rustbpe / HF MB |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    f = lambda x, k, fmt="{:.1f}": fmt.format(x[k]) if k in x else "-"  # noqa: E731
    for size, s in summary.items():
        r, h = s.get("rustbpe", {}), s.get("hf", {})
        for tool in [t for t in s if t.startswith("dwstok")] or ["dwstok-cli"]:
            d = s.get(tool, {})
            lines.append(
                f"| {size} MB | {d.get('unique_pieces', 0):,} | {tool} | {f(d, 'wall_s')} | {f(r, 'wall_s')} | {f(h, 'wall_s')} | "
                f"{f(d, 'vs_rustbpe', '{:.2f}x')} | {f(d, 'peak_rss_mb', '{:.0f}')} / {f(r, 'peak_rss_mb', '{:.0f}')} / {f(h, 'peak_rss_mb', '{:.0f}')} |"
            )
    lines += ["", "Per stage (medians; process wall includes start-up and imports, for dwstok-build "
              "charged to pretokenize; kernel = train's learn_s, inside dwstok.merge_learner):", "",
              "| corpus | dwstok | pretokenize s | count s | train s | of which kernel | around the kernel (all stages) | peak RSS pretok / count / train MB | stage timings |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for size, s in summary.items():
        for tool in [t for t in s if t.startswith("dwstok")]:
            d = s[tool]
            st = d["stages"]
            timings = "; ".join(f"{k}: " + ", ".join(f"{n} {v:.2f}" for n, v in st[k]["timings"].items()) for k in STAGES)
            lines.append(
                f"| {size} MB | {tool} | {st['pretokenize']['wall_s']:.2f} | {st['count']['wall_s']:.2f} | {st['train']['wall_s']:.2f} | "
                f"{d['kernel_s']:.2f} | {d['around_kernel_s']:.2f} | "
                f"{st['pretokenize']['peak_rss_mb']:.0f} / {st['count']['peak_rss_mb']:.0f} / {st['train']['peak_rss_mb']:.0f} | {timings} |"
            )
    # Every dwstok row, at every worker count and on either code, must build the same model.
    same = []
    for size, s in summary.items():
        shas = {x for t, d in s.items() if t.startswith("dwstok") for x in d["model_sha256"]}
        if shas:
            same.append(f"{size} MB: " + (f"all equal ({next(iter(shas))[:16]})" if len(shas) == 1 else f"DIFFER {sorted(shas)}"))
    if same:
        lines += ["", "model.json sha256, all dwstok rows: " + "; ".join(same)]
    ran = sorted({(t, x) for s in summary.values() for t, d in s.items() if t.startswith("dwstok") for x in d["dwstok"]})
    if ran:
        lines += ["", "Code each row imported: " + ", ".join(f"{t} {x}" for t, x in ran)]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child")
    ap.add_argument("--corpus", type=Path)
    ap.add_argument("--sizes", default="20,100,203")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tools", default="dwstok-cli,rustbpe,hf")
    ap.add_argument("--hf-repeat", type=int, default=1, help="HF runs per size (it is the slowest)")
    ap.add_argument("--base", type=Path, help="a checkout whose code the tools dwstok-cli@base and "
                    "dwstok-build@base run (e.g. /work/main), for a before/after in the same run")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "dwstok-bench-train")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.corpus)))
        return
    tools = args.tools.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    meta = {"time": stamp, "command": "bench/train.py " + " ".join(sys.argv[1:]), "repeat": args.repeat,
            "load_start": round(os.getloadavg()[0], 1), "cpus": os.cpu_count(),
            "base": str(args.base) if args.base else None}
    for root in {ROOT, *([args.base] if args.base and any(t.endswith("@base") for t in tools) else [])}:
        compile_bytecode(root)
    runs: dict = {}
    for size in sizes:
        corpus = corpus_slice(size, args.work)
        runs[size] = {t: [] for t in tools}
        for i in range(args.repeat):
            for tool in tools:
                if tool == "hf" and i >= args.hf_repeat:
                    continue
                if tool.startswith("dwstok"):
                    # "@base": the same command on the code at --base (a before/after in one run)
                    r = run_cli(corpus, args.work, tool, args.base if tool.endswith("@base") else ROOT)
                else:
                    r = run_peer(tool, corpus)
                runs[size][tool].append(r)
                shown = {k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k != "stages"}
                print(json.dumps({"size_mb": size, "run": i, **shown}), flush=True)
    meta["load_end"] = round(os.getloadavg()[0], 1)
    summary = summarise(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"train-{stamp}.json").write_text(json.dumps({"meta": meta, "summary": summary, "runs": runs}, indent=1))
    md = markdown(summary, meta)
    (args.out / f"train-{stamp}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
