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
