"""Stage ``encode-shards``: every corpus document as token ids, one shard per input shard.

A map stage. Each input shard (``corpus.plan_shards``) is streamed batch by batch; each
batch's text goes from its Arrow buffers straight into
``Tokenizer.encode_utf8_batch`` (no per-document Python), and the ids land in
``part-NNNNN.arrow`` in the ``dwstok-shard/1`` format of :mod:`dwstok.shards`
(uncompressed Arrow IPC, ``large_list<uint16>`` per document, the document's ``lang``,
the model's sha256, version and pattern in the schema metadata), read back zero-copy by
``dwstok.shards.ShardReader``.

``index.json`` lists, per shard, its file, source, documents, tokens and text bytes, and
per language the same totals (bytes/token per language comes from here). Per-document
token counts are the list offsets inside each shard (``ShardReader.doc_lengths``).

The model is ``train/model.json``; one whose version or pattern differs from the config
is refused (``PatternMismatchError``) before anything is written. The shard job runs
outside the GIL, so local workers are threads of this process sharing one loaded model
(``map(..., gil_free=True)``); each encodes on one thread, so ``--workers`` is the whole
parallelism and the output bytes are the same for any worker count.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dwstok import kernel_cache
from dwstok.errors import InputError, ModelFileError
from dwstok.shards import FORMAT, ShardWriter, shard_dtype

from . import shard_progress
from .config import Config
from .corpus import Shard, corpus_fingerprint, plan_shards, read_batches, total_bytes
from .executors import Executor
from .inputs import Inputs
from .lineage import built_with
from .manifest import (
    Manifest,
    Staging,
    Timer,
    hash_file,
    hash_obj,
    mark_shard_done,
    part_name,
    remove_stale_parts,
    shard_done,
    up_to_date,
    write_json,
)
from .train import CONFIG_KEYS as MODEL_KEYS

STAGE = "encode-shards"
UPSTREAM = "train"
# The model must have been trained with this config's model sections (not its corpus
# reading options: another corpus may be encoded with it).
UPSTREAM_KEYS = MODEL_KEYS
MODEL_FILE = "model.json"
INDEX = "index.json"
CONFIG_KEYS = ("version", "pattern", "special_tokens", "corpus")


def model_upstream(path: str | Path, config: Config) -> tuple[Path, Manifest, Path]:
    """(folder, manifest, model file) of an existing model given as ``--model PATH``: a
    train folder or a ``model.json``. In a train folder (one with its ``_manifest.json``)
    it is checked like the workdir's own (sha256, config sections); a model.json alone is
    only checked for version and pattern (on load), and its sha256 stands for its inputs.
    """
    from .inputs import Inputs
    from .manifest import MANIFEST

    p = Path(path)
    if not p.exists():
        raise InputError(f"--model {p} not found: give a train folder or a model.json")
    folder, file = (p, p / MODEL_FILE) if p.is_dir() else (p.parent, p)
    if not file.is_file():
        raise InputError(f"--model {p}: no {MODEL_FILE} in this folder; give a train folder or a model.json")
    if (folder / MANIFEST).is_file() and file.name == MODEL_FILE:
        d, up = Inputs(dirs={UPSTREAM: str(folder)}).upstream(UPSTREAM, config=config, keys=UPSTREAM_KEYS)
        return d, up, d / MODEL_FILE
    up = Manifest(stage=UPSTREAM, config_hash="", inputs_hash="", outputs={MODEL_FILE: hash_file(file)})
    return folder, up, file


def load_model(model_path: str | Path, config: Config):
    """The trained model, refused (``PatternMismatchError``) if its version or pattern
    is not the config's."""
    from dwstok.tokenizer import Tokenizer

    return Tokenizer.load(model_path, expect_pattern=config.pattern, expect_version=config.version)


# While the kernels compile (a cold Numba cache) a Tokenizer encodes through HF tokenizers,
# many times slower than the kernels, and the compile, at a low priority beside it, takes
# a minute or more. A corpus over this size waits for the kernels instead.
BRIDGE_MAX_BYTES = 64 << 20


def run(config: Config, inputs: Inputs, out_dir: str | Path, executor: Executor) -> Manifest:
    """Encode every corpus shard into ``out_dir/part-NNNNN.arrow`` plus ``index.json``."""
    out_dir = Path(out_dir)
    if inputs.model is not None:
        up_dir, up, model_path = model_upstream(inputs.model, config)
    else:
        # refuses a model trained under other config sections (PatternMismatchError)
        up_dir, up = inputs.upstream(UPSTREAM, config=config, keys=UPSTREAM_KEYS)
        model_path = up_dir / MODEL_FILE
    model = str(model_path.resolve())
    with Timer() as t_load:
        # refuses another version/pattern before anything is written; with workers=1
        # the shards run in this process and reuse this very load
        tok = _worker_model(model, None, config)
    with Timer() as t_plan:
        shards = plan_shards(inputs.require_corpus(), config.corpus)
    if not shards or all(s.bytes == 0 for s in shards):
        raise InputError("empty corpus: the files given hold no documents")
    big = total_bytes(shards) > BRIDGE_MAX_BYTES
    if big and not kernel_cache.usable():
        kernel_cache.wait()  # a big corpus: the kernels, even after a compile, are sooner done
    config_hash = config.hash_of(*CONFIG_KEYS)
    inputs_hash = hash_obj({"corpus": corpus_fingerprint(shards), UPSTREAM: up.output_hash})
    done = up_to_date(out_dir, STAGE, config_hash, inputs_hash)
    if done:
        return done
    staging = Staging(out_dir, STAGE, config_hash, reuse_parts=True)  # old result kept until commit

    # The shard job is Arrow I/O and a nogil kernel: threads, not processes (executors.py).
    with Timer() as t_map, shard_progress.channel(executor, len(shards), gil_free=True) as reporter:
        tasks = [
            _Task(
                config,
                s,
                str(staging.dir),
                model,
                tok.sha256,
                hash_obj({"config": config_hash, "model": tok.sha256, "shard": s.key(), "index": s.index}),
                reporter,
                big,
            )
            for s in shards
        ]
        results = list(
            executor.map(_encode_shard, tasks, label=STAGE, total_bytes=total_bytes(shards), gil_free=True)
        )
    remove_stale_parts(staging.dir, keep=len(shards))

    index = _index(tok, shards, results)
    if index["docs"] == 0:
        raise InputError(f"empty corpus: no documents with text in {', '.join(inputs.corpus)}")
    outputs: dict[str, Any] = {}
    for s, r in zip(shards, results):
        outputs.update(r["outputs"])
        marker = part_name(s.index, ".json")
        outputs[marker] = hash_file(staging.dir / marker)
    outputs[INDEX] = write_json(staging.dir / INDEX, index)
    m = Manifest(
        stage=STAGE,
        config_hash=config_hash,
        inputs_hash=inputs_hash,
        outputs=outputs,
        counts={
            "shards": len(shards),
            "resumed_shards": sum(r["resumed"] for r in results),
            "docs": index["docs"],
            "tokens": index["tokens"],
            "bytes": index["bytes"],
            "skipped_docs": index["skipped_docs"],
            "replaced_docs": index["replaced_docs"],
        },
        timings={"load_s": t_load.seconds, "plan_s": t_plan.seconds, "map_s": t_map.seconds},
        info={
            "format": FORMAT,
            "dtype": index["dtype"],
            "version": tok.version,
            "pattern": tok.pattern,
            "pattern_name": tok.pattern_name,
            "model_sha256": tok.sha256,
            "bytes_per_token": index["bytes_per_token"],
        },
        inputs={UPSTREAM: {"dir": str(up_dir), "output_hash": up.output_hash},
                "corpus": [s.key() for s in shards]},
        built_with=built_with(config, CONFIG_KEYS, up.built_with),
    )
    return staging.commit(m)


@dataclass(frozen=True)
class _Task:
    config: Config
    shard: Shard
    out_dir: str
    model: str
    model_sha256: str
    key: str
    progress: Any = None  # a shard_progress.Reporter, or None
    wait_for_kernels: bool = False  # a big corpus: a worker process (Ray) waits, as the stage did

    @property
    def bytes(self) -> int:
        return self.shard.bytes


def _worker_model(path: str, sha256: str | None, config: Config):
    """The model, loaded once per process (not once per shard) and checked against the
    hash the stage started with."""
    st = Path(path).stat()  # part of the cache key: a retrained model is reloaded
    tok = _load_cached(path, st.st_mtime_ns, st.st_size, config)
    if sha256 is not None and tok.sha256 != sha256:
        _load_cached.cache_clear()
        raise ModelFileError(f"{path} changed while encode-shards was running; run it again")
    return tok


@functools.lru_cache(maxsize=1)
def _load_cached(path: str, mtime_ns: int, size: int, config: Config):
    return load_model(path, config)


def _encode_shard(task: _Task) -> dict[str, Any]:
    """One shard's whole job: read, encode, write, mark done. Resumable."""
    import pyarrow.compute as pc

    out_dir = Path(task.out_dir)
    prev = shard_done(out_dir, task.shard.index, task.key)
    if prev is not None:
        return shard_progress.shard_result(prev.outputs, prev.stats, shard_bytes=task.shard.bytes)

    if task.wait_for_kernels and not kernel_cache.usable():
        kernel_cache.wait()
    tok = _worker_model(task.model, task.model_sha256, task.config)
    name = part_name(task.shard.index)
    by_lang: dict[str, Counter] = {}
    skipped = replaced = 0
    shown = shard_progress.meter(task.progress, limit=task.shard.bytes)
    with ShardWriter(
        out_dir / name,
        model_sha256=tok.sha256,
        version=tok.version,
        pattern=tok.pattern,
        n_vocab=tok.n_vocab,
        with_lang=True,
        source=task.shard.describe(),
    ) as w:
        for batch in read_batches(task.shard, task.config.corpus):
            skipped += batch.skipped
            replaced += batch.replaced
            n = len(batch.text)
            if n == 0:
                shown.add(bytes=batch.consumed)
                continue
            data, offsets = _utf8_buffers(batch.text)
            # One thread per worker: --workers is the parallelism (see module docstring).
            ids, doc_offsets = tok.encode_utf8_batch(data, offsets, num_threads=1)
            w.write(ids, doc_offsets, batch.lang)
            enc = pc.dictionary_encode(batch.lang)
            li = enc.indices.to_numpy(zero_copy_only=False)
            k = len(enc.dictionary)
            docs = np.bincount(li, minlength=k)
            nbytes = np.bincount(li, weights=np.diff(offsets), minlength=k)
            ntok = np.bincount(li, weights=np.diff(doc_offsets), minlength=k)
            for j, lang in enumerate(enc.dictionary.to_pylist()):
                c = by_lang.setdefault(lang, Counter())
                c["docs"] += int(docs[j])
                c["bytes"] += int(nbytes[j])
                c["tokens"] += int(ntok[j])
            shown.add(bytes=batch.consumed, docs=n)
    info = hash_file(out_dir / name)
    stats = {
        "docs": sum(c["docs"] for c in by_lang.values()),
        "tokens": sum(c["tokens"] for c in by_lang.values()),
        "text_bytes": sum(c["bytes"] for c in by_lang.values()),
        "skipped": skipped,
        "replaced": replaced,
        "by_lang": {g: dict(sorted(by_lang[g].items())) for g in sorted(by_lang)},
        "source": task.shard.describe(),
    }
    mark_shard_done(out_dir, task.shard.index, task.key, {name: info}, stats)
    return shard_progress.shard_result({name: info}, stats, shard_bytes=task.shard.bytes, shown=shown)


def _utf8_buffers(text) -> tuple[np.ndarray, np.ndarray]:
    """(data uint8, offsets int64) of a large_string array, zero copy."""
    bufs = text.buffers()
    n = len(text)
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[text.offset : text.offset + n + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return data, offsets


def _index(tok, shards: list[Shard], results: list[dict[str, Any]]) -> dict[str, Any]:
    by_lang: dict[str, Counter] = {}
    rows = []
    for s, r in zip(shards, results):
        st = r["stats"]
        rows.append(
            {
                "file": part_name(s.index),
                "source": st["source"],
                "docs": st["docs"],
                "tokens": st["tokens"],
                "bytes": st["text_bytes"],
            }
        )
        for g, c in st["by_lang"].items():
            by_lang.setdefault(g, Counter()).update(c)
    docs = sum(x["docs"] for x in rows)
    tokens = sum(x["tokens"] for x in rows)
    nbytes = sum(x["bytes"] for x in rows)
    return {
        "format": FORMAT,
        "model_sha256": tok.sha256,
        "version": tok.version,
        "pattern": tok.pattern,
        "n_vocab": tok.n_vocab,
        "dtype": str(shard_dtype(tok.n_vocab)),
        "docs": docs,
        "tokens": tokens,
        "bytes": nbytes,
        "bytes_per_token": round(nbytes / tokens, 4) if tokens else None,
        "skipped_docs": sum(r["stats"]["skipped"] for r in results),
        "replaced_docs": sum(r["stats"]["replaced"] for r in results),
        "by_lang": {
            g: {
                "docs": c["docs"],
                "bytes": c["bytes"],
                "tokens": c["tokens"],
                "bytes_per_token": round(c["bytes"] / c["tokens"], 4) if c["tokens"] else None,
            }
            for g, c in sorted(by_lang.items())
        },
        "shards": rows,
    }
