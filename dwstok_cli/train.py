"""`dwstok train`: Learn the merges (language weights, forced Han merges) → train/model.json."""

from __future__ import annotations

from .options import stage_command

command = stage_command("train", "Learn the merges (language weights, forced Han merges) → train/model.json.")
