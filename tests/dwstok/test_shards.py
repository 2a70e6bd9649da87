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


def test_ranks_partition_the_epoch(three_shards):
    d, docs = three_shards
    r = ShardReader(d)
    parts = [
        [row.tolist() for b in r.batches(9, 3, seed=1, bos_id=1, rank=k, world_size=3,
                                         drop_last=False) for row in b]
        for k in range(3)
    ]
    assert sorted(sum(parts, [])) == sorted(reference_windows(docs, 9, 1, None))


def test_batches_with_stochastok(tmp_path):
    # vocab: bytes at 32 + b, a few merges; specials 0..31 with names
    vocab = {i: f"<s{i}>".encode() for i in range(32)}
    vocab.update({32 + b: bytes([b]) for b in range(256)})
    words = [b"ab", b"abc", b"bc", b"abcd", b"cd"]
    vocab.update({288 + i: w for i, w in enumerate(words)})
    docs = [np.array([288 + 3, 288 + 1, 32 + 97] * 7, np.uint32) for _ in range(6)]
    write_docs(tmp_path / "part-00000.arrow", docs, n_vocab=300)
    r = ShardReader(tmp_path)
    st = StochasTok(SplitTable.from_vocab(vocab, exclude=range(32)), p=0.5)
    plain = list(r.batches(10, 2, seed=3, bos_id=1))
    split = list(r.batches(10, 2, seed=3, bos_id=1, stochastok=st))
    assert len(plain) == len(split)
    for p, s in zip(plain, split):
        assert s.shape == p.shape
        for prow, srow in zip(p, s):
            pb = b"".join(vocab[int(i)] for i in prow)
            sb = b"".join(vocab[int(i)] for i in srow)
            assert pb.startswith(sb)  # a prefix of the same bytes: splits keep bytes
            assert (srow == 1).sum() <= (prow == 1).sum()  # <bos> is never split
    assert any((p != s).any() for p, s in zip(plain, split))
    again = list(r.batches(10, 2, seed=3, bos_id=1, stochastok=st))
    assert all((a == b).all() for a, b in zip(split, again))
    zero = StochasTok(st.table, p=0.0)
    assert all((a == b).all() for a, b in
               zip(plain, r.batches(10, 2, seed=3, bos_id=1, stochastok=zero)))


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
