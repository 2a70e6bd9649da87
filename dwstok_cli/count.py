"""`dwstok count`: Reduce the pretokenize shards to unique pieces with per-language counts."""

from __future__ import annotations

from .options import stage_command

command = stage_command("count", "Reduce the pretokenize shards to unique pieces with per-language counts.")
