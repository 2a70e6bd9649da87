"""Reference tokenizers, loaded offline: GPT-2, cl100k and o200k through tiktoken, Mistral
7B v0.1 through sentencepiece.

Files come from a folder laid out like ``reftok`` (``--reference-dir`` or
``DWSTOK_REFTOK``): ``r50k_base.tiktoken``, ``cl100k_base.tiktoken``,
``o200k_base.tiktoken``, ``encodings.json`` (patterns, specials and sha256 of each rank
file, checked on load) and ``mistral7b_v0.1.tokenizer.model``. Without such a folder,
the tiktoken ones come from tiktoken's own cache (``TIKTOKEN_CACHE_DIR``). Nothing is
ever downloaded.

Every reference counts tokens the fastest exact way: a rank file whose pattern dwstok
scans natively (all three) runs on dwstok's batch encoder, which reproduces tiktoken's ids
(checked against tiktoken in the tests); tiktoken's ``encode_ordinary_batch`` serves the
rest; sentencepiece encodes on ``num_threads``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from dwstok.errors import ConfigError, ModelFileError

NAMES = ("gpt2", "cl100k", "o200k", "mistral")
TIKTOKEN_FILES = {"gpt2": "r50k_base", "cl100k": "cl100k_base", "o200k": "o200k_base"}
MISTRAL_FILE = "mistral7b_v0.1.tokenizer.model"
ENV = "DWSTOK_REFTOK"


def parse_compare(spec: str | None) -> list[str]:
    """``"gpt2,o200k"`` -> ``["gpt2", "o200k"]``; an unknown name is a ``ConfigError``."""
    if not spec:
        return []
    names = [s.strip() for s in spec.split(",") if s.strip()]
    for n in names:
        if n not in NAMES:
            raise ConfigError(f"--compare: unknown reference {n!r}; choose from {', '.join(NAMES)}")
    return list(dict.fromkeys(names))


def _need(module: str):
    try:
        return __import__(module)
    except ImportError:
        raise ConfigError(
            f"the reference tokenizers need the {module} package: pip install 'dwstok[eval]'"
        ) from None


class TiktokenReference:
    kind = "reference"

    def __init__(self, name: str, encoding):
        self.name = name
        self.enc = encoding
        self.n_vocab = encoding.n_vocab

    def doc_tokens(self, texts: Sequence[str], *, threads: int) -> np.ndarray:
        counts = np.empty(len(texts), np.int64)
        step = 256  # bounded memory: the ids of one slice at a time
        for i in range(0, len(texts), step):
            batch = self.enc.encode_ordinary_batch(list(texts[i : i + step]), num_threads=threads)
            counts[i : i + len(batch)] = [len(x) for x in batch]
        return counts

    def pieces(self, text: str) -> list[bytes]:
        return [self.enc.decode_single_token_bytes(t) for t in self.enc.encode_ordinary(text)]

    def vocab_bytes(self) -> list[bytes]:
        return list(self.enc._mergeable_ranks)  # noqa: SLF001 - tiktoken has no public list


class RankFileReference:
    """A tiktoken rank file run by dwstok's own encoder (``Tokenizer.from_tiktoken``), which
    gives tiktoken's ids exactly (the tests compare the totals with tiktoken itself) and
    encodes the corpus zero-copy on threads, several times faster than tiktoken."""

    kind = "reference"

    def __init__(self, name: str, tok):
        self.name = name
        self.tok = tok
        self.n_vocab = tok.n_vocab

    def encode_corpus(self, corpus, *, threads: int) -> np.ndarray:
        if corpus.n_docs == 0:
            return np.zeros(0, np.int64)
        _, doc = self.tok.encode_utf8_batch(corpus.data, corpus.offsets, num_threads=threads)
        return np.diff(doc)

    def doc_tokens(self, texts: Sequence[str], *, threads: int) -> np.ndarray:
        return np.array([len(x) for x in self.tok.encode_batch(list(texts), num_threads=threads)], np.int64)

    def pieces(self, text: str) -> list[bytes]:
        v = self.tok.vocab
        return [v[i] for i in self.tok.encode(text)]

    def vocab_bytes(self) -> list[bytes]:
        specials = set(self.tok.special_tokens.values())
        return [b for i, b in self.tok.vocab.items() if i not in specials]


class SentencePieceReference:
    kind = "reference"

    def __init__(self, name: str, processor):
        self.name = name
        self.sp = processor
        self.n_vocab = processor.get_piece_size()

    def doc_tokens(self, texts: Sequence[str], *, threads: int) -> np.ndarray:
        counts = np.empty(len(texts), np.int64)
        step = 256
        for i in range(0, len(texts), step):
            batch = self.sp.encode(list(texts[i : i + step]), num_threads=threads)
            counts[i : i + len(batch)] = [len(x) for x in batch]
        return counts

    def pieces(self, text: str) -> list[bytes]:
        out = []
        for t in self.sp.encode(text):
            p = self.sp.id_to_piece(t)
            if self.sp.is_byte(t):  # <0xE7>: one raw byte
                out.append(bytes([int(p[3:5], 16)]))
            else:
                out.append(p.replace("\u2581", " ").encode("utf-8"))
        return out

    def vocab_bytes(self) -> list[bytes]:
        sp = self.sp
        return [
            sp.id_to_piece(i).replace("\u2581", " ").encode("utf-8")
            for i in range(self.n_vocab)
            if not (sp.is_byte(i) or sp.is_control(i) or sp.is_unknown(i))
        ]


def reference_dir(option: str | os.PathLike | None) -> Path | None:
    d = option or os.environ.get(ENV)
    if not d:
        return None
    p = Path(d)
    if not p.is_dir():
        raise ModelFileError(f"reference folder {p} not found (from {'--reference-dir' if option else ENV})")
    return p


def _check_sha256(path: Path, expected_sha256: str | None) -> bytes:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ModelFileError(f"cannot read tiktoken rank file {path}: {e.strerror}") from None
    if expected_sha256 and hashlib.sha256(raw).hexdigest() != expected_sha256:
        raise ModelFileError(f"{path} does not match the sha256 in encodings.json: the file is not the genuine one")
    return raw


def _rank_file(path: Path, expected_sha256: str | None) -> dict[bytes, int]:
    raw = _check_sha256(path, expected_sha256)
    ranks = {}
    try:
        for line in raw.splitlines():
            if line:
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    except ValueError:
        raise ModelFileError(f"{path} is not a tiktoken rank file (expected 'base64 rank' lines)") from None
    return ranks


def load_reference(name: str, ref_dir: Path | None):
    """One reference tokenizer by name (``gpt2``, ``cl100k``, ``o200k``, ``mistral``)."""
    if name == "mistral":
        spm = _need("sentencepiece")
        if ref_dir is None:
            raise ConfigError(f"mistral needs its SentencePiece model: pass --reference-dir DIR (or set {ENV})")
        path = ref_dir / MISTRAL_FILE
        if not path.is_file():
            raise ModelFileError(f"{path} not found: the Mistral 7B v0.1 tokenizer.model is expected there")
        try:
            sp = spm.SentencePieceProcessor(model_file=str(path))
        except (OSError, RuntimeError) as e:
            raise ModelFileError(f"{path} is not a SentencePiece model: {e}") from None
        return SentencePieceReference(name, sp)
    tiktoken = _need("tiktoken")
    base = TIKTOKEN_FILES[name]
    if ref_dir is None:
        if not os.environ.get("TIKTOKEN_CACHE_DIR"):
            raise ConfigError(
                f"{name}: no reference folder; pass --reference-dir DIR (or set {ENV}), or TIKTOKEN_CACHE_DIR"
                " to a tiktoken cache that holds it"
            )
        try:
            return TiktokenReference(name, tiktoken.get_encoding(base))
        except Exception as e:  # noqa: BLE001 - tiktoken raises many kinds when offline
            raise ModelFileError(f"{name}: {base} is not in TIKTOKEN_CACHE_DIR ({e})") from None
    enc_json = ref_dir / "encodings.json"
    try:
        spec = json.loads(enc_json.read_text(encoding="utf-8"))["encodings"][base]
    except FileNotFoundError:
        raise ModelFileError(f"{enc_json} not found: it gives each rank file's pattern and specials") from None
    except (OSError, ValueError, KeyError) as e:
        raise ModelFileError(f"{enc_json} has no readable entry for {base} ({e})") from None
    path = ref_dir / spec.get("file", f"{base}.tiktoken")
    from dwstok.patterns import resolve

    if resolve(spec["pat_str"])[0] is not None:  # a pattern dwstok scans natively
        _check_sha256(path, spec.get("sha256"))
        from dwstok import Tokenizer

        tok = Tokenizer.from_tiktoken(path, pattern=spec["pat_str"], special_tokens=spec.get("special_tokens", {}))
        return RankFileReference(name, tok)
    ranks = _rank_file(path, spec.get("sha256"))
    enc = tiktoken.Encoding(
        name=base,
        pat_str=spec["pat_str"],
        mergeable_ranks=ranks,
        special_tokens=spec.get("special_tokens", {}),
        explicit_n_vocab=spec.get("explicit_n_vocab"),
    )
    return TiktokenReference(name, enc)
