"""`dwstok info` on a workdir root (one line per stage) and on a corpus file."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def is_workdir(p: Path) -> bool:
    from stages import STAGES

    return p.is_dir() and any((p / s).is_dir() for s in STAGES)


def workdir(p: Path) -> dict[str, Any]:
    """Per stage: ``status`` (complete, missing, unfinished, damaged, stale), ``age`` and
    when it was built. Cheap: sizes are compared, not hashes (``dwstok verify`` hashes)."""
    import importlib

    from stages import STAGES, module_name
    from stages.manifest import FORMAT, MANIFEST, STAGING_PREFIX, read_manifest
    from stages.status import age

    stages: dict[str, dict[str, Any]] = {}
    for stage in STAGES:
        d = p / stage
        m = read_manifest(d) if d.is_dir() else None
        staged = d.is_dir() and any(q.name.startswith(STAGING_PREFIX) for q in d.iterdir())
        rec: dict[str, Any] = {"status": "missing"}
        if m is None or m.stage != stage:
            if staged:
                rec["status"] = "unfinished (an interrupted run's staging: re-run to resume)"
        else:
            mtime = (d / MANIFEST).stat().st_mtime
            rec = {"status": "complete", "built": m.created, "age": age(time.time() - mtime)}
            upstream = getattr(importlib.import_module(module_name(stage)), "UPSTREAM", None)
            up = stages.get(upstream, {}).get("_manifest") if upstream else None
            bad = next((n for n, f in sorted(m.outputs.items()) if _size(d / n) != f.bytes), None)
            if m.format != FORMAT:
                rec["status"] = f"old format {m.format} (this dwstok writes {FORMAT}): rebuild"
            elif bad is not None:
                rec["status"] = f"damaged: {bad} is {'missing' if _size(d / bad) is None else 'resized'}"
            elif up is not None and m.inputs.get(upstream, {}).get("output_hash") != up.output_hash:
                rec["status"] = f"stale: built from an earlier {upstream} output"
            elif staged:
                rec["status"] = "complete (a newer run's staging is waiting)"
            rec["_manifest"] = m
        stages[stage] = rec
    for rec in stages.values():
        rec.pop("_manifest", None)
    return {"kind": "dwstok workdir", "path": str(p), "stages": stages}


def workdir_lines(d: dict[str, Any]) -> list[str]:
    """``pretokenize    complete, built 3 min ago (2026-12-02T02:20:01+0000)``"""
    width = max(map(len, d["stages"]))
    out = [f"{'workdir'.ljust(width)}  {d['path']}"]
    for stage, rec in d["stages"].items():
        when = f", built {rec['age']} ({rec['built']})" if "age" in rec else ""
        out.append(f"{stage.ljust(width)}  {rec['status']}{when}")
    return out


def _size(p: Path) -> int | None:
    try:
        return p.stat().st_size
    except OSError:
        return None


def corpus_file(p: Path) -> dict[str, Any]:
    """Documents, text bytes and documents per language of a corpus file, read as the
    pipeline reads it (default ``corpus`` settings: fields ``text``/``lang``)."""
    from collections import Counter

    import pyarrow.compute as pc

    from stages.config import CorpusConfig
    from stages.corpus import kind_of, plan_shards, read_batches

    cfg = CorpusConfig()
    kind, compression = kind_of(p)
    docs = text_bytes = 0
    langs: Counter[str] = Counter()
    for shard in plan_shards([p], cfg):
        for b in read_batches(shard, cfg):
            docs += len(b.text)
            text_bytes += int(pc.sum(pc.binary_length(b.text)).as_py() or 0)
            vc = pc.value_counts(b.lang)
            for item in vc.to_pylist():
                langs[item["values"]] += item["counts"]
    return {
        "kind": f"corpus file ({kind}{', ' + compression if compression else ''})",
        "path": str(p),
        "file_bytes": p.stat().st_size,
        "docs": docs,
        "text_bytes": text_bytes,
        "languages": len(langs),
        "docs_by_lang": dict(sorted(langs.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
