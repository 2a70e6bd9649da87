"""The build pipeline: pretokenize → count → train → export → encode-shards.

Conventions every stage follows (DESIGN.md §2):

- **Entry point.** ``stages/<stage>.py`` defines ``STAGE = "<stage>"`` and
  ``run(config, inputs, out_dir, executor) -> Manifest``:

  - ``config``: a ``stages.config.Config`` (validated YAML);
  - ``inputs``: a ``stages.Inputs``: ``inputs.corpus`` (corpus paths, for the stages
    that read the corpus) and ``inputs.upstream(stage, config=config, keys=UPSTREAM_KEYS)``
    → that stage's finished output folder and ``Manifest``, every output checked by its
    sha256 (raises ``InputError`` "run `dwstok <stage>` first", ``ModelFileError`` for a
    corrupt file, ``PatternMismatchError`` when it was built with other config sections);
  - ``out_dir``: the stage's own folder (``<workdir>/<stage>``), created if needed;
  - ``executor``: a ``stages.executors.Executor``; map work goes through
    ``executor.map(fn, items, label=..., total_bytes=...)`` with a module-level ``fn``
    and picklable items; one-off work reports through ``executor.progress.note()``.

  The CLI only parses arguments, builds these four and renders progress.

- **Up to date.** A stage first computes ``config_hash`` (``config.hash_of(<the sections
  it reads>)``) and ``inputs_hash`` (upstream ``Manifest.output_hash`` values, or
  ``corpus_fingerprint`` of the shards). If ``manifest.up_to_date(out_dir, STAGE,
  config_hash, inputs_hash)`` returns a manifest, the stage returns it untouched
  (``.up_to_date`` is True). Otherwise it opens ``staging = manifest.Staging(out_dir,
  STAGE, config_hash)`` and runs, writing into ``staging.dir``
  (``<out_dir>/.staging-<config hash>/``), never into ``out_dir``; it ends with
  ``return staging.commit(Manifest(...))``, which renames the new files into place,
  manifest last. Until then the previous result stays intact and up to date for its
  own config, so bad input or a crash mid-stage damages nothing written before.

- **Files.** Arrow IPC with zstd (``manifest.write_table``) for data, JSON
  (``manifest.write_json``) for what people read. Everything is written under a temporary
  name and ``os.replace``'d into place (``manifest.atomic_path``). ``_manifest.json`` is
  written last (by ``staging.commit``) with the config hash, inputs hash, every
  output's sha256 and size, counts, timings and ``built_with``
  (``lineage.built_with(config, CONFIG_KEYS, upstream.built_with)``: what shaped it).

- **Map stages** (pretokenize, encode-shards): one shard per input file or group of
  Parquet row groups (``corpus.plan_shards``), output ``part-NNNNN.arrow`` and a marker
  ``part-NNNNN.json`` written after it (``manifest.mark_shard_done``), both in the
  staging folder. A shard whose marker matches its key (config hash + shard input) is
  not recomputed (``manifest.shard_done``), so a crashed run resumes shard by shard
  (``Staging(..., reuse_parts=True)`` also reuses matching shards of the committed
  result); leftovers of a larger earlier run are removed
  (``manifest.remove_stale_parts(staging.dir, keep=...)``).
  Uncompressed JSONL/txt files above ``corpus.split_bytes`` are planned as several
  byte-range shards (``corpus.plan_shards``). For progress inside a shard, run the map
  inside ``with shard_progress.channel(executor, n) as rep``, put ``rep`` in each task
  and meter each batch (``shard_progress.meter(rep, limit=shard.bytes).add(bytes=
  batch.consumed, docs=...)``), returning only the unreported remainder as the
  result's ``bytes``/``docs`` (see ``stages/pretokenize.py``).

- **One run per workdir.** Whatever writes into a workdir holds
  ``stages.lock.workdir_lock(workdir)`` for its whole run (the CLI does), so stages of
  two configs never interleave and no run cleans away another's staging files.

- **Determinism.** Output bytes depend only on config and inputs: never on worker count,
  executor, thread scheduling or hash order (sort group-by results; reduce shards in
  index order).

- **Errors.** User mistakes and bad input raise ``dwstok.errors`` types
  (``ConfigError``, ``InputError``, ``ModelFileError``, ``PatternMismatchError``) with a
  message that says what to do; never ``assert`` or a bare ``ValueError``.
"""

from __future__ import annotations

from .inputs import Inputs

STAGES = ("pretokenize", "count", "train", "export", "encode-shards")
"""Stage names in build order (CLI names; modules use underscores)."""


def module_name(stage: str) -> str:
    """``encode-shards`` → ``stages.encode_shards``."""
    return "stages." + stage.replace("-", "_")


def get_run(stage: str):
    """The ``run`` function of a stage, imported on demand."""
    import importlib

    if stage not in STAGES:
        from dwstok.errors import ConfigError

        raise ConfigError(f"unknown stage {stage!r}: one of {', '.join(STAGES)}")
    return importlib.import_module(module_name(stage)).run


__all__ = ["STAGES", "Inputs", "get_run", "module_name"]
