"""Encoder speed per language group against fastokens and tiktoken, first pass, fresh processes.

The text: a deterministic sample of train.parquet, up to ``--group-kb`` of documents per
language group (documents drawn in a seeded random order; a document over
``--doc-kb`` is cut to that, at a character boundary). Each case runs in a fresh
process: load the o200k rank file (as bench/encode.py does), warm up on the first MB of
dev.parquet (disjoint from train), then encode the sample once:

- per-document cases take the documents in one seeded shuffle of all groups, timing each
  call and summing the time by group;
- batch cases take one call per group, groups in a fixed order.

One-thread cases are timed in CPU time of the process (all its threads), two-thread
cases in wall time. Repeats are interleaved and every figure is a median over them;
only ratios within one run mean anything on a shared machine.

    .venv/bin/python bench/encode_groups.py --repeats 3   # table + bench/results/encode-groups-<time>.json
    .venv/bin/python bench/encode_groups.py --only dwstok fastokens --groups zh ja pt
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
SEED = 17

# name: (per document or batch, threads, what)
CASES = {
    "dwstok": ("doc", 1, "dwstok encode_to_numpy, per document"),
    "fastokens": ("doc", 1, "fastokens encode(...).ids, per document"),
    "tiktoken": ("doc", 1, "tiktoken encode_ordinary, per document"),
    "dwstok-scan": ("doc", 1, "dwstok native scanner bounds() alone, per document"),
    "dwstok-batch": ("batch", 1, "dwstok encode_utf8_batch(num_threads=1), one call a group"),
    "fastokens-flat": ("batch", 1, "fastokens encode_batch_flat, one thread, one call a group"),
    "dwstok-batch2": ("batch", 2, "dwstok encode_utf8_batch(num_threads=2), one call a group"),
    "fastokens-flat2": ("batch", 2, "fastokens encode_batch_flat, two threads, one call a group"),
}
PEERS = {"dwstok": "fastokens", "dwstok-batch": "fastokens-flat", "dwstok-batch2": "fastokens-flat2"}


def _cut(text: str, limit: int) -> str:
    b = text.encode()
    if len(b) <= limit:
        return text
    return b[:limit].decode("utf-8", errors="ignore")


def sample(group_kb: int, doc_kb: int, groups: list[str] | None = None) -> list[tuple[str, str]]:
    """``[(lang, text)]``: the measured documents, in the per-document order."""
    import numpy as np
    import pyarrow.parquet as pq

    t = pq.read_table(SHARED / "corpus" / "train.parquet", columns=["text", "lang"])
    texts, langs = t.column("text").to_pylist(), t.column("lang").to_pylist()
    by_lang: dict[str, list[int]] = {}
    for i, lang in enumerate(langs):
        by_lang.setdefault(lang, []).append(i)
    rng = np.random.default_rng(SEED)
    docs = []
    for lang in sorted(by_lang):
        if groups and lang not in groups:
            continue
        idx = by_lang[lang]
        if sum(len(texts[i].encode()) for i in idx) < 20_000:
            continue  # too little text for a figure
        got = 0
        for i in rng.permutation(idx):
            text = _cut(texts[i], doc_kb * 1000)
            docs.append((lang, text))
            got += len(text.encode())
            if got >= group_kb * 1000:
                break
    order = rng.permutation(len(docs))
    return [docs[i] for i in order]


def _warm_texts() -> list[str]:
    import pyarrow.parquet as pq

    out, n = [], 0
    for text in pq.read_table(SHARED / "corpus" / "dev.parquet", columns=["text"]).column("text").to_pylist():
        out.append(text)
        n += len(text.encode())
        if n >= 1_000_000:
            break
    return out


def _encoder(case: str):
    """``(per-document fn, batch fn)`` for a case; the one it does not use may be None."""
    threads = CASES[case][1]
    if case.startswith("fastokens"):
        import fastokens

        ft = fastokens.Tokenizer.from_tiktoken(str(RANKS), encoding="o200k_base")
        return (
            lambda t: len(ft.encode(t, split_special_tokens=True).ids),
            lambda ts: len(ft.encode_batch_flat(ts, split_special_tokens=True)[0]) // 4,
        )
    if case == "tiktoken":
        from encode import tiktoken_encoding

        enc = tiktoken_encoding(RANKS)
        return (lambda t: len(enc.encode_ordinary(t)), None)
    import numpy as np

    if case == "dwstok-scan":
        from dwstok.scanner import get_scanner

        sc = get_scanner("o200k")
        return (lambda t: sc.bounds(np.frombuffer(t.encode(), np.uint8)).size - 1, None)
    from dwstok import Tokenizer

    tok = Tokenizer.from_tiktoken(RANKS, pattern="o200k", special_tokens=SPECIALS)

    def batch(ts):
        bufs = [t.encode() for t in ts]
        offsets = np.zeros(len(bufs) + 1, np.int64)
        np.cumsum([len(b) for b in bufs], out=offsets[1:])
        ids, _ = tok.encode_utf8_batch(np.frombuffer(b"".join(bufs), np.uint8), offsets, num_threads=threads)
        return ids.size

    return (lambda t: tok.encode_to_numpy(t).size, batch)


def worker(case: str, group_kb: int, doc_kb: int, groups: list[str] | None) -> dict:
    """Run one case in this process; ``{lang: [bytes, count, seconds]}``."""
    kind, threads, _ = CASES[case]
    if threads == 1 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    docs = sample(group_kb, doc_kb, groups)
    warm = _warm_texts()
    one, batch = _encoder(case)
    # One thread: CPU time of the process (all its threads), which other processes on a
    # shared machine do not inflate; two threads: wall time.
    clock = time.process_time if threads == 1 else time.perf_counter
    out: dict[str, list] = {}
    if kind == "doc":
        for t in warm:
            one(t)
        for lang, text in docs:
            t0 = clock()
            c = one(text)
            dt = clock() - t0
            r = out.setdefault(lang, [0, 0, 0.0])
            r[0] += len(text.encode())
            r[1] += c
            r[2] += dt
    else:
        batch(warm)
        by_lang: dict[str, list[str]] = {}
        for lang, text in docs:
            by_lang.setdefault(lang, []).append(text)
        for lang in sorted(by_lang):
            ts = by_lang[lang]
            t0 = clock()
            c = batch(ts)
            dt = clock() - t0
            out[lang] = [sum(len(t.encode()) for t in ts), c, dt]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", nargs="*", choices=list(CASES))
    ap.add_argument("--groups", nargs="*", help="language groups to sample (default: every group with 20 KB)")
    ap.add_argument("--group-kb", type=int, default=200)
    ap.add_argument("--doc-kb", type=int, default=100)
    ap.add_argument("--label", default="", help="a note stored with the results (e.g. the commit measured)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.group_kb, args.doc_kb, args.groups)))
        return
    cases = args.only or list(CASES)
    runs: dict[str, list[dict]] = {c: [] for c in cases}
    for _ in range(args.repeats):  # interleaved, so drifting load hits every case alike
        for case in cases:
            threads = str(CASES[case][1])
            env = dict(os.environ, RAYON_NUM_THREADS=threads, NUMBA_NUM_THREADS=threads, FASTOKENS_BPE_THREADS=threads)
            cmd = [sys.executable, __file__, "--worker", case, "--group-kb", str(args.group_kb), "--doc-kb", str(args.doc_kb)]
            if args.groups:
                cmd += ["--groups", *args.groups]
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            if p.returncode != 0:
                print(f"{case}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                continue
            runs[case].append(json.loads(p.stdout.strip().splitlines()[-1]))
    cases = [c for c in cases if runs[c]]
    langs = sorted(set().union(*(r.keys() for c in cases for r in runs[c])))
    table: dict[str, dict[str, float]] = {c: {} for c in cases}  # case -> lang -> MB/s (median)
    for c in cases:
        for lang in langs + ["all"]:
            rates = []
            for r in runs[c]:
                if lang == "all":
                    nb, dt = sum(v[0] for v in r.values()), sum(v[2] for v in r.values())
                else:
                    nb, dt = r[lang][0], r[lang][2]
                rates.append(nb / dt / 1e6)
            table[c][lang] = statistics.median(rates)
    nbytes = {lang: runs[cases[0]][0][lang][0] for lang in langs}
    ratios = {
        mine: {lang: table[mine][lang] / table[peer][lang] for lang in langs + ["all"]}
        for mine, peer in PEERS.items()
        if mine in table and peer in table
    }
    head = f"{'group':6} {'KB':>6} " + " ".join(f"{c:>15}" for c in cases) + "".join(f" {m + '/' + PEERS[m]:>30}" for m in ratios)
    print(f"MB/s (1 thread: per CPU second; 2 threads: wall), median of {args.repeats} fresh-process first passes; load {os.getloadavg()[0]:.2f}")
    print(head)
    for lang in langs + ["all"]:
        kb = sum(nbytes.values()) if lang == "all" else nbytes[lang]
        line = f"{lang:6} {kb / 1000:6.0f} " + " ".join(f"{table[c][lang]:15.1f}" for c in cases)
        line += "".join(f" {ratios[m][lang]:29.2f}x" for m in ratios)
        print(line)
    for m, r in ratios.items():
        worst = min(langs, key=r.get)
        print(f"{m}: worst group {worst} {r[worst]:.2f}x, all {r['all']:.2f}x")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"encode-groups-{time.strftime('%Y%m%d-%H%M%S')}.json"
    meta = {
        "label": args.label, "cpu_count": os.cpu_count(), "loadavg": os.getloadavg(), "repeats": args.repeats,
        "group_kb": args.group_kb, "doc_kb": args.doc_kb, "seed": SEED, "python": sys.version.split()[0],
    }
    doc = {"meta": meta, "bytes": nbytes, "MB_per_s": table, "ratios": ratios, "runs": runs}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
