"""Scale simulation (issue 18): peak RSS and wall time per stage on synthetic corpora of 1-5 GB.

For each size: ``bench/scale_corpus.py`` writes a synthetic corpus that follows the train
split (language byte shares, piece shapes, Heaps growth, Zipf head; fitted once, cached in
the workdir), then ``pretokenize``, ``count`` and ``train`` run as separate CLI processes of
the checkout this script sits in (``--workers 2`` by default). Each process tree is polled
with psutil (sum of RSS over the process and its children, every 50 ms) and run under
``/usr/bin/time -v`` (maximum RSS of the largest single process). With ``--min-counts 1,2``
count and train run again with ``--set count.min_count=2`` on the same pretokenize output.
The real train split runs too (``--real``), next to its synthetic twin of the same size.

Fits: unique pieces against corpus bytes (Heaps, log-log), peak RSS of count and train
against unique pieces (linear: base + bytes per piece), wall time against bytes (log-log).
The extrapolation to 100 GB and 1 TB composes the two (see ``extrapolate``).

    python bench/scale_sim.py --sizes 0.2,1            # quick: a few minutes
    python bench/scale_sim.py --sizes 0.2,1,2,5        # the full run

Results: ``bench/results/scale-<time>.json``, ``.md`` and ``.png``. Corpora and workdirs
go under ``--workdir`` (default ``work/scale``, git-ignored) and are deleted after each size
unless ``--keep``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil

from paths import ROOT, SHARED  # noqa: E402  (bench/ is on sys.path when run as a script)
import scale_corpus  # noqa: E402

GB = 1e9
STAGES = ("pretokenize", "count", "train")


def _tree_rss(p: psutil.Process) -> int:
    total = 0
    for q in [p, *p.children(recursive=True)]:
        try:
            total += q.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_stage(stage: str, config: str, corpus: Path, workdir: Path, workers: int, sets: list[str]) -> dict:
    """One stage as its own CLI process: wall seconds, peak RSS of the tree and of one process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "dwstok_cli.main", stage, config, "--corpus", str(corpus),
           "--workdir", str(workdir), "--workers", str(workers), "--json"]
    for s in sets:
        cmd += ["--set", s]
    peak = [0]
    t0 = time.perf_counter()
    proc = psutil.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    done = threading.Event()

    def poll():
        while not done.is_set():
            try:
                peak[0] = max(peak[0], _tree_rss(proc))
            except psutil.Error:
                pass
            done.wait(0.05)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - t0
    done.set()
    th.join()
    if proc.returncode != 0:
        raise SystemExit(f"{stage} failed ({proc.returncode}):\n{err[-3000:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", err).group(1))
    summary = json.loads(out)
    rec = next(s for s in summary["stages"] if s.get("stage") == stage) if isinstance(summary, dict) else summary
    return {"seconds": round(seconds, 2), "peak_rss_tree": peak[0], "peak_rss_process": rss_kb * 1024,
            "counts": rec.get("counts", {}), "timings": rec.get("timings", {}), "status": rec.get("status")}


def _json_summary(path: Path) -> dict:
    return json.loads(path.read_text())


def run_size(label: str, corpus: Path, text_bytes: int, args, work: Path) -> dict:
    wd = work / f"wd-{label}"
    shutil.rmtree(wd, ignore_errors=True)
    row = {"label": label, "corpus": str(corpus), "text_bytes": text_bytes, "file_bytes": corpus.stat().st_size}
    row["pretokenize"] = run_stage("pretokenize", args.config, corpus, wd, args.workers, [])
    out_bytes = sum(f.stat().st_size for f in (wd / "pretokenize").glob("part-*.arrow"))
    row["pretokenize"]["output_bytes"] = out_bytes
    for mc in args.min_counts:
        sets = [f"count.min_count={mc}"] if mc > 1 else []
        key = "" if mc == 1 else f"_mc{mc}"
        c = run_stage("count", args.config, corpus, wd, args.workers, sets)
        t = run_stage("train", args.config, corpus, wd, args.workers, sets)
        stats = _json_summary(wd / "count" / "stats.json")
        c["unique_pieces"] = stats["unique_pieces"]
        c["unique_pieces_before"] = stats.get("pruning", {}).get("unique_pieces_before", stats["unique_pieces"])
        if mc == 1:
            row["zipf"] = scale_corpus.zipf_fit(piece_totals(wd / "count" / "pieces.arrow"))
        row[f"count{key}"], row[f"train{key}"] = c, t
        print(f"  {label} min_count {mc}: {c['unique_pieces']:,} pieces (of {c['unique_pieces_before']:,}); "
              f"count {c['peak_rss_tree'] / 1e6:.0f} MB {c['seconds']} s, train {t['peak_rss_tree'] / 1e6:.0f} MB "
              f"{t['seconds']} s", flush=True)
    row["unique_pieces"] = row["count"]["unique_pieces"]
    print(f"{label}: {text_bytes / 1e6:.0f} MB, {row['unique_pieces']:,} unique pieces; pretokenize "
          f"{row['pretokenize']['peak_rss_tree'] / 1e6:.0f} MB {row['pretokenize']['seconds']} s", flush=True)
    if not args.keep:
        shutil.rmtree(wd, ignore_errors=True)
    return row


def piece_totals(path: Path) -> np.ndarray:
    """Each unique piece's count over all languages, from count's pieces.arrow."""
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc

    with ipc.open_file(path) as f:
        t = f.read_all()
    for name in ("count", "total"):
        if name in t.column_names:
            return t.column(name).to_numpy()
    langs = [c for c in t.column_names if c.startswith("lang:")]
    total = t.column(langs[0])
    for c in langs[1:]:
        total = pc.add(total, t.column(c))
    return total.to_numpy()


def fit_line(x, y) -> tuple[float, float]:
    a, b = np.polyfit(np.asarray(x, float), np.asarray(y, float), 1)
    return float(a), float(b)


def fits(rows: list[dict], model: dict, min_counts: list[int]) -> dict:
    """Least-squares lines over the synthetic sizes.

    - count: peak RSS = base + bytes x pieces it keeps (with pruning, the assembled table holds
      the kept pieces only, so at min_count 2 the peak is the larger of that line, with the
      unpruned slope, and the flat peak of the other phases measured at that setting);
    - train: peak RSS = base + bytes x kept pieces;
    - pretokenize: per shard, so its largest measured peak;
    - wall time: a fixed part (start-up, JIT) + seconds per byte of text (pretokenize, count)
      or per kept piece (train)."""
    sim = [r for r in rows if r["label"] != "real"]
    f = {"heaps_real": model["heaps_fit"], "n_sizes": len(sim)}
    if len(sim) < 2:
        return f
    b, k = scale_corpus.loglog_fit([r["text_bytes"] for r in sim], [r["unique_pieces"] for r in sim])
    f["heaps_sim"] = {"beta": b, "k": k}
    x = [r["text_bytes"] for r in sim]
    sec, base = fit_line(x, [r["pretokenize"]["seconds"] for r in sim])
    f["pretokenize"] = {"peak_rss_max": max(r["pretokenize"]["peak_rss_tree"] for r in sim),
                        "wall_base": base, "wall_per_byte": sec}
    everything = sim
    for mc in min_counts:
        key = "" if mc == 1 else f"_mc{mc}"
        c = "count" + key
        sim = [r for r in everything if c in r]  # a run may have measured some settings only
        if len(sim) < 2:
            continue
        x = [r["text_bytes"] for r in sim]
        kept = [r[c]["unique_pieces"] for r in sim]
        slope, base = fit_line(kept, [r[c]["peak_rss_tree"] for r in sim])
        sec, wbase = fit_line(x, [r[c]["seconds"] for r in sim])
        f[c] = {"bytes_per_piece": slope, "base": base, "wall_base": wbase, "wall_per_byte": sec,
                "flat_peak": max(r[c]["peak_rss_tree"] for r in sim),
                "kept_fraction": kept[-1] / sim[-1][c]["unique_pieces_before"]}
        t = "train" + key
        slope, base = fit_line(kept, [r[t]["peak_rss_tree"] for r in sim])
        sec, wbase = fit_line(kept, [r[t]["seconds"] for r in sim])
        f[t] = {"bytes_per_piece": slope, "base": base, "wall_base": wbase, "wall_per_piece": sec}
    return f


def predict(f: dict, key: str, n: float) -> dict:
    """Unique pieces, peak RSS and wall per stage at n bytes of text (key "" or "_mc2")."""
    h = f["heaps_real"]
    u = h["k"] * n ** h["beta"]
    c, t = f["count" + key], f["train" + key]
    kept = u * c["kept_fraction"]
    full = f["count"]
    count_rss = full["base"] + full["bytes_per_piece"] * kept
    if key:
        count_rss = max(count_rss, c["flat_peak"])
    return {"unique_pieces": u, "kept_pieces": kept,
            "pretokenize_rss": f["pretokenize"]["peak_rss_max"], "count_rss": count_rss,
            "train_rss": t["base"] + t["bytes_per_piece"] * kept,
            "pretokenize_s": f["pretokenize"]["wall_base"] + f["pretokenize"]["wall_per_byte"] * n,
            "count_s": c["wall_base"] + c["wall_per_byte"] * n,
            "train_s": t["wall_base"] + t["wall_per_piece"] * kept}


def extrapolate(f: dict, sizes=(100 * GB, 1000 * GB), ram=24 * GB, nodes=(1, 8, 32)) -> dict:
    """``predict`` at 100 GB and 1 TB, one machine and a Ray cluster; the largest corpus in ``ram``."""
    if "train" not in f:
        return {}
    out = {"ram": ram, "sizes": {}, "fits_in_ram": {}}
    for key in [k for k in ("", "_mc2") if "train" + k in f]:
        setting = "default" if not key else "min_count_2"
        for n in sizes:
            row = predict(f, key, n)
            # pretokenize is a map over shards and count's reduce runs as executor tasks: both
            # spread over the nodes (count's split pass and final table stay on the driver: the
            # 1/k is a lower bound); train runs on one node.
            row["ray"] = {str(k): {"pretokenize_s": row["pretokenize_s"] / k, "count_s": row["count_s"] / k,
                                   "train_s": row["train_s"], "head_node_rss": max(row["train_rss"], row["count_rss"])}
                          for k in nodes}
            out["sizes"].setdefault(f"{n / GB:g} GB", {})[setting] = row
        lo, hi = 1e8, 1e15  # bisect in log space for the largest n with every stage under ram
        for _ in range(100):
            mid = math.sqrt(lo * hi)
            r = predict(f, key, mid)
            lo, hi = (mid, hi) if max(r["count_rss"], r["train_rss"], r["pretokenize_rss"]) <= ram else (lo, mid)
        r = predict(f, key, lo)
        out["fits_in_ram"][setting] = {"corpus_bytes": lo, "unique_pieces": r["unique_pieces"],
                                       "binding": "count" if r["count_rss"] >= r["train_rss"] else "train"}
    return out


def plot(rows: list[dict], f: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sim = [r for r in rows if r["label"] != "real"]
    x = np.array([r["text_bytes"] for r in sim])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    grid = np.geomspace(min(x) / 2, 1000 * GB, 100)
    colors = {"pretokenize": "tab:blue", "count": "tab:orange", "train": "tab:green"}
    for key, ls in (("", "-"), ("_mc2", ":")):
        if "train" + key not in f:
            continue
        pred = [predict(f, key, n) for n in grid]
        for stage in STAGES:
            if stage == "pretokenize" and key:
                continue
            s = stage + key
            lab = s.replace("_mc2", " (min_count 2)")
            fill = "none" if key else None
            have = [r for r in sim if s in r]
            ax1.loglog([r["text_bytes"] for r in have], [r[s]["peak_rss_tree"] for r in have], "o", color=colors[stage], mfc=fill)
            ax2.loglog([r["text_bytes"] for r in have], [r[s]["seconds"] for r in have], "o", color=colors[stage], mfc=fill)
            ax1.loglog(grid, [p[f"{stage}_rss"] for p in pred], ls, color=colors[stage], label=lab)
            ax2.loglog(grid, [p[f"{stage}_s"] for p in pred], ls, color=colors[stage], label=lab)
    for r in [r for r in rows if r["label"] == "real"]:
        for stage in STAGES:
            ax1.loglog([r["text_bytes"]], [r[stage]["peak_rss_tree"]], "x", color=colors[stage], ms=9)
            ax2.loglog([r["text_bytes"]], [r[stage]["seconds"]], "x", color=colors[stage], ms=9)
    ax1.axhline(24 * GB, color="gray", lw=0.8)
    ax1.text(grid[0], 24 * GB * 1.1, "24 GB", color="gray")
    for ax, yl in ((ax1, "peak RSS (bytes, process tree)"), (ax2, "wall time (s), 2 workers")):
        ax.set_xlabel("corpus text (bytes)")
        ax.set_ylabel(yl)
        ax.grid(True, which="both", lw=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("dwstok stages on synthetic corpora (o: measured, x: real train split; lines: fits, "
                 "pieces from the real Heaps fit)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _mb(x):
    return f"{x / 1e6:,.0f} MB"


def _gb(x):
    return f"{x / 1e9:,.1f} GB"


def _dur(s):
    return f"{s:,.0f} s" if s < 3600 else f"{s / 3600:,.1f} h"


def markdown(res: dict) -> str:
    rows, f, m = res["rows"], res["fits"], res["model"]
    out = [f"# Scale simulation (issue 18), {res['time']}", "",
           f"`{res['command']}` at commit {res['commit']}; config {res['config']}, `--workers {res['workers']}`; "
           f"load average at start {res['load_start']:.1f}, at end {res.get('load_end') or 0:.1f} (2 cores shared with other jobs: "
           "wall times are noisy, RSS is not).", "",
           "## The generator's fit (bench/scale_corpus.py)", "",
           f"- Real train split: {m['bytes'] / 1e6:.0f} MB, {m['tokens']:,} pieces, {m['unique_pieces']:,} unique; "
           f"Heaps fit over prefixes from 1/8 of the documents on: unique = {m['heaps_fit']['k']:.3f} x bytes^"
           f"{m['heaps_fit']['beta']:.3f}.",
           f"- Zipf (count ~ rank^-s, ranks 10 .. last piece seen 5 times): s = {m['zipf_real']['zipf_s']:.3f}; "
           f"pieces seen once {100 * m['zipf_real']['once']:.1f}%.",
           f"- {m['shape_classes']} shape classes, {m['populations']} (group, class) populations; per-group tail "
           "(scale of the once-seen mass, Lomax exponent a) fitted, from 1x to 25x its real size, to the group's own "
           "Heaps growth scaled at each size by one factor so that the union over groups (the sum less the expected "
           "overlap, pieces in several groups) follows the split's fit:", "",
           "| group | real tokens | real unique | Heaps beta | tail scale | a | target 1x..25x | model 1x..25x |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for g, c in m["calibration"]["groups"].items():
        h = m["heaps_groups"][g]
        out.append(f"| {g} | {h['tokens']:,} | {h['unique'][-1]:,} | {c['beta']:.3f} | {c['tail_scale']:.2f} | "
                   f"{c['a']:.3f} | {', '.join(f'{v:,}' for v in c['target'])} | {', '.join(f'{v:,}' for v in c['model'])} |")
    cal = m["calibration"]
    out += ["", f"Groups under 50k tokens use a = {cal['a_other_groups']:.3f} (token-weighted mean). Union over groups, "
            f"1x..25x: target {', '.join(f'{v:,}' for v in cal['union_target'])}; model "
            f"{', '.join(f'{v:,}' for v in cal['union_model'])}.", ""]
    if res.get("heaps_curves"):
        out += ["## Heaps check: unique pieces in prefixes (bench/scale_corpus.py measure)", "",
                "| corpus | prefix | unique pieces | real fit predicts | ratio |", "| --- | --- | --- | --- | --- |"]
        hk, hb = m["heaps_fit"]["k"], m["heaps_fit"]["beta"]
        for name, pts in res["heaps_curves"].items():
            for p in pts:
                pred = hk * p["bytes"] ** hb
                out.append(f"| {name} | {_mb(p['bytes'])} | {p['unique']:,} | {pred:,.0f} | {p['unique'] / pred:.3f} |")
        out += ["", "Inside one synthetic corpus, small prefixes hold more unique pieces than the real split's: pieces "
                "are drawn independently, so the head is seen sooner than in real, bursty text. The calibration covers "
                "1x-25x the real size, where the full corpora below are compared with the fit.", ""]
    out += ["## Measured", "",
            "| corpus | text | unique pieces | real fit predicts | Zipf s | once | pretokenize | count | train | "
            "count mc2 | train mc2 | kept mc2 |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    hk, hb = m["heaps_fit"]["k"], m["heaps_fit"]["beta"]
    for r in rows:
        cells = []
        for s in ("pretokenize", "count", "train", "count_mc2", "train_mc2"):
            cells.append(f"{_mb(r[s]['peak_rss_tree'])}, {r[s]['seconds']:.0f} s" if s in r else "-")
        kept = f"{100 * r['train_mc2_kept']:.1f}%" if "train_mc2_kept" in r else "-"
        out.append(f"| {r['label']} | {_mb(r['text_bytes'])} | {r['unique_pieces']:,} | {hk * r['text_bytes'] ** hb:,.0f} | "
                   f"{r['zipf']['zipf_s']:.3f} | {100 * r['zipf']['once']:.1f}% | {' | '.join(cells)} | {kept} |")
    out += ["", "Each cell: peak RSS of the process tree (psutil, 50 ms), wall time. GNU time's maximum for the largest "
            "single process is in the JSON (`peak_rss_process`).", ""]
    if "train" in f:
        out += ["## Fits (synthetic sizes)", ""]
        if "heaps_sim" in f:
            out.append(f"- Heaps on the synthetic corpora: unique = {f['heaps_sim']['k']:.3f} x bytes^{f['heaps_sim']['beta']:.3f} "
                       f"(real: {hb:.3f}).")
        for s in ("count", "train", "count_mc2", "train_mc2"):
            if s in f:
                per = (f"{f[s]['wall_per_byte'] * GB:,.0f} s per GB" if "wall_per_byte" in f[s]
                       else f"{f[s]['wall_per_piece'] * 1e6:,.1f} s per M kept pieces")
                extra = (f"; kept at the largest size: {100 * f[s]['kept_fraction']:.1f}%"
                         if f[s].get("kept_fraction", 1.0) < 1.0 else "")
                out.append(f"- {s}: peak RSS = {_mb(f[s]['base'])} + {f[s]['bytes_per_piece']:,.0f} B x kept pieces; "
                           f"wall = {f[s]['wall_base']:,.0f} s + {per}{extra}.")
        out.append(f"- pretokenize: peak RSS at most {_mb(f['pretokenize']['peak_rss_max'])} (per shard, not per corpus); "
                   f"wall = {f['pretokenize']['wall_base']:,.0f} s + {f['pretokenize']['wall_per_byte'] * GB:,.0f} s per GB.")
        out.append("")
    ex = res.get("extrapolation")
    if ex:
        out += ["## Extrapolation", "",
                "Unique pieces from the real split's Heaps fit; peak RSS and wall from the lines above (min_count 2 "
                "keeps the fraction measured at the largest synthetic size; that fraction fell with size here, so this "
                "overstates what is kept). Wall times are for this machine's 2 shared cores at the load above: read them "
                "as ratios. Ray: pretokenize is a map over shards and count's partitions reduce as executor tasks, so "
                "both divide by the nodes (a lower bound for count: its split pass and the assembled table stay on the "
                "driver, so count's RAM on the head node does not shrink); **train runs on one node**: its RAM and time "
                "do not change with the cluster, and the head node needs the larger of count's and train's RAM.", "",
                "| corpus | setting | unique pieces | kept | pretokenize RSS | count RSS | train RSS | one machine needs | "
                "pretokenize | count | train | 32 nodes: pretokenize, count, train |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for size, by in ex["sizes"].items():
            for setting, r in by.items():
                need = max(r["count_rss"], r["train_rss"], r["pretokenize_rss"])
                ray = r["ray"]["32"]
                out.append(f"| {size} | {setting} | {r['unique_pieces'] / 1e6:,.1f} M | {r['kept_pieces'] / 1e6:,.1f} M | "
                           f"{_gb(r['pretokenize_rss'])} | {_gb(r['count_rss'])} | {_gb(r['train_rss'])} | {_gb(need)} | "
                           f"{_dur(r['pretokenize_s'])} | {_dur(r['count_s'])} | {_dur(r['train_s'])} | "
                           f"{_dur(ray['pretokenize_s'])}, {_dur(ray['count_s'])}, {_dur(ray['train_s'])} |")
        out.append("")
        if "heaps_sim" in f:
            hs = f["heaps_sim"]
            out.append("- With the synthetic corpora's own Heaps fit instead: "
                       + ", ".join(f"{hs['k'] * (float(sz.split()[0]) * GB) ** hs['beta'] / 1e6:,.1f} M unique pieces at {sz}"
                                   for sz in ex["sizes"]) + ".")
        from stages.count_partitions import MAX_AUTO_PARTITIONS, PART_BYTES

        big = max((r for r in rows if r["label"] != "real"), key=lambda r: r["text_bytes"])
        ratio = big["pretokenize"]["output_bytes"] / big["text_bytes"]
        parts = ", ".join(f"{_mb(ratio * float(sz.split()[0]) * GB / MAX_AUTO_PARTITIONS)} at {sz}" for sz in ex["sizes"])
        out.append(f"- count's partitions: pretokenize writes {ratio:.3f} bytes per byte of text here, and `count.partitions: 0` "
                   f"picks one per {PART_BYTES >> 20} MB of it but at most {MAX_AUTO_PARTITIONS}, so above "
                   f"{_gb(MAX_AUTO_PARTITIONS * PART_BYTES / ratio)} of text each partition grows with the corpus ({parts}); "
                   "the lines above were measured below that cap. Set `count.partitions` for such a corpus.")
        for setting, r in ex["fits_in_ram"].items():
            out.append(f"- Largest corpus in {_gb(ex['ram'])}, {setting}: {r['unique_pieces'] / 1e6:,.1f} M unique pieces "
                       f"-> about {_gb(r['corpus_bytes'])} of text ({r['binding']} binds).")
        out.append("")
    out += ["![peak RSS and wall time per stage](" + Path(res["plot"]).name + ")", ""]
    return "\n".join(out)


def finish(res: dict, out: Path) -> None:
    """Fits, extrapolation, JSON, markdown and plot from the measured rows."""
    for r in res["rows"]:
        if "train_mc2" in r:
            r["train_mc2_kept"] = r["count_mc2"]["unique_pieces"] / r["count_mc2"]["unique_pieces_before"]
    res["fits"] = fits(res["rows"], res["model"], res["min_counts"])
    res["extrapolation"] = extrapolate(res["fits"])
    res["plot"] = str(out.with_suffix(".png"))
    if len([r for r in res["rows"] if r["label"] != "real"]) >= 2:
        plot(res["rows"], res["fits"], out.with_suffix(".png"))
    out.with_suffix(".json").write_text(json.dumps(res, indent=1, default=float) + "\n")
    out.with_suffix(".md").write_text(markdown(res))
    print(f"wrote {out}.json, .md, .png", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="0.2,1", help="synthetic corpus sizes in GB of text")
    ap.add_argument("--config", default="configs/32.3.yaml")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--min-counts", default="1,2", help="count.min_count settings (1 = off)")
    ap.add_argument("--workdir", default=str(ROOT / "work" / "scale"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--real", action=argparse.BooleanOptionalAction, default=True, help="also run the real train split")
    ap.add_argument("--heaps-curves", default="0.2,1", help="sizes whose prefix Heaps curve is measured (GB)")
    ap.add_argument("--keep", action="store_true", help="keep corpora and workdirs")
    ap.add_argument("--render", type=Path, nargs="+",
                    help="only redo fits, markdown and plot from result JSON(s); several runs' rows are joined "
                         "(sorted by size) into a new result named after the first")
    args = ap.parse_args()
    if args.render:
        runs = [json.loads(p.read_text()) for p in args.render]
        res = runs[0]
        if len(runs) > 1:
            res["command"] = " + ".join(r["command"] for r in runs)
            res["commit"] = ", ".join(dict.fromkeys(r["commit"] for r in runs))
            res["load_end"] = runs[-1].get("load_end")
            res["rows"] = sorted([row for r in runs for row in r["rows"]], key=lambda row: (row["label"] != "real", row["text_bytes"]))
            for r in runs[1:]:
                res["heaps_curves"].update(r.get("heaps_curves", {}))
                res["generated"] = res.get("generated", []) + r.get("generated", [])
            res["time"] = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
            out = ROOT / "bench" / "results" / f"scale-{res['time']}"
        else:
            out = args.render[0].with_suffix("")
        finish(res, out)
        return
    args.config = str((ROOT / args.config).resolve())
    args.min_counts = [int(x) for x in args.min_counts.split(",")]
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    train = SHARED / "corpus" / "train.parquet"
    model_path = work / "model"
    # the cached model is reused while the generator's code and the train split are unchanged
    stamp_of = {"generator": hashlib.sha256(Path(scale_corpus.__file__).read_bytes()).hexdigest()[:16],
                "train": [train.stat().st_size, train.stat().st_mtime_ns]}
    cached = json.loads(model_path.with_suffix(".json").read_text()) if model_path.with_suffix(".json").exists() else {}
    if "calibration" not in cached or cached.get("stamp") != stamp_of:
        print("fitting the generator to", train, flush=True)
        for old in work.glob("synthetic-*.parquet"):  # drawn from the previous model
            old.unlink()
        scale_corpus.fit(train, model_path)
        cached = json.loads(model_path.with_suffix(".json").read_text())
        cached["stamp"] = stamp_of
        model_path.with_suffix(".json").write_text(json.dumps(cached, indent=1) + "\n")
    model = cached
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    res = {"time": stamp, "command": "python bench/scale_sim.py " + " ".join(sys.argv[1:]),
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip(),
           "config": os.path.relpath(args.config, ROOT), "workers": args.workers, "load_start": os.getloadavg()[0],
           "model": model, "min_counts": args.min_counts, "rows": [], "generated": [], "heaps_curves": {}}
    out = ROOT / "bench" / "results" / f"scale-{stamp}"
    partial = out.with_suffix(".partial.json")
    curves = {float(x) for x in args.heaps_curves.split(",") if x}
    if args.real:
        res["rows"].append(run_size("real", train, model["bytes"], args, work))
        res["heaps_curves"]["real"] = [p for p in model["heaps_real"][7::8]]
        partial.write_text(json.dumps(res, indent=1, default=float) + "\n")
    for size in [float(s) for s in args.sizes.split(",")]:
        corpus = work / f"synthetic-{size:g}GB.parquet"
        if not corpus.exists():
            g = scale_corpus.generate(model_path, int(size * GB), corpus, seed=args.seed)
            res["generated"].append(g)
            print(f"generated {corpus.name}: {g['bytes'] / 1e6:.0f} MB in {g['seconds']} s", flush=True)
        text_bytes = int(sum(pq_text_bytes(corpus)))
        if size in curves:
            pts = scale_corpus.measure(corpus)
            res["heaps_curves"][f"synthetic {size:g} GB"] = pts[: -1 : max(1, int(size * 8))] + pts[-1:]
        row = run_size(f"{size:g} GB", corpus, text_bytes, args, work)
        res["rows"].append(row)
        res["load_end"] = os.getloadavg()[0]
        partial.write_text(json.dumps(res, indent=1, default=float) + "\n")
        if not args.keep:
            corpus.unlink()
    finish(res, out)
    partial.unlink()


def pq_text_bytes(path: Path):
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)
    for i in range(f.metadata.num_row_groups):
        t = f.read_row_group(i, columns=["text"]).column("text")
        yield pc.sum(pc.binary_length(t)).as_py()


if __name__ == "__main__":
    main()
