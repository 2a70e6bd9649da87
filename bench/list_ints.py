"""Ids to a Python list: ``ndarray.tolist()`` against cached int objects (NumPy's ``take``
from an object array, and dwstok.pylist's kernel), by vocab size.

For each size, o200k_base cut to its first N ranks, in a fresh process on one CPU: the
per-document ids of bench/encode.py's train sample (every language group), turned into
lists one document at a time, discarded (as a loop that counts) or kept (as a caller
does). Medians of 9 interleaved rounds, CPU time. What ``Tokenizer._as_list`` chooses by.

    .venv/bin/python bench/list_ints.py     # bench/results/list-ints-<time>.json/.md
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import encode
from paths import ROOT

SIZES = (32_768, 65_536, 100_000, 199_998)
ROUNDS = 9


def worker(ranks: Path, sample: Path) -> dict:
    import numpy as np

    from dwstok import Tokenizer

    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    _, groups = encode.read_sample(sample)
    tok = Tokenizer.from_tiktoken(ranks, pattern="o200k", special_tokens={})
    ints = np.arange(tok.n_vocab, dtype=np.int64).astype(object)
    arrs = [tok.encode_to_numpy(t) for ts in groups.values() for t in ts]
    from dwstok.pylist import IdLists

    lists = IdLists(tok.n_vocab)
    ways = {
        "tolist": lambda a: a.tolist(),
        "take": lambda a: a.tolist() if a.size < 64 else ints.take(a).tolist(),
        "fill": lists.to_list,
    }
    times: dict[str, list[float]] = {}
    for _ in range(ROUNDS):
        for name, f in ways.items():
            c = time.process_time()
            for a in arrs:
                f(a)
            times.setdefault(f"{name} discarded", []).append(time.process_time() - c)
            c = time.process_time()
            kept = [f(a) for a in arrs]
            times.setdefault(f"{name} kept", []).append(time.process_time() - c)
            del kept
    # the same inside an encode loop (``encode()`` per document, second pass): the
    # encoder's own work pushes the cached ints out of the CPU's caches between calls
    texts = [t for ts in groups.values() for t in ts]
    for t in texts:
        tok.encode(t)
    for _ in range(ROUNDS):
        for name, works in (("tolist", False), ("fill", True)):
            IdLists._works = works
            c = time.process_time()
            for t in texts:
                tok.encode(t)
            times.setdefault(f"{name} in encode discarded", []).append(time.process_time() - c)
            c = time.process_time()
            kept = [tok.encode(t) for t in texts]
            times.setdefault(f"{name} in encode kept", []).append(time.process_time() - c)
            del kept
    IdLists._works = None
    return {"n_vocab": tok.n_vocab, "ids": int(sum(a.size for a in arrs)), "docs": len(arrs),
            "ms": {k: statistics.median(v) * 1e3 for k, v in times.items()}}


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        print(json.dumps(worker(Path(sys.argv[2]), Path(sys.argv[3]))))
        return
    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp) / "sample.arrow"
        subprocess.run([sys.executable, encode.__file__, "--make-sample", str(sample)], check=True)
        lines = encode.RANKS.read_bytes().splitlines()
        for n in SIZES:
            ranks = Path(tmp) / f"o200k-{n}.tiktoken"
            ranks.write_bytes(b"\n".join(lines[:n]) + b"\n")
            p = subprocess.run([sys.executable, __file__, "--worker", str(ranks), str(sample)],
                               capture_output=True, text=True, check=True)
            rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
    load1 = os.getloadavg()
    ways = ("take", "fill")
    md = [f"ids -> list, Python {sys.version.split()[0]}, CPU ms (median of {ROUNDS}), load {load0[0]:.2f} -> {load1[0]:.2f} on {os.cpu_count()} CPUs;"
          " ratio = tolist / the way (above 1: faster than tolist)", "",
          "| n_vocab | ids | use | tolist | " + " | ".join(f"{w} | ratio" for w in ways) + " |",
          "| ---: | ---: | --- | ---: | " + " | ".join("---: | ---:" for _ in ways) + " |"]
    for r in rows:
        m = r["ms"]
        for use in ("discarded", "kept"):
            base = m[f"tolist {use}"]
            cells = " | ".join(f"{m[f'{w} {use}']:.1f} | {base / m[f'{w} {use}']:.2f}x" for w in ways)
            md.append(f"| {r['n_vocab']} | {r['ids']} | {use} | {base:.1f} | {cells} |")
    md += ["", "`encode()` per document, second pass, whole loop CPU ms (tolist: dwstok.pylist turned off)", "",
           "| n_vocab | use | tolist | fill | ratio |", "| ---: | --- | ---: | ---: | ---: |"]
    for r in rows:
        m = r["ms"]
        for use in ("discarded", "kept"):
            a, b = m[f"tolist in encode {use}"], m[f"fill in encode {use}"]
            md.append(f"| {r['n_vocab']} | {use} | {a:.1f} | {b:.1f} | {a / b:.2f}x |")
    print("\n".join(md))
    out = ROOT / "bench" / "results"
    stem = out / f"list-ints-{time.strftime('%Y%m%d-%H%M%S')}"
    stem.with_suffix(".json").write_text(json.dumps({"loadavg": [load0, load1], "rows": rows}, indent=1) + "\n")
    stem.with_suffix(".md").write_text("\n".join(md) + "\n")
    print(f"wrote {stem}.json and .md")


if __name__ == "__main__":
    main()
