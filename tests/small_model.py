"""A small real DWSLMTok-layout model learned on a few multilingual lines (no shared data).

32 specials, byte b at 32 + b, merges from 288: the layout the exports assume.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache

TEXTS = (
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs on and on.\n"
    "Der schnelle braune Fuchs springt über den faulen Hund. Straße 12, 1234567 Einwohner.\n"
    "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю.\n"
    "统计语言模型的中文文本。语言模型的中文文本很长。日本語のテキストです。\n"
    "def encode(text):\n    return [ord(c) for c in text]  # 2026-12-02\n"
    "emoji 🎉👍🏽 and accents é e\u0301 don't I'M here, there and everywhere.\n"
) * 3
SAMPLE = (
    "The fox, der Fuchs and мир: 统计语言 1234567 🎉 x\t\n  indented <bos> <eos> é\n"
    "def f(): return 'the lazy dog'\n"
)


@lru_cache(maxsize=None)
def small_model(pattern: str = "o200k-rdigits", version: str = "t1", n_merges: int = 120):
    import numpy as np
    import regex

    from dwstok.patterns import resolve
    from dwstok.merge_learner import learn_merges, pieces_to_arrays
    from tests.stages.bpe_models import dwslm_model

    pieces = Counter(p.encode() for p in regex.findall(resolve(pattern)[1], TEXTS))
    keys = sorted(pieces)
    data, offsets = pieces_to_arrays(keys)
    weights = np.array([pieces[k] for k in keys], dtype=np.int64)
    merges = tuple(learn_merges(data, offsets, weights, n_merges).merges)
    return dwslm_model(merges, pattern=pattern, version=version)
