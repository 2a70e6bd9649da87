"""`dwstok status`: what `dwstok build` would run, and why, without running anything."""

from __future__ import annotations

import json

import click

from .options import set_option


@click.command("status")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--corpus", multiple=True, type=click.Path(), help="As for build (default: corpus.paths in the config).")
@click.option("--workdir", type=click.Path(file_okay=False), default="work", show_default=True)
@click.option("--skip-unknown", is_flag=True, default=None, help="As for build.")
@click.option("--max-bytes", type=click.IntRange(min=1), default=None, metavar="N", help="As for build.")
@click.option("--wait", is_flag=True, help="When a dwstok run holds the workdir, wait for it instead of stopping (exit 75).")
@click.option("--json", "as_json", is_flag=True, help='Print {"schema": "dwstok-status/1", "stages": [...]}.')
@click.option("-q", "--quiet", is_flag=True, help="Print nothing; the exit code says it all.")
@set_option
@click.pass_context
def command(ctx, config, corpus, workdir, skip_unknown, max_bytes, wait, as_json, quiet, overrides):
    """Say, per stage, whether `dwstok build CONFIG` would run it and why: up to date, or
    would run (missing, config changed, inputs changed, corrupt, upstream would run).

    Exit code 0 when every stage is up to date, 1 when something would run (errors: as
    for build). Nothing is run or written; the workdir's lock is held only while reading.
    """
    from pathlib import Path

    from stages import Inputs
    from stages.config import load_config
    from stages.lock import workdir_lock
    from stages.status import stage_status

    from .runner import with_corpus_options

    cfg = with_corpus_options(load_config(config, overrides=overrides), skip_unknown=skip_unknown, max_bytes=max_bytes)
    inputs = Inputs(corpus=tuple(corpus) or cfg.corpus.paths, workdir=workdir)
    if Path(workdir).is_dir():
        # a run mid-swap would show half its result: read while no run holds the workdir
        with workdir_lock(workdir, wait=wait, on_wait=lambda msg: click.echo(msg, err=True)):
            verdicts = stage_status(cfg, inputs)
    else:
        verdicts = stage_status(cfg, inputs)
    todo = [v for v in verdicts if v.would_run]
    if as_json:
        doc = {"schema": "dwstok-status/1", "up_to_date": not todo, "stages": [v.to_json() for v in verdicts]}
        click.echo(json.dumps(doc, indent=1, ensure_ascii=False))
    elif not quiet:
        for v in verdicts:
            click.echo(v.line())
    ctx.exit(1 if todo else 0)
