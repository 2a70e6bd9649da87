"""Bounded-memory reduce for ``count``, and pruning of the reduced pieces.

The in-memory reduce (``count.reduce_parts``) holds every (piece, language) row of the
corpus in one hash group-by. Here the rows are split into K partitions by **range of
piece bytes** (K - 1 splitters sampled from the shards), each partition is spilled to
Arrow IPC files in the staging folder (one per worker's run of shards), then reduced
alone (group-by, sort) and spilled again as its unique pieces and its per-language
counts. The reduced partitions, taken in splitter order, are already sorted by piece, so
``write_pieces`` streams them into ``pieces.arrow`` and ``lang_counts.arrow`` one after
the other, in record batches of a fixed size (so the files' bytes do not depend on K).
Peak memory is one shard a worker (split pass), one partition (reduce and write passes)
and 8 bytes per unique piece (the totals pruning ranks), never the output table.

Ranges rather than hashes: a hash partition would need a global sort (or a K-way merge)
of the reduced rows to restore the output's order; with ranges the order comes free.
The splitters only steer balance, never the result.

Pruning (``count.min_count``, ``count.max_pieces``) ranks pieces by count (descending),
then bytes (ascending), and keeps a prefix of that ranking:

>>> import pyarrow as pa
>>> t = pa.table({"piece": [b"a", b"b", b"c", b"d"], "count": pa.array([3, 1, 3, 2], pa.int64())})
>>> prune(t, min_count=2)[0].column("piece").to_pylist()
[b'a', b'c', b'd']
>>> prune(t, max_pieces=1)[0].column("piece").to_pylist()   # a tie at 3: b"a" sorts first
[b'a']
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .arrow_compute import arrow_call, arrow_cast, sorted_table

# Automatic K: one partition per this many bytes of (zstd-compressed) pretokenize parts
# (about 10 times as many once decompressed): 6 partitions for 200 MB of text.
PART_BYTES = 4 << 20
MAX_AUTO_PARTITIONS = 256
SAMPLE_SHARDS = 8
# Pieces sampled for the splitters, at most, over all the shards sampled; fewer for
# fewer partitions (a quantile needs far fewer rows than the sort of them all costs).
SAMPLE_ROWS = 1 << 18
SAMPLE_ROWS_PER_PARTITION = 1 << 12
# What a sampled row weighs for the splitters besides its piece's bytes.
SAMPLE_ROW_BYTES = 16
# Rows of a shard split into partitions at a time.
SPLIT_ROWS = 1 << 19


def auto_partitions(input_bytes: int) -> int:
    """K for ``count.partitions: 0``: grows with the input, 1 for a small corpus.

    >>> auto_partitions(1 << 20), auto_partitions(22 << 20), auto_partitions(1 << 40)
    (1, 6, 256)
    """
    return max(1, min(MAX_AUTO_PARTITIONS, math.ceil(input_bytes / PART_BYTES)))


def splitters(paths: list[Path], k: int) -> list[bytes]:
    """K - 1 ascending, distinct piece values that cut a sample of the rows of up to
    ``SAMPLE_SHARDS`` shards spread over the input into K parts of equal weight, a row
    weighing its piece's bytes plus ``SAMPLE_ROW_BYTES``. Partition i holds the pieces p
    with ``s[i-1] <= p < s[i]``.

    Why weights: reducing a partition costs about its bytes and its distinct pieces,
    and pieces of scripts with long characters sort last, so cuts at the median of the
    sample's distinct pieces left the last partition much the slowest to reduce
    (bench/results/session20-training-20261204.md). The partitions' outputs do not
    depend on where the cuts fall."""
    import pyarrow as pa

    from .manifest import read_table

    if k <= 1 or not paths:
        return []
    step = max(1, len(paths) // SAMPLE_SHARDS)
    chosen = paths[::step][:SAMPLE_SHARDS]
    want = min(SAMPLE_ROWS, SAMPLE_ROWS_PER_PARTITION * k)
    cols = []
    for p in chosen:
        # every n-th row, so the sample (and its memory) stays bounded however large a
        # shard is (its rows are in hash order: a stride samples their bytes evenly)
        col = read_table(p).column("piece")
        stride = max(1, len(col) // max(1, want // len(chosen)))
        # (its chunks: pa.chunked_array reads a ChunkedArray in its list as a sequence
        # of Python scalars, one by one)
        cols.extend(arrow_cast(arrow_call("take", col, pa.array(np.arange(0, len(col), stride))), pa.large_binary()).chunks)
        del col
    sample = pa.chunked_array(cols, pa.large_binary()).combine_chunks()
    if len(sample) == 0:
        return []
    sample = arrow_call("take", sample, arrow_call("array_sort_indices", sample))
    weight = np.cumsum(arrow_call("binary_length", sample).to_numpy().astype(np.int64) + SAMPLE_ROW_BYTES)
    at = np.searchsorted(weight, weight[-1] * np.arange(1, k) / k)
    return sorted({sample[int(i)].as_py() for i in np.minimum(at, len(sample) - 1)})


def partition_ids(piece, cuts: list[bytes]) -> np.ndarray:
    """Partition of each piece: the number of splitters at or below it."""
    import pyarrow as pa

    ids = np.zeros(len(piece), np.int32)
    for s in cuts:
        ids += arrow_call("greater_equal", piece, pa.scalar(s, piece.type)).to_numpy(zero_copy_only=False)
    return ids


def reduce_partitioned(
    paths: list[Path],
    langs: list[str],
    spill_dir: Path,
    *,
    k: int,
    executor=None,
    on_part: Callable[[int], None] | None = None,
    sizes: list[int] | None = None,
    on_split_done: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Reduce every (piece, language) row of the shards in ``k`` range partitions spilled
    under ``spill_dir``; return one record per partition, in piece order (``write_pieces``
    reads them). With an ``executor``, the partitions are reduced as its tasks (locally on
    threads; on Ray, on the cluster: the spill folder must then be visible to the workers,
    as the stage folders already are)."""
    import pyarrow as pa

    spill_dir.mkdir(parents=True, exist_ok=True)
    cuts = splitters(paths, k)
    k = len(cuts) + 1
    sizes = sizes or [0] * len(paths)
    # The shards in runs of about equal bytes, one a worker: each run spills its rows to
    # K files of its own (a partition's rows are summed, then sorted, so which run they
    # came from does not change the result).
    n_runs = max(1, min(len(paths), executor.workers if executor is not None else 1))
    runs = _runs(sizes, n_runs)
    splits = [
        {"paths": [str(paths[j]) for j in run], "sizes": [sizes[j] for j in run], "cuts": cuts, "langs": langs,
         "out": str(spill_dir / f"rows-{r:04d}")}
        for r, run in enumerate(runs)
    ]
    if executor is not None and len(splits) > 1:
        total = sum(sizes)
        spilled = list(executor.map(split_shards, splits, label="count: split shards", total_bytes=total or None,
                                    gil_free=True))
    else:
        spilled = [split_shards(t, on_part=on_part) for t in splits]

    # Arrow's allocator keeps freed pages: give the split pass's back before reducing.
    pa.default_memory_pool().release_unused()
    if on_split_done:
        on_split_done()
    tasks = [
        {"rows": [x["files"][i] for x in spilled], "out": str(spill_dir / f"reduced-{i:04d}"), "n_langs": len(langs)}
        for i in range(k)
    ]
    if executor is not None:
        return list(executor.map(reduce_partition, tasks, label="count: reduce partitions", gil_free=True))
    return [reduce_partition(t) for t in tasks]


def _runs(sizes: list[int], n: int) -> list[list[int]]:
    """Indices 0..len(sizes)-1 in at most ``n`` consecutive runs of about equal total
    size: a shard goes to the run its middle byte falls in.

    >>> _runs([5, 1, 1, 5, 1, 1], 2)
    [[0, 1, 2], [3, 4, 5]]
    >>> _runs([0, 0, 0], 2), _runs([9, 1], 3)
    ([[0], [1, 2]], [[0], [1]])
    """
    weights = sizes if sum(sizes) else [1] * len(sizes)
    total = sum(weights)
    runs: list[list[int]] = [[] for _ in range(n)]
    acc = 0
    for j, w in enumerate(weights):
        runs[min(n - 1, (2 * acc + w) * n // (2 * total))].append(j)
        acc += w
    return [r for r in runs if r]


def split_shards(task: dict[str, Any], on_part: Callable[[int], None] | None = None) -> dict[str, Any]:
    """A run of shards → their (piece, language, count) rows spilled to one file per
    partition, ``{out}-{i:04d}.arrow`` for partition i; ``{"files", "bytes"}``.
    Module-level, so Ray and process pools can run it."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    from pyarrow._compute import SetLookupOptions

    from .manifest import read_table

    cuts = task["cuts"]
    k = len(cuts) + 1
    value_set = pa.array(task["langs"], pa.string())
    schema = pa.schema([("piece", pa.large_binary()), ("lang", pa.int32()), ("count", pa.int64())])
    files = [f"{task['out']}-{i:04d}.arrow" for i in range(k)]
    sinks = [pa.OSFile(f, "wb") for f in files]
    writers = [ipc.new_stream(s, schema) for s in sinks]
    try:
        for path, size in zip(task["paths"], task["sizes"]):
            t = read_table(Path(path))
            # A slice at a time: the copies below (wider offsets, the partition order)
            # stay bounded however many rows one shard holds.
            for start in range(0, t.num_rows, SPLIT_ROWS):
                part = t.slice(start, SPLIT_ROWS)
                piece = arrow_cast(part.column("piece"), pa.large_binary())
                lid = arrow_cast(arrow_call("index_in", part.column("lang"), options=SetLookupOptions(value_set)), pa.int32())
                rows = pa.table({"piece": piece, "lang": lid, "count": arrow_cast(part.column("count"), pa.int64())}, schema=schema)
                if k == 1:
                    writers[0].write_table(rows)
                else:
                    ids = partition_ids(piece, cuts)
                    order = np.argsort(ids, kind="stable")
                    bounds = np.searchsorted(ids[order], np.arange(k + 1))
                    rows = arrow_call("take", rows, pa.array(order))
                    for i in range(k):
                        if bounds[i + 1] > bounds[i]:
                            writers[i].write_table(rows.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i])))
                del part, piece, lid, rows
            del t
            if on_part:
                on_part(size)
    finally:
        for w in writers:
            w.close()
        for s in sinks:
            s.close()
    return {"files": files, "bytes": sum(task["sizes"])}


def reduce_partition(task: dict[str, Any]) -> dict[str, Any]:
    """One partition's spilled rows → its unique pieces ``(piece, count)`` sorted by
    bytes, and its per-language counts ``(row, lang, count)`` sorted by (row, lang),
    ``row`` counting from the partition's first piece: two uncompressed spill files.
    Module-level, so Ray and process pools can run it."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from .count import _group
    from .manifest import atomic_path

    tables = []
    for f in task["rows"]:
        with pa.memory_map(f) as src:
            tables.append(ipc.open_stream(src).read_all())
    rows = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    del tables
    n_in = rows.num_rows
    if n_in:
        g = sorted_table(_group([rows]), [("piece", "ascending"), ("lang", "ascending")]).combine_chunks()
    else:
        g = pa.table({"piece": pa.array([], pa.large_binary()), "lang": pa.array([], pa.int32()), "count": pa.array([], pa.int64())})
    del rows
    pieces, long = split_long(g)
    del g
    out = {"rows": n_in, "unique": pieces.num_rows}
    for name, table in (("pieces", pieces), ("langs", long)):
        path = Path(f"{task['out']}-{name}.arrow")
        # Scratch, as the rows spilled above: a resumed run splits the shards again, so
        # it is not synced to the disk (two waits on the disk a file).
        with atomic_path(path, durable=False) as tmp:
            with pa.OSFile(str(tmp), "wb") as sink, ipc.new_file(sink, table.schema) as w:
                w.write_table(table)
        out[name] = str(path)
    for f in task["rows"]:
        Path(f).unlink()
    del pieces, long
    pa.default_memory_pool().release_unused()
    return out


def split_long(g):
    """Long rows ``(piece, lang, count)`` sorted by (piece, lang) → ``(pieces, langs)``:
    the unique pieces with their total, and the rows as ``(row, lang, count)``, ``row``
    the piece's index. Vectorised: a new piece starts where the sorted bytes change."""
    import pyarrow as pa

    n = g.num_rows
    piece = g.column("piece").chunk(0) if g.column("piece").num_chunks else pa.array([], pa.large_binary())
    piece = arrow_cast(piece, pa.large_binary())
    lang = g.column("lang").to_numpy().astype(np.uint16)
    count = g.column("count").to_numpy().astype(np.int64, copy=False)
    new = np.ones(n, dtype=bool)
    if n > 1:
        new[1:] = arrow_call("not_equal", piece.slice(1), piece.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    first = np.flatnonzero(new)
    total = np.add.reduceat(count, first) if n else np.zeros(0, np.int64)
    pieces = pa.table({"piece": arrow_call("take", piece, pa.array(first)), "count": pa.array(total, pa.int64())})
    row = np.cumsum(new, dtype=np.int64) - 1
    langs = pa.table({"row": pa.array(row), "lang": pa.array(lang), "count": pa.array(count)})
    return pieces, langs


def keep_mask(count: np.ndarray, *, min_count: int | None = None, max_pieces: int | None = None):
    """``(keep, report)``: which pieces (sorted by bytes, ``count`` their totals) pruning
    keeps, ``None`` for all, and what it left out (pieces and occurrences).

    ``min_count``: keep pieces with ``count >= min_count``. ``max_pieces``: keep the first
    ``max_pieces`` of the ranking (count descending, then bytes ascending), so of pieces
    tied on the boundary count, those whose bytes sort first stay.
    """
    n = len(count)
    keep = np.ones(n, dtype=bool)
    if min_count is not None:
        keep &= count >= min_count
    if max_pieces is not None and int(keep.sum()) > max_pieces:
        # Rows are sorted by bytes, so a stable sort on -count ranks ties by bytes.
        rank = np.argsort(-count, kind="stable")
        keep_rank = np.zeros(n, dtype=bool)
        keep_rank[rank[keep[rank]][:max_pieces]] = True
        del rank
        keep = keep_rank
    dropped = int(n - keep.sum())
    report = {
        "min_count": min_count,
        "max_pieces": max_pieces,
        "unique_pieces_before": int(n),
        "pieces_dropped": dropped,
        "occurrences_dropped": int(count[~keep].sum()) if dropped else 0,
    }
    report = {k: v for k, v in report.items() if v is not None}
    return (keep if dropped else None), report


# Rows per record batch in pieces.arrow and lang_counts.arrow: fixed, so the files'
# bytes do not depend on how many partitions made them.
BATCH_ROWS = 1 << 16


class BatchWriter:
    """An Arrow IPC file (zstd buffers) written in record batches of exactly
    ``BATCH_ROWS`` rows (the last one shorter), whatever the sizes of the tables added."""

    def __init__(self, sink, schema, rows: int = BATCH_ROWS):
        import pyarrow.ipc as ipc

        opts = ipc.IpcWriteOptions(compression="zstd", use_threads=True)
        self.schema, self.rows = schema, rows
        self.writer = ipc.new_file(sink, schema, options=opts)
        self.pending: list[Any] = []
        self.n = 0
        self.written = 0

    def add(self, table) -> None:
        if table.num_rows:
            self.pending.append(table)
            self.n += table.num_rows
        while self.n >= self.rows:
            self._emit(self.rows)

    def close(self) -> None:
        if self.n or not self.written:
            self._emit(self.n)
        self.writer.close()

    def _emit(self, n: int) -> None:
        import pyarrow as pa

        t = pa.concat_tables(self.pending) if self.pending else self.schema.empty_table()
        head = t.slice(0, n)
        cols = [pa.concat_arrays(c.chunks) if c.num_chunks else pa.array([], f.type) for c, f in zip(head.columns, self.schema)]
        self.writer.write_batch(pa.RecordBatch.from_arrays(cols, schema=self.schema))
        rest = t.slice(n)
        self.pending = [rest] if rest.num_rows else []
        self.n -= n
        self.written += n


def pieces_schema(metadata: dict[str, str]):
    import pyarrow as pa

    return pa.schema([("piece", pa.large_binary()), ("count", pa.int64())], metadata=metadata)


def lang_counts_schema(metadata: dict[str, str]):
    import pyarrow as pa

    return pa.schema([("row", pa.int64()), ("lang", pa.uint16()), ("count", pa.int64())], metadata=metadata)


def write_pieces(
    parts: list[dict[str, Any]],
    pieces_path: Path,
    lang_counts_path: Path,
    *,
    metadata,
    min_count: int | None = None,
    max_pieces: int | None = None,
):
    """Stream the reduced partitions (in order) into ``pieces_path`` and
    ``lang_counts_path``, keeping what pruning keeps; ``(kept, report)``.

    Only the pieces' totals (8 bytes a piece) are held for the whole corpus: pruning
    ranks them; everything else passes one partition at a time. ``metadata(report)``
    gives the files' schema metadata (it may record the pruning)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from .manifest import atomic_path

    def read(path):
        with pa.memory_map(path) as src:
            return ipc.open_file(src).read_all()

    counts = [read(p["pieces"]).column("count").to_numpy() for p in parts]
    sizes = [len(c) for c in counts]
    everything = np.concatenate(counts) if counts else np.zeros(0, np.int64)
    del counts
    keep, report = keep_mask(everything, min_count=min_count, max_pieces=max_pieces)
    del everything
    meta = metadata(report if min_count is not None or max_pieces is not None else None)
    kept = 0
    start = 0
    with atomic_path(pieces_path) as tmp_p, atomic_path(lang_counts_path) as tmp_l:
        with pa.OSFile(str(tmp_p), "wb") as sink_p, pa.OSFile(str(tmp_l), "wb") as sink_l:
            wp = BatchWriter(sink_p, pieces_schema(meta))
            wl = BatchWriter(sink_l, lang_counts_schema(meta | {"dwstok.kind": "count-lang-counts"}))
            for p, n in zip(parts, sizes):
                pieces, long = read(p["pieces"]), read(p["langs"])
                row = long.column("row").to_numpy()
                if keep is None:
                    new_row = row + kept
                    n_kept = n
                else:
                    k = keep[start : start + n]
                    rank = np.cumsum(k, dtype=np.int64) - 1 + kept
                    m = k[row]
                    pieces = pieces.filter(pa.array(k))
                    long = long.filter(pa.array(m))
                    new_row = rank[row[m]]
                    n_kept = int(k.sum())
                wp.add(pieces)
                wl.add(pa.table({"row": pa.array(new_row, pa.int64()), "lang": long.column("lang"), "count": long.column("count")}))
                del pieces, long, row, new_row
                kept += n_kept
                start += n
            wp.close()
            wl.close()
    return kept, report


def prune(wide, *, min_count: int | None = None, max_pieces: int | None = None):
    """``(table, report)``: the rows of a table sorted by piece (with a ``count`` column)
    that pruning keeps, still sorted by piece (see ``keep_mask``)."""
    import pyarrow as pa

    keep, report = keep_mask(wide.column("count").to_numpy(), min_count=min_count, max_pieces=max_pieces)
    return (wide if keep is None else wide.filter(pa.array(keep))), report
