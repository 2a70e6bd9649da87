"""train.max_token_bytes: unset, training is exactly as before; set, no learned token is
longer, and the merges equal a brute-force trainer that skips longer pairs."""

import json

import numpy as np
import pytest

from dwstok.errors import ConfigError
from dwstok.merge_learner import learn_merges, pieces_to_arrays
from stages import Inputs, count, pretokenize, train
from stages.config import Config
from stages.executors import LocalExecutor
from tests.dwstok.brute_bpe import brute_bpe, count_pairs, merge_word

from .conftest import config

PIECES = [b"aaaaaaaaaaaa", b"abababababab", b" the", b" then", b"----------------", b"\xe4\xb8\x80\xe4\xb8\x80", b"ab"]
WEIGHTS = [5, 3, 7, 2, 4, 3, 1]


def brute_capped(pieces, weights, n_merges, cap):
    """brute_bpe's loop, with pairs that would make a token over ``cap`` bytes left out."""
    words = [[bytes([b]) for b in p] for p in pieces]
    merges = []
    while len(merges) < n_merges:
        pc = count_pairs(words, weights)
        cands = [(c, pair) for pair, c in pc.items() if c > 0 and len(pair[0]) + len(pair[1]) <= cap]
        if not cands:
            break
        _, (a, b) = max(cands)
        words = [merge_word(w, a, b) for w in words]
        merges.append((a, b))
    return merges


@pytest.mark.parametrize("cap", [2, 3, 4, 6])
def test_capped_merges_equal_brute_force(cap):
    data, offsets = pieces_to_arrays(PIECES)
    got = learn_merges(data, offsets, np.array(WEIGHTS, np.int64), 40, max_token_bytes=cap)
    assert got.merges == brute_capped(PIECES, WEIGHTS, 40, cap)
    assert all(len(a) + len(b) <= cap for a, b in got.merges)
    # the cap bites: uncapped, longer tokens are learned
    free = learn_merges(data, offsets, np.array(WEIGHTS, np.int64), 40)
    assert max(len(a) + len(b) for a, b in free.merges) > cap


def test_unset_equals_brute_force_and_plain_call():
    data, offsets = pieces_to_arrays(PIECES)
    w = np.array(WEIGHTS, np.int64)
    unset = learn_merges(data, offsets, w, 30, max_token_bytes=None)
    assert unset.merges == brute_bpe(PIECES, WEIGHTS, 30).merges
    assert unset.merges == learn_merges(data, offsets, w, 30).merges


def test_forced_merge_over_the_cap_is_a_config_error():
    data, offsets = pieces_to_arrays(PIECES)
    with pytest.raises(ConfigError, match="max_token_bytes"):
        learn_merges(data, offsets, np.array(WEIGHTS, np.int64), 5, forced=[(b"\xe4", b"\xb8"), (b"\xe4\xb8", b"\x80")],
                     max_token_bytes=2)


def test_config_key_validated_and_absent_when_unset():
    with pytest.raises(ConfigError, match="train.max_token_bytes"):
        Config.from_dict({"version": "x", "pattern": "o200k", "train": {"max_token_bytes": 1}})
    with pytest.raises(ConfigError, match="train.bogus"):
        Config.from_dict({"version": "x", "pattern": "o200k", "train": {"bogus": 1}})
    plain = Config.from_dict({"version": "x", "pattern": "o200k"})
    empty = Config.from_dict({"version": "x", "pattern": "o200k", "train": {}})
    capped = Config.from_dict({"version": "x", "pattern": "o200k", "train": {"max_token_bytes": 16}})
    assert "train" not in plain.to_dict()
    assert plain.hash == empty.hash != capped.hash
    assert train.config_keys(plain) == train.CONFIG_KEYS
    assert plain.hash_of(*train.config_keys(plain)) != capped.hash_of(*train.config_keys(capped))


def _build(cfg, corpus, work):
    ex = LocalExecutor(1)
    inp = Inputs(corpus=corpus, workdir=work)
    for st in (pretokenize, count, train):
        st.run(cfg, inp, work / st.STAGE, ex)
    return json.loads((work / "train" / "model.json").read_text(encoding="utf-8"))


def test_stage_caps_tokens_and_records_the_cap(tmp_path, small_parquet):
    from dwstok.tokenizer import Tokenizer

    base = config(vocab_size=288 + 120)
    capped = config(vocab_size=288 + 120, train={"max_token_bytes": 3})
    m0 = _build(base, [small_parquet], tmp_path / "a")
    m1 = _build(capped, [small_parquet], tmp_path / "b")
    t0 = Tokenizer.load(tmp_path / "a" / "train" / "model.json")
    t1 = Tokenizer.load(tmp_path / "b" / "train" / "model.json")
    specials = set(t1.special_tokens.values())
    assert max(len(b) for i, b in t0.vocab.items() if i not in specials) > 3
    assert max(len(b) for i, b in t1.vocab.items() if i not in specials) <= 3
    assert m1["metadata"]["max_token_bytes"] == 3
    assert "max_token_bytes" not in m0["metadata"] and "train" not in m0["metadata"]["config"]
