"""The ``dwstok`` command: a Click group; one module per command.

Only click is imported here; a command's module is imported when that command runs
(or ``--help`` lists them), and it imports the pipeline only then, so every stage
process starts on what it needs.
"""

from __future__ import annotations

import click

from .errors import ErrorHandlingGroup

# auto_envvar_prefix: every option also reads DWSTOK_<COMMAND>_<OPTION>, e.g.
# DWSTOK_BUILD_WORKERS=4 or DWSTOK_BUILD_WORKDIR=/scratch/w (for cron and CI).
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100, "auto_envvar_prefix": "DWSTOK"}


# command name -> module of dwstok_cli that defines it (as ``command``)
COMMANDS = {
    "pretokenize": "pretokenize",
    "count": "count",
    "train": "train",
    "export": "export",
    "encode-shards": "encode_shards",
    "build": "build",
    "status": "status",
    "info": "info",
    "verify": "verify",
    "eval": "eval",
    "encode": "encode",
    "page": "page",
    "config": "config_cmd",
}


class LazyGroup(ErrorHandlingGroup):
    """Imports a command's module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, name: str):
        if name not in self.commands and name in COMMANDS:
            import importlib

            self.add_command(importlib.import_module(f"{__package__}.{COMMANDS[name]}").command, name)
        return self.commands.get(name)


@click.group(cls=LazyGroup, context_settings=CONTEXT)
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


def main() -> None:
    """The ``dwstok`` program: run the CLI, then leave without tearing the interpreter down.

    A stage process is done once the CLI returns, yet the interpreter's own shutdown
    (freeing Numba's, Arrow's and every module's objects one by one) kept it alive a
    good while longer. So the exit handlers run, the output is flushed, and the process
    ends with ``os._exit``. A thread that is not a daemon and still runs gets the
    ordinary exit, which waits for it.
    """
    quiet_idle_threads()
    fewer_collections()
    try:
        cli()
        code = 0
    except SystemExit as e:
        code = e.code
    leave(code)


def quiet_idle_threads() -> None:
    """Keep idle threads from spinning on the CPUs a stage needs, unless the user set
    these (the program sets them for itself and the processes it starts; importing this
    module changes nothing):

    - NumPy's OpenBLAS starts a thread per CPU when NumPy is imported, and each spins a
      while before it sleeps. No command does linear algebra: BLAS runs on one thread.
    - Numba's OpenMP threads (the learner's parallel steps) spin between steps, while the
      learner's own thread runs the serial part of a merge and the train stage makes the
      model's rows: they sleep instead.

    Both must be set before NumPy and Numba's threads load: the commands import them
    only once they run. What they save: bench/results/session34-20261205.md.
    """
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")


def fewer_collections() -> None:
    """Run Python's cyclic collector every 100,000 new objects, not every 700.

    At the default, the imports of Numba and Arrow set off hundreds of collections, each
    walking every object made so far, on the main thread, before the first stage starts
    (what they cost: bench/results/session52-20261207.md). The runner freezes what the
    imports made before each stage (``gc.freeze``), so later walks skip it; this spares
    the walks before. Garbage that is not a cycle is freed at once all the same; cycles
    wait for 100,000 new objects.
    """
    import gc

    gc.set_threshold(100_000, 50, 100)


def leave(code) -> None:
    """End the process with ``code`` (``SystemExit``'s: None, an int, or a message for
    stderr and exit 1) as described in :func:`main`."""
    import atexit
    import os
    import sys
    import threading

    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.current_thread()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more to say there
            pass
    os._exit(code or 0)


if __name__ == "__main__":  # pragma: no cover
    main()
