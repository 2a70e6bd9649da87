"""`dwstok export`: Write tokenizer.json (HF), tokenizer_config.json and a .tiktoken file."""

from __future__ import annotations

from .options import stage_command

command = stage_command("export", "Write tokenizer.json (HF), tokenizer_config.json and a .tiktoken file.")
