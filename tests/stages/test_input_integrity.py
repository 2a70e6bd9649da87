"""A build reads what its inputs say, or fails: truncated compressed files, .txt files as
one document, and pieces longer than ``pretokenize.max_piece_bytes``."""

import dataclasses
import gzip
import io
import json
from pathlib import Path

import pytest

from dwstok.errors import InputError
from stages.config import CorpusConfig
from stages.corpus import plan_shards, read_batches

N_DOCS = 3000
DEMO = str(Path(__file__).resolve().parents[2] / "configs" / "demo.yaml")


def jsonl_lines(n=N_DOCS) -> bytes:
    return b"".join(json.dumps({"text": f"document {i} " + "words " * 8, "lang": "en"}).encode() + b"\n" for i in range(n))


def read_texts(path, cfg=CorpusConfig()):
    return [t for s in plan_shards([path], cfg) for b in read_batches(s, cfg) for t in b.text.to_pylist()]


# -- item 3: a compressed input must end on a complete frame -------------------------------
def zstd_two_blocks(data: bytes) -> tuple[bytes, int]:
    """One zstd frame whose first block ends right after the line of document N/2 - 1:
    returns the frame and the offset where that block ends (a cut there leaves a file
    that decompresses, without any error from zstandard, to exactly half the lines)."""
    import zstandard

    half = data.index(b'{"text": "document %d ' % (N_DOCS // 2))
    co = zstandard.ZstdCompressor(level=3).compressobj()
    first = co.compress(data[:half]) + co.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    return first + co.compress(data[half:]) + co.flush(), len(first)


def test_zstd_cut_after_a_complete_block_is_an_error(tmp_path):
    import zstandard

    data = jsonl_lines()
    frame, block_end = zstd_two_blocks(data)
    whole = tmp_path / "whole.jsonl.zst"
    whole.write_bytes(frame)
    assert len(read_texts(whole)) == N_DOCS
    cut = tmp_path / "cut.jsonl.zst"
    cut.write_bytes(frame[:block_end])
    # What made this silent: zstandard itself reads the cut file as half the corpus.
    half = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(frame[:block_end]), read_across_frames=True).read()
    assert half.endswith(b"\n") and half.count(b"\n") == N_DOCS // 2
    with pytest.raises(InputError) as e:
        read_texts(cut)
    assert str(e.value) == (
        f"{cut}: truncated or corrupt zstd data: the file ends inside the frame that starts at byte 0 "
        f"({block_end} bytes on disk); copy or write the file again"
    )
    # and every other cut: inside a block, a block header, the frame header, the checksum
    with_sum = zstandard.ZstdCompressor(write_checksum=True).compress(data)
    for blob in (frame, with_sum):
        for n in (1, 4, 6, block_end + 2, len(blob) // 2, len(blob) - 1):
            cut.write_bytes(blob[:n])
            with pytest.raises(InputError, match="truncated or corrupt zstd data"):
                read_texts(cut)


def test_zstd_many_frames_and_skippable_frames_read_completely(tmp_path):
    import zstandard

    data = jsonl_lines()
    c = zstandard.ZstdCompressor(write_checksum=True)
    parts = [data[i : i + 50_000] for i in range(0, len(data), 50_000)]
    skippable = (0x184D2A50).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"hello"
    blob = skippable + b"".join(c.compress(p) for p in parts) + skippable
    p = tmp_path / "multi.jsonl.zst"
    p.write_bytes(blob)
    texts = read_texts(p)
    assert len(texts) == N_DOCS and texts[-1].startswith(f"document {N_DOCS - 1} ")
    # an empty file is zero frames: an empty corpus, not a truncated one
    (tmp_path / "empty.jsonl.zst").write_bytes(b"")
    assert read_texts(tmp_path / "empty.jsonl.zst") == []
    # ends inside the second frame
    p.write_bytes(blob[: len(skippable) + len(c.compress(parts[0])) + 10])
    with pytest.raises(InputError, match=f"frame that starts at byte {len(skippable) + len(c.compress(parts[0]))} "):
        read_texts(p)


def test_gzip_cut_anywhere_is_an_error(tmp_path):
    data = jsonl_lines()
    blob = gzip.compress(data)
    p = tmp_path / "c.jsonl.gz"
    p.write_bytes(blob)
    assert len(read_texts(p)) == N_DOCS
    two = gzip.compress(data[:1000]) + gzip.compress(data[1000:])  # multi-member, whole
    p.write_bytes(two)
    assert len(read_texts(p)) == N_DOCS
    for n in (5, 20, len(blob) // 2, len(blob) - 8, len(blob) - 1):
        p.write_bytes(blob[:n])
        with pytest.raises(InputError, match=rf"^{p}: truncated or corrupt gzip data after \d+ decompressed bytes"):
            read_texts(p)


def test_truncated_input_fails_the_stage_with_exit_3(tmp_path):
    from click.testing import CliRunner

    from dwstok_cli.main import cli

    frame, block_end = zstd_two_blocks(jsonl_lines())
    cut = tmp_path / "corpus" / "c.jsonl.zst"
    cut.parent.mkdir()
    cut.write_bytes(frame[:block_end])
    r = CliRunner().invoke(
        cli, ["pretokenize", DEMO, "--corpus", str(cut.parent), "--workdir", str(tmp_path / "w")]
    )
    assert r.exit_code == 3, r.output
    assert f"Error: {cut}: truncated or corrupt zstd data" in r.output


# -- item 6: a .txt file is one document, however it is read --------------------------------
def txt_text(n_bytes: int) -> str:
    line = "Hello world, a line of text 1234.\nanother line follows here\n  indented 中文\n"
    return line * (n_bytes // len(line.encode()) + 1)


def test_txt_file_is_one_document_with_a_small_split_bytes(tmp_path, monkeypatch):
    import stages.corpus

    text = txt_text(94_000)
    p = tmp_path / "t.txt"
    p.write_text(text, encoding="utf-8")
    cfg = CorpusConfig(split_bytes=20_000)
    shards = plan_shards([p], cfg)
    assert len(shards) == 1 and shards[0].byte_range is None and shards[0].bytes == len(text.encode())
    assert read_texts(p, cfg) == [text]
    # files bigger than the reader's chunk (16 MB) were split too: shrink the chunk to see it
    monkeypatch.setattr(stages.corpus, "CHUNK_BYTES", 4096)
    assert read_texts(p, cfg) == [text]
    # JSONL is still split by byte range
    j = tmp_path / "c.jsonl"
    j.write_bytes(jsonl_lines(2000))
    assert len(plan_shards([j], cfg)) > 1 and len(read_texts(j, cfg)) == 2000


def test_pretokenize_counts_a_txt_file_as_one_document(tmp_path):
    from stages import Inputs, pretokenize
    from stages.executors import LocalExecutor

    from .conftest import config

    p = tmp_path / "corpus" / "t.txt"
    p.parent.mkdir()
    p.write_text(txt_text(94_000), encoding="utf-8")
    cfg = config(corpus={"split_bytes": 20_000})
    m = pretokenize.run(cfg, Inputs(corpus=[p.parent], workdir=tmp_path), tmp_path / "pretokenize", LocalExecutor(1))
    assert (m.counts["shards"], m.counts["docs"], m.counts["bytes"]) == (1, 1, p.stat().st_size)


# -- item 7: a piece longer than pretokenize.max_piece_bytes is counted as chunks ------------
BOX = "└" + "─" * 2918 + "┘"  # 8,760 bytes: like the longest pretoken of the reference corpus


def chunks_of(piece: bytes, limit: int) -> list[bytes]:
    """The documented rule, spelled out: greedy chunks of at most ``limit`` bytes, each
    ending at the start of a UTF-8 character."""
    out = []
    while len(piece) > limit:
        c = limit
        while piece[c] & 0xC0 == 0x80:
            c -= 1
        out.append(piece[:c])
        piece = piece[c:]
    return out + [piece]


def pieces_counted(tmp_path, rows, work="w", **pretok):
    from stages import Inputs, count, pretokenize
    from stages.count import read_pieces
    from stages.executors import LocalExecutor

    from .conftest import config, write_jsonl

    corpus = write_jsonl(tmp_path / "c.jsonl", rows)
    cfg = config(pretokenize=pretok) if pretok else config()
    work = tmp_path / work
    inp = Inputs(corpus=[corpus], workdir=work)
    m = pretokenize.run(cfg, inp, work / "pretokenize", LocalExecutor(1))
    count.run(cfg, inp, work / "count", LocalExecutor(1))
    table, _ = read_pieces(work / "count" / "pieces.arrow")
    d = table.to_pydict()
    return dict(zip(d["piece"], d["count"])), m, cfg, work


def test_long_pieces_are_counted_as_chunks_of_the_limit(tmp_path):
    from collections import Counter

    import regex

    word = "x" * 50_000
    euros = "€" * 3000  # 9,000 bytes of 3-byte characters: chunks must end on a character
    rows = [(f"Hello {word} world", "en"), (f"price {euros}!", "en"), ("short text, short pieces", "en")]
    got, m, cfg, _ = pieces_counted(tmp_path, rows, max_piece_bytes=1000)
    want = Counter()
    for text, _ in rows:
        for p in regex.findall(cfg.pattern_string, text):
            want.update(chunks_of(p.encode(), 1000))
    assert got == dict(want)
    # " xxx…" (50,001 bytes): " " + 999 x, then 49 chunks of 1,000 x, then one "x"
    assert max(map(len, got)) == 1000 and got[b" " + b"x" * 999] == 1 and got[b"x" * 1000] == 49
    # " €€€…!" (9,002 bytes): " " + 333 €, then 8 chunks of 333 € (999 bytes: 1,000 would cut a €)
    assert got[(" " + "€" * 333).encode()] == 1 and got[("€" * 333).encode()] == 8
    assert m.counts["long_pieces"] == 2


def test_training_never_makes_a_token_longer_than_the_limit(tmp_path):
    from stages import Inputs, train
    from stages.executors import LocalExecutor
    from dwstok import Tokenizer

    rows = [("a " + "z" * 20_000 + " b", "en"), ("some ordinary words here", "en")]
    _, _, cfg, work = pieces_counted(tmp_path, rows, max_piece_bytes=64)
    # two short documents run out of pairs before vocab_size: keep the smaller model
    cfg = cfg.replace(train=dataclasses.replace(cfg.train, allow_smaller=True))
    train.run(cfg, Inputs(corpus=[], workdir=work), work / "train", LocalExecutor(1))
    tok = Tokenizer.load(work / "train" / "model.json")
    longest = max(len(b) for i, b in tok.vocab.items() if i not in tok.special_tokens.values())
    assert longest <= 64
    # encoding is not limited: the long word is encoded whole and decodes back exactly
    assert tok.decode(tok.encode(rows[0][0])) == rows[0][0]


def test_default_limit_changes_nothing_on_real_text(tmp_path):
    rows = [(f"┌{'─' * 40}┐\n{BOX}\n", "en"), ("Hello world! 1234567 中文 text", "en")]
    runs = {}
    for name, pretok in [("default", {}), ("unlimited", {"max_piece_bytes": 1 << 40}), ("small", {"max_piece_bytes": 8192})]:
        _, _, _, work = pieces_counted(tmp_path, rows, name, **pretok)
        runs[name] = {
            p.name: p.read_bytes() for stage in ("pretokenize", "count") for p in (work / stage).glob("*")
            if p.suffix == ".arrow" or p.name == "stats.json"
        }
    assert runs["default"] == runs["unlimited"]  # the box-drawing line is far below 64 KiB
    assert runs["small"] != runs["default"]  # while a limit below it does cut it


@pytest.mark.slow
def test_the_reference_corpus_has_no_piece_near_the_default_limit(corpus_dir):
    """The figure behind MAX_PIECE_BYTES: the longest pretoken of train and dev."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dwstok.scanner import get_scanner
    from stages.config import MAX_PIECE_BYTES
    from stages.pretokenize import split_documents

    longest = 0
    for split in ("train", "dev"):
        for pattern in ("o200k", "o200k-rdigits"):
            scanner = get_scanner(pattern)
            for rb in pq.ParquetFile(corpus_dir / f"{split}.parquet").iter_batches(batch_size=4096, columns=["text"]):
                t = rb.column(0).cast(pa.large_string())
                b = t.buffers()
                offs = np.frombuffer(b[1], np.int64)[t.offset : t.offset + len(t) + 1]
                po, _ = split_documents(scanner, np.frombuffer(b[2], np.uint8), offs)
                longest = max(longest, int(np.diff(po).max(initial=0)))
    assert 8000 < longest < MAX_PIECE_BYTES // 4, longest


@pytest.mark.parametrize("pattern", ["o200k", "o200k-rdigits", "cl100k", "gpt2"])
def test_a_long_document_is_scanned_in_windows_like_whole(tmp_path, monkeypatch, pattern):
    """pretokenize scans a .txt file (one document) a window at a time, cut after a
    newline before an ASCII letter; the counts equal a whole-document scan."""
    from stages import Inputs, pretokenize
    from stages.executors import LocalExecutor

    from .conftest import config

    p = tmp_path / "c" / "t.txt"
    p.parent.mkdir()
    p.write_text(
        "Hello world\n\n  中文 text\r\nanother 1234567 line\n \nx\n\tTab\n!\nEnd.\n" * 200 + "no newline at the end",
        encoding="utf-8",
    )
    parts = {}
    for window in (1 << 30, 1, 100, 4096):
        monkeypatch.setattr(pretokenize, "SCAN_BYTES", window)
        out = tmp_path / f"w{window}"
        m = pretokenize.run(config(pattern=pattern), Inputs(corpus=[p.parent], workdir=out), out / "p", LocalExecutor(1))
        assert m.counts["docs"] == 1
        parts[window] = ((out / "p" / "part-00000.arrow").read_bytes(), m.counts["pieces"])
    assert parts[1] == parts[100] == parts[4096] == parts[1 << 30]
