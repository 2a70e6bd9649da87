"""The ray executor on a real (private, one-CPU) Ray cluster: same bytes as local.

Ray takes seconds to start, so one module-scoped cluster serves every test here.
"""

import pytest

from dwstok.errors import InputError
from stages import Inputs, count, pretokenize
from stages.executors import LocalExecutor, RayExecutor, make_executor
from stages.manifest import read_manifest

from .conftest import config, docs, write_parquet

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster():
    # A private cluster owned by this process: ray.shutdown() ends exactly what it
    # started (`ray stop` would kill every Ray process on the machine).
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def test_ray_map_keeps_input_order(cluster):
    ex = RayExecutor(workers=1)
    assert list(ex.map(abs, [-3, 1, -2, 5, -4])) == [3, 1, 2, 5, 4]


def test_ray_output_identical_to_local(cluster, tmp_path):
    corpus = write_parquet(tmp_path / "c.parquet", docs(), row_group_size=6)
    cfg = config()
    outs = {}
    for name, ex in (("local", LocalExecutor(1)), ("ray", make_executor("ray", 1))):
        w = tmp_path / name
        inp = Inputs(corpus=[corpus], workdir=w)
        pretokenize.run(cfg, inp, w / "pretokenize", ex)
        count.run(cfg, inp, w / "count", ex)
        outs[name] = w
    for stage in ("pretokenize", "count"):
        a, b = read_manifest(outs["local"] / stage), read_manifest(outs["ray"] / stage)
        assert a.counts["docs"] == len(docs())
        assert a.outputs == b.outputs
        for f in a.outputs:
            assert (outs["local"] / stage / f).read_bytes() == (outs["ray"] / stage / f).read_bytes()


def test_ray_task_error_is_the_original_error(cluster, tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b'{"text": "x\xff"}\n')
    with pytest.raises(InputError, match="invalid UTF-8 at byte offset 11"):
        pretokenize.run(config(), Inputs(corpus=[p]), tmp_path / "w", RayExecutor(workers=1))


def test_ray_shards_report_progress_from_inside(cluster, tmp_path):
    # As with a local process pool: per-batch updates arrive through a queue (here a Ray
    # actor) while shards run, and the bar still ends exactly at the totals.
    from .test_shard_progress import Recorder

    rows = docs(300)  # ~2,700 documents: three record batches per shard
    corpus = write_parquet(tmp_path / "c.parquet", rows, row_group_size=len(rows) // 2 + 1)
    rec = Recorder()
    ex = RayExecutor(workers=1, progress=rec)
    m = pretokenize.run(config(), Inputs(corpus=[corpus]), tmp_path / "w", ex)
    assert m.counts["shards"] == 2
    (start,) = [c for c in rec.calls if c[0] == "start"]
    adv = [c for c in rec.calls if c[0] == "advance"]
    assert rec.calls[-1] == ("finish",)
    assert sum(c[1] for c in adv) == start[1]
    assert sum(c[2] for c in adv) == len(rows)
    assert sum(c[3] for c in adv) == 2
    in_shard = [c for c in adv if c[3] == 0]
    assert len(in_shard) >= 4 and all(c[2] > 0 for c in in_shard)
    assert ex.progress is rec
