"""`dwstok status`: what build would run and why; exit 0 up to date, 1 something to run.
The verdicts are checked against what `dwstok build` then actually does."""

from __future__ import annotations

import json

import pytest

from dwstok_cli.main import cli
from stages import STAGES

pytest.importorskip("dwstok.training")


def invoke(runner, *args):
    return runner.invoke(cli, [str(a) for a in args])


def status(runner, cfg, corpus, work, *extra):
    r = invoke(runner, "status", cfg, "--corpus", corpus, "--workdir", work, *extra)
    assert r.exit_code in (0, 1), r.output
    return r


def build_statuses(runner, cfg, corpus, work, *extra):
    r = invoke(runner, "build", cfg, "--corpus", corpus, "--workdir", work, "--workers", 1, "--json", *extra)
    assert r.exit_code == 0, r.output
    return {s["stage"]: s["status"] for s in json.loads(r.stdout)["stages"]}


def predicted(r):
    return {d["stage"]: ("done" if d["status"] == "would run" else "up to date")
            for d in json.loads(r.stdout)["stages"]}


def test_status_predicts_what_build_runs(runner, tmp_path, small_config, small_parquet):
    w = tmp_path / "w"
    r = status(runner, small_config, small_parquet, w)
    assert r.exit_code == 1
    assert r.stdout.splitlines() == [f"{s}: would run (missing: never built here)" for s in STAGES]
    assert not w.exists()  # nothing written
    build_statuses(runner, small_config, small_parquet, w)

    r = status(runner, small_config, small_parquet, w)
    assert r.exit_code == 0 and r.stdout.splitlines() == [f"{s}: up to date" for s in STAGES]
    assert status(runner, small_config, small_parquet, w, "-q").stdout == ""

    # a train-only config change: train reruns, export and encode-shards follow
    r = status(runner, small_config, small_parquet, w, "--set", "balance.alpha=0.5")
    assert r.exit_code == 1
    assert r.stdout.splitlines() == [
        "pretokenize: up to date",
        "count: up to date",
        "train: would run (config changed: balance)",
        "export: would run (inputs will change: train would run)",
        "encode-shards: would run (inputs will change: train would run)",
    ]
    r = status(runner, small_config, small_parquet, w, "--set", "balance.alpha=0.5", "--json")
    assert json.loads(r.stdout)["schema"] == "dwstok-status/1"
    want = predicted(r)
    assert build_statuses(runner, small_config, small_parquet, w, "--set", "balance.alpha=0.5") == want

    # a damaged output
    tj = w / "export" / "tokenizer.json"
    tj.write_bytes(tj.read_bytes().replace(b'"', b"'", 1))
    r = status(runner, small_config, small_parquet, w, "--set", "balance.alpha=0.5", "--json")
    assert r.exit_code == 1
    assert [d["reason"] for d in json.loads(r.stdout)["stages"] if d["status"] == "would run"] == [
        "corrupt: tokenizer.json does not match its recorded sha256"]
    assert build_statuses(runner, small_config, small_parquet, w, "--set", "balance.alpha=0.5") == predicted(r)

    # another corpus: pretokenize's inputs changed, every later stage follows
    from tests.stages.conftest import docs, write_parquet

    other = write_parquet(tmp_path / "other.parquet", docs()[:-1])
    r = status(runner, small_config, other, w, "--set", "balance.alpha=0.5", "--json")
    verdicts = json.loads(r.stdout)["stages"]
    assert verdicts[0]["reason"] == "inputs changed: corpus files"
    assert all(d["status"] == "would run" for d in verdicts)


def test_status_of_a_busy_workdir_exits_75(runner, tmp_path, small_config, small_parquet):
    from stages.lock import workdir_lock

    w = tmp_path / "w"
    with workdir_lock(w):
        r = invoke(runner, "status", small_config, "--corpus", small_parquet, "--workdir", w)
    assert r.exit_code == 75 and "holds" in r.stderr
