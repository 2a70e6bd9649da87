"""stages.early: the kernels of a run's stages load on a thread, each stage's once the
stage before it has started, with the types the stage gives them."""

from __future__ import annotations

import threading

from stages import early
from stages.early import EarlyLoads
from tests.stages.conftest import fresh_process


def test_each_stages_kernels_load_once_the_stage_before_it_has_started():
    done: list[int] = []
    gate = threading.Event()

    def load(i):
        def f(config, executor):
            done.append(i)
            gate.set()

        return f

    loads = EarlyLoads([(0, load(0)), (2, load(2))], None, None)
    loads.begin()
    assert gate.wait(10)
    gate.clear()
    assert done == [0]  # the first stage's at once
    loads.stage_started(0)
    assert not gate.wait(0.2)  # stage 2's wait for stage 1
    loads.stage_started(1)
    assert gate.wait(10)
    loads.join()
    assert done == [0, 2]


def test_joining_drops_the_loads_not_started_and_a_failing_load_stops_the_rest():
    done: list[str] = []
    loads = EarlyLoads([(1, lambda c, e: done.append("late"))], None, None)
    loads.begin()
    loads.join()
    assert done == [] and not loads._thread.is_alive()

    def fail(c, e):
        done.append("fail")
        raise RuntimeError("the stage's own call reports this")

    loads = EarlyLoads([(0, fail), (0, lambda c, e: done.append("after"))], None, None)
    loads.begin()
    loads.join()
    assert done == ["fail"]


def test_nothing_loads_on_a_cold_cache(monkeypatch):
    from dwstok import kernel_cache

    monkeypatch.setattr(kernel_cache, "state", lambda: "cold")
    loads = EarlyLoads.start(["pretokenize", "count", "train"], None, None)
    assert loads._thread is None
    loads.join()
    monkeypatch.setattr(kernel_cache, "state", lambda: "ready")
    assert early._compiled() is True
    asked = []
    monkeypatch.setattr(early, "_compiled", lambda: asked.append(1) or True)
    # no stage with kernels: the cache is not even looked at (that imports Numba, which
    # a process of `dwstok count` alone otherwise never does)
    assert EarlyLoads.start(["count", "export"], None, None)._thread is None
    assert asked == []


SAME_TYPES = """
import sys
from pathlib import Path
from dwstok.merge_learner import _learn_kernel
from dwstok.scanner import _segments_o200k
from stages import Inputs, count, pretokenize, train
from stages.executors import LocalExecutor
from stages.piece_counts import _count_pieces, _rehash
from stages.pretokenize import _sum_wide_chars
from tests.stages.conftest import config

cfg = config(vocab_size=288 + 20)
ex = LocalExecutor(2)
pretokenize.load_kernels(cfg, ex)
train.load_kernels(cfg, ex)
kernels = (_segments_o200k, _sum_wide_chars, _count_pieces, _rehash, _learn_kernel)
first = [set(k.signatures) for k in kernels]
work = Path(sys.argv[2])
for st in (pretokenize, count, train):
    st.run(cfg, Inputs(corpus=[sys.argv[1]], workdir=work), work / st.STAGE, ex)
print(*map(len, first), [set(k.signatures) for k in kernels] == first)
"""


def test_the_early_loads_call_the_kernels_with_the_stages_types(tmp_path, small_parquet):
    # Had a load given a kernel other types (a writable buffer, int32 offsets), it would
    # have compiled a second signature, and the stage loaded its own after all.
    assert fresh_process(SAME_TYPES, str(small_parquet), str(tmp_path / "w")) == ["1", "1", "1", "1", "1", "True"]
