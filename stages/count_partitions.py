"""Bounded-memory reduce for ``count``, and pruning of the reduced pieces.

The in-memory reduce (``count.reduce_parts``) holds every (piece, language) row of the
corpus in one hash group-by. Here the rows are split into K partitions by **range of
piece bytes** (K - 1 splitters sampled from the shards), each partition is spilled to an
Arrow IPC file in the staging folder, then reduced alone (group-by, sort, pivot) and
spilled again; the reduced partitions, taken in splitter order, are already sorted by
piece, so they are concatenated, not merged. Peak memory is one shard (split pass),
one partition (reduce pass) and the output table itself: ``pieces.arrow`` is one
record batch, as before, so its bytes do not depend on K.

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

# Automatic K: one partition per this many bytes of (zstd-compressed) pretokenize parts
# (about 10 times as many once decompressed): 6 partitions for 200 MB of text.
PART_BYTES = 4 << 20
MAX_AUTO_PARTITIONS = 256
SAMPLE_SHARDS = 8


def auto_partitions(input_bytes: int) -> int:
    """K for ``count.partitions: 0``: grows with the input, 1 for a small corpus.

    >>> auto_partitions(1 << 20), auto_partitions(22 << 20), auto_partitions(1 << 40)
    (1, 6, 256)
    """
    return max(1, min(MAX_AUTO_PARTITIONS, math.ceil(input_bytes / PART_BYTES)))


def splitters(paths: list[Path], k: int) -> list[bytes]:
    """K - 1 ascending, distinct piece values: quantiles of the unique pieces of up to
    ``SAMPLE_SHARDS`` shards spread over the input. Partition i holds the pieces p with
    ``s[i-1] <= p < s[i]``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .manifest import read_table

    if k <= 1 or not paths:
        return []
    step = max(1, len(paths) // SAMPLE_SHARDS)
    cols = [read_table(p).column("piece") for p in paths[::step][:SAMPLE_SHARDS]]
    sample = pc.unique(pa.chunked_array([c.cast(pa.large_binary()) for c in cols], pa.large_binary()))
    sample = sample.take(pc.sort_indices(sample))
    n = len(sample)
    if n == 0:
        return []
    picks = sorted({sample[min(n - 1, (i * n) // k)].as_py() for i in range(1, k)})
    return picks


def partition_ids(piece, cuts: list[bytes]) -> np.ndarray:
    """Partition of each piece: the number of splitters at or below it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = np.zeros(len(piece), np.int32)
    for s in cuts:
        ids += pc.greater_equal(piece, pa.scalar(s, piece.type)).to_numpy(zero_copy_only=False)
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
    min_count: int | None = None,
    dropped: dict[str, int] | None = None,
):
    """The wide pieces table (as ``count.pivot(count.reduce_parts(...))``), reduced in
    ``k`` range partitions spilled under ``spill_dir``. With an ``executor``, the
    partitions are reduced as its tasks (on Ray, on the cluster; the spill folder must
    then be visible to the workers, as the stage folders already are).

    ``min_count`` drops rare pieces inside each partition (exact: a piece lives in one
    partition), so the assembled table holds only the pieces kept; ``dropped`` (a dict)
    receives ``unique_pieces_before``, ``pieces_dropped`` and ``occurrences_dropped``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc

    from .manifest import read_table

    spill_dir.mkdir(parents=True, exist_ok=True)
    cuts = splitters(paths, k)
    k = len(cuts) + 1
    value_set = pa.array(langs, pa.string())
    schema = pa.schema([("piece", pa.large_binary()), ("lang", pa.int32()), ("count", pa.int64())])
    rows_files = [spill_dir / f"rows-{i:04d}.arrow" for i in range(k)]
    sinks = [pa.OSFile(str(p), "wb") for p in rows_files]
    writers = [ipc.new_stream(s, schema) for s in sinks]
    try:
        for j, p in enumerate(paths):
            t = read_table(p)
            piece = t.column("piece").cast(pa.large_binary())
            lid = pc.index_in(t.column("lang"), value_set=value_set).cast(pa.int32())
            rows = pa.table({"piece": piece, "lang": lid, "count": t.column("count").cast(pa.int64())}, schema=schema)
            if k == 1:
                writers[0].write_table(rows)
            else:
                ids = partition_ids(piece, cuts)
                order = np.argsort(ids, kind="stable")
                bounds = np.searchsorted(ids[order], np.arange(k + 1))
                rows = rows.take(pa.array(order))
                for i in range(k):
                    if bounds[i + 1] > bounds[i]:
                        writers[i].write_table(rows.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i])))
            del t, rows
            if on_part:
                on_part(sizes[j] if sizes else 0)
    finally:
        for w in writers:
            w.close()
        for s in sinks:
            s.close()

    # Arrow's allocator keeps freed pages: give the split pass's back before reducing.
    pa.default_memory_pool().release_unused()
    if on_split_done:
        on_split_done()
    tasks = [
        {"rows": str(rows_files[i]), "out": str(spill_dir / f"wide-{i:04d}.arrow"), "langs": list(langs), "min_count": min_count}
        for i in range(k)
    ]
    if executor is not None:
        done = list(executor.map(reduce_partition, tasks, label="count: reduce partitions"))
    else:
        done = [reduce_partition(t) for t in tasks]
    if dropped is not None:
        dropped["unique_pieces_before"] = sum(d["unique"] for d in done)
        dropped["pieces_dropped"] = sum(d["pieces_dropped"] for d in done)
        dropped["occurrences_dropped"] = sum(d["occurrences_dropped"] for d in done)
    return assemble([Path(d["out"]) for d in done], langs)


def reduce_partition(task: dict[str, Any]) -> dict[str, Any]:
    """One partition's spilled rows → its wide table (sorted by piece), spilled again.
    Module-level, so Ray and process pools can run it."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from .count import _group, pivot
    from .manifest import atomic_path

    with pa.memory_map(task["rows"]) as src:
        rows = ipc.open_stream(src).read_all()
    n_in = rows.num_rows
    if n_in:
        g = _group([rows]).sort_by([("piece", "ascending"), ("lang", "ascending")])
    else:
        g = pa.table({"piece": pa.array([], pa.binary()), "lang": pa.array([], pa.int32()), "count": pa.array([], pa.int64())})
    del rows
    wide = pivot(g, task["langs"])
    wide = wide.set_column(0, "piece", wide.column("piece").cast(pa.large_binary()))
    del g
    n_unique = wide.num_rows
    n_drop = occ_drop = 0
    if task.get("min_count") is not None:
        c = wide.column("count").to_numpy()
        keep = c >= task["min_count"]
        n_drop = int(n_unique - keep.sum())
        occ_drop = int(c[~keep].sum())
        if n_drop:
            wide = wide.filter(pa.array(keep))
    with atomic_path(Path(task["out"])) as tmp:
        with pa.OSFile(str(tmp), "wb") as sink, ipc.new_file(sink, wide.schema) as w:
            w.write_table(wide)
    Path(task["rows"]).unlink()
    del wide
    pa.default_memory_pool().release_unused()
    return {"out": task["out"], "rows": n_in, "unique": n_unique, "pieces_dropped": n_drop, "occurrences_dropped": occ_drop}


def assemble(paths: list[Path], langs: list[str]):
    """Concatenate the reduced partitions (in order) into one single-chunk table, one
    column at a time: each column is copied out of the memory-mapped spill files, which
    are unmapped before the next (so their pages leave the resident set). ``binary``
    pieces when their bytes fit 32-bit offsets, as the in-memory reduce makes them."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    names = ["piece", "count"] + [f"lang:{g}" for g in langs]
    cols = {}
    for name in names:
        typ = pa.large_binary() if name == "piece" else pa.int64()
        srcs = [pa.memory_map(str(p)) for p in paths]
        try:
            chunks = []
            for src in srcs:
                r = ipc.open_file(src)
                chunks += [r.get_batch(i).column(name) for i in range(r.num_record_batches)]
            arr = pa.concat_arrays(chunks) if chunks else pa.array([], typ)
            del chunks
        finally:
            for src in srcs:
                src.close()
        if name == "piece":
            data = arr.buffers()[2]
            if data is None or data.size < 2**31 - 1:
                arr = arr.cast(pa.binary())
        cols[name] = arr
    return pa.table(cols)


def prune(wide, *, min_count: int | None = None, max_pieces: int | None = None):
    """``(table, report)``: the rows of ``wide`` (sorted by piece) kept by pruning, still
    sorted by piece, and what was left out (pieces and occurrences).

    ``min_count``: keep pieces with ``count >= min_count``. ``max_pieces``: keep the first
    ``max_pieces`` of the ranking (count descending, then bytes ascending), so of pieces
    tied on the boundary count, those whose bytes sort first stay.
    """
    import pyarrow as pa

    n = wide.num_rows
    count = wide.column("count").to_numpy()
    keep = np.ones(n, dtype=bool)
    if min_count is not None:
        keep &= count >= min_count
    if max_pieces is not None and int(keep.sum()) > max_pieces:
        # Rows are sorted by bytes, so a stable sort on -count ranks ties by bytes.
        rank = np.argsort(-count, kind="stable")
        keep_rank = np.zeros(n, dtype=bool)
        kept = rank[keep[rank]][:max_pieces]
        keep_rank[kept] = True
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
    if not dropped:
        return wide, report
    return wide.filter(pa.array(keep)), report
