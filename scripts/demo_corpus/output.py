"""Assemble documents into the corpus and write it: Parquet (zstd), sources.json, README.md.

Every file is written under a temporary name and renamed into place; ``sources.json``
is written last and is what marks the corpus complete.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from .extract import Doc

PARQUET_NAME = "part-00000.parquet"
ROW_GROUPS = 6


def assemble(docs: Iterable[Doc]) -> list[Doc]:
    """Drop empty and duplicate texts (first wins), then mix languages in a fixed order.

    The order is by hash of ``source``, so every row group holds several languages and
    the result does not depend on the order sources were read in.

    >>> [d.source for d in assemble([Doc("a", "en", "x"), Doc("a", "de", "y"), Doc(" ", "en", "z")])]
    ['x']
    """
    seen: set[bytes] = set()
    kept = []
    for d in docs:
        if not d.text.strip():
            continue
        h = hashlib.blake2b(d.text.encode("utf-8"), digest_size=16).digest()
        if h not in seen:
            seen.add(h)
            kept.append(d)
    return sorted(kept, key=lambda d: (hashlib.blake2b(d.source.encode(), digest_size=8).digest(), d.source))


def row_group_bounds(sizes: list[int], n: int) -> list[tuple[int, int]]:
    """Split documents (in order) into at most ``n`` contiguous groups of about equal bytes.

    >>> row_group_bounds([5, 5, 5, 5], 2)
    [(0, 2), (2, 4)]
    """
    total = sum(sizes)
    bounds, start, acc, k = [], 0, 0, 1
    for i, s in enumerate(sizes):
        acc += s
        if acc >= total * k / n and i + 1 < len(sizes) and k < n:
            bounds.append((start, i + 1))
            start, k = i + 1, k + 1
    if start < len(sizes):
        bounds.append((start, len(sizes)))
    return bounds


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def write_parquet(docs: list[Doc], path: Path, row_groups: int = ROW_GROUPS) -> dict:
    """Write ``text, lang, source`` with zstd in ``row_groups`` row groups; return file facts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("text", pa.string()), ("lang", pa.string()), ("source", pa.string())])
    tmp = _tmp(path)
    bounds = row_group_bounds([len(d.text.encode("utf-8")) for d in docs], row_groups)
    try:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as w:
            for a, b in bounds:
                part = docs[a:b]
                w.write_table(pa.table({
                    "text": [d.text for d in part],
                    "lang": [d.lang for d in part],
                    "source": [d.source for d in part],
                }, schema=schema), row_group_size=len(part))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return {"name": path.name, "bytes": path.stat().st_size, "sha256": _sha256(path),
            "rows": len(docs), "row_groups": len(bounds)}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_text(path: Path, text: str) -> None:
    tmp = _tmp(path)
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=False) + "\n")


def language_table(docs: list[Doc]) -> dict[str, dict]:
    """Documents, UTF-8 bytes and distinct source packages per language, largest first."""
    table: dict[str, dict] = {}
    for d in docs:
        row = table.setdefault(d.lang, {"docs": 0, "bytes": 0, "sources": set()})
        row["docs"] += 1
        row["bytes"] += len(d.text.encode("utf-8"))
        row["sources"].add(d.source.split(":", 1)[0])
    return {k: {"docs": v["docs"], "bytes": v["bytes"], "sources": sorted(v["sources"])}
            for k, v in sorted(table.items(), key=lambda kv: (-kv[1]["bytes"], kv[0]))}


def summary_lines(languages: dict[str, dict]) -> list[str]:
    """One line per language, as printed after a build and by an up-to-date run."""
    return [f"  {lang:<5} {row['docs']:>5} docs {row['bytes'] / 1e6:>7.3f} MB  {', '.join(row['sources'])}"
            for lang, row in languages.items()]


def _cell(s: str) -> str:
    """Text safe inside a Markdown table cell."""
    return s.replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*")


def readme(manifest: dict) -> str:
    langs = manifest["languages"]
    total = sum(r["bytes"] for r in langs.values())
    lines = [
        "# Demo corpus",
        "",
        "Assembled by `scripts/demo_corpus.py` from pinned registry packages and the running",
        "Python's standard library, from sources people wrote (translators' catalogs, law and",
        "bill texts, reference documentation, source code); no generated text is added. Columns",
        "`text`, `lang` (ISO 639-1, or `code`), `source` (`package==version:path`). Translation",
        "catalogs contribute only translators' `msgstr` text (no English `msgid`, no fuzzy",
        "entries), one document per catalog file. Licences are those the packages declare;",
        "this corpus is for building and testing the tokenizer, not for redistribution.",
        "",
        f"{sum(r['docs'] for r in langs.values())} documents, {total / 1e6:.2f} MB of text, "
        f"{len(langs)} language groups, built with {manifest['python']}.",
        "",
        "| source | version | file | licence | what | docs | MB |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in manifest["sources"]:
        lines.append(f"| {s['package']} | {s['version']} | `{s['file']}` | {s['licence']} | "
                     f"{_cell(s['members'])} | {s['docs']} | {s['bytes'] / 1e6:.2f} |")
    lines += ["", "| lang | docs | MB | from |", "| --- | --- | --- | --- |"]
    for lang, r in langs.items():
        lines.append(f"| {lang} | {r['docs']} | {r['bytes'] / 1e6:.3f} | {', '.join(r['sources'])} |")
    return "\n".join(lines) + "\n"
