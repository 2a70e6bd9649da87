"""Everything around the merge learner: weights, forced Han merges, counting, ``train_bpe``.

The kernel that learns merges from weighted pieces is ``dwstok.merge_learner``; this
module prepares its input and turns its merges into a ``Tokenizer``.

- ``lang_weights``: per-language pair-count weights as fixed-point integers.
- ``han_forced_merges``: the forced Han merges (DWSLM 32.2) from Han character counts.
- ``build_tokenizer``: merges -> a ``Tokenizer`` in the DWSLMTok id layout
  (specials ``0..k-1``, byte ``b`` at ``k + b``, merge ``i`` at ``k + 256 + i``).
- ``train_bpe``: the small-corpus entry point (pretokenize, count, train in-process).

>>> tok = train_bpe(["aaabdaaabac"], 259)
>>> tok.merges
[(b'a', b'a'), (b'aa', b'a'), (b'aaa', b'b')]
>>> tok.encode("aaabdaaabac")
[258, 100, 258, 97, 99]
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import math
import os
import re
from pathlib import Path
from typing import Any, Iterator, Mapping, NamedTuple, Sequence

import numpy as np

from .errors import ConfigError, InputError
from .limits import MAX_IDS
from .merge_learner import learn_merges

LANG_WEIGHT_SCALE = 1 << 20
"""Fixed point of ``lang_weights``: a weight of 1.0 is ``LANG_WEIGHT_SCALE``."""

_CHUNK_BYTES = 1 << 25  # text per pretokenize/count batch in train_bpe


# ---------------------------------------------------------------------------- weights


def lang_weights(bytes_by_lang: Mapping[str, int], alpha: float) -> dict[str, int]:
    """Per-group pair-count weights ``w_g = (q_g^α / Σ_h q_h^α) / q_g``, fixed point.

    ``q_g`` is group g's share of the bytes. The result is ``round(w_g * 2**20)``
    (``LANG_WEIGHT_SCALE``); with ``α = 1`` every group gets exactly ``2**20``, so the
    weighted counts are the plain counts times a constant and training is unchanged.
    Groups with no bytes get 0.

    >>> lang_weights({"en": 900, "fr": 100}, 1.0)
    {'en': 1048576, 'fr': 1048576}
    >>> w = lang_weights({"en": 900, "fr": 100}, 0.5); w["fr"] > w["en"]
    True
    """
    alpha = float(alpha)
    if not math.isfinite(alpha) or alpha < 0:
        raise ConfigError(f"balance alpha must be a finite number >= 0, got {alpha}")
    sizes = {g: int(n) for g, n in bytes_by_lang.items()}
    if any(n < 0 for n in sizes.values()):
        raise ConfigError("bytes_by_lang has a negative byte count")
    total = sum(sizes.values())
    out = {g: 0 for g in sizes}
    if total == 0:
        return out
    live = {g: n / total for g, n in sizes.items() if n > 0}
    if alpha == 1.0:
        return {g: (LANG_WEIGHT_SCALE if g in live else 0) for g in sizes}
    norm = sum(q**alpha for q in live.values())
    for g, q in live.items():
        out[g] = int(round((q**alpha / norm) / q * LANG_WEIGHT_SCALE))
    return out


# ---------------------------------------------------------------------------- Han


class HanPlan(NamedTuple):
    merges: list[tuple[bytes, bytes]]
    """Forced merges in order: each character's missing prefix merges, then its own."""
    chars: list[str]
    """The characters forced, most frequent first."""
    n_chars: int
    n_merges: int
    coverage: float
    """Share of all Han occurrences that the forced characters account for."""


def han_forced_merges(
    han_counts: Mapping[str, int], *, coverage: float | None = None, count: int | None = None
) -> HanPlan:
    """Plan the forced Han merges: by a coverage target or a fixed number of characters.

    Characters go by descending count, then code point. Each adds the merges that build
    its UTF-8 bytes left to right (``(b0, b1)``, ``(b0b1, b2)``, ...), skipping prefixes
    an earlier character already made.

    >>> plan = han_forced_merges({"的": 5, "一": 3, "是": 1}, coverage=0.8)
    >>> plan.chars, plan.n_merges, round(plan.coverage, 3)
    (['的', '一'], 4, 0.889)
    >>> plan.merges[:2]
    [(b'\\xe7', b'\\x9a'), (b'\\xe7\\x9a', b'\\x84')]
    """
    if coverage is not None and count is not None:
        raise ConfigError("give the Han plan a coverage or a count, not both")
    if coverage is not None and not (0.0 <= float(coverage) <= 1.0):
        raise ConfigError(f"han coverage must be between 0 and 1, got {coverage}")
    if count is not None and int(count) < 0:
        raise ConfigError(f"han count must be >= 0, got {count}")
    items = []
    for ch, n in han_counts.items():
        if len(ch) != 1:
            raise ConfigError(f"Han counts must be keyed by single characters, got {ch!r}")
        if int(n) > 0:
            items.append((ch, int(n)))
    items.sort(key=lambda kv: (-kv[1], ord(kv[0])))
    total = sum(n for _, n in items)
    if count is not None:
        k = min(int(count), len(items))
    elif coverage is not None:
        k, acc = 0, 0
        target = float(coverage) * total
        while k < len(items) and acc < target:
            acc += items[k][1]
            k += 1
    else:
        k = 0
    chars = [ch for ch, _ in items[:k]]
    known = {bytes([b]) for b in range(256)}
    merges: list[tuple[bytes, bytes]] = []
    for ch in chars:
        raw = ch.encode("utf-8")
        for j in range(2, len(raw) + 1):
            if raw[:j] not in known:
                merges.append((raw[: j - 1], raw[j - 1 : j]))
                known.add(raw[:j])
    covered = sum(n for _, n in items[:k])
    return HanPlan(merges, chars, len(chars), len(merges), covered / total if total else 0.0)


@functools.cache
def han_pattern():
    """What the build calls Han: the ``regex`` module's ``\\p{Han}``, compiled once
    (``regex`` imported only here: 10 ms that a process's start need not wait for).

    >>> bool(han_pattern().fullmatch("一")), bool(han_pattern().fullmatch("。"))
    (True, False)
    """
    import regex

    return regex.compile(r"\p{Han}")


def han_char_counts(data, offsets, weights) -> dict[str, int]:
    """Weighted Han character counts over pieces in Arrow's binary layout.

    Han is the ``regex`` module's ``\\p{Han}``. Vectorised: code points are decoded at
    every 3- and 4-byte lead byte; only the distinct ones meet ``regex``.

    >>> han_char_counts(b"\\xe4\\xb8\\x80a\\xe4\\xb8\\x80", [0, 4, 7], [2, 1])
    {'一': 3}
    """
    data = np.frombuffer(data, np.uint8) if isinstance(data, (bytes, bytearray)) else np.asarray(data)
    offsets = np.asarray(offsets, np.int64)
    weights = np.asarray(weights, np.int64)
    b = data.astype(np.int64)
    n = b.shape[0]
    lead3 = np.flatnonzero((b[: max(n - 2, 0)] & 0xF0) == 0xE0)
    lead4 = np.flatnonzero((b[: max(n - 3, 0)] & 0xF8) == 0xF0)
    cp3 = ((b[lead3] & 0x0F) << 12) | ((b[lead3 + 1] & 0x3F) << 6) | (b[lead3 + 2] & 0x3F)
    cp4 = (
        ((b[lead4] & 0x07) << 18)
        | ((b[lead4 + 1] & 0x3F) << 12)
        | ((b[lead4 + 2] & 0x3F) << 6)
        | (b[lead4 + 3] & 0x3F)
    )
    cps = np.concatenate([cp3, cp4])
    where = np.concatenate([lead3, lead4])
    keep = cps >= 0x2E80  # no Han character lies below CJK Radicals Supplement
    cps, where = cps[keep], where[keep]
    if cps.size == 0:
        return {}
    w = weights[np.searchsorted(offsets, where, side="right") - 1]
    order = np.argsort(cps, kind="stable")
    cps, w = cps[order], w[order]
    starts = np.flatnonzero(np.r_[True, cps[1:] != cps[:-1]])
    sums = np.add.reduceat(w, starts)
    han = han_pattern()
    out = {}
    for cp, s in zip(cps[starts].tolist(), sums.tolist()):
        if han.fullmatch(chr(cp)) and s > 0:
            out[chr(cp)] = int(s)
    return out


# ---------------------------------------------------------------------------- Tokenizer


def build_tokenizer(
    merges: Sequence[tuple[bytes, bytes]],
    *,
    special_tokens: Sequence[str] = (),
    pattern: str = "o200k",
    version: str | None = None,
    metadata: Mapping[str, Any] | None = None,
):
    """A ``Tokenizer`` in the DWSLMTok layout: specials, then the 256 bytes, then merges.

    >>> tok = build_tokenizer([(b"a", b"b")], special_tokens=["<pad>"])
    >>> tok.encode("ab"), tok.vocab[1 + ord("a")]
    ([257], b'a')
    """
    from .tokenizer import Tokenizer

    specials = list(special_tokens)
    if len(set(specials)) != len(specials) or any(not isinstance(s, str) or not s for s in specials):
        raise ConfigError(f"special tokens must be distinct non-empty strings: {specials!r}")
    k = len(specials)
    vocab: dict[int, bytes] = {k + b: bytes([b]) for b in range(256)}
    for i, (a, b) in enumerate(merges):
        vocab[k + 256 + i] = bytes(a) + bytes(b)
    return Tokenizer.from_vocab_merges(
        vocab,
        [(bytes(a), bytes(b)) for a, b in merges],
        special_tokens={name: i for i, name in enumerate(specials)},
        pattern=pattern,
        version=version,
        metadata=dict(metadata) if metadata is not None else None,
    )


def model_content(
    merges: Sequence[tuple[bytes, bytes]],
    *,
    special_tokens: Sequence[str] = (),
    pattern: str = "o200k",
    version: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The model file's content for ``build_tokenizer``'s model, without building it.

    Equal to ``build_tokenizer(...)._content()`` (a test holds them together), at a
    fraction of the cost: ``train`` only writes the model, so it need not build the
    encoder's tables. A merge whose bytes an earlier token already has keeps its own id
    (``k + 256 + i``), and later merges refer to the earlier token, as
    ``Tokenizer.from_vocab_merges`` numbers them.

    >>> c = model_content([(b"a", b"b")], special_tokens=["<pad>"])
    >>> c["n_vocab"], c["vocab"][-1], c["merges"]
    (258, [257, 'ab'], [[98, 99, 257]])
    """
    builder = ModelBuilder(special_tokens)
    builder.add(0, merges)
    return builder.content(pattern=pattern, version=version, metadata=metadata)


class ModelBuilder:
    """``model_content``, a batch of merges at a time: the train stage hands it the
    merges as the learner makes them (``learn_merges(on_merges=builder.add)``), so the
    rows of the file and their JSON are made while the learner runs, on the CPU it
    leaves idle, and ``content()`` and ``rows()`` only join them.

    >>> b = ModelBuilder(["<pad>"])
    >>> b.add(0, [(b"a", b"b")]); b.add(1, [(b"ab", b"c")])
    >>> c = b.content()
    >>> c == model_content([(b"a", b"b"), (b"ab", b"c")], special_tokens=["<pad>"]), c["merges"][-1]
    (True, [257, 100, 258])
    """

    def __init__(self, special_tokens: Sequence[str] = ()):
        specials = list(special_tokens)
        if len(set(specials)) != len(specials) or any(not isinstance(s, str) or not s for s in specials):
            raise ConfigError(f"special tokens must be distinct non-empty strings: {specials!r}")
        self._specials = specials
        self._reset()

    def _reset(self) -> None:
        from . import model_file

        k = len(self._specials)
        self._tokens = [bytes([b]) for b in range(256)]
        self._first = {t: k + i for i, t in enumerate(self._tokens)}
        self._vocab: list = []
        self._triples: list = []
        self._parts: dict[str, list] = {"vocab": [], "merges": []}  # (rows text, canonical JSON) a batch
        self._add_rows([[k + i, model_file.token_text(t)] for i, t in enumerate(self._tokens)], [])

    def __len__(self) -> int:
        """How many merges it has."""
        return len(self._triples)

    def add(self, first: int, merges: Sequence[tuple[bytes, bytes]]) -> None:
        """Merges ``first``, ``first + 1``, ... of the model. ``first`` is ``len(self)``,
        or 0 to start over (the learner found, at the end, that it had read a merge too
        early); anything else is a ValueError."""
        from . import model_file

        if first != len(self):
            if first != 0:
                raise ValueError(f"merges from {first} given to a builder of {len(self)}")
            self._reset()
        k = len(self._specials)
        tokens, lookup, text = self._tokens, self._first, model_file.token_text
        vocab, triples = [], []
        for i, (a, b) in enumerate(merges, len(self)):
            a, b = bytes(a), bytes(b)
            if a not in lookup or b not in lookup:
                raise ConfigError(f"merge {i} ({a!r}, {b!r}) uses a token no earlier merge made")
            ab = a + b
            new = k + 256 + i
            tokens.append(ab)
            lookup.setdefault(ab, new)
            vocab.append([new, text(ab)])
            triples.append([lookup[a], lookup[b], new])
        self._add_rows(vocab, triples)

    def _add_rows(self, vocab: list, triples: list) -> None:
        from . import model_file

        self._vocab += vocab
        self._triples += triples
        for key, rows in (("vocab", vocab), ("merges", triples)):
            if rows:
                self._parts[key].append((model_file.rows_text(rows), model_file.canonical_rows(rows)))

    def content(self, *, pattern: str = "o200k", version: str | None = None, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The model file's content, as ``model_content`` makes it."""
        from . import model_file
        from .patterns import resolve

        pattern_name, pattern_string = resolve(pattern)
        c = {
            "format": model_file.FORMAT,
            "format_version": model_file.FORMAT_VERSION,
            "version": version,
            "pattern_name": pattern_name,
            "pattern": pattern_string,
            "merge_rule": "merges",
            "n_vocab": len(self._specials) + len(self._tokens),
            "specials": {name: i for i, name in enumerate(self._specials)},
            "metadata": dict(metadata) if metadata is not None else {},
            "vocab": self._vocab,
            "merges": self._triples,
        }
        canonical = {key: model_file.join_canonical([j for _, j in parts]) for key, parts in self._parts.items()}
        c["sha256"] = model_file.content_hash(c, canonical)
        return c

    def rows(self) -> dict[str, str]:
        """The text of the vocab's and the merges' rows, for ``model_file.write``."""
        return {key: ",\n".join(t for t, _ in parts) for key, parts in self._parts.items()}


# ---------------------------------------------------------------------------- reading


def _read_path(path: Path, with_lang: bool) -> Iterator[tuple[list[str], list[str] | None]]:
    """Yield (texts, langs) batches from a .txt, .jsonl[.gz|.zst] or .parquet file."""
    name = path.name.lower()
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        cols = pf.schema_arrow.names
        if "text" not in cols:
            raise InputError(f"{path}: no 'text' column (columns: {', '.join(cols)})")
        want = ["text"] + (["lang"] if with_lang and "lang" in cols else [])
        for batch in pf.iter_batches(batch_size=4096, columns=want):
            texts = batch.column("text").to_pylist()
            langs = batch.column("lang").to_pylist() if "lang" in want else None
            yield texts, langs
        return
    if name.endswith((".jsonl", ".jsonl.gz", ".jsonl.zst", ".ndjson")):
        if name.endswith(".gz"):
            fh = io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
        elif name.endswith(".zst"):
            import zstandard

            fh = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(open(path, "rb")), encoding="utf-8")
        else:
            fh = open(path, encoding="utf-8")
        with fh:
            texts: list[str] = []
            langs: list[str] = []
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                    text = doc["text"]
                except (json.JSONDecodeError, KeyError, TypeError) as e:
                    raise InputError(f"{path}:{lineno}: not a JSON object with a 'text' field ({e})") from None
                texts.append(text)
                langs.append(str(doc.get("lang", "")))
                if len(texts) == 4096:
                    yield texts, (langs if with_lang else None)
                    texts, langs = [], []
            if texts:
                yield texts, (langs if with_lang else None)
        return
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 ({e})") from None
    yield [text], None


def _documents(source, lang, with_lang: bool) -> Iterator[tuple[list[str], list[str] | None]]:
    if isinstance(source, (str, os.PathLike)):
        if isinstance(source, str) and not os.path.exists(source) and not source.endswith(
            (".txt", ".jsonl", ".parquet", ".gz", ".zst")
        ):
            raise InputError(f"{source!r}: no such file (pass a list of strings to train on text)")
        yield from _read_path(Path(source), with_lang)
        return
    items = list(source) if not isinstance(source, list) else source
    if items and all(isinstance(x, (str, os.PathLike)) and not isinstance(x, str) for x in items):
        for p in items:
            yield from _read_path(Path(p), with_lang)
        return
    if items and all(isinstance(x, str) for x in items) and lang is None and all(
        os.path.isfile(x) for x in items
    ):
        for p in items:
            yield from _read_path(Path(p), with_lang)
        return
    if not all(isinstance(x, str) for x in items):
        raise InputError("source must be a path, a list of paths or an iterable of str")
    if isinstance(lang, str):
        langs = [lang] * len(items)
    elif lang is not None:
        langs = [str(g) for g in lang]
        if len(langs) != len(items):
            raise ConfigError(f"lang has {len(langs)} entries for {len(items)} documents")
    else:
        langs = None
    for i in range(0, len(items), 4096):
        yield items[i : i + 4096], (langs[i : i + 4096] if langs is not None and with_lang else None)


# ---------------------------------------------------------------------------- counting


def _pieces_of_batch(texts, langs, scanner, special_re):
    """(data, piece offsets, lang of each piece or None) for a batch of documents."""
    from .scanner import scan_segments

    raw = [t.encode("utf-8") for t in texts]
    data = np.frombuffer(b"".join(raw), np.uint8)
    doc_end = np.cumsum([len(r) for r in raw], dtype=np.int64)
    doc_start = doc_end - np.array([len(r) for r in raw], np.int64)
    if special_re is not None and data.size:
        spans = np.array([m.span() for m in special_re.finditer(data.tobytes())], np.int64).reshape(-1, 2)
        if spans.size:
            # A match across a document boundary is an artefact of the concatenation.
            d0 = np.searchsorted(doc_end, spans[:, 0], side="right")
            d1 = np.searchsorted(doc_end, spans[:, 1] - 1, side="right")
            spans = spans[d0 == d1]
        keep = np.ones(data.size, bool)
        if spans.size:
            cover = np.zeros(data.size + 1, np.int64)
            np.add.at(cover, spans[:, 0], 1)
            np.add.at(cover, spans[:, 1], -1)
            keep = np.cumsum(cover[:-1]) == 0
        # Text resumes at document starts and after specials, and stops before specials
        # and at document ends; the two sorted lists pair up into segments.
        resume = np.sort(np.concatenate([doc_start, spans[:, 1]]))
        stop = np.sort(np.concatenate([spans[:, 0], doc_end]))
        doc_of_seg = np.searchsorted(doc_end, resume, side="right")
        # Map to the buffer with the specials cut out.
        shift = np.concatenate([[0], np.cumsum(~keep)])
        resume, stop = resume - shift[resume], stop - shift[stop]
        data = data[keep]
    else:
        resume, stop = doc_start, doc_end
        doc_of_seg = np.arange(len(raw))
    seg_len = stop - resume
    seg_bounds = np.concatenate([[0], np.cumsum(seg_len)]).astype(np.int64)
    if scanner.is_native:
        out = np.empty(data.size + 2, np.int64)
        per_seg = np.zeros(max(len(seg_len), 1), np.int64)
        n = scan_segments(scanner.kind, data, seg_bounds, scanner.table, out, per_seg)
        offsets = out[: n + 1].copy()
        per_seg = per_seg[: len(seg_len)]
    else:
        parts, per = [np.zeros(1, np.int64)], []
        for s, e in zip(seg_bounds[:-1].tolist(), seg_bounds[1:].tolist()):
            b = scanner.bounds(data[s:e])[1:] + s if e > s else np.zeros(0, np.int64)
            parts.append(b)
            per.append(len(b))
        offsets = np.concatenate(parts)
        per_seg = np.array(per, np.int64)
    piece_lang = None
    if langs is not None:
        piece_lang = np.repeat(np.asarray(doc_of_seg, np.int64), per_seg)
    return data, offsets, piece_lang


def _binary(data: np.ndarray, offsets: np.ndarray):
    import pyarrow as pa

    return pa.Array.from_buffers(
        pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def count_pieces(
    source,
    *,
    pattern: str = "o200k",
    special_tokens: Sequence[str] = (),
    lang=None,
    with_lang: bool = False,
    threads: int = 2,
):
    """Unique pieces with their counts: a pyarrow table (piece, [lang,] count).

    Batches of about 32 MB of text are pretokenized and grouped on ``threads`` threads
    (the scanner and Arrow's group-by release the GIL); counts are exact sums, so the
    result does not depend on the thread count.
    """
    import pyarrow as pa
    from concurrent.futures import ThreadPoolExecutor

    # here, not at the top: the train stage imports this module, and needs no scanner
    from .scanner import get_scanner

    scanner = get_scanner(pattern)
    special_re = None
    if special_tokens:
        alts = sorted({s.encode("utf-8") for s in special_tokens}, key=len, reverse=True)
        special_re = re.compile(b"|".join(re.escape(s) for s in alts))
    keys = ["piece"] + (["lang"] if with_lang else [])

    def count_batch(texts, langs):
        data, offsets, doc_idx = _pieces_of_batch(texts, langs, scanner, special_re)
        cols = {"piece": _binary(data, offsets)}
        if with_lang:
            names = np.asarray(langs, dtype=object)[doc_idx] if len(doc_idx) else []
            cols["lang"] = pa.array(names, pa.string())
        return pa.table(cols).group_by(keys).aggregate([([], "count_all")]).rename_columns(keys + ["count"])

    partial = []
    in_flight = []
    pending: list[str] = []
    pending_lang: list[str] = []
    size = 0
    with ThreadPoolExecutor(max(1, int(threads))) as pool:
        for texts, langs in _documents(source, lang, with_lang):
            if with_lang and langs is None:
                raise ConfigError(
                    "language balancing (alpha != 1) needs a language per document: "
                    "pass lang= or use a 'lang' column"
                )
            for t in texts:
                if not isinstance(t, str):
                    raise InputError(f"document text must be str, got {type(t).__name__}")
                size += len(t)
            pending.extend(texts)
            if with_lang:
                pending_lang.extend(langs)
            if size >= _CHUNK_BYTES:
                in_flight.append(pool.submit(count_batch, pending, pending_lang if with_lang else None))
                pending, pending_lang, size = [], [], 0
                while len(in_flight) > max(1, int(threads)):
                    partial.append(in_flight.pop(0).result())
        if pending:
            in_flight.append(pool.submit(count_batch, pending, pending_lang if with_lang else None))
        partial.extend(f.result() for f in in_flight)
    if not partial:
        schema = [("piece", pa.large_binary())] + ([("lang", pa.string())] if with_lang else []) + [("count", pa.int64())]
        return pa.table({n: pa.array([], t) for n, t in schema})
    table = pa.concat_tables(partial)
    if len(partial) > 1:
        table = table.group_by(keys).aggregate([("count", "sum")]).rename_columns(keys + ["count"])
    del partial
    # Arrow's allocator keeps freed batches for reuse; hand them back before training.
    pa.default_memory_pool().release_unused()
    _trim_heap()
    return table


def _trim_heap() -> None:
    """Return glibc's freed memory (the batches' strings) to the OS before training."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def binary_buffers(col) -> tuple[np.ndarray, np.ndarray]:
    """(data uint8, offsets int64) of a (large_)binary Arrow column: the trainer's input.

    Zero copy for large_binary; a binary column's int32 offsets are widened (by NumPy:
    ``Array.cast`` would import ``pyarrow.compute``, 40 ms, in the pretokenize shards).
    """
    import pyarrow as pa

    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not (pa.types.is_large_binary(arr.type) or pa.types.is_binary(arr.type)):
        arr = arr.cast(pa.large_binary())
    bufs = arr.buffers()
    width = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    offsets = np.frombuffer(bufs[1], width)[arr.offset : arr.offset + len(arr) + 1].astype(np.int64, copy=False)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return data, offsets


# ---------------------------------------------------------------------------- train_bpe


def train_bpe(
    source,
    vocab_size: int,
    *,
    special_tokens: Sequence[str] = (),
    pattern: str = "o200k",
    alpha: float = 1.0,
    lang: str | Sequence[str] | None = None,
    han_coverage: float | None = None,
    han_count: int | None = None,
    version: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    threads: int = 1,
):
    """Train a byte-level BPE tokenizer on a small corpus, in-process.

    ``source`` is a path (.txt as one document, .jsonl[.gz|.zst] or .parquet with a
    ``text`` and optional ``lang`` field), a list of paths, or an iterable of str (then
    ``lang`` may give each document's language group, or one group for all).
    ``vocab_size`` counts the specials, the 256 bytes and the merges. Specials are hard
    boundaries: text is split on them first, they never enter the counts, and they take
    ids ``0..k-1``. ``alpha < 1`` balances languages (needs a language per document);
    ``han_coverage`` / ``han_count`` force the most frequent Han characters in first.
    ``threads`` > 1 learns the merges on that many threads (the same merges).
    """
    specials = list(special_tokens)
    n_merges = int(vocab_size) - len(specials) - 256
    if n_merges < 0:
        raise ConfigError(
            f"vocab_size {vocab_size} is smaller than {len(specials)} specials + 256 bytes"
        )
    if int(vocab_size) > MAX_IDS:  # (as stages.config: checked before counting anything)
        raise ConfigError(f"vocab_size {vocab_size} is more than {MAX_IDS}, the most ids the encoder takes")
    balance = float(alpha) != 1.0
    table = count_pieces(source, pattern=pattern, special_tokens=specials, lang=lang, with_lang=balance)
    counts = table.column("count").to_numpy().astype(np.int64)
    if balance:
        import pyarrow as pa
        import pyarrow.compute as pc

        langs = table.column("lang")
        by_lang: dict[str, int] = {}
        piece_bytes = pc.binary_length(table.column("piece")).to_numpy().astype(np.int64) * counts
        codes = langs.combine_chunks().dictionary_encode()
        names = codes.dictionary.to_pylist()
        idx = codes.indices.to_numpy()
        for j, g in enumerate(names):
            by_lang[g] = int(piece_bytes[idx == j].sum())
        w_by = lang_weights(by_lang, alpha)
        wcol = counts * np.array([w_by[g] for g in names], np.int64)[idx]
        table = pa.table({"piece": table.column("piece"), "w": wcol, "count": counts})
        table = table.group_by(["piece"]).aggregate([("w", "sum"), ("count", "sum")])
        table = table.rename_columns(["piece", "w", "count"])
        weights = table.column("w").to_numpy().astype(np.int64)
        counts = table.column("count").to_numpy().astype(np.int64)
    else:
        weights = counts
    data, offsets = binary_buffers(table.column("piece"))
    forced: list[tuple[bytes, bytes]] = []
    plan = None
    if han_coverage is not None or han_count is not None:
        plan = han_forced_merges(han_char_counts(data, offsets, counts), coverage=han_coverage, count=han_count)
        forced = plan.merges
        if len(forced) > n_merges:
            raise ConfigError(
                f"Han forcing needs {len(forced)} merges but vocab_size leaves {n_merges}: "
                "lower han_coverage/han_count or raise vocab_size"
            )
    result = learn_merges(data, offsets, weights, n_merges, forced=forced, threads=threads)
    meta = dict(metadata or {})
    meta.setdefault("merges_learned", len(result.merges))
    meta.setdefault("stopped_early", bool(result.stopped_early))
    if plan is not None:
        meta.setdefault("han", {"chars": plan.n_chars, "merges": plan.n_merges, "coverage": plan.coverage})
    return build_tokenizer(result.merges, special_tokens=specials, pattern=pattern, version=version, metadata=meta)
