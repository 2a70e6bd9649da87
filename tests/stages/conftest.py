"""Small generated corpora for the stage tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DOCS = [
    ("Hello world! The year 2026 has 1234567 seconds.\n\n  Indented   text\r\n", "en"),
    ("Der schnelle braune Fuchs springt über den faulen Hund. Straße 12.", "de"),
    ("统计语言模型的中文文本，中文分词很重要。我们的模型。", "zh"),
    ("def f(x):\n    return x ** 2  # square\n\n\nprint(f(3))\n", "code"),
    ("日本語のテキストです。漢字とかなが混ざっています。中文", "ja"),
    ("Привет, мир! Это тест   с пробелами.\n", "ru"),
    ("emoji 🎉🎉 and combining é e\u0301 marks; don't won't I'M", "en"),
    ("", "en"),
    ("<bos> special names <|endoftext|> are plain text", "en"),
]


def docs(n_copies: int = 3) -> list[tuple[str, str | None]]:
    out = []
    for i in range(n_copies):
        for t, lang in DOCS:
            out.append((f"{t} #{i}", lang))
    out.append(("a document without a language", None))
    return out


def write_parquet(path: Path, rows, *, row_group_size: int = 5) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.table({"text": [r[0] for r in rows], "lang": [r[1] for r in rows], "source": ["t"] * len(rows)})
    pq.write_table(t, path, row_group_size=row_group_size, compression="zstd")
    return path


def write_jsonl(path: Path, rows, *, compression: str | None = None) -> Path:
    lines = []
    for text, lang in rows:
        d = {"text": text}
        if lang is not None:
            d["lang"] = lang
        lines.append(json.dumps(d, ensure_ascii=False))
    data = ("\n".join(lines) + "\n").encode("utf-8")
    if compression == "zstd":
        import zstandard

        data = zstandard.ZstdCompressor().compress(data)
    elif compression == "gzip":
        import gzip

        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def fresh_process(script: str, *args: str) -> list[str]:
    """The words ``script`` prints, run with ``args`` in a new Python process from the
    repository's root: no kernel signature that another test's call had loaded."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", script, *args], cwd=root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.fixture
def small_parquet(tmp_path) -> Path:
    return write_parquet(tmp_path / "corpus.parquet", docs())


def config(**over):
    from stages.config import Config

    raw = {"version": "t1", "pattern": "o200k", "vocab_size": 288 + 60, "corpus": {"shard_bytes": 1}}
    if "pattern_regex" in over:
        raw.pop("pattern")
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(raw.get(k), dict):
            raw[k] = {**raw[k], **v}
        else:
            raw[k] = v
    return Config.from_dict(raw)
