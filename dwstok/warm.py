"""Compile the kernels a first run needs, once, into Numba's disk cache: ``python -m dwstok.warm``.

Numba compiles a kernel on its first call; with ``cache=True`` it keeps the result on
disk, so only the first run after an install pays (see ``_jit``). ``make setup`` runs
this so that the first ``encode`` or ``dwstok build`` does not; a Tokenizer that finds
the cache cold starts ``python -m dwstok.warm --background`` (kernel_cache.py). It trains a tiny model
in-process and encodes, loads and decodes with it: the same kernels and argument types
as real use, on a few hundred bytes. With a warm cache it takes about as long as
loading the kernels does.

    python -m dwstok.warm            # compile (after a background run under way, if any)
    python -m dwstok.warm --start    # on a cold cache, start the background compile; return at once
    python -m dwstok.warm --status   # ready | compiling | cold, and the cache folder

``--start`` is for a script that has other work before its first build: ``make demo``
runs it before assembling the corpus, so the merge learner, the kernel a build's train
stage waits for, compiles meanwhile.

>>> seconds = warm()  # doctest: +SKIP
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_TEXTS = [
    "Hello world! The year 2026, 1234567 bytes; don't stop.\n",
    "Grüße aus Köln — ça va? Привет, мир. Ελληνικά.",
    "你好世界，中文文本。日本語のテキストです。한국어",
    "def f(x):\n    return x ** 2  # code\n\tend",
]


def warm() -> float:
    """Run the common kernels once on tiny inputs; return the seconds it took."""
    from . import kernel_cache
    from .tokenizer import Tokenizer
    from .training import train_bpe

    kernel_cache.compile_here()  # the point of this run: no HF bridge, no second warm run

    t0 = time.perf_counter()
    run_learner()
    kernel_cache.mark_learner_ready()  # a build's train stage waits for this alone
    texts = _TEXTS * 8
    langs = ["en", "de", "zh", "code"] * 8
    for pattern in ("o200k-rdigits", "o200k"):
        tok = train_bpe(texts, 400, special_tokens=["<bos>"], pattern=pattern, alpha=0.7, lang=langs, han_coverage=0.5)
        with tempfile.TemporaryDirectory(prefix="dwstok-warm-") as d:
            path = Path(d) / "model.json"
            tok.save(path)
            tok = Tokenizer.load(path)
        for t in texts[:4]:
            ids = tok.encode(t)
            tok.encode_to_numpy(t)
            tok.decode(ids)
        tok.encode(" ".join(texts))  # long enough for pylist's kernel (uint32 ids)
        tok.encode_with_offsets(" ".join(texts))  # and its int64 offsets
        tok.encode_batch(texts, num_threads=1)
        bufs = [t.encode() for t in texts]
        offsets = np.zeros(len(bufs) + 1, np.int64)
        np.cumsum([len(b) for b in bufs], out=offsets[1:])
        data = np.frombuffer(b"".join(bufs), np.uint8)  # read-only, as Arrow's buffers
        tok.encode_utf8_batch(data, offsets, num_threads=1)
        tok.encode_utf8_batch(data.copy(), offsets, num_threads=1)
    _warm_ranks(texts)
    return time.perf_counter() - t0


def run_learner(threads: int = 2) -> None:
    """Run the merge learner on a few texts, with the train stage's argument types (its
    pieces come through ``binary_buffers`` too; ids are uint16 up to a vocabulary of
    65,536), or the build would compile it again (tests/stages/test_train.py checks).

    A warm run calls it first: the learner is the longest kernel to compile, and a build
    that started the warm run waits for it alone (kernel_cache.wait_for_learner) while
    its own process compiles the scanner. With the kernels compiled, a caller that wants
    the learner loaded from the cache before it needs it runs this on a thread of its
    own, with ``threads=1``: a claim of two would leave its own learner one."""
    import pyarrow as pa

    from .merge_learner import learn_merges
    from .training import binary_buffers

    data, offsets = binary_buffers(pa.array([t.encode() for t in _TEXTS], pa.large_binary()))
    learn_merges(data, offsets, np.ones(len(_TEXTS), np.int64), 40, threads=threads)


def _warm_ranks(texts: list[str]) -> None:
    """A tiktoken rank file's model (``merge_rule="ranks"``: from_tiktoken, load_tiktoken,
    the tiktoken_ext plugin) derives its merges from the ranks with kernels of its own.
    The GPT-2 pattern comes last: only GPT-2's rank file uses it (``dwstok encode
    --compare gpt2``, ``dwstok page``), and its encoder is a kernel of its own."""
    from .tiktoken_compat import ranks_bytes
    from .tokenizer import Tokenizer

    tokens = [bytes([b]) for b in range(256)] + [b"th", b"he", b"the", b" t", b" the", b"wo", b"wor", b"world"]
    with tempfile.TemporaryDirectory(prefix="dwstok-warm-") as d:
        path = Path(d) / "warm.tiktoken"
        path.write_bytes(ranks_bytes((t, r) for r, t in enumerate(tokens)))
        toks = [Tokenizer.from_tiktoken(path, pattern=p, special_tokens={"<|endoftext|>": len(tokens)})
                for p in ("o200k", "gpt2")]
    for tok in toks:
        for t in texts[:4]:
            tok.encode(t)
            tok.encode_ordinary(t)


def main() -> None:
    from . import kernel_cache

    args = sys.argv[1:]
    if "--status" in args:
        print(f"{kernel_cache.state()} {kernel_cache.cache_dir()}")
        return
    if "--start" in args:
        from .errors import DwstokError

        try:
            kernel_cache.start_early()  # nothing when the kernels are ready or compiling
        except DwstokError as e:  # DWSTOK_COMPILE set to something else: say so, as a build would
            sys.exit(f"dwstok: {e}")
        return
    if "--background" in args:  # started by kernel_cache: under its lock, quiet
        sys.exit(kernel_cache.background_main(warm))
    with kernel_cache.holding_lock():  # after a background run, if one is at work
        s = warm()
        kernel_cache.mark_ready()
    print(f"dwstok: kernels ready ({s:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
