"""Turning ids back into text: checked id arrays, whole-text decode and streams.

A stream is for the serving case: ids arrive one at a time and text may be shown only
once every character is complete (a token can end in the middle of a UTF-8 sequence).

>>> from dwstok import Tokenizer
>>> tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [])
>>> stream = tok.decode_stream()
>>> [stream.feed(i) for i in "é!".encode()]
['', 'é', '!']
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable

import numpy as np

from .errors import DwstokError


class TokenIdError(DwstokError, ValueError):
    """An id that is not in the vocabulary was given to decode."""


def check_ids(ids, valid: np.ndarray) -> np.ndarray:
    """``ids`` as an int64 array, or TokenIdError naming the first bad id and its position."""
    arr = np.asarray(ids)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if arr.size == 0:
        return np.zeros(0, np.int64)
    if arr.dtype.kind not in "iu":
        if arr.dtype == object or arr.dtype.kind == "f":
            try:
                as_int = arr.astype(np.int64)
            except (TypeError, ValueError, OverflowError):
                raise TokenIdError("token ids must be integers") from None
            if arr.dtype.kind == "f" and not np.array_equal(as_int, arr):
                raise TokenIdError("token ids must be integers")
            arr = as_int
        else:
            raise TokenIdError(f"token ids must be integers, got an array of {arr.dtype}")
    if arr.dtype == np.uint64 and arr.max() > np.iinfo(np.int64).max:
        bad = int(np.argmax(arr > np.iinfo(np.int64).max))
        raise TokenIdError(_bad_id_message(int(arr[bad]), bad, valid.size))
    arr = arr.astype(np.int64, copy=False)
    inside = (arr >= 0) & (arr < valid.size)
    ok = inside.copy()
    ok[inside] = valid[arr[inside]]
    if not ok.all():
        bad = int(np.argmin(ok))
        raise TokenIdError(_bad_id_message(int(arr[bad]), bad, valid.size))
    return arr


def _bad_id_message(token: int, position: int, n_vocab: int) -> str:
    if 0 <= token < n_vocab:
        return f"token id {token} at position {position} is not in the vocabulary (an unused id)"
    return f"token id {token} at position {position} is out of range: ids are 0..{n_vocab - 1}"


def decode_text(data: bytes, errors: str) -> str:
    """UTF-8 decode; a strict failure says which bytes were split and what to pass instead."""
    try:
        return data.decode("utf-8", errors)
    except UnicodeDecodeError as e:
        raise UnicodeDecodeError(
            "utf-8",
            e.object,
            e.start,
            e.end,
            f"{e.reason}: the ids do not form whole UTF-8 characters at bytes {e.start}..{e.end}"
            " (pass errors='replace' to get U+FFFD, or use decode_bytes())",
        ) from None


class DecodeStream:
    """Incremental decoder: ``feed(id)`` returns the text completed by that id (maybe '').

    ``finish()`` returns what is left; an incomplete character at the end raises under
    ``errors="strict"`` and becomes U+FFFD under ``errors="replace"``.
    """

    def __init__(self, decode: Callable[[np.ndarray], bytes], valid: np.ndarray, errors: str = "strict"):
        self._decode = decode  # checked ids -> their bytes
        self._valid = valid
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors)
        self._ids_fed = 0

    def feed(self, token_id: int) -> str:
        ids = check_ids([token_id], self._valid)
        self._ids_fed += 1
        return self._decoder.decode(self._decode(ids))

    def feed_many(self, ids: Iterable[int]) -> str:
        arr = check_ids(list(ids) if not isinstance(ids, np.ndarray) else ids, self._valid)
        self._ids_fed += arr.size
        return self._decoder.decode(self._decode(arr))

    step = feed  # the name HF tokenizers' DecodeStream uses

    def finish(self) -> str:
        try:
            return self._decoder.decode(b"", final=True)
        except UnicodeDecodeError as e:
            raise UnicodeDecodeError(
                "utf-8",
                e.object,
                e.start,
                e.end,
                "the stream ended inside a UTF-8 character (pass errors='replace' to get U+FFFD)",
            ) from None

    def __iter__(self):  # pragma: no cover - a stream is fed, not iterated
        raise TypeError("feed ids with stream.feed(id); use decode_stream(ids) to iterate")


def iter_decode(stream: DecodeStream, ids: Iterable[int]):
    """Yield the text of ``ids`` as characters complete, then whatever ``finish()`` gives."""
    for token_id in ids:
        text = stream.feed(token_id)
        if text:
            yield text
    rest = stream.finish()
    if rest:
        yield rest
