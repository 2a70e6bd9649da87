"""`dwstok config list/show/keys`; presets and --set on the stage commands."""

from __future__ import annotations

import json

import pytest
import yaml

from dwstok_cli.main import cli
from stages.config import load_config, presets, schema


def invoke(runner, *args):
    return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_config_list(runner):
    r = invoke(runner, "config", "list")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == ["32.1", "32.2", "32.3", "demo"]
    assert "version 32.3 " in lines[2] and "32,768" in lines[2] and "o200k-rdigits" in lines[2]


def test_config_show_prints_the_preset_as_written(runner, tmp_path):
    r = invoke(runner, "config", "show", "32.3")
    assert r.exit_code == 0 and r.stdout == presets()["32.3"].read_text()
    # what it prints is a config to start from
    (tmp_path / "mine.yaml").write_text(r.stdout)
    assert load_config(tmp_path / "mine.yaml") == load_config("32.3")


def test_config_show_with_overrides(runner):
    r = invoke(runner, "config", "show", "demo", "--set", "balance.alpha=0.5", "--set", "export.add_bos=true")
    assert r.exit_code == 0
    shown = yaml.safe_load(r.stdout)
    assert shown["balance"] == {"alpha": 0.5} and shown["export"]["add_bos"] is True
    assert shown["vocab_size"] == 4096


def test_config_keys_lists_the_schema(runner):
    r = invoke(runner, "config", "keys")
    assert r.exit_code == 0
    listed = [ln.split()[0] for ln in r.stdout.splitlines()]
    assert listed == [k for k, (t, _) in schema().items() if not hasattr(t, "__dataclass_fields__")]


@pytest.mark.parametrize(
    "args,code,line",
    [
        (["config", "show", "33.0"], 2, "Error: config file 33.0 not found"),
        (["count", "32.3", "--set", "balance.alpa=0.5", "--workdir", "{tmp}/w"], 2,
         "Error: --set balance.alpa=0.5: unknown key 'balance.alpa'; did you mean balance.alpha or balance?"),
        (["train", "demo", "--set", "vocab_size=12", "--workdir", "{tmp}/w"], 2,
         "Error: vocab_size in {demo} with --set vocab_size=12 is 12: it must be at least 288 (specials + 256 bytes)"),
        # a preset name is a config: the command gets as far as its missing input
        (["count", "32.3", "--set", "han=off", "--workdir", "{tmp}/w"], 3,
         "Error: {tmp}/w/pretokenize holds no finished 'pretokenize' output: run `dwstok pretokenize` first (with the same --workdir)"),
    ],
)
def test_presets_and_overrides_on_stage_commands(runner, tmp_path, args, code, line):
    fmt = {"tmp": tmp_path, "demo": presets()["demo"]}
    r = runner.invoke(cli, [a.format(**fmt) for a in args])
    assert r.exit_code == code, r.output
    assert r.stderr.splitlines()[-1] == line.format(**fmt)


def test_build_with_a_preset_and_overrides(runner, tmp_path, small_parquet):
    # export settings from --set reach tokenizer_config.json; the config hash is the preset's
    w = tmp_path / "w"
    r = invoke(
        runner, "build", "demo", "--corpus", small_parquet, "--workdir", w, "--workers", "1",
        "--set", "vocab_size=400", "--set", "han.coverage=null", "--set", "han.count=3",
        "--set", "export.model_max_length=1024", "--set", "export.add_bos=true", "--json",
    )
    assert r.exit_code == 0, r.output
    cfg = json.loads((w / "export" / "tokenizer_config.json").read_text())
    assert (cfg["model_max_length"], cfg["add_bos_token"], cfg["dwstok"]["version"]) == (1024, True, "32.3-demo")
    want = load_config("demo", overrides=["vocab_size=400", "han.coverage=null", "han.count=3",
                                          "export.model_max_length=1024", "export.add_bos=true"])
    manifest = json.loads((w / "train" / "_manifest.json").read_text())
    assert manifest["config_hash"] == want.hash_of("version", "pattern", "vocab_size", "special_tokens", "han", "balance")
