"""Small batches on one and two threads: where a second thread starts to pay.

A batch call on two threads pays for the second one: a wake-up of a pool thread, its
start a few tens of µs after the calling thread's, and the wait for it at the end.
``tokenizer._SPLIT_MIN`` is the batch size below which dwstok runs on the calling thread
alone. This times ``encode_utf8_batch`` (``flat``) and ``encode_batch`` (``batch``) on 1
and 2 threads, with that threshold lifted, at each batch size, next to fastokens'
``encode_batch_flat`` and ``encode_batch`` on the same batches:

- **new text**: every batch is documents not encoded before (train-split documents of
  every group, shuffled, cut to 1,500 characters), as a corpus run meets them;
- **seen text**: the same batch encoded again, every piece cached.

One process, pinned to two CPUs; each size ``--repeats`` batches, each on 1 and 2
threads in turn; medians in µs a call.

    .venv/bin/python bench/small_batches.py                # bench/results/small-batches-<time>.json/.md
    .venv/bin/python bench/small_batches.py --sizes 8 16 32 64 --repeats 20
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from encode_groups import RANKS, SPECIALS, sample  # noqa: E402
from paths import ROOT  # noqa: E402


def _texts() -> list[str]:
    docs = sample(800, 64, None)  # 22 MB: no batch of new text repeats an earlier one
    random.Random(1).shuffle(docs)
    return [t[i : i + 1500] for _, t in docs for i in range(0, len(t), 1500)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", type=int, default=[8, 16, 24, 32, 48, 64, 96], help="KB a batch")
    ap.add_argument("--repeats", type=int, default=12)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    os.environ.setdefault("FASTOKENS_BPE_THREADS", "2")
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])
    import fastokens
    import numpy as np

    import dwstok.tokenizer as T
    from dwstok import Tokenizer

    threshold = T._SPLIT_MIN
    T._SPLIT_MIN = 1  # every batch of more than one document is cut, on two threads
    # one tokenizer (so one pool of piece caches) a thread count: each meets a batch new
    toks = {n: Tokenizer.from_tiktoken(RANKS, pattern="o200k", special_tokens=SPECIALS) for n in (1, 2)}
    ft = fastokens.Tokenizer.from_tiktoken(str(RANKS), encoding="o200k_base")
    texts = _texts()
    for n, tok in toks.items():
        tok.encode_batch(texts[:200], num_threads=n)
    ft.encode_batch(texts[:200])
    texts = texts[200:]

    def flat(batch, threads):
        bufs = [t.encode() for t in batch]
        offsets = np.zeros(len(bufs) + 1, np.int64)
        np.cumsum([len(b) for b in bufs], out=offsets[1:])
        data = np.frombuffer(b"".join(bufs), np.uint8)
        t0 = time.perf_counter()
        toks[threads].encode_utf8_batch(data, offsets, num_threads=threads)
        return time.perf_counter() - t0

    def batch(batch, threads):
        t0 = time.perf_counter()
        toks[threads].encode_batch(batch, num_threads=threads)
        return time.perf_counter() - t0

    def ft_flat(batch):
        t0 = time.perf_counter()
        ft.encode_batch_flat(batch, split_special_tokens=True)
        return time.perf_counter() - t0

    def ft_batch(batch):
        t0 = time.perf_counter()
        [e.ids for e in ft.encode_batch(batch, split_special_tokens=True)]
        return time.perf_counter() - t0

    rows = []
    pos = 0
    for kb in args.sizes:
        times: dict[str, list[float]] = {}
        for _ in range(args.repeats):
            for mode, run, peer in (("flat", flat, ft_flat), ("batch", batch, ft_batch)):
                b, n = [], 0
                while n < kb * 1000:
                    b.append(texts[pos])
                    n += len(b[-1].encode())
                    pos += 1
                for kind in ("new", "seen"):  # new to each tokenizer, then seen
                    for threads in (1, 2):
                        times.setdefault(f"{mode} {kind} {threads}", []).append(run([(t + " ")[:-1] for t in b], threads))
                    times.setdefault(f"{mode} {kind} fastokens", []).append(peer([(t + " ")[:-1] for t in b]))
        rows.append({"kb": kb, **{k: statistics.median(v) * 1e6 for k, v in times.items()}})
        r = rows[-1]
        print(f"{kb:3d} KB  new: flat 1t {r['flat new 1']:6.0f} 2t {r['flat new 2']:6.0f} ({r['flat new 1'] / r['flat new 2']:.2f}x)"
              f"  batch 1t {r['batch new 1']:6.0f} 2t {r['batch new 2']:6.0f} ({r['batch new 1'] / r['batch new 2']:.2f}x)"
              f"  | seen: flat {r['flat seen 1'] / r['flat seen 2']:.2f}x batch {r['batch seen 1'] / r['batch seen 2']:.2f}x", flush=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"repeats": args.repeats, "split_min": threshold, "loadavg": os.getloadavg()}
    (args.out / f"small-batches-{stamp}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        f"Batch calls of new and seen text on 1 and 2 threads, µs a call (medians of {args.repeats}); "
        f"_SPLIT_MIN is {threshold // 1024} KB; fastokens on 2 threads",
        "",
        "| KB | text | flat 1t | flat 2t | 2t gain | fastokens flat | batch 1t | batch 2t | 2t gain | fastokens batch |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        for kind in ("new", "seen"):
            f1, f2, b1, b2 = (r[f"{m} {kind} {t}"] for m in ("flat", "batch") for t in (1, 2))
            lines.append(
                f"| {r['kb']} | {kind} | {f1:.0f} | {f2:.0f} | {f1 / f2:.2f}x | {r[f'flat {kind} fastokens']:.0f} "
                f"| {b1:.0f} | {b2:.0f} | {b1 / b2:.2f}x | {r[f'batch {kind} fastokens']:.0f} |"
            )
    (args.out / f"small-batches-{stamp}.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out / f'small-batches-{stamp}.md'}")


if __name__ == "__main__":
    main()
