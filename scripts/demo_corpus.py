#!/usr/bin/env python3
"""Assemble the demo corpus: a small, real multilingual corpus from registry packages.

    python scripts/demo_corpus.py --out work/demo-corpus [--cache work/.demo-cache] [--force]

Downloads the wheels pinned in ``scripts/demo_corpus/sources.py`` with pip (never
installing them), verifies their sha256, and reads them as zip files: translators'
text from Django, Sphinx and Wagtail catalogs (~90 languages), Korean law and bill texts from
KoNLPy, the Python Language Reference (English) and source code from the standard
library and Django. Writes ``part-00000.parquet`` (columns text, lang, source; zstd),
``sources.json`` (where every part came from; written last) and ``README.md``.

A second run with the same pins and Python version finds ``sources.json`` up to date
and does nothing; downloads are cached, so a rebuild is offline.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_corpus import extract, output  # noqa: E402
from demo_corpus.fetch import FetchError, fetch, wheel_license  # noqa: E402
from demo_corpus.sources import CODE_BUDGET, PACKAGES, SKIP_LANGS  # noqa: E402

FORMAT = 1  # bump when extraction changes in a way the pins do not show


def fingerprint() -> str:
    """Hash of everything that decides the corpus: pins, budgets, rules, Python version."""
    spec = {
        "format": FORMAT,
        "packages": [p._asdict() for p in PACKAGES],
        "code_budget": CODE_BUDGET,
        "skip_langs": sorted(SKIP_LANGS),
        "python": extract.python_id(),
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def up_to_date(out: Path, fp: str) -> dict | None:
    """The manifest in ``out`` if it matches ``fp`` and every file it lists is intact."""
    try:
        manifest = json.loads((out / "sources.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if manifest.get("fingerprint") != fp:
        return None
    for f in manifest.get("files", []):
        path = out / f["name"]
        if not path.is_file() or path.stat().st_size != f["bytes"]:
            return None
    return manifest


def build(out: Path, cache: Path) -> dict:
    parts = []  # (record, docs) per source part
    for pkg in PACKAGES:
        t0 = time.perf_counter()
        path = fetch(pkg, cache)
        with zipfile.ZipFile(path) as whl:
            licence = wheel_license(whl)
            for part in pkg.parts:
                docs = list(extract.EXTRACTORS[part](whl, pkg))
                parts.append(({"package": pkg.name, "version": pkg.version, "file": pkg.filename,
                               "sha256": pkg.sha256, "url": f"https://pypi.org/project/{pkg.name}/{pkg.version}/",
                               "licence": licence, "part": part, "members": extract.MEMBERS[part]}, docs))
        print(f"  read {pkg.spec} ({', '.join(pkg.parts)}) in {time.perf_counter() - t0:.1f}s", flush=True)
    py = extract.python_id()
    stdlib = {"package": "python-stdlib", "version": py.split("-")[1], "file": str(extract.stdlib_dir()),
              "sha256": None, "url": "https://www.python.org/", "licence": "PSF-2.0"}
    parts.append(({**stdlib, "part": "pydoc-topics",
                   "members": "Lib/pydoc_data/topics.py (the Language Reference, as help() shows it)"},
                  list(extract.pydoc_topic_docs())))
    parts.append(({**stdlib, "part": "code",
                   "members": "Lib/**/*.py (no tests, encodings, generated files)"},
                  list(extract.stdlib_code_docs())))

    docs = output.assemble(d for _, ds in parts for d in ds)
    kept = {d.source for d in docs}
    sources = []
    for record, ds in parts:
        mine = [d for d in ds if d.source in kept]
        sources.append({**record, "docs": len(mine), "bytes": sum(len(d.text.encode()) for d in mine),
                        "languages": sorted({d.lang for d in mine})})

    out.mkdir(parents=True, exist_ok=True)
    (out / "sources.json").unlink(missing_ok=True)  # the corpus is incomplete until it is back
    for stale in out.glob("part-*.parquet"):
        if stale.name != output.PARQUET_NAME:
            stale.unlink()
    files = [output.write_parquet(docs, out / output.PARQUET_NAME)]
    manifest = {
        "fingerprint": fingerprint(),
        "python": py,
        "files": files,
        "columns": {"text": "string", "lang": "ISO 639-1 or 'code'", "source": "package==version:path"},
        "languages": output.language_table(docs),
        "sources": sources,
    }
    output.write_text(out / "README.md", output.readme(manifest))
    output.write_json(out / "sources.json", manifest)
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="output directory (e.g. work/demo-corpus)")
    ap.add_argument("--cache", type=Path, help="download cache (default: .demo-cache beside --out)")
    ap.add_argument("--force", action="store_true", help="rebuild even if the output is up to date")
    args = ap.parse_args(argv)
    out = args.out
    cache = args.cache or out.resolve().parent / ".demo-cache"

    t0 = time.perf_counter()
    fp = fingerprint()
    manifest = None if args.force else up_to_date(out, fp)
    if manifest is not None:
        state = "up to date"
    else:
        try:
            import pyarrow.parquet  # noqa: F401  (fail before downloading, not after)
        except ImportError:
            print("Error: pyarrow is missing; run this with the project's venv (make setup).",
                  file=sys.stderr)
            return 1
        print(f"demo corpus: assembling {out} (downloads cached in {cache})", flush=True)
        try:
            manifest = build(out, cache)
        except FetchError as e:
            print(f"Error: {e}. Is PyPI reachable? A run with a filled cache needs no network.",
                  file=sys.stderr)
            return 1
        state = "built"
    langs = manifest["languages"]
    print("\n".join(output.summary_lines(langs)))
    total = sum(r["bytes"] for r in langs.values())
    print(f"demo corpus {state}: {out} — {sum(r['docs'] for r in langs.values())} docs, "
          f"{total / 1e6:.2f} MB of text in {len(langs)} language groups, "
          f"{sum(f['bytes'] for f in manifest['files']) / 1e6:.2f} MB on disk "
          f"({time.perf_counter() - t0:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
