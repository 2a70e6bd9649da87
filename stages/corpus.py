"""Corpus readers: plan input shards, then stream each as Arrow batches of (text, lang).

Inputs are Parquet files (consecutive row groups grouped into shards), JSONL and plain
text, each of the last two possibly compressed (``.gz``, ``.bz2``, ``.zst``, ``.xz``,
``.lz4``, told by the name's last suffix), or folders of them (searched recursively, in
sorted order), or glob patterns (``data/**/*.parquet``). A path may be any fsspec URL
(``file://``, ``memory://``, ``s3://``, ``hf://`` ... where the filesystem's package is
installed). A folder's files of another format are an ``InputError`` naming them, or,
with ``corpus.skip_unknown``, a ``CorpusWarning`` and skipped. ``corpus.max_bytes``
reads a deterministic sample of whole shards (see ``sample_shards``).
Reading is streamed: Parquet by row group and record batch, JSONL in chunks of whole
lines, so memory stays bounded whatever the corpus size.

A ``.txt`` file is one document, whatever its size and ``corpus.split_bytes``: it is one
shard, read whole (so it takes its own size in memory), because a document is what
training frames with ``<bos>``/``<eos>``. Put many documents in JSONL or Parquet.

An uncompressed JSONL file above ``corpus.split_bytes`` becomes several shards, one per
nominal byte range ``[start, end)``. The plan needs no reading: a shard owns the lines
that *begin* in its range (at 0 or after a newline), so every document belongs to
exactly one shard, whatever the worker count.

A compressed file must end on a complete frame (zstd) or member (gzip); one that was
cut off is an ``InputError``, never a shorter corpus.

>>> shards = plan_shards(["corpus.parquet"], CorpusConfig())      # doctest: +SKIP
>>> for batch in read_batches(shards[0], CorpusConfig()):        # doctest: +SKIP
...     batch.text, batch.lang                                    # large_string, string

Bad input raises ``InputError`` naming the file (and the document or byte offset).
Invalid UTF-8 follows ``corpus.on_invalid``: ``error`` (default), ``skip`` (drop the
document) or ``replace`` (U+FFFD), with ``Batch.skipped`` / ``Batch.replaced`` counting.
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dwstok.errors import InputError

from .arrow_compute import arrow_call, arrow_cast
from .config import CorpusConfig
from .manifest import file_fingerprint

FORMATS = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".txt": "txt"}
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd", ".xz": "xz", ".lz4": "lz4"}
KNOWN = ".parquet, .jsonl, .ndjson, .txt; JSONL and .txt also .gz, .bz2, .zst, .xz, .lz4"
CHUNK_BYTES = 16 << 20  # JSONL read size; a chunk always ends on a whole line
PARQUET_BATCH_ROWS = 1024


@dataclass(frozen=True)
class Shard:
    """One unit of map work: a whole file, or a run of a Parquet file's row groups."""

    index: int
    path: str
    kind: str  # parquet | jsonl | txt
    compression: str | None = None
    row_groups: tuple[int, ...] | None = None
    bytes: int = 0  # (estimated) text bytes, for progress and ETA
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False)
    byte_range: tuple[int, int] | None = None  # nominal [start, end) of a split file

    def describe(self) -> str:
        if self.byte_range is not None:
            return f"{self.path} (bytes {self.byte_range[0]}-{self.byte_range[1]})"
        if self.row_groups is None:
            return self.path
        a, b = self.row_groups[0], self.row_groups[-1]
        return f"{self.path} (row groups {a}-{b})" if a != b else f"{self.path} (row group {a})"

    def key(self) -> dict[str, Any]:
        """What identifies this shard's input for resume and manifests."""
        return {
            "file": self.fingerprint,
            "kind": self.kind,
            "compression": self.compression,
            "row_groups": list(self.row_groups) if self.row_groups is not None else None,
            "byte_range": list(self.byte_range) if self.byte_range is not None else None,
        }


@dataclass
class Batch:
    """Documents as Arrow arrays: ``text`` large_string and ``lang`` string, no nulls."""

    text: Any
    lang: Any
    skipped: int = 0
    replaced: int = 0
    consumed: int = 0  # input bytes read for it, in the units of Shard.bytes (progress)


class CorpusWarning(UserWarning):
    """Files of a corpus folder skipped under ``corpus.skip_unknown``."""


def kind_of(path: str | Path) -> tuple[str, str | None] | None:
    """(format, compression) from the file name, or None for an unknown format.

    >>> kind_of("a.jsonl.gz"), kind_of("b.txt.bz2"), kind_of("c.parquet"), kind_of("d.json")
    (('jsonl', 'gzip'), ('txt', 'bz2'), ('parquet', None), None)
    """
    name = str(path).lower()
    comp = None
    for suf, c in COMPRESSIONS.items():
        if name.endswith(suf):
            name, comp = name[: -len(suf)], c
            break
    for suf, kind in FORMATS.items():
        if name.endswith(suf):
            return None if kind == "parquet" and comp else (kind, comp)
    return None


def is_url(path: str | Path) -> bool:
    """A path for fsspec (``scheme://...``) rather than the local file system."""
    return "://" in str(path)


def _local(path: str) -> str:
    """``file://`` URLs as plain local paths (one fingerprint for one file)."""
    return path[len("file://"):] if path.startswith("file://") else path


def _fs(url: str):
    import fsspec

    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as e:
        raise InputError(f"cannot open {url}: {e}") from None


def _has_magic(p: str) -> bool:
    return any(c in p for c in "*?[")


def _unknown(found: list[str], where: str, skip: bool) -> None:
    if not found:
        return
    names = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    if skip:
        import warnings

        warnings.warn(f"{where}: skipped {len(found)} file(s) of unknown format: {names}", CorpusWarning, stacklevel=3)
        return
    raise InputError(
        f"{where} holds {len(found)} file(s) of unknown corpus format: {names} (known: {KNOWN}); "
        "remove or rename them, name the files you mean, or pass --skip-unknown"
    )


def expand_paths(paths: Sequence[str | Path], *, skip_unknown: bool = False) -> list[str | Path]:
    """Files named, matched by a glob, or found (recursively, sorted) under the folders
    named: local ``Path``s, or URL strings for other fsspec file systems."""
    import glob

    if not paths:
        raise InputError("no corpus given: pass --corpus PATH (a file or a folder)")
    files: list[str | Path] = []
    for given in paths:
        given = _local(str(given))
        if is_url(given):
            files.extend(_expand_url(given, skip_unknown))
            continue
        p = Path(given)
        if not p.exists() and _has_magic(given):
            matched = sorted(Path(q) for q in glob.glob(given, recursive=True) if Path(q).is_file())
            if not matched:
                raise InputError(f"corpus pattern {given} matches no files")
            _unknown([str(q) for q in matched if kind_of(q) is None], given, skip_unknown)
            files.extend(q for q in matched if kind_of(q))
        elif p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.is_file() and not q.name.startswith("."))
            _unknown([str(q.relative_to(p)) for q in found if kind_of(q) is None], str(p), skip_unknown)
            found = [q for q in found if kind_of(q)]
            if not found:
                raise InputError(f"{p} holds no corpus files ({KNOWN})")
            files.extend(found)
        elif p.is_file():
            if kind_of(p) is None:
                raise InputError(f"{p}: unknown corpus format (known: {KNOWN})")
            files.append(p)
        elif p.exists():
            raise InputError(f"{p} is not a regular file or folder")
        else:
            raise InputError(f"corpus file {p} not found")
    return files


def _expand_url(url: str, skip_unknown: bool) -> list[str]:
    fs, root = _fs(url)
    try:
        if _has_magic(root):
            found = sorted(q for q in fs.glob(root) if fs.isfile(q))
            if not found:
                raise InputError(f"corpus pattern {url} matches no files")
        elif fs.isdir(root):
            found = sorted(q for q in fs.find(root) if not q.rsplit("/", 1)[-1].startswith("."))
            if not [q for q in found if kind_of(q)]:
                _unknown([q for q in found if kind_of(q) is None], url, skip_unknown)
                raise InputError(f"{url} holds no corpus files ({KNOWN})")
        elif fs.isfile(root):
            if kind_of(root) is None:
                raise InputError(f"{url}: unknown corpus format (known: {KNOWN})")
            found = [root]
        else:
            raise InputError(f"corpus file {url} not found")
    except OSError as e:
        raise InputError(f"cannot list {url}: {e}") from None
    _unknown([q for q in found if kind_of(q) is None], url, skip_unknown)
    return [fs.unstrip_protocol(q) for q in found if kind_of(q)]


def _fingerprint(f: str | Path) -> dict[str, Any]:
    """``file_fingerprint`` for local files; for a URL its size and whatever version
    marks its file system reports (mtime, ETag)."""
    if not is_url(f):
        return file_fingerprint(f)
    fs, p = _fs(str(f))
    try:
        info = fs.info(p)
    except OSError as e:
        raise InputError(f"cannot stat {f}: {e}") from None
    fp: dict[str, Any] = {"path": str(f), "bytes": int(info.get("size") or 0)}
    for k in ("mtime", "LastModified", "last_modified", "ETag", "etag", "created"):
        if info.get(k) is not None:
            fp[k] = str(info[k])
    return fp


def _open_raw(path: str):
    """A binary file object, local or through fsspec."""
    if is_url(path):
        fs, p = _fs(path)
        return fs.open(p, "rb")
    return open(path, "rb")


def _file_size(f) -> int:
    try:
        return os.fstat(f.fileno()).st_size
    except (OSError, AttributeError, io.UnsupportedOperation):
        here = f.tell()
        size = f.seek(0, os.SEEK_END)
        f.seek(here)
        return size


def sample_shards(shards: list[Shard], max_bytes: int) -> list[Shard]:
    """A deterministic sample of whole shards holding about ``max_bytes``: shards taken in
    an order fixed by a hash of their input (spread over files and languages, not the
    first files only) until the budget is reached, then renumbered in plan order.

    >>> a = Shard(0, "a", "txt", bytes=10); b = Shard(1, "b", "txt", bytes=10)
    >>> len(sample_shards([a, b], 5)), len(sample_shards([a, b], 15))
    (1, 2)
    """
    import dataclasses

    from .manifest import hash_obj

    order = sorted(shards, key=lambda s: hash_obj({"path": s.path, "rg": s.row_groups, "range": s.byte_range}))
    chosen, total = set(), 0
    for s in order:
        if total >= max_bytes:
            break
        chosen.add(s.index)
        total += s.bytes
    return [dataclasses.replace(s, index=i) for i, s in enumerate(s for s in shards if s.index in chosen)]


def plan_shards(paths: Sequence[str | Path], cfg: CorpusConfig) -> list[Shard]:
    """The shards of a corpus, numbered in a fixed order (files sorted, row groups in
    order), so shard N is the same piece of work whatever the executor."""
    shards: list[Shard] = []
    for f in expand_paths(paths, skip_unknown=cfg.skip_unknown):
        kind, comp = kind_of(f)
        fp = _fingerprint(f)
        if kind != "parquet":
            size = fp["bytes"]
            if kind == "jsonl" and comp is None and size > cfg.split_bytes:
                for a, b in split_ranges(size, cfg.split_bytes):
                    shards.append(Shard(len(shards), str(f), kind, None, None, b - a, fp, (a, b)))
            else:
                shards.append(Shard(len(shards), str(f), kind, comp, None, size, fp))
            continue
        pf = _parquet_file(f)
        md = pf.metadata
        names = pf.schema_arrow.names
        if cfg.text_field not in names:
            raise InputError(
                f"{f} has no text column {cfg.text_field!r} (columns: {', '.join(names)}); "
                "set corpus.text_field in the config"
            )
        # Size of the text column alone (uncompressed): what progress and ETA count.
        paths = [md.schema.column(j).path for j in range(md.num_columns)]
        col = paths.index(cfg.text_field) if cfg.text_field in paths else None
        group: list[int] = []
        size = 0
        for rg in range(md.num_row_groups):
            group.append(rg)
            r = md.row_group(rg)
            size += r.column(col).total_uncompressed_size if col is not None else r.total_byte_size
            if size >= cfg.shard_bytes:
                shards.append(Shard(len(shards), str(f), kind, None, tuple(group), size, fp))
                group, size = [], 0
        if group:
            shards.append(Shard(len(shards), str(f), kind, None, tuple(group), size, fp))
    if cfg.max_bytes is not None:
        shards = sample_shards(shards, cfg.max_bytes)
    return shards


def split_ranges(size: int, split_bytes: int) -> list[tuple[int, int]]:
    """``size`` bytes as n near-equal nominal ranges of at most ~``split_bytes``.

    >>> split_ranges(10, 4)
    [(0, 3), (3, 6), (6, 10)]
    """
    n = -(-size // split_bytes)
    cuts = [size * i // n for i in range(n + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


def record_start(f, pos: int, size: int) -> int:
    """The first position >= ``pos`` where a JSONL record may begin in an open binary
    file: 0, just after a newline, or ``size``. Reads forward from ``pos - 1`` only as
    far as it must."""
    if pos <= 0:
        return 0
    if pos >= size:
        return size
    f.seek(pos - 1)
    at = pos - 1
    block = 1 << 16
    while True:
        data = f.read(block)
        if not data:
            return size
        k = data.find(b"\n")
        if k >= 0:
            return at + k + 1
        at += len(data)
        block = min(block * 2, CHUNK_BYTES)


# -- reading -------------------------------------------------------------------------
def read_batches(shard: Shard, cfg: CorpusConfig) -> Iterator[Batch]:
    """Stream a shard's documents. Empty batches are not yielded."""
    if shard.kind == "parquet":
        it = _read_parquet(shard, cfg)
    elif shard.kind == "jsonl":
        it = _read_jsonl(shard, cfg)
    else:
        it = _read_txt(shard, cfg)
    for b in it:
        if len(b.text) or b.skipped:
            yield b


def _parquet_file(path: str | Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if is_url(path):
            return pq.ParquetFile(_open_raw(str(path)))
        return pq.ParquetFile(str(path))
    except FileNotFoundError:
        raise InputError(f"corpus file {path} not found") from None
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"cannot read Parquet file {path}: {e}") from None


def _read_parquet(shard: Shard, cfg: CorpusConfig) -> Iterator[Batch]:
    import pyarrow as pa

    pf = _parquet_file(shard.path)
    names = pf.schema_arrow.names
    if cfg.text_field not in names:
        raise InputError(
            f"{shard.path} has no text column {cfg.text_field!r} (columns: {', '.join(names)}); "
            "set corpus.text_field in the config"
        )
    cols = [cfg.text_field] + ([cfg.lang_field] if cfg.lang_field in names else [])
    row = sum(pf.metadata.row_group(i).num_rows for i in range(shard.row_groups[0]))
    try:
        batches = pf.iter_batches(
            batch_size=PARQUET_BATCH_ROWS, row_groups=list(shard.row_groups), columns=cols, use_threads=False
        )
        for rb in batches:
            text = rb.column(0)
            lang = rb.column(1) if len(cols) == 2 else None
            b = _finish(shard, cfg, text, lang, first_doc=row)
            b.consumed = text.nbytes
            yield b
            row += rb.num_rows
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"cannot read Parquet file {shard.describe()}: {e}") from None


def _open_stream(shard: Shard):
    raw = _open_raw(shard.path)
    try:
        if shard.compression == "zstd":
            import zstandard

            check_zstd_frames(raw, shard.path)
            return raw, zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        if shard.compression == "gzip":
            import gzip

            return raw, gzip.GzipFile(fileobj=raw)
        if shard.compression is not None:
            from fsspec.compression import compr

            codec = {"xz": "lzma"}.get(shard.compression, shard.compression)
            if compr.get(codec) is None:
                raise InputError(
                    f"{shard.path}: reading {shard.compression} needs its Python package "
                    f"(pip install {shard.compression}), or decompress the file"
                )
            return raw, compr[codec](raw, mode="rb")
    except BaseException:
        raw.close()
        raise
    return raw, raw


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE = range(0x184D2A50, 0x184D2A60)


def check_zstd_frames(f, path: str) -> None:
    """Raise ``InputError`` unless the open binary file ``f`` is whole zstd frames.

    zstandard's stream reader ends quietly where the file ends, even inside a frame, so a
    cut-off ``.jsonl.zst`` would read as a shorter corpus. This walks the frame and block
    headers only (RFC 8878: a 3-byte header per block of up to 128 KiB), seeking over the
    payloads, so it costs a few milliseconds per gigabyte. Bad data inside a block is
    left to the decompressor, which reports it.
    """
    import zstandard

    size = _file_size(f)
    pos = 0

    def cut(frame: int) -> InputError:
        return InputError(
            f"{path}: truncated or corrupt zstd data: the file ends inside the frame that starts at byte "
            f"{frame} ({size} bytes on disk); copy or write the file again"
        )

    while pos < size:
        frame = pos
        f.seek(pos)
        head = f.read(18)  # the longest frame header
        if len(head) < 4:
            raise cut(frame)
        magic = int.from_bytes(head[:4], "little")
        if magic in _ZSTD_SKIPPABLE:
            if len(head) < 8:
                raise cut(frame)
            pos += 8 + int.from_bytes(head[4:8], "little")
            if pos > size:
                raise cut(frame)
            continue
        if magic != _ZSTD_MAGIC:
            raise InputError(f"{path}: corrupt zstd data: no zstd frame at byte {frame}")
        try:
            pos += zstandard.frame_header_size(head)
            checksum = zstandard.get_frame_parameters(head).has_checksum
        except zstandard.ZstdError:
            raise cut(frame) from None
        while True:
            f.seek(pos)
            h = f.read(3)
            if len(h) < 3:
                raise cut(frame)
            v = int.from_bytes(h, "little")
            # bit 0: last block; bits 1-2: type (1 = RLE, one byte stored); bits 3-23: size
            pos += 3 + (1 if (v >> 1) & 3 == 1 else v >> 3)
            if pos > size:
                raise cut(frame)
            if v & 1:
                break
        pos += 4 * checksum
        if pos > size:
            raise cut(frame)
    f.seek(0)


def _chunks(shard: Shard, cut) -> Iterator[tuple[int, bytes, int]]:
    """(offset, bytes, consumed) chunks of the (decompressed) file, each ending where
    ``cut`` says (after a newline), the last one at end of file; ``consumed`` is how far
    the file on disk was read since the previous chunk (compressed bytes for .zst/.gz)."""
    import lzma
    import zlib

    try:
        raw, stream = _open_stream(shard)
    except FileNotFoundError:
        raise InputError(f"corpus file {shard.path} not found") from None
    except OSError as e:
        raise InputError(f"cannot open {shard.path}: {e}") from None
    what = shard.compression or ""
    pos = 0
    carry = b""
    limit = None  # bytes left to read in a split file's shard
    try:
        with raw:
            if shard.byte_range is not None:
                size = _file_size(raw)
                pos = record_start(raw, shard.byte_range[0], size)
                limit = record_start(raw, shard.byte_range[1], size) - pos
                raw.seek(pos)
            last = raw.tell()
            while True:
                try:
                    block = stream.read(CHUNK_BYTES if limit is None else min(CHUNK_BYTES, limit))
                    if limit is not None:
                        limit -= len(block)
                except EOFError as e:  # gzip: the file ends inside a member
                    raise InputError(
                        f"{shard.path}: truncated or corrupt {what or 'compressed'} data after {pos + len(carry)} "
                        f"decompressed bytes ({e}); copy or write the file again"
                    ) from None
                except (OSError, zlib.error, lzma.LZMAError, ValueError) as e:
                    if what:
                        raise InputError(
                            f"{shard.path}: corrupt {what} data after {pos + len(carry)} "
                            f"decompressed bytes ({e})"
                        ) from None
                    raise InputError(f"cannot read {shard.path}: {e}") from None
                except Exception as e:  # zstandard.ZstdError is not an OSError (nor lz4's errors)
                    if type(e).__name__ == "ZstdError" or (what and type(e).__module__.startswith("lz4")):
                        raise InputError(
                            f"{shard.path}: corrupt zstd data after {pos + len(carry)} "
                            f"decompressed bytes ({e})"
                        ) from None
                    raise
                if not block:
                    if carry:
                        yield pos, carry, raw.tell() - last
                    return
                buf = carry + block
                k = cut(buf)
                if k <= 0:
                    carry = buf
                    continue
                now = raw.tell()
                yield pos, buf[:k], now - last
                last = now
                pos += k
                carry = buf[k:]
    finally:
        if stream is not raw:
            stream.close()


def _decode_check(shard: Shard, cfg: CorpusConfig, pos: int, chunk: bytes, what: str) -> bytes | None:
    """Validate UTF-8. Returns the chunk (or its replaced form), or None to skip it.
    Raises InputError under on_invalid=error, naming the byte offset."""
    try:
        chunk.decode("utf-8")
        return chunk
    except UnicodeDecodeError as e:
        if cfg.on_invalid == "error":
            raise InputError(
                f"{shard.path}: invalid UTF-8 at byte offset {pos + e.start}{what}; "
                "fix the file or pass --on-invalid skip|replace"
            ) from None
        if cfg.on_invalid == "replace":
            return chunk.decode("utf-8", errors="replace").encode("utf-8")
        return None


def _read_jsonl(shard: Shard, cfg: CorpusConfig) -> Iterator[Batch]:
    import pyarrow as pa
    import pyarrow.json as pj

    schema = pa.schema([(cfg.text_field, pa.large_string()), (cfg.lang_field, pa.string())])
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    doc = 0
    start = None
    for pos, chunk, consumed in _chunks(shard, lambda b: b.rfind(b"\n") + 1):
        if start is None:
            start = pos
            # Documents before this shard's first byte: counted only for an error message.
            doc_base = functools.partial(_docs_before, shard.path, start)
        skipped = replaced = 0
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError as e:
            if cfg.on_invalid == "error":
                line = doc_base() + doc + chunk.count(b"\n", 0, e.start) + 1
                raise InputError(
                    f"{shard.path}: invalid UTF-8 at byte offset {pos + e.start} (line ~{line}); "
                    "fix the file or pass --on-invalid skip|replace"
                ) from None
            # Rare path: handle line by line.
            good = []
            for ln in chunk.split(b"\n"):
                try:
                    ln.decode("utf-8")
                    good.append(ln)
                except UnicodeDecodeError:
                    if cfg.on_invalid == "skip":
                        skipped += 1
                    else:
                        replaced += 1
                        good.append(ln.decode("utf-8", errors="replace").encode("utf-8"))
            chunk = b"\n".join(good)
        if not chunk.strip():
            if skipped:
                yield Batch(pa.array([], pa.large_string()), pa.array([], pa.string()), skipped, replaced, consumed)
            continue
        try:
            table = pj.read_json(
                io.BytesIO(chunk),
                read_options=pj.ReadOptions(use_threads=False, block_size=max(len(chunk), 1 << 20) + 1),
                parse_options=parse,
            )
        except pa.ArrowException as e:
            raise InputError(
                f"{shard.path}: not valid JSON Lines in the chunk at byte offset {pos}: {e}"
            ) from None
        text = table.column(0).combine_chunks() if table.num_rows else pa.array([], pa.large_string())
        lang = table.column(1).combine_chunks() if table.num_rows else pa.array([], pa.string())
        b = _finish(shard, cfg, text, lang, first_doc=doc, doc_base=doc_base)
        b.skipped += skipped
        b.replaced += replaced
        b.consumed = consumed
        doc += table.num_rows
        yield b


def _read_txt(shard: Shard, cfg: CorpusConfig) -> Iterator[Batch]:
    """The whole file as one document (see the module docstring)."""
    import numpy as np
    import pyarrow as pa

    # Read through _chunks: compressed files get its truncation checks.
    chunk = b"".join(c for _, c, _ in _chunks(shard, len))
    if not chunk:
        return
    lang = pa.array([cfg.default_lang], pa.string())
    offsets = pa.py_buffer(np.array([0, len(chunk)], dtype=np.int64).tobytes())
    one = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(chunk)])
    try:  # over the file's own bytes, no copy; the cast checks the UTF-8
        yield Batch(arrow_cast(one, pa.large_string()), lang, consumed=len(chunk))
        return
    except pa.ArrowInvalid:
        pass
    data = _decode_check(shard, cfg, 0, chunk, "")
    if data is None:
        yield Batch(pa.array([], pa.large_string()), pa.array([], pa.string()), skipped=1, consumed=len(chunk))
        return
    yield Batch(pa.array([data.decode("utf-8")], pa.large_string()), lang, replaced=1, consumed=len(chunk))


def _docs_before(path: str, start: int) -> int:
    """Non-blank lines (JSONL documents) in the first ``start`` bytes of ``path``."""
    if start <= 0:
        return 0
    n = 0
    with _open_raw(path) as f:
        for line in f:
            n += bool(line.strip())
            start -= len(line)
            if start <= 0:
                break
    return n


def _finish(shard: Shard, cfg: CorpusConfig, text, lang, *, first_doc: int, doc_base=None) -> Batch:
    """Normalise a batch: text → large_string without nulls (UTF-8 checked), lang →
    string with the default language filled in. ``doc_base()``, when given, is the
    number of documents before the shard (a split file's later shards)."""
    import pyarrow as pa

    n = len(text)
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    if text.null_count:
        import pyarrow.compute as pc

        i = pc.index(pc.is_null(text), True).as_py()
        first_doc += doc_base() if doc_base is not None else 0
        raise InputError(
            f"{shard.path}: document {first_doc + i} (counting from 0) has no {cfg.text_field!r} field; "
            "every document needs text (or set corpus.text_field)"
        )
    skipped = replaced = 0
    if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type)):
        if pa.types.is_binary(text.type) or pa.types.is_large_binary(text.type):
            text, lang, skipped, replaced = _utf8_binary(shard, cfg, text, lang, first_doc)
        else:
            raise InputError(
                f"{shard.path}: column {cfg.text_field!r} is {text.type}, expected text (string)"
            )
    text = arrow_cast(text, pa.large_string())
    if lang is None:
        lang = pa.repeat(pa.scalar(cfg.default_lang, pa.string()), len(text))
    else:
        if isinstance(lang, pa.ChunkedArray):
            lang = lang.combine_chunks()
        if pa.types.is_dictionary(lang.type):
            lang = arrow_call("take", lang.dictionary, lang.indices)
        try:
            lang = arrow_cast(lang, pa.string())
        except pa.ArrowException:
            raise InputError(
                f"{shard.path}: column {cfg.lang_field!r} is {lang.type}, expected text (string)"
            ) from None
        missing = arrow_call("or_kleene", arrow_call("is_null", lang), arrow_call("equal", lang, pa.scalar("")))
        lang = arrow_call("if_else", missing, pa.scalar(cfg.default_lang, pa.string()), lang)
    assert len(text) == len(lang) and (n == len(text) + skipped)
    return Batch(text, lang, skipped, replaced)


def _utf8_binary(shard, cfg, text, lang, first_doc):
    """A binary text column: check UTF-8 per document (only the rare failing ones are
    handled in Python)."""
    import pyarrow as pa

    try:
        return arrow_cast(text, pa.large_string()), lang, 0, 0  # the cast checks the UTF-8
    except pa.ArrowInvalid:
        pass
    keep = []
    out = []
    replaced = 0
    for i, v in enumerate(text.to_pylist()):
        try:
            out.append(v.decode("utf-8"))
            keep.append(i)
        except UnicodeDecodeError as e:
            if cfg.on_invalid == "error":
                raise InputError(
                    f"{shard.path}: invalid UTF-8 in document {first_doc + i} at byte offset "
                    f"{e.start} of its text; fix the data or pass --on-invalid skip|replace"
                ) from None
            if cfg.on_invalid == "replace":
                out.append(v.decode("utf-8", errors="replace"))
                keep.append(i)
                replaced += 1
    if lang is not None:
        lang = arrow_call("take", lang.combine_chunks() if isinstance(lang, pa.ChunkedArray) else lang, pa.array(keep, pa.int64()))
    return pa.array(out, pa.large_string()), lang, len(text) - len(keep), replaced


def corpus_fingerprint(shards: Sequence[Shard]) -> list[dict[str, Any]]:
    """What a map stage records as its input (files, sizes, mtimes, row groups)."""
    return [s.key() for s in shards]


def total_bytes(shards: Sequence[Shard]) -> int:
    return sum(s.bytes for s in shards)


__all__ = ["Batch", "CorpusWarning", "Shard", "expand_paths", "kind_of", "plan_shards", "read_batches", "sample_shards", "total_bytes"]
