"""``python -m dwstok.warm`` (``make setup``) compiles what first uses need: after it, the
reference encoders of ``dwstok encode --compare`` and ``dwstok page`` compile nothing."""

import os
import subprocess
import sys

import pytest

FIRST_USES = """
import sys
from dwstok import Tokenizer
for name, pattern, eot in (("r50k_base", "gpt2", 50256), ("o200k_base", "o200k", 199999)):
    tok = Tokenizer.from_tiktoken(f"{sys.argv[1]}/{name}.tiktoken", pattern=pattern, special_tokens={"<|endoftext|>": eot})
    for text in ("Hello world, it's 2026!", "Grüße, 你好世界 " * 40):
        tok.encode_ordinary(text)
        tok.encode(text)
"""


@pytest.mark.slow
def test_the_warm_run_leaves_the_reference_encoders_nothing_to_compile(tmp_path, reftok):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "DWSTOK_COMPILE_NOTICE": "0"}
    subprocess.run([sys.executable, "-m", "dwstok.warm"], env=env, check=True, timeout=1800, cwd=tmp_path,
                   capture_output=True)
    log = tmp_path / "compiled.log"
    r = subprocess.run([sys.executable, "-c", FIRST_USES, str(reftok)], env={**env, "DWSTOK_COMPILE_LOG": str(log)},
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not log.exists() or log.read_text() == ""
