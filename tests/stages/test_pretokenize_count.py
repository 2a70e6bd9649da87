"""pretokenize + count against a brute-force reference (regex.findall + Counter)."""

from collections import Counter

import pytest
import regex

from dwstok.errors import InputError
from dwstok.patterns import PATTERNS
from stages import Inputs, count, pretokenize
from stages.count import LANG_PREFIX, read_pieces
from stages.executors import LocalExecutor
from stages.manifest import read_json, read_manifest

from .conftest import config, docs, fresh_process, write_jsonl, write_parquet


def reference(rows, pattern):
    pieces = Counter()
    han = Counter()
    by_lang_b, by_lang_d = Counter(), Counter()
    for text, lang in rows:
        lang = lang or "und"
        for p in regex.findall(pattern, text):
            pieces[(p.encode(), lang)] += 1
        han.update(regex.findall(r"\p{Han}", text))
        by_lang_b[lang] += len(text.encode())
        by_lang_d[lang] += 1
    return pieces, han, by_lang_b, by_lang_d


def run_both(cfg, corpus, work, workers=1):
    ex = LocalExecutor(workers)
    inp = Inputs(corpus=corpus, workdir=work)
    m1 = pretokenize.run(cfg, inp, work / "pretokenize", ex)
    m2 = count.run(cfg, inp, work / "count", ex)
    return m1, m2


@pytest.mark.parametrize("pattern", ["o200k", "o200k-rdigits", r"\w+|\W"])
def test_counts_equal_brute_force(tmp_path, small_parquet, pattern):
    cfg = config(pattern=pattern) if pattern in PATTERNS else config(pattern_regex=pattern)
    rows = docs()
    m1, m2 = run_both(cfg, [small_parquet], tmp_path)
    assert m1.counts["shards"] > 1 and m1.counts["docs"] == len(rows)
    table, langs = read_pieces(tmp_path / "count" / "pieces.arrow")
    got = Counter()
    d = table.to_pydict()
    for i, piece in enumerate(d["piece"]):
        assert d["count"][i] == sum(d[LANG_PREFIX + g][i] for g in langs)
        for g in langs:
            if d[LANG_PREFIX + g][i]:
                got[(piece, g)] = d[LANG_PREFIX + g][i]
    ref_pieces, ref_han, ref_b, ref_d = reference(rows, cfg.pattern_string)
    assert got == ref_pieces
    assert d["piece"] == sorted(d["piece"])  # sorted, unique
    assert len(set(d["piece"])) == len(d["piece"])
    stats = read_json(tmp_path / "count" / "stats.json")
    assert stats["han"] == dict(sorted(ref_han.items(), key=lambda kv: (-kv[1], ord(kv[0]))))
    assert list(stats["han"]) == list(dict(sorted(ref_han.items(), key=lambda kv: (-kv[1], ord(kv[0])))))
    assert stats["bytes_by_lang"] == dict(sorted(ref_b.items()))
    assert stats["docs_by_lang"] == dict(sorted(ref_d.items()))
    assert stats["bytes"] == sum(ref_b.values()) and stats["docs"] == len(rows)


def test_outputs_identical_for_one_and_two_workers(tmp_path, small_parquet):
    cfg = config()
    a, b = tmp_path / "a", tmp_path / "b"
    run_both(cfg, [small_parquet], a, workers=1)
    run_both(cfg, [small_parquet], b, workers=2)
    for stage in ("pretokenize", "count"):
        ma, mb = read_manifest(a / stage), read_manifest(b / stage)
        assert ma.outputs == mb.outputs and ma.output_hash == mb.output_hash
        for name in ma.outputs:
            assert (a / stage / name).read_bytes() == (b / stage / name).read_bytes()


def test_up_to_date_and_reruns(tmp_path, small_parquet):
    cfg = config()
    m1, m2 = run_both(cfg, [small_parquet], tmp_path)
    assert not m1.up_to_date and not m2.up_to_date
    n1, n2 = run_both(cfg, [small_parquet], tmp_path)
    assert n1.up_to_date and n2.up_to_date
    # A config section count does not read (balance) leaves both up to date ...
    o1, o2 = run_both(config(balance={"alpha": 0.5}), [small_parquet], tmp_path)
    assert o1.up_to_date and o2.up_to_date
    # ... a new pattern re-runs both.
    p1, p2 = run_both(config(pattern="o200k-rdigits"), [small_parquet], tmp_path)
    assert not p1.up_to_date and not p2.up_to_date


def test_resume_shard_by_shard(tmp_path, small_parquet):
    cfg = config()
    m, _ = run_both(cfg, [small_parquet], tmp_path)
    out = tmp_path / "pretokenize"
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    # Simulate a crash: the manifest and the last shard's files never got written.
    n = m.counts["shards"]
    (out / "_manifest.json").unlink()
    (out / f"part-{n - 1:05d}.arrow").unlink()
    (out / f"part-{n - 1:05d}.json").unlink()
    again = pretokenize.run(cfg, Inputs(corpus=[small_parquet]), out, LocalExecutor(1))
    assert again.counts["resumed_shards"] == n - 1
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert after.keys() == before.keys()
    for k in before:
        if k != "_manifest.json":
            assert after[k] == before[k], k


def test_stale_parts_of_a_larger_run_are_removed(tmp_path):
    big = write_parquet(tmp_path / "big.parquet", docs(6), row_group_size=5)
    small = write_parquet(tmp_path / "small.parquet", docs(1), row_group_size=5)
    cfg = config()
    out = tmp_path / "w" / "pretokenize"
    m_big = pretokenize.run(cfg, Inputs(corpus=[big]), out, LocalExecutor(1))
    m_small = pretokenize.run(cfg, Inputs(corpus=[small]), out, LocalExecutor(1))
    assert m_small.counts["shards"] < m_big.counts["shards"]
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([*m_small.outputs, "_manifest.json"])


def test_mixed_formats_and_invalid_counts(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl.zst", docs(1), compression="zstd")
    b = tmp_path / "b.txt"
    b.write_bytes("plain text file 中文\n".encode() + b"\xff")
    cfg = config(corpus={"on_invalid": "replace"})
    m1, m2 = run_both(cfg, [a, b], tmp_path)
    assert m1.counts["replaced_docs"] == 1 and m1.counts["docs"] == len(docs(1)) + 1
    with pytest.raises(InputError, match="invalid UTF-8 at byte offset 23"):
        run_both(config(), [a, b], tmp_path / "strict")


def test_empty_corpus_is_refused_before_writing(tmp_path):
    (tmp_path / "e.jsonl").write_bytes(b"")
    with pytest.raises(InputError, match="empty corpus"):
        pretokenize.run(config(), Inputs(corpus=[tmp_path / "e.jsonl"]), tmp_path / "w", LocalExecutor(1))
    assert not (tmp_path / "w").exists()
    (tmp_path / "blank.jsonl").write_bytes(b"\n\n")
    with pytest.raises(InputError, match="empty corpus"):
        pretokenize.run(config(), Inputs(corpus=[tmp_path / "blank.jsonl"]), tmp_path / "w2", LocalExecutor(1))
    assert read_manifest(tmp_path / "w2") is None


def test_failed_run_leaves_earlier_stage_outputs_intact(tmp_path, small_parquet):
    cfg = config()
    run_both(cfg, [small_parquet], tmp_path)
    count_before = {p.name: p.read_bytes() for p in (tmp_path / "count").iterdir()}
    with pytest.raises(InputError):
        run_both(cfg, [tmp_path / "missing.parquet"], tmp_path)
    assert {p.name: p.read_bytes() for p in (tmp_path / "count").iterdir()} == count_before
    assert read_manifest(tmp_path / "pretokenize") is not None


def test_count_without_pretokenize_says_what_to_run(tmp_path):
    with pytest.raises(InputError, match=r"run `dwstok pretokenize` first"):
        count.run(config(), Inputs(workdir=tmp_path), tmp_path / "count", LocalExecutor(1))


def split_corpus(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", docs(6))
    b = tmp_path / "b.txt"
    b.write_text("Plain text, line one.\n中文的句子\nSecond   line 1234567\n\n  indented\nend\n" * 12, encoding="utf-8")
    return [a, b]


def test_split_files_count_like_whole_files(tmp_path):
    corpus = split_corpus(tmp_path)
    whole, split = tmp_path / "whole", tmp_path / "split"
    m1, _ = run_both(config(), corpus, whole)
    s1, _ = run_both(config(corpus={"split_bytes": 300}), corpus, split)
    assert m1.counts["shards"] == 2 and s1.counts["shards"] > 10
    # Same pieces with the same counts: the cuts never split a pretoken.
    for name in ("pieces.arrow", "lang_counts.arrow"):
        assert (whole / "count" / name).read_bytes() == (split / "count" / name).read_bytes()
    jsonl_docs = len(docs(6))
    # the .txt file stays one document however the JSONL beside it is split
    assert m1.counts["docs"] == s1.counts["docs"] == jsonl_docs + 1


def test_split_files_same_bytes_for_one_and_two_workers(tmp_path):
    from stages import encode_shards, train

    corpus = split_corpus(tmp_path)
    cfg = config(corpus={"split_bytes": 400})
    outs = []
    for workers in (1, 2):
        work = tmp_path / f"w{workers}"
        inp = Inputs(corpus=corpus, workdir=work)
        with LocalExecutor(workers) as ex:
            for mod in (pretokenize, count, train, encode_shards):
                mod.run(cfg, inp, work / mod.STAGE, ex)
        outs.append(work)
    for stage in ("pretokenize", "count", "train", "encode-shards"):
        ma, mb = read_manifest(outs[0] / stage), read_manifest(outs[1] / stage)
        assert ma.outputs == mb.outputs, stage
    assert read_manifest(outs[0] / "encode-shards").counts["shards"] > 8


def test_han_counts_do_not_depend_on_the_chunks():
    import pyarrow as pa

    pieces = ["的一", "是", "abc", "中文的", "ｘ", "日本語です", "的"]
    t = pa.table({"piece": pa.array([p.encode() for p in pieces], pa.binary()), "count": pa.array([3, 1, 9, 2, 5, 4, 7], pa.int64())})
    want = pretokenize._ShardCounts.count_han(t)
    assert want == {"一": 3, "中": 2, "文": 2, "日": 4, "是": 1, "本": 4, "的": 3 + 2 + 7, "語": 4}
    chunked = pa.concat_tables([t.slice(0, 2), t.slice(2, 0), t.slice(2, 3), t.slice(5)])
    assert chunked.column("piece").num_chunks == 4
    got = pretokenize._ShardCounts.count_han(chunked)
    assert got == want and list(got) == list(want)


def test_han_counts_agree_with_regex_on_every_kind_of_wide_character():
    """Radicals, Kangxi, 々〇〆, extension B and the compatibility block are Han; kana,
    Hangul, CJK punctuation, fullwidth forms, emoji and a lone surrogate are not."""
    import random

    import pyarrow as pa
    import regex

    chars = "⺀⻳⼀⿕々〆〇〡㐀䶿一鿿豈﨩𠀀𪛟𰀀" + "あア한。、ｘ😀€é\ud800"
    rng = random.Random(5)
    pieces = ["".join(rng.choice(chars) for _ in range(rng.randint(1, 6))) for _ in range(300)]
    pieces = list(dict.fromkeys(pieces))
    counts = [rng.randint(1, 1000) for _ in pieces]
    want: Counter = Counter()
    for p, c in zip(pieces, counts):
        for ch in regex.findall(r"\p{Han}", p):
            want[ch] += c
    raw = [p.encode("utf-8", "surrogatepass") for p in pieces]
    for kind in (pa.binary(), pa.large_binary()):
        t = pa.table({"piece": pa.array(raw, kind), "count": pa.array(counts, pa.int64())})
        got = pretokenize._ShardCounts.count_han(t)
        assert got == dict(sorted(want.items(), key=lambda kv: ord(kv[0])))
        assert list(got) == sorted(got, key=ord)


def test_han_counts_skip_bytes_that_are_no_utf8():
    """A cut or stray byte (0xE4 alone, 0xFF, a lead over 0xF4) counts as no character."""
    import pyarrow as pa

    raw = [b"\xe4", b"\xff\xfe", "中".encode() + b"\xe4\xb8", b"\xf7\xbf\xbf\xbf", "文".encode()]
    t = pa.table({"piece": pa.array(raw, pa.binary()), "count": pa.array([1, 2, 3, 4, 5], pa.int64())})
    assert pretokenize._ShardCounts.count_han(t) == {"中": 3, "文": 5}


def test_counts_do_not_depend_on_how_pieces_are_grouped(tmp_path, small_parquet, monkeypatch):
    # A shard's counts start small and grow: batches of 3 documents and a table that
    # starts with 4 slots must give each shard the same (piece, lang, count) rows, in the
    # same order, and count the same bytes; batches of several languages map theirs to
    # the shard's.
    import pyarrow as pa

    from stages.corpus import PARQUET_BATCH_ROWS
    from stages.piece_counts import PieceCounts

    def rows_of(work):
        out = []
        for name in sorted(p.name for p in (work / "pretokenize").glob("part-*.arrow")):
            with pa.memory_map(str(work / "pretokenize" / name)) as f:
                t = pa.ipc.open_file(f).read_all()
            out.append(list(zip(*(t.column(c).to_pylist() for c in ("piece", "lang", "count")))))
        return out

    cfg = config()
    run_both(cfg, [small_parquet], tmp_path / "a")
    monkeypatch.setattr(pretokenize, "PieceCounts", lambda: PieceCounts(slots=4))
    monkeypatch.setattr("stages.corpus.PARQUET_BATCH_ROWS", 3)
    run_both(cfg, [small_parquet], tmp_path / "b")
    a, b = rows_of(tmp_path / "a"), rows_of(tmp_path / "b")
    assert a == b and len(a) > 1 and PARQUET_BATCH_ROWS > 3
    assert len({lang for part in a for _, lang, _ in part}) > 1
    for name in ("pieces.arrow", "lang_counts.arrow", "stats.json"):
        assert (tmp_path / "a" / "count" / name).read_bytes() == (tmp_path / "b" / "count" / name).read_bytes()


PRETOKENIZE_AND_COUNT = """
import sys
from pathlib import Path
from stages import Inputs, count, pretokenize
from stages.executors import LocalExecutor
from tests.stages.conftest import config
work = Path(sys.argv[2])
inputs, ex = Inputs(corpus=[sys.argv[1]], workdir=work), LocalExecutor(2)
m = pretokenize.run(config(), inputs, work / "pretokenize", ex)
after_pretokenize = "pyarrow.compute" in sys.modules
c = count.run(config(count={"partitions": 2}), inputs, work / "count", ex)
print(m.counts["docs"] > 0, c.counts["unique_pieces"] > 0, after_pretokenize, "pyarrow.compute" in sys.modules,
      "pyarrow.acero" in sys.modules)
"""


def test_pretokenize_and_count_never_import_pyarrow_compute(tmp_path, small_parquet):
    # Its import holds the GIL for 40 ms, which every pretokenize shard's first batch,
    # and then count's start, waited for (stages/arrow_compute.py).
    out = fresh_process(PRETOKENIZE_AND_COUNT, str(small_parquet), str(tmp_path / "w"))
    assert out == ["True", "True", "False", "False", "False"]
