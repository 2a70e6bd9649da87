"""Runs that are stopped or crowded: the workdir lock, SIGINT/SIGTERM/SIGKILL mid-run.

Each test runs the real command as a subprocess (signals and locks belong to processes).
The signal tests spawn worker pools and resume the run (tens of seconds): slow suite.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil")

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
CONFIG = 'version: "t1"\npattern: o200k\nvocab_size: 400\nhan:\n  count: 5\n'


def dwstok(*args) -> list[str]:
    return [sys.executable, "-m", "dwstok_cli.main", *map(str, args)]


def write_corpus(folder: Path, n_files: int = 2, mb: float = 2.0) -> Path:
    """``n_files`` JSONL files of random words (one shard each, a few seconds to pretokenize)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyzäöüßéèñ"
    for i in range(n_files):
        lines, size = [], 0
        while size < mb * 1e6:
            words = ("".join(rng.choices(letters, k=rng.randint(1, 9))) for _ in range(200))
            line = json.dumps({"text": " ".join(words) + f" {rng.randint(0, 99999)}.", "lang": "en"})
            lines.append(line)
            size += len(line) + 1
        (folder / f"part{i}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture
def config(tmp_path) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(CONFIG)
    return p


class Run:
    """A dwstok subprocess in its own process group, with stderr collected as it comes.

    ``freeze_on(line)``: the first stderr line it is true of stops the whole group
    (SIGSTOP) as soon as it is read, and sets ``frozen``: a signal sent then
    (:meth:`signal_frozen`) lands where the run was, however loaded the machine. Signals
    sent after a poll loop's wait had landed after the work was done: pretokenize runs
    32 MB in 0.6 s (0.4 s after its first shard line) on a 2-core VM.
    """

    def __init__(self, args, freeze_on=None, **kw):
        self.p = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, start_new_session=True, **kw
        )
        self.err: list[str] = []
        self.frozen = threading.Event()
        self._freeze_on = freeze_on
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        for line in self.p.stderr:
            self.err.append(line)
            if self._freeze_on is not None and not self.frozen.is_set() and self._freeze_on(line):
                self.freeze()

    def freeze(self) -> None:
        """Stop the whole process group (SIGSTOP)."""
        os.killpg(self.p.pid, signal.SIGSTOP)
        self.frozen.set()

    def signal_frozen(self, sig, group: bool) -> None:
        """Send ``sig`` (to the group, as a terminal's Ctrl-C goes, or to the parent) while
        the run is stopped, then let the group go on (SIGCONT): it gets ``sig`` at once."""
        assert self.frozen.is_set() and self.p.poll() is None, "".join(self.err)
        if group:
            os.killpg(self.p.pid, sig)
        else:
            self.p.send_signal(sig)
        os.killpg(self.p.pid, signal.SIGCONT)

    def wait_for(self, cond, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        while not cond():
            if self.p.poll() is not None:
                pytest.fail(f"the run ended early (exit {self.p.returncode}): {''.join(self.err)}")
            if time.monotonic() > end:
                self.p.kill()
                pytest.fail(f"timed out waiting; stderr so far: {''.join(self.err)}")
            time.sleep(0.05)

    def workers(self) -> list:
        """Pool workers and the progress Manager: spawned Python children."""
        try:
            kids = psutil.Process(self.p.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        out = []
        for k in kids:
            try:
                if "spawn_main" in " ".join(k.cmdline()):
                    out.append(k)
            except psutil.Error:
                pass
        return out

    def finish(self, timeout: float = 60.0) -> tuple[int, str]:
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            pytest.fail(f"the run did not stop within {timeout} s: {''.join(self.err)}")
        self._t.join(5)
        return self.p.returncode, "".join(self.err)


def gone_within(procs, seconds: float = 10.0) -> list:
    """The processes of ``procs`` still alive after ``seconds`` (zombies count as gone)."""
    _, alive = psutil.wait_procs(procs, timeout=seconds)
    return [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


# -- the lock ---------------------------------------------------------------------------
HOLD = """
import sys, time
from stages.lock import workdir_lock
with workdir_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.fixture
def held(tmp_path):
    """A workdir whose lock another process holds; yields (workdir, holder)."""
    w = tmp_path / "w"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(w)], stdout=subprocess.PIPE, text=True, env=ENV)
    assert holder.stdout.readline().strip() == "held"
    yield w, holder
    holder.kill()
    holder.wait()


def test_second_run_stops_at_once_naming_the_holder(held, config, tmp_path):
    w, holder = held
    corpus = write_corpus(tmp_path / "c", n_files=1, mb=0.01)
    r = subprocess.run(dwstok("pretokenize", config, "--corpus", corpus, "--workdir", w, "--workers", 1),
                       capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 75, r.stderr
    assert r.stderr.splitlines()[-1] == (
        f"Error: another dwstok run (pid {holder.pid}) holds {w}: wait for it to finish, or pass --wait"
    )
    assert not (w / "pretokenize").exists()  # nothing was written under the holder
    r = subprocess.run(dwstok("pretokenize", config, "--corpus", corpus, "--workdir", w, "--wait-timeout", "0.5"),
                       capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 75
    assert r.stderr.splitlines()[-1] == f"Error: another dwstok run (pid {holder.pid}) still holds {w} after 0.5 s of waiting"


def test_wait_runs_once_the_holder_is_gone(held, config, tmp_path):
    w, holder = held
    corpus = write_corpus(tmp_path / "c", n_files=1, mb=0.01)
    run = Run(dwstok("pretokenize", config, "--corpus", corpus, "--workdir", w, "--workers", 1, "--wait"))
    run.wait_for(lambda: any("waiting for another dwstok run" in line for line in run.err))
    assert f"(pid {holder.pid}) that holds {w}" in "".join(run.err)
    holder.kill()
    code, err = run.finish(timeout=120)
    assert code == 0, err
    assert (w / "pretokenize" / "_manifest.json").is_file()


# -- signals ----------------------------------------------------------------------------
def _start_pretokenize(tmp_path, config) -> Run:
    # Shards map on threads of the one process (and the progress Manager, where there is
    # one): enough text that the map is still running when the first shard reports.
    corpus = write_corpus(tmp_path / "c", n_files=8, mb=4.0)
    run = Run(dwstok("pretokenize", config, "--corpus", corpus, "--workdir", tmp_path / "w", "--workers", 2),
              freeze_on=lambda line: " 0/8 shards, " in line or " 1/8 shards, " in line)
    run.wait_for(run.frozen.is_set)
    return run


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "group", "code", "line"),
    [
        (signal.SIGTERM, False, 143, "Error: terminated (SIGTERM); finished work is kept: re-run to resume"),
        # A terminal's Ctrl-C goes to the whole process group, workers included.
        (signal.SIGINT, True, 130, "Error: interrupted; finished work is kept: re-run to resume"),
    ],
)
def test_signal_mid_pretokenize_is_one_line_and_stops_workers(tmp_path, config, sig, group, code, line, sigint_reaches_children):
    run = _start_pretokenize(tmp_path, config)
    workers = run.workers()
    run.signal_frozen(sig, group)
    rc, err = run.finish()
    assert rc == code, err
    assert err.rstrip("\n").splitlines()[-1] == line, err
    assert "Traceback" not in err  # no worker prints its own
    assert gone_within(workers) == []
    # Staging is kept, and the re-run resumes and finishes.
    assert any(p.name.startswith(".staging-") for p in (tmp_path / "w" / "pretokenize").iterdir())
    corpus = tmp_path / "c"
    r = subprocess.run(dwstok("pretokenize", config, "--corpus", corpus, "--workdir", tmp_path / "w", "--workers", 2),
                       capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_workers_die_with_a_killed_parent(tmp_path, config):
    run = _start_pretokenize(tmp_path, config)
    workers = run.workers()
    run.p.kill()
    with contextlib.suppress(ProcessLookupError):  # (no process left in the group)
        os.killpg(run.p.pid, signal.SIGCONT)  # the workers, stopped with it, go on to notice
    run.finish()
    assert gone_within(workers) == []


@pytest.mark.slow
def test_ctrl_c_during_train(tmp_path, sigint_reaches_children):
    """Ctrl-C (to the process group, as a terminal sends it) while the merge kernel
    runs: exit 130 with one line (it was a segfault, exit -11)."""
    cfg = tmp_path / "big.yaml"
    cfg.write_text('version: "t1"\npattern: o200k\nvocab_size: 60000\n')
    corpus = write_corpus(tmp_path / "c", n_files=1, mb=8.0)
    w = tmp_path / "w"
    for stage in ("pretokenize", "count"):
        r = subprocess.run(dwstok(stage, cfg, "--corpus", corpus, "--workdir", w, "--workers", 1),
                           capture_output=True, text=True, env=ENV, timeout=600)
        assert r.returncode == 0, r.stderr
    # A small training first, so the kernel is compiled and cached: the signal below
    # then lands inside the running kernel, not in the compiler.
    warm = tmp_path / "warm.yaml"
    warm.write_text('version: "t1"\npattern: o200k\nvocab_size: 300\n')
    r = subprocess.run(dwstok("train", warm, "--workdir", tmp_path / "w"), capture_output=True, text=True, env=ENV, timeout=600)
    assert r.returncode == 0, r.stderr
    before = (w / "train" / "_manifest.json").read_bytes()
    run = Run(dwstok("train", cfg, "--workdir", w))
    run.wait_for(lambda: any("learning" in line for line in run.err))
    # Soon after the kernel starts (it learns for about 0.85 s here): on 3 MB it had
    # finished within the second this waited, and the run exited 0; stopped first, so
    # that a loaded machine's delays before the signal cannot let it finish.
    time.sleep(0.1)
    run.freeze()
    run.signal_frozen(signal.SIGINT, group=True)
    rc, err = run.finish(timeout=30)
    assert rc == 130, err
    assert err.rstrip("\n").splitlines()[-1] == "Error: interrupted; finished work is kept: re-run to resume", err
    assert "Traceback" not in err
    assert (w / "train" / "_manifest.json").read_bytes() == before  # the previous result stands
