"""`dwstok build`: all five stages in order."""

from __future__ import annotations

from .options import stage_command

command = stage_command(
    "build",
    "Run pretokenize → count → train → export → encode-shards.",
    all_stages=True,
    help="""

    Each stage that is already up to date is skipped, so re-running after a crash or a
    config change redoes only what changed.
    """,
)
