"""Training benchmark: dwstok vs rustbpe vs HF tokenizers (issue 3).

Every measurement runs in its own subprocess, so wall time and peak RSS (ru_maxrss,
imports included) belong to that one run. All three train on the same documents with
the o200k pattern; rustbpe and HF get two threads (RAYON_NUM_THREADS=2) and their texts
already in memory. dwstok starts from the Parquet file twice over: ``dwstok`` runs
read + pretokenize + count + train in-process through the functions ``train_bpe`` uses;
``dwstok-cli`` runs what users run, the ``pretokenize``, ``count`` and ``train`` stages of
the CLI with ``--workers 2`` and configs/32.1.yaml (o200k, no balance, no Han forcing),
artifacts written to disk included; its peak RSS is the largest of the three processes.

    .venv/bin/python bench/train.py                 # the full comparison + scaling
    .venv/bin/python bench/train.py --quick         # ¼ corpus, vocab 8k, no scaling
    .venv/bin/python bench/train.py --child dwstok --vocab 4096 --frac 0.25   # one run
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from paths import ROOT, SHARED  # noqa: E402  (bench/ is on sys.path when run as a script)

CORPUS = SHARED / "corpus"


def _texts(split: str, frac: float) -> list[str]:
    import pyarrow.parquet as pq

    col = pq.read_table(CORPUS / f"{split}.parquet", columns=["text"]).column("text")
    n = int(round(len(col) * frac))
    return col.slice(0, n).to_pylist()


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(tool: str, vocab: int, frac: float, dev: bool) -> dict:
    from dwstok.patterns import PATTERNS

    pattern = PATTERNS["o200k"]
    out: dict = {"tool": tool, "vocab": vocab, "frac": frac}
    if tool == "dwstok":
        import pyarrow.parquet as pq

        from dwstok.training import binary_buffers, build_tokenizer, count_pieces
        from dwstok.merge_learner import learn_merges

        # The whole split starts from the Parquet file (reading is timed); a fraction
        # starts from texts in memory, like the peers.
        source = CORPUS / "train.parquet" if frac >= 1 else _texts("train", frac)
        t0 = t1 = time.perf_counter()
        table = count_pieces(source, pattern="o200k")
        t2 = time.perf_counter()
        data, offsets = binary_buffers(table.column("piece"))
        weights = table.column("count").to_numpy()
        res = learn_merges(data, offsets, weights, vocab - 256)
        t3 = time.perf_counter()
        tok = build_tokenizer(res.merges, pattern="o200k")
        t4 = time.perf_counter()
        out.update(
            wall_s=t4 - t0,
            count_s=t2 - t1,
            learn_s=t3 - t2,
            build_s=t4 - t3,
            unique_pieces=table.num_rows,
            unique_bytes=int(data.size),
            pretokens=int(weights.sum()),
            merges=len(res.merges),
        )
        merges = res.merges
        encode_batch = lambda xs: tok.encode_batch(xs)  # noqa: E731
    elif tool == "dwstok-cli":
        import tempfile

        import pyarrow.parquet as pq

        from dwstok import Tokenizer

        with tempfile.TemporaryDirectory() as tmp:
            corpus = CORPUS / "train.parquet"
            if frac < 1:
                corpus = Path(tmp) / "train.parquet"
                full = pq.read_table(CORPUS / "train.parquet")
                pq.write_table(full.slice(0, int(round(full.num_rows * frac))), corpus, compression="zstd")
            config = Path(tmp) / "bench.yaml"
            config.write_text((ROOT / "configs" / "32.1.yaml").read_text().replace("vocab_size: 32768", f"vocab_size: {vocab}"))
            dwstok = Path(sys.executable).with_name("dwstok")
            t0 = time.perf_counter()
            for stage in ("pretokenize", "count", "train"):
                t = time.perf_counter()
                subprocess.run(
                    [str(dwstok), stage, str(config), "--corpus", str(corpus), "--workdir", f"{tmp}/w", "--workers", "2"],
                    check=True,
                    capture_output=True,
                )
                out[f"{stage}_s"] = time.perf_counter() - t
            out["wall_s"] = time.perf_counter() - t0
            out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            tok = Tokenizer.load(f"{tmp}/w/train/model.json")
        merges = tok.merges
        out["merges"] = len(merges)
        encode_batch = lambda xs: tok.encode_batch(xs)  # noqa: E731
    elif tool == "rustbpe":
        import rustbpe

        texts = _texts("train", frac)
        t0 = time.perf_counter()
        tok = rustbpe.Tokenizer()
        tok.train_from_iterator(iter(texts), vocab, pattern=pattern)
        out["wall_s"] = time.perf_counter() - t0
        ranks = tok.get_mergeable_ranks()
        merges = None
        out["merges"] = tok.vocab_size - 256
        encode_batch = tok.batch_encode
        out["_ranks"] = sorted(((bytes(b), r) for b, r in ranks), key=lambda x: x[1])[256:] if ranks else []
    elif tool == "hf":
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

        texts = _texts("train", frac)
        t0 = time.perf_counter()
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
        )
        tok.train_from_iterator(texts, trainer=trainer)
        out["wall_s"] = time.perf_counter() - t0
        out["merges"] = tok.get_vocab_size() - 256
        merges = None
        encode_batch = lambda xs: [e.ids for e in tok.encode_batch(xs)]  # noqa: E731
    else:
        raise SystemExit(f"unknown tool {tool}")
    out.setdefault("peak_rss_mb", _peak_rss_mb())
    if dev:
        dev_texts = _texts("dev", 1.0)
        n_bytes = sum(len(t.encode("utf-8")) for t in dev_texts)
        n_tok = sum(len(ids) for ids in encode_batch(dev_texts))
        out["dev_bytes_per_token"] = n_bytes / n_tok
    if merges is not None:
        out["_merges"] = [(a.hex(), b.hex()) for a, b in merges[:2000]]
    if "_ranks" in out:
        out["_ranks"] = [b.hex() for b, _ in out["_ranks"][:2000]]
    return out


def run(tool: str, vocab: int, frac: float, dev: bool = False) -> dict:
    env = dict(os.environ, RAYON_NUM_THREADS="2", NUMBA_NUM_THREADS="2")
    cmd = [sys.executable, __file__, "--child", tool, "--vocab", str(vocab), "--frac", str(frac)]
    if dev:
        cmd.append("--dev")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"{tool} failed:\n{r.stderr[-3000:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    shown = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in res.items() if not k.startswith("_")}
    print(json.dumps(shown), flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child")
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--frac", type=float, default=1.0)
    ap.add_argument("--dev", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tools", default="dwstok,dwstok-cli,rustbpe,hf")
    ap.add_argument("--no-scaling", action="store_true")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.vocab, args.frac, args.dev)))
        return
    vocab, frac = (8192, 0.25) if args.quick else (args.vocab, args.frac)
    print(f"# compare at vocab {vocab}, {frac:g} of the train split", flush=True)
    results = {t: run(t, vocab, frac, dev=True) for t in args.tools.split(",")}
    print("# tool          wall s   vs rustbpe   peak RSS MB   dev bytes/token")
    base = results.get("rustbpe", {}).get("wall_s")
    for t, r in results.items():
        ratio = f"{base / r['wall_s']:.2f}x" if base else "-"
        print(f"# {t:<12} {r['wall_s']:8.1f} {ratio:>12} {r['peak_rss_mb']:13.0f} {r.get('dev_bytes_per_token', 0):17.3f}")
    if "dwstok" in results and "rustbpe" in results:
        a = [bytes.fromhex(x) + bytes.fromhex(y) for x, y in results["dwstok"]["_merges"]]
        b = [bytes.fromhex(x) for x in results["rustbpe"]["_ranks"]]
        same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        print(f"# first {same} merged tokens identical between dwstok and rustbpe (of {min(len(a), len(b))} compared)")
    if args.quick or args.no_scaling:
        return
    print("# dwstok scaling with vocab (full corpus)", flush=True)
    for v in (4096, 8192, 16384):
        run("dwstok", v, 1.0)
    print("# dwstok scaling with corpus size (vocab 32768)", flush=True)
    for f in (0.25, 0.5):
        run("dwstok", 32768, f)


if __name__ == "__main__":
    main()
