"""A SentencePiece BPE model (Mistral's ``tokenizer.model``) as an HF ``tokenizer.json``.

SentencePiece BPE merges, again and again, the adjacent pair whose concatenation is a
piece with the highest score, the leftmost on ties; characters with no piece become
``<0xNN>`` bytes (byte fallback). An HF BPE model does the same when its merges are
ranked by the score of the piece they make: one merge per way of splitting a piece into
two pieces. Control pieces (``<s>``, ``</s>``) and ``<unk>`` get no merges and are not
added tokens, so text that spells ``<s>`` stays text, as in SentencePiece.

Reads the protobuf with a few lines of wire-format parsing, so no ``sentencepiece`` or
``protobuf`` install is needed.

>>> doc = spm_tokenizer_json("mistral7b_v0.1.tokenizer.model")  # doctest: +SKIP
>>> doc["model"]["type"], len(doc["model"]["vocab"])  # doctest: +SKIP
('BPE', 32000)
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

from dwstok.errors import ModelFileError

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPACE = "\u2581"
_INNER_SPACE = re.compile(f"[^{SPACE}]{SPACE}")


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes):
    """(field number, wire type, value) of one protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i : i + 8], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i : i + n], i + n
        elif wire == 5:
            value, i = buf[i : i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield field, wire, value


def read_spm(path: str | Path) -> dict[str, Any]:
    """Pieces ``(text, score, type)`` and the options that matter for encoding."""
    path = Path(path)
    try:
        buf = path.read_bytes()
    except OSError as e:
        raise ModelFileError(f"cannot read SentencePiece model {path}: {e.strerror}") from None
    pieces: list[tuple[str, float, int]] = []
    model_type, byte_fallback = 1, False  # proto defaults: UNIGRAM, no byte fallback
    dummy_prefix, remove_spaces, normalizer = True, True, "nmt_nfkc"
    try:
        for field, _, value in _fields(buf):
            if field == 1:  # repeated SentencePiece
                text, score, kind = "", 0.0, NORMAL
                for f, _, v in _fields(value):
                    if f == 1:
                        text = v.decode("utf-8")
                    elif f == 2:
                        score = struct.unpack("<f", v)[0]
                    elif f == 3:
                        kind = v
                pieces.append((text, score, kind))
            elif field == 2:  # TrainerSpec
                for f, _, v in _fields(value):
                    if f == 3:
                        model_type = v
                    elif f == 35:
                        byte_fallback = bool(v)
            elif field == 3:  # NormalizerSpec
                for f, _, v in _fields(value):
                    if f == 1:
                        normalizer = v.decode("utf-8")
                    elif f == 3:
                        dummy_prefix = bool(v)
                    elif f == 4:
                        remove_spaces = bool(v)
    except (ValueError, IndexError, UnicodeDecodeError, struct.error) as e:
        raise ModelFileError(f"{path} is not a SentencePiece model ({e})") from None
    if not pieces:
        raise ModelFileError(f"{path} is not a SentencePiece model (no pieces)")
    return {
        "pieces": pieces,
        "model_type": model_type,
        "byte_fallback": byte_fallback,
        "add_dummy_prefix": dummy_prefix,
        "remove_extra_whitespaces": remove_spaces,
        "normalizer": normalizer,
    }


def spm_tokenizer_json(path: str | Path) -> dict[str, Any]:
    """The ``tokenizer.json`` document that encodes exactly as the SentencePiece BPE model."""
    m = read_spm(path)
    if m["model_type"] != 2:
        raise ModelFileError(f"{path} is not a BPE SentencePiece model (model_type {m['model_type']})")
    if m["normalizer"] != "identity" or m["remove_extra_whitespaces"]:
        # NFKC or space folding would need the normalizer's own tables; Mistral and Llama have neither.
        raise ModelFileError(f"{path} normalizes its input ({m['normalizer']}); only identity models convert exactly")
    pieces = m["pieces"]
    vocab = {text: i for i, (text, _, _) in enumerate(pieces)}
    unk = next((t for t, _, k in pieces if k == UNKNOWN), None)
    mergeable = {t: (s, i) for i, (t, s, k) in enumerate(pieces) if k in (NORMAL, USER_DEFINED)}
    merges = []
    for text, (score, i) in mergeable.items():
        for cut in range(1, len(text)):
            a, b = text[:cut], text[cut:]
            if a in mergeable and b in mergeable:
                merges.append((-score, i, cut, a, b))
    merges.sort()  # highest score first; equal scores by id, then by cut
    # No piece has a ▁ after another character, so no merge crosses the start of a ▁ run:
    # cutting the text there changes nothing, and the BPE runs (and caches) word by word
    # instead of over the whole text at once (in tokenizers.js, far faster on long texts).
    splits = not any(_INNER_SPACE.search(t) for t in vocab)
    pre_tokenizer = (
        {"type": "Split", "pattern": {"Regex": f"{SPACE}*[^{SPACE}]+|{SPACE}+"}, "behavior": "Isolated", "invert": False}
        if splits
        else None
    )
    normalizers = [{"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]
    if m["add_dummy_prefix"]:
        normalizers.insert(0, {"type": "Prepend", "prepend": SPACE})
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
            ]
            + ([{"type": "Strip", "content": " ", "start": 1, "stop": 0}] if m["add_dummy_prefix"] else []),
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": unk,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": m["byte_fallback"],
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [[a, b] for *_, a, b in merges],
        },
    }


def token_bytes(piece: str) -> bytes:
    """The bytes a piece stands for: ``"▁the"`` -> ``b" the"``, ``"<0x0A>"`` -> ``b"\\n"``."""
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        return bytes([int(piece[3:5], 16)])
    return piece.replace(SPACE, " ").encode("utf-8")
