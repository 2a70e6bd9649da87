"""Lists of ids from a whole batch at once, as a data loader asks for them: dwstok's
``encode_batch`` and per-document ``encode`` (lists kept) against fastokens', on the
second pass (every piece seen before), in one process per encoder build.

bench/encode.py times one call per language group (about 15 documents); here one call
gets every document of its sample (about 2,100, 6 MB), so the lists made in one call
number in the thousands, as in a training run's batches. Each case runs ``--repeats``
times, alternating with fastokens in the same process; medians. ``--base DIR`` runs
the dwstok cases again on another checkout's code (its own process, same sample), for
a before/after in one run.

    .venv/bin/python bench/batch_lists.py --threads 1 2 --base /tmp/wt
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from encode import RANKS, _pin, _specials, read_sample, write_sample  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _cases(tok, ft, threads: int):
    return {
        f"dwstok encode_batch@{threads}": lambda ts: tok.encode_batch(ts, num_threads=threads),
        f"fastokens encode_batch@{threads}": lambda ts: [e.ids for e in ft.encode_batch(ts, split_special_tokens=True)],
        "dwstok encode, lists kept": lambda ts: [tok.encode(t) for t in ts],
        "fastokens encode, lists kept": lambda ts: [ft.encode(t, split_special_tokens=True).ids for t in ts],
    }


def worker(sample: Path, threads: int, repeats: int) -> dict:
    """Run every case in this process; return medians in seconds, and the ids made."""
    # (as bench/encode.py: fastokens' own pool reads FASTOKENS_BPE_THREADS, before its import)
    for var in ("RAYON_NUM_THREADS", "FASTOKENS_BPE_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[var] = str(threads)
    import fastokens
    import numpy as np

    import dwstok
    from dwstok import Tokenizer

    _pin(threads)
    warm, groups = read_sample(sample)
    texts = [t for g in groups.values() for t in g]
    tok = Tokenizer.from_tiktoken(RANKS, pattern="o200k", special_tokens=_specials(RANKS))
    ft = fastokens.Tokenizer.from_tiktoken(str(RANKS), encoding="o200k_base")
    cases = _cases(tok, ft, threads)
    want = None
    for run in cases.values():  # the first pass, and every result checked equal
        got = run(warm + texts)[len(warm):]
        assert want is None or got == want, "encoders disagree"
        want = got
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeats):
        for name, run in cases.items():
            fresh = [t.encode().decode() for t in texts]  # new str objects, as a loader reads them
            t0 = time.perf_counter()
            out = run(fresh)
            times[name].append(time.perf_counter() - t0)
            del out
    return {
        "dwstok": str(Path(dwstok.__file__).parent.parent),
        "docs": len(texts), "bytes": sum(len(t.encode()) for t in texts), "ids": sum(map(len, want)),
        "seconds": {k: float(np.median(v)) for k, v in times.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--base", type=Path, help="a checkout whose dwstok runs the same cases (@base)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(Path(args.worker[0]), int(args.worker[1]), int(args.worker[2]))))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    sample = args.out / f".batch-lists-sample-{stamp}.arrow"
    write_sample(sample, 220, 100)
    roots = [("this", ROOT)] + ([("base", args.base.resolve())] if args.base else [])
    rows = []
    try:
        for threads in args.threads:
            for label, root in roots:
                env = dict(os.environ, PYTHONPATH=str(root))
                cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(sample), str(threads), str(args.repeats)]
                p = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True)
                if p.returncode:
                    raise SystemExit(f"worker failed ({label}, {threads} threads):\n{p.stderr[-3000:]}")
                r = json.loads(p.stdout.strip().splitlines()[-1])
                rows.append({"code": label, "threads": threads, **r})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        sample.unlink(missing_ok=True)
    lines = [
        f"# Lists of ids from whole batches (second pass), {stamp}",
        "",
        f"`bench/batch_lists.py --threads {' '.join(map(str, args.threads))} --repeats {args.repeats}"
        + (f" --base {args.base}`" if args.base else "`")
        + f"; {rows[0]['docs']:,} documents, {rows[0]['bytes'] / 1e6:.1f} MB, {rows[0]['ids']:,} ids in one call;"
        " medians; fastokens in the same process as each row's dwstok.",
        "",
        "| code | threads | case | ms | MB/s | ns an id | dwstok / fastokens |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        s = r["seconds"]
        for name, sec in s.items():
            peer = name.replace("dwstok", "fastokens")
            ratio = f"{s[peer] / sec:.2f}x" if name.startswith("dwstok") else "-"
            lines.append(f"| {r['code']} | {r['threads']} | {name} | {sec * 1e3:.1f} | {r['bytes'] / sec / 1e6:.1f} | "
                         f"{sec * 1e9 / r['ids']:.1f} | {ratio} |")
    path = args.out / f"batch-lists-{stamp}.md"
    path.write_text("\n".join(lines) + "\n")
    (args.out / f"batch-lists-{stamp}.json").write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
