"""count: reduce the pretokenize shards → ``count/pieces.arrow``, ``count/lang_counts.arrow``
and ``count/stats.json``.

Format 2 (``dwstok.format_version`` in the schema metadata; docs/formats.md):

- ``pieces.arrow``: one row per unique piece, sorted by its bytes: ``piece: large_binary``,
  ``count: int64`` (all languages);
- ``lang_counts.arrow``: the per-language counts, sparse: ``row: int64`` (the piece's
  row in pieces.arrow), ``lang: uint16`` (index into ``dwstok.languages``, the sorted
  language codes), ``count: int64``, sorted by (row, lang), no zero counts.

Both are written in record batches of ``count_partitions.BATCH_ROWS`` rows as the
partitions reduce, so count never holds the output table (format 1 was one wide record
batch, a column per language: 8 bytes a piece for each of 33+ groups). Arrow's hash
group-by does the counting; sorting makes the bytes independent of thread scheduling.

``stats.json`` (for people and for ``train``): documents and bytes per language, Han
character counts (descending, then by code point), totals, skipped/replaced documents.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from dwstok.errors import InputError

from .arrow_compute import arrow_cast, grouped_sums
from .config import Config
from .count_partitions import auto_partitions, reduce_partitioned, write_pieces
from .executors import Executor
from .inputs import Inputs
from .lineage import built_with
from .manifest import (
    Manifest,
    Staging,
    Timer,
    hash_file,
    read_json,
    read_table,
    up_to_date,
    write_json,
)

STAGE = "count"
UPSTREAM = "pretokenize"
# The upstream result must have been built with this config in every section
# that shaped it (its own upstream's included).
UPSTREAM_KEYS = None
# ``count`` is in the hash only when it prunes (``Config.to_dict`` leaves it out otherwise).
CONFIG_KEYS = ("pattern", "count")
LANG_PREFIX = "lang:"
FORMAT_VERSION = 2
PIECES = "pieces.arrow"
LANG_COUNTS = "lang_counts.arrow"
# Fold the shards' rows into the running total once this many are pending.
COMPACT_ROWS = 8_000_000


def run(config: Config, inputs: Inputs, out_dir: str | Path, executor: Executor) -> Manifest:
    """Count unique pieces across all shards; write pieces.arrow and stats.json."""
    out_dir = Path(out_dir)
    # refuses pieces split or read under other config sections (PatternMismatchError)
    up_dir, up = inputs.upstream(UPSTREAM, config=config, keys=UPSTREAM_KEYS)
    config_hash = config.hash_of(*CONFIG_KEYS)
    inputs_hash = up.output_hash
    done = up_to_date(out_dir, STAGE, config_hash, inputs_hash)
    if done:
        return done
    staging = Staging(out_dir, STAGE, config_hash)

    parts = sorted(n for n in up.outputs if n.startswith("part-") and n.endswith(".arrow"))
    with Timer() as t_stats:
        stats = merge_stats([read_json(up_dir / n.replace(".arrow", ".json"))["stats"] for n in parts])
    langs = sorted(stats["docs_by_lang"])
    if stats["docs"] == 0:
        raise InputError("empty corpus: pretokenize found no documents")

    sizes = [up.outputs[n].bytes for n in parts]
    k = config.count.partitions or auto_partitions(sum(sizes))
    executor.progress.start(STAGE, total_bytes=sum(sizes), total_items=len(parts))
    with Timer() as t_reduce:
        reduced = reduce_partitioned(
            [up_dir / n for n in parts],
            langs,
            staging.dir / "_partitions",
            k=k,
            # Locally the partitions reduce on threads (Arrow's group-by and sort run
            # outside the GIL), so even a small corpus uses every worker; on Ray, as tasks.
            executor=executor if k > 1 else None,
            on_part=lambda n: executor.progress.advance(bytes=n, items=1),
            sizes=sizes,
            on_split_done=executor.progress.finish,
        )
    pruning = None

    def metadata(report):
        nonlocal pruning
        if report is not None:  # pruning is configured: record what it left out
            pruning = config.count.pruning() | {
                k: report[k] for k in ("unique_pieces_before", "pieces_dropped", "occurrences_dropped")
            }
        return {
            "dwstok.kind": "count-pieces",
            "dwstok.format_version": str(FORMAT_VERSION),
            "dwstok.pattern": config.pattern_string,
            "dwstok.languages": ",".join(langs),
        } | ({"dwstok.pruning": json.dumps(pruning, sort_keys=True)} if pruning else {})

    with Timer() as t_write:
        n_kept, _ = write_pieces(
            reduced,
            staging.dir / PIECES,
            staging.dir / LANG_COUNTS,
            metadata=metadata,
            min_count=config.count.min_count,
            max_pieces=config.count.max_pieces,
        )
        _remove_tree(staging.dir / "_partitions")
        if pruning:
            stats["pruning"] = pruning
        stats["unique_pieces"] = n_kept
        outputs = {
            PIECES: hash_file(staging.dir / PIECES),
            LANG_COUNTS: hash_file(staging.dir / LANG_COUNTS),
            "stats.json": write_json(staging.dir / "stats.json", stats),
        }
    m = Manifest(
        stage=STAGE,
        config_hash=config_hash,
        inputs_hash=inputs_hash,
        outputs=outputs,
        counts={
            "docs": stats["docs"],
            "bytes": stats["bytes"],
            "pieces": stats["pieces"],
            "unique_pieces": n_kept,
            "languages": len(langs),
            "han_chars": len(stats["han"]),
        },
        timings={"stats_s": t_stats.seconds, "reduce_s": t_reduce.seconds, "write_s": t_write.seconds},
        info={"pattern": config.pattern_string, "languages": langs, "partitions": k}
        | ({"pruning": pruning} if pruning else {}),
        inputs={UPSTREAM: {"dir": str(up_dir), "output_hash": up.output_hash}},
        built_with=built_with(config, CONFIG_KEYS, up.built_with),
    )
    return staging.commit(m)


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def merge_stats(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum per-shard stats; Han characters ordered by count (desc) then code point."""
    docs_by: Counter[str] = Counter()
    bytes_by: Counter[str] = Counter()
    han: Counter[str] = Counter()
    tot = {"docs": 0, "bytes": 0, "pieces": 0, "skipped": 0, "replaced": 0}
    for s in stats:
        for k in tot:
            tot[k] += int(s.get(k, 0))
        docs_by.update(s["docs_by_lang"])
        bytes_by.update(s["bytes_by_lang"])
        han.update(s["han"])
    han_sorted = dict(sorted(han.items(), key=lambda kv: (-kv[1], ord(kv[0]))))
    return {
        "docs": tot["docs"],
        "bytes": tot["bytes"],
        "pieces": tot["pieces"],
        "skipped_docs": tot["skipped"],
        "replaced_docs": tot["replaced"],
        "docs_by_lang": dict(sorted(docs_by.items())),
        "bytes_by_lang": dict(sorted(bytes_by.items())),
        "han_total": int(sum(han.values())),
        "han": han_sorted,
    }


def reduce_parts(paths: list[Path], langs: list[str], *, on_part=None, sizes=None):
    """(piece, lang_id, count) summed over every part, sorted by (piece, lang_id), all in
    memory. ``run`` uses ``count_partitions.reduce_partitioned``; this is its reference.

    Languages become small integer ids (index into the sorted ``langs``) before the
    group-by: cheaper keys, and sorting by id is sorting by name.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    value_set = pa.array(langs, pa.string())
    acc = None
    pending: list[Any] = []
    rows = 0
    for i, p in enumerate(paths):
        t = read_table(p)
        lid = pc.index_in(t.column("lang"), value_set=value_set).cast(pa.int32())
        pending.append(pa.table({"piece": t.column("piece"), "lang": lid, "count": t.column("count")}))
        rows += t.num_rows
        if rows > COMPACT_ROWS:
            acc = _group([acc, *pending] if acc is not None else pending)
            pending, rows = [], acc.num_rows
        if on_part:
            on_part(sizes[i] if sizes else 0)
    acc = _group([acc, *pending] if acc is not None else pending)
    return acc.sort_by([("piece", "ascending"), ("lang", "ascending")])


def _data_size(col) -> int:
    return sum(c.buffers()[2].size if c.buffers()[2] is not None else 0 for c in col.chunks)


def _group(tables):
    import pyarrow as pa

    # Arrow's hash group-by is several times faster on binary than on large_binary keys:
    # use binary whenever the pieces' bytes fit 32-bit offsets. Single-threaded: the
    # result is sorted next anyway, and threads only add contention.
    big = sum(_data_size(x.column("piece")) for x in tables) >= 2**31 - 1
    typ = pa.large_binary() if big else pa.binary()
    t = pa.concat_tables([x.set_column(0, "piece", arrow_cast(x.column("piece"), typ)) for x in tables])
    g = grouped_sums(t, ["piece", "lang"], "count")
    return pa.table({"piece": g.column("piece"), "lang": g.column("lang"), "count": g.column("count_sum")})


def pivot(table, langs: list[str]):
    """Long (piece, lang, count) sorted by piece → wide: one row per piece, a column per
    language. Vectorised: group ids from where the sorted piece changes, then one
    scatter per language."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = table.combine_chunks()
    n = table.num_rows
    piece = table.column("piece").chunk(0) if table.num_rows else pa.array([], pa.binary())
    if n == 0:
        cols = {"piece": piece, "count": pa.array([], pa.int64())}
        cols.update({LANG_PREFIX + g: pa.array([], pa.int64()) for g in langs})
        return pa.table(cols)
    new = np.ones(n, dtype=bool)
    if n > 1:
        new[1:] = pc.not_equal(piece.slice(1), piece.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    gid = np.cumsum(new) - 1
    n_unique = int(gid[-1]) + 1
    lang = table.column("lang").to_numpy()
    count = table.column("count").to_numpy()
    first = np.flatnonzero(new)
    cols = {"piece": piece.take(pa.array(first)), "count": pa.array(np.add.reduceat(count, first))}
    for i, g in enumerate(langs):
        col = np.zeros(n_unique, dtype=np.int64)
        m = lang == i
        col[gid[m]] = count[m]  # (piece, lang) rows are unique: a scatter, not a sum
        cols[LANG_PREFIX + g] = pa.array(col)
    return pa.table(cols)


def read_languages(path: str | Path) -> list[str]:
    """The language codes of a count/pieces.arrow file (its ``lang`` ids index them),
    checking its format version."""
    from dwstok.errors import ModelFileError

    meta = _schema(path).metadata or {}
    version = meta.get(b"dwstok.format_version", b"1").decode()
    if version != str(FORMAT_VERSION):
        raise ModelFileError(
            f"{path} is count format {version}, this dwstok reads format {FORMAT_VERSION}: "
            "run `dwstok count` again (with the same --workdir)"
        )
    langs = meta.get(b"dwstok.languages", b"").decode()
    return langs.split(",") if langs else []


def _schema(path: str | Path):
    import pyarrow as pa
    import pyarrow.ipc as ipc

    with pa.memory_map(str(path)) as src:
        return ipc.open_file(src).schema


def read_pieces(path: str | Path):
    """``(table, langs)``: a count/pieces.arrow file and its lang_counts.arrow as one wide
    table (``piece``, ``count``, a ``lang:<code>`` column per language), format 1's
    layout. Holds 8 bytes a piece per language: for tests and small corpora; ``train``
    reads the two files as they are."""
    import pyarrow as pa

    path = Path(path)
    langs = read_languages(path)
    pieces = read_table(path)
    long = read_table(path.with_name(LANG_COUNTS))
    n = pieces.num_rows
    cols = {"piece": pieces.column("piece").combine_chunks(), "count": pieces.column("count").combine_chunks()}
    row = long.column("row").to_numpy()
    lang = long.column("lang").to_numpy()
    count = long.column("count").to_numpy()
    for i, g in enumerate(langs):
        col = np.zeros(n, dtype=np.int64)
        m = lang == i
        col[row[m]] = count[m]
        cols[LANG_PREFIX + g] = pa.array(col)
    return pa.table(cols, metadata=pieces.schema.metadata), langs
