"""dwstok models under evaluation: a ``model.json``, or a build's workdir (whose
``train/model.json``, ``count/stats.json`` and stage manifests are then read).

Each model encodes the whole eval corpus once with dwstok's batch encoder (zero-copy on
the corpus buffer); the ids stay in memory for the sections that look at tokens (Han,
digits, audit, StochasTok).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dwstok.errors import InputError, ModelFileError

from .corpus_stats import EvalCorpus

STAGES = ("pretokenize", "count", "train", "export", "encode-shards")


@dataclass
class ModelSubject:
    name: str
    path: Path
    tok: Any  # dwstok.Tokenizer
    stats: dict | None = None  # count/stats.json of its build, when known
    stage_times: dict[str, float] = field(default_factory=dict)  # seconds per stage
    ids: np.ndarray | None = None  # the corpus encoded, flat
    doc_offsets: np.ndarray | None = None
    _tokens: list | None = field(default=None, repr=False)
    kind = "model"

    @property
    def n_vocab(self) -> int:
        return self.tok.n_vocab

    @property
    def tokens(self) -> list[bytes]:
        """Each id's bytes; ``b""`` for specials (their names are no bytes of text)."""
        if self._tokens is None:
            specials = set(self.tok.special_tokens.values())
            v = self.tok.vocab
            self._tokens = [b"" if i in specials else v.get(i, b"") for i in range(self.n_vocab)]
        return self._tokens

    def encode_corpus(self, corpus: EvalCorpus, *, threads: int) -> np.ndarray:
        """Token counts per document (the ids are kept on ``self``)."""
        if corpus.n_docs == 0:
            self.ids, self.doc_offsets = np.zeros(0, np.uint32), np.zeros(1, np.int64)
        else:
            self.ids, self.doc_offsets = self.tok.encode_utf8_batch(corpus.data, corpus.offsets, num_threads=threads)
        return np.diff(self.doc_offsets)

    def doc_tokens(self, texts, *, threads: int) -> np.ndarray:
        return np.array([len(x) for x in self.tok.encode_batch(list(texts), num_threads=threads)], np.int64)

    def pieces(self, text: str) -> list[bytes]:
        return [self.tok.vocab[i] for i in self.tok.encode(text)]

    def token_counts(self) -> np.ndarray:
        """How often each id was emitted on the eval corpus."""
        return np.bincount(self.ids, minlength=self.n_vocab).astype(np.int64)


def load_model(arg: str | Path) -> ModelSubject:
    """A model file, or a workdir holding ``train/model.json``."""
    from dwstok import Tokenizer

    p = Path(arg)
    workdir = None
    if p.is_dir():
        workdir = p
        p = p / "train" / "model.json"
        if not p.is_file():
            raise InputError(f"{arg} is a folder without train/model.json: give a model file or a build's workdir")
    elif not p.exists():
        raise ModelFileError(f"model {p} not found")
    tok = Tokenizer.load(p)
    stats = None
    times: dict[str, float] = {}
    if workdir is not None:
        import json

        sp = workdir / "count" / "stats.json"
        if sp.is_file():
            stats = json.loads(sp.read_text(encoding="utf-8"))
        from ..manifest import read_manifest

        for stage in STAGES:
            m = read_manifest(workdir / stage)
            if m is not None and m.timings:
                times[stage] = float(sum(v for v in m.timings.values() if isinstance(v, (int, float))))
    name = tok.version or p.stem
    return ModelSubject(name=name, path=p, tok=tok, stats=stats, stage_times=times)


def unique_names(subjects) -> None:
    """Models are named by their version; two of one version get their folder's name too."""
    seen: dict[str, int] = {}
    for s in subjects:
        seen[s.name] = seen.get(s.name, 0) + 1
    for s in subjects:
        if seen[s.name] > 1 and s.kind == "model":
            where = s.path.parent.parent.name if s.path.name == "model.json" else s.path.stem
            s.name = f"{s.name}@{where}"
