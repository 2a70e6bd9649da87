"""A/B of two versions of the encoder in one process, per language group, first pass.

On a shared machine two fresh processes differ by more than most kernel changes do, so
this loads both versions side by side: the ``dwstok`` package of each checkout is
copied (``.py`` files, times kept, so Numba's cache in the copy stays valid) to
``/tmp/dwstok-ab/`` as ``dwstok_a`` and ``dwstok_b``. Each repeat runs a fresh cache
pool of each version, in alternating order, warmed on the first MB of dev, over the
sample of bench/encode_groups.py; the figure is the minimum CPU time over repeats.
With ``--second``, the sample is encoded once more before the timed pass: every piece
is in the cache, the steady state of encoding a corpus.

The first run on new copies compiles their kernels (minutes; the copies keep them).
The harness waits for that, but a run right after it reads both versions slower and
their ratio off by as much as a change would make (bench/results/session56-20261207.md):
run it again and read the second run.

    .venv/bin/python bench/encode_ab.py --a /work/main --b . --repeats 6 [--batch] [--second] [--groups zh ja]
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from encode_groups import RANKS, SPECIALS, _warm_texts, sample  # noqa: E402

COPIES = Path("/tmp/dwstok-ab")


def import_copy(checkout: Path, name: str, module: str = ""):
    """``checkout``'s dwstok package imported as ``name`` (a copy in COPIES), or its
    submodule ``module``: two versions side by side in one process."""
    dst = COPIES / name
    shutil.copytree(checkout / "dwstok", dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if str(COPIES) not in sys.path:
        sys.path.insert(0, str(COPIES))
    return importlib.import_module(f"{name}.{module}" if module else name)


def _load(checkout: Path, name: str):
    """``(tokenizer, its _CachePool)`` of ``checkout``'s copy, its kernels ready: a copy
    whose kernels are not in Numba's cache yet compiles them in the background and
    encodes through the HF bridge meanwhile, which the repeats would have timed."""
    tok = import_copy(checkout, name).Tokenizer.from_tiktoken(RANKS, pattern="o200k", special_tokens=SPECIALS)
    tok._kernels()
    return tok, importlib.import_module(name + ".tokenizer")._CachePool


def _batch(tok, texts):
    bufs = [t.encode() for t in texts]
    offsets = np.zeros(len(bufs) + 1, np.int64)
    np.cumsum([len(b) for b in bufs], out=offsets[1:])
    return tok.encode_utf8_batch(np.frombuffer(b"".join(bufs), np.uint8), offsets, num_threads=1)[0].size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", type=Path, required=True, help="checkout with the baseline dwstok/")
    ap.add_argument("--b", type=Path, required=True, help="checkout with the changed dwstok/")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--batch", action="store_true", help="encode_utf8_batch, one call a group (default: per document)")
    ap.add_argument("--groups", nargs="*")
    ap.add_argument("--second", action="store_true", help="time a second pass: every piece seen before (the steady state)")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    docs = sample(200, 100, args.groups)
    warm = _warm_texts()
    by: dict[str, list[str]] = {}
    for lang, text in docs:
        by.setdefault(lang, []).append(text)
    versions = {"a": _load(args.a.resolve(), "dwstok_a"), "b": _load(args.b.resolve(), "dwstok_b")}
    best: dict[tuple[str, str], float] = {}
    clock = time.process_time
    # repeat -1 is not timed: each version's first pass loads (or compiles) what its
    # kernels lack, which a fresh copy's first run had timed
    for r in range(-1, args.repeats):
        for v in ("a", "b") if r % 2 == 0 else ("b", "a"):
            tok, pool = versions[v]
            tok._caches = pool()
            spent: dict[str, float] = {}
            if args.batch:
                _batch(tok, warm)
                for lang in sorted(by) if args.second else ():
                    _batch(tok, by[lang])
                for lang in sorted(by):
                    t0 = clock()
                    _batch(tok, by[lang])
                    spent[lang] = clock() - t0
            else:
                for t in warm + ([t for _, t in docs] if args.second else []):
                    tok.encode_to_numpy(t)
                for lang, text in docs:
                    t0 = clock()
                    tok.encode_to_numpy(text)
                    spent[lang] = spent.get(lang, 0.0) + clock() - t0
            spent["all"] = sum(spent.values())
            for lang, dt in spent.items():
                if r >= 0:
                    best[v, lang] = min(best.get((v, lang), float("inf")), dt)
    print(f"MB/s per CPU second, min of {args.repeats}; load {os.getloadavg()[0]:.2f}")
    for lang in sorted(by) + ["all"]:
        nb = sum(len(t.encode()) for t in ([t for _, t in docs] if lang == "all" else by[lang]))
        a, b = best["a", lang], best["b", lang]
        print(f"{lang:5} a {nb / a / 1e6:7.1f}  b {nb / b / 1e6:7.1f}  b/a {a / b:5.2f}")


if __name__ == "__main__":
    main()
