"""Run one or more stages from parsed options; print a summary (or ``--json``)."""

from __future__ import annotations

import dataclasses
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
) -> list[dict[str, Any]]:
    from stages import Inputs, get_run
    from stages.config import load_config
    from stages.executors import make_executor
    from stages.lock import workdir_lock

    from .errors import run_in_thread
    from .progress import make_progress

    cfg = load_config(config, overrides=overrides)
    if on_invalid:
        cfg = cfg.replace(corpus=dataclasses.replace(cfg.corpus, on_invalid=on_invalid))
    if ray_address:
        executor = "ray"
    inputs = Inputs(corpus=tuple(corpus) or cfg.corpus.paths, workdir=workdir)
    progress = make_progress()
    summaries = []
    # The whole run holds the workdir: stages of two configs never interleave, and no
    # other run's staging files are cleaned away under it.
    lock = workdir_lock(
        workdir,
        wait=wait or wait_timeout is not None,
        timeout=wait_timeout,
        on_wait=lambda msg: click.echo(msg, err=True),
    )

    def work() -> None:
        with lock, make_executor(executor, workers, address=ray_address, progress=progress, ray_timeout=ray_timeout) as ex:
            for stage in stages:
                run = get_run(stage)
                t0 = time.perf_counter()
                try:
                    m = run(cfg, inputs, Path(workdir) / stage, ex)
                except OSError as e:
                    # A full disk reported by a write() names no file: name the stage folder.
                    if getattr(e, "filename", None) is None:
                        e.dwstok_path = Path(workdir) / stage
                    raise
                s = summary(stage, m, time.perf_counter() - t0, ex.describe())
                summaries.append(s)
                if not as_json:
                    click.echo(summary_line(s))

    # After Ctrl-C the CLI leaves with os._exit (see run_in_thread); multiprocessing's
    # resource tracker then unlinks the pool's semaphores, and should not print a
    # warning about each under the one error line. (It takes its warning filters
    # from sys.warnoptions.)
    quiet = "ignore::UserWarning:multiprocessing.resource_tracker"
    if quiet not in sys.warnoptions:
        sys.warnoptions.append(quiet)
    try:
        run_in_thread(work)
    except KeyboardInterrupt:
        progress.finish(ok=False)  # restore the terminal before the error line
        raise
    if as_json:
        click.echo(json.dumps(summaries if len(summaries) > 1 else summaries[0], indent=1, ensure_ascii=False))
    return summaries


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
