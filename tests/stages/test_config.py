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
        ({"version": "1", "pattern_regex": "(unclosed"}, "key 'pattern_regex' is not a valid regex"),
        ({"version": "1", "pattern": "o200k", "special_tokens": ["<a>", "<a>"]}, "duplicates"),
        # a mistyped name is not silently a regex that matches almost nothing
        ({"version": "1", "pattern": "o200K"}, "key 'pattern' is 'o200K', which is not a pattern name"),
        ({"version": "1", "pattern": "o200k_rdigits"}, "did you mean 'o200k-rdigits'?"),
        ({"version": "1", "pattern": r"\w+|\W"}, "a custom regex goes under 'pattern_regex'"),
        ({"version": "1", "pattern": "o200k", "pattern_regex": r"\w+"}, "either 'pattern' or 'pattern_regex'"),
        ({"version": "1"}, "missing key 'pattern'"),
        # specials spelled like a byte token: one byte (tiktoken), a byte-level name (tokenizer.json)
        ({"version": "1", "pattern": "o200k", "special_tokens": ["<s>", "a"]},
         "special_tokens[1] is 'a', which is spelled like the byte token 99 (byte 0x61)"),
        ({"version": "1", "pattern": "o200k", "special_tokens": ["\x00"]}, "byte token 1 (byte 0x00)"),
        ({"version": "1", "pattern": "o200k", "special_tokens": ["\u0120"]}, "byte token 33 (byte 0x20)"),
        ({"version": "1", "pattern": "o200k", "special_tokens": [""]}, "special_tokens[0] must be a non-empty string"),
        # vocab_size too small for what the config itself forces
        ({"version": "1", "pattern": "o200k", "vocab_size": 288}, None),
        ({"version": "1", "pattern": "o200k", "vocab_size": 287}, "it must be at least 288"),
        # and too large for the encoder (dwstok.limits), refused before any stage runs
        ({"version": "1", "pattern": "o200k", "vocab_size": 2_097_151}, None),
        ({"version": "1", "pattern": "o200k", "vocab_size": 2_097_152}, "vocab_size is 2097152: it must be at most 2097151"),
        ({"version": "1", "pattern": "o200k", "vocab_size": 300, "han": {"count": 11}}, None),
        ({"version": "1", "pattern": "o200k", "vocab_size": 300, "han": {"count": 12}},
         "vocab_size is 300: it leaves 12 merges, but han.count 12 forces at least 13"),
        ({"version": "1", "pattern": "o200k", "vocab_size": 290, "han": {"coverage": 0.5}}, None),
        ({"version": "1", "pattern": "o200k", "vocab_size": 289, "han": {"coverage": 0.5}},
         "vocab_size is 289: it leaves 1 merges, but han.coverage 0.5 forces at least 2"),
        ({"version": "1", "pattern": "o200k", "pretokenize": {"max_piece_bytes": 3}},
         "key 'pretokenize.max_piece_bytes' must be at least 4"),
        ({"version": "1", "pattern": "o200k", "pretokenize": {"max_piece": 9}}, "unknown key 'pretokenize.max_piece'"),
    ],
)
def test_bad_configs_name_the_key(raw, message):
    if message is None:  # the edge that is still fine
        Config.from_dict(raw)
        return
    with pytest.raises(ConfigError) as e:
        Config.from_dict(raw)
    assert message in str(e.value)


def test_custom_regex_and_spelled_out_names():
    c = Config.from_dict({"version": "1", "pattern_regex": r"\w+|\W"})
    assert c.pattern == c.pattern_string == r"\w+|\W"
    # a named pattern given as its exact regex is still that pattern
    o = Config.from_dict({"version": "1", "pattern": "o200k"})
    assert Config.from_dict({"version": "1", "pattern_regex": o.pattern_string}).hash == o.hash


@pytest.mark.parametrize(
    "yaml_text,message",
    [
        ("version: '1'\npattern: o200k\nvocab_size: 300\nvocab_size: 400\n",
         "key 'vocab_size' is given twice in {p} (line 3 and line 4); keep one"),
        ("version: '1'\npattern: o200k\ncorpus:\n  split_bytes: 5\n  text_field: t\n  split_bytes: 6\n",
         "key 'corpus.split_bytes' is given twice in {p} (line 4 and line 6); keep one"),
        ("version: '1'\npattern: o200k\nhan: {coverage: 0.5, coverage: 0.9}\n",
         "key 'han.coverage' is given twice in {p} (line 3 and line 3); keep one"),
    ],
)
def test_duplicate_yaml_keys_are_an_error(tmp_path, yaml_text, message):
    p = tmp_path / "dup.yaml"
    p.write_text(yaml_text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value) == message.format(p=p)


def test_config_errors_exit_2_from_the_cli(tmp_path):
    from click.testing import CliRunner

    from dwstok_cli.main import cli

    p = tmp_path / "typo.yaml"
    p.write_text("version: '1'\npattern: o200K\n")
    r = CliRunner().invoke(cli, ["pretokenize", str(p), "--corpus", str(tmp_path), "--workdir", str(tmp_path / "w")])
    assert r.exit_code == 2, r.output
    assert f"key 'pattern' in {p} is 'o200K', which is not a pattern name" in r.output
    assert not (tmp_path / "w" / "pretokenize").exists()


def test_load_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    p = tmp_path / "bad.yaml"
    p.write_text("version: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p)
    # libyaml reads good files; a bad one is read again by PyYAML, whose message quotes
    # the line and points at the column
    p.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(ConfigError, match=r"(?s)line 2, column 2:\s+b: 3\s+\^"):
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
