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
from .shards import ShardReader
from .stochastok import StochasTok
from .tiktoken_compat import load_tiktoken
from .tokenizer import Tokenizer
from .training import train_bpe

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
