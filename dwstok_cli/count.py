"""`dwstok count`: Reduce the pretokenize shards to unique pieces with per-language counts."""

from __future__ import annotations

import click

from .options import stage_options


@click.command("count")
@stage_options
def command(config, corpus, workdir, workers, executor, ray_address, on_invalid, as_json):
    """Reduce the pretokenize shards to unique pieces with per-language counts.

    CONFIG is a YAML build config (configs/32.3.yaml). Output goes to WORKDIR/count/;
    a stage whose inputs and config are unchanged is skipped as up to date.
    """
    from .runner import run_stages

    run_stages(
        ["count"],
        config=config,
        corpus=corpus,
        workdir=workdir,
        workers=workers,
        executor=executor,
        ray_address=ray_address,
        on_invalid=on_invalid,
        as_json=as_json,
    )
