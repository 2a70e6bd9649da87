"""train: count/pieces.arrow + stats.json → ``train/model.json``.

Language weights (``balance.alpha``) turn the per-language columns into one int64
weight per piece (fixed point, so training is exact); forced Han merges (``han``) come
first; the Numba trainer learns the rest. The model records, in its metadata, the
config hash, the language weights, the Han plan and the corpus it was trained on.

When the corpus runs out of pairs before ``vocab_size`` is reached, train stops with an
``InputError`` saying how many tokens it reached, unless the config sets
``train.allow_smaller: true``; then the smaller model is kept and its manifest records
both sizes (``counts.vocab_size`` is the real one, ``info.vocab_size_requested``).
"""

from __future__ import annotations

import time

from pathlib import Path
from typing import Any

import numpy as np

from dwstok.errors import InputError

from .config import Config
from .count import LANG_COUNTS, PIECES, read_languages
from .executors import Executor, available_cpus
from .inputs import Inputs
from .lineage import built_with
from .manifest import Manifest, Staging, Timer, hash_file, read_json, up_to_date

STAGE = "train"
UPSTREAM = "count"
# The upstream result must have been built with this config in every section
# that shaped it (its own upstream's included).
UPSTREAM_KEYS = None
CONFIG_KEYS = ("version", "pattern", "vocab_size", "special_tokens", "han", "balance")
MODEL = "model.json"


def load_kernels(config: Config, executor: Executor) -> None:
    """Run the merge learner on a few texts, with the types ``run`` gives it:
    ``stages.early`` calls this on a thread of its own, so that it loads from Numba's
    cache while the stages before this one run."""
    from dwstok.warm import run_learner

    run_learner(threads=1)


def run(config: Config, inputs: Inputs, out_dir: str | Path, executor: Executor) -> Manifest:
    """Train the tokenizer the config describes on the counted pieces."""
    out_dir = Path(out_dir)
    # refuses counts made under other config sections (PatternMismatchError)
    up_dir, up = inputs.upstream(UPSTREAM, config=config, keys=UPSTREAM_KEYS)
    config_hash = config.hash_of(*config_keys(config))
    inputs_hash = up.output_hash
    done = up_to_date(out_dir, STAGE, config_hash, inputs_hash)
    if done:
        return done
    staging = Staging(out_dir, STAGE, config_hash)

    from dwstok import model_file
    from dwstok.merge_learner import learn_merges
    from dwstok.training import ModelBuilder, binary_buffers, han_forced_merges, lang_weights

    with Timer() as t_load:
        stats = read_json(up_dir / "stats.json")
        weights_by_lang = lang_weights(stats["bytes_by_lang"], config.balance.alpha)
        data, offsets, weights = read_pieces_weighted(up_dir, weights_by_lang)
        n_unique = len(weights)
        if n_unique == 0:
            raise InputError("empty corpus: count found no pieces to train on")

    with Timer() as t_han:
        plan = None
        forced: tuple = ()
        if config.han.enabled:
            plan = han_forced_merges(stats["han"], coverage=config.han.coverage, count=config.han.count)
            forced = tuple(plan.merges)
            if len(forced) > config.n_merges:
                from dwstok.errors import ConfigError

                raise ConfigError(
                    f"han forcing needs {len(forced)} merges but vocab_size leaves only "
                    f"{config.n_merges}: lower han.coverage or raise vocab_size"
                )

    executor.progress.note(
        f"{STAGE}: learning {config.n_merges} merges from {n_unique:,} unique pieces"
        + (f" ({len(forced)} forced Han merges first)" if forced else "")
    )
    # The model's rows are made as the merges come, while the learner runs on another CPU.
    builder = ModelBuilder(config.special_tokens)
    from dwstok import kernel_cache

    kernel_cache.wait_for_learner()  # started by an earlier stage on a cold cache, it compiles the learner first
    with Timer() as t_learn:
        result = learn_merges(
            data,
            offsets,
            weights,
            config.n_merges,
            forced=forced,
            max_token_bytes=config.train.max_token_bytes,
            on_progress=MergeProgress(config.n_merges, executor.progress.note),
            on_merges=builder.add,
            # the workers asked for, on the CPUs of this process (Ray's run on other machines)
            threads=min(executor.workers, available_cpus()),
        )
    reached = config.vocab_size - config.n_merges + len(result.merges)
    if result.stopped_early:
        check_size(config, reached, len(result.merges))
        executor.progress.note(
            f"{STAGE}: stopped early at {reached:,} tokens ({len(result.merges)} merges), "
            f"under vocab_size {config.vocab_size:,}: no pair left to merge (train.allow_smaller is set)"
        )

    han_report = plan_report(plan)
    metadata = {
        "config_hash": config_hash,
        "config": _pinned_config(config),
        "trained_on": {
            "count_output_hash": up.output_hash,
            "docs": stats["docs"],
            "bytes": stats["bytes"],
            "unique_pieces": n_unique,
            "bytes_by_lang": stats["bytes_by_lang"],
        }
        # count.min_count / max_pieces: what pruning left out (absent when off).
        | ({"pruning": stats["pruning"]} if "pruning" in stats else {}),
        "balance": {"alpha": config.balance.alpha, "weights": {g: int(weights_by_lang[g]) for g in sorted(weights_by_lang)}},
        "han": han_report,
        "merges_learned": len(result.merges),
        "stopped_early": bool(result.stopped_early),
    }
    if config.train.max_token_bytes is not None:  # unset, the model is byte for byte as before
        metadata["max_token_bytes"] = config.train.max_token_bytes
    with Timer() as t_write:
        # The file's content straight from the merges: building a Tokenizer (its
        # encoder tables) only to save it took most of this step.
        if len(builder) != len(result.merges):  # (it has them all: learn_merges hands on the last)
            builder.add(0, result.merges)
        content = builder.content(pattern=config.pattern, version=config.version, metadata=metadata)
        model_file.write(staging.dir / MODEL, content, builder.rows())  # atomic, with the umask's permissions
        info = hash_file(staging.dir / MODEL)

    m = Manifest(
        stage=STAGE,
        config_hash=config_hash,
        inputs_hash=inputs_hash,
        outputs={MODEL: info},
        counts={
            "vocab_size": content["n_vocab"],
            "merges": len(result.merges),
            "forced_merges": len(forced),
            "unique_pieces": n_unique,
            "stopped_early": bool(result.stopped_early),
        },
        timings={"load_s": t_load.seconds, "han_s": t_han.seconds, "learn_s": t_learn.seconds, "write_s": t_write.seconds},
        info={
            "version": config.version,
            "pattern": config.pattern_string,
            "pattern_name": config.pattern,
            "model_sha256": content["sha256"],
            "han": han_report,
            "weights": metadata["balance"]["weights"],
            "vocab_size_requested": config.vocab_size,
        },
        inputs={UPSTREAM: {"dir": str(up_dir), "output_hash": up.output_hash}},
        built_with=built_with(config, config_keys(config), up.built_with),
    )
    return staging.commit(m)


def check_size(config: Config, reached: int, merges: int) -> None:
    """A model short of ``vocab_size`` is an error unless ``train.allow_smaller`` is set."""
    if config.train.allow_smaller:
        return
    where = f" in {config.source}" if config.source else ""
    raise InputError(
        f"the corpus ran out of pairs to merge: the model reached {reached:,} tokens "
        f"({merges:,} merges), not vocab_size {config.vocab_size:,}. Use a larger corpus, "
        f"lower vocab_size to at most {reached:,}, or set `train: {{allow_smaller: true}}`"
        f"{where} to keep the smaller model"
    )


class MergeProgress:
    """Turns the trainer's merge count into a line every ``every`` seconds, so a long
    run is never silent: ``train: 12,000/32,480 merges, 2,400 merges/s, ETA 0:00:09``.

    >>> lines = []
    >>> p = MergeProgress(100, lines.append, every=0.0, clock=iter([0.0, 2.0]).__next__)
    >>> p(50); lines
    ['train: 50/100 merges, 25 merges/s, ETA 0:00:02']
    """

    def __init__(self, total: int, emit, *, every: float = 10.0, clock=time.monotonic):
        self.total, self.emit, self.every, self.clock = total, emit, every, clock
        self.t0 = self.last = clock()

    def __call__(self, done: int) -> None:
        now = self.clock()
        if now - self.last < self.every or done <= 0:
            return
        self.last = now
        rate = done / max(now - self.t0, 1e-9)
        eta = int((self.total - done) / rate + 0.5) if rate > 0 else 0
        self.emit(
            f"{STAGE}: {done:,}/{self.total:,} merges, {rate:,.0f} merges/s, "
            f"ETA {eta // 3600}:{eta // 60 % 60:02d}:{eta % 60:02d}"
        )


def _pinned_config(config: Config) -> dict[str, Any]:
    """The config the model records: not where the corpus was, nor ``train.allow_smaller``
    (it does not change a model, only whether a short one is kept), nor the ``export``
    settings (export reads them from its own config; they change no id)."""
    d = config.to_dict() | {"corpus": None}
    d.pop("export", None)
    train = {k: v for k, v in d.pop("train", {}).items() if k != "allow_smaller" and v is not None}
    if train:
        d["train"] = train
    return d


def config_keys(config: Config) -> tuple[str, ...]:
    """The config sections train reads; ``train`` only when set, so a config without it
    keeps the hash (and the up-to-date builds) it had before the key existed."""
    return CONFIG_KEYS + (("train",) if config.train.max_token_bytes is not None else ())


def read_pieces_weighted(count_dir: Path, weights_by_lang: dict[str, int]):
    """``(data, offsets, weights)`` for the trainer from count's two files: the pieces'
    bytes as one uint8 buffer with int64 offsets, and ``Σ_g count_g(piece) · w_g`` (int64)
    from the sparse per-language counts, read a record batch at a time. Holds no more
    than the trainer's input plus one batch, so reading does not set train's peak."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    langs = read_languages(count_dir / PIECES)
    with pa.memory_map(str(count_dir / PIECES)) as src:
        r = ipc.open_file(src)
        chunks = [r.get_batch(i).column("piece") for i in range(r.num_record_batches)]
    n = sum(len(c) for c in chunks)
    col = pa.chunked_array(chunks, pa.large_binary())
    del chunks
    from dwstok.training import binary_buffers

    data, offsets = binary_buffers(col)  # one copy, the trainer's input
    del col
    # Arrow's pool keeps freed pages for itself; hand the batches' back for numpy's arrays.
    pa.default_memory_pool().release_unused()
    wl = np.array([int(weights_by_lang.get(g, 0)) for g in langs], np.int64)
    weights = np.zeros(n, np.int64)
    top = np.zeros(len(langs), np.int64)  # the largest count per language
    with pa.memory_map(str(count_dir / LANG_COUNTS)) as src:
        r = ipc.open_file(src)
        for i in range(r.num_record_batches):
            b = r.get_batch(i)
            lang = b.column("lang").to_numpy().astype(np.intp)
            count = b.column("count").to_numpy()
            np.maximum.at(top, lang, count)
            rows = b.column("row").to_numpy()
            # rows are sorted: sum each piece's languages, then add (a piece's rows may
            # straddle two batches, hence add rather than assign)
            new = np.ones(len(rows), bool)
            new[1:] = rows[1:] != rows[:-1]
            first = np.flatnonzero(new)
            if len(first):
                # numpy wraps int64 silently: check the bound (below) before trusting sums
                weights[rows[first]] += np.add.reduceat(count * wl[lang], first)
    check_weight_bound({g: int(top[i]) for i, g in enumerate(langs)}, weights_by_lang)
    return data, offsets, weights


def check_weight_bound(top_count: dict[str, int], weights_by_lang: dict[str, int]) -> None:
    """Refuse counts whose weighted sum could pass 2**62 (numpy wraps int64 silently).
    Counts reach 2**35 at 100 GB and weights 2**20-2**26, far below; a crafted file may not."""
    bound = sum(int(c) * int(weights_by_lang.get(g, 0)) for g, c in top_count.items())
    if bound >= 2**62:
        raise InputError(
            f"piece counts times language weights reach {bound:,} (over 2**62): the weighted "
            "counts would overflow int64; this count/pieces.arrow is not from a real corpus"
        )


def piece_weights(table, langs: list[str], weights_by_lang: dict[str, int]) -> np.ndarray:
    """Σ_g count_g(piece) · w_g as int64 (w_g fixed point, so the sum is exact), from a
    wide table (``count.read_pieces``)."""
    from .count import LANG_PREFIX

    top = {g: int(table.column(LANG_PREFIX + g).to_numpy().max(initial=0)) for g in langs}
    check_weight_bound(top, weights_by_lang)
    w = np.zeros(table.num_rows, dtype=np.int64)
    for g in langs:
        wg = int(weights_by_lang.get(g, 0))
        if wg:
            w += table.column(LANG_PREFIX + g).to_numpy() * np.int64(wg)
    return w


def plan_report(plan) -> dict[str, Any] | None:
    """The Han plan (a ``dwstok.training.HanPlan``) as JSON: its counts, the coverage reached
    and, when short, the characters; not the merge list itself."""
    if plan is None:
        return None
    report: dict[str, Any] = {"coverage": float(plan.coverage), "n_chars": int(plan.n_chars), "n_merges": int(plan.n_merges)}
    if len(plan.chars) <= 64:
        report["chars"] = list(plan.chars)
    return report
