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
