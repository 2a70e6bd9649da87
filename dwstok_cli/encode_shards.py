"""`dwstok encode-shards`: Encode the corpus into uint16 token shards with the trained model."""

from __future__ import annotations

from .options import stage_command

command = stage_command("encode-shards", "Encode the corpus into uint16 token shards with the trained model.")
