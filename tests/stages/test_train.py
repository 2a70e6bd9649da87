"""train: the stage equals the trainer on brute-force counted pieces, and records its plan."""

from collections import Counter

import numpy as np
import pytest
import regex

from stages import Inputs, count, pretokenize, train
from stages.executors import LocalExecutor
from stages.manifest import read_manifest

from .conftest import config, docs, fresh_process

dtrain = pytest.importorskip("dwstok.training")
from dwstok.tokenizer import Tokenizer  # noqa: E402
from dwstok.merge_learner import learn_merges, pieces_to_arrays  # noqa: E402


def build(cfg, corpus, work, workers=1):
    ex = LocalExecutor(workers)
    inp = Inputs(corpus=corpus, workdir=work)
    for st in (pretokenize, count, train):
        m = st.run(cfg, inp, work / st.STAGE, ex)
    return m


def brute_pieces(rows, pattern):
    c = Counter()
    for text, _ in rows:
        c.update(p.encode() for p in regex.findall(pattern, text))
    pieces = sorted(c)
    return pieces, np.array([c[p] for p in pieces], np.int64)


def test_alpha_one_equals_plain_trainer(tmp_path, small_parquet):
    cfg = config(vocab_size=288 + 80)
    m = build(cfg, [small_parquet], tmp_path)
    tok = Tokenizer.load(tmp_path / "train" / "model.json", expect_pattern="o200k", expect_version="t1")
    pieces, counts = brute_pieces(docs(), cfg.pattern_string)
    data, offsets = pieces_to_arrays(pieces)
    ref = learn_merges(data, offsets, counts, cfg.n_merges)
    assert tok.merges == ref.merges
    assert m.counts["merges"] == len(ref.merges)
    # ids: 32 specials, then 256 bytes, then merges
    assert [tok.special_tokens[s] for s in cfg.special_tokens] == list(range(32))
    assert tok.vocab[32 + ord("a")] == b"a"
    assert tok.metadata["config_hash"] == cfg.hash_of(*train.CONFIG_KEYS)


def test_balanced_and_han_forced(tmp_path, small_parquet):
    cfg = config(vocab_size=288 + 80, han={"count": 4}, balance={"alpha": 0.7})
    m = build(cfg, [small_parquet], tmp_path)
    tok = Tokenizer.load(tmp_path / "train" / "model.json")
    md = tok.metadata
    assert md["han"] is not None and md["balance"]["alpha"] == 0.7
    assert set(md["balance"]["weights"]) == {"code", "de", "en", "ja", "ru", "und", "zh"}
    # The forced merges come first and make the most frequent Han characters tokens.
    stats_han = Counter()
    for text, _ in docs():
        stats_han.update(regex.findall(r"\p{Han}", text))
    top = sorted(stats_han, key=lambda ch: (-stats_han[ch], ord(ch)))[:4]
    n_forced = m.counts["forced_merges"]
    forced_tokens = {a + b for a, b in tok.merges[:n_forced]}
    assert {ch.encode() for ch in top} <= forced_tokens
    # Weighted training: the same as the trainer with the stage's weights.
    w = dtrain.lang_weights(md["trained_on"]["bytes_by_lang"], 0.7)
    c = Counter()
    for text, lang in docs():
        for p in regex.findall(cfg.pattern_string, text):
            c[p.encode()] += w[lang or "und"]
    pieces = sorted(c)
    data, offsets = pieces_to_arrays(pieces)
    plan = dtrain.han_forced_merges(dict(stats_han), count=4)
    ref = learn_merges(data, offsets, np.array([c[p] for p in pieces], np.int64), cfg.n_merges, forced=plan.merges)
    assert tok.merges == ref.merges


def test_model_identical_for_one_and_two_workers_and_up_to_date(tmp_path, small_parquet, monkeypatch):
    import dwstok.merge_learner as ml

    cfg = config(vocab_size=288 + 40)
    build(cfg, [small_parquet], tmp_path / "a", workers=1)
    # every merge on the two workers' threads (a corpus this small has none to split)
    monkeypatch.setattr(ml, "_PAR_MIN", 1)
    build(cfg, [small_parquet], tmp_path / "b", workers=2)
    monkeypatch.undo()
    a, b = (tmp_path / d / "train" / "model.json" for d in "ab")
    assert a.read_bytes() == b.read_bytes()
    assert build(cfg, [small_parquet], tmp_path / "a").up_to_date
    # A training-only change re-runs train but not pretokenize.
    m = build(config(vocab_size=288 + 41), [small_parquet], tmp_path / "a")
    assert not m.up_to_date and m.counts["merges"] == 41
    assert read_manifest(tmp_path / "a" / "pretokenize").counts["resumed_shards"] == 0


def test_stage_equals_train_bpe_on_the_same_documents(tmp_path):
    """A chain of equalities: the pipeline (pretokenize → count → train, with language
    weights and Han forcing) gives the same model as the in-process train_bpe."""
    from .conftest import write_parquet

    rows = [(t, lang or "und") for t, lang in docs() if "<" not in t]  # no special names
    corpus = write_parquet(tmp_path / "c.parquet", rows)
    cfg = config(vocab_size=288 + 60, han={"count": 3}, balance={"alpha": 0.7})
    build(cfg, [corpus], tmp_path)
    tok = Tokenizer.load(tmp_path / "train" / "model.json")
    ref = dtrain.train_bpe(
        [t for t, _ in rows],
        cfg.vocab_size,
        special_tokens=cfg.special_tokens,
        pattern=cfg.pattern,
        alpha=0.7,
        lang=[lang for _, lang in rows],
        han_count=3,
    )
    assert tok.merges == ref.merges
    assert tok.encode("统计语言模型 Hello 2026") == ref.encode("统计语言模型 Hello 2026")


def test_a_cold_cache_compiles_the_learner_beside_the_first_stages(tmp_path, small_parquet, monkeypatch):
    """Pretokenize, when it has work, starts the background compile (on a cold cache; a
    no-op on a ready one), and train waits for its learner before it learns; stages that
    are up to date start nothing. (Not count: it imports no Numba, and looking at the
    kernel cache would.)"""
    import dwstok.merge_learner as ML
    from dwstok import kernel_cache

    calls = []
    real = ML.learn_merges
    monkeypatch.setattr(kernel_cache, "start_early", lambda: calls.append("start"))
    monkeypatch.setattr(kernel_cache, "wait_for_learner", lambda: calls.append("wait"))
    monkeypatch.setattr(ML, "learn_merges", lambda *a, **k: calls.append("learn") or real(*a, **k))
    cfg = config(vocab_size=288 + 20)
    build(cfg, [small_parquet], tmp_path)
    assert calls == ["start", "wait", "learn"]
    calls.clear()
    assert build(cfg, [small_parquet], tmp_path).up_to_date
    assert calls == []


SAME_TYPES = """
import sys
from pathlib import Path
from dwstok import warm
from dwstok.merge_learner import _learn_kernel
from stages import Inputs, count, pretokenize, train
from stages.executors import LocalExecutor
from tests.stages.conftest import config

warm.run_learner()
first = set(_learn_kernel.signatures)
work = Path(sys.argv[2])
cfg = config(vocab_size=288 + 20)
for st in (pretokenize, count, train):
    st.run(cfg, Inputs(corpus=[sys.argv[1]], workdir=work), work / st.STAGE, LocalExecutor(2))
print(len(first), set(_learn_kernel.signatures) == first)
"""


def test_the_warm_runs_learner_has_the_train_stages_argument_types(tmp_path, small_parquet):
    # A build on a cold cache waits for the learner that the warm run compiles first; if
    # the stage's arguments had other types (read-only offsets, say), Numba would compile
    # the learner again in the build.
    assert fresh_process(SAME_TYPES, str(small_parquet), str(tmp_path / "w")) == ["1", "True"]
