"""Compression per language group: bytes/token, tokens per 1,000 characters, the change
against a baseline, tokens per document.

Bytes/token is higher-is-better; the change against the baseline is
``bpt / bpt_baseline - 1`` (the paper's "zh +26.7%"). The "all" row divides all bytes by
all tokens, so groups weigh by their bytes.

>>> from stages.evaluate.corpus_stats import EvalCorpus
>>> c = EvalCorpus.from_texts(["aaaa", "bb", "cc"], ["x", "y", "y"])
>>> t = compression_table(c, {"m": np.array([2, 1, 1]), "r": np.array([4, 2, 2])}, baseline="r")
>>> t["groups"]["y"]["bytes_per_token"], t["all"]["bytes_per_token"], t["all"]["change"]
({'m': 2.0, 'r': 1.0}, {'m': 2.0, 'r': 1.0}, {'m': 1.0, 'r': 0.0})
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .corpus_stats import EvalCorpus


def _row(nbytes: int, nchars: int, docs: int, tokens: Mapping[str, int], per_doc: Mapping[str, np.ndarray], baseline):
    nbytes, nchars, docs = int(nbytes), int(nchars), int(docs)
    tokens = {n: int(t) for n, t in tokens.items()}
    bpt = {n: (nbytes / t if t else None) for n, t in tokens.items()}
    row: dict[str, Any] = {
        "bytes": int(nbytes),
        "chars": int(nchars),
        "docs": int(docs),
        "tokens": {n: int(t) for n, t in tokens.items()},
        "bytes_per_token": bpt,
        "tokens_per_1k_chars": {n: (1000.0 * t / nchars if nchars else None) for n, t in tokens.items()},
        "mean_tokens_per_doc": {n: (float(d.mean()) if d.size else None) for n, d in per_doc.items()},
        "p95_tokens_per_doc": {n: (float(np.percentile(d, 95)) if d.size else None) for n, d in per_doc.items()},
    }
    if baseline is not None and bpt.get(baseline):
        row["change"] = {n: (v / bpt[baseline] - 1.0 if v else None) for n, v in bpt.items()}
    return row


def compression_table(corpus: EvalCorpus, doc_tokens: Mapping[str, np.ndarray], *, baseline: str | None) -> dict:
    """Per group and in all, for every tokenizer; ``doc_tokens[name]`` is tokens per document."""
    groups = {}
    gb, gc, gd = corpus.group_bytes, corpus.group_chars, corpus.group_docs
    per_group = {n: corpus.per_group(np.asarray(d, np.int64)) for n, d in doc_tokens.items()}
    for gi, g in enumerate(corpus.groups):
        sel = corpus.doc_group == gi
        groups[g] = _row(
            gb[gi], gc[gi], gd[gi],
            {n: per_group[n][gi] for n in doc_tokens},
            {n: np.asarray(d)[sel] for n, d in doc_tokens.items()},
            baseline,
        )
    total = _row(
        gb.sum(), gc.sum(), gd.sum(),
        {n: int(np.sum(d)) for n, d in doc_tokens.items()},
        {n: np.asarray(d) for n, d in doc_tokens.items()},
        baseline,
    )
    return {"baseline": baseline, "groups": groups, "all": total}
