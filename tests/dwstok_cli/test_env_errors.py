"""The environment's refusals are one `Error:` line with a typed exit code, not exit 70."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from dwstok_cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def invoke(runner, *args):
    return runner.invoke(cli, [str(a) for a in args])


def last_line(r) -> str:
    return r.stderr.rstrip("\n").splitlines()[-1]


@pytest.fixture
def tmpfs(tmp_path):
    """Mount a small tmpfs (root only); yields a function (size, read_only) -> folder."""
    mounted = []

    def mount(size: str = "64k", read_only: bool = False) -> Path:
        d = tmp_path / f"mnt{len(mounted)}"
        d.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
        mounted.append(d)
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(d)], check=True)
        return d

    yield mount
    for d in reversed(mounted):
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


def big_corpus(path: Path, n_docs: int = 3000) -> Path:
    import random

    rng = random.Random(1)
    with open(path, "w") as f:
        for _ in range(n_docs):
            words = ("".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 10))) for _ in range(40))
            f.write(json.dumps({"text": " ".join(words)}) + "\n")
    return path


def test_full_disk(runner, tmp_path, tmpfs, small_config):
    w = tmpfs("64k")
    corpus = big_corpus(tmp_path / "c.jsonl")
    r = invoke(runner, "pretokenize", small_config, "--corpus", corpus, "--workdir", w, "--workers", 1)
    assert r.exit_code == 74, r.output
    line = last_line(r)
    assert line.startswith(f"Error: cannot write {w}"), line
    assert line.endswith("No space left on device; free some space or use another --workdir"), line


def test_read_only_workdir(runner, tmpfs, small_config, small_parquet):
    w = tmpfs("1m", read_only=True)
    r = invoke(runner, "pretokenize", small_config, "--corpus", small_parquet, "--workdir", w)
    assert r.exit_code == 74, r.output
    assert last_line(r) == f"Error: cannot write {w / '.dwstok.lock'}: Read-only file system; use a writable --workdir"


def test_file_where_a_stage_folder_should_be(runner, tmp_path, small_config, small_parquet):
    w = tmp_path / "w"
    w.mkdir()
    (w / "pretokenize").write_text("not a folder")
    r = invoke(runner, "pretokenize", small_config, "--corpus", small_parquet, "--workdir", w, "--workers", 1)
    assert r.exit_code == 74, r.output
    assert last_line(r).startswith(f"Error: cannot write {w / 'pretokenize'}")
    assert last_line(r).endswith("a file stands where a folder should be: move it away")
    assert (w / "pretokenize").read_text() == "not a folder"


def kill_self(_item):
    os.kill(os.getpid(), signal.SIGKILL)


def test_killed_worker(runner, tmp_path, small_config, small_parquet, monkeypatch):
    import stages.pretokenize

    def run(config, inputs, out_dir, executor):  # a stage whose workers get OOM-killed
        return list(executor.map(kill_self, [1, 2]))

    monkeypatch.setattr(stages.pretokenize, "run", run)
    r = invoke(runner, "pretokenize", small_config, "--corpus", small_parquet, "--workdir", tmp_path / "w", "--workers", 2)
    assert r.exit_code == 71, r.output
    assert last_line(r).startswith("Error: a worker process died (killed by a signal or the out-of-memory killer)")


def test_debug_keeps_the_typed_exit_code(runner, tmp_path, small_config, small_parquet):
    w = tmp_path / "w"
    w.mkdir()
    (w / "pretokenize").write_text("x")
    r = invoke(runner, "pretokenize", small_config, "--corpus", small_parquet, "--workdir", w, "--debug")
    assert r.exit_code == 74
    assert "Traceback (most recent call last)" in r.stderr
    assert last_line(r).startswith("Error: cannot write")


def test_huge_vocab_size(runner, tmp_path, small_parquet):
    cfg = tmp_path / "c.yaml"
    cfg.write_text('version: "t1"\npattern: o200k\nvocab_size: 100000000000\n')
    r = invoke(runner, "build", cfg, "--corpus", small_parquet, "--workdir", tmp_path / "w", "--workers", 1)
    assert r.exit_code == 2, r.output
    # refused as the config loads (dwstok.limits), naming the file, before any stage runs
    assert last_line(r) == f"Error: vocab_size in {cfg} is 100000000000: it must be at most 2097151, the most ids the encoder takes"
    assert not (tmp_path / "w").exists()


def test_model_claiming_a_huge_n_vocab(tmp_path):
    from dwstok import Tokenizer, model_file
    from dwstok.errors import ModelFileError
    from dwstok.training import train_bpe

    tok = train_bpe(["hello hello world"] * 3, 300)
    tok.save(tmp_path / "m.json")
    d = json.loads((tmp_path / "m.json").read_text())
    d.pop("sha256")
    d["n_vocab"] = 10**12
    d["sha256"] = model_file.content_hash(d)  # a consistent file that lies
    (tmp_path / "m.json").write_text(json.dumps(d))
    with pytest.raises(ModelFileError, match=r"says n_vocab 1000000000000 but holds only \d+ tokens"):
        Tokenizer.load(tmp_path / "m.json")


@pytest.mark.parametrize("blob", ["[]", '"text"', '{"stage": 3, "outputs": []}', "{not json"])
def test_malformed_manifest(runner, tmp_path, small_config, small_parquet, blob):
    w = tmp_path / "w"
    r = invoke(runner, "pretokenize", small_config, "--corpus", small_parquet, "--workdir", w, "--workers", 1)
    assert r.exit_code == 0, r.output
    (w / "pretokenize" / "_manifest.json").write_text(blob)
    # Downstream: the upstream result reads as unfinished.
    r = invoke(runner, "count", small_config, "--workdir", w)
    assert r.exit_code == 3, r.output
    assert last_line(r).startswith(f"Error: {w / 'pretokenize'} holds no finished 'pretokenize' output")
    # The stage itself rebuilds over it.
    r = invoke(runner, "pretokenize", small_config, "--corpus", small_parquet, "--workdir", w, "--workers", 1)
    assert r.exit_code == 0, r.output


def test_unreachable_ray_address_fails_fast(tmp_path, small_config, small_parquet):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [sys.executable, "-m", "dwstok_cli.main", "pretokenize", str(small_config), "--corpus", str(small_parquet),
            "--workdir", str(tmp_path / "w"), "--ray-address", f"127.0.0.1:{port}", "--ray-timeout", "3"]
    r = subprocess.run(args, capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 69, r.stderr
    assert r.stderr.splitlines()[-1].startswith(f"Error: cannot reach Ray at 127.0.0.1:{port}: Connection refused")


def test_silent_ray_address_times_out(tmp_path, small_config, small_parquet):
    pytest.importorskip("ray")
    with socket.socket() as s:  # answers TCP, never speaks Ray
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        port = s.getsockname()[1]
        args = [sys.executable, "-m", "dwstok_cli.main", "pretokenize", str(small_config), "--corpus",
                str(small_parquet), "--workdir", str(tmp_path / "w"), "--ray-address", f"127.0.0.1:{port}"]
        env = {**ENV, "DWSTOK_RAY_TIMEOUT": "3"}
        r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=100)  # Ray alone waits minutes
    assert r.returncode == 69, r.stderr
    assert r.stderr.splitlines()[-1] == (
        f"Error: cannot connect to Ray at 127.0.0.1:{port}: no answer within 3 s "
        "(check --ray-address; --ray-timeout or DWSTOK_RAY_TIMEOUT sets the wait)"
    )


def test_no_writable_numba_cache(tmp_path, tmpfs):
    """A read-only install and no writable home: kernels cache in a temporary folder."""
    ro = tmpfs("4m")
    shutil.copytree(ROOT / "dwstok", ro / "dwstok", ignore=shutil.ignore_patterns("__pycache__"))
    (ro / "home").mkdir()
    subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(ro), HOME=str(ro / "home"), XDG_CACHE_HOME=str(ro / "home"), TMPDIR=str(tmp),
               PYTHONDONTWRITEBYTECODE="1")
    # dwstok.Tokenizer: the kernels (and their cache) load on first use, not on `import dwstok`
    code = "import numba, dwstok; dwstok.Tokenizer; print(dwstok.__file__); print(numba.config.CACHE_DIR)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=tmp)
    assert r.returncode == 0, r.stderr
    path, cache = r.stdout.split()
    assert path.startswith(str(ro))
    assert cache == str(tmp / f"dwstok-numba-{os.getuid()}")
    assert f"caching compiled kernels in {cache}" in r.stderr
