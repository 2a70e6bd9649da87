"""Token shards on disk: the format ``encode-shards`` writes and a memory-mapped reader.

Format ``dwstok-shard/1``: one uncompressed Arrow IPC *file* per input shard
(``part-NNNNN.arrow``), so that ``pa.memory_map`` exposes every buffer without a copy.

- column ``ids``: ``large_list<uint16>`` (``uint32`` when the vocabulary has more than
  65,536 ids), one list per document in corpus order. The list offsets (int64) are the
  document boundaries, and their differences are the per-document token counts.
- column ``lang`` (optional): the document's language group.
- schema metadata (UTF-8): ``dwstok.format``, ``dwstok.model_sha256``,
  ``dwstok.version``, ``dwstok.pattern``, ``dwstok.n_vocab``, ``dwstok.source``.

No specials are stored: training code adds ``<bos>``/``<eos>`` as it loads
(:meth:`ShardReader.batches`), so one set of shards serves any document framing.

>>> reader = ShardReader("work/32.3/shards")  # doctest: +SKIP
>>> reader.doc(0)[:5], reader.model_sha256, reader.version  # doctest: +SKIP
(array([ 1234,   290, ...], dtype=uint16), '5e1f…', '32.3')
>>> for batch in reader.batches(2048, 16, seed=0, bos_id=1):  # doctest: +SKIP
...     x, y = batch[:, :-1], batch[:, 1:]
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from .durable import sync_dir, sync_file
from .errors import InputError, ModelFileError

__all__ = ["FORMAT", "ShardReader", "ShardWriter", "read_meta", "shard_dtype", "write_shard"]

FORMAT = "dwstok-shard/1"
_META = ("format", "model_sha256", "version", "pattern", "n_vocab", "source")


def shard_dtype(n_vocab: int) -> np.dtype:
    """uint16 when every id fits (DWSLMTok's 32,768), else uint32."""
    return np.dtype(np.uint16) if n_vocab <= 65536 else np.dtype(np.uint32)


class ShardWriter:
    """Write one shard incrementally: ``write(ids, doc_offsets, lang)`` per batch of
    documents, then ``close()`` renames the finished file into place.

    Batches are buffered and written as record batches of at least ``flush_tokens``
    tokens, so a reader sees few segments; where they are cut depends only on the input,
    never on threads or workers. On an exception inside ``with``, nothing is left behind.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        model_sha256: str,
        version: str | None,
        pattern: str,
        n_vocab: int,
        with_lang: bool = False,
        source: str = "",
        flush_tokens: int = 1 << 23,
    ):
        self.path = Path(path)
        self.n_vocab = int(n_vocab)
        self.dtype = shard_dtype(self.n_vocab)
        self.with_lang = with_lang
        self.flush_tokens = flush_tokens
        fields = [pa.field("ids", pa.large_list(pa.from_numpy_dtype(self.dtype)))]
        if with_lang:
            fields.append(pa.field("lang", pa.string()))
        meta = {
            "dwstok.format": FORMAT,
            "dwstok.model_sha256": model_sha256,
            "dwstok.version": version or "",
            "dwstok.pattern": pattern,
            "dwstok.n_vocab": str(self.n_vocab),
            "dwstok.source": source,
        }
        self.schema = pa.schema(fields, metadata=meta)
        self._tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self._sink = pa.OSFile(str(self._tmp), "wb")
        # Uncompressed on purpose: compressed buffers could not be memory-mapped.
        self._writer = pa.ipc.new_file(self._sink, self.schema)
        self._pending: list[tuple[np.ndarray, np.ndarray, object]] = []
        self._pending_tokens = 0
        self.n_docs = 0
        self.n_tokens = 0

    def write(self, ids: np.ndarray, doc_offsets: np.ndarray, lang: pa.Array | None = None) -> None:
        """Append documents: ``ids`` flat, ``doc_offsets`` their n+1 bounds from 0."""
        ids = np.asarray(ids)
        offsets = np.ascontiguousarray(doc_offsets, dtype=np.int64)
        if offsets.ndim != 1 or offsets.size == 0 or offsets[0] != 0 or offsets[-1] != ids.size:
            raise ValueError("doc_offsets must run from 0 to len(ids)")
        if ids.size and int(ids.max()) >= self.n_vocab:
            raise ValueError(f"token id {int(ids.max())} out of range for n_vocab={self.n_vocab}")
        if (lang is not None) != self.with_lang:
            raise ValueError("lang must be given exactly when the writer was opened with_lang")
        if lang is not None and len(lang) != offsets.size - 1:
            raise ValueError("lang must have one entry per document")
        self._pending.append((ids.astype(self.dtype, copy=False), offsets, lang))
        self._pending_tokens += ids.size
        self.n_docs += offsets.size - 1
        self.n_tokens += ids.size
        if self._pending_tokens >= self.flush_tokens:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        parts = self._pending
        self._pending, self._pending_tokens = [], 0
        ids = np.concatenate([p[0] for p in parts]) if len(parts) > 1 else parts[0][0]
        offs = [parts[0][1]]
        base = parts[0][1][-1]
        for p in parts[1:]:
            offs.append(p[1][1:] + base)
            base += p[1][-1]
        offsets = np.concatenate(offs) if len(offs) > 1 else offs[0]
        cols = [pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(ids))]
        if self.with_lang:
            langs = [p[2] for p in parts]
            cols.append(pa.concat_arrays(langs).cast(pa.string()) if len(langs) > 1
                        else langs[0].cast(pa.string()))
        self._writer.write_batch(pa.record_batch(cols, schema=self.schema))

    def close(self) -> None:
        """Finish the file and rename it into place."""
        self._flush()
        self._writer.close()
        self._sink.close()
        sync_file(self._tmp)
        os.replace(self._tmp, self.path)
        sync_dir(os.path.dirname(os.path.abspath(self.path)))

    def abort(self) -> None:
        for c in (self._writer, self._sink):
            try:
                c.close()
            except Exception:  # noqa: BLE001 - already failing; just release the file
                pass
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_shard(
    path: str | os.PathLike,
    ids: np.ndarray,
    doc_offsets: np.ndarray,
    *,
    model_sha256: str,
    version: str | None,
    pattern: str,
    n_vocab: int,
    lang: pa.Array | None = None,
    source: str = "",
) -> int:
    """Write one whole shard (under a temporary name, renamed into place); return its size.

    ``ids`` are stored as :func:`shard_dtype`; ``doc_offsets`` (``n_docs + 1`` entries
    from 0 to ``len(ids)``) delimit the documents.
    """
    with ShardWriter(path, model_sha256=model_sha256, version=version, pattern=pattern,
                     n_vocab=n_vocab, with_lang=lang is not None, source=source) as w:
        w.write(ids, doc_offsets, lang)
    return Path(path).stat().st_size


def _read_meta(schema: pa.Schema, path: Path) -> dict[str, str]:
    raw = schema.metadata or {}
    meta = {k.decode()[len("dwstok."):]: v.decode() for k, v in raw.items()
            if k.startswith(b"dwstok.")}
    if meta.get("format") != FORMAT:
        raise ModelFileError(
            f"{path} is not a dwstok token shard (format {meta.get('format')!r}, "
            f"expected {FORMAT!r}); write it with `dwstok encode-shards`"
        )
    return meta


class ShardReader:
    """Read token shards zero-copy: ``len``, ``doc(i)``, iteration and training batches.

    ``source`` is a directory (its ``part-*.arrow`` files, in name order), one file, or
    a list of files. Every shard must come from the same model (same sha256).
    """

    def __init__(self, source: str | os.PathLike | Sequence[str | os.PathLike]):
        files = self._files(source)
        self.files: list[Path] = files
        self._maps = []
        self._values: list[np.ndarray] = []  # one flat token array per record batch
        lengths: list[np.ndarray] = []
        seg_docs: list[int] = []
        meta0: dict[str, str] | None = None
        for path in files:
            try:
                mm = pa.memory_map(str(path), "r")
                reader = pa.ipc.open_file(mm)
            except (OSError, pa.ArrowInvalid) as e:
                raise ModelFileError(f"cannot read token shard {path}: {e}") from e
            meta = _read_meta(reader.schema, path)
            if meta0 is None:
                meta0 = meta
            elif meta["model_sha256"] != meta0["model_sha256"]:
                raise ModelFileError(
                    f"{path} was encoded with model {meta['model_sha256'][:12]}, but "
                    f"{files[0]} with {meta0['model_sha256'][:12]}; mixed shards cannot be read together"
                )
            self._maps.append(mm)
            for b in range(reader.num_record_batches):
                col = reader.get_batch(b).column("ids")
                offs = col.offsets.to_numpy(zero_copy_only=True)
                vals = col.values.to_numpy(zero_copy_only=True)[offs[0]:offs[-1]]
                self._values.append(vals)
                lengths.append(np.diff(offs))
                seg_docs.append(len(col))
        if meta0 is None:
            raise InputError(f"no token shards (part-*.arrow) in {source}")
        self.meta = meta0
        self.doc_lengths: np.ndarray = (
            np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        ).astype(np.int64, copy=False)
        """Tokens in each document (int64)."""
        self._seg_doc_start = np.zeros(len(seg_docs) + 1, dtype=np.int64)
        np.cumsum(seg_docs, out=self._seg_doc_start[1:])
        self._seg_tok_start = np.zeros(len(self._values) + 1, dtype=np.int64)
        np.cumsum([v.size for v in self._values], out=self._seg_tok_start[1:])
        # global token offset of each document in the virtual concatenation of all shards
        self._doc_tok_start = np.zeros(len(self.doc_lengths) + 1, dtype=np.int64)
        np.cumsum(self.doc_lengths, out=self._doc_tok_start[1:])

    @staticmethod
    def _files(source) -> list[Path]:
        if isinstance(source, (str, os.PathLike)):
            p = Path(source)
            if p.is_dir():
                files = sorted(p.glob("part-*.arrow"))
                if not files:
                    raise InputError(f"no token shards (part-*.arrow) in {p}")
                return files
            if not p.exists():
                raise InputError(f"token shard {p} does not exist")
            return [p]
        files = [Path(s) for s in source]
        for p in files:
            if not p.exists():
                raise InputError(f"token shard {p} does not exist")
        if not files:
            raise InputError("no token shards given")
        return files

    def close(self) -> None:
        """Release the memory maps (views handed out earlier must not be used after)."""
        self._values.clear()
        for mm in self._maps:
            mm.close()
        self._maps.clear()

    def __enter__(self) -> ShardReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- metadata ------------------------------------------------------------------------
    @property
    def model_sha256(self) -> str:
        return self.meta["model_sha256"]

    @property
    def version(self) -> str | None:
        return self.meta["version"] or None

    @property
    def pattern(self) -> str:
        return self.meta["pattern"]

    @property
    def n_vocab(self) -> int:
        return int(self.meta["n_vocab"])

    @property
    def dtype(self) -> np.dtype:
        return shard_dtype(self.n_vocab)

    @property
    def n_tokens(self) -> int:
        return int(self._doc_tok_start[-1])

    # -- documents -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.doc_lengths)

    def doc(self, i: int) -> np.ndarray:
        """Token ids of document ``i``: a read-only view into the memory-mapped file."""
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"document {i} out of range (0..{n - 1})")
        i = int(i) % n
        g0, g1 = self._doc_tok_start[i], self._doc_tok_start[i + 1]
        s = int(np.searchsorted(self._seg_tok_start, g0, side="right") - 1)
        # an empty document at a segment's end belongs to that segment; either view is empty
        s = min(s, len(self._values) - 1)
        base = self._seg_tok_start[s]
        return self._values[s][g0 - base:g1 - base]

    __getitem__ = doc

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(len(self)):
            yield self.doc(i)

    def tokens(self, start: int, stop: int) -> np.ndarray:
        """Tokens ``[start, stop)`` of the concatenation of all documents (a copy)."""
        return self._gather(np.arange(start, stop, dtype=np.int64))

    def _gather(self, g: np.ndarray) -> np.ndarray:
        out = np.empty(g.shape, dtype=self.dtype)
        if g.size == 0:
            return out
        seg = np.searchsorted(self._seg_tok_start, g, side="right") - 1
        # one numpy gather per memory-mapped segment touched (not per token or document)
        for s in np.unique(seg):
            m = seg == s
            out[m] = self._values[s][g[m] - self._seg_tok_start[s]]
        return out

    # -- training batches ---------------------------------------------------------------
    def n_windows(self, seq_len: int, *, bos_id: int | None = None, eos_id: int | None = None) -> int:
        """How many ``seq_len + 1`` windows :meth:`batches` cuts from one epoch."""
        extra = (bos_id is not None) + (eos_id is not None)
        stream = self.n_tokens + extra * len(self)
        return max(0, (stream - 1) // seq_len)

    def batches(
        self,
        seq_len: int,
        batch_size: int,
        *,
        seed: int,
        epoch: int = 0,
        bos_id: int | None = None,
        eos_id: int | None = None,
        stochastok=None,
        rank: int = 0,
        world_size: int = 1,
        drop_last: bool = True,
        shuffle: bool = True,
    ) -> Iterator[np.ndarray]:
        """Shuffled ``(batch_size, seq_len + 1)`` arrays of ids for next-token training.

        All documents are concatenated (each framed by ``bos_id`` before and/or
        ``eos_id`` after, if given) and cut into windows of ``seq_len + 1`` ids at a
        stride of ``seq_len``, so inputs ``b[:, :-1]`` and targets ``b[:, 1:]`` cover
        every token once. Window order is a permutation drawn from ``(seed, epoch)``
        (corpus order with ``shuffle=False``, e.g. for evaluation); data-parallel rank
        ``r`` of ``world_size`` takes windows ``r, r + world_size, …`` of that order.

        ``stochastok`` (a :class:`dwstok.stochastok.StochasTok`) splits tokens of each
        window with a seed derived from ``(seed, epoch, window)``, then keeps the first
        ``seq_len + 1`` ids (the expansion pushes a few tail tokens out of that window).
        The same arguments always give the same batches.
        """
        if seq_len < 1 or batch_size < 1:
            raise ValueError("seq_len and batch_size must be >= 1")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} not in 0..{world_size - 1}")
        nb, ne = int(bos_id is not None), int(eos_id is not None)
        framed = self.doc_lengths + (nb + ne)
        doc_stream_start = np.zeros(len(framed) + 1, dtype=np.int64)
        np.cumsum(framed, out=doc_stream_start[1:])
        n_win = self.n_windows(seq_len, bos_id=bos_id, eos_id=eos_id)
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, int(epoch), 0x5EED])
        order = (rng.permutation(n_win) if shuffle else np.arange(n_win))[rank::world_size]
        width = seq_len + 1
        col = np.arange(width, dtype=np.int64)
        for b0 in range(0, len(order), batch_size):
            win = order[b0:b0 + batch_size]
            if len(win) < batch_size and drop_last:
                return
            pos = win[:, None] * seq_len + col[None, :]
            d = np.searchsorted(doc_stream_start, pos, side="right") - 1
            w = pos - doc_stream_start[d]
            L = self.doc_lengths[d]
            is_tok = (w >= nb) & (w < nb + L)
            out = np.empty(pos.shape, dtype=self.dtype)
            out[is_tok] = self._gather(self._doc_tok_start[d[is_tok]] + w[is_tok] - nb)
            if nb:
                out[w == 0] = bos_id
            if ne:
                out[w == nb + L] = eos_id
            if stochastok is not None:
                seeds = _window_seeds(seed, epoch, win)
                out = stochastok.rows(out, seeds)
            yield out


def _window_seeds(seed: int, epoch: int, windows: np.ndarray) -> np.ndarray:
    # Distinct, order-independent seeds per window; the kernel's splitmix64 scrambles them.
    base = (int(seed) * 0x9E3779B97F4A7C15 + int(epoch) * 0xD1B54A32D192ED03) & (2**64 - 1)
    return (np.uint64(base) + windows.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9))


def read_meta(path: str | os.PathLike) -> Mapping[str, str]:
    """The ``dwstok.*`` metadata of one shard file, without reading its data."""
    p = Path(path)
    try:
        with pa.memory_map(str(p), "r") as mm:
            return _read_meta(pa.ipc.open_file(mm).schema, p)
    except (OSError, pa.ArrowInvalid) as e:
        raise ModelFileError(f"cannot read token shard {p}: {e}") from e
