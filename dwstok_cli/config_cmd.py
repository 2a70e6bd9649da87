"""`dwstok config`: the presets that ship with dwstok, one printed to start from, the keys.

    dwstok config list                      # name, version, vocab size, pattern of each preset
    dwstok config show 32.3 > my.yaml       # a preset (comments and all) to edit
    dwstok config show my.yaml --set balance.alpha=0.5   # the validated result of overrides
    dwstok config keys                      # every key with its type and default
"""

from __future__ import annotations

import typing

import click

from .options import set_option


@click.group("config")
def command() -> None:
    """Presets, a config to start from, and the config keys (docs/config.md)."""


@command.command("list")
def list_presets() -> None:
    """The presets: pass a name wherever a command takes CONFIG (`dwstok build 32.3`)."""
    from stages.config import load_config, presets

    for name, path in presets().items():
        c = load_config(path)
        click.echo(f"{name:<6} version {c.version:<10} vocab {c.vocab_size:>6,}  pattern {c.pattern:<14} {path}")


@command.command("show")
@click.argument("config")
@set_option
def show(config: str, overrides: tuple[str, ...]) -> None:
    """Print CONFIG (a preset name or a file) as YAML.

    Without --set: the file as written, comments included. With --set: the config after
    the overrides, validated, every key spelled out.
    """
    from stages.config import config_path, load_config

    cfg = load_config(config, overrides=overrides)  # validates, and names a missing file
    if not overrides:
        click.echo(config_path(config).read_text(encoding="utf-8"), nl=False)
        return
    import yaml

    click.echo(yaml.safe_dump(cfg.to_dict(), sort_keys=False, allow_unicode=True), nl=False)


@command.command("keys")
def keys() -> None:
    """Every config key with its type and default (what --set accepts)."""
    from stages.config import schema

    for key, (typ, default) in schema().items():
        if hasattr(typ, "__dataclass_fields__"):
            continue  # a section: its keys follow
        name = "list of str" if typing.get_origin(typ) is tuple else getattr(typ, "__name__", str(typ))
        shown = f"[{len(default)} names]" if key == "special_tokens" else repr(list(default) if isinstance(default, tuple) else default)
        click.echo(f"{key:<28} {name:<14} {shown}")
