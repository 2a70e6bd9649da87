"""Corpora from anywhere: compression by suffix (.gz/.bz2/.xz/.zst), globs, file:// and
memory:// URLs, unknown files named, a deterministic --max-bytes sample."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma

import pytest

from dwstok.errors import InputError
from stages.config import CorpusConfig
from stages.corpus import kind_of, plan_shards, read_batches


def read_all(paths, cfg=CorpusConfig()):
    texts = []
    for s in plan_shards(paths, cfg):
        for b in read_batches(s, cfg):
            texts += b.text.to_pylist()
    return texts


BODY = "".join(json.dumps({"text": f"doc {i} é"}) + "\n" for i in range(5)).encode()
TEXTS = [f"doc {i} é" for i in range(5)]


@pytest.mark.parametrize("suffix,compress", [(".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress)])
def test_compressed_jsonl_and_txt(tmp_path, suffix, compress):
    j = tmp_path / f"c.jsonl{suffix}"
    j.write_bytes(compress(BODY))
    assert read_all([j]) == TEXTS
    t = tmp_path / f"d.txt{suffix}"
    t.write_bytes(compress("one document\nof two lines\n".encode()))
    assert read_all([t]) == ["one document\nof two lines\n"]
    # cut off: an error, never a shorter corpus
    j.write_bytes(compress(BODY)[:-12])
    with pytest.raises(InputError, match="truncated or corrupt|corrupt"):
        read_all([j])


def test_globs_and_file_urls(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "a.jsonl").write_bytes(BODY)
    (tmp_path / "x" / "b.jsonl.gz").write_bytes(gzip.compress(BODY))
    (tmp_path / "x" / "notes.md").write_text("not a corpus")
    assert read_all([str(tmp_path / "x" / "*.jsonl*")]) == TEXTS * 2
    assert read_all([f"file://{tmp_path / 'x' / 'a.jsonl'}"]) == TEXTS
    with pytest.raises(InputError, match="matches no files"):
        read_all([str(tmp_path / "x" / "*.parquet")])
    with pytest.raises(InputError, match="notes.md"):
        read_all([tmp_path / "x"])
    # the same file by path and by file:// URL is one fingerprint (no rebuild)
    a = plan_shards([tmp_path / "x" / "a.jsonl"], CorpusConfig())[0]
    b = plan_shards([f"file://{tmp_path / 'x' / 'a.jsonl'}"], CorpusConfig())[0]
    assert a.key() == b.key()


def test_memory_urls():
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/dwstok-test/a.jsonl", BODY)
    fs.pipe("/dwstok-test/sub/b.jsonl.gz", gzip.compress(BODY))
    fs.pipe("/dwstok-test/sub/c.json", b"[]")
    try:
        assert read_all(["memory://dwstok-test/a.jsonl"]) == TEXTS
        with pytest.raises(InputError, match="c.json"):
            read_all(["memory://dwstok-test"])
        with pytest.warns(UserWarning, match="c.json"):
            assert read_all(["memory://dwstok-test"], CorpusConfig(skip_unknown=True)) == TEXTS * 2
        with pytest.raises(InputError, match="not found"):
            read_all(["memory://dwstok-test/missing.jsonl"])
    finally:
        fs.rm("/dwstok-test", recursive=True)


def test_max_bytes_is_a_deterministic_sample(tmp_path):
    for i in range(20):
        (tmp_path / f"f{i:02d}.jsonl").write_bytes(json.dumps({"text": f"file {i}"}).encode() + b"\n")
    size = (tmp_path / "f00.jsonl").stat().st_size
    cfg = CorpusConfig(max_bytes=5 * size)
    a = plan_shards([tmp_path], cfg)
    assert len(a) == 5 and [s.index for s in a] == list(range(5))
    assert a == plan_shards([tmp_path], cfg)  # the same sample every time
    names = [s.path.rsplit("/", 1)[-1] for s in a]
    assert names == sorted(names) and names != [f"f{i:02d}.jsonl" for i in range(5)]  # spread, not a prefix
    assert len(plan_shards([tmp_path], CorpusConfig())) == 20


def test_kind_of():
    assert kind_of("a.txt.gz") == ("txt", "gzip") and kind_of("a.jsonl.lz4") == ("jsonl", "lz4")
    assert kind_of("a.parquet.gz") is None and kind_of("a.json") is None
