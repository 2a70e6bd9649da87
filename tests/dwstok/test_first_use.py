"""First use with a cold kernel cache: HF tokenizers encodes (the same ids) while one
background process compiles the kernels; kernel_cache.py says which."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from dwstok import kernel_cache, reference
from dwstok.hf_bridge import HfBridge
from dwstok.tiktoken_compat import ranks_bytes
from dwstok.tokenizer import Tokenizer
from tests.small_model import SAMPLE, TEXTS, small_model

ROOT = Path(__file__).resolve().parents[2]


def _cold(tok: Tokenizer) -> Tokenizer:
    """A copy of ``tok`` that has not built its kernel tables (as one loaded while the
    kernels compile)."""
    specials = set(tok.special_tokens.values())
    return Tokenizer(
        tokens=[b"" if i in specials else t for i, t in enumerate(tok._tokens)], specials=tok.special_tokens, merges=tok._merge_ids.tolist(),
        merge_rule=tok.merge_rule, pattern=tok.pattern, version=tok.version,
    )


@pytest.fixture
def compiling(monkeypatch):
    """This process sees the kernels as compiling in the background."""
    monkeypatch.setattr(kernel_cache, "usable", lambda: False)
    monkeypatch.setattr(kernel_cache, "wait", lambda: pytest.fail("a bridged call waited for the kernels"))


def _dev_texts(corpus_dir, per_lang=6) -> list[str]:
    t = pq.read_table(corpus_dir / "dev.parquet", columns=["text", "lang"]).to_pylist()
    seen: dict[str, int] = {}
    out = []
    for row in t:
        if seen.get(row["lang"], 0) < per_lang:
            seen[row["lang"]] = seen.get(row["lang"], 0) + 1
            out.append(row["text"])
    return out


@pytest.mark.parametrize("pattern", ["o200k", "o200k-rdigits"])
def test_bridge_gives_the_kernels_ids_on_every_language(pattern, corpus_dir):
    tok = small_model(pattern, n_merges=400)
    bridge = HfBridge.for_tokenizer(tok)
    texts = _dev_texts(corpus_dir) + [SAMPLE, TEXTS, "", " ", "   \n\n\t", "1234567 2026 12", "<bos> <|endoftext|>"]
    for text in texts:
        assert bridge.encode(text) == tok.encode(text), text[:80]
    data = np.frombuffer("".join(texts).encode(), np.uint8)
    offsets = np.cumsum([0] + [len(t.encode()) for t in texts])
    ids, docs = bridge.encode_docs(data, offsets, 0, len(texts))
    want_ids, want_docs = tok.encode_utf8_batch(data, offsets, num_threads=1)
    assert np.array_equal(ids, want_ids) and np.array_equal(docs, want_docs)


def test_every_call_while_compiling_matches_the_kernels(compiling):
    tok = small_model("o200k-rdigits", n_merges=300)
    cold = _cold(tok)
    assert cold._native is None
    texts = [SAMPLE, TEXTS[:500], "héllo wörld 1234567", "", "x" * 3000]
    for t in texts:
        assert cold.encode(t) == tok.encode(t)
        assert np.array_equal(cold.encode_to_numpy(t), tok.encode_to_numpy(t))
        assert cold.encode_with_offsets(t) == tok.encode_with_offsets(t)
    assert cold.encode(SAMPLE, allowed_special="all") == tok.encode(SAMPLE, allowed_special="all")
    assert cold.encode_batch(texts, num_threads=2) == tok.encode_batch(texts, num_threads=2)
    data = np.frombuffer("".join(texts).encode(), np.uint8)
    offsets = np.cumsum([0] + [len(t.encode()) for t in texts])
    for a, b in zip(cold.encode_utf8_batch(data, offsets), tok.encode_utf8_batch(data, offsets)):
        assert np.array_equal(a, b)
    ids = tok.encode(SAMPLE)
    assert cold.decode(ids) == SAMPLE and cold.decode_bytes([0, *ids]) == tok.decode_bytes([0, *ids])
    assert "".join(cold.decode_stream(ids)) == SAMPLE
    assert cold._native is None  # all of it without the kernels' tables


def test_a_rank_model_waits_for_the_kernels(monkeypatch, reftok):
    # tiktoken's rule is not HF's BPE: no bridge, so its first encode waits (here: at once).
    waited = []
    monkeypatch.setattr(kernel_cache, "usable", lambda: False)
    monkeypatch.setattr(kernel_cache, "wait", lambda: waited.append(1))
    import json

    spec = json.loads((reftok / "encodings.json").read_text())["encodings"]["r50k_base"]
    tok = Tokenizer.from_tiktoken(reftok / spec["file"], pattern="gpt2", special_tokens={})
    assert HfBridge.for_tokenizer(tok) is None
    assert tok.decode(tok.encode("hello world")) == "hello world"
    assert waited == [1]


def test_invalid_utf8_in_a_batch_goes_to_the_kernels(compiling, monkeypatch):
    tok = small_model("o200k", n_merges=100)
    cold = _cold(tok)
    monkeypatch.setattr(kernel_cache, "wait", lambda: None)
    data = np.frombuffer(b"ok \xff\xfe bytes", np.uint8)
    offsets = np.array([0, data.size])
    a = cold.encode_utf8_batch(data, offsets)
    b = tok.encode_utf8_batch(data, offsets)
    assert np.array_equal(a[0], b[0]) and cold._native is not None


def test_pickled_cold_tokenizer_builds_its_tables_where_it_lands(compiling):
    import pickle

    cold = _cold(small_model("o200k", n_merges=100))
    back = pickle.loads(pickle.dumps(cold))
    assert back._native is None and back.encode(SAMPLE) == small_model("o200k", n_merges=100).encode(SAMPLE)


@pytest.mark.parametrize("pattern", ["o200k", "o200k-rdigits", "gpt2"])
def test_reference_encoder_is_the_kernels(pattern):
    tok = small_model(pattern, n_merges=300)
    for text in (SAMPLE, TEXTS, "aaaa   bbbb 1234567890"):
        assert reference.encode(tok, text) == tok.encode(text)


def test_reference_encoder_on_tiktoken_ranks(reftok):
    tiktoken = pytest.importorskip("tiktoken")
    import json

    import tiktoken.load

    spec = json.loads((reftok / "encodings.json").read_text())["encodings"]["cl100k_base"]
    tok = Tokenizer.from_tiktoken(reftok / spec["file"], pattern="cl100k", special_tokens={})
    ranks = tiktoken.load.load_tiktoken_bpe(str(reftok / spec["file"]), expected_hash=spec["sha256"])
    theirs = tiktoken.Encoding("cl100k_base", pat_str=spec["pat_str"], mergeable_ranks=ranks, special_tokens={})
    text = "Hello world, 12345 don't   stop — Grüße 你好 🎉\n\n"
    assert reference.encode(tok, text) == theirs.encode_ordinary(text) == tok.encode(text)


# ---------------------------------------------------------------- the cache folder's state


def _in_fresh_cache(code: str, cache: Path, **env) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("DWSTOK_COMPILE", "DWSTOK_COMPILE_NOTICE")}
    e.update(NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)


STATE = "from dwstok import kernel_cache as k\nprint(k.state(), k.cache_dir())\n"


def test_state_cold_compiling_ready_and_stale(tmp_path):
    cache = tmp_path / "numba"
    cache.mkdir()
    out = _in_fresh_cache(STATE, cache)
    assert out.stdout.split()[0] == "cold", out.stderr
    folder = Path(out.stdout.split()[1])
    assert folder.is_relative_to(cache)
    from filelock import FileLock

    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(folder / "kernels.lock"):  # a warm run at work
        assert _in_fresh_cache(STATE, cache).stdout.split()[0] == "compiling"
    mark = "from dwstok import kernel_cache as k\nk.mark_ready()\n"
    assert _in_fresh_cache(mark, cache).returncode == 0
    assert _in_fresh_cache(STATE, cache).stdout.split()[0] == "ready"
    (folder / "kernels.ready").write_text("sources of another install\n")
    assert _in_fresh_cache(STATE, cache).stdout.split()[0] == "cold"


def test_background_run_marks_ready_and_a_second_one_steps_aside(tmp_path):
    cache = tmp_path / "numba"
    cache.mkdir()
    code = (
        "import sys\nfrom dwstok import kernel_cache as k\n"
        "sys.exit(k.background_main(lambda: print('compiled')))\n"
    )
    first = _in_fresh_cache(code, cache)
    assert first.returncode == 0 and "compiled" in first.stdout
    assert _in_fresh_cache(STATE, cache).stdout.split()[0] == "ready"
    again = _in_fresh_cache(code, cache)  # ready already: nothing to do
    assert again.returncode == 0 and "compiled" not in again.stdout


def test_foreground_mode_and_a_bad_mode(tmp_path):
    cache = tmp_path / "numba"
    cache.mkdir()
    code = "from dwstok import kernel_cache as k\nprint(k.usable())\n"
    assert _in_fresh_cache(code, cache, DWSTOK_COMPILE="foreground").stdout.strip() == "True"
    bad = _in_fresh_cache(code, cache, DWSTOK_COMPILE="later")
    assert bad.returncode != 0 and "DWSTOK_COMPILE='later'" in bad.stderr


FIRST = """
import sys, time
import dwstok
tok = dwstok.Tokenizer.load(sys.argv[1])
text = "Hello world, a first encode. Grüße, 你好世界, Привет мир, 2026."
ids = tok.encode(text)
print(tok._native is None, ids)
long = tok.encode(text * 20), tok.encode_with_offsets(text * 20)  # lists from cached ints: warmed too

"""


@pytest.mark.slow
def test_a_cold_cache_encodes_at_once_then_switches_to_the_kernels(tmp_path):
    # The whole path on an empty cache: the first process encodes through the bridge and
    # starts one background compile; once it is done a new process runs the kernels.
    model = tmp_path / "model.json"
    small_model("o200k-rdigits", n_merges=200).save(model)
    cache = tmp_path / "numba"
    cache.mkdir()
    e = {k: v for k, v in os.environ.items() if k not in ("DWSTOK_COMPILE", "DWSTOK_COMPILE_NOTICE")}
    e.update(NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    first = subprocess.run([sys.executable, "-c", FIRST, str(model)], env=e, capture_output=True, text=True, timeout=120)
    assert first.stdout.startswith("True "), first.stderr
    assert "compiling kernels in the background" in first.stderr
    deadline = time.monotonic() + 1800
    while _in_fresh_cache(STATE, cache).stdout.split()[0] != "ready":
        assert time.monotonic() < deadline, "the background compile did not finish"
        time.sleep(5)
    second = subprocess.run([sys.executable, "-c", FIRST, str(model)], env=e, capture_output=True, text=True, timeout=600)
    assert second.stdout.startswith("False ") and second.stdout.split(" ", 1)[1] == first.stdout.split(" ", 1)[1]
    assert "compiling" not in second.stderr, second.stderr
    # a tiktoken rank file's model derives its merges with kernels of its own: warmed too
    ranks = tmp_path / "r.tiktoken"
    toks = [bytes([b]) for b in range(256)] + [b"he", b"ll", b"hell", b"hello"]
    ranks.write_bytes(ranks_bytes((t, r) for r, t in enumerate(toks)))
    third = subprocess.run([sys.executable, "-c", RANKS, str(ranks)], env=e, capture_output=True, text=True, timeout=600)
    assert third.stdout.split() == ["[259,", "32,", "259]"], third.stderr
    assert "compiling" not in third.stderr, third.stderr


RANKS = """
import sys
from dwstok import Tokenizer
tok = Tokenizer.from_tiktoken(sys.argv[1], pattern="o200k", special_tokens={"<|endoftext|>": 260})
print(tok.encode("hello hello"))
"""


KILLED = """
import os, signal, sys, time
from dwstok import kernel_cache as k
assert k.usable() is False
child = k._spawned
os.kill(child.pid, signal.SIGKILL)
child.wait()
time.sleep(k._CHECK_EVERY + 0.05)
print(k.state(), k.usable())
"""


def test_a_killed_background_compile_leaves_no_mark_and_this_process_compiles(tmp_path):
    cache = tmp_path / "numba"
    cache.mkdir()
    out = _in_fresh_cache(KILLED, cache)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["cold", "True"]  # no mark, no lock held; compile here
    assert "compiling kernels in the background" in out.stderr
    assert "the background compile ended (exit -9" in out.stderr


WAITS = """
import subprocess, sys, time
from dwstok import kernel_cache as k
lock = k._paths()[1]
lock.parent.mkdir(parents=True, exist_ok=True)
holder = subprocess.Popen([sys.executable, "-c",
    f"from filelock import FileLock\\nimport time\\nwith FileLock({str(lock)!r}):\\n    print('held', flush=True)\\n"
    f"    time.sleep(1)\\n    open({str(lock)!r} + '.done', 'w').close()\\n"],
    stdout=subprocess.PIPE, text=True)
assert holder.stdout.readline().strip() == "held"
print(k.state())
with k.holding_lock():
    print("got it after the holder:", lock.with_suffix(".lock.done").exists())
"""


def test_a_foreground_warm_waits_for_the_background_one(tmp_path):
    cache = tmp_path / "numba"
    cache.mkdir()
    out = _in_fresh_cache(WAITS, cache)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["compiling", "got it after the holder: True"]
    assert "waiting for the kernels that compile in the background" in out.stderr


WAIT_FOR_OWN = """
import time
from dwstok import kernel_cache as k
k._start_background = lambda: __import__("subprocess").Popen(  # a child that takes the lock late
    [__import__("sys").executable, "-c",
     "import time; time.sleep(1)\\nfrom dwstok import kernel_cache as k\\nk.background_main(lambda: time.sleep(1))"])
assert k.usable() is False
k.wait()
print(k.state())
"""


def _state_after(code: str, tmp_path: Path) -> str:
    """What ``code`` prints, run in a fresh process on an empty cache (it must succeed)."""
    cache = tmp_path / "numba"
    cache.mkdir()
    out = _in_fresh_cache(code, cache)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_wait_covers_a_child_that_has_not_taken_the_lock_yet(tmp_path):
    assert _state_after(WAIT_FOR_OWN, tmp_path) == "ready"  # it waited for the child's whole run


PROBED = """
import threading, time
from filelock import FileLock
from dwstok import kernel_cache as k
held = threading.Event()

def probe():  # as state() does for a moment, from a parent that waits for this run
    with FileLock(k._paths()[1]):
        held.set()
        time.sleep(0.3)

threading.Thread(target=probe).start()
held.wait()
k.background_main(lambda: None)
print(k.state())
"""


def test_a_background_run_does_not_step_aside_for_a_probe_of_the_lock(tmp_path):
    # A parent waiting for its background run looks at the lock every 50 ms; a run that
    # met one of those looks had given up, and the parent found the cache still cold.
    assert _state_after(PROBED, tmp_path) == "ready"


LEARNER_WAIT = """
import subprocess, sys, time
from dwstok import kernel_cache as k
print(k.state())
k.wait_for_learner()  # nobody compiles: at once (this process would compile it)
lock = k._paths()[1]
lock.parent.mkdir(parents=True, exist_ok=True)
holder = subprocess.Popen([sys.executable, "-c",
    "import time\\nfrom filelock import FileLock\\nfrom dwstok import kernel_cache as k\\n"
    "k._mark_text()\\n"  # its imports (Numba's) before the clock starts, not in the second
    f"with FileLock({str(lock)!r}):\\n    print('held', flush=True)\\n    time.sleep(1)\\n"
    "    k.mark_learner_ready()\\n    time.sleep(3)\\n"],
    stdout=subprocess.PIPE, text=True)
assert holder.stdout.readline().strip() == "held"
t0 = time.monotonic()
k.wait_for_learner()
# it waited for the learner (a second), and came back while the compile still held the lock
print(time.monotonic() - t0 >= 0.9, k.state())
holder.wait()
"""


def test_the_train_stage_waits_for_the_learner_alone(tmp_path):
    out = _state_after_full(LEARNER_WAIT, tmp_path)
    assert out.stdout.splitlines() == ["cold", "True compiling"]
    assert out.stderr.count("waiting for the merge learner's kernel") == 1


LEARNER_GONE = """
import os, signal, subprocess, sys, time
from dwstok import kernel_cache as k
lock = k._paths()[1]
lock.parent.mkdir(parents=True, exist_ok=True)
(lock.parent / "learner.ready").write_text("sources of another install\\n")  # stale: not this one's
holder = subprocess.Popen([sys.executable, "-c",
    f"import time\\nfrom filelock import FileLock\\nwith FileLock({str(lock)!r}):\\n"
    "    print('held', flush=True)\\n    time.sleep(60)\\n"],
    stdout=subprocess.PIPE, text=True)
assert holder.stdout.readline().strip() == "held"
def kill():
    time.sleep(1)
    os.kill(holder.pid, signal.SIGKILL)
import threading
threading.Thread(target=kill).start()
t0 = time.monotonic()
k.wait_for_learner()  # the compile dies without the learner: this process compiles it
# it waited until the compile died, and no longer: the holder would have slept 60 s
print(0.9 <= time.monotonic() - t0 < 30, k.state())
"""


def test_a_learner_wait_ends_when_the_background_compile_dies(tmp_path):
    out = _state_after_full(LEARNER_GONE, tmp_path)
    assert out.stdout.splitlines() == ["True cold"]


def test_foreground_mode_never_waits_for_the_learner(tmp_path):
    cache = tmp_path / "numba"
    cache.mkdir()
    code = (
        "from filelock import FileLock\nfrom dwstok import kernel_cache as k\n"
        "k._paths()[1].parent.mkdir(parents=True, exist_ok=True)\n"
        "with FileLock(k._paths()[1]):\n    k.wait_for_learner()\n    print('went on')\n"
    )
    out = _in_fresh_cache(code, cache, DWSTOK_COMPILE="foreground")
    assert out.stdout.strip() == "went on", out.stderr


def _state_after_full(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    cache = tmp_path / "numba"
    cache.mkdir()
    out = _in_fresh_cache(code, cache)
    assert out.returncode == 0, out.stderr
    return out


START = "import sys\nfrom dwstok import warm\nsys.argv[1:] = ['--start']\nwarm.main()\n"


def test_warm_start_begins_the_background_compile_once_and_returns(tmp_path):
    # `make demo` runs `python -m dwstok.warm --start` before it assembles the corpus.
    import re
    import signal

    cache = tmp_path / "numba"
    cache.mkdir()
    assert _in_fresh_cache(START, cache, DWSTOK_COMPILE="foreground").stderr == ""  # compiles where used
    assert _in_fresh_cache(STATE, cache).stdout.split()[0] == "cold"
    first = _in_fresh_cache(START, cache)
    assert first.returncode == 0, first.stderr
    pid = int(re.search(r"compiling kernels in the background \(pid (\d+)\)", first.stderr)[1])
    try:
        deadline = time.monotonic() + 30
        while _in_fresh_cache(STATE, cache).stdout.split()[0] != "compiling":  # it outlived --start
            assert time.monotonic() < deadline, "the background compile never took the lock"
            time.sleep(0.2)
        again = _in_fresh_cache(START, cache)  # one compile at a time
        assert again.returncode == 0 and "compiling kernels in the background" not in again.stderr
    finally:
        os.killpg(pid, signal.SIGKILL)  # its own session (start_new_session)
    mark = "from dwstok import kernel_cache as k\nk.mark_ready()\n"
    assert _in_fresh_cache(mark, cache).returncode == 0
    ready = _in_fresh_cache(START, cache)
    assert ready.returncode == 0 and ready.stderr == ""
    bad = _in_fresh_cache(START, cache, DWSTOK_COMPILE="later")  # what `make demo` shows, then stops
    assert bad.returncode == 1 and bad.stderr.strip() == (
        "dwstok: DWSTOK_COMPILE='later': expected one of background, foreground"), bad.stderr
