"""`dwstok train`: Learn the merges (language weights, forced Han merges) → train/model.json."""

from __future__ import annotations

import click

from .options import stage_options


@click.command("train")
@stage_options
def command(config, corpus, workdir, workers, executor, ray_address, on_invalid, as_json):
    """Learn the merges (language weights, forced Han merges) → train/model.json.

    CONFIG is a YAML build config (configs/32.3.yaml). Output goes to WORKDIR/train/;
    a stage whose inputs and config are unchanged is skipped as up to date.
    """
    from .runner import run_stages

    run_stages(
        ["train"],
        config=config,
        corpus=corpus,
        workdir=workdir,
        workers=workers,
        executor=executor,
        ray_address=ray_address,
        on_invalid=on_invalid,
        as_json=as_json,
    )
