"""The local executor: inline, process pool, or threads for GIL-free shard jobs."""

from __future__ import annotations

import os
import threading
import time

import pytest

from stages.executors import LocalExecutor, Progress


def _where(x: int) -> tuple[int, int, int]:
    time.sleep(0.01 * (5 - x))  # later items finish first: results must still come in order
    return x, os.getpid(), threading.get_ident()


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError("shard 3 is bad")
    return x


class _Count(Progress):
    def __init__(self):
        self.items = 0
        self.finished = None

    def advance(self, *, bytes=0, docs=0, items=0):
        self.items += items

    def finish(self, ok=True):
        self.finished = ok


def test_gil_free_map_runs_on_threads_of_this_process_in_order():
    prog = _Count()
    with LocalExecutor(2, prog) as ex:
        out = list(ex.map(_where, range(6), gil_free=True))
    assert [x for x, _, _ in out] == list(range(6))
    assert {pid for _, pid, _ in out} == {os.getpid()}
    assert threading.get_ident() not in {tid for _, _, tid in out}
    assert prog.items == 6 and prog.finished is True


def test_default_map_uses_worker_processes():
    with LocalExecutor(2) as ex:
        out = list(ex.map(_where, range(3)))
    assert [x for x, _, _ in out] == [0, 1, 2]
    assert os.getpid() not in {pid for _, pid, _ in out}


@pytest.mark.parametrize("gil_free", [True, False])
def test_a_failing_shard_raises_its_own_error(gil_free):
    prog = _Count()
    with LocalExecutor(2, prog) as ex, pytest.raises(ValueError, match="shard 3 is bad"):
        list(ex.map(_fail_on_three, range(6), gil_free=gil_free))
    assert prog.finished is False


_MASKS = """
import signal, threading, sys
from concurrent.futures import ProcessPoolExecutor
from stages.executors import LocalExecutor
from multiprocessing import resource_tracker

def masks():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    with LocalExecutor(2) as ex:
        threads = list(ex.map(abs, [-1, 2], gil_free=True))
        started = resource_tracker._resource_tracker._pid is not None  # threads spawn nothing
        procs = list(ex.map(abs, [-1, 2]))  # a process pool: the tracker starts here
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    print(threads == procs == [1, 2], started, resource_tracker._resource_tracker._pid is not None,
          {signal.SIGINT, signal.SIGTERM} <= blocked)

t = threading.Thread(target=masks)
t.start()
t.join()
"""


def test_the_resource_tracker_starts_with_the_first_process_and_keeps_the_thread_mask():
    # A thread that blocks SIGINT/SIGTERM (the CLI's run thread) keeps them blocked once
    # its pool starts the tracker; a map on threads starts no tracker at all.
    import signal
    import subprocess
    import sys
    from pathlib import Path

    if not hasattr(signal, "pthread_sigmask"):
        pytest.skip("no pthread_sigmask")
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-c", _MASKS], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(root)}, cwd=root)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False", "True", "True"]
