"""Run one or more stages from parsed options; print a summary (or ``--json``).

``--json`` prints one schema for every stage command and ``build``::

    {"schema": "dwstok-run/1", "ok": true, "exit_code": 0, "stages": [<stage record>, ...]}

one record per finished stage (``status`` "done" or "up to date"), and on a failure the
stages finished before it plus an error record
``{"stage": ..., "status": "error", "exit_code": N, "error": "..."}``, with the same
exit code and message as the ``Error:`` line on stderr.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

import click


def run_stages(
    stages: list[str],
    *,
    config: str,
    corpus: tuple[str, ...] = (),
    workdir: str = "work",
    workers: int | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    on_invalid: str | None = None,
    as_json: bool = False,
    overrides: tuple[str, ...] = (),
    wait: bool = False,
    wait_timeout: float | None = None,
    ray_timeout: float | None = None,
    quiet: bool = False,
    verbose: int = 0,
    model: str | None = None,
    out: str | None = None,
    skip_unknown: bool | None = None,
    max_bytes: int | None = None,
) -> list[dict[str, Any]]:
    summaries: list[dict[str, Any]] = []
    running: list[str | None] = [None]
    try:
        _run(stages, summaries, running, config=config, corpus=corpus, workdir=workdir, workers=workers,
             executor=executor, ray_address=ray_address, on_invalid=on_invalid, as_json=as_json,
             overrides=overrides, wait=wait, wait_timeout=wait_timeout, ray_timeout=ray_timeout,
             quiet=quiet, verbose=verbose, model=model, out=out,
             corpus_options={"on_invalid": on_invalid, "skip_unknown": skip_unknown, "max_bytes": max_bytes})
    except BaseException as e:
        if as_json and not isinstance(e, (SystemExit, click.exceptions.Exit)):
            from .errors import classify

            message, code = classify(e)
            record = {"stage": running[0], "status": "error", "exit_code": code, "error": message}
            click.echo(run_json(summaries + [record], code))
        raise
    if as_json:
        click.echo(run_json(summaries, 0))
    return summaries


SCHEMA = "dwstok-run/1"


def show_corpus_warnings(*, quiet: bool = False) -> None:
    """Print ``stages.corpus.CorpusWarning`` as one ``Warning: ...`` line (none under -q)."""
    import warnings

    from stages.corpus import CorpusWarning

    previous = warnings.showwarning
    if getattr(previous, "dwstok", False):
        previous = previous.previous

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, CorpusWarning):
            if not quiet:
                click.echo(f"Warning: {message}", err=True)
            return
        previous(message, category, filename, lineno, file, line)

    show.dwstok, show.previous = True, previous
    warnings.showwarning = show


def with_corpus_options(cfg, **options):
    """The config with the corpus options given on the command line (None: as configured)."""
    given = {k: v for k, v in options.items() if v is not None}
    return cfg.replace(corpus=dataclasses.replace(cfg.corpus, **given)) if given else cfg


def run_json(records: list[dict[str, Any]], code: int) -> str:
    """The ``--json`` document (schema ``dwstok-run/1``)."""
    doc = {"schema": SCHEMA, "ok": code == 0, "exit_code": code, "stages": records}
    return json.dumps(doc, indent=1, ensure_ascii=False)


def _run(stages, summaries, running, *, config, corpus, workdir, workers, executor, ray_address, on_invalid,
         as_json, overrides, wait, wait_timeout, ray_timeout, quiet, verbose, model, out, corpus_options) -> None:
    from stages import Inputs, get_run
    from stages.config import load_config
    from stages.early import EarlyLoads
    from stages.executors import make_executor
    from stages.lock import workdir_lock

    from .errors import run_in_thread
    from .progress import make_progress

    cfg = with_corpus_options(load_config(config, overrides=overrides), **corpus_options)
    show_corpus_warnings(quiet=quiet)
    if ray_address:
        executor = "ray"
    inputs = Inputs(corpus=tuple(corpus) or cfg.corpus.paths, workdir=workdir, model=model)

    def out_dir(stage: str) -> Path:
        # --out (encode-shards): its own folder, locked through its parent
        return Path(out) if out is not None else Path(workdir) / stage

    progress = make_progress(enabled=not quiet)
    # The whole run holds the workdir: stages of two configs never interleave, and no
    # other run's staging files are cleaned away under it.
    lock = workdir_lock(
        Path(out).resolve().parent if out is not None else workdir,
        wait=wait or wait_timeout is not None,
        timeout=wait_timeout,
        on_wait=lambda msg: None if quiet else click.echo(msg, err=True),
    )

    def work() -> None:
        with lock, make_executor(executor, workers, address=ray_address, progress=progress, ray_timeout=ray_timeout) as ex:
            loads = EarlyLoads.start(stages, cfg, ex)
            try:
                run_each(ex, loads)
            finally:
                loads.join()

    def run_each(ex, loads) -> None:
        for i, stage in enumerate(stages):
            loads.stage_started(i)
            running[0] = stage
            run = get_run(stage)
            # What the imports made (Numba's and Arrow's modules, most of the
            # process's objects) lives as long as the process. Frozen, it is out of
            # the collector's walks: those a stage's many new lists set off, and
            # release_memory's (bench/results/session21-training-20261204.md).
            gc.freeze()
            t0 = time.perf_counter()
            try:
                m = run(cfg, inputs, out_dir(stage), ex)
            except OSError as e:
                # A full disk reported by a write() names no file: name the stage folder.
                if getattr(e, "filename", None) is None:
                    e.dwstok_path = out_dir(stage)
                raise
            s = summary(stage, m, time.perf_counter() - t0, ex.describe())
            summaries.append(s)
            if stage != stages[-1]:
                release_memory()
            running[0] = None
            if not as_json and not quiet:
                click.echo(summary_line(s))
                if verbose:
                    click.echo(detail_lines(s))

    # After Ctrl-C the CLI leaves with os._exit (see run_in_thread); multiprocessing's
    # resource tracker then unlinks the pool's semaphores, and should not print a
    # warning about each under the one error line. (It takes its warning filters
    # from sys.warnoptions.)
    hush = "ignore::UserWarning:multiprocessing.resource_tracker"
    if hush not in sys.warnoptions:
        sys.warnoptions.append(hush)
    try:
        run_in_thread(work)
    except KeyboardInterrupt:
        progress.finish(ok=False)  # restore the terminal before the error line
        raise


def release_memory() -> None:
    """Between stages of one process, hand freed memory back to the system: Arrow's pool
    and glibc's arenas keep what a stage freed, and the next stage's peak would sit on
    top of it (`dwstok build` at 203 MB: 735 -> 635 MB in one trial)."""
    gc.collect()
    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        pass
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc (musl)
            pass


def summary(stage: str, m, seconds: float, executor: str) -> dict[str, Any]:
    return {
        "stage": stage,
        "status": "up to date" if m.up_to_date else "done",
        "out_dir": str(m.out_dir) if m.out_dir else None,
        "seconds": round(seconds, 3),
        "executor": executor,
        "config_hash": m.config_hash,
        "inputs_hash": m.inputs_hash,
        "output_hash": m.output_hash,
        "counts": m.counts,
        "timings": m.timings,
        "outputs": {k: {"sha256": v.sha256, "bytes": v.bytes} for k, v in m.outputs.items()},
    }


def detail_lines(s: dict[str, Any]) -> str:
    """``-v``: the hashes, executor and timings under a stage's summary line."""
    timings = ", ".join(f"{k} {v:.2f}s" for k, v in s["timings"].items() if isinstance(v, (int, float)))
    lines = [
        f"  config {s['config_hash'][:16]}, inputs {s['inputs_hash'][:16]}, output {s['output_hash'][:16]}",
        f"  executor {s['executor']}" + (f"; {timings}" if timings else ""),
    ]
    return "\n".join(lines)


# Count names that read badly as "<number> <name>".
_LABELS = {"n_vocab": "vocab size", "vocab_size": "vocab size"}


def summary_line(s: dict[str, Any]) -> str:
    from .progress import human_bytes

    if s["status"] == "up to date":
        return f"{s['stage']}: up to date ({s['out_dir']})"
    parts = []
    for k, v in s["counts"].items():
        if isinstance(v, bool):
            if v:
                parts.append(k.replace("_", " "))
        elif k == "bytes" and isinstance(v, int):
            parts.append(human_bytes(v))
        elif isinstance(v, int) and (v or k in ("docs", "merges")):
            parts.append(f"{v:,} {_LABELS.get(k, k.replace('_', ' '))}")
    return f"{s['stage']}: {', '.join(parts)} → {s['out_dir']} ({s['seconds']:.1f}s)"
