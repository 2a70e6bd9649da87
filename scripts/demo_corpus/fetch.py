"""Download pinned wheels with pip into a cache, verify them, and read them unextracted."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from .sources import Package


class FetchError(RuntimeError):
    """A pinned file could not be had, or is not the file that was pinned."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(pkg: Package, cache: Path) -> Path:
    """The pinned file of ``pkg``, from ``cache`` if there already, else via pip.

    pip runs with ``--no-deps`` and ``--ignore-requires-python``: nothing is installed,
    the wheel is only read, so the running interpreter's version does not matter.
    """
    path = cache / pkg.filename
    if path.exists():
        if sha256_file(path) == pkg.sha256:
            return path
        path.unlink()  # a truncated or foreign file; pip would keep it as "already downloaded"
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
           "--no-deps", "--ignore-requires-python", "--only-binary", ":all:",
           "--dest", str(cache), pkg.spec]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise FetchError(f"pip could not download {pkg.spec}: " + " | ".join(tail))
    if not path.exists():
        got = sorted(p.name for p in cache.glob(f"{pkg.filename.split('-')[0]}-*"))
        raise FetchError(f"pip did not return {pkg.filename} for {pkg.spec} (got {got})")
    digest = sha256_file(path)
    if digest != pkg.sha256:
        raise FetchError(f"{path} has sha256 {digest}, pinned {pkg.sha256}; "
                         "delete it and check the pin in scripts/demo_corpus/sources.py")
    return path


def wheel_license(whl: zipfile.ZipFile) -> str:
    """The licence the package declares in its METADATA (expression, field or classifier)."""
    meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
    headers = HeaderParser().parsestr(whl.read(meta).decode("utf-8", "replace"))
    if headers.get("License-Expression"):
        return headers["License-Expression"].strip()
    classifiers = [c.split("::")[-1].strip() for c in headers.get_all("Classifier") or []
                   if c.startswith("License ::")]
    field = (headers.get("License") or "").strip().splitlines()
    return "; ".join(filter(None, [field[0] if field else "", *classifiers])) or "unknown"
