"""The pipeline's own kernels into Numba's cache, as ``dwstok.warm`` does the library's.

``make setup`` runs both. Without this, the first build after it compiled pretokenize's
kernels (the Han character sums, the cut of long pieces, the piece counts) and said so.

It runs the pretokenize stage in this process, one worker, on a tiny corpus with Han
text and a piece over the length limit, so that the kernels compile with the types a
build gives them (tests/stages/test_warm.py checks that a build then adds none).

    python -m stages.warm
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

# Latin, digits, Han and kana, and a run of one letter over the limit below
_TEXTS = ["Hello, world: 2026 and 12345 apples.", "漢字と仮名の文章です。中文也在这里。", "x" * 40]


def warm() -> float:
    """Run the pretokenize stage once on a tiny corpus; return the seconds it took."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dwstok import kernel_cache

    from . import get_run, piece_counts
    from .config import load_config
    from .executors import LocalExecutor
    from .inputs import Inputs

    kernel_cache.compile_here()  # the point of this run: no background compile
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dwstok-warm-") as d:
        corpus = Path(d) / "corpus.parquet"
        pq.write_table(pa.table({"text": _TEXTS}), corpus)
        config = load_config("32.2", overrides=["pretokenize.max_piece_bytes=16"])
        run = get_run("pretokenize")
        run(config, Inputs(corpus=(str(corpus),), workdir=d), Path(d) / "pretokenize", LocalExecutor(1))
        piece_counts.load_kernels()  # the counts' growth too, which the tiny corpus does not reach
    return time.perf_counter() - t0


def main() -> None:
    print(f"dwstok: stage kernels ready ({warm():.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
