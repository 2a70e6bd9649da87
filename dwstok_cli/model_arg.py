"""MODEL arguments of `dwstok encode` and `dwstok page`: a model file or a workdir."""

from __future__ import annotations

from pathlib import Path

MODEL_FILE = "model.json"


def model_path(arg: str) -> Path:
    """``work/32.3`` -> ``work/32.3/train/model.json``; a file stays as it is."""
    from dwstok.errors import InputError

    p = Path(arg)
    if p.is_dir():
        for cand in (p / "train" / MODEL_FILE, p / MODEL_FILE):
            if cand.is_file():
                return cand
        raise InputError(f"{p} is a folder without train/{MODEL_FILE}: pass a model file or a workdir whose train stage ran")
    if not p.is_file():
        raise InputError(f"model {p} not found: pass a model file (train/{MODEL_FILE}) or a workdir")
    return p


def load_model(arg: str):
    from dwstok import Tokenizer

    return Tokenizer.load(model_path(arg))
