"""The native model artifact (``train/model.json``): versioned JSON, no pickle.

Layout (one token or merge per line, so the file reads and diffs well)::

    {"format": "dwstok-model", "format_version": 1,
     "version": "32.3", "pattern_name": "o200k-rdigits", "pattern": "...",
     "merge_rule": "merges", "n_vocab": 32768,
     "specials": {"<pad>": 0, ...},
     "metadata": {...},
     "vocab": [[32, "\\x00"], ..., [97, "a"], ..., [288, " t"], ...],
     "merges": [[116, 104, 288], ...],
     "sha256": "..."}

Token bytes are written as text: valid UTF-8 as itself, every other byte and the
backslash itself as ``\\xNN`` (so the form is exact and reversible). ``merges`` are
``[left id, right id, new id]`` in rank order; a ``"ranks"`` model (tiktoken) has none
and ranks its tokens by id. ``sha256`` covers the canonical JSON of everything else
and is checked on load.

>>> token_text(b"a\\\\b\\xff")
'a\\\\x5cb\\\\xff'
>>> token_bytes(token_text(b"a\\\\b\\xff"))
b'a\\\\b\\xff'
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

from json.encoder import encode_basestring as _encode_str  # json.dumps(str, ensure_ascii=False)

from .durable import sync_dir
from .errors import ModelFileError

FORMAT = "dwstok-model"
FORMAT_VERSION = 1
_REQUIRED = {
    "format": str,
    "format_version": int,
    "version": (str, type(None)),
    "pattern_name": (str, type(None)),
    "pattern": str,
    "merge_rule": str,
    "n_vocab": int,
    "specials": dict,
    "metadata": dict,
    "vocab": list,
    "merges": list,
    "sha256": str,
}
_ESCAPE = re.compile(rb"\\x([0-9a-f]{2})")


def token_text(b: bytes) -> str:
    """Readable, exact text form of token bytes."""
    return b.replace(b"\\", b"\\x5c").decode("utf-8", "backslashreplace")


def token_bytes(s: str) -> bytes:
    """Inverse of :func:`token_text`."""
    return _ESCAPE.sub(lambda m: bytes([int(m[1], 16)]), s.encode("utf-8"))


def _canonical(value: Any) -> str:
    """The canonical JSON the hash covers: sorted keys, no spaces, text as itself."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def content_hash(content: dict[str, Any], canonical: dict[str, str] | None = None) -> str:
    """sha256 of the canonical JSON of ``content`` without its ``sha256`` key.

    ``canonical``: the canonical JSON of some values already (``canonical_rows`` of the
    vocab and the merges, made while training ran); the same hash, from less work here.
    """
    body = {k: v for k, v in content.items() if k != "sha256"}
    if not canonical:
        canon = _canonical(body)
    else:  # what json.dumps writes for a dict with sort_keys, a value at a time
        canon = "{" + ",".join(_encode_str(k) + ":" + (canonical[k] if k in canonical else _canonical(body[k])) for k in sorted(body)) + "}"
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def canonical_rows(rows: list) -> str:
    """The canonical JSON of a list of vocab rows or merges, as ``content_hash`` takes it."""
    return _canonical(rows)


def join_canonical(parts: list[str]) -> str:
    """``canonical_rows`` of the concatenation of lists, from theirs."""
    return "[" + ",".join(p[1:-1] for p in parts if len(p) > 2) + "]"


def rows_text(rows: list) -> str:
    """Rows of the file (vocab entries or merges), one a line, as ``dumps`` writes them;
    the text of longer lists is these texts joined by ``",\\n"``, empty ones left out."""
    return ",\n".join(map(_row, rows))


def dumps(content: dict[str, Any], rows: dict[str, str] | None = None) -> str:
    """The file text: header keys first, then one vocab entry / merge per line.

    ``rows``: the text of the vocab's and the merges' rows already (``rows_text``).
    """
    head = {k: v for k, v in content.items() if k not in ("vocab", "merges", "sha256")}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False, sort_keys=True)},")
    for key in ("vocab", "merges"):
        text = rows[key] if rows and key in rows else rows_text(content[key])
        lines.append(f'"{key}": [')
        if text:
            lines.append(text)
        lines.append("],")
    lines.append(f'"sha256": {json.dumps(content["sha256"])}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _row(r) -> str:
    """``json.dumps(r, ensure_ascii=False)`` for a vocab row ``[id, text]`` or a merge
    ``[a, b, new]``, formatted directly (one ``json.dumps`` call per row cost a third
    of a second for a 32k model)."""
    if len(r) == 2 and type(r[0]) is int and type(r[1]) is str:
        return f"[{r[0]}, {_encode_str(r[1])}]"
    if len(r) == 3 and type(r[0]) is int and type(r[1]) is int and type(r[2]) is int:
        return f"[{r[0]}, {r[1]}, {r[2]}]"
    return json.dumps(r, ensure_ascii=False)


def write(path: str | os.PathLike, content: dict[str, Any], rows: dict[str, str] | None = None) -> None:
    """Write atomically: a temporary file in the same folder, then ``os.replace``.
    ``rows``: as ``dumps`` takes them.

    The file gets the umask's permissions, like any file a program creates (``mkstemp``
    would make it 0600). The temporary name ``.NAME.tmp-PID-…`` says which process
    wrote it, so a cleanup can tell an abandoned one from a live writer's.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = dumps(content, rows)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())  # the bytes before the name (see durable.py)
        os.replace(tmp, path)
        sync_dir(path.parent)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read(path: str | os.PathLike) -> dict[str, Any]:
    """Parse and verify a model file; ModelFileError says what is wrong."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ModelFileError(f"model file {path} does not exist") from None
    except OSError as e:
        raise ModelFileError(f"cannot read model file {path}: {e.strerror}") from None
    try:
        content = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelFileError(f"model file {path} is not valid JSON ({e}); it is truncated or corrupted") from None
    if not isinstance(content, dict) or content.get("format") != FORMAT:
        raise ModelFileError(f"{path} is not a dwstok model file (no \"format\": \"{FORMAT}\")")
    if content.get("format_version") != FORMAT_VERSION:
        raise ModelFileError(
            f"{path} has format_version {content.get('format_version')!r}; this dwstok reads version {FORMAT_VERSION}"
        )
    for key, types in _REQUIRED.items():
        if key not in content:
            raise ModelFileError(f"model file {path} lacks the key {key!r}; it is truncated or corrupted")
        if not isinstance(content[key], types):
            raise ModelFileError(f"model file {path}: {key!r} has the wrong type; the file is corrupted")
    actual = content_hash(content)
    if actual != content["sha256"]:
        raise ModelFileError(
            f"model file {path} fails its hash check: it records sha256 {content['sha256']}, its content hashes"
            f" to {actual}; the file was modified or corrupted"
        )
    return content
