"""What shaped a stage's result, and the check a later stage makes before using it.

Each manifest records ``built_with``: the config file, its version and pattern, and one
hash per config section that shaped the result, its upstream stages' sections included
(pretokenize: pattern, corpus; train adds version, vocab_size, special_tokens, han,
balance). A stage that reads an upstream result compares those hashes with its own
config and refuses a difference (``PatternMismatchError``, exit 5), naming both sides:
count or train on a 32.3 workdir with configs/32.1.yaml fails instead of labelling
o200k-rdigits pieces as a 32.1 model.

>>> from stages.config import Config
>>> a = Config.from_dict({"version": "32.3", "pattern": "o200k-rdigits"})
>>> b = Config.from_dict({"version": "32.1", "pattern": "o200k"})
>>> rec = built_with(a, ("pattern", "corpus"))
>>> differing(rec, b), differing(rec, a)
(['pattern'], [])
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from dwstok.errors import PatternMismatchError
from dwstok.patterns import resolve

from .config import Config


def built_with(config: Config, keys: Iterable[str], upstream: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``built_with`` record of a result shaped by ``keys`` of ``config`` and by the
    upstream result whose record is ``upstream``."""
    sections = dict((upstream or {}).get("sections", {}))
    sections.update({k: config.hash_of(k) for k in keys})
    return {
        "config": config.source,
        "version": config.version,
        "pattern_name": resolve(config.pattern)[0],
        "pattern": config.pattern_string,
        "sections": dict(sorted(sections.items())),
    }


def differing(record: dict[str, Any], config: Config, keys: Iterable[str] | None = None) -> list[str]:
    """The config sections (of ``keys``, default all recorded) whose recorded hash is not
    ``config``'s."""
    sections = record.get("sections", {})
    names = sorted(sections) if keys is None else [k for k in keys if k in sections]
    return [k for k in names if sections[k] != config.hash_of(k)]


def describe(record: dict[str, Any]) -> str:
    """``version 32.3, pattern o200k-rdigits (configs/32.3.yaml)``"""
    pattern = record.get("pattern_name") or f"{record.get('pattern')!r}"
    where = f" ({record['config']})" if record.get("config") else ""
    return f"version {record.get('version')}, pattern {pattern}{where}"


def check(stage: str, folder: str | Path, record: dict[str, Any], config: Config, *, keys: Iterable[str] | None = None) -> None:
    """Refuse the ``stage`` result in ``folder`` if its config sections (``keys``, default
    all it records) differ from ``config``'s: ``PatternMismatchError`` naming both sides."""
    diff = differing(record, config, keys)
    if not diff:
        return
    mine = built_with(config, ())
    raise PatternMismatchError(
        f"{folder} was built with {describe(record)}, but this run uses {describe(mine)}: "
        f"they differ in {', '.join(diff)}. Run `dwstok {stage}` with this config first "
        "(`dwstok build` runs every stage), or use another --workdir"
    )
