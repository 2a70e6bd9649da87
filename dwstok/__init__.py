"""dwstok: build and run DWSLMTok, a byte-level BPE tokenizer with the o200k pretokenizer."""

from __future__ import annotations

from .errors import ConfigError, DwstokError, InputError, ModelFileError, PatternMismatchError
from .patterns import PATTERNS

__all__ = [
    "PATTERNS",
    "ConfigError",
    "DwstokError",
    "InputError",
    "ModelFileError",
    "PatternMismatchError",
]

# Tokenizer and train_bpe are added here as their modules land:
try:  # pragma: no cover - transitional
    from .tokenizer import Tokenizer  # noqa: F401

    __all__.append("Tokenizer")
except ImportError:
    pass
try:  # pragma: no cover - transitional
    from .train import train_bpe  # noqa: F401

    __all__.append("train_bpe")
except ImportError:
    pass
