"""Options shared by the stage commands (one decorator, so every stage reads alike)."""

from __future__ import annotations

import click

EXECUTORS = ("local", "ray")
# stages.STAGES, spelled out so that `dwstok --help` imports no stage (a test keeps them equal).
BUILD_STAGES = ("pretokenize", "count", "train", "export", "encode-shards")


def _set_debug(ctx: click.Context, _param, value: bool) -> bool:
    if value:
        ctx.ensure_object(dict)
        ctx.obj["debug"] = True
    return value


def set_option(fn):
    """``--set KEY=VALUE`` (repeatable) -> ``overrides``: config overrides for sweeps,
    validated like the file (stages.config.apply_overrides)."""
    return click.option(
        "--set",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        help="Override a config key, e.g. --set balance.alpha=0.5 (repeatable; "
        "VALUE is YAML; null restores the default). `dwstok config keys` lists the keys.",
    )(fn)


def stage_options(fn):
    """CONFIG plus --corpus/--workdir/--workers/--executor/--ray-address/--ray-timeout/--wait/
    --on-invalid/--json/-q/-v."""
    decorators = [
        click.argument("config", type=click.Path(dir_okay=False)),
        click.option(
            "--corpus",
            "corpus",
            multiple=True,
            type=click.Path(),
            help="Corpus file, folder, glob or fsspec URL (Parquet, JSONL, txt; JSONL and txt also "
            ".gz/.bz2/.zst/.xz/.lz4); repeatable. Default: corpus.paths in the config.",
        ),
        click.option(
            "--skip-unknown",
            is_flag=True,
            default=None,
            help="Skip (with a warning) a folder's files of unknown format instead of stopping (corpus.skip_unknown).",
        ),
        click.option(
            "--max-bytes",
            type=click.IntRange(min=1),
            default=None,
            metavar="N",
            help="Read a deterministic sample of about N bytes (whole shards) for a trial run (corpus.max_bytes).",
        ),
        click.option(
            "--workdir",
            type=click.Path(file_okay=False),
            default="work",
            show_default=True,
            help="Where stage outputs go (<workdir>/<stage>/).",
        ),
        click.option(
            "--workers",
            type=click.IntRange(min=1),
            default=None,
            help="Parallel workers [default: the CPUs this process may use (sched_getaffinity)].",
        ),
        click.option(
            "--executor",
            type=click.Choice(EXECUTORS),
            default="local",
            show_default=True,
            help="local: a process pool; ray: tasks on a Ray cluster.",
        ),
        click.option("--ray-address", default=None, metavar="ADDR", help="Ray cluster to join (ray.init(address=...)); implies --executor ray."),
        click.option(
            "--ray-timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=30.0,
            show_default=True,
            envvar="DWSTOK_RAY_TIMEOUT",
            metavar="SECONDS",
            help="Give up joining the Ray cluster after this long (env DWSTOK_RAY_TIMEOUT).",
        ),
        click.option(
            "--wait",
            is_flag=True,
            help="When another dwstok run holds the workdir, wait for it instead of stopping (exit 75).",
        ),
        click.option(
            "--wait-timeout",
            type=click.FloatRange(min=0),
            default=None,
            metavar="SECONDS",
            help="Wait at most this long for the workdir (implies --wait).",
        ),
        click.option(
            "--on-invalid",
            type=click.Choice(["error", "skip", "replace"]),
            default=None,
            help="Invalid UTF-8 in the corpus: stop (default), skip the document, or replace with U+FFFD.",
        ),
        click.option(
            "--json",
            "as_json",
            is_flag=True,
            help='Print a JSON summary on stdout (schema "dwstok-run/1": a list of stage records, '
            "and an error record with its exit code when a stage fails).",
        ),
        click.option("-q", "--quiet", is_flag=True, help="Print errors only (no progress, no summary lines)."),
        click.option("-v", "--verbose", count=True, help="Also print each stage's hashes, executor and timings."),
        click.option("--debug", is_flag=True, expose_value=False, callback=_set_debug, is_eager=True, help="Show tracebacks on errors."),
    ]
    for d in reversed(decorators):
        fn = d(fn)
    return set_option(fn)


_STAGE_HELP = """

    CONFIG is a YAML build config (a file, or a preset: 32.1, 32.2, 32.3, demo; see
    `dwstok config list`). Output goes to WORKDIR/{out}/;
    a stage whose inputs and config are unchanged is skipped as up to date.
    """


def stage_command(name: str, summary: str, *, all_stages: bool = False, help: str | None = None):
    """A click command that runs stage ``name`` (or every stage) with the shared options.

    >>> stage_command("count", "Reduce the shards.").name
    'count'
    """

    def command(until=None, **options):
        from .runner import run_stages

        if all_stages:
            from stages import STAGES  # imported here: `dwstok --help` stays instant

            todo = list(STAGES)
            if until is not None:
                todo = todo[: todo.index(until) + 1]
        else:
            todo = [name]
        run_stages(todo, **options)

    command.__doc__ = summary + (help if help is not None else _STAGE_HELP.format(out=name))
    fn = stage_options(command)
    if all_stages:
        # One process for several stages: the interpreter, imports and worker pool
        # start once, not once a stage (about half a second each).
        fn = click.option(
            "--until",
            type=click.Choice(BUILD_STAGES),
            default=None,
            help="Stop after this stage (e.g. --until train: pretokenize, count and train).",
        )(fn)
    return click.command(name)(fn)
