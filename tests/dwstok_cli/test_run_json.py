"""Stage commands for scripts: --json (schema dwstok-run/1) on success and failure,
-q/-v, DWSTOK_* environment variables, --workers' default."""

from __future__ import annotations

import json
import os

import pytest

from dwstok_cli.main import cli

pytest.importorskip("dwstok.training")


def invoke(runner, *args, env=None):
    return runner.invoke(cli, [str(a) for a in args], env=env)


def test_json_success_is_a_list_of_stage_records(runner, tmp_path, small_config, small_parquet):
    r = invoke(runner, "pretokenize", small_config, "--corpus", small_parquet, "--workdir", tmp_path / "w", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert (doc["schema"], doc["ok"], doc["exit_code"]) == ("dwstok-run/1", True, 0)
    assert [(s["stage"], s["status"]) for s in doc["stages"]] == [("pretokenize", "done")]


def test_json_failure_keeps_finished_stages_and_adds_an_error_record(runner, tmp_path, small_config, small_parquet):
    # vocab_size far beyond what 28 documents can reach: train refuses after
    # pretokenize and count have finished.
    w = tmp_path / "w"
    r = invoke(runner, "build", small_config, "--corpus", small_parquet, "--workdir", w, "--workers", 1,
               "--set", "vocab_size=60000", "--json")
    assert r.exit_code == 3, r.output
    doc = json.loads(r.stdout)
    assert (doc["schema"], doc["ok"], doc["exit_code"]) == ("dwstok-run/1", False, 3)
    assert [(s["stage"], s["status"]) for s in doc["stages"]] == [
        ("pretokenize", "done"), ("count", "done"), ("train", "error")]
    err = doc["stages"][-1]
    assert err["exit_code"] == 3
    # the same message as the one error line on stderr
    assert r.stderr.splitlines()[-1] == f"Error: {err['error']}"
    assert "allow_smaller" in err["error"]


def test_json_error_before_any_stage(runner, tmp_path, small_config):
    r = invoke(runner, "count", small_config, "--workdir", tmp_path / "w", "--json")
    assert r.exit_code == 3
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["exit_code"] == 3
    [err] = doc["stages"]
    assert (err["stage"], err["status"], err["exit_code"]) == ("count", "error", 3)
    assert "run `dwstok pretokenize` first" in err["error"]


def test_quiet_prints_errors_only_and_verbose_adds_details(runner, tmp_path, small_config, small_parquet):
    w = tmp_path / "w"
    r = invoke(runner, "pretokenize", small_config, "--corpus", small_parquet, "--workdir", w, "-q")
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == ""
    r = invoke(runner, "pretokenize", small_config, "--corpus", small_parquet, "--workdir", w, "-v")
    lines = r.stdout.splitlines()
    assert lines[0] == f"pretokenize: up to date ({w / 'pretokenize'})"
    m = json.loads((w / "pretokenize" / "_manifest.json").read_text())
    assert lines[1] == (f"  config {m['config_hash'][:16]}, inputs {m['inputs_hash'][:16]}, "
                        f"output {lines[1].split('output ')[1]}")
    assert lines[2].startswith("  executor local")
    r = invoke(runner, "count", small_config, "--workdir", tmp_path / "empty", "-q")
    assert r.exit_code == 3 and r.stdout == ""
    assert r.stderr.startswith("Error: ") and len(r.stderr.splitlines()) == 1


def test_options_read_dwstok_environment_variables(runner, tmp_path, small_config, small_parquet):
    w = tmp_path / "from-env"
    env = {"DWSTOK_PRETOKENIZE_WORKDIR": str(w), "DWSTOK_PRETOKENIZE_CORPUS": str(small_parquet)}
    r = invoke(runner, "pretokenize", small_config, "--json", env=env)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["stages"][0]["out_dir"] == str(w / "pretokenize")


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no sched_getaffinity")
def test_workers_default_to_the_cpus_this_process_may_use(monkeypatch):
    import stages.executors as ex

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    with ex.make_executor("local") as e:
        assert e.workers == 1


def test_unknown_files_in_a_corpus_folder(runner, tmp_path, small_config):
    d = tmp_path / "data"
    d.mkdir()
    (d / "a.jsonl").write_text('{"text": "hello"}\n')
    (d / "b.json").write_text("[]")
    r = invoke(runner, "pretokenize", small_config, "--corpus", d, "--workdir", tmp_path / "w")
    assert r.exit_code == 3 and r.stderr.startswith(f"Error: {d} holds 1 file(s) of unknown corpus format: b.json ")
    r = invoke(runner, "pretokenize", small_config, "--corpus", d, "--workdir", tmp_path / "w", "--skip-unknown", "--max-bytes", 5)
    assert r.exit_code == 0, r.output
    assert f"Warning: {d}: skipped 1 file(s) of unknown format: b.json" in r.stderr.splitlines()
