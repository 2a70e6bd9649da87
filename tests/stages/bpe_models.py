"""Small real BPE models for the export / encode-shards / shard tests.

``tiny_bpe`` is an incremental pure-Python trainer (DESIGN §1 tie rule: highest count,
then the lexicographically greatest ``(left, right)`` bytes) fast enough to learn a few
thousand merges on a slice of the corpus in seconds. ``reference_encode`` is the
readable rank-order merge loop (leftmost pair among equal ranks) that HF tokenizers
with ``ignore_merges: false`` and dwstok both implement.

``dwslm_model`` lays a model out as DWSLMTok does: 32 specials, byte b at 32 + b, merge i
at 288 + i, and returns a ``dwstok.Tokenizer`` when that module exists (otherwise a
plain stand-in with the same attributes, enough for the exporters).
"""

from __future__ import annotations

import hashlib
import heapq
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pyarrow.parquet as pq
import regex

from dwstok.patterns import resolve

NAMED = ["<pad>", "<bos>", "<eos>", "<unk>", "<mask>", "<fim_prefix>", "<fim_middle>",
         "<fim_suffix>", "<sep>", "<code>", "</code>", "<think>", "</think>"]
SPECIALS = NAMED + [f"<reserved_{i}>" for i in range(13, 32)]


def _rev(b: bytes) -> tuple:
    # key whose ascending order is descending bytes order (prefix sorts after extension)
    return tuple(255 - x for x in b) + (256,)


def tiny_bpe(pieces: Counter, n_merges: int) -> list[tuple[bytes, bytes]]:
    words = [[bytes([x]) for x in w] for w in pieces]
    counts = list(pieces.values())
    pair_count: dict = defaultdict(int)
    where: dict = defaultdict(set)
    for wi, w in enumerate(words):
        for p in zip(w, w[1:]):
            pair_count[p] += counts[wi]
            where[p].add(wi)
    heap = [(-c, _rev(p[0]), _rev(p[1]), p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        negc, _, _, p = heapq.heappop(heap)
        if pair_count.get(p, 0) != -negc or negc == 0:
            continue  # stale entry
        a, b = p
        merges.append(p)
        changed = set()
        for wi in list(where[p]):
            w, c = words[wi], counts[wi]
            for q in zip(w, w[1:]):
                pair_count[q] -= c
                changed.add(q)
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            words[wi] = out
            for q in zip(out, out[1:]):
                pair_count[q] += c
                where[q].add(wi)
                changed.add(q)
        for q in changed:
            if pair_count[q] > 0:
                heapq.heappush(heap, (-pair_count[q], _rev(q[0]), _rev(q[1]), q))
            else:
                pair_count.pop(q, None)
    return merges


def reference_encode_piece(piece: bytes, ranks: dict) -> list[bytes]:
    parts = [bytes([x]) for x in piece]
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get((parts[i], parts[i + 1]))
            if r is not None and (best is None or r < best):
                best, at = r, i
        if best is None:
            break
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return parts


@dataclass
class StandIn:
    """The attributes of ``dwstok.Tokenizer`` that the exporters read."""

    vocab: dict
    merges: list
    special_tokens: dict
    pattern: str
    pattern_name: str | None
    version: str | None
    metadata: dict = field(default_factory=dict)

    @property
    def n_vocab(self) -> int:
        return max(self.vocab) + 1

    @property
    def sha256(self) -> str:
        h = hashlib.sha256(self.pattern.encode())
        for a, b in self.merges:
            h.update(len(a).to_bytes(4, "little") + a + b)
        return h.hexdigest()

    def encode(self, text: str) -> list[int]:
        ranks = {m: i for i, m in enumerate(self.merges)}
        inv = {b: i for i, b in self.vocab.items() if i >= 32}
        out = []
        for piece in regex.findall(self.pattern, text):
            out += [inv[t] for t in reference_encode_piece(piece.encode(), ranks)]
        return out

    def decode(self, ids) -> str:
        return b"".join(self.vocab[i] for i in ids).decode()


def dwslm_model(merges, *, pattern="o200k", version="32.1"):
    vocab = {i: s.encode() for i, s in enumerate(SPECIALS)}
    vocab.update({32 + b: bytes([b]) for b in range(256)})
    vocab.update({288 + i: a + b for i, (a, b) in enumerate(merges)})
    specials = {s: i for i, s in enumerate(SPECIALS)}
    try:
        from dwstok.tokenizer import Tokenizer
    except ImportError:
        name, pat = resolve(pattern)
        return StandIn(vocab, list(merges), specials, pat, name, version)
    return Tokenizer.from_vocab_merges(
        vocab, list(merges), special_tokens=specials, pattern=pattern, version=version
    )


@lru_cache(maxsize=None)
def corpus_merges(corpus_path: str, pattern: str, n_merges: int, n_docs: int = 400):
    """Merges learned by ``tiny_bpe`` on the first ``n_docs`` documents of each language."""
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
    try:  # the real trainer when it exists (fast); the same tie rule as tiny_bpe
        from dwstok.trainer import learn_merges, pieces_to_arrays
    except ImportError:
        return tuple(tiny_bpe(pieces, n_merges))
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
