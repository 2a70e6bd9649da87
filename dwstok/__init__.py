"""dwstok: build and run DWSLMTok, a byte-level BPE tokenizer with the o200k pretokenizer.

>>> from dwstok import Tokenizer
>>> tok = Tokenizer.load("work/demo/train/model.json")        # doctest: +SKIP
>>> tok.decode(tok.encode("héllo 2026")) == "héllo 2026"      # doctest: +SKIP
True
>>> tok = Tokenizer.load("work/demo/export")                  # an export folder works too  # doctest: +SKIP
>>> enc = load_tiktoken("work/demo/export")                   # a tiktoken.Encoding  # doctest: +SKIP
"""

from __future__ import annotations

from .errors import ConfigError, DwstokError, InputError, ModelFileError, PatternMismatchError
from .patterns import PATTERNS

# The rest loads on first use (PEP 562): the pipeline imports ``dwstok.errors`` or
# ``dwstok.durable`` in every process, and should not pay for Numba and the kernels
# (about half a second a process) unless it calls them.
_LAZY = {
    "ShardReader": "shards",
    "StochasTok": "stochastok",
    "load_tiktoken": "tiktoken_compat",
    "Tokenizer": "tokenizer",
    "train_bpe": "training",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "PATTERNS",
    "ConfigError",
    "DwstokError",
    "InputError",
    "ModelFileError",
    "PatternMismatchError",
    "ShardReader",
    "StochasTok",
    "Tokenizer",
    "load_tiktoken",
    "train_bpe",
]
