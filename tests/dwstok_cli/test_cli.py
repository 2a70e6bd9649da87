"""The real command, in-process (CliRunner) and as a subprocess: exit codes and exact lines."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dwstok_cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


def invoke(runner, *args):
    return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_help_lists_every_command(runner):
    r = invoke(runner, "--help")
    assert r.exit_code == 0
    for c in ("pretokenize", "count", "train", "export", "encode-shards", "build", "info"):
        assert c in r.stdout


def test_help_is_light():
    code = "import sys, dwstok_cli.main; print(sorted(m for m in ('pyarrow', 'numba', 'rich', 'stages', 'dwstok') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize("given", [False, True])
def test_the_program_keeps_idle_threads_from_spinning_unless_told(given):
    # NumPy's OpenBLAS threads spin at import, and OpenMP's between parallel steps, on
    # a core a stage needs: the program (not an import of its module) sets both, and
    # the user's own settings win
    names = ("OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY")
    env = {k: v for k, v in os.environ.items() if k not in (*names, "OMP_NUM_THREADS")}
    if given:
        env |= {"OPENBLAS_NUM_THREADS": "3", "OMP_WAIT_POLICY": "active"}
    code = (
        "import atexit, os, sys\n"
        "import dwstok_cli.main as m\n"
        f"print(*[os.environ.get(k) for k in {names!r}], flush=True)\n"  # the import alone
        "def report():\n"
        "    import numpy\n"
        f"    print(*[os.environ.get(k) for k in {names!r}], len(os.listdir('/proc/self/task')), flush=True)\n"
        "atexit.register(report)\n"
        "sys.argv = ['dwstok', '--version']\n"
        "m.main()\n"
    )
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    before, version, after = p.stdout.splitlines()
    assert before.split() == (["3", "active"] if given else ["None", "None"])
    assert "dwstok" in version
    assert after.split()[:2] == (["3", "active"] if given else ["1", "passive"])
    if not given:
        assert after.split()[2] == "1"  # NumPy started no thread


def test_stages_run_then_up_to_date(runner, tmp_path, small_config, small_parquet):
    w = tmp_path / "work"
    r = invoke(runner, "pretokenize", small_config, "--corpus", small_parquet, "--workdir", w, "--workers", 1)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("pretokenize: ") and f"→ {w / 'pretokenize'}" in r.stdout
    assert "pretokenize: starting" in r.stderr and "pretokenize: done in" in r.stderr  # plain progress
    r = invoke(runner, "count", small_config, "--workdir", w)
    assert r.exit_code == 0, r.output
    r = invoke(runner, "pretokenize", small_config, "--corpus", small_parquet, "--workdir", w)
    assert r.stdout == f"pretokenize: up to date ({w / 'pretokenize'})\n"
    r = invoke(runner, "count", small_config, "--workdir", w, "--json")
    [s] = json.loads(r.stdout)["stages"]
    assert s["stage"] == "count" and s["status"] == "up to date" and s["counts"]["docs"] == 28
    assert set(s["outputs"]) == {"pieces.arrow", "lang_counts.arrow", "stats.json"}


def test_info(runner, tmp_path, small_config, small_parquet):
    w = tmp_path / "work"
    invoke(runner, "pretokenize", small_config, "--corpus", small_parquet, "--workdir", w, "--workers", 1)
    r = invoke(runner, "info", w / "pretokenize")
    assert r.exit_code == 0
    assert r.stdout.splitlines()[0].split() == ["kind", "pretokenize", "output"]
    r = invoke(runner, "info", w / "pretokenize" / "part-00000.arrow", "--json")
    d = json.loads(r.stdout)
    assert d["kind"] == "pretokenize-shard" and d["pattern"] == "o200k" and d["version"] == "t1"
    assert len(d["sha256"]) == 64 and d["rows"] > 0
    r = invoke(runner, "info", tmp_path / "nothing")
    assert (r.exit_code, r.stderr) == (3, f"Error: {tmp_path / 'nothing'} not found\n")


@pytest.mark.parametrize(
    "setup,args,code,line",
    [
        (None, ["pretokenize", "{tmp}/none.yaml", "--corpus", "{corpus}"], 2, "Error: config file {tmp}/none.yaml not found"),
        ("extra: 1\n", ["pretokenize", "{cfg}", "--corpus", "{corpus}"], 2, "Error: unknown key 'extra' in {cfg}"),
        ("vocab_size: many\n", ["train", "{cfg}"], 2, "Error: key 'vocab_size' in {cfg} must be an integer, got str 'many'"),
        ("", ["pretokenize", "{cfg}", "--corpus", "{tmp}/missing.parquet"], 3, "Error: corpus file {tmp}/missing.parquet not found"),
        ("", ["pretokenize", "{cfg}"], 3, "Error: no corpus given: pass --corpus PATH (or set corpus.paths in the config)"),
        ("", ["count", "{cfg}", "--workdir", "{tmp}/w"], 3, "Error: {tmp}/w/pretokenize holds no finished 'pretokenize' output: run `dwstok pretokenize` first (with the same --workdir)"),
    ],
)
def test_errors_are_one_line_with_exit_code(runner, tmp_path, small_parquet, setup, args, code, line):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("version: '1'\npattern: o200k\n" + (setup or ""))
    fmt = {"tmp": tmp_path, "cfg": cfg, "corpus": small_parquet}
    r = invoke(runner, *[a.format(**fmt) for a in args])
    assert r.exit_code == code
    assert r.stderr.splitlines()[-1] == line.format(**fmt)
    assert "Traceback" not in r.output


def test_invalid_utf8_error_then_skip(runner, tmp_path, small_config):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b'{"text": "ok"}\n{"text": "b\xffd"}\n')
    r = invoke(runner, "pretokenize", small_config, "--corpus", p, "--workdir", tmp_path / "w")
    assert r.exit_code == 3
    assert r.stderr.splitlines()[-1] == (
        f"Error: {p}: invalid UTF-8 at byte offset 26 (line ~2); fix the file or pass --on-invalid skip|replace"
    )
    r = invoke(runner, "pretokenize", small_config, "--corpus", p, "--workdir", tmp_path / "w", "--on-invalid", "skip", "--json")
    assert r.exit_code == 0
    assert json.loads(r.stdout)["stages"][0]["counts"]["skipped_docs"] == 1


def test_internal_error_and_debug(runner, tmp_path, small_config, small_parquet, monkeypatch):
    import stages.pretokenize

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(stages.pretokenize, "run", boom)
    args = ["pretokenize", str(small_config), "--corpus", str(small_parquet), "--workdir", str(tmp_path / "w")]
    r = runner.invoke(cli, args)
    assert r.exit_code == 70
    assert r.stderr == (
        "Error: internal error (RuntimeError: kaboom); rerun with --debug for the traceback and report it\n"
    )
    # --debug adds the traceback and keeps the exit code.
    for argv in (["--debug", *args], [*args, "--debug"]):
        r = runner.invoke(cli, argv)
        assert r.exit_code == 70
        assert "Traceback (most recent call last)" in r.stderr
        assert "RuntimeError: kaboom" in r.stderr


def test_console_script_subprocess(tmp_path, small_config, small_parquet):
    exe = Path(sys.executable).parent / "dwstok"
    if not exe.exists():
        pytest.skip("console script not installed")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    r = subprocess.run(
        [str(exe), "pretokenize", str(small_config), "--corpus", str(tmp_path / "nope.jsonl"), "--workdir", str(tmp_path / "w")],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert r.returncode == 3
    assert r.stderr == f"Error: corpus file {tmp_path / 'nope.jsonl'} not found\n"
    assert r.stdout == ""


def _program(*args, pre="pass", cwd=ROOT):
    """``dwstok ARGS`` through ``dwstok_cli.main.main`` (the console script's entry), after ``pre``."""
    code = f"import sys; {pre}; sys.argv = ['dwstok', *{[str(a) for a in args]!r}]; from dwstok_cli.main import main; main()"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_program_leaves_with_the_exit_code_output_and_exit_handlers(tmp_path, small_config, small_parquet):
    # main() ends with os._exit: the exit code, the whole output and the atexit handlers stay.
    bye = "import atexit; atexit.register(lambda: print('bye', file=sys.stderr))"
    w = tmp_path / "w"
    r = _program("pretokenize", small_config, "--corpus", small_parquet, "--workdir", w, "--workers", 2, "--json", "-q", pre=bye)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["stages"][0]["status"] == "done"
    assert r.stderr == "bye\n"
    r = _program("pretokenize", small_config, "--corpus", tmp_path / "nope.jsonl", "--workdir", w, pre=bye)
    assert (r.returncode, r.stdout) == (3, "")
    assert r.stderr == f"Error: corpus file {tmp_path / 'nope.jsonl'} not found\nbye\n"
    r = _program("no-such-command")
    assert r.returncode == 2 and "No such command" in r.stderr


def test_program_waits_for_a_thread_that_is_not_a_daemon():
    # A running non-daemon thread gets the ordinary exit, which waits for it.
    pre = ("import threading, time; threading.Thread(target=lambda: (time.sleep(0.5), print('late', flush=True)))"
           ".start()")
    r = _program("--version", pre=pre)
    assert r.returncode == 0
    assert r.stdout.splitlines()[-1] == "late"
