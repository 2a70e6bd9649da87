"""What a build would do, and why, without running anything (``dwstok status``).

Each stage is judged as its ``run`` judges itself (``manifest.up_to_date``): the same
config hash (``CONFIG_KEYS``), the same inputs hash (the corpus fingerprint, or the
upstream result's ``output_hash``) and every recorded output intact. A stage whose
upstream would run, would run too. Nothing is written: no recovery, no cleaning.

>>> StageStatus("count", "would run", "missing").line()
'count: would run (missing)'
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import STAGES, module_name
from .config import Config
from .inputs import Inputs
from .manifest import FORMAT, Manifest, first_bad_output, hash_obj, read_manifest


@dataclass(frozen=True)
class StageStatus:
    """One stage's verdict: ``status`` "up to date" or "would run", and why."""

    stage: str
    status: str
    reason: str = ""
    out_dir: str | None = None
    built_at: float | None = None  # the manifest's mtime, when there is one

    @property
    def would_run(self) -> bool:
        return self.status != "up to date"

    def line(self) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return f"{self.stage}: {self.status}{why}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def stage_status(config: Config, inputs: Inputs, stages=STAGES) -> list[StageStatus]:
    """The verdict for each of ``stages`` (in build order) under ``config``."""
    import importlib

    out: list[StageStatus] = []
    rerun: set[str] = set()
    for stage in stages:
        mod = importlib.import_module(module_name(stage))
        out_dir = inputs.stage_dir(stage)
        m = read_manifest(out_dir)
        built_at = _mtime(out_dir / "_manifest.json") if m is not None else None

        def verdict(reason: str, *, ok: bool = False) -> StageStatus:
            return StageStatus(stage, "up to date" if ok else "would run", reason, str(out_dir), built_at)

        upstream = getattr(mod, "UPSTREAM", None)
        if m is None or m.stage != stage:
            v = verdict("missing: never built here")
        elif m.format != FORMAT:
            v = verdict(f"written by another dwstok version (manifest format {m.format}, this one writes {FORMAT})")
        elif m.config_hash != _config_hash(mod, config):
            changed = _changed_sections(mod, config, m)
            v = verdict("config changed" + (f": {', '.join(changed)}" if changed else ""))
        elif upstream in rerun:
            v = verdict(f"inputs will change: {upstream} would run")
        elif m.inputs_hash != _inputs_hash(stage, mod, config, inputs):
            v = verdict("inputs changed: " + ("corpus files" if upstream is None else f"{upstream} output"))
        else:
            bad = first_bad_output(out_dir, m.outputs)
            if bad is None:
                v = verdict("", ok=True)
            elif not (Path(out_dir) / bad).is_file():
                v = verdict(f"corrupt: {bad} is missing")
            else:
                v = verdict(f"corrupt: {bad} does not match its recorded sha256")
        if v.would_run:
            rerun.add(stage)
        out.append(v)
    return out


def _config_hash(mod, config: Config) -> str:
    keys = mod.config_keys(config) if hasattr(mod, "config_keys") else mod.CONFIG_KEYS
    return config.hash_of(*keys)


def _changed_sections(mod, config: Config, m: Manifest) -> list[str]:
    keys = mod.config_keys(config) if hasattr(mod, "config_keys") else mod.CONFIG_KEYS
    recorded = (m.built_with or {}).get("sections", {})
    return [k for k in keys if recorded.get(k) != config.hash_of(k)]


def _inputs_hash(stage: str, mod, config: Config, inputs: Inputs) -> str | None:
    """The inputs hash ``stage``'s run would compute (None when it cannot be known)."""
    from .corpus import corpus_fingerprint, plan_shards

    upstream = getattr(mod, "UPSTREAM", None)
    up = read_manifest(inputs.stage_dir(upstream)) if upstream else None
    if upstream and up is None:
        return None
    if stage == "pretokenize":
        return hash_obj(corpus_fingerprint(plan_shards(inputs.require_corpus(), config.corpus)))
    if stage == "encode-shards":
        shards = plan_shards(inputs.require_corpus(), config.corpus)
        return hash_obj({"corpus": corpus_fingerprint(shards), upstream: up.output_hash})
    return up.output_hash


def _mtime(p: Path) -> float | None:
    try:
        return p.stat().st_mtime
    except OSError:
        return None


def age(seconds: float) -> str:
    """``age(90)`` → '1 min ago' (for ``dwstok info`` on a workdir).

    >>> age(30), age(7200), age(3 * 86400)
    ('30 s ago', '2 h ago', '3 days ago')
    """
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s ago"
    if s < 3600:
        return f"{s // 60} min ago"
    if s < 86400:
        return f"{s // 3600} h ago"
    return f"{s // 86400} days ago"


def now() -> float:
    return time.time()
