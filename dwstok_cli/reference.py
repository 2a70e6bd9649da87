"""The reference tokenizers `dwstok encode --compare` and `dwstok page --compare` show.

They come from a folder given by ``--reference-dir`` or ``$DWSTOK_REFTOK`` that holds
``r50k_base.tiktoken`` (GPT-2), ``o200k_base.tiktoken`` (GPT-4o), ``encodings.json``
(their patterns and specials, as tiktoken spells them) and
``mistral7b_v0.1.tokenizer.model`` (Mistral 7B's SentencePiece model).

>>> parse_compare("gpt2, o200k")
['gpt2', 'o200k']
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from dwstok.errors import InputError, ModelFileError

ENV = "DWSTOK_REFTOK"
NAMES = ("gpt2", "mistral", "o200k")
ENCODINGS = "encodings.json"
TIKTOKEN = {"gpt2": "r50k_base", "o200k": "o200k_base"}  # name -> encodings.json key
MISTRAL = "mistral7b_v0.1.tokenizer.model"
LABELS = {"gpt2": "GPT-2 (r50k_base)", "o200k": "GPT-4o (o200k_base)", "mistral": "Mistral 7B v0.1"}


def parse_compare(value: str | None) -> list[str]:
    """``"gpt2,o200k"`` -> ``["gpt2", "o200k"]``; an unknown name is an InputError."""
    names = [n.strip() for n in (value or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise InputError(f"--compare names {', '.join(unknown)}; choose from {','.join(NAMES)}")
    return list(dict.fromkeys(names))


def reference_dir(option: str | None) -> Path:
    """The folder of reference files: the option, else ``$DWSTOK_REFTOK``."""
    d = option or os.environ.get(ENV)
    if not d:
        raise InputError(f"--compare needs the reference tokenizers: pass --reference-dir DIR or set {ENV}")
    p = Path(d)
    if not p.is_dir():
        raise InputError(f"reference folder {p} not found (--reference-dir / {ENV})")
    return p


def _file(d: Path, name: str) -> Path:
    p = d / name
    if not p.is_file():
        raise InputError(f"{p} not found: the reference folder needs {name}")
    return p


def tiktoken_spec(d: Path, name: str) -> dict[str, Any]:
    """``{"path", "pattern", "specials"}`` of GPT-2 or o200k, from ``encodings.json``."""
    key = TIKTOKEN[name]
    path = _file(d, ENCODINGS)
    try:
        enc = json.loads(path.read_text(encoding="utf-8"))["encodings"][key]
        return {"path": _file(d, enc.get("file", f"{key}.tiktoken")), "pattern": enc["pat_str"], "specials": enc["special_tokens"]}
    except (ValueError, KeyError, TypeError) as e:
        raise ModelFileError(f"{path} has no usable entry for {key} ({e})") from None


@dataclass
class Reference:
    """One reference tokenizer: ``encode(text) -> ids`` and ``token_bytes(id)``."""

    name: str
    label: str
    n_vocab: int
    encode: Callable[[str], list[int]]
    token_bytes: Callable[[int], bytes]


def load(name: str, d: Path) -> Reference:
    """Reference tokenizer ``name`` (one of :data:`NAMES`) from folder ``d``."""
    if name in TIKTOKEN:
        from dwstok import Tokenizer

        spec = tiktoken_spec(d, name)
        tok = Tokenizer.from_tiktoken(spec["path"], pattern=spec["pattern"], special_tokens=spec["specials"])
        return Reference(name, LABELS[name], tok.n_vocab, tok.encode_ordinary, lambda i: tok.decode_bytes([i]))
    from tokenizers import Tokenizer as HFTokenizer

    from .spm_convert import spm_tokenizer_json, token_bytes

    doc = spm_tokenizer_json(_file(d, MISTRAL))
    hf = HFTokenizer.from_str(json.dumps(doc))
    pieces = {i: p for p, i in doc["model"]["vocab"].items()}
    return Reference(
        name,
        LABELS[name],
        len(pieces),
        lambda text: hf.encode(text, add_special_tokens=False).ids,
        lambda i: token_bytes(pieces[i]),
    )
