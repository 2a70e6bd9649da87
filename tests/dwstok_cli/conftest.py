from __future__ import annotations

import pytest
from click.testing import CliRunner

from tests.stages.conftest import docs, write_parquet  # noqa: F401


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def small_config(tmp_path):
    p = tmp_path / "small.yaml"
    p.write_text(
        'version: "t1"\npattern: o200k\nvocab_size: 400\nhan:\n  count: 5\nbalance:\n  alpha: 0.7\n'
        "corpus:\n  shard_bytes: 1\n"
    )
    return p


@pytest.fixture
def small_parquet(tmp_path):
    return write_parquet(tmp_path / "corpus.parquet", docs())
