"""pretokenize: corpus shard → ``part-NNNNN.arrow`` of (piece, lang, count), a map stage.

Each input shard is streamed batch by batch: the Numba scanner splits every document's
UTF-8 in one kernel call per batch, and a hash table of the shard's (piece, lang) pairs
counts the pieces where they lie in the batch's text (``piece_counts``). The shard's
marker ``part-NNNNN.json`` carries its stats: bytes and documents per language, Han
character counts (Han = ``regex`` ``\\p{Han}``, counted on the unique pieces), pieces,
skipped and replaced documents.

A piece longer than ``pretokenize.max_piece_bytes`` (default 64 KiB) is counted as
consecutive chunks of at most that many bytes, each ending on a UTF-8 character
boundary (:func:`cap_pieces`). Without it, one word the size of a file (50 MB of a
letter, say) became one 50 MB piece and, in training, a 50 MB token. No piece of real
text comes near the limit, so the default changes nothing there; encoding is not
affected (the tokenizer encodes every piece whole).

Output schema: ``piece: binary, lang: string, count: int64``, unique (piece, lang) rows
within the shard, in the order first met (``large_binary`` only past 2 GB of them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import dwstok
from dwstok import kernel_cache
from dwstok._jit import drop_stale_cache, njit, own_kernels
from dwstok.errors import InputError
from dwstok.scanner import KIND_CL100K, KIND_O200K, KIND_O200K_RDIGITS, get_scanner, scan_segments

from . import piece_counts, shard_progress
from .arrow_compute import arrow_call
from .config import Config
from .corpus import Shard, corpus_fingerprint, plan_shards, read_batches, total_bytes
from .executors import Executor
from .inputs import Inputs
from .lineage import built_with
from .piece_counts import PieceCounts
from .manifest import (
    Manifest,
    Staging,
    Timer,
    hash_file,
    hash_obj,
    mark_shard_done,
    part_name,
    remove_stale_parts,
    shard_done,
    up_to_date,
    write_table,
)

# The kernels here compile in dwstok's scanner: a change there must empty this cache too.
drop_stale_cache(Path(__file__).parent, [Path(__file__).parent, Path(dwstok.__file__).parent])
own_kernels("stages.")  # they load from the cache as dwstok's do (without Numba's registries)

STAGE = "pretokenize"
CONFIG_KEYS = ("pattern", "corpus", "pretokenize")
# Scan a batch's text this many bytes at a time (a long document, such as a whole .txt
# file, is cut where no built-in pattern's pretoken spans), so the piece offsets (8 bytes
# per byte of text at worst) stay bounded whatever the document's size.
SCAN_BYTES = 32 << 20
# A shard's job spends its time in Arrow (Parquet reading) and nogil kernels (the
# scanner, the counts): threads, not spawned processes (each of which imports Numba and
# loads the kernels before its first shard).
GIL_FREE = True


def run(config: Config, inputs: Inputs, out_dir: str | Path, executor: Executor) -> Manifest:
    """Pretokenize every corpus shard into ``out_dir/part-NNNNN.arrow``.

    The previous result in ``out_dir`` stays intact until the new one is complete.
    """
    out_dir = Path(out_dir)
    with Timer() as t_plan:
        shards = plan_shards(inputs.require_corpus(), config.corpus)
    _check_not_empty(shards)
    config_hash = config.hash_of(*CONFIG_KEYS)
    inputs_hash = hash_obj(corpus_fingerprint(shards))
    done = up_to_date(out_dir, STAGE, config_hash, inputs_hash)
    if done:
        return done
    # On a cold kernel cache, the merge learner compiles in the background meanwhile
    kernel_cache.start_early()
    # Built next to the previous result, swapped in only once complete.
    staging = Staging(out_dir, STAGE, config_hash, reuse_parts=True)

    with Timer() as t_map, shard_progress.channel(executor, len(shards), gil_free=GIL_FREE) as reporter:
        tasks = [
            _Task(
                config,
                s,
                str(staging.dir),
                hash_obj({"config": config_hash, "shard": s.key(), "index": s.index}),
                reporter,
            )
            for s in shards
        ]
        results = list(
            executor.map(_pretokenize_shard, tasks, label=STAGE, total_bytes=total_bytes(shards), gil_free=GIL_FREE)
        )
    remove_stale_parts(staging.dir, keep=len(shards))

    totals = _sum_stats([r["stats"] for r in results])
    if totals["docs"] == 0:
        where = ", ".join(inputs.corpus)
        raise InputError(f"empty corpus: no documents with text in {where}")
    outputs = {}
    for s, r in zip(shards, results):
        outputs.update(r["outputs"])
        # The marker is an output too: count reads the shard's stats from it.
        marker = part_name(s.index, ".json")
        outputs[marker] = hash_file(staging.dir / marker)
    counts = {
        "shards": len(shards),
        "resumed_shards": sum(r["resumed"] for r in results),
        "docs": totals["docs"],
        "bytes": totals["bytes"],
        "pieces": totals["pieces"],
        "rows": totals["rows"],
        "skipped_docs": totals["skipped"],
        "replaced_docs": totals["replaced"],
        "long_pieces": totals["long_pieces"],
        "languages": len(totals["docs_by_lang"]),
    }
    m = Manifest(
        stage=STAGE,
        config_hash=config_hash,
        inputs_hash=inputs_hash,
        outputs=outputs,
        counts=counts,
        timings={"plan_s": t_plan.seconds, "map_s": t_map.seconds},
        info={"pattern": config.pattern_string, "pattern_name": config.pattern, "version": config.version},
        inputs={"corpus": [s.key() for s in shards]},
        built_with=built_with(config, CONFIG_KEYS),
    )
    return staging.commit(m)


def load_kernels(config: Config, executor: Executor) -> None:
    """Run a shard's kernels (the scanner, the counts, the Han sums) on one tiny document,
    with the types a shard gives them: ``stages.early`` calls this on a thread of its own,
    so that they load from Numba's cache while the shards are read. Nothing when the
    shards run elsewhere (Ray)."""
    import pyarrow as pa

    from .corpus import Batch
    from .executors import LocalExecutor

    if not isinstance(executor, LocalExecutor):
        return
    acc = _ShardCounts(config.pretokenize.max_piece_bytes)
    # (no character from U+2E80 on: the Han counts then need no regex, see han_pattern)
    text = pa.array(["Hello, wörld 2026 ٣"], pa.large_string())
    acc.add(Batch(text, pa.array(["en"], pa.string())), get_scanner(config.pattern))
    acc.stats(acc.table())
    piece_counts.load_kernels()  # (and the table's growth, which one document does not reach)


def _check_not_empty(shards: list[Shard]) -> None:
    """An obviously empty corpus is refused before anything is written."""
    if not shards or all(s.bytes == 0 for s in shards):
        raise InputError(
            "empty corpus: the files given hold no documents"
            + (f" ({', '.join(sorted({s.path for s in shards}))})" if shards else "")
        )


@dataclass(frozen=True)
class _Task:
    config: Config
    shard: Shard
    out_dir: str
    key: str
    progress: Any = None  # a shard_progress.Reporter, or None

    @property
    def bytes(self) -> int:
        return self.shard.bytes


def _pretokenize_shard(task: _Task) -> dict[str, Any]:
    """One shard's whole job: read, split, count, write, mark done. Resumable."""
    out_dir = Path(task.out_dir)
    prev = shard_done(out_dir, task.shard.index, task.key)
    if prev is not None:
        return shard_progress.shard_result(prev.outputs, prev.stats, shard_bytes=task.shard.bytes)

    cfg = task.config
    scanner = get_scanner(cfg.pattern)
    acc = _ShardCounts(cfg.pretokenize.max_piece_bytes)
    shown = shard_progress.meter(task.progress, limit=task.shard.bytes)
    for batch in read_batches(task.shard, cfg.corpus):
        acc.add(batch, scanner)
        shown.add(bytes=batch.consumed, docs=len(batch.text))
    table = acc.table()
    stats = acc.stats(table)
    name = part_name(task.shard.index)
    info = write_table(
        out_dir / name,
        table,
        metadata={
            "dwstok.kind": "pretokenize-shard",
            "dwstok.pattern": cfg.pattern_string,
            "dwstok.version": cfg.version,
            "dwstok.source": task.shard.describe(),
        },
    )
    mark_shard_done(out_dir, task.shard.index, task.key, {name: info}, stats)
    return shard_progress.shard_result({name: info}, stats, shard_bytes=task.shard.bytes, shown=shown)


class _ShardCounts:
    """Accumulates a shard's (piece, lang) counts and stats across batches."""

    def __init__(self, max_piece_bytes: int):
        self.max_piece_bytes = max_piece_bytes
        self.long_pieces = 0  # pieces over the limit, each counted as chunks
        self.counts = PieceCounts()  # (piece, language index into ``_lang_at``'s keys) -> count
        self._lang_at: dict[str, int] = {}  # the shard's languages, in the order met
        self.bytes_by_lang: Counter[str] = Counter()
        self.docs_by_lang: Counter[str] = Counter()
        self.pieces = 0
        self.skipped = 0
        self.replaced = 0

    def add(self, batch, scanner) -> None:
        self.skipped += batch.skipped
        self.replaced += batch.replaced
        text = batch.text
        n = len(text)
        if n == 0:
            return
        bufs = text.buffers()
        doc_offs = np.frombuffer(bufs[1], dtype=np.int64)[text.offset : text.offset + n + 1]
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        enc = arrow_call("dictionary_encode", batch.lang)
        lang_idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
        langs = enc.dictionary.to_pylist()
        doc_len = np.diff(doc_offs)
        for i, v in enumerate(np.bincount(lang_idx, weights=doc_len, minlength=len(langs))):
            self.bytes_by_lang[langs[i]] += int(v)
        for i, v in enumerate(np.bincount(lang_idx, minlength=len(langs))):
            self.docs_by_lang[langs[i]] += int(v)
        # the batch's language indices as the shard's, so that batches group together
        shard_idx = np.array([self._lang_at.setdefault(g, len(self._lang_at)) for g in langs], np.int32)
        lang_idx = shard_idx[lang_idx]
        for seg_offs, seg_lang in scan_windows(scanner, data, doc_offs, lang_idx, SCAN_BYTES):
            self._count(scanner, data, seg_offs, seg_lang)

    def _count(self, scanner, data, seg_offs, seg_lang) -> None:
        piece_offs, per_seg = split_documents(scanner, data, seg_offs)
        piece_offs, per_seg, n_long = cap_pieces(data, piece_offs, per_seg, self.max_piece_bytes)
        self.long_pieces += n_long
        self.pieces += len(piece_offs) - 1
        self.counts.add(data, piece_offs, np.repeat(seg_lang, per_seg).astype(np.int32, copy=False))

    @staticmethod
    def count_han(table) -> dict[str, int]:
        """Han character counts from the shard's unique pieces (a tenth of the text's
        size): each character weighs its piece's count, in code point order. Han is what
        the ``regex`` module's ``\\p{Han}`` matches.

        A kernel sums the counts of the characters that can be Han (:func:`_sum_wide_chars`),
        and ``regex`` judges the few thousand distinct ones. The sums are a table of every
        code point from U+2E80 (8.9 MB of zeros, of which only the pages that the text's
        characters fall in are touched). It replaced a dozen NumPy passes over every byte,
        a search and a sort (bench/results/session20-training-20261204.md).
        """
        from dwstok.training import binary_buffers, han_pattern

        sums = np.zeros(0x110000 - _HAN_MIN, np.int64)
        counts_col = table.column("count")
        row0 = 0
        for chunk in table.column("piece").chunks:
            counts = counts_col.slice(row0, len(chunk)).to_numpy().astype(np.int64, copy=False)
            row0 += len(chunk)
            if len(chunk):
                _sum_wide_chars(*binary_buffers(chunk), counts, sums)
        found = np.flatnonzero(sums)
        if found.size == 0:
            return {}
        chars = "".join(map(chr, (found + _HAN_MIN).tolist()))
        return {chars[m.start()]: int(sums[found[m.start()]]) for m in han_pattern().finditer(chars)}

    def table(self):
        return self.counts.table(list(self._lang_at))

    def stats(self, table) -> dict[str, Any]:
        han = self.count_han(table)
        rows = table.num_rows
        # Only when there were any, so a shard of ordinary text has the same marker as
        # before the limit existed.
        extra = {"long_pieces": int(self.long_pieces)} if self.long_pieces else {}
        return extra | {
            "bytes": int(sum(self.bytes_by_lang.values())),
            "docs": int(sum(self.docs_by_lang.values())),
            "pieces": int(self.pieces),
            "rows": int(rows),
            "skipped": int(self.skipped),
            "replaced": int(self.replaced),
            "bytes_by_lang": dict(sorted(self.bytes_by_lang.items())),
            "docs_by_lang": dict(sorted(self.docs_by_lang.items())),
            "han": han,
        }


@njit
def _sum_wide_chars(data, offs, counts, sums):
    """Add ``counts[i]`` to ``sums[c - 0x2E80]`` for every character c from U+2E80 up in
    piece i, ``data[offs[i]:offs[i+1]]`` (once for each time the piece holds it).

    Only characters of three and four bytes lie there, so only lead bytes from 0xE2 are
    read. A lead whose bytes are no character inside its piece (a stray or cut byte: a
    piece is any bytes) counts as none, and so does a lead over 0xF4.
    """
    for p in range(offs.size - 1):
        e = np.int64(offs[p + 1])
        w = counts[p]
        i = np.int64(offs[p])
        while i < e:
            b0 = np.int64(data[i])
            k = 3 if b0 < 0xF0 else 4
            if b0 < 0xE2 or b0 > 0xF4 or i + k > e:
                i += 1
                continue
            b1, b2, b3 = np.int64(data[i + 1]), np.int64(data[i + 2]), np.int64(data[i + k - 1])
            if (b1 & 0xC0) != 0x80 or (b2 & 0xC0) != 0x80 or (b3 & 0xC0) != 0x80:
                i += 1
                continue
            if k == 3:
                cp = ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F)
            else:
                cp = ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
            i += k
            if _HAN_MIN <= cp <= 0x10FFFF:
                sums[cp - _HAN_MIN] += w


_HAN_MIN = 0x2E80  # no Han character lies below CJK Radicals Supplement


def split_documents(scanner, data: np.ndarray, doc_offs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pretoken bounds of every document of a batch.

    ``data`` is the batch's UTF-8 buffer and ``doc_offs`` the n+1 document offsets into
    it. Returns ``(piece_offs, per_doc)``: absolute piece offsets (documents are
    contiguous, so one array delimits every piece of every document) and the number of
    pieces of each document.
    """
    n = len(doc_offs) - 1
    if n == 0:
        return doc_offs[:1].copy(), np.zeros(0, np.int64)
    if scanner.is_native:
        out = np.empty(int(doc_offs[-1] - doc_offs[0]) + 1, dtype=np.int64)
        per_doc = np.empty(n, dtype=np.int64)
        k = scan_segments(scanner.kind, data, doc_offs, scanner.table, out, per_doc)
        return out[: k + 1], per_doc
    # The regex fallback: correct, slow, one call per document.
    chunks = [doc_offs[:1]]
    per_doc = np.zeros(n, dtype=np.int64)
    for i in range(n):
        s, e = int(doc_offs[i]), int(doc_offs[i + 1])
        if e > s:
            b = scanner.bounds(data[s:e])
            chunks.append(b[1:] + s)
            per_doc[i] = len(b) - 1
    return np.concatenate(chunks), per_doc


_SAFE_CUT = None
_WINDOWED = (KIND_O200K, KIND_O200K_RDIGITS, KIND_CL100K)


def scan_windows(scanner, data: np.ndarray, doc_offs: np.ndarray, lang_idx: np.ndarray, window: int):
    """A batch's documents as ``(segment offsets, segment languages)`` groups of about
    ``window`` bytes of text each, pretokenizing exactly like the whole batch.

    A document longer than ``window`` is cut after a newline that precedes an ASCII
    letter: o200k, o200k-rdigits and cl100k always end a pretoken there (their
    ``\\s*[\\r\\n]`` alternatives take the whitespace up to that newline, and no
    pretoken goes on from a newline into a letter). gpt2's ``\\s+$`` would read a window's
    last newline differently, and a custom regex could span anything, so those get the
    whole batch at once, as does a document with no such point.
    """
    global _SAFE_CUT
    total = int(doc_offs[-1] - doc_offs[0])
    if total <= window or scanner.kind not in _WINDOWED:
        yield doc_offs, lang_idx
        return
    if _SAFE_CUT is None:
        import re

        _SAFE_CUT = re.compile(rb"\n(?=[A-Za-z])")
    mem = memoryview(data)
    cuts = []
    for d in np.flatnonzero(np.diff(doc_offs) > window):
        s, e = int(doc_offs[d]), int(doc_offs[d + 1])
        at = s + window
        while at < e:
            m = _SAFE_CUT.search(mem, at - 1, e)
            if m is None:
                break
            cuts.append(m.end())
            at = m.end() + window
    # (a sort, not a set union: empty documents repeat an offset)
    seg_offs = np.sort(np.concatenate([doc_offs, np.asarray(cuts, dtype=np.int64)]))
    seg_lang = lang_idx[np.searchsorted(doc_offs, seg_offs[:-1], side="right") - 1]
    # Greedy groups of whole segments, each at least one segment.
    ends = seg_offs[1:] - seg_offs[0]
    a = 0
    while a < len(seg_lang):
        b = max(a + 1, int(np.searchsorted(ends, int(seg_offs[a] - seg_offs[0]) + window, side="right")))
        yield seg_offs[a : b + 1], seg_lang[a:b]
        a = b


def cap_pieces(data: np.ndarray, piece_offs: np.ndarray, per_doc: np.ndarray, limit: int):
    """Pieces longer than ``limit`` bytes cut into chunks of at most ``limit`` bytes.

    A chunk ends where the next ``limit`` bytes end, moved back to the start of a UTF-8
    character (at most 3 bytes), so every chunk is whole characters. Returns
    ``(piece_offs, per_doc, n_long)``; the arrays are the input ones when no piece is
    too long (the usual case: one vectorised length check).

    >>> data = np.frombuffer("ab€€€".encode(), np.uint8)          # 2 + 3 * 3 bytes
    >>> offs, per_doc, n = cap_pieces(data, np.array([0, 2, 11]), np.array([2]), 4)
    >>> offs.tolist(), per_doc.tolist(), n
    ([0, 2, 5, 8, 11], [4], 1)
    """
    lengths = np.diff(piece_offs)
    long = lengths > limit
    n_long = int(np.count_nonzero(long))
    if n_long == 0:
        return piece_offs, per_doc, 0
    # each chunk holds at least limit - 3 bytes, so this many offsets always suffice
    room = len(piece_offs) + int(np.sum(lengths[long] // (limit - 3) + 1))
    out = np.empty(room, dtype=np.int64)
    out_per_doc = np.empty_like(per_doc)
    k = _cap_pieces(data, piece_offs, per_doc, limit, out, out_per_doc)
    return out[: k + 1].copy(), out_per_doc, n_long


@njit
def _cap_pieces(data, offs, per_doc, limit, out, out_per_doc):
    out[0] = offs[0]
    k = 0
    p = 0
    for d in range(per_doc.shape[0]):
        n = 0
        for _ in range(per_doc[d]):
            s = offs[p]
            e = offs[p + 1]
            p += 1
            while e - s > limit:
                c = s + limit
                while (data[c] & 0xC0) == 0x80 and c > s + 1:  # back to a character start
                    c -= 1
                k += 1
                out[k] = c
                n += 1
                s = c
            k += 1
            out[k] = e
            n += 1
        out_per_doc[d] = n
    return k


def _sum_stats(stats: list[dict[str, Any]]) -> dict[str, Any]:
    tot: dict[str, Any] = {"docs": 0, "bytes": 0, "pieces": 0, "rows": 0, "skipped": 0, "replaced": 0, "long_pieces": 0}
    by_lang_b: Counter[str] = Counter()
    by_lang_d: Counter[str] = Counter()
    for s in stats:
        for k in ("docs", "bytes", "pieces", "skipped", "replaced"):
            tot[k] += s[k]
        tot["rows"] += s.get("rows") or 0
        tot["long_pieces"] += s.get("long_pieces", 0)
        by_lang_b.update(s["bytes_by_lang"])
        by_lang_d.update(s["docs_by_lang"])
    tot["bytes_by_lang"] = dict(by_lang_b)
    tot["docs_by_lang"] = dict(by_lang_d)
    return tot
