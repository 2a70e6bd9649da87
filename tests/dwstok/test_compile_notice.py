"""A run that compiles kernels says so once on stderr; one that finds them cached says nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTICE = "dwstok: compiling kernels, once per install:"

SMALL = "import numpy as np\nfrom dwstok.bpe.cache import _cache_slots\nprint(_cache_slots(np.int64(1000)))\n"
FIRST_ENCODE = (
    "import dwstok\n"
    "tok = dwstok.Tokenizer.from_vocab_merges({i: bytes([i]) for i in range(256)}, [(b'a', b'b'), (b'ab', b'c')])\n"
    "print(tok.encode('abc abcd, 2026 grüße 你好'))\n"
)


def run(code: str, cache: Path, tmp: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DWSTOK_COMPILE_NOTICE", "NUMBA_DISABLE_JIT")}
    env.update(NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp, capture_output=True, text=True, check=True)


def test_notice_once_when_compiling_and_never_when_warm(tmp_path):
    # One small kernel in an empty cache folder: compiled (one line), then loaded (none).
    cache = tmp_path / "numba"
    cache.mkdir()
    cold = run(SMALL, cache, tmp_path)
    assert cold.stdout.strip() == "128"
    assert cold.stderr.count(NOTICE) == 1, cold.stderr
    warm = run(SMALL, cache, tmp_path)
    assert warm.stdout == cold.stdout and NOTICE not in warm.stderr, warm.stderr


def test_notice_stays_quiet_when_the_parent_said_it(tmp_path, monkeypatch):
    cache = tmp_path / "numba"
    cache.mkdir()
    monkeypatch.setenv("DWSTOK_COMPILE_NOTICE", "0")  # as a worker started after the parent's notice
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("NUMBA_DISABLE_JIT", None)
    p = subprocess.run([sys.executable, "-c", SMALL], env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert NOTICE not in p.stderr


@pytest.mark.slow
def test_first_encode_in_a_fresh_cache_prints_the_notice_exactly_once(tmp_path):
    # Everything a first encode compiles (minutes on a busy machine): one line, and none
    # from the next process, which loads it all from the cache.
    cache = tmp_path / "numba"
    cache.mkdir()
    cold = run(FIRST_ENCODE, cache, tmp_path)
    assert cold.stderr.count(NOTICE) == 1, cold.stderr
    warm = run(FIRST_ENCODE, cache, tmp_path)
    assert warm.stdout == cold.stdout and NOTICE not in warm.stderr, warm.stderr
