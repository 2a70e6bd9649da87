"""encode-shards: shards decode back to the exact corpus, ids equal Tokenizer.encode,
the model is pinned, 1 vs 2 workers give the same bytes, up to date and resume."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dwstok.errors import InputError, PatternMismatchError
from dwstok.shards import ShardReader, read_meta
from stages import encode_shards
from stages.executors import LocalExecutor
from stages.inputs import Inputs
from stages.manifest import read_json

from .bpe_models import corpus_merges, dwslm_model, stage_config, write_train_stage
from .conftest import docs, write_jsonl, write_parquet


@pytest.fixture(scope="module")
def tok(corpus_dir):
    m = corpus_merges(str(corpus_dir / "dev.parquet"), "o200k-rdigits", 1500)
    return dwslm_model(m, pattern="o200k-rdigits", version="32.3")


CFG = dict(version="32.3", pattern="o200k-rdigits")


@pytest.fixture
def work(tmp_path, tok):
    write_train_stage(tmp_path / "train", tok)
    return tmp_path


def corpus_files(d):
    """Three files in the three formats; returns the paths and the texts in corpus order."""
    d.mkdir(parents=True, exist_ok=True)
    rows = docs()
    a = write_parquet(d / "a.parquet", rows, row_group_size=4)
    b = write_jsonl(d / "b.jsonl", rows[:7])
    c = write_jsonl(d / "c.jsonl.zst", rows[3:12], compression="zstd")
    texts = [r[0] for r in rows] + [r[0] for r in rows[:7]] + [r[0] for r in rows[3:12]]
    langs = [r[1] or "und" for r in rows] + [r[1] or "und" for r in rows[:7]] + [
        r[1] or "und" for r in rows[3:12]]
    return [a, b, c], texts, langs


def run(work, paths, workers=1, **cfg):
    with LocalExecutor(workers) as ex:
        return encode_shards.run(
            stage_config(**{**CFG, **cfg}), Inputs(corpus=paths, workdir=work),
            work / "encode-shards", ex,
        )


def test_decode_gives_back_the_corpus(work, tok):
    files, texts, langs = corpus_files(work / "corpus")
    m = run(work, [str(work / "corpus")])
    out = work / "encode-shards"
    r = ShardReader(out)
    assert len(r) == len(texts)
    assert [tok.decode(r.doc(i).tolist()) for i in range(len(r))] == texts
    assert [r.doc(i).tolist() for i in range(len(r))] == [tok.encode(t) for t in texts]
    assert r.doc(0).dtype == np.uint16
    assert (r.model_sha256, r.version, r.pattern) == (tok.sha256, "32.3", tok.pattern)
    # lang travels with each document; the index adds up
    lang_col = pa.concat_arrays([
        pa.ipc.open_file(pa.memory_map(str(f))).read_all().column("lang").combine_chunks()
        for f in r.files]).to_pylist()
    assert lang_col == langs
    index = read_json(out / "index.json")
    assert index["docs"] == len(texts) == m.counts["docs"]
    assert index["tokens"] == r.n_tokens == int(r.doc_lengths.sum())
    assert index["bytes"] == sum(len(t.encode()) for t in texts)
    assert index["model_sha256"] == tok.sha256 and index["dtype"] == "uint16"
    assert sum(s["tokens"] for s in index["shards"]) == index["tokens"]
    assert sum(g["docs"] for g in index["by_lang"].values()) == len(texts)
    zh = [i for i, g in enumerate(langs) if g == "zh"]
    assert index["by_lang"]["zh"]["tokens"] == int(r.doc_lengths[zh].sum())
    assert [s["file"] for s in index["shards"]] == [f.name for f in r.files]
    assert read_meta(r.files[0])["source"].startswith(str(files[0]))


def test_dev_sample_round_trip(work, tok, corpus_dir):
    t = pq.read_table(corpus_dir / "dev.parquet")
    sample = t.take(np.arange(0, t.num_rows, 25))
    pq.write_table(sample, work / "dev-sample.parquet", row_group_size=16)
    run(work, [str(work / "dev-sample.parquet")], corpus={"shard_bytes": 200_000})
    r = ShardReader(work / "encode-shards")
    texts = sample.column("text").to_pylist()
    assert len(r) == len(texts) and len(r.files) > 1
    for i, text in enumerate(texts):
        assert tok.decode(r.doc(i).tolist()) == text
    assert r.doc_lengths.tolist() == [len(x) for x in tok.encode_batch(texts)]


@pytest.mark.parametrize("over", [dict(version="32.2"), dict(pattern="o200k")])
def test_refuses_model_of_other_version_or_pattern(work, over):
    files, _, _ = corpus_files(work / "corpus")
    with pytest.raises(PatternMismatchError, match="32.2|o200k"):
        run(work, [str(f) for f in files], **over)
    assert not (work / "encode-shards").exists()


def test_missing_model_and_empty_corpus(tmp_path, tok):
    files, _, _ = corpus_files(tmp_path / "corpus")
    with pytest.raises(InputError, match="dwstok train"):
        run(tmp_path, [str(f) for f in files])
    write_train_stage(tmp_path / "train", tok)
    (tmp_path / "empty.jsonl").write_bytes(b"")
    with pytest.raises(InputError, match="empty corpus"):
        run(tmp_path, [str(tmp_path / "empty.jsonl")])


def test_up_to_date_resume_and_stale_parts(work):
    files, texts, _ = corpus_files(work / "corpus")
    corpus = [str(work / "corpus")]
    first = run(work, corpus)
    out = work / "encode-shards"
    n = first.counts["shards"]
    assert n > 3 and first.counts["resumed_shards"] == 0
    assert run(work, corpus).up_to_date
    # a crash after shard 1 lost its output: only that shard is recomputed
    (out / "part-00001.arrow").unlink()
    (out / "_manifest.json").unlink()
    (out / "part-00099.arrow").write_bytes(b"left over")
    again = run(work, corpus)
    assert again.counts["resumed_shards"] == n - 1
    assert not (out / "part-00099.arrow").exists()
    assert again.outputs == first.outputs
    assert len(ShardReader(out)) == len(texts)


def test_one_and_two_workers_write_the_same_bytes(tmp_path, tok):
    outs = []
    corpus_files(tmp_path / "corpus")
    for workers in (1, 2):
        w = tmp_path / f"w{workers}"
        write_train_stage(w / "train", tok)
        m = run(w, [str(tmp_path / "corpus")], workers=workers)
        outs.append({k: v.sha256 for k, v in m.outputs.items()})
    assert outs[0] == outs[1]


@pytest.mark.slow
@pytest.mark.parametrize("split", ["dev", "train"])
def test_whole_corpus_round_trip(tmp_path, tok, corpus_dir, split):
    write_train_stage(tmp_path / "train", tok)
    m = run(tmp_path, [str(corpus_dir / f"{split}.parquet")], workers=2,
            corpus={"shard_bytes": 4_000_000})
    r = ShardReader(tmp_path / "encode-shards")
    pf = pq.ParquetFile(corpus_dir / f"{split}.parquet")
    i = 0
    for batch in pf.iter_batches(columns=["text"], batch_size=512):
        for text in batch.column(0).to_pylist():
            assert tok.decode_bytes(r.doc(i).tolist()) == text.encode()
            i += 1
    assert i == len(r) == m.counts["docs"]
    index = json.loads((tmp_path / "encode-shards" / "index.json").read_text())
    assert index["tokens"] == r.n_tokens


def test_retrained_model_in_the_same_process_is_reloaded(work, tok, corpus_dir):
    files, texts, _ = corpus_files(work / "corpus")
    run(work, [str(work / "corpus")])
    other = dwslm_model(corpus_merges(str(corpus_dir / "dev.parquet"), "o200k-rdigits", 700),
                        pattern="o200k-rdigits", version="32.3")
    write_train_stage(work / "train", other)  # same path, new file
    m = run(work, [str(work / "corpus")])
    assert not m.up_to_date and m.info["model_sha256"] == other.sha256
    r = ShardReader(work / "encode-shards")
    assert r.model_sha256 == other.sha256
    assert [r.doc(i).tolist() for i in range(len(r))] == [other.encode(t) for t in texts]


def test_invalid_utf8_error_skip_replace_and_old_result_kept(work, tok):
    good = [("first document", "en"), ("second 2026", "de")]
    path = work / "bad.jsonl"
    write_jsonl(path, good)
    run(work, [str(path)])
    before = {p.name: p.read_bytes() for p in (work / "encode-shards").iterdir() if p.is_file()}
    lines = path.read_bytes().splitlines()
    path.write_bytes(lines[0] + b"\n" + b'{"text": "bad \xff byte", "lang": "en"}\n' + lines[1] + b"\n")
    with pytest.raises(InputError, match="invalid UTF-8"):
        run(work, [str(path)])
    after = {p.name: p.read_bytes() for p in (work / "encode-shards").iterdir() if p.is_file()}
    assert after == before  # the failed run damaged nothing
    m = run(work, [str(path)], corpus={"on_invalid": "skip"})
    assert m.counts["skipped_docs"] == 1 and m.counts["docs"] == 2
    r = ShardReader(work / "encode-shards")
    assert [tok.decode(r.doc(i).tolist()) for i in range(len(r))] == [t for t, _ in good]
    m = run(work, [str(path)], corpus={"on_invalid": "replace"})
    assert m.counts["replaced_docs"] == 1 and m.counts["docs"] == 3
    r = ShardReader(work / "encode-shards")
    assert tok.decode(r.doc(1).tolist()) == "bad \ufffd byte"


def test_same_bytes_while_the_kernels_compile(work, tmp_path, monkeypatch):
    # A cold Numba cache: the stage's Tokenizer encodes through the HF bridge meanwhile;
    # the shards must be the same bytes as the kernels write.
    from dwstok import kernel_cache

    files, texts, _ = corpus_files(tmp_path / "corpus")
    run(work, [str(tmp_path / "corpus")], workers=2)
    want = {f.name: f.read_bytes() for f in (work / "encode-shards").glob("part-*")}
    cold = tmp_path / "cold"
    cold.mkdir()
    shutil.copytree(work / "train", cold / "train")
    encode_shards._load_cached.cache_clear()  # a Tokenizer loaded now, while "compiling"
    monkeypatch.setattr(kernel_cache, "usable", lambda: False)
    monkeypatch.setattr(kernel_cache, "wait", lambda: pytest.fail("the stage waited for the kernels"))
    from dwstok.hf_bridge import HfBridge

    bridged = []
    real = HfBridge.encode_docs
    monkeypatch.setattr(HfBridge, "encode_docs", lambda self, *a: bridged.append(1) or real(self, *a))
    run(cold, [str(tmp_path / "corpus")], workers=2)
    got = {f.name: f.read_bytes() for f in (cold / "encode-shards").glob("part-*")}
    assert got == want and len(want) >= 3
    assert len(bridged) >= 3  # every shard went through the bridge


def test_a_big_corpus_waits_for_the_kernels_instead_of_the_bridge(work, tmp_path, monkeypatch, tok):
    from dwstok import kernel_cache

    waited = []
    monkeypatch.setattr(encode_shards, "BRIDGE_MAX_BYTES", 0)  # every corpus is big
    monkeypatch.setattr(kernel_cache, "usable", lambda: bool(waited))
    monkeypatch.setattr(kernel_cache, "wait", lambda: waited.append(1))
    files, texts, _ = corpus_files(tmp_path / "corpus")
    encode_shards._load_cached.cache_clear()
    run(work, [str(tmp_path / "corpus")])
    assert waited == [1]
    r = ShardReader(work / "encode-shards")
    assert [r.doc(i).tolist() for i in range(len(r))] == [tok.encode(t) for t in texts]
