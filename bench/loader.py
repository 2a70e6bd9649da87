"""Data-loader benchmark: StochasTok's split pass and ShardReader.batches, in tokens/s.

Runs on a finished build (its ``train/model.json`` and ``encode-shards/``), e.g.

    dwstok build configs/32.3.yaml --corpus ../shared/corpus/train.parquet --workdir W
    .venv/bin/python bench/loader.py W                 # results in bench/results/
    .venv/bin/python bench/loader.py W --batches 100   # fewer batches per case

Measured, each on one core (the kernels are single-threaded), best of ``--repeat``
after a warm-up call that compiles:

- the split table: its size and build time;
- the split pass (``stochastok()`` over every shard token) and the count pass
  (``count_extras``, the epoch's one pass that sizes the stream), at p = 0.1;
- the length increase StochasTok gives the epoch at p = 0.1 (measured over the whole
  corpus for two epochs, and the expectation p x splittable share);
- ``batches()`` throughput at p = 0 (no StochasTok) and p = 0.1, seq_len 2048,
  batch 32, bos framing; the epoch set-up (count pass) is timed apart;
- resuming: time to the first batch with ``start_batch`` near the epoch's end;
- per-rank batch counts for world_size 3, batch_size 17, before (the old rule: ranks
  take ``order[r::3]``, untrimmed) and now.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from paths import ROOT  # noqa: E402  (bench/ is on sys.path when run as a script)


def best_of(fn, repeat: int) -> float:
    fn()  # warm-up: compiles, maps pages in
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir", type=Path, help="a finished build's workdir")
    ap.add_argument("--batches", type=int, default=300, help="batches timed per case")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()

    from dwstok import ShardReader, Tokenizer
    from dwstok.stochastok import SplitTable, StochasTok, epoch_key, stochastok
    from dwstok.windows import count_extras

    tok = Tokenizer.load(args.workdir / "train" / "model.json")
    reader = ShardReader(args.workdir / "encode-shards", expect_model=tok)
    bos = tok.special_tokens.get("<bos>")
    res: dict = {
        "machine": platform.machine(),
        "python": platform.python_version(),
        "model": {"version": tok.version, "sha256": tok.sha256, "n_vocab": tok.n_vocab},
        "corpus": {"docs": len(reader), "tokens": reader.n_tokens, "shards": len(reader.files)},
    }
    t0 = time.perf_counter()
    table = SplitTable.from_tokenizer(tok)
    res["split_table"] = {"splits": table.n_splits, "build_s": round(time.perf_counter() - t0, 3),
                          "splittable_tokens": int((np.diff(table.start) > 0).sum())}
    st = StochasTok(table, p=0.1)
    segs = list(zip(reader._seg_tok_start[:-1].tolist(), reader._values))
    n = reader.n_tokens

    def split_all():
        for g0, vals in segs:
            stochastok(vals, table, p=0.1, seed=1, position=g0)

    layout_reader = reader
    layout_reader._stream(n_bos=0, n_eos=0, stochastok=None, seed=None, epoch=0)  # builds the layout

    def count_all():
        count_extras(layout_reader._layout, iter(segs), epoch_key(1, 0), st.kernel_args())

    t_split = best_of(split_all, args.repeat)
    t_count = best_of(count_all, args.repeat)
    res["split_pass"] = {"p": 0.1, "tokens": n, "seconds": round(t_split, 4),
                         "tokens_per_s": round(n / t_split)}
    res["count_pass"] = {"p": 0.1, "tokens": n, "seconds": round(t_count, 4),
                         "tokens_per_s": round(n / t_count)}

    # length increase: the epoch's split stream against the canonical one
    lengths = {}
    for epoch in (0, 1):
        framed = reader.n_windows(1, bos_id=bos, stochastok=st, seed=0, epoch=epoch) + 1
        lengths[epoch] = framed
    canon = reader.n_windows(1, bos_id=bos) + 1
    share = float(np.isin(np.concatenate([v for _, v in segs]),
                          np.flatnonzero(np.diff(table.start) > 0)).mean())
    res["length_increase_p0.1"] = {
        "canonical_ids": canon,  # tokens + one <bos> per document
        "split_ids": lengths,
        "increase": {e: round(v / canon - 1, 5) for e, v in lengths.items()},
        "tokens_only": {e: round((v - canon) / n, 5) for e, v in lengths.items()},
        "expected_tokens_only": round(0.1 * share, 5),
        "splittable_share": round(share, 5),
    }

    # batches() throughput
    L, B = args.seq_len, args.batch_size
    res["batches"] = {"seq_len": L, "batch_size": B, "bos": bos is not None}
    for name, s in (("p0", None), ("p0.1", st)):
        kw = dict(seed=0, bos_id=bos, stochastok=s)
        reader._epoch = None
        t0 = time.perf_counter()
        n_b = reader.n_batches(L, B, **kw)
        setup = time.perf_counter() - t0
        k = min(args.batches, n_b)

        def run():
            got = 0
            for b in reader.batches(L, B, **kw):
                got += 1
                if got == k:
                    break

        t = best_of(run, args.repeat)
        res["batches"][name] = {"epoch_setup_s": round(setup, 4), "batches": k, "n_batches": n_b,
                                "seconds": round(t, 4), "tokens_per_s": round(k * B * L / t)}
        t0 = time.perf_counter()
        next(iter(reader.batches(L, B, start_batch=n_b - 1, **kw)))
        res["batches"][name]["resume_at_last_batch_s"] = round(time.perf_counter() - t0, 4)

    # batch counts per rank, world_size 3, batch_size 17; "before" is the old rule: rank r
    # took windows r, r + 3, ... of all (untrimmed) windows
    counts = {}
    for seq_len in (L, 1000, 1500, 3000, 6000):
        for drop_last in (True, False):
            w = reader.n_windows(seq_len, bos_id=bos)
            old = [len(range(r, w, 3)) for r in range(3)]
            old_b = [c // 17 if drop_last else -(-c // 17) for c in old]
            now = [sum(1 for _ in reader.batches(seq_len, 17, seed=0, bos_id=bos, rank=r,
                                                 world_size=3, drop_last=drop_last))
                   for r in range(3)]
            assert now == [reader.n_batches(seq_len, 17, bos_id=bos, world_size=3,
                                            drop_last=drop_last)] * 3
            counts[f"seq_len={seq_len} drop_last={drop_last}"] = {
                "windows": w, "before": old_b, "after": now}
    res["rank_batches_ws3_bs17"] = counts

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"loader-{time.strftime('%Y%m%d-%H%M')}.json"
    path.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))
    print(f"-> {path}")


if __name__ == "__main__":
    main()
