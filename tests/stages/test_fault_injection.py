"""Fault injection (slow): a crash after any file operation, and two runs at once.

- ``test_crash_after_every_file_operation``: fault_driver.py crashes a whole build after
  each of its file operations (every write, rename, unlink, link, mkdir, rmdir), into
  an empty workdir and over a finished build of another config, and re-runs it; every
  re-run must equal a clean build. ``DWSTOK_FAULT_STRIDE=k`` tries every k-th operation
  only (default 1: all of them).
- ``test_two_configs_at_once``: two real `dwstok build` runs of two configs on one
  workdir. Without ``--wait`` the second stops with exit 75 and writes nothing; with
  ``--wait`` it runs after the first, and the workdir ends as a clean build of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.stages.conftest import docs, write_parquet
from tests.stages.fault_driver import snapshot

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
CONFIG_A = 'version: "t1"\npattern: o200k\nvocab_size: 400\nhan:\n  count: 5\ncorpus:\n  shard_bytes: 1\n'
# Another pattern: every stage of B differs from A's.
CONFIG_B = 'version: "t2"\npattern: o200k-rdigits\nvocab_size: 380\nhan:\n  count: 5\ncorpus:\n  shard_bytes: 1\n'


@pytest.fixture
def setup(tmp_path):
    (tmp_path / "a.yaml").write_text(CONFIG_A)
    (tmp_path / "b.yaml").write_text(CONFIG_B)
    corpus = write_parquet(tmp_path / "corpus.parquet", docs())
    return tmp_path / "a.yaml", tmp_path / "b.yaml", corpus


@pytest.mark.slow
def test_crash_after_every_file_operation(tmp_path, setup):
    a, b, corpus = setup
    stride = os.environ.get("DWSTOK_FAULT_STRIDE", "1")
    out = tmp_path / "result.json"
    subprocess.run(
        [sys.executable, str(ROOT / "tests/stages/fault_driver.py"), str(a), str(b), str(corpus), str(out), stride],
        env=ENV, check=True, timeout=6 * 3600,
    )
    r = json.loads(out.read_text())
    print(json.dumps(r))  # the size of the sweep and its time, for `pytest -s`
    for scen in ("fresh", "rebuild"):
        assert r[scen]["operations"] > 50  # the sweep did run through the stages
        assert r[scen]["failures"] == []


def build(config, corpus, workdir, *extra) -> subprocess.Popen:
    args = [sys.executable, "-m", "dwstok_cli.main", "build", str(config), "--corpus", str(corpus),
            "--workdir", str(workdir), "--workers", "1", *extra]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


@pytest.mark.slow
def test_two_configs_at_once(tmp_path, setup):
    a, b, corpus = setup
    clean_b = tmp_path / "clean-b"
    p = build(b, corpus, clean_b)
    assert p.wait(600) == 0, p.stderr.read()

    w = tmp_path / "w"
    first = build(a, corpus, w)
    lock = w / ".dwstok.lock"
    end = time.monotonic() + 300
    while not (lock.is_file() and lock.read_text().strip() == str(first.pid)):
        assert first.poll() is None and time.monotonic() < end, "the first run never took the lock"
        time.sleep(0.02)
    rival = build(b, corpus, w)
    _, err = rival.communicate(timeout=300)
    assert rival.returncode == 75, err
    assert err.splitlines()[-1] == f"Error: another dwstok run (pid {first.pid}) holds {w}: wait for it to finish, or pass --wait"
    waiter = build(b, corpus, w, "--wait")
    _, err_a = first.communicate(timeout=600)
    assert first.returncode == 0, err_a
    _, err_b = waiter.communicate(timeout=600)
    assert waiter.returncode == 0, err_b
    # (Whether it had to wait depends on timing; test_interrupts.py tests the waiting.)
    # Every stage is B's, and byte-identical to a clean build of B.
    assert snapshot(w) == snapshot(clean_b)
