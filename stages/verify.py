"""Check a workdir without changing it: what ``dwstok verify WORKDIR`` runs.

For every stage folder (``<workdir>/<stage>``, in build order): its manifest is readable,
of this dwstok's format and names no path outside its folder; every output it lists has
its recorded size and sha256 (hashed again, nothing cached); and it was built from the
upstream result now in place (the upstream output hash it recorded, and the config
sections both were built with, agree).

>>> checks = verify_workdir("work/32.3")  # doctest: +SKIP
>>> [(c.stage, c.status) for c in checks]  # doctest: +SKIP
[('pretokenize', 'ok'), ('count', 'ok'), ('train', 'ok'), ('export', 'ok'), ('encode-shards', 'ok')]
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dwstok.errors import DwstokError

from . import STAGES, module_name
from .lineage import describe
from .manifest import FORMAT, MANIFEST, STAGING_PREFIX, Manifest, file_matches, read_manifest

OK, NOT_BUILT, FAILED = "ok", "not built", "failed"


@dataclass
class StageCheck:
    """One stage's verdict; ``detail`` says what is wrong (or what the result is)."""

    stage: str
    status: str
    detail: str = ""
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    built_with: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status != FAILED


def verify_workdir(workdir: str | Path) -> list[StageCheck]:
    """One ``StageCheck`` per stage, in build order. Reads only; changes nothing."""
    workdir = Path(workdir)
    found: dict[str, Manifest] = {}
    checks = []
    for stage in STAGES:
        t0 = time.perf_counter()
        check = _check_stage(stage, workdir / stage, found)
        check.seconds = round(time.perf_counter() - t0, 3)
        checks.append(check)
    return checks


def _check_stage(stage: str, folder: Path, found: dict[str, Manifest]) -> StageCheck:
    mod = importlib.import_module(module_name(stage))
    upstream = getattr(mod, "UPSTREAM", None)
    if not (folder / MANIFEST).is_file():
        pending = [d.name for d in sorted(folder.glob(f"{STAGING_PREFIX}*")) if (d / MANIFEST).is_file()]
        if pending:  # a swap cut short: recover() in the next run of any stage finishes it
            return StageCheck(stage, NOT_BUILT, f"a finished result waits in {folder / pending[0]}; "
                              f"the next `dwstok {stage}` (or `dwstok build`) swaps it in")
        return StageCheck(stage, NOT_BUILT, f"no {MANIFEST} in {folder}")
    try:
        m = read_manifest(folder)
    except DwstokError as e:  # a path outside the folder
        return StageCheck(stage, FAILED, str(e))
    if m is None:
        return StageCheck(stage, FAILED, f"{folder / MANIFEST} is not a readable manifest")
    if m.stage != stage:
        return StageCheck(stage, FAILED, f"{folder / MANIFEST} is the manifest of stage {m.stage!r}")
    if m.format != FORMAT:
        return StageCheck(
            stage, FAILED, f"{folder} was written by another dwstok version (manifest format "
            f"{m.format}, this one reads {FORMAT}): run `dwstok {stage}` again"
        )
    size = sum(i.bytes for i in m.outputs.values())
    for name, info in sorted(m.outputs.items()):
        p = folder / name
        if not p.is_file():
            return StageCheck(stage, FAILED, f"{p} is missing", len(m.outputs), size)
        if not file_matches(p, info, cached=False):
            return StageCheck(
                stage, FAILED, f"{p} does not match the size and sha256 its manifest records "
                "(modified or corrupted)", len(m.outputs), size,
            )
    # Intact: later stages are checked against it, even if its own chain is broken.
    found[stage] = m
    if upstream is not None:
        problem = _check_upstream(stage, m, upstream, found.get(upstream), getattr(mod, "UPSTREAM_KEYS", None))
        if problem:
            return StageCheck(stage, FAILED, problem, len(m.outputs), size, m.built_with)
    return StageCheck(stage, OK, describe(m.built_with) if m.built_with else "", len(m.outputs), size, m.built_with)


def _check_upstream(stage: str, m: Manifest, upstream: str, up: Manifest | None, keys) -> str | None:
    """Why ``m`` does not follow from the ``upstream`` result ``up`` now in place, or None."""
    if up is None:
        return f"built from a '{upstream}' result that is missing or corrupted (see its line)"
    recorded = (m.inputs.get(upstream) or {}).get("output_hash")
    if recorded != up.output_hash:
        return (
            f"built from another '{upstream}' result than the one in {up.out_dir}: "
            f"run `dwstok {stage}` again (or `dwstok build`)"
        )
    mine, theirs = m.built_with.get("sections", {}), up.built_with.get("sections", {})
    names = sorted(theirs) if keys is None else [k for k in keys if k in theirs]
    differ = [k for k in names if mine.get(k) != theirs[k]]
    if differ:
        return (
            f"built with {describe(m.built_with)} from a '{upstream}' result built with "
            f"{describe(up.built_with)}: they differ in {', '.join(differ)}"
        )
    return None
