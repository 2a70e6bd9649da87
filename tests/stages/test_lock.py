"""stages.lock: one run at a time per workdir, through ``flock`` (or the ``filelock``
package where there is no ``fcntl``); each sees a lock that the other holds, as a run
of an older dwstok (which took it through ``filelock``) does."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from stages import lock as lock_mod
from stages.lock import LOCK_FILE, WorkdirLockedError, workdir_lock

HOLD_FLOCK = """
import sys, time
from stages.lock import workdir_lock
with workdir_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""
HOLD_PACKAGE = """
import sys, time
from pathlib import Path
from filelock import FileLock
Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
with FileLock(str(Path(sys.argv[1]) / ".dwstok.lock")):
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.fixture(params=["flock", "filelock package"])
def implementation(request, monkeypatch):
    if request.param == "filelock package":
        monkeypatch.setattr(lock_mod, "fcntl", None)
    return request.param


def hold(script, workdir):
    holder = subprocess.Popen([sys.executable, "-c", script, str(workdir)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


@pytest.mark.parametrize("holder_script", [HOLD_FLOCK, HOLD_PACKAGE], ids=["held by flock", "held by filelock"])
def test_a_held_workdir_is_refused_waited_for_and_freed_by_kill_9(implementation, holder_script, tmp_path):
    w = tmp_path / "w"
    holder = hold(holder_script, w)
    try:
        with pytest.raises(WorkdirLockedError, match="holds .*: wait for it to finish, or pass --wait"):
            with workdir_lock(w):
                pass
        t0 = time.monotonic()
        with pytest.raises(WorkdirLockedError, match=r"still holds .* after 0.3 s of waiting"):
            with workdir_lock(w, wait=True, timeout=0.3):
                pass
        assert 0.3 <= time.monotonic() - t0 < 5
    finally:
        holder.kill()  # SIGKILL: the OS drops its lock
        holder.wait()
    waited = []
    with workdir_lock(w, wait=True, timeout=10, on_wait=waited.append) as path:
        assert path == w / LOCK_FILE
        assert path.read_text() == f"{os.getpid()}\n"
    assert waited == []  # free at once


def test_the_lock_is_released_on_leaving_and_on_an_error(implementation, tmp_path):
    w = tmp_path / "w"
    with pytest.raises(RuntimeError):
        with workdir_lock(w):
            raise RuntimeError("a stage failed")
    with workdir_lock(w):
        pass
    # another process takes it at once
    holder = hold(HOLD_FLOCK, w)
    holder.kill()
    holder.wait()


def test_a_waiting_run_names_the_holder_and_goes_on_once_it_exits(implementation, tmp_path):
    w = tmp_path / "w"
    holder = hold(HOLD_FLOCK, w)
    waited = []

    def on_wait(message):
        waited.append(message)
        holder.terminate()

    with workdir_lock(w, wait=True, on_wait=on_wait):
        pass
    holder.wait()
    assert waited == [f"waiting for another dwstok run (pid {holder.pid}) that holds {w}"]
