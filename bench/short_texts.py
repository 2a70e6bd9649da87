"""Time per call on short texts: dwstok side by side with fastokens and tiktoken.

A chat message, a title, a sentence a data loader encodes one at a time: on texts this
short, what a call costs around the encoding (argument passing, arrays, the list) is
most of it. Texts: prefixes of train-split documents, cut at a space (or at a character
for text without spaces) near ``--chars`` characters, ``--per-length`` of each length
from every language group in turn. Every encoder uses o200k_base, and the ids are
checked equal.

The ``-batch`` cases encode each length's texts in one ``encode_batch`` call on one
thread, timed per text. Each case runs in a fresh process pinned to one CPU: load, one pass over the texts (so
that every encoder has met them; a steady state, as in a long-running service), then
``--rounds`` rounds, each timing a pass over each length's texts. Per length, a
process reports its fastest round (the one least hit by other load on the machine) in
microseconds a call; processes are repeated (``--repeats``, interleaved) and the
median taken.

    .venv/bin/python bench/short_texts.py                       # bench/results/short-texts-<time>.json/.md
    .venv/bin/python bench/short_texts.py --baseline /tmp/base  # that checkout's dwstok too (@base)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from encode import RANKS, tiktoken_encoding  # noqa: E402  (bench/ is on sys.path when run as a script)
from paths import ROOT, SHARED  # noqa: E402
CASES = ("dwstok-list", "dwstok-numpy", "fastokens-list", "tiktoken-list", "dwstok-batch", "fastokens-batch")
# ``-batch``: each length's texts as one ``encode_batch`` call on one thread (fastokens:
# ``[e.ids for e in encode_batch]``), timed per text
BASE = "@base"


def make_texts(chars: list[int], per_length: int) -> dict[int, list[str]]:
    """``{length: texts}``: document prefixes of about ``length`` characters, taken from
    the language groups in turn (deterministic: the first documents of each)."""
    import pyarrow.parquet as pq

    t = pq.read_table(SHARED / "corpus" / "train.parquet", columns=["text", "lang"])
    by_lang: dict[str, list[str]] = {}
    for text, lang in zip(t.column("text").to_pylist(), t.column("lang").to_pylist()):
        if len(by_lang.setdefault(lang, [])) < per_length:
            by_lang[lang].append(text)
    langs = sorted(by_lang)
    out: dict[int, list[str]] = {}
    for n in chars:
        texts = []
        for i in range(per_length):
            doc = by_lang[langs[i % len(langs)]][i // len(langs) % len(by_lang[langs[i % len(langs)]])]
            cut = doc.rfind(" ", 0, n + 1)
            texts.append(doc[: cut if cut > n // 2 else n])
        out[n] = texts
    return out


def _runner(case: str):
    encoder, mode = case.split("@")[0].split("-")
    if encoder == "dwstok":
        from dwstok import Tokenizer

        from dwstok import kernel_cache

        kernel_cache.wait()  # the kernels, not the HF bridge that stands in while they compile
        tok = Tokenizer.from_tiktoken(RANKS, pattern="o200k", special_tokens={})
        tok.encode("warm up " * 100)
        assert tok._native is not None, "dwstok is not on its kernels"
        if mode == "numpy":
            return lambda t: tok.encode_to_numpy(t).tolist(), tok.encode_to_numpy
        if mode == "batch":
            return tok.encode, lambda ts: tok.encode_batch(ts, num_threads=1)
        return tok.encode, tok.encode
    if encoder == "fastokens":
        import fastokens

        ft = fastokens.Tokenizer.from_tiktoken(str(RANKS), encoding="o200k_base")
        f = lambda t: ft.encode(t, split_special_tokens=True).ids  # noqa: E731
        if mode == "batch":
            return f, lambda ts: [e.ids for e in ft.encode_batch(ts, split_special_tokens=True)]
        return f, f
    enc = tiktoken_encoding(RANKS)
    return enc.encode_ordinary, enc.encode_ordinary


def worker(case: str, texts_path: Path, rounds: int) -> dict:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    texts = {int(k): v for k, v in json.loads(texts_path.read_text()).items()}
    as_list, call = _runner(case)
    batch = case.split("@")[0].endswith("-batch")
    ids = {n: call(ts) if batch else [as_list(t) for t in ts] for n, ts in texts.items()}  # the first pass
    best = {n: float("inf") for n in texts}
    for _ in range(rounds):
        for n, ts in texts.items():
            c = time.perf_counter()
            if batch:
                call(ts)
            else:
                for t in ts:
                    call(t)
            best[n] = min(best[n], (time.perf_counter() - c) / len(ts))
    return {"us": {n: best[n] * 1e6 for n in texts}, "tokens": {n: sum(map(len, v)) for n, v in ids.items()},
            "ids_sha": {n: hashlib.sha256(json.dumps(v).encode()).hexdigest() for n, v in ids.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chars", type=int, nargs="*", default=[8, 32, 128, 512])
    ap.add_argument("--per-length", type=int, default=200, help="texts of each length")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="a checkout whose dwstok runs the dwstok cases again (@base)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--texts", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.texts, args.rounds)))
        return
    cases = list(CASES)
    if args.baseline:
        cases = [c for case in CASES for c in ((case, case + BASE) if case.startswith("dwstok") else (case,))]
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"short-texts-{time.strftime('%Y%m%d-%H%M%S')}"
    texts_path = stem.with_suffix(".texts.json")
    texts = make_texts(args.chars, args.per_length)
    texts_path.write_text(json.dumps(texts))
    meta = {"loadavg_start": os.getloadavg(), "python": sys.version.split()[0], "rounds": args.rounds,
            "repeats": args.repeats, "per_length": args.per_length, "baseline": str(args.baseline) if args.baseline else None,
            "bytes": {n: sum(len(t.encode()) for t in ts) / len(ts) for n, ts in texts.items()}}
    runs: dict[str, list[dict]] = {c: [] for c in cases}
    try:
        for _ in range(args.repeats):  # interleaved: drifting load hits every case alike
            for case in cases:
                env = dict(os.environ)
                if case.endswith(BASE):
                    env["PYTHONPATH"] = str(args.baseline.resolve())
                p = subprocess.run([sys.executable, __file__, "--worker", case, "--texts", str(texts_path), "--rounds", str(args.rounds)],
                                   capture_output=True, text=True, env=env, check=False)
                if p.returncode != 0:
                    print(f"{case}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                    continue
                runs[case].append(json.loads(p.stdout.strip().splitlines()[-1]))
    finally:
        texts_path.unlink()
    meta["loadavg_end"] = os.getloadavg()
    us = {c: {n: statistics.median(r["us"][str(n)] for r in runs[c]) for n in args.chars} for c in cases if runs[c]}
    tokens = {c: runs[c][0]["tokens"] for c in cases if runs[c]}
    sha = {c: runs[c][0]["ids_sha"] for c in cases if runs[c]}
    mismatch = [c for c in sha if sha[c] != sha["tiktoken-list"]]
    lines = [f"{args.per_length} texts a length from the train split, o200k_base, one CPU, second pass, fastest of {args.rounds} rounds,"
             f" median of {args.repeats} processes; load {meta['loadavg_start'][0]:.2f} -> {meta['loadavg_end'][0]:.2f}", "",
             "| case | " + " | ".join(f"{n} chars ({meta['bytes'][n]:.0f} B) us" for n in args.chars) + " | " + " | ".join(f"{n}: vs fastokens" for n in args.chars) + " |",
             "| --- | " + " | ".join(["---:"] * 2 * len(args.chars)) + " |"]
    for c in us:
        peer = "fastokens-batch" if c.split("@")[0].endswith("-batch") else "fastokens-list"  # like for like
        ratios = [us[peer][n] / us[c][n] for n in args.chars] if peer in us else []
        lines.append(f"| {c} | " + " | ".join(f"{us[c][n]:.2f}" for n in args.chars) + " | " + " | ".join(f"{r:.2f}x" for r in ratios) + " |")
    lines += ["", "vs fastokens: its time (a batch case: its batch's) over the case's (above 1: the case is faster). Ids equal to tiktoken's: "
              + ("yes" if not mismatch else f"NO for {mismatch}")]
    print("\n".join(lines))
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "us": us, "tokens": tokens, "runs": runs}, indent=1) + "\n")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {stem}.json and .md")
    if mismatch:
        sys.exit(1)


if __name__ == "__main__":
    main()
