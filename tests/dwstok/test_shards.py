"""Token shard format and ShardReader: zero-copy docs, metadata, batches vs a plain-Python stream."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dwstok.errors import InputError, ModelFileError
from dwstok.shards import FORMAT, ShardReader, read_meta, shard_dtype, write_shard
from dwstok.stochastok import SplitTable, StochasTok

META = dict(model_sha256="ab" * 32, version="32.3", pattern="o200k-rdigits", n_vocab=32768)


def random_docs(rng, n_docs, max_len=50, n_vocab=32768):
    lens = rng.integers(0, max_len, n_docs)
    lens[rng.random(n_docs) < 0.1] = 0  # empty documents happen
    return [rng.integers(32, n_vocab, n).astype(np.uint32) for n in lens]


def write_docs(path, docs, **kw):
    ids = np.concatenate(docs) if docs else np.zeros(0, np.uint32)
    offsets = np.zeros(len(docs) + 1, np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    return write_shard(path, ids, offsets, **{**META, **kw})


@pytest.fixture
def three_shards(tmp_path):
    rng = np.random.default_rng(0)
    all_docs = []
    for k in range(3):
        docs = random_docs(rng, 40 + 10 * k)
        write_docs(tmp_path / f"part-{k:05d}.arrow", docs, source=f"in-{k}")
        all_docs += docs
    return tmp_path, all_docs


def test_roundtrip_zero_copy(three_shards):
    d, docs = three_shards
    r = ShardReader(d)
    assert len(r) == len(docs)
    assert r.n_tokens == sum(len(x) for x in docs)
    assert r.doc_lengths.tolist() == [len(x) for x in docs]
    for i, ref in enumerate(docs):
        got = r.doc(i)
        assert got.dtype == np.uint16
        assert got.tolist() == ref.tolist()
    assert [x.tolist() for x in r] == [x.tolist() for x in docs]
    assert r[-1].tolist() == docs[-1].tolist()
    v = r.doc(int(np.argmax(r.doc_lengths)))
    assert not v.flags.writeable and not v.flags.owndata  # a view of the mapped file
    assert (r.model_sha256, r.version, r.pattern, r.n_vocab) == (
        META["model_sha256"], "32.3", "o200k-rdigits", 32768)
    with pytest.raises(IndexError):
        r.doc(len(docs))
    assert r.tokens(0, r.n_tokens).tolist() == np.concatenate(docs).tolist()


def test_file_is_plain_arrow_ipc(three_shards):
    d, _ = three_shards
    path = d / "part-00001.arrow"
    with pa.memory_map(str(path)) as mm:
        t = pa.ipc.open_file(mm).read_all()
    assert t.schema.field("ids").type == pa.large_list(pa.uint16())
    assert t.schema.metadata[b"dwstok.format"] == FORMAT.encode()
    assert read_meta(path)["source"] == "in-1"
    assert not list(d.glob(".*tmp*"))


def test_dtype_and_range():
    assert shard_dtype(32768) == np.uint16 and shard_dtype(65536) == np.uint16
    assert shard_dtype(65537) == np.uint32


def test_uint32_shards(tmp_path):
    docs = [np.array([70000, 5], np.uint32), np.array([], np.uint32)]
    write_docs(tmp_path / "part-00000.arrow", docs, n_vocab=200019)
    r = ShardReader(tmp_path / "part-00000.arrow")
    assert r.doc(0).dtype == np.uint32 and r.doc(0).tolist() == [70000, 5]
    with pytest.raises(ValueError, match="out of range"):
        write_docs(tmp_path / "x.arrow", docs, n_vocab=1000)


def test_refuses_mixed_models_and_foreign_files(three_shards, tmp_path_factory):
    d, docs = three_shards
    write_docs(d / "part-00009.arrow", docs[:3], model_sha256="cd" * 32)
    with pytest.raises(ModelFileError, match="mixed shards"):
        ShardReader(d)
    other = tmp_path_factory.mktemp("other")
    with pa.OSFile(str(other / "part-00000.arrow"), "wb") as f:
        t = pa.table({"x": [1]})
        with pa.ipc.new_file(f, t.schema) as w:
            w.write_table(t)
    with pytest.raises(ModelFileError, match="not a dwstok token shard"):
        ShardReader(other)
    (other / "part-00001.arrow").write_bytes(b"garbage")
    with pytest.raises(ModelFileError):
        ShardReader([other / "part-00001.arrow"])
    with pytest.raises(InputError):
        ShardReader(tmp_path_factory.mktemp("empty"))
    with pytest.raises(InputError):
        ShardReader(other / "missing.arrow")


def reference_windows(docs, seq_len, bos, eos):
    stream = []
    for doc in docs:
        stream += ([bos] if bos is not None else []) + doc.tolist() + ([eos] if eos is not None else [])
    n = (len(stream) - 1) // seq_len
    return [stream[k * seq_len:k * seq_len + seq_len + 1] for k in range(n)]


@pytest.mark.parametrize("bos,eos", [(None, None), (1, None), (None, 2), (1, 2)])
def test_batches_match_plain_stream(three_shards, bos, eos):
    d, docs = three_shards
    r = ShardReader(d)
    seq_len, bs = 17, 4
    ref = reference_windows(docs, seq_len, bos, eos)
    assert r.n_windows(seq_len, bos_id=bos, eos_id=eos) == len(ref)
    got = [row.tolist() for b in r.batches(seq_len, bs, seed=5, bos_id=bos, eos_id=eos,
                                           drop_last=False) for row in b]
    assert sorted(got) == sorted(ref)  # every window exactly once
    again = [row.tolist() for b in r.batches(seq_len, bs, seed=5, bos_id=bos, eos_id=eos,
                                             drop_last=False) for row in b]
    assert again == got
    other = [row.tolist() for b in r.batches(seq_len, bs, seed=5, epoch=1, bos_id=bos,
                                             eos_id=eos, drop_last=False) for row in b]
    assert other != got and sorted(other) == sorted(ref)
    full = list(r.batches(seq_len, bs, seed=5, bos_id=bos, eos_id=eos))
    assert all(b.shape == (bs, seq_len + 1) for b in full)
    assert len(full) == len(ref) // bs


def windows_of(reader, *args, **kw):
    return [row.tolist() for b in reader.batches(*args, **kw) for row in b]


def test_ranks_partition_the_epoch(three_shards):
    d, docs = three_shards
    r = ShardReader(d)
    ref = reference_windows(docs, 9, 1, None)
    for ws in (2, 3, 4):
        parts = [windows_of(r, 9, 3, seed=1, bos_id=1, rank=k, world_size=ws, drop_last=False)
                 for k in range(ws)]
        assert len({len(p) for p in parts}) == 1  # as many windows on every rank
        got = sum(parts, [])
        assert len(got) == r.n_windows(9, bos_id=1, world_size=ws) == len(ref) - len(ref) % ws
        left = list(ref)
        for row in got:  # every window at most once; only the trimmed ones are missing
            left.remove(row)
        assert len(left) == len(ref) % ws


# A vocabulary in DWSLMTok's layout: 32 specials (named), bytes at 32 + b, then merges.
WORDS = [b"ab", b"abc", b"bc", b"abcd", b"cd", b"the", b" the", b"he", b" t", b"th"]
VOCAB = {i: f"<s{i}>".encode() for i in range(32)}
VOCAB.update({32 + b: bytes([b]) for b in range(256)})
VOCAB.update({288 + i: w for i, w in enumerate(WORDS)})
SPLITTABLE = [288 + i for i, w in enumerate(WORDS)] + [32 + ord("x")]


@pytest.fixture
def word_shards(tmp_path):
    """Two shards of documents made of mergeable words (and empty documents)."""
    rng = np.random.default_rng(3)
    docs = [np.array(rng.choice(SPLITTABLE, n), np.uint32)
            for n in rng.integers(0, 60, 70)]
    docs[5] = docs[6] = np.zeros(0, np.uint32)
    write_docs(tmp_path / "part-00000.arrow", docs[:40], n_vocab=300)
    write_docs(tmp_path / "part-00001.arrow", docs[40:], n_vocab=300)
    st = StochasTok(SplitTable.from_vocab(VOCAB, exclude=range(32)), p=0.3, iterations=2)
    return ShardReader(tmp_path), docs, st


def stream_bytes(rows) -> bytes:
    # windows overlap by one id: each contributes its inputs, the last one its target too
    ids = [i for row in rows for i in row[:-1]] + (rows[-1][-1:] if rows else [])
    return b"".join(VOCAB[i] for i in ids)


def canonical_ids(docs, bos, eos):
    return [i for d in docs for i in [bos, *d.tolist(), eos] if i is not None]


@pytest.mark.parametrize("bos,eos", [(1, 2), (None, 2), (1, None)])
def test_stochastok_epoch_keeps_every_token(word_shards, bos, eos):
    """Decoding an unshuffled epoch's windows in order gives back the canonical text,
    all of it but the final partial window."""
    r, docs, st = word_shards
    seq_len = 16
    rows = windows_of(r, seq_len, 4, seed=9, epoch=2, bos_id=bos, eos_id=eos, stochastok=st,
                      shuffle=False, drop_last=False)
    canon = canonical_ids(docs, bos, eos)
    text = b"".join(VOCAB[i] for i in canon)
    got = stream_bytes(rows)
    assert text.startswith(got)
    # what is left out is less than one window: under seq_len + 1 canonical ids' bytes
    tail = b"".join(VOCAB[i] for i in canon[-(seq_len + 1):])
    assert len(text) - len(got) <= len(tail)
    n_split = sum(len(row) - 1 for row in rows) + 1
    assert n_split > len(canon) - seq_len - 1  # the epoch grew: splits added windows
    assert len(rows) == r.n_windows(seq_len, bos_id=bos, eos_id=eos, stochastok=st, seed=9,
                                    epoch=2)
    assert len(rows) > r.n_windows(seq_len, bos_id=bos, eos_id=eos)
    specials = {bos, eos} - {None}
    assert sum(i in specials for row in rows for i in row[:-1]) <= len(specials) * len(docs)
    assert any(i not in SPLITTABLE and i not in specials and i != 32 + ord("x")
               for row in rows for i in row)  # some tokens did split


def test_stochastok_ranks_hold_every_token_once(word_shards):
    """All ranks' shuffled windows of one epoch are the stream's windows, each once."""
    r, docs, st = word_shards
    kw = dict(seed=4, epoch=1, bos_id=1, eos_id=2, stochastok=st)
    stream = windows_of(r, 12, 5, shuffle=False, drop_last=False, **kw)
    assert b"".join(VOCAB[i] for i in canonical_ids(docs, 1, 2)).startswith(stream_bytes(stream))
    for ws in (1, 2, 3, 5):
        got = sum((windows_of(r, 12, 5, rank=k, world_size=ws, drop_last=False, **kw)
                   for k in range(ws)), [])
        left = list(stream)
        for row in got:
            left.remove(row)  # each window at most once
        assert len(left) == len(stream) % ws  # the trimmed windows only
    assert windows_of(r, 12, 5, **kw) == windows_of(r, 12, 5, **kw)
    other = windows_of(r, 12, 5, **{**kw, "epoch": 2})
    assert sorted(other) != sorted(windows_of(r, 12, 5, **kw))  # new epoch, new splits


def test_stochastok_p0_is_plain(word_shards):
    r, docs, st = word_shards
    zero = StochasTok(st.table, p=0.0)
    kw = dict(seed=3, bos_id=1, drop_last=False)
    assert windows_of(r, 10, 3, stochastok=zero, **kw) == windows_of(r, 10, 3, **kw)
    assert r.n_windows(10, bos_id=1, stochastok=zero) == len(reference_windows(docs, 10, 1, None))


@pytest.mark.parametrize("stochastok", [False, True])
@pytest.mark.parametrize("drop_last", [True, False])
def test_every_rank_gets_as_many_batches(word_shards, stochastok, drop_last):
    r, _, st = word_shards
    st = st if stochastok else None
    for seq_len in (7, 16):
        for batch_size in (1, 3, 4, 17):
            for ws in range(1, 9):
                kw = dict(seed=0, bos_id=1, stochastok=st, world_size=ws, drop_last=drop_last)
                counts = [len(list(r.batches(seq_len, batch_size, rank=k, **kw)))
                          for k in range(ws)]
                assert counts == [counts[0]] * ws, (seq_len, batch_size, ws)
                kw.pop("drop_last")
                assert counts[0] == r.n_batches(seq_len, batch_size, drop_last=drop_last, **kw)
                served = r.n_windows(seq_len, **kw)
                assert served % ws == 0
                if not drop_last:
                    assert served == ws * sum(len(b) for b in r.batches(seq_len, batch_size,
                                                                     drop_last=False, **kw))


def test_start_batch_resumes_without_replaying(word_shards, monkeypatch):
    r, _, st = word_shards
    for stochastok in (None, st):
        kw = dict(seed=2, epoch=3, bos_id=1, eos_id=2, stochastok=stochastok, rank=1,
                  world_size=2, drop_last=False)
        full = list(r.batches(8, 3, **kw))
        assert len(full) > 4
        for k in (0, 1, 4, len(full) - 1, len(full), len(full) + 3):
            got = list(r.batches(8, 3, start_batch=k, **kw))
            assert len(got) == len(full[k:])
            assert all((a == b).all() for a, b in zip(got, full[k:]))
    built = []
    real = ShardReader._windows
    monkeypatch.setattr(ShardReader, "_windows", lambda self, win, *a: built.append(win) or real(self, win, *a))
    n = r.n_batches(8, 3, seed=2, stochastok=st)
    assert len(list(r.batches(8, 3, seed=2, stochastok=st, start_batch=n - 2))) == 2
    assert len(built) == 2  # the skipped batches were never built


def test_pickle_round_trip(word_shards):
    import pickle

    r, docs, st = word_shards
    kw = dict(seed=5, bos_id=1, stochastok=st, rank=0, world_size=2)
    want = list(r.batches(10, 4, **kw))
    blob = pickle.dumps(r)
    assert len(blob) < 2000  # file names, not data
    r.close()
    r2 = pickle.loads(blob)
    assert r2._maps and r2.model_sha256 == META["model_sha256"]
    got = list(r2.batches(10, 4, **kw))
    assert len(got) == len(want) and all((a == b).all() for a, b in zip(got, want))
    assert [x.tolist() for x in r2] == [x.tolist() for x in docs]


def test_expect_model_refuses_foreign_shards(three_shards):
    from dwstok import Tokenizer
    from dwstok.errors import PatternMismatchError

    d, _ = three_shards
    assert ShardReader(d, expect_model=META["model_sha256"]).n_tokens > 0
    with pytest.raises(PatternMismatchError, match=r"encoded with model abababab.*not the expected cdcdcdcd"):
        ShardReader(d, expect_model="cd" * 32)
    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [])
    with pytest.raises(PatternMismatchError, match=tok.sha256[:16]):
        ShardReader(d, expect_model=tok)
    write_docs(d / "part-00000.arrow", [np.array([5, 6], np.uint32)], model_sha256=tok.sha256,
               n_vocab=tok.n_vocab)
    for k in (1, 2):
        (d / f"part-0000{k}.arrow").unlink()
    assert ShardReader(d, expect_model=tok).doc(0).tolist() == [5, 6]


def raw_shard(path, offsets, values, *, n_vocab, dtype=pa.uint16()):
    ids = pa.LargeListArray.from_buffers(
        pa.large_list(dtype), len(offsets) - 1,
        [None, pa.py_buffer(np.asarray(offsets, np.int64).tobytes())],
        children=[pa.array(values, dtype)])
    meta = {f"dwstok.{k}": str(v) for k, v in {**META, "n_vocab": n_vocab, "format": FORMAT}.items()}
    batch = pa.record_batch([ids], schema=pa.schema([pa.field("ids", ids.type)], metadata=meta))
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, batch.schema) as w:
        w.write_batch(batch)


def test_refuses_ids_and_offsets_that_do_not_fit(tmp_path):
    raw_shard(tmp_path / "part-00000.arrow", [0, 2, 3], [5, 6, 7], n_vocab=1000)
    assert ShardReader(tmp_path).doc(1).tolist() == [7]
    raw_shard(tmp_path / "part-00001.arrow", [0, 2, 3], [5, 999, 1000], n_vocab=1000)
    with pytest.raises(ModelFileError, match=r"part-00001.arrow is corrupt: id 1000 .*document 1"):
        ShardReader(tmp_path)
    bad = tmp_path / "part-00001.arrow"
    for offsets in ([0, 2, 9], [0, 3, 2], [0, -1, 3]):
        # pyarrow will not write such offsets: write good ones, then flip them in the file
        raw_shard(bad, [0, 2, 3], [5, 6, 7], n_vocab=1000)
        blob = bad.read_bytes()
        good = np.array([0, 2, 3], np.int64).tobytes()
        assert blob.count(good) == 1
        bad.write_bytes(blob.replace(good, np.array(offsets, np.int64).tobytes()))
        with pytest.raises(ModelFileError, match=r"part-00001.arrow is corrupt: .*offsets"):
            ShardReader(tmp_path)
    raw_shard(bad, [0, 1], [5], n_vocab=1000, dtype=pa.uint32())
    with pytest.raises(ModelFileError, match=r"part-00001.arrow is corrupt: its ids are"):
        ShardReader(tmp_path)


def test_writer_batches_segments_and_lang(tmp_path):
    from dwstok.shards import ShardWriter

    rng = np.random.default_rng(1)
    docs = random_docs(rng, 300)
    langs = [["en", "de", "zh"][i % 3] for i in range(300)]
    with ShardWriter(tmp_path / "part-00000.arrow", with_lang=True, flush_tokens=500,
                     **META) as w:
        for a in range(0, 300, 37):
            chunk = docs[a:a + 37]
            offs = np.zeros(len(chunk) + 1, np.int64)
            np.cumsum([len(d) for d in chunk], out=offs[1:])
            ids = np.concatenate(chunk) if chunk else np.zeros(0, np.uint32)
            w.write(ids, offs, pa.array(langs[a:a + 37]))
    with pa.memory_map(str(tmp_path / "part-00000.arrow")) as mm:
        f = pa.ipc.open_file(mm)
        assert f.num_record_batches > 1
        assert f.read_all().column("lang").to_pylist() == langs
    r = ShardReader(tmp_path)
    assert [x.tolist() for x in r] == [x.tolist() for x in docs]


def test_writer_leaves_nothing_on_error(tmp_path):
    from dwstok.shards import ShardWriter

    with pytest.raises(RuntimeError):
        with ShardWriter(tmp_path / "part-00000.arrow", **META) as w:
            w.write(np.array([40, 41]), np.array([0, 2]))
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_close_and_context_manager(three_shards):
    d, docs = three_shards
    with ShardReader(d) as r:
        first = r.doc(1).tolist()
    assert first == docs[1].tolist()
    assert r._maps == []


def test_unshuffled_batches_follow_corpus_order(three_shards):
    d, docs = three_shards
    r = ShardReader(d)
    got = [row.tolist() for b in r.batches(11, 5, seed=0, eos_id=2, shuffle=False,
                                           drop_last=False) for row in b]
    assert got == reference_windows(docs, 11, None, 2)
