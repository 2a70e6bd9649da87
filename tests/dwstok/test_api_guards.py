"""The Python API under misuse and Ctrl-C: clear errors, a plain KeyboardInterrupt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tok():
    from dwstok.training import train_bpe

    return train_bpe(["hello world, hello there"] * 5, 300)


def test_encode_batch_rejects_one_text(tok):
    with pytest.raises(TypeError, match=r"encode_batch takes a list of texts, got one text"):
        tok.encode_batch("hello")
    assert tok.encode_batch(["hello"]) == [tok.encode("hello")]


@pytest.mark.parametrize("n", [0, -1, 1.5])
def test_num_threads_must_be_positive(tok, n):
    with pytest.raises(ValueError, match="num_threads must be a positive integer"):
        tok.encode_batch(["a", "b"], num_threads=n)


def test_train_bpe_refuses_a_vocab_size_the_encoder_cannot_take():
    from dwstok.errors import ConfigError
    from dwstok.training import train_bpe

    with pytest.raises(ConfigError, match="vocab_size 2097152 is more than 2097151, the most ids the encoder takes"):
        train_bpe(["hello world"], 2_097_152)


LEARN = """
import sys
import numpy as np
from dwstok.merge_learner import learn_merges
rng = np.random.default_rng(0)
n, size = 300_000, 64  # long enough pieces that 200k merges take many seconds
data = rng.integers(97, 123, n * size).astype(np.uint8)
offsets = np.arange(0, n * size + 1, size, dtype=np.int64)
weights = rng.integers(1, 1000, n).astype(np.int64)
learn_merges(data[: 10 * size], offsets[:11], weights[:10], 5)  # compile (or load) first
print("start", flush=True)
try:
    learn_merges(data, offsets, weights, 200_000)
    print("finished")
except KeyboardInterrupt:
    print("KeyboardInterrupt")
"""


@pytest.mark.slow
def test_ctrl_c_during_learn_merges_is_a_keyboard_interrupt(sigint_reaches_children):
    """Python API: Ctrl-C mid-kernel is a KeyboardInterrupt at once (was a SystemError,
    or nothing until the kernel finished)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-c", LEARN], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "start"
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=30)  # the whole run takes minutes
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("learn_merges did not stop on SIGINT")
    assert p.returncode == 0, err
    assert out.strip() == "KeyboardInterrupt", err


def test_ctrl_c_in_a_two_thread_batch_leaves_the_pool_working(tok, monkeypatch):
    """Ctrl-C while the calling thread encodes its range of a batch: a KeyboardInterrupt
    at once (no waiting for the pool thread's range), no range started after it, and the
    next batch, on the same pool, gives the same ids as encode()."""
    import threading

    import dwstok.tokenizer as T

    monkeypatch.setattr(T, "_SPLIT_MIN", 1)
    monkeypatch.setattr(T, "_RANGE_BYTES", 1)
    texts = [f"hello world, hello there {i} " * 20 for i in range(8)]
    main = threading.get_ident()
    started: list[int] = []
    slow = threading.Event()
    encode_range = T.Tokenizer._encode_range

    def interrupted(self, data, offsets, d0, d1, *a):
        started.append(d0)
        if threading.get_ident() == main:
            slow.wait(5)  # the pool thread has taken a range of its own by now
            raise KeyboardInterrupt
        slow.set()
        time.sleep(0.5)  # a long range on the pool thread
        return encode_range(self, data, offsets, d0, d1, *a)

    monkeypatch.setattr(T.Tokenizer, "_encode_range", interrupted)
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        tok.encode_batch(texts, num_threads=2)
    assert time.perf_counter() - t0 < 0.4  # not held up by the pool thread's range
    time.sleep(0.7)  # the pool thread's range ends; it starts no other
    assert len(started) == 2
    monkeypatch.setattr(T.Tokenizer, "_encode_range", encode_range)
    assert tok.encode_batch(texts, num_threads=2) == [tok.encode(t) for t in texts]
