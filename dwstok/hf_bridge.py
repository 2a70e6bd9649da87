"""Encoding through HF tokenizers while the kernels compile (kernel_cache.py).

A model built with merges (``merge_rule="merges"``) is what its exported
``tokenizer.json`` is: the same BPE model and pre-tokenizer, here built in memory
without the specials (``encode()`` never emits one). The export's parity with the
kernels is what tests/stages/test_export.py and the whole-corpus tests check; this
bridge relies on it, and only runs until the kernels are in the cache.

>>> from dwstok import Tokenizer
>>> tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"a", b"a")])
>>> HfBridge.for_tokenizer(tok).encode("aaa b")
[256, 97, 32, 98]
"""

from __future__ import annotations

import numpy as np

from .export_files import byte_level, hf_pattern


class HfBridge:
    """An HF ``tokenizers.Tokenizer`` with a model's vocab, merges and pattern."""

    def __init__(self, hf):
        self._hf = hf

    @classmethod
    def for_tokenizer(cls, tok) -> HfBridge | None:
        """The bridge for ``tok``, or None when HF's BPE would not give its ids: a rank
        model (tiktoken's rule differs), tokens that share bytes, or a merge whose
        token is not the one its bytes name."""
        if tok.merge_rule != "merges":
            return None
        from tokenizers import Regex, Tokenizer, models, pre_tokenizers

        tokens = tok._tokens
        specials = set(tok.special_tokens.values())
        vocab: dict[str, int] = {}
        for i, t in enumerate(tokens):
            if t and i not in specials:
                s = byte_level(t)
                if s in vocab:
                    return None
                vocab[s] = i
        merges = []
        for a, b, new in tok._merge_ids.tolist():
            if vocab.get(byte_level(tokens[a] + tokens[b])) != new:
                return None
            merges.append((byte_level(tokens[a]), byte_level(tokens[b])))
        hf = Tokenizer(models.BPE(vocab=vocab, merges=merges))
        hf.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(hf_pattern(tok.pattern)), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        return cls(hf)

    def encode(self, text: str) -> list[int]:
        return self._hf.encode(text, add_special_tokens=False).ids

    def encode_bytes(self, buf: bytes) -> np.ndarray:
        """uint32 ids of UTF-8 ``buf`` (valid UTF-8: it came from a str)."""
        return np.array(self.encode(buf.decode("utf-8")), np.uint32)

    def encode_docs(self, data: np.ndarray, offsets: np.ndarray, d0: int, d1: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``(ids, doc_offsets)`` of documents d0..d1 of a UTF-8 buffer, as the kernels
        give them; None when a document is not valid UTF-8 (the kernels take any bytes)."""
        base = int(offsets[d0])
        raw = bytes(data[base : int(offsets[d1])])
        try:
            texts = [raw[int(offsets[d]) - base : int(offsets[d + 1]) - base].decode("utf-8") for d in range(d0, d1)]
        except UnicodeDecodeError:
            return None
        encs = self._hf.encode_batch_fast(texts, add_special_tokens=False) if texts else []
        doc_offsets = np.zeros(d1 - d0 + 1, np.int64)
        np.cumsum(np.fromiter((len(e.ids) for e in encs), np.int64, len(encs)), out=doc_offsets[1:])
        ids = np.fromiter((i for e in encs for i in e.ids), np.uint32, int(doc_offsets[-1]))
        return ids, doc_offsets
