"""Reading what ``dwstok export`` writes back into a :class:`~dwstok.Tokenizer`.

``Tokenizer.load`` takes any of: the native ``model.json``, the folder holding it (the
train stage's), an export folder, its ``tokenizer.json`` (HF tokenizers) or its
``tokenizer.tiktoken`` (with ``tiktoken.json`` beside it). Each gives the model's ids.

>>> kind_of("work/32.3/export")  # doctest: +SKIP
('hf', PosixPath('work/32.3/export/tokenizer.json'))
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from .errors import ModelFileError
from .patterns import PATTERNS

MODEL_FILE = "model.json"
HF_FILE = "tokenizer.json"
HF_CONFIG_FILE = "tokenizer_config.json"
TIKTOKEN_FILE = "tokenizer.tiktoken"
TIKTOKEN_META_FILE = "tiktoken.json"


@functools.lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (what ByteLevel uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1)
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


@functools.lru_cache(maxsize=1)
def _unicode_to_bytes() -> dict[str, int]:
    return {c: b for b, c in bytes_to_unicode().items()}


def byte_level(b: bytes) -> str:
    """``b" hello"`` -> ``"Ġhello"``."""
    m = bytes_to_unicode()
    return "".join(m[x] for x in b)


def from_byte_level(s: str) -> bytes:
    """Inverse of :func:`byte_level`; a character outside the map is a ValueError."""
    m = _unicode_to_bytes()
    try:
        return bytes(m[c] for c in s)
    except KeyError as e:
        raise ValueError(f"{s!r} is not a byte-level token string ({e.args[0]!r})") from None


def hf_pattern(pattern: str) -> str:
    """The pattern as Oniguruma (HF tokenizers' engine) should read it.

    Oniguruma reads cl100k's possessive ``\\p{N}{1,3}+`` as a repetition of groups, so
    long digit runs would split differently; without the ``+`` both engines agree.
    o200k and its right-aligned-digit variant need no change.
    """
    return pattern.replace(r"\p{N}{1,3}+", r"\p{N}{1,3}")


def kind_of(path: str | os.PathLike) -> tuple[str, Path]:
    """``("model" | "hf" | "tiktoken", file)`` for what ``Tokenizer.load`` was given."""
    p = Path(path)
    if p.is_dir():
        for name, kind in ((MODEL_FILE, "model"), (HF_FILE, "hf"), (TIKTOKEN_META_FILE, "tiktoken")):
            if (p / name).is_file():
                return kind, p / name
        raise ModelFileError(
            f"{p} is a folder with no {MODEL_FILE}, {HF_FILE} or {TIKTOKEN_META_FILE}: pass a train"
            " or export folder of a dwstok workdir, or one of those files"
        )
    if p.suffix == ".tiktoken" or p.name == TIKTOKEN_META_FILE:
        return "tiktoken", p
    if p.suffix == ".json" and p.is_file() and _looks_like_hf(p):
        return "hf", p
    return "model", p


def _looks_like_hf(p: Path) -> bool:
    # tokenizer.json starts with {"version": "1.0", ... "model": {...}}; our model file
    # starts with {"format": "dwstok-model"}: the first bytes tell them apart.
    with open(p, "rb") as f:
        head = f.read(256)
    return b'"dwstok-model"' not in head and b'"version"' in head


def _json_id(i: Any) -> int:
    """An id as a JSON file must spell it: an integer (HF's own loader refuses a string
    or a float; ``int()`` had turned 5.7 into 5)."""
    if type(i) is not int:
        raise ValueError(f"id {i!r} is not an integer")
    return i


def hf_model(path: str | os.PathLike) -> dict[str, Any]:
    """``Tokenizer.from_vocab_merges`` arguments for a byte-level BPE ``tokenizer.json``.

    Refuses what dwstok would run differently (a normalizer, byte fallback,
    ``ignore_merges``, a pre-tokenizer other than a Split regex + ByteLevel).
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
        model = doc["model"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise ModelFileError(f"cannot read {p} as an HF tokenizer.json ({e})") from None

    def refuse(why: str) -> ModelFileError:
        return ModelFileError(f"{p}: {why}; dwstok loads the byte-level BPE tokenizer.json that `dwstok export` writes")

    if model.get("type") != "BPE":
        raise refuse(f"model type {model.get('type')!r} is not BPE")
    if doc.get("normalizer"):
        raise refuse("it has a normalizer")
    if model.get("byte_fallback") or model.get("ignore_merges"):
        raise refuse("it uses byte_fallback or ignore_merges")
    pattern = _hf_pattern_of(doc.get("pre_tokenizer"))
    if pattern is None:
        raise refuse("its pre-tokenizer is not Split(regex) + ByteLevel, nor ByteLevel alone")
    try:
        added = doc.get("added_tokens") or []
        specials = {t["content"]: _json_id(t["id"]) for t in added if t.get("special")}
        plain = [t["content"] for t in added if not t.get("special")]
    except (ValueError, TypeError, KeyError) as e:
        raise refuse(f"its added_tokens are not content and id ({e!r})") from None
    if plain:  # HF matches these in any text, before the pre-tokenizer: other ids than dwstok's
        raise refuse(f"its added token {plain[0]!r} is not special (HF finds it in any text; dwstok has no such tokens)")
    try:
        entries = [(s, _json_id(i)) for s, i in model["vocab"].items() if s not in specials]
        vocab = {i: from_byte_level(s) for s, i in entries}
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        merges = [(from_byte_level(a), from_byte_level(b)) for a, b in merges]
    except (ValueError, TypeError, KeyError) as e:
        raise refuse(f"its vocab or merges are not byte-level ({e})") from None
    if len(vocab) < len(entries):  # (a dict by id had kept one of them, silently)
        first: dict[int, str] = {}
        for s, i in entries:
            if i in first:
                raise ModelFileError(f"{p}: the vocab gives id {i} to both {first[i]!r} and {s!r}; the file is corrupt")
            first[i] = s
    version = None
    side = p.parent / HF_CONFIG_FILE
    if side.is_file():
        try:
            version = json.loads(side.read_text(encoding="utf-8")).get("dwstok", {}).get("version")
        except (OSError, ValueError, AttributeError):
            version = None
    return {"vocab": vocab, "merges": merges, "special_tokens": specials, "pattern": pattern, "version": version}


def _hf_pattern_of(pre: Any) -> str | None:
    """The pretokenizer regex of a Split + ByteLevel (or a GPT-2 ByteLevel) pre-tokenizer."""
    if not isinstance(pre, dict):
        return None
    if pre.get("type") == "ByteLevel":
        return PATTERNS["gpt2"] if pre.get("use_regex", True) and not pre.get("add_prefix_space") else None
    parts = pre.get("pretokenizers") if pre.get("type") == "Sequence" else None
    if not parts or len(parts) != 2:
        return None
    split, bl = parts
    if (
        split.get("type") != "Split"
        or split.get("behavior") != "Isolated"
        or split.get("invert")
        or bl.get("type") != "ByteLevel"
        or bl.get("use_regex")
        or bl.get("add_prefix_space")
    ):
        return None
    regex = (split.get("pattern") or {}).get("Regex")
    if not isinstance(regex, str):
        return None
    # the exporter rewrites cl100k's possessive digits for Oniguruma: map back to the name
    for pat in PATTERNS.values():
        if hf_pattern(pat) == regex:
            return pat
    return regex
