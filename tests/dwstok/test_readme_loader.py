"""The README's PyTorch IterableDataset over ShardReader.

Its logic (ranks x workers, resume) is tested everywhere, with torch stood in for by
stubs and the DataLoader's worker round robin simulated; with torch installed, the real
DataLoader (spawned workers) must give the same batches.
"""

from __future__ import annotations

import itertools
import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from dwstok.shards import ShardReader
from dwstok.stochastok import SplitTable, StochasTok
from tests.dwstok.test_shards import SPLITTABLE, VOCAB, write_docs

README = Path(__file__).resolve().parents[2] / "README.md"
ST = StochasTok(SplitTable.from_vocab(VOCAB, exclude=range(32)), p=0.2)
KW = dict(seed=3, bos_id=1, stochastok=ST, drop_last=False)


def snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    (code,) = [b for b in blocks if "class TokenBatches(IterableDataset)" in b]
    return code


@pytest.fixture
def reader(tmp_path):
    rng = np.random.default_rng(11)
    docs = [np.array(rng.choice(SPLITTABLE, n), np.uint32) for n in rng.integers(0, 50, 90)]
    write_docs(tmp_path / "part-00000.arrow", docs, n_vocab=300)
    return ShardReader(tmp_path)


@pytest.fixture
def stub_torch(monkeypatch):
    """The snippet's namespace, run against stub torch modules."""
    torch = types.ModuleType("torch")
    torch.from_numpy = lambda a: a
    utils = types.ModuleType("torch.utils")
    data = types.ModuleType("torch.utils.data")
    data.IterableDataset = object
    data.get_worker_info = lambda: None
    torch.utils, utils.data = utils, data
    for name, mod in (("torch", torch), ("torch.utils", utils), ("torch.utils.data", data)):
        monkeypatch.setitem(sys.modules, name, mod)
    ns: dict = {}
    exec(compile(snippet(), "README.md", "exec"), ns)
    return ns


def round_robin(ns, ds, n_workers):
    """``DataLoader(ds, batch_size=None, num_workers=n)``'s order: each worker iterates
    ``ds`` with its own worker info; batches come from the workers in turn."""
    its = []
    for w in range(n_workers):
        ns["get_worker_info"] = lambda w=w: types.SimpleNamespace(id=w, num_workers=n_workers)
        it = iter(ds)
        first = next(it, None)  # runs __iter__ up to its first batch, as worker w
        its.append(itertools.chain([] if first is None else [first], it))
    ns["get_worker_info"] = lambda: None
    out = []
    while its:
        for it in list(its):
            b = next(it, None)
            if b is None:
                its.remove(it)
            else:
                out.append(b)
    return out


def rows(batches):
    return [r.tolist() for b in batches for r in b]


def test_snippet_ranks_workers_resume(reader, stub_torch):
    TokenBatches = stub_torch["TokenBatches"]
    stream = rows(reader.batches(9, 4, shuffle=False, **KW))
    assert rows(TokenBatches(reader, 9, 4, **KW)) == rows(reader.batches(9, 4, **KW))
    for world_size, n_workers in ((1, 2), (2, 3), (3, 2)):
        got, per_rank = [], []
        for rank in range(world_size):
            ds = TokenBatches(reader, 9, 4, rank=rank, world_size=world_size, **KW)
            seq = round_robin(stub_torch, ds, n_workers)
            per_rank.append(len(seq))
            got += rows(seq)
            for k in (1, 2, 5):  # resumed at batch k: what the whole run gave from k on
                ds.start_batch = k
                assert rows(round_robin(stub_torch, ds, n_workers)) == rows(seq[k:])
            ds.start_batch = 0
        assert len(set(per_rank)) == 1  # as many batches on every rank
        left = list(stream)
        for r in got:
            left.remove(r)  # each window at most once, over all ranks and workers
        assert len(left) < world_size * n_workers  # only windows trimmed to keep ranks even


def test_snippet_with_torch(reader, stub_torch, tmp_path, monkeypatch):
    ds_stub = stub_torch["TokenBatches"](reader, 9, 4, **KW)
    want = rows(round_robin(stub_torch, ds_stub, 2))
    monkeypatch.undo()  # the real torch from here on
    torch = pytest.importorskip("torch")
    # spawned workers import the dataset class by module name
    (tmp_path / "readme_loader.py").write_text(snippet(), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    from readme_loader import TokenBatches

    ds = TokenBatches(reader, 9, 4, **KW)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                         multiprocessing_context="spawn")
    assert rows(b.numpy() for b in loader) == want
