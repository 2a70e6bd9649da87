"""Encode speed per language group: dwstok side by side with fastokens and tiktoken.

Text: a deterministic sample of the train split, about ``--group-kb`` KB of whole
documents per language group (groups with less than ``--min-group-kb`` in the split are
pooled as ``rare``), drawn from after the first 1 MB, which is the warm-up text. Every
encoder uses GPT-4o's o200k_base rank file (``--vocab N``: its first N ranks, a valid
rank file too), so all produce the same ids; the token counts are checked equal per group.

Modes (``encode`` per document, batches one per group):

- ``list``: dwstok ``encode``, fastokens ``encode(...).ids``, tiktoken ``encode_ordinary``;
- ``numpy``: dwstok ``encode_to_numpy`` (its peer: fastokens' per-document list call);
- ``batch@N``: lists from ``encode_batch`` (fastokens: ``[e.ids for e in encode_batch]``,
  tiktoken: ``encode_ordinary_batch``) on N threads;
- ``flat@N``: dwstok ``encode_utf8_batch``, fastokens ``encode_batch_flat`` on N threads.

Every case runs in a fresh process: load, warm up (JIT, allocators, caches) on the
warm-up text, then time the first pass over the groups, one after another, then a second
pass over them all: every piece seen before, as most pieces are deep into a long run
(the steady state of encoding a corpus; both encoders cache merged pieces). The second
pass reads copies of the texts, new str objects as a corpus's documents are: a str
passed to a PyO3 encoder before keeps its UTF-8 form, which it then need not make. Repeated
(``--repeats``, interleaved) and the median taken per group; the fastest process of each case,
and its system time (page faults too, in the JSON), show a ratio that a stall on fresh memory moved
(bench/first_touch.py). A case on N threads is
pinned to N CPUs before it imports anything (``--no-pin``: to none, so that a helper
thread, such as the one that clears a growing piece cache, finds a CPU of its own, as it
would on a user's machine); ``MB/s cpu`` counts all its threads.
fastokens runs its BPE in a pool of its own that ignores ``RAYON_NUM_THREADS`` (it reads
``FASTOKENS_BPE_THREADS``; both are set to N): unpinned, its ``encode_batch_flat`` used
300 ms of CPU in 167 ms of wall time on dev, two cores.

    .venv/bin/python bench/encode.py           # tables + bench/results/encode-<time>.json/.md
    .venv/bin/python bench/encode.py --quick --only list flat@2
    .venv/bin/python bench/encode.py --only dwstok-list fastokens-list --repeats 5
    .venv/bin/python bench/encode.py --vocab 32768 --only list batch@1   # DWSLMTok's vocab size
    .venv/bin/python bench/encode.py --baseline ../main   # main's dwstok too (dwstok-list@base ...)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from paths import ROOT, SHARED  # noqa: E402  (bench/ is on sys.path when run as a script)

RANKS = SHARED / "reftok" / "o200k_base.tiktoken"
SPECIALS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
WARM_BYTES = 1_000_000
SEED = 17


def _cases() -> dict[str, tuple[str, str, int]]:
    """name -> (mode, encoder, threads)."""
    cases = {
        "dwstok-list": ("list", "dwstok", 1),
        "fastokens-list": ("list", "fastokens", 1),
        "tiktoken-list": ("list", "tiktoken", 1),
        "dwstok-numpy": ("numpy", "dwstok", 1),
    }
    for n in (1, 2):
        for enc in ("dwstok", "fastokens", "tiktoken"):
            cases[f"{enc}-batch@{n}"] = (f"batch@{n}", enc, n)
        for enc in ("dwstok", "fastokens"):
            cases[f"{enc}-flat@{n}"] = (f"flat@{n}", enc, n)
    return cases


CASES = _cases()
BASE = "@base"  # a dwstok case run on --baseline's checkout instead


def _case(name: str) -> tuple[str, str, int]:
    mode, enc, threads = CASES[name.removesuffix(BASE)]
    return mode, enc + BASE if name.endswith(BASE) else enc, threads
MODES = list(dict.fromkeys(m for m, _, _ in CASES.values()))
# the fastokens case each dwstok mode is compared with
PEER = {m: ("fastokens-list" if m in ("list", "numpy") else f"fastokens-{m}") for m in MODES}


# ------------------------------------------------------------------ the text


def write_sample(path: Path, group_kb: int, min_group_kb: int) -> None:
    """Warm-up text and the per-group sample, as one Arrow file (``part`` = warm | sample)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    t = pq.read_table(SHARED / "corpus" / "train.parquet", columns=["text", "lang"])
    nbytes = pc.binary_length(pc.cast(t.column("text"), pa.binary())).to_numpy()
    lang = np.asarray(t.column("lang").to_pylist(), object)
    n_warm = int(np.searchsorted(np.cumsum(nbytes), WARM_BYTES)) + 1
    body = np.arange(n_warm, t.num_rows)
    totals = {g: int(nbytes[body][lang[body] == g].sum()) for g in sorted(set(lang[body]))}
    group = np.array([g if totals[g] >= min_group_kb * 1000 else "rare" for g in lang], object)
    budget = group_kb * 1000
    rows, groups = [], []
    rng = np.random.default_rng(SEED)
    for g in sorted(set(group[body]), key=lambda g: (g == "rare", g)):
        got = 0
        for i in rng.permutation(body[group[body] == g]):
            if got >= budget:
                break
            if nbytes[i] > budget // 2:  # whole documents, but none taking over its group
                continue
            rows.append(int(i))
            groups.append(g)
            got += int(nbytes[i])
    text = t.column("text")
    out = pa.table(
        {
            "part": ["warm"] * n_warm + ["sample"] * len(rows),
            "group": [""] * n_warm + groups,
            "text": pa.concat_arrays([text.slice(0, n_warm).combine_chunks(), text.take(rows).combine_chunks()]),
        }
    )
    feather.write_feather(out, path, compression="zstd")


def read_sample(path: Path) -> tuple[list[str], dict[str, list[str]]]:
    import pyarrow.feather as feather

    t = feather.read_table(path)
    warm, groups = [], {}
    for part, g, text in zip(*(t.column(c).to_pylist() for c in ("part", "group", "text"))):
        if part == "warm":
            warm.append(text)
        else:
            groups.setdefault(g, []).append(text)
    return warm, groups


# ------------------------------------------------------------------ one case, in its own process


def _pin(threads: int) -> None:
    """Run this process (and any thread it starts) on ``threads`` CPUs, the first it may use."""
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, set(cpus[:threads]))


def _specials(ranks: Path) -> dict[str, int]:
    """o200k's specials, or for a rank file cut to its first N ranks, one special at N."""
    if ranks == RANKS:
        return SPECIALS
    return {"<|endoftext|>": len(ranks.read_bytes().splitlines())}


def tiktoken_encoding(ranks: Path):
    """tiktoken's own encoder for a rank file (o200k_base, or its first N ranks) with
    GPT-4o's pattern, the peer every encode benchmark checks ids against."""
    import tiktoken
    import tiktoken.load

    from dwstok.patterns import PATTERNS

    return tiktoken.Encoding(
        "o200k_base", pat_str=PATTERNS["o200k"], mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(ranks)),
        special_tokens=_specials(ranks),
    )


def _runner(mode: str, encoder: str, threads: int, ranks: Path):
    """A function texts -> number of tokens, for one case."""
    import numpy as np

    if encoder == "dwstok":
        from dwstok import Tokenizer

        tok = Tokenizer.from_tiktoken(ranks, pattern="o200k", special_tokens=_specials(ranks))
        if mode == "list":
            return lambda ts: sum(len(tok.encode(t)) for t in ts)
        if mode == "numpy":
            return lambda ts: sum(tok.encode_to_numpy(t).size for t in ts)
        if mode.startswith("batch"):
            return lambda ts: sum(map(len, tok.encode_batch(ts, num_threads=threads)))

        def flat(ts):
            bufs = [t.encode() for t in ts]
            offsets = np.zeros(len(bufs) + 1, np.int64)
            np.cumsum([len(b) for b in bufs], out=offsets[1:])
            ids, _ = tok.encode_utf8_batch(np.frombuffer(b"".join(bufs), np.uint8), offsets, num_threads=threads)
            return ids.size

        return flat
    if encoder == "fastokens":
        import fastokens

        ft = fastokens.Tokenizer.from_tiktoken(str(ranks), encoding="o200k_base")
        if mode == "list":
            return lambda ts: sum(len(ft.encode(t, split_special_tokens=True).ids) for t in ts)
        if mode.startswith("batch"):
            return lambda ts: sum(len(e.ids) for e in ft.encode_batch(ts, split_special_tokens=True))

        def flat(ts):
            ids, offsets = ft.encode_batch_flat(ts, split_special_tokens=True)
            ids = np.frombuffer(ids, np.uint32)
            return ids.size

        return flat
    if encoder == "tiktoken":
        enc = tiktoken_encoding(ranks)
        if mode == "list":
            return lambda ts: sum(len(enc.encode_ordinary(t)) for t in ts)
        return lambda ts: sum(map(len, enc.encode_ordinary_batch(ts, num_threads=threads)))
    raise SystemExit(f"no runner for {encoder} {mode}")


class _GrowthClock:
    """Seconds dwstok's piece-cache pool spends making caches and growing them (clearing a
    new cache's memory, a slice at a time or at once, and moving the entries), summed over
    threads: where it falls, a group's ratio drops (on this VM, first touches of fresh
    memory are slow). The pool calls these through the ``dwstok.bpe`` module, so they are
    wrapped there. Nothing for other encoders."""

    def __init__(self, encoder: str):
        self.spans: list[float] = []
        if encoder != "dwstok":
            return
        from dwstok import bpe

        for owner, name in ((bpe, "new_cache"), (bpe, "grown_cache"), (bpe.NextCache, "advance")):
            setattr(owner, name, self._timed(getattr(owner, name)))

    def _timed(self, f):
        def timed(*args, **kw):
            t0 = time.perf_counter()
            try:
                return f(*args, **kw)
            finally:
                self.spans.append(time.perf_counter() - t0)

        return timed

    def seconds(self) -> float:
        return sum(self.spans)


def worker(case: str, sample: Path, ranks: Path) -> dict:
    """Run one case in this process; return its figures per group."""
    import resource

    mode, encoder, threads = _case(case)
    encoder = encoder.removesuffix(BASE)  # the same code; PYTHONPATH says which checkout
    if not os.environ.get("BENCH_NO_PIN"):
        _pin(threads)
    warm, groups = read_sample(sample)
    growth = _GrowthClock(encoder)
    run = _runner(mode, encoder, threads, ranks)
    run(warm)
    # The second pass gets new str objects with the same text: every piece seen before,
    # but every document new, as deep into a corpus run. The same objects again would
    # let fastokens and tiktoken skip converting them to UTF-8: PyO3 reads a str through
    # PyUnicode_AsUTF8AndSize, which keeps the UTF-8 in the str (about 8 of the 35 ms of
    # a second pass over the whole sample).
    fresh = {g: [t.encode().decode() for t in texts] for g, texts in groups.items()}
    passes, kernel = [], []
    for sample_texts in (groups, fresh):  # the first pass, then the second
        out = {}
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        for g, texts in sample_texts.items():
            t0, c0, g0 = time.perf_counter(), time.process_time(), growth.seconds()  # CPU time of all threads
            count = run(texts)
            out[g] = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "tokens": count,
                      "growth_s": growth.seconds() - g0}
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        # time in the kernel and page faults: first touches of fresh memory, which on a
        # VM whose host backs memory lazily can cost 20 ms a 2 MB page
        kernel.append({"sys_s": r1.ru_stime - r0.ru_stime, "minflt": r1.ru_minflt - r0.ru_minflt})
        passes.append(out)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"case": case, "groups": passes[0], "second": passes[1], "kernel": kernel, "peak_rss_mb": peak}


# ------------------------------------------------------------------ the driver


def _select(only: list[str] | None, threads: list[int], baseline: bool) -> list[str]:
    chosen = [c for c in CASES if not only or c in only or CASES[c][0] in only or CASES[c][1] in only]
    chosen = [c for c in chosen if CASES[c][2] in threads]
    # a dwstok mode needs its peer in the same run
    for c in list(chosen):
        mode, enc, _ = CASES[c]
        if enc == "dwstok" and PEER[mode] not in chosen:
            chosen.append(PEER[mode])
    if baseline:  # each right after its twin, so that drifting load hits both alike
        chosen = [x for c in chosen for x in ([c, c + BASE] if CASES[c][1] == "dwstok" else [c])]
    return chosen


def _summarize(
    cases: list[str], results: dict[str, list[dict]], group_bytes: dict[str, int], key: str = "groups"
) -> dict:
    """Medians per case and group, and dwstok/fastokens ratios, of the pass ``key``
    ("groups": the first, "second": the second)."""
    groups = list(group_bytes)
    which = 0 if key == "groups" else 1
    rows = {}
    for case in cases:
        runs = [{**r, "groups": r[key]} for r in results[case] if key in r]
        if not runs:
            continue
        wall = {g: statistics.median(r["groups"][g]["wall_s"] for r in runs) for g in groups}
        cpu = {g: statistics.median(r["groups"][g]["cpu_s"] for r in runs) for g in groups}
        total = sum(wall.values())
        growth = {g: statistics.median(r["groups"][g].get("growth_s", 0.0) for r in runs) for g in groups}
        rows[case] = {
            "mode": _case(case)[0], "encoder": _case(case)[1], "threads": _case(case)[2], "runs": len(runs),
            "tokens": {g: runs[0]["groups"][g]["tokens"] for g in groups},
            "wall_s": wall, "wall_s_all": total, "cpu_s": cpu, "cpu_s_all": sum(cpu.values()),
            "MB_per_s": {g: group_bytes[g] / wall[g] / 1e6 for g in groups},
            "MB_per_s_all": sum(group_bytes.values()) / total / 1e6,
            "MB_per_s_cpu_all": sum(group_bytes.values()) / sum(cpu.values()) / 1e6,
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            "wall_s_all_runs": [sum(r["groups"][g]["wall_s"] for g in groups) for r in runs],
            "sys_s_runs": [r["kernel"][which]["sys_s"] for r in runs],
            "minflt_runs": [r["kernel"][which]["minflt"] for r in runs],
            "growth_s": growth, "growth_s_all_runs": [sum(r["groups"][g].get("growth_s", 0.0) for g in groups) for r in runs],
        }
    ratios = {"wall": {}, "cpu": {}}
    for clock, table in ratios.items():
        for mode in MODES:
            for suffix in ("", BASE):
                dw, peer = rows.get(f"dwstok-{mode}{suffix}"), rows.get(PEER[mode])
                if dw and peer:
                    per = {g: peer[f"{clock}_s"][g] / dw[f"{clock}_s"][g] for g in groups}
                    worst = min(per, key=per.get)
                    table[mode + suffix] = {
                        "groups": per, "all": peer[f"{clock}_s_all"] / dw[f"{clock}_s_all"], "worst": [worst, per[worst]]
                    }
    return {"rows": rows, "ratios": ratios}


def _check_counts(rows: dict) -> list[str]:
    """Groups whose token count differs between encoders (all must give the same ids)."""
    bad = []
    ref = next(iter(rows.values()), None)
    for case, r in rows.items():
        for g, n in r["tokens"].items():
            if n != ref["tokens"][g]:
                bad.append(f"{g}: {case} gives {n} tokens, {next(iter(rows))} {ref['tokens'][g]}")
    return bad


def _tables(summary: dict, group_bytes: dict[str, int], meta: dict, which: str = "first pass") -> list[str]:
    """Markdown: the speed of every case on all the text, then dwstok/fastokens per group."""
    rows = summary["rows"]
    total = sum(group_bytes.values())
    lines = [
        f"{total / 1e6:.1f} MB of train in {len(group_bytes)} groups, vocab {meta['vocab']}, {which},"
        " fresh process per case,"
        f" median of {meta['repeats']}; load {meta['loadavg_start'][0]:.2f} -> {meta['loadavg_end'][0]:.2f}"
        f" on {meta['cpu_count']} CPUs" + ("" if meta.get("pinned", True) else ", cases not pinned to CPUs"),
        "",
        "| case | threads | MB/s | MB/s cpu | Mtok/s | vs fastokens | vs tiktoken | fastest process MB/s | vs fastokens' fastest | sys ms, median / max | peak RSS MB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for case, r in rows.items():
        mode = r["mode"]
        peer = rows.get(PEER[mode]) if case != PEER[mode] else None
        tik = rows.get(f"tiktoken-{mode}") or rows.get("tiktoken-list")
        vs = lambda p: f"{r['MB_per_s_all'] / p['MB_per_s_all']:.2f}x" if p else "-"  # noqa: E731
        fastest = min(r["wall_s_all_runs"])
        vs_fastest = f"{min(peer['wall_s_all_runs']) / fastest:.2f}x" if peer else "-"
        sys_ms = f"{1e3 * statistics.median(r['sys_s_runs']):.0f} / {1e3 * max(r['sys_s_runs']):.0f}"
        lines.append(
            f"| {case} | {r['threads']} | {r['MB_per_s_all']:.1f} | {r['MB_per_s_cpu_all']:.1f}"
            f" | {sum(r['tokens'].values()) / r['wall_s_all'] / 1e6:.2f} | {vs(peer)} | {vs(tik)}"
            f" | {total / fastest / 1e6:.1f} | {vs_fastest} | {sys_ms} | {r['peak_rss_mb']:.0f} |"
        )
    lines += _growth_lines(rows)
    for clock, ratios in summary["ratios"].items():
        if not ratios:
            continue
        modes = list(ratios)
        what = "wall time" if clock == "wall" else "CPU time of the process (all threads; less hit by other load)"
        lines += [
            "",
            f"dwstok / fastokens speed by {what}; numpy is against fastokens' per-document list call",
            "",
            "| group | KB | " + " | ".join(modes) + " |",
            "| --- | ---: | " + " | ".join("---:" for _ in modes) + " |",
        ]
        for g, nb in group_bytes.items():
            lines.append(f"| {g} | {nb / 1e3:.0f} | " + " | ".join(f"{ratios[m]['groups'][g]:.2f}" for m in modes) + " |")
        lines.append(f"| **all** | {total / 1e3:.0f} | " + " | ".join(f"**{ratios[m]['all']:.2f}**" for m in modes) + " |")
        lines.append("| worst | | " + " | ".join(f"{ratios[m]['worst'][1]:.2f} ({ratios[m]['worst'][0]})" for m in modes) + " |")
    return lines


def _growth_lines(rows: dict) -> list[str]:
    """Markdown: for each dwstok case, the time its piece-cache pool spent making and
    growing caches (see _GrowthClock), and the groups it fell in."""
    lines = []
    for case, r in rows.items():
        runs = r.get("growth_s_all_runs") or [0.0]
        if r["encoder"] != "dwstok" or max(runs) == 0:
            continue
        top = sorted(((s, g) for g, s in r["growth_s"].items() if s >= 5e-4), reverse=True)
        where = ", ".join(f"{g} {1e3 * s:.1f}" for s, g in top) or "none over 0.5 ms a group"
        lines.append(f"- {case}: {1e3 * statistics.median(runs):.1f} ms (median of processes) of"
                     f" {1e3 * r['wall_s_all']:.0f} ms; by group (medians, ms): {where}")
    if lines:
        lines = ["", "Time dwstok's piece-cache pool spent making caches and growing them (clearing a new"
                 " cache's memory, moving the entries), all threads:", ""] + lines
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="case names, modes (list numpy batch@1 flat@2 ...) or encoders")
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2], choices=[1, 2])
    ap.add_argument("--group-kb", type=int, default=220, help="sample size per language group")
    ap.add_argument("--min-group-kb", type=int, default=100, help="smaller groups are pooled as 'rare'")
    ap.add_argument("--quick", action="store_true", help="one repeat of 64 KB per group")
    ap.add_argument("--baseline", type=Path, help="a checkout whose dwstok runs every dwstok case again (@base), same run")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--sample", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--make-sample", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--ranks", type=Path, default=RANKS, help=argparse.SUPPRESS)
    ap.add_argument("--no-pin", action="store_true", help="do not pin a case on N threads to N CPUs")
    ap.add_argument("--vocab", type=int, help="cut o200k_base to its first N ranks (32768: DWSLMTok's size) for every encoder")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.sample, args.ranks)))
        return
    if args.make_sample:
        write_sample(args.make_sample, args.group_kb, args.min_group_kb)
        return
    if args.quick:
        args.repeats, args.group_kb = 1, 64
    unknown = set(args.only or ()) - set(CASES) - set(MODES) - {e for _, e, _ in CASES.values()}
    if unknown:
        ap.error(f"unknown --only {sorted(unknown)}; cases: {', '.join(CASES)}")
    cases = _select(args.only, args.threads, args.baseline is not None)
    meta = {"cpu_count": os.cpu_count(), "loadavg_start": os.getloadavg(), "python": sys.version.split()[0],
            "repeats": args.repeats, "group_kb": args.group_kb, "seed": SEED, "warm_bytes": WARM_BYTES,
            "vocab": args.vocab or "o200k_base", "baseline": str(args.baseline) if args.baseline else None,
            "pinned": not args.no_pin}
    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp) / "sample.arrow"
        # in a process of its own: reading the split takes 600 MB, which a worker forked
        # from this one would report as its peak RSS
        subprocess.run(
            [sys.executable, __file__, "--make-sample", str(sample), "--group-kb", str(args.group_kb),
             "--min-group-kb", str(args.min_group_kb)], check=True,
        )
        _, groups = read_sample(sample)
        ranks = RANKS
        if args.vocab:
            ranks = Path(tmp) / f"o200k-first-{args.vocab}.tiktoken"
            ranks.write_bytes(b"\n".join(RANKS.read_bytes().splitlines()[: args.vocab]) + b"\n")
        group_bytes = {g: sum(len(t.encode()) for t in ts) for g, ts in groups.items()}
        results: dict[str, list[dict]] = {c: [] for c in cases}
        for _ in range(args.repeats):  # interleaved, so drifting machine load hits every case alike
            for case in cases:
                n = str(_case(case)[2])
                env = dict(os.environ, RAYON_NUM_THREADS=n, NUMBA_NUM_THREADS=n, FASTOKENS_BPE_THREADS=n)
                if args.no_pin:
                    env["BENCH_NO_PIN"] = "1"
                if case.endswith(BASE):
                    env["PYTHONPATH"] = str(args.baseline.resolve())
                p = subprocess.run(
                    [sys.executable, __file__, "--worker", case, "--sample", str(sample), "--ranks", str(ranks)],
                    capture_output=True, text=True, env=env, check=False,
                )
                if p.returncode != 0:
                    print(f"{case}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                    continue
                results[case].append(json.loads(p.stdout.strip().splitlines()[-1]))
    meta["loadavg_end"] = os.getloadavg()
    summary = _summarize(cases, results, group_bytes)
    second = _summarize(cases, results, group_bytes, "second")
    bad = _check_counts(summary["rows"]) + _check_counts(second["rows"])
    lines = _tables(summary, group_bytes, meta)
    lines += ["", "## Second pass", ""] + _tables(second, group_bytes, meta, "second pass (every piece seen before; the texts as new str objects)")
    print("\n".join(lines))
    for name, s in (("first", summary), ("second", second)):
        for clock in ("wall", "cpu"):
            for mode, r in s["ratios"][clock].items():
                print(f"{name:6} {mode:8} {clock:4} dwstok/fastokens all {r['all']:.2f}x,"
                      f" worst group {r['worst'][0]} {r['worst'][1]:.2f}x")
        for mode in s["ratios"]["wall"]:
            # whole processes: the fastest (what stalls did not hit) and the median (a
            # stall counts where it lands; "all" above sums each group's median, which
            # leaves out stalls that land in a different group in each process)
            dw, peer = s["rows"][f"dwstok-{mode}"]["wall_s_all_runs"], s["rows"][PEER[mode.removesuffix(BASE)]]["wall_s_all_runs"]
            print(f"{name:6} {mode:8} processes dwstok/fastokens fastest {min(peer) / min(dw):.2f}x,"
                  f" median {statistics.median(peer) / statistics.median(dw):.2f}x")
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"encode-{time.strftime('%Y%m%d-%H%M%S')}"
    doc = {"meta": meta, "group_bytes": group_bytes, **summary, "second_pass": second, "count_mismatches": bad}
    stem.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {stem}.json and .md")
    if bad:
        print("token counts differ:\n  " + "\n  ".join(bad[:20]), file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
