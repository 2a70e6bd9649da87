"""Small real BPE models for the export / encode-shards / shard tests.

``corpus_merges`` learns merges with ``dwstok.merge_learner.learn_merges`` on a slice of the
corpus (a few documents per language), and ``dwslm_model`` lays them out as DWSLMTok
does: 32 specials, byte b at 32 + b, merge i at 288 + i.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache

import numpy as np
import pyarrow.parquet as pq
import regex

from dwstok.patterns import resolve

NAMED = ["<pad>", "<bos>", "<eos>", "<unk>", "<mask>", "<fim_prefix>", "<fim_middle>",
         "<fim_suffix>", "<sep>", "<code>", "</code>", "<think>", "</think>"]
SPECIALS = NAMED + [f"<reserved_{i}>" for i in range(13, 32)]


def dwslm_model(merges, *, pattern="o200k", version="32.1"):
    from dwstok.tokenizer import Tokenizer

    vocab = {i: s.encode() for i, s in enumerate(SPECIALS)}
    vocab.update({32 + b: bytes([b]) for b in range(256)})
    vocab.update({288 + i: a + b for i, (a, b) in enumerate(merges)})
    specials = {s: i for i, s in enumerate(SPECIALS)}
    return Tokenizer.from_vocab_merges(
        vocab, list(merges), special_tokens=specials, pattern=pattern, version=version
    )


@lru_cache(maxsize=None)
def corpus_merges(corpus_path: str, pattern: str, n_merges: int, n_docs: int = 400):
    """Merges learned on the first 8,000 characters of ``n_docs / 30`` documents per language."""
    from dwstok.merge_learner import learn_merges, pieces_to_arrays

    t = pq.read_table(corpus_path, columns=["text", "lang"]).to_pydict()
    per_lang: Counter = Counter()
    texts = []
    for text, lang in zip(t["text"], t["lang"]):
        if per_lang[lang] < max(1, n_docs // 30):
            per_lang[lang] += 1
            texts.append(text)
    pat = regex.compile(resolve(pattern)[1])
    pieces = Counter()
    for text in texts:
        pieces.update(p.encode() for p in pat.findall(text[:8000]))
    keys = sorted(pieces)
    data, offsets = pieces_to_arrays(keys)
    weights = np.array([pieces[k] for k in keys], dtype=np.int64)
    return tuple(learn_merges(data, offsets, weights, n_merges).merges)


def write_train_stage(train_dir, tok):
    """A finished ``train`` stage folder holding ``tok`` (as the train stage leaves it)."""
    from pathlib import Path

    from stages.manifest import Manifest, hash_file

    d = Path(train_dir)
    d.mkdir(parents=True, exist_ok=True)
    tok.save(d / "model.json")
    return Manifest(
        stage="train",
        config_hash="test",
        inputs_hash="test",
        outputs={"model.json": hash_file(d / "model.json")},
        info={"model_sha256": tok.sha256},
    ).write(d)


def stage_config(version="t1", pattern="o200k", vocab_size=None, **over):
    from stages.config import Config

    raw = {"version": version, "pattern": pattern, "corpus": {"shard_bytes": 1}, **over}
    if vocab_size is not None:
        raw["vocab_size"] = vocab_size
    return Config.from_dict(raw)
