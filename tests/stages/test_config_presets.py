"""Presets by name, ``--set`` overrides validated like the file, the ``export:`` section."""

from __future__ import annotations

from pathlib import Path

import pytest

from dwstok.errors import ConfigError
from stages.config import (
    Config,
    ExportConfig,
    apply_overrides,
    config_path,
    load_config,
    parse_override,
    presets,
    schema,
)

CHECKOUT_CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_presets_are_the_checkout_configs():
    # configs/ in a checkout is the package's stages/configs/: one set of files
    assert sorted(presets()) == ["32.1", "32.2", "32.3", "demo"]
    for name, path in presets().items():
        assert path.parent.name == "configs" and path.parent.parent.name == "stages"
        assert (CHECKOUT_CONFIGS / f"{name}.yaml").read_bytes() == path.read_bytes()


@pytest.mark.parametrize("arg", ["32.3", "32.3.yaml"])
def test_preset_by_name(arg):
    assert config_path(arg) == presets()["32.3"]
    assert load_config(arg) == load_config(CHECKOUT_CONFIGS / "32.3.yaml")


def test_a_file_wins_over_a_preset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("32.3").write_text("version: mine\npattern: gpt2\n")
    assert load_config("32.3").version == "mine"


def test_missing_file_is_named():
    with pytest.raises(ConfigError, match=r"^config file nope/32\.9\.yaml not found$"):
        load_config("nope/32.9.yaml")


def test_overrides_are_applied_and_typed():
    c = load_config("32.3", overrides=["balance.alpha=0.5", "vocab_size=1000", "version=32.10", "han=off"])
    assert (c.balance.alpha, c.vocab_size, c.version, c.han.enabled) == (0.5, 1000, "32.10", False)
    assert c.hash_of("balance") != load_config("32.3").hash_of("balance")
    # null removes a key, so a preset's coverage target can become a count
    c = load_config("32.3", overrides=["han.coverage=null", "han.count=300"])
    assert (c.han.coverage, c.han.count) == (None, 300)
    # a string key keeps its text: a regex needs no YAML quoting
    c = load_config("32.1", overrides=["pattern=null", r"pattern_regex='s|\p{L}+|\s+"])
    assert c.pattern == r"'s|\p{L}+|\s+"


def test_overrides_validated_like_the_file():
    with pytest.raises(ConfigError, match=r"^key 'balance\.alpha' in .*32\.3\.yaml with --set balance\.alpha=2 must be in \[0, 1\], got 2\.0$"):
        load_config("32.3", overrides=["balance.alpha=2"])
    with pytest.raises(ConfigError, match=r"^han in .* give either 'coverage' or 'count', not both$"):
        load_config("32.3", overrides=["han.count=5"])
    with pytest.raises(ConfigError, match=r"must be an integer, got str 'big'"):
        load_config("32.3", overrides=["vocab_size=big"])


@pytest.mark.parametrize(
    "item,message",
    [
        ("balance.alpa=1", "--set balance.alpa=1: unknown key 'balance.alpa'; did you mean balance.alpha or balance?"),
        ("nothing.here=1", "--set nothing.here=1: unknown key 'nothing.here'; see `dwstok config keys`"),
        ("balance.alpha", "--set 'balance.alpha': expected KEY=VALUE, e.g. --set balance.alpha=0.5"),
    ],
)
def test_bad_override_names_the_key(item, message):
    with pytest.raises(ConfigError) as e:
        parse_override(item)
    assert str(e.value) == message


def test_override_keeps_the_file_mapping():
    raw = {"version": "1", "pattern": "o200k", "han": "off"}
    out = apply_overrides(raw, ["han.count=3", "export.add_bos=true"])
    assert out == {"version": "1", "pattern": "o200k", "han": {"count": 3}, "export": {"add_bos": True}}
    assert raw["han"] == "off"


def test_override_paths_are_relative_to_the_current_folder(tmp_path, monkeypatch):
    (tmp_path / "cfgs").mkdir()
    cfg = tmp_path / "cfgs" / "c.yaml"
    cfg.write_text("version: '1'\npattern: o200k\ncorpus:\n  paths: [data.parquet]\n")
    monkeypatch.chdir(tmp_path)
    assert load_config(cfg).corpus.paths == (str(tmp_path / "cfgs" / "data.parquet"),)
    assert load_config(cfg, overrides=["corpus.paths=[x.jsonl]"]).corpus.paths == (str(tmp_path / "x.jsonl"),)


def test_every_schema_key_can_be_set():
    for key in schema():
        assert parse_override(f"{key}=null") == (key, None)


# -- export: -------------------------------------------------------------------------------


def test_export_section_defaults_and_values():
    c = Config.from_dict({"version": "1", "pattern": "o200k"})
    assert c.export == ExportConfig() and c.export.model_max_length == 8192 and c.export.split_special_tokens
    c = Config.from_dict(
        {"version": "1", "pattern": "o200k", "export": {
            "model_max_length": 4096, "split_special_tokens": False, "add_bos": True, "add_eos": True,
            "chat_template": "{{ messages }}", "tiktoken_name": "mine"}}
    )
    assert c.export == ExportConfig(4096, False, True, True, "{{ messages }}", "mine")
    # export settings re-run export only
    base = Config.from_dict({"version": "1", "pattern": "o200k"})
    for keys in (("version", "pattern", "vocab_size", "special_tokens", "han", "balance"), ("pattern", "corpus")):
        assert c.hash_of(*keys) == base.hash_of(*keys)
    assert c.hash_of("export") != base.hash_of("export")


@pytest.mark.parametrize(
    "export,message",
    [
        ({"model_max_length": 0}, "key 'export.model_max_length' must be positive"),
        ({"add_bos": "yes"}, "key 'export.add_bos' must be true/false, got str 'yes'"),
        ({"tiktoken_name": "a b"}, "key 'export.tiktoken_name' must be a non-empty name without spaces"),
        ({"chat_template": 3}, "key 'export.chat_template' must be a string, got int 3"),
        ({"add_eos": True}, "key 'export.add_eos' needs the special token '<eos>', which special_tokens lacks"),
        ({"pad": 1}, "unknown key 'export.pad'"),
    ],
)
def test_export_section_errors(export, message):
    raw = {"version": "1", "pattern": "o200k", "special_tokens": ["<bos>"], "export": export}
    with pytest.raises(ConfigError) as e:
        Config.from_dict(raw)
    assert str(e.value) == message
