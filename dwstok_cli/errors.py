"""Errors → one ``Error: …`` line and an exit code; tracebacks only with ``--debug``.

Exit codes: 1 other dwstok errors, 2 usage and config errors, 3 bad input, 4 bad model
file, 5 pattern/version mismatch, 70 an internal error (a bug), 130 interrupted.
"""

from __future__ import annotations

import sys

import click

EXIT_CODES = {
    "ConfigError": 2,
    "InputError": 3,
    "ModelFileError": 4,
    "PatternMismatchError": 5,
}
INTERNAL = 70


def exit_code(exc: BaseException) -> int:
    for cls in type(exc).__mro__:
        if cls.__name__ in EXIT_CODES:
            return EXIT_CODES[cls.__name__]
    return getattr(exc, "exit_code", 1)


class ErrorHandlingGroup(click.Group):
    """A click group whose commands' exceptions become one error line."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:
            # `dwstok info x | head`: the reader went away; exit quietly as `cat` would.
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(141)
        except KeyboardInterrupt:
            if _debug(ctx):
                raise
            click.echo("Error: interrupted", err=True)
            ctx.exit(130)
        except Exception as e:  # noqa: BLE001 - the CLI boundary
            from dwstok.errors import DwstokError

            if _debug(ctx):
                raise
            if isinstance(e, DwstokError):
                click.echo(f"Error: {_one_line(str(e))}", err=True)
                ctx.exit(exit_code(e))
            click.echo(
                f"Error: internal error ({type(e).__name__}: {_one_line(str(e))}); "
                "rerun with --debug for the traceback and report it",
                err=True,
            )
            ctx.exit(INTERNAL)


def _debug(ctx: click.Context) -> bool:
    return bool((ctx.obj or {}).get("debug")) or "--debug" in sys.argv[1:2]


def _one_line(msg: str) -> str:
    return " ".join(msg.split("\n")).strip()
