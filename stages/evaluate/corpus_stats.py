"""The eval corpus in one UTF-8 buffer, with each document's language group.

Documents are read by the same readers as the build (``stages.corpus``), so any corpus
the stages read can be evaluated. All of it is held in memory as one ``uint8`` buffer
plus offsets, the layout dwstok's batch encoder takes without copying.

>>> c = EvalCorpus.from_texts(["héllo", "世界"], ["fr", "zh"])
>>> c.groups, c.group_bytes.tolist(), c.group_chars.tolist(), c.group_docs.tolist()
(['fr', 'zh'], [6, 6], [5, 2], [1, 1])
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Sequence

import numpy as np


@dataclass
class EvalCorpus:
    data: np.ndarray  # uint8: every document's UTF-8, back to back
    offsets: np.ndarray  # int64[n_docs + 1]
    doc_group: np.ndarray  # int64[n_docs]: index into ``groups``
    groups: list[str]  # sorted language groups

    @classmethod
    def from_texts(cls, texts: Sequence[str], langs: Sequence[str]) -> EvalCorpus:
        bufs = [t.encode("utf-8") for t in texts]
        offsets = np.zeros(len(bufs) + 1, np.int64)
        np.cumsum([len(b) for b in bufs], out=offsets[1:])
        groups = sorted(set(langs))
        index = {g: i for i, g in enumerate(groups)}
        return cls(
            np.frombuffer(b"".join(bufs), np.uint8).copy(),
            offsets,
            np.array([index[g] for g in langs], np.int64),
            groups,
        )

    @property
    def n_docs(self) -> int:
        return self.offsets.size - 1

    @property
    def doc_bytes(self) -> np.ndarray:
        return np.diff(self.offsets)

    @cached_property
    def doc_chars(self) -> np.ndarray:
        """Code points per document: the bytes that are not UTF-8 continuation bytes."""
        if self.data.size == 0:
            return np.zeros(self.n_docs, np.int64)
        lead = (self.data & 0xC0) != 0x80  # one byte a code point starts with
        n = np.add.reduceat(lead, np.minimum(self.offsets[:-1], max(lead.size - 1, 0)), dtype=np.int64)
        return np.where(self.doc_bytes > 0, n, 0)  # reduceat gives an empty segment one byte

    def per_group(self, per_doc: np.ndarray) -> np.ndarray:
        """Sum a per-document quantity by group."""
        return np.bincount(self.doc_group, weights=per_doc, minlength=len(self.groups)).astype(np.int64)

    @property
    def group_bytes(self) -> np.ndarray:
        return self.per_group(self.doc_bytes)

    @property
    def group_chars(self) -> np.ndarray:
        return self.per_group(self.doc_chars)

    @property
    def group_docs(self) -> np.ndarray:
        return np.bincount(self.doc_group, minlength=len(self.groups)).astype(np.int64)

    def texts(self) -> list[str]:
        """The documents as ``str`` (for reference tokenizers that take Python strings)."""
        raw = self.data.tobytes()
        o = self.offsets.tolist()
        return [raw[o[i] : o[i + 1]].decode("utf-8") for i in range(self.n_docs)]


def read_corpus(paths: Sequence[str | Path], corpus_config=None) -> EvalCorpus:
    """Read every document of ``paths`` (Parquet, JSONL[.zst|.gz], txt) with its group.

    ``corpus_config`` (a ``stages.config.CorpusConfig``) names the fields and the default
    language; the model's own build config is the natural choice.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..config import CorpusConfig
    from ..corpus import plan_shards, read_batches

    cfg = corpus_config or CorpusConfig()
    texts, langs = [], []
    for shard in plan_shards(list(paths), cfg):
        for b in read_batches(shard, cfg):
            texts.append(b.text)
            langs.append(b.lang)
    if not texts:
        return EvalCorpus(np.zeros(0, np.uint8), np.zeros(1, np.int64), np.zeros(0, np.int64), [])
    text = pa.concat_arrays(texts).cast(pa.large_string())
    lang = pa.concat_arrays(langs)
    # Zero-copy views of the Arrow buffers (a sliced array's offsets do not start at 0).
    off = np.frombuffer(text.buffers()[1], np.int64)[text.offset : text.offset + len(text) + 1]
    data = np.frombuffer(text.buffers()[2], np.uint8) if text.buffers()[2] is not None else np.zeros(0, np.uint8)
    data = data[off[0] : off[-1]]
    enc = pc.dictionary_encode(lang)
    names = enc.dictionary.to_pylist()
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), np.int64)
    rank[order] = np.arange(len(names))
    doc_group = rank[enc.indices.to_numpy()]
    return EvalCorpus(data, off - off[0], doc_group, [names[i] for i in order])
