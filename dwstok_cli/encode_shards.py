"""`dwstok encode-shards`: Encode the corpus into uint16 token shards with the trained model."""

from __future__ import annotations

import click

from .options import stage_options

_HELP = """Encode the corpus into uint16 token shards with the trained model.

    CONFIG is a YAML build config (a file, or a preset: 32.1, 32.2, 32.3, demo; see
    `dwstok config list`). The model is WORKDIR/train/model.json, or --model (a train
    folder or a model.json: encode another corpus with an existing model, no workdir to
    copy). Output goes to WORKDIR/encode-shards/, or --out DIR; a result whose inputs and
    config are unchanged is skipped as up to date.
    """


@click.command("encode-shards", help=_HELP)
@stage_options
@click.option("--model", "model", type=click.Path(exists=True), default=None, help="An existing model: a train folder or a model.json.")
@click.option("--out", "out", type=click.Path(file_okay=False), default=None, help="Write the shards here instead of WORKDIR/encode-shards.")
def command(**options):
    from .runner import run_stages

    run_stages(["encode-shards"], **options)
