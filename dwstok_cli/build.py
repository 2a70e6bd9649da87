"""`dwstok build`: all five stages in order."""

from __future__ import annotations

import click

from .options import stage_options


@click.command("build")
@stage_options
def command(config, corpus, workdir, workers, executor, ray_address, on_invalid, as_json):
    """Run pretokenize → count → train → export → encode-shards.

    Each stage that is already up to date is skipped, so re-running after a crash or a
    config change redoes only what changed.
    """
    from stages import STAGES

    from .runner import run_stages

    run_stages(
        list(STAGES),
        config=config,
        corpus=corpus,
        workdir=workdir,
        workers=workers,
        executor=executor,
        ray_address=ray_address,
        on_invalid=on_invalid,
        as_json=as_json,
    )
