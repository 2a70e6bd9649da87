"""Shared fixtures: where the reference tokenizers and the corpus live."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# The suite tests the kernels: a cold cache compiles them in the test's process, never
# encodes through the HF bridge meanwhile (tests/dwstok/test_first_use.py tests that path).
os.environ.setdefault("DWSTOK_COMPILE", "foreground")

# One search for the shared folder, used by the benchmarks too.
from bench.paths import SHARED

REFTOK = SHARED / "reftok"
CORPUS = SHARED / "corpus"


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not present (set DWSTOK_SHARED to the shared folder)")
    return path


@pytest.fixture(scope="session")
def reftok() -> Path:
    return need(REFTOK)


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    return need(CORPUS)


@pytest.fixture(scope="session")
def tiktoken_cache(tmp_path_factory, reftok) -> Path:
    """A private copy of the tiktoken cache (tiktoken writes into it)."""
    d = tmp_path_factory.mktemp("tiktoken_cache")
    for f in (reftok / "tiktoken_cache").iterdir():
        shutil.copy(f, d / f.name)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(d)
    return d


@pytest.fixture
def sigint_reaches_children():
    """Children started in the test get SIGINT as a terminal's Ctrl-C does.

    A job started in the background by a non-interactive shell (``cmd &``, ``nohup``)
    starts with SIGINT ignored, and its children inherit that: Python then installs no
    KeyboardInterrupt handler, and a test that sends SIGINT sees the child run on. While
    this test runs, SIGINT is handled here, and a handled signal is reset to its default
    in a child at exec.
    """
    import signal

    before = signal.getsignal(signal.SIGINT)
    if before == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if before == signal.SIG_IGN:
        signal.signal(signal.SIGINT, before)
