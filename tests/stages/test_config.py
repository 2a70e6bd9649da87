from pathlib import Path

import pytest

from dwstok.errors import ConfigError
from stages.config import DEFAULT_SPECIALS, Config, load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.parametrize(
    "name,version,pattern,han,alpha",
    [
        ("32.1", "32.1", "o200k", None, 1.0),
        ("32.2", "32.2", "o200k", 0.9, 0.7),
        ("32.3", "32.3", "o200k-rdigits", 0.9, 0.7),
    ],
)
def test_shipped_configs(name, version, pattern, han, alpha):
    c = load_config(CONFIGS / f"{name}.yaml")
    assert (c.version, c.pattern, c.han.coverage, c.balance.alpha) == (version, pattern, han, alpha)
    assert c.vocab_size == 32768 and c.n_merges == 32480
    assert c.special_tokens == DEFAULT_SPECIALS
    assert c.special_tokens[:13] == (
        "<pad>", "<bos>", "<eos>", "<unk>", "<mask>", "<fim_prefix>", "<fim_middle>",
        "<fim_suffix>", "<sep>", "<code>", "</code>", "<think>", "</think>",
    )
    assert c.special_tokens[13] == "<reserved_13>" and c.special_tokens[-1] == "<reserved_31>"
    assert (c.corpus.text_field, c.corpus.lang_field) == ("text", "lang")


def test_demo_config_is_small_and_32_3_like():
    c = load_config(CONFIGS / "demo.yaml")
    assert c.vocab_size <= 8192 and c.pattern == "o200k-rdigits"
    assert c.han.enabled and c.balance.alpha == 0.7 and c.special_tokens == DEFAULT_SPECIALS


def test_versions_hash_differently_and_sections_are_separate():
    a, b = load_config(CONFIGS / "32.2.yaml"), load_config(CONFIGS / "32.3.yaml")
    assert a.hash != b.hash
    assert a.hash_of("balance", "han") == b.hash_of("balance", "han")
    assert a.hash_of("pattern") != b.hash_of("pattern")
    # A pattern name and its spelled-out regex are the same config.
    c = Config.from_dict({"version": "x", "pattern": "o200k"})
    d = Config.from_dict({"version": "x", "pattern": c.pattern_string})
    assert c.hash_of("pattern") == d.hash_of("pattern")


@pytest.mark.parametrize(
    "raw,message",
    [
        ({"version": "1", "pattern": "o200k", "vocab_sise": 5}, "unknown key 'vocab_sise'"),
        ({"version": "1", "pattern": "o200k", "han": {"coverag": 0.9}}, "unknown key 'han.coverag'"),
        ({"version": "1", "pattern": "o200k", "vocab_size": "big"}, "key 'vocab_size' must be an integer, got str 'big'"),
        ({"version": "1", "pattern": "o200k", "vocab_size": True}, "key 'vocab_size' must be an integer"),
        ({"version": "1", "pattern": "o200k", "balance": {"alpha": "x"}}, "key 'balance.alpha' must be a number"),
        ({"version": "1", "pattern": "o200k", "balance": {"alpha": 2}}, "key 'balance.alpha' must be in [0, 1]"),
        ({"version": "1", "pattern": "o200k", "han": 3}, "key 'han' must be a mapping or 'off'"),
        ({"version": "1", "pattern": "o200k", "corpus": {"on_invalid": "x"}}, "key 'corpus.on_invalid' must be one of"),
        ({"version": "1", "pattern": "o200k", "corpus": {"split_bytes": 0}}, "key 'corpus.split_bytes' must be positive"),
        ({"version": "1", "pattern": "o200k", "corpus": {"split_bytes": "64MB"}}, "key 'corpus.split_bytes' must be an integer"),
        ({"pattern": "o200k"}, "missing key 'version'"),
        ({"version": "1", "pattern": "o200k", "vocab_size": 100}, "vocab_size"),
        ({"version": "1", "pattern": "(unclosed"}, "pattern"),
        ({"version": "1", "pattern": "o200k", "special_tokens": ["a", "a"]}, "duplicates"),
    ],
)
def test_bad_configs_name_the_key(raw, message):
    with pytest.raises(ConfigError) as e:
        Config.from_dict(raw)
    assert message in str(e.value)


def test_load_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    p = tmp_path / "bad.yaml"
    p.write_text("version: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p)
    p.write_text("version: '1'\npattern: o200k\nextra: 1\n")
    with pytest.raises(ConfigError, match=r"unknown key 'extra' in .*bad.yaml"):
        load_config(p)


def test_han_off_spellings_and_corpus_paths(tmp_path):
    for off in ("off", "null", "false"):
        p = tmp_path / "c.yaml"
        p.write_text(f"version: '1'\npattern: o200k\nhan: {off}\ncorpus:\n  paths: [data]\n")
        c = load_config(p)
        assert not c.han.enabled
        assert c.corpus.paths == (str((tmp_path / "data").resolve()),)
