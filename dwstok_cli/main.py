"""The ``dwstok`` command: a Click group; one module per command.

Only click is imported here, so ``dwstok --help`` is instant; each command imports the
pipeline when it runs.
"""

from __future__ import annotations

import click

from .errors import ErrorHandlingGroup

# auto_envvar_prefix: every option also reads DWSTOK_<COMMAND>_<OPTION>, e.g.
# DWSTOK_BUILD_WORKERS=4 or DWSTOK_BUILD_WORKDIR=/scratch/w (for cron and CI).
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100, "auto_envvar_prefix": "DWSTOK"}


@click.group(cls=ErrorHandlingGroup, context_settings=CONTEXT)
@click.option("--debug", is_flag=True, envvar="DWSTOK_DEBUG", help="Show tracebacks on errors.")
@click.version_option(package_name="dwstok", prog_name="dwstok")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Build DWSLMTok, a byte-level BPE tokenizer, from a multilingual corpus.

    \b
    corpus → pretokenize → count → train → export → encode-shards
    `dwstok build CONFIG --corpus DATA` runs all five; each stage also runs alone.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _register() -> None:
    from . import build, config_cmd, count, encode, encode_shards, export, info, page, pretokenize, status, train, verify
    from . import eval as evaluate

    for mod in (pretokenize, count, train, export, encode_shards, build, status, info, verify, evaluate, encode, page, config_cmd):
        cli.add_command(mod.command)


_register()

if __name__ == "__main__":  # pragma: no cover
    cli()
