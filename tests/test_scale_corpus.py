"""The scale simulation's corpus generator (bench/scale_corpus.py) on a small made-up split."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

# Imported by the name bench/scale_sim.py gives it: its kernels' Numba cache records the
# module's name, so one cache written as ``scale_corpus`` cannot load as ``bench.scale_corpus``.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import scale_corpus  # noqa: E402


def _zipf_text(rng: np.random.Generator, words: list[str], n: int) -> str:
    ranks = np.minimum(rng.zipf(1.4, n), len(words)) - 1
    return " ".join(words[r] for r in ranks) + ".\n"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    rng = np.random.default_rng(1)
    letters = "abcdefghijklmnopqrstuvwxyz"
    en = ["".join(rng.choice(list(letters), rng.integers(1, 9))) for _ in range(20_000)]
    de = ["".join(rng.choice(list(letters + "äöüß"), rng.integers(2, 12))).capitalize() for _ in range(20_000)]
    docs = [(_zipf_text(rng, en, 300) + f" {i}, x=y/2;", "en") for i in range(600)]
    docs += [(_zipf_text(rng, de, 200), "de") for _ in range(300)]
    d = tmp_path_factory.mktemp("scale")
    pq.write_table(pa.table({"text": [t for t, _ in docs], "lang": [g for _, g in docs]}), d / "train.parquet",
                   row_group_size=300)
    scale_corpus.fit(d / "train.parquet", d / "model", min_tokens=10_000)
    return d


def test_deterministic_and_shares(model):
    a = scale_corpus.generate(model / "model", 3_000_000, model / "a.parquet", seed=0, chunk=1 << 20)
    b = scale_corpus.generate(model / "model", 3_000_000, model / "b.parquet", seed=0, chunk=1 << 20)
    c = scale_corpus.generate(model / "model", 3_000_000, model / "c.parquet", seed=1, chunk=1 << 20)
    ta, tb, tc = (pq.read_table(model / f"{x}.parquet") for x in "abc")
    assert ta.equals(tb) and not ta.equals(tc)
    assert a["bytes"] >= 3_000_000 and a["synthetic_tokens"] > 0
    real = pq.read_table(model / "train.parquet")

    def shares(t):
        n = pc.binary_length(t.column("text")).to_numpy()
        langs = np.array(t.column("lang").to_pylist())
        return {g: n[langs == g].sum() / n.sum() for g in ("en", "de")}

    for g, s in shares(real).items():
        assert abs(shares(ta)[g] - s) < 0.02


def test_pieces_survive_and_grow(model):
    """The generated text splits back into the pieces drawn (classes keep the joins), and a
    corpus 3x the split's size holds more unique pieces than the split (new pieces appear)."""
    g = scale_corpus.generate(model / "model", 3 * 1_000_000, model / "g.parquet", seed=0, chunk=1 << 20)
    real = scale_corpus.measure(model / "train.parquet")[-1]
    gen = scale_corpus.measure(model / "g.parquet")[-1]
    assert abs(gen["tokens"] - g["tokens"]) / g["tokens"] < 0.01
    assert gen["unique"] > real["unique"] * 3 ** 0.3
