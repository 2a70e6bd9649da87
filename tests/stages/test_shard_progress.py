"""Progress from inside a shard: per-batch updates that add up to the same totals."""

import pytest

from stages import Inputs, pretokenize
from stages.executors import LocalExecutor, Progress

from .conftest import config, docs, write_parquet


class Recorder(Progress):
    def __init__(self):
        self.calls = []

    def start(self, label, *, total_bytes=None, total_items=None):
        self.calls.append(("start", total_bytes, total_items))

    def advance(self, *, bytes=0, docs=0, items=0):
        self.calls.append(("advance", bytes, docs, items))

    def finish(self, ok=True):
        self.calls.append(("finish",))


@pytest.mark.parametrize("workers", [1, 2])
def test_batches_report_inside_shards_and_totals_add_up(tmp_path, workers):
    rows = docs(300)  # ~2,700 documents: three record batches per shard
    corpus = write_parquet(tmp_path / "c.parquet", rows, row_group_size=len(rows) // 2 + 1)
    rec = Recorder()
    ex = LocalExecutor(workers, rec)
    m = pretokenize.run(config(), Inputs(corpus=[corpus]), tmp_path / "w", ex)
    assert m.counts["shards"] == 2
    (start,) = [c for c in rec.calls if c[0] == "start"]
    adv = [c for c in rec.calls if c[0] == "advance"]
    assert rec.calls[-1] == ("finish",) and rec.calls.index(start) == 0
    assert sum(c[1] for c in adv) == start[1]  # bytes end exactly at the total
    assert sum(c[2] for c in adv) == len(rows)
    assert sum(c[3] for c in adv) == 2
    in_shard = [c for c in adv if c[3] == 0]
    assert len(in_shard) >= 4 and all(c[2] > 0 for c in in_shard)
    # the executor's own progress object is back in place
    assert ex.progress is rec
