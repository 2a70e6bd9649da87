"""Where the benchmarks find the repository and the shared oracles (reftok, corpus).

The shared folder is ``$DWSTOK_SHARED``, else ``../shared`` beside the checkout, else
``/work/shared`` — the same search as ``tests/conftest.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _shared() -> Path:
    if "DWSTOK_SHARED" in os.environ:
        return Path(os.environ["DWSTOK_SHARED"])
    for candidate in (ROOT.parent / "shared", Path("/work/shared")):
        if candidate.exists():
            return candidate
    return ROOT.parent / "shared"


SHARED = _shared()
