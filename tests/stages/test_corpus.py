import gzip

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dwstok.errors import InputError
from stages.config import CorpusConfig
from stages.corpus import plan_shards, read_batches

from .conftest import docs, write_jsonl, write_parquet


def read_all(paths, cfg=CorpusConfig()):
    texts, langs, skipped, replaced = [], [], 0, 0
    for s in plan_shards(paths, cfg):
        for b in read_batches(s, cfg):
            texts += b.text.to_pylist()
            langs += b.lang.to_pylist()
            skipped += b.skipped
            replaced += b.replaced
    return texts, langs, skipped, replaced


def expected(rows, default="und"):
    return [t for t, _ in rows], [lang or default for _, lang in rows]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "jsonl.zst", "jsonl.gz"])
def test_formats_read_the_same_documents(tmp_path, fmt):
    rows = docs()
    if fmt == "parquet":
        p = write_parquet(tmp_path / "c.parquet", rows)
    else:
        comp = {"jsonl": None, "jsonl.zst": "zstd", "jsonl.gz": "gzip"}[fmt]
        p = write_jsonl(tmp_path / f"c.{fmt}", rows, compression=comp)
    texts, langs, skipped, replaced = read_all([p])
    assert (texts, langs) == expected(rows)
    assert skipped == replaced == 0


def test_parquet_row_groups_become_shards(tmp_path):
    rows = docs()
    p = write_parquet(tmp_path / "c.parquet", rows, row_group_size=4)
    n_groups = pq.ParquetFile(p).metadata.num_row_groups
    assert len(plan_shards([p], CorpusConfig(shard_bytes=1))) == n_groups
    assert len(plan_shards([p], CorpusConfig(shard_bytes=10**9))) == 1
    assert read_all([p], CorpusConfig(shard_bytes=1))[:2] == expected(rows)


def test_folder_is_searched_in_sorted_order_and_txt_is_one_document(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.txt").write_text("zed\nline two\n", encoding="utf-8")
    write_jsonl(tmp_path / "a.jsonl", [("first", "fr")])
    (tmp_path / "unknown.csv").write_text("x")
    # a file of unknown format is an error naming it (it used to be skipped silently)...
    with pytest.raises(InputError, match=r"holds 1 file\(s\) of unknown corpus format: unknown.csv"):
        read_all([tmp_path], CorpusConfig(default_lang="xx"))
    # ...or, with skip_unknown, a warning naming it
    from stages.corpus import CorpusWarning

    with pytest.warns(CorpusWarning, match="unknown.csv"):
        texts, langs, *_ = read_all([tmp_path], CorpusConfig(default_lang="xx", skip_unknown=True))
    assert texts == ["first", "zed\nline two\n"] and langs == ["fr", "xx"]


def test_custom_field_names(tmp_path):
    t = pa.table({"body": ["x", "y"], "language": ["en", None]})
    pq.write_table(t, tmp_path / "c.parquet")
    cfg = CorpusConfig(text_field="body", lang_field="language", default_lang="zz")
    assert read_all([tmp_path / "c.parquet"], cfg)[:2] == (["x", "y"], ["en", "zz"])


def test_null_and_empty_languages_get_the_default(tmp_path):
    lang = pa.array(["en", None, "", "de", ""], pa.string())
    pq.write_table(pa.table({"text": list("abcde"), "lang": lang}), tmp_path / "c.parquet")
    pq.write_table(pa.table({"text": list("abcde"), "lang": lang.dictionary_encode()}), tmp_path / "d.parquet")
    (tmp_path / "e.jsonl").write_text('{"text": "a", "lang": ""}\n{"text": "b"}\n{"text": "c", "lang": null}\n')
    cfg = CorpusConfig(default_lang="zz")
    assert read_all([tmp_path / "c.parquet"], cfg)[1] == ["en", "zz", "zz", "de", "zz"]
    assert read_all([tmp_path / "d.parquet"], cfg)[1] == ["en", "zz", "zz", "de", "zz"]
    assert read_all([tmp_path / "e.jsonl"], cfg)[1] == ["zz", "zz", "zz"]


def test_missing_lang_column_gets_the_default(tmp_path):
    pq.write_table(pa.table({"text": ["x"]}), tmp_path / "c.parquet")
    assert read_all([tmp_path / "c.parquet"])[1] == ["und"]


def err(paths, cfg=CorpusConfig()):
    with pytest.raises(InputError) as e:
        read_all(paths, cfg)
    return str(e.value)


def test_bad_inputs(tmp_path):
    assert err([tmp_path / "nope.parquet"]) == f"corpus file {tmp_path / 'nope.parquet'} not found"
    (tmp_path / "bad.parquet").write_bytes(b"this is not parquet")
    assert err([tmp_path / "bad.parquet"]).startswith(f"cannot read Parquet file {tmp_path / 'bad.parquet'}")
    (tmp_path / "bad.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd garbage garbage")
    assert "corrupt zstd data" in err([tmp_path / "bad.jsonl.zst"])
    (tmp_path / "bad.jsonl.gz").write_bytes(gzip.compress(b'{"text": "x"}\n')[:-12] + b"xxxx")
    assert "corrupt gzip data" in err([tmp_path / "bad.jsonl.gz"])
    (tmp_path / "x.csv").write_text("a")
    assert "unknown corpus format" in err([tmp_path / "x.csv"])
    (tmp_path / "empty").mkdir()
    assert "holds no corpus files" in err([tmp_path / "empty"])


def test_missing_text_field(tmp_path):
    write_jsonl(tmp_path / "c.jsonl", [("ok", "en")])
    with open(tmp_path / "c.jsonl", "a") as f:
        f.write('{"body": "no text here", "lang": "en"}\n')
    assert err([tmp_path / "c.jsonl"]) == (
        f"{tmp_path / 'c.jsonl'}: document 1 (counting from 0) has no 'text' field; every document needs text "
        "(or set corpus.text_field)"
    )
    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "c.parquet")
    assert "has no text column 'text' (columns: body)" in err([tmp_path / "c.parquet"])


def test_invalid_utf8_error_skip_replace(tmp_path):
    good = b'{"text": "fine", "lang": "en"}\n'
    bad = b'{"text": "bad \xff byte", "lang": "en"}\n'
    p = tmp_path / "c.jsonl"
    p.write_bytes(good + bad + good)
    msg = err([p])
    assert msg == (
        f"{p}: invalid UTF-8 at byte offset {len(good) + 14} (line ~2); "
        "fix the file or pass --on-invalid skip|replace"
    )
    texts, _, skipped, replaced = read_all([p], CorpusConfig(on_invalid="skip"))
    assert (texts, skipped, replaced) == (["fine", "fine"], 1, 0)
    texts, _, skipped, replaced = read_all([p], CorpusConfig(on_invalid="replace"))
    assert (texts, skipped, replaced) == (["fine", "bad \ufffd byte", "fine"], 0, 1)

    t = tmp_path / "c.txt"
    t.write_bytes(b"abc\n\xc3(def")
    assert err([t]) == f"{t}: invalid UTF-8 at byte offset 4; fix the file or pass --on-invalid skip|replace"
    assert read_all([t], CorpusConfig(on_invalid="replace"))[0] == ["abc\n\ufffd(def"]
    assert read_all([t], CorpusConfig(on_invalid="skip"))[2] == 1


def test_invalid_utf8_in_binary_parquet_column(tmp_path):
    t = pa.table({"text": pa.array([b"ok", b"x\xffy"], pa.binary())})
    pq.write_table(t, tmp_path / "c.parquet")
    assert "invalid UTF-8 in document 1 at byte offset 1" in err([tmp_path / "c.parquet"])
    assert read_all([tmp_path / "c.parquet"], CorpusConfig(on_invalid="replace"))[0] == ["ok", "x\ufffdy"]
    assert read_all([tmp_path / "c.parquet"], CorpusConfig(on_invalid="skip"))[0] == ["ok"]


# -- splitting big uncompressed JSONL / txt files by byte range ---------------------------
def read_split(path, split_bytes, **kw):
    cfg = CorpusConfig(split_bytes=split_bytes, **kw)
    shards = plan_shards([path], cfg)
    per_shard = [[t for b in read_batches(s, cfg) for t in b.text.to_pylist()] for s in shards]
    return shards, per_shard


def test_jsonl_split_at_any_size_reads_every_document_once_in_order(tmp_path):
    rows = docs(4)
    p = write_jsonl(tmp_path / "c.jsonl", rows)
    # blank lines, CRLF and a last line without a newline are all record edges too
    data = p.read_bytes().replace(b"}\n", b"}\r\n", 3) + b"\n\n" + b'{"text": "last"}'
    p.write_bytes(data)
    want = [t for t, _ in rows] + ["last"]
    for split in [1, 2, 3, 17, 64, 100, 255, 256, 1000, len(data) - 1, len(data)]:
        shards, per_shard = read_split(p, split)
        assert len(shards) == -(-len(data) // split)
        assert [t for s in per_shard for t in s] == want, split
        assert [s.index for s in shards] == list(range(len(shards)))
        if len(shards) > 1:
            assert shards[0].byte_range[0] == 0 and shards[-1].byte_range[1] == len(data)
        assert sum(s.bytes for s in shards) == len(data)


def test_split_shards_are_byte_ranges_in_the_plan(tmp_path):
    p = write_jsonl(tmp_path / "c.jsonl", docs(2))
    n = p.stat().st_size
    shards = plan_shards([p], CorpusConfig(split_bytes=n // 3 + 1))
    assert [s.byte_range for s in shards] == [(0, n // 3), (n // 3, 2 * n // 3), (2 * n // 3, n)]
    assert shards[1].describe() == f"{p} (bytes {n // 3}-{2 * n // 3})"
    assert shards[0].key()["byte_range"] == [0, n // 3]
    # at or under the size, and compressed files, stay whole
    assert plan_shards([p], CorpusConfig(split_bytes=n))[0].byte_range is None
    z = write_jsonl(tmp_path / "c.jsonl.zst", docs(2), compression="zstd")
    assert len(plan_shards([z], CorpusConfig(split_bytes=1))) == 1


def test_errors_in_a_later_shard_name_absolute_offsets(tmp_path):
    good = b'{"text": "fine", "lang": "en"}\n'
    bad = b'{"text": "bad \xff byte", "lang": "en"}\n'
    p = tmp_path / "c.jsonl"
    p.write_bytes(good * 10 + bad + good * 5)
    with pytest.raises(InputError) as e:
        read_split(p, 64)
    assert str(e.value) == (
        f"{p}: invalid UTF-8 at byte offset {10 * len(good) + 14} (line ~11); "
        "fix the file or pass --on-invalid skip|replace"
    )
    _, per_shard = read_split(p, 64, on_invalid="skip")
    assert sum(map(len, per_shard)) == 15
    p.write_bytes(good * 10 + b'{"body": "x"}\n' + good)
    with pytest.raises(InputError, match=r"document 10 \(counting from 0\) has no 'text' field"):
        read_split(p, 50)
    t = tmp_path / "t.txt"
    t.write_bytes(b"abc\n" * 30 + b"x\xffy\n" + b"abc\n" * 5)
    with pytest.raises(InputError, match=r"invalid UTF-8 at byte offset 121;"):
        read_split(t, 16)
