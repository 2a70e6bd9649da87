"""``evaluate``: models and references over a corpus and parallel text -> one JSON-ready
report (schema ``dwstok-eval/1``), which the terminal tables and the HTML page render.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from dwstok.errors import ConfigError

from . import audit as audit_mod
from .balance import model_balance
from .compression import compression_table
from .corpus_stats import EvalCorpus, read_corpus
from .digits import digits_section
from .fairness import fairness_section, read_parallel
from .han import han_section
from .models import load_model, unique_names
from .references import load_reference, parse_compare, reference_dir

SCHEMA = "dwstok-eval/1"
HAN_SENTENCE = "研究就是在不知道自己在做什么的时候所做的事。"


def _corpus_config(models):
    """The first model's own corpus settings (field names, default language)."""
    from ..config import Config

    for m in models:
        cfg = (m.tok.metadata or {}).get("config")
        if isinstance(cfg, dict) and cfg.get("corpus"):
            try:
                return Config.from_dict({k: v for k, v in cfg.items() if v is not None} | {"corpus": {
                    k: v for k, v in cfg["corpus"].items() if k != "paths"}}).corpus
            except ConfigError:
                continue  # a config from another dwstok version: fall back to defaults
    return None


def _id_space(m) -> dict:
    md = m.tok.metadata or {}
    n_special = len(m.tok.special_tokens)
    forced = int((md.get("han") or {}).get("n_merges", 0) or 0)
    return {
        "specials": n_special,
        "bytes": 256,
        "forced_merges": forced,
        "learned_merges": m.n_vocab - n_special - 256 - forced,
    }


def evaluate(
    models: Sequence[str | Path],
    *,
    corpus: Sequence[str | Path] = (),
    compare: str | None = None,
    baseline: str | None = None,
    parallel: str | Path | None = None,
    reference_dir_opt: str | Path | None = None,
    threads: int | None = None,
    progress=None,
) -> dict:
    """The whole report as a dict (see the module docstring of each section)."""
    say = progress or (lambda msg: None)
    threads = threads or os.cpu_count() or 1
    timings: dict[str, float] = {}
    t0 = time.perf_counter()

    def lap(name: str, since: float) -> float:
        now = time.perf_counter()
        timings[name] = round(now - since, 3)
        return now

    subjects_m = [load_model(m) for m in models]
    refdir = reference_dir(reference_dir_opt)
    subjects_r = [load_reference(n, refdir) for n in parse_compare(compare)]
    subjects = [*subjects_m, *subjects_r]
    unique_names(subjects)
    names = [s.name for s in subjects]
    if baseline is None:
        baseline = names[0] if names else None
    elif baseline not in names:
        match = [s.name for s in subjects_m if str(s.path) == str(baseline) or str(s.path.parent.parent) == str(baseline)]
        if not match:
            raise ConfigError(f"--baseline {baseline!r} is none of the tokenizers evaluated ({', '.join(names)})")
        baseline = match[0]
    t = lap("load", t0)

    ec = read_corpus(corpus, _corpus_config(subjects_m)) if corpus else EvalCorpus.from_texts([], [])
    t = lap("read_corpus", t)
    say(f"eval: {ec.n_docs:,} documents, {ec.data.size / 1e6:.1f} MB, {len(ec.groups)} groups")

    doc_tokens: dict[str, np.ndarray] = {}
    texts = None
    for s in subjects:
        ts = time.perf_counter()
        if hasattr(s, "encode_corpus"):
            doc_tokens[s.name] = s.encode_corpus(ec, threads=threads)
        else:
            if texts is None:
                texts = ec.texts()
            doc_tokens[s.name] = s.doc_tokens(texts, threads=threads)
        lap(f"encode:{s.name}", ts)
        say(f"eval: encoded with {s.name} in {time.perf_counter() - ts:.1f}s")
    t = time.perf_counter()

    report: dict = {"schema": SCHEMA, "tokenizers": names, "models": [s.name for s in subjects_m]}
    report["references"] = [s.name for s in subjects_r]
    report["baseline"] = baseline
    report["corpus"] = {"paths": [str(p) for p in corpus], "docs": ec.n_docs, "bytes": int(ec.data.size)}
    comp = compression_table(ec, doc_tokens, baseline=baseline)
    report["groups"] = comp["groups"]
    report["all"] = comp["all"]
    t = lap("compression", t)
    report["id_space"] = {m.name: _id_space(m) for m in subjects_m}
    report["balance"] = {m.name: model_balance(m) for m in subjects_m}
    report["han"] = han_section(ec, subjects_m, subjects_r)
    report["han_sentence"] = {
        "text": HAN_SENTENCE,
        "pieces": {s.name: [p.decode("utf-8", "backslashreplace") for p in s.pieces(HAN_SENTENCE)] for s in subjects},
    }
    t = lap("han", t)
    report["digits"] = digits_section(ec, subjects_m, subjects_r)
    t = lap("digits", t)
    if parallel is not None:
        fair = fairness_section(read_parallel(parallel), subjects, threads=threads)
        report["parallel"] = fair.pop("tokens")  # {lang: {tokenizer: tokens}}
        report["fairness"] = fair | {"dir": str(parallel)}
    else:
        report["parallel"] = report["fairness"] = None
    t = lap("fairness", t)
    report["audit"] = {m.name: audit_mod.audit(m, with_corpus=ec.n_docs > 0) for m in subjects_m}
    t = lap("audit", t)
    report["stochastok"] = {m.name: audit_mod.stochastok_section(m) for m in subjects_m}
    t = lap("stochastok", t)
    report["stage_times"] = {m.name: m.stage_times for m in subjects_m if m.stage_times}
    timings["total"] = round(time.perf_counter() - t0, 3)
    report["timings"] = timings
    return report
