"""`dwstok pretokenize`: Split the corpus into pretokens and count them per shard."""

from __future__ import annotations

from .options import stage_command

command = stage_command("pretokenize", "Split the corpus into pretokens and count them per shard.")
