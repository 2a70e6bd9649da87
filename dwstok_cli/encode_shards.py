"""`dwstok encode-shards`: Encode the corpus into uint16 token shards with the trained model."""

from __future__ import annotations

import click

from .options import stage_options


@click.command("encode-shards")
@stage_options
def command(config, corpus, workdir, workers, executor, ray_address, on_invalid, as_json):
    """Encode the corpus into uint16 token shards with the trained model.

    CONFIG is a YAML build config (configs/32.3.yaml). Output goes to WORKDIR/encode-shards/;
    a stage whose inputs and config are unchanged is skipped as up to date.
    """
    from .runner import run_stages

    run_stages(
        ["encode-shards"],
        config=config,
        corpus=corpus,
        workdir=workdir,
        workers=workers,
        executor=executor,
        ray_address=ray_address,
        on_invalid=on_invalid,
        as_json=as_json,
    )
