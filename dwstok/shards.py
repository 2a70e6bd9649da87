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
from typing import Any

import numpy as np
import pyarrow as pa

from .durable import sync_dir, sync_file
from .errors import InputError, ModelFileError, PatternMismatchError
from .stochastok import NO_SPLITS, epoch_key
from .windows import Layout, count_extras, fill, stream_starts

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
    try:
        if int(meta.get("n_vocab", "")) < 1:
            raise ValueError
    except ValueError:
        raise ModelFileError(
            f"token shard {path} has a bad n_vocab {meta.get('n_vocab')!r} in its metadata; "
            "the file is corrupt: encode it again with `dwstok encode-shards`"
        ) from None
    return meta


def _model_sha256(expect_model) -> str:
    if isinstance(expect_model, str):
        return expect_model
    sha = getattr(expect_model, "sha256", None)
    if not isinstance(sha, str):
        raise TypeError(f"expect_model must be a Tokenizer or a model sha256, got {expect_model!r}")
    return sha


def _corrupt(path: Path, what: str) -> ModelFileError:
    return ModelFileError(
        f"token shard {path} is corrupt: {what}; encode it again with `dwstok encode-shards`"
    )


def _check_segment(path: Path, batch: int, col: pa.Array, n_vocab: int, dtype: np.dtype,
                   check_ids: bool) -> tuple[np.ndarray, np.ndarray]:
    """The document offsets and ids of one record batch, after checks that cost one
    vectorized pass: offsets that fit the ids, ids below ``n_vocab``."""
    want = pa.large_list(pa.from_numpy_dtype(dtype))
    if col.type != want:
        raise _corrupt(path, f"its ids are {col.type}, but a model of {n_vocab:,} ids writes {want}")
    if col.null_count:
        raise _corrupt(path, f"record batch {batch} has {col.null_count} null documents")
    offs = col.offsets.to_numpy(zero_copy_only=True)
    every = col.values.to_numpy(zero_copy_only=True)
    if offs.size and (offs[0] < 0 or offs[-1] > every.size or (np.diff(offs) < 0).any()):
        raise _corrupt(path, f"record batch {batch} has document offsets that do not fit its "
                             f"{every.size:,} ids")
    vals = every[offs[0]:offs[-1]] if offs.size else every[:0]
    if check_ids and vals.size and n_vocab <= np.iinfo(dtype).max:
        top = int(vals.max())
        if top >= n_vocab:
            at = int(np.argmax(vals >= n_vocab))
            doc = int(np.searchsorted(offs, offs[0] + at, side="right")) - 1
            raise _corrupt(path, f"id {top} in record batch {batch}, document {doc}, is out of "
                                 f"range for its model's n_vocab={n_vocab:,}")
    return offs, vals


class ShardReader:
    """Read token shards zero-copy: ``len``, ``doc(i)``, iteration and training batches.

    ``source`` is a directory (its ``part-*.arrow`` files, in name order), one file, or
    a list of files. Every shard must come from the same model (same sha256); with
    ``expect_model`` (a :class:`dwstok.Tokenizer` or a model's sha256) it must be that
    one, since ids decoded with another vocabulary give plausible-looking garbage.

    Opening checks each record batch once, with one vectorized pass: document offsets
    that fit, ids below ``n_vocab`` (a :class:`~dwstok.errors.ModelFileError` naming the
    file otherwise). A reader pickles as its file list and reopens its memory maps when
    unpickled, so it can go to ``spawn``-started data-loader workers.
    """

    def __init__(
        self,
        source: str | os.PathLike | Sequence[str | os.PathLike],
        *,
        expect_model: str | Any | None = None,
        check_ids: bool = True,
    ):
        files = self._files(source)
        self.files: list[Path] = files
        self._maps = []
        self._values: list[np.ndarray] = []  # one flat token array per record batch
        self._epoch: tuple | None = None
        self._layout: Layout | None = None
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
                if expect_model is not None and meta["model_sha256"] != _model_sha256(expect_model):
                    mm.close()
                    want = _model_sha256(expect_model)
                    raise PatternMismatchError(
                        f"token shard {path} was encoded with model {meta['model_sha256'][:16]}…"
                        f" (version {meta.get('version') or '?'}), not the expected {want[:16]}…;"
                        " encode the corpus again with this model (`dwstok encode-shards`),"
                        " or train with the model the shards were made with"
                    )
            elif meta["model_sha256"] != meta0["model_sha256"]:
                mm.close()
                raise ModelFileError(
                    f"{path} was encoded with model {meta['model_sha256'][:12]}, but "
                    f"{files[0]} with {meta0['model_sha256'][:12]}; mixed shards cannot be read together"
                )
            self._maps.append(mm)
            n_vocab = int(meta["n_vocab"])
            for b in range(reader.num_record_batches):
                try:
                    col = reader.get_batch(b).column("ids")
                except (KeyError, pa.ArrowException) as e:
                    raise _corrupt(path, f"record batch {b} cannot be read ({e})") from e
                offs, vals = _check_segment(path, b, col, n_vocab, shard_dtype(n_vocab), check_ids)
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

    def __getstate__(self) -> dict[str, Any]:
        # Memory maps cannot cross processes: a copy is the file list, reopened on load
        # and pinned to the same model. The ids were checked when this reader opened.
        return {"files": [str(f) for f in self.files], "model_sha256": self.model_sha256}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["files"], expect_model=state["model_sha256"], check_ids=False)

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

    def _slices(self, lo: int, hi: int) -> list[np.ndarray]:
        """Tokens ``[lo, hi)`` as views, one per segment they span."""
        starts = self._seg_tok_start
        s = int(np.searchsorted(starts, lo, side="right")) - 1
        out = []
        while lo < hi:
            end = min(hi, int(starts[s + 1]))
            if end > lo:
                out.append(self._values[s][lo - starts[s]:end - starts[s]])
                lo = end
            s += 1
        return out

    # -- training batches ---------------------------------------------------------------
    def _stream(self, *, n_bos: int, n_eos: int, stochastok, seed, epoch: int):
        """``(chunk stream starts, split key, kernel args)`` of one epoch, kept for the
        last epoch asked (the StochasTok count is one pass over every token)."""
        active = stochastok is not None and stochastok.active
        if active and seed is None:
            raise ValueError("with stochastok, give the seed (and epoch) of the batches: "
                             "the splits, and so the epoch's length, depend on them")
        if self._layout is None:
            self._layout = Layout.build(self._doc_tok_start)
        if active:
            st = stochastok
            ident = (st.table.start, st.table.left, st.p, st.iterations, int(seed), int(epoch))
            key, args = epoch_key(seed, epoch), st.kernel_args()
        else:
            ident, key, args = None, 0, NO_SPLITS
        cached = self._epoch
        if cached is not None and _same(cached[0], ident) and cached[1] == (n_bos, n_eos):
            return cached[2], key, args
        if cached is not None and _same(cached[0], ident):
            extras = cached[3]
        elif active:
            segments = zip(self._seg_tok_start[:-1].tolist(), self._values)
            extras = count_extras(self._layout, segments, key, args)
        else:
            extras = np.zeros(len(self._layout.chunk_start), dtype=np.int64)
        q = stream_starts(self._layout, extras, n_bos=n_bos, n_eos=n_eos)
        self._epoch = (ident, (n_bos, n_eos), q, extras)
        return q, key, args

    def _plan(self, seq_len, *, bos_id, eos_id, stochastok, seed, epoch, world_size):
        if seq_len < 1:
            raise ValueError("seq_len must be >= 1")
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        q, key, args = self._stream(n_bos=int(bos_id is not None), n_eos=int(eos_id is not None),
                                    stochastok=stochastok, seed=seed, epoch=epoch)
        n_all = max(0, (int(q[-1]) - 1) // seq_len)
        return n_all, n_all // world_size, q, key, args

    def n_windows(
        self,
        seq_len: int,
        *,
        bos_id: int | None = None,
        eos_id: int | None = None,
        stochastok=None,
        seed: int | None = None,
        epoch: int = 0,
        world_size: int = 1,
    ) -> int:
        """How many ``seq_len + 1`` windows one epoch of :meth:`batches` serves, over all
        ranks: every full window of the stream, less the ``n % world_size`` trimmed so
        that every rank gets as many. With ``stochastok``, the epoch's splits make the
        stream longer, so give the ``seed`` and ``epoch`` of the batches."""
        _, per_rank, _, _, _ = self._plan(seq_len, bos_id=bos_id, eos_id=eos_id,
                                          stochastok=stochastok, seed=seed, epoch=epoch,
                                          world_size=world_size)
        return per_rank * world_size

    def n_batches(
        self,
        seq_len: int,
        batch_size: int,
        *,
        bos_id: int | None = None,
        eos_id: int | None = None,
        stochastok=None,
        seed: int | None = None,
        epoch: int = 0,
        world_size: int = 1,
        drop_last: bool = True,
    ) -> int:
        """How many batches :meth:`batches` yields on each rank (the same on every rank)."""
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        _, per_rank, _, _, _ = self._plan(seq_len, bos_id=bos_id, eos_id=eos_id,
                                          stochastok=stochastok, seed=seed, epoch=epoch,
                                          world_size=world_size)
        return per_rank // batch_size if drop_last else -(-per_rank // batch_size)

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
        start_batch: int = 0,
    ) -> Iterator[np.ndarray]:
        """Shuffled ``(batch_size, seq_len + 1)`` arrays of ids for next-token training.

        All documents are concatenated (each framed by ``bos_id`` before and/or
        ``eos_id`` after, if given) and cut into windows of ``seq_len + 1`` ids at a
        stride of ``seq_len``, so inputs ``b[:, :-1]`` and targets ``b[:, 1:]`` cover
        every token once; only the final partial window is left out.

        ``stochastok`` (a :class:`dwstok.stochastok.StochasTok`) splits the tokens of
        the stream *before* it is cut, each with a seed drawn from ``(seed, epoch)`` and
        its position, so every canonical token is in exactly one window, as its pieces;
        the epoch gets longer instead (by about ``p`` times the share of tokens that
        can split).

        Window order is a permutation drawn from ``(seed, epoch)`` (stream order with
        ``shuffle=False``, e.g. for evaluation). The last ``n % world_size`` windows of
        that order are trimmed (the same ones on every rank), then data-parallel rank
        ``r`` of ``world_size`` takes windows ``r, r + world_size, …``: every rank gets
        :meth:`n_batches` batches, with or without ``drop_last`` (which drops a final
        batch of fewer than ``batch_size`` windows, the same size on every rank).

        ``start_batch=k`` resumes at batch ``k`` in constant time: it yields what
        skipping ``k`` batches would. The same arguments always give the same batches.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} not in 0..{world_size - 1}")
        if start_batch < 0:
            raise ValueError(f"start_batch must be >= 0, got {start_batch}")
        n_all, per_rank, q, key, args = self._plan(
            seq_len, bos_id=bos_id, eos_id=eos_id, stochastok=stochastok, seed=seed,
            epoch=epoch, world_size=world_size)
        used = per_rank * world_size
        if shuffle:
            rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, int(epoch), 0x5EED])
            order = rng.permutation(n_all)[:used]
        else:
            order = np.arange(used, dtype=np.int64)
        mine = order[rank::world_size]
        n_batches = per_rank // batch_size if drop_last else -(-per_rank // batch_size)
        layout = self._layout
        frame = dict(bos=-1 if bos_id is None else int(bos_id),
                     eos=-1 if eos_id is None else int(eos_id),
                     n_bos=int(bos_id is not None), n_eos=int(eos_id is not None))
        for b in range(start_batch, n_batches):
            yield self._windows(mine[b * batch_size:(b + 1) * batch_size], seq_len, q, layout,
                                key, args, frame)

    def _windows(self, win, seq_len, q, layout, key, args, frame) -> np.ndarray:
        width = seq_len + 1
        pos = win.astype(np.int64) * seq_len
        chunks = np.searchsorted(q, pos, side="right") - 1
        skips = pos - q[chunks]
        lo = layout.chunk_start[chunks]
        # a window needs at most skip + width canonical tokens: a token is >= 1 stream id
        hi = np.minimum(lo + skips + width, self.n_tokens)
        parts: list[np.ndarray] = []
        tok_off = np.zeros(len(win), dtype=np.int64)
        n = 0
        for w in range(len(win)):
            tok_off[w] = n
            for view in self._slices(int(lo[w]), int(hi[w])):
                parts.append(view)
                n += view.size
        tok = np.concatenate(parts) if parts else np.zeros(0, self.dtype)
        out = np.empty((len(win), width), dtype=self.dtype)
        fill(out, tok, tok_off, chunks, skips, layout, key=key, kernel_args=args, **frame)
        return out


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return all(x is y if isinstance(x, np.ndarray) else x == y for x, y in zip(a, b))


def read_meta(path: str | os.PathLike) -> Mapping[str, str]:
    """The ``dwstok.*`` metadata of one shard file, without reading its data."""
    p = Path(path)
    try:
        with pa.memory_map(str(p), "r") as mm:
            return _read_meta(pa.ipc.open_file(mm).schema, p)
    except (OSError, pa.ArrowInvalid) as e:
        raise ModelFileError(f"cannot read token shard {p}: {e}") from e
