"""dwstok's exports in tiktoken: a ready ``tiktoken.Encoding``, and the plugin's registry.

An export folder holds ``tokenizer.tiktoken`` (``base64(token) rank`` per line, rank =
dwstok id) and its sidecar ``tiktoken.json`` (name, pattern, specials, n_vocab, the rank
file's sha256). tiktoken itself is optional: ``pip install tiktoken``.

>>> enc = load_tiktoken("work/32.3/export")                      # doctest: +SKIP
>>> enc.encode("Hello <bos>", allowed_special={"<bos>"})         # doctest: +SKIP

With ``DWSTOK_TIKTOKEN_DIRS=work/32.3/export`` in the environment, the ``tiktoken_ext``
plugin that dwstok installs makes ``tiktoken.get_encoding("dwslmtok-32.3")`` work too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .errors import ModelFileError

TIKTOKEN_FILE = "tokenizer.tiktoken"
TIKTOKEN_META_FILE = "tiktoken.json"
DIRS_ENV = "DWSTOK_TIKTOKEN_DIRS"
_META_KEYS = ("name", "file", "sha256", "pat_str", "special_tokens", "n_vocab")


def meta_path(path: str | os.PathLike) -> Path:
    """The ``tiktoken.json`` for an export folder, a ``tiktoken.json`` or a ``.tiktoken`` file."""
    p = Path(path)
    if p.is_dir():
        return p / TIKTOKEN_META_FILE
    if p.suffix == ".tiktoken":
        return p.parent / TIKTOKEN_META_FILE
    return p


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """The sidecar's content, checked to have what :func:`encoding_kwargs` needs."""
    m = meta_path(path)
    try:
        meta = json.loads(m.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelFileError(
            f"{m} not found: a .tiktoken file needs the tiktoken.json that `dwstok export` "
            "writes beside it (the pattern and the specials are not in the rank file)"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelFileError(f"cannot read {m}: {e}; re-run `dwstok export`") from None
    missing = [k for k in _META_KEYS if not isinstance(meta, dict) or k not in meta]
    if missing:
        raise ModelFileError(f"{m} lacks {', '.join(missing)}; is it a dwstok export? re-run `dwstok export`")
    return meta


def ranks_bytes(ranks: Iterable[tuple[bytes, int]]) -> bytes:
    """A ``.tiktoken`` rank file's bytes: ``base64(token) rank`` per line, in the order given.

    >>> ranks_bytes([(b"a", 0), (b" the", 7)]).splitlines()
    [b'YQ== 0', b'IHRoZQ== 7']
    """
    return b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ranks)


def read_ranks(path: str | os.PathLike, *, expected_sha256: str | None = None) -> dict[bytes, int]:
    """A ``.tiktoken`` rank file as tiktoken's ``mergeable_ranks``, its sha256 checked.

    Read here rather than with ``tiktoken.load.load_tiktoken_bpe``, which copies every
    file it reads into a cache under the temp folder.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ModelFileError(f"cannot read tiktoken file {p}: {e.strerror}") from None
    if expected_sha256 is not None and hashlib.sha256(data).hexdigest() != expected_sha256:
        raise ModelFileError(
            f"{p} does not match the sha256 in its tiktoken.json: the files come from different"
            " exports; re-run `dwstok export`"
        )
    return rank_lines(p, data)


def rank_lines(path: Path, data: bytes) -> dict[bytes, int]:
    r"""token -> rank of the lines of a ``.tiktoken`` file's bytes ``data``, checked: a
    rank from 0 to ``limits.MAX_IDS - 1``, no rank or token twice. ``path`` names the file
    in the error (with the line), so that a corrupt file is refused, not loaded into a
    model whose ids are silently wrong (a rank of -1 had replaced the last token; one of
    10**12 was a MemoryError).

    >>> rank_lines(Path("x.tiktoken"), b"YQ== 0\nYg== 1\n")
    {b'a': 0, b'b': 1}
    >>> rank_lines(Path("x.tiktoken"), b"YQ== 0\nYg== 0\n")
    Traceback (most recent call last):
    dwstok.errors.ModelFileError: x.tiktoken:2 gives rank 0 again (line 1 had it); the file is corrupt
    """
    from .limits import MAX_IDS

    ranks: dict[bytes, int] = {}
    n = lines = 0
    a2b = binascii.a2b_base64  # what b64decode(validate=True) calls, without its Python wrapper a line
    try:
        for n, line in enumerate(data.splitlines(), 1):
            if line:
                token, rank = line.split()
                ranks[a2b(token, strict_mode=True)] = int(rank)
                lines += 1
    except ValueError:
        raise ModelFileError(f"{path}:{n} is not a tiktoken rank line (base64 token, space, rank)") from None
    # Checked on the whole, as a line at a time slowed the load of o200k's 200k lines;
    # a file that fails is read again, a line at a time, to name the line
    if lines and (len(ranks) < lines or min(ranks.values()) < 0 or max(ranks.values()) >= MAX_IDS
                  or len(set(ranks.values())) < lines):
        first: dict = {}
        for n, line in enumerate(data.splitlines(), 1):
            if not line:
                continue
            token_b64, rank_s = line.split()
            token, rank = base64.b64decode(token_b64), int(rank_s)
            if not 0 <= rank < MAX_IDS:
                raise ModelFileError(f"{path}:{n} gives rank {rank}: ranks go from 0 to {MAX_IDS - 1:,}; the file is corrupt")
            for key, what in ((("r", rank), f"rank {rank}"), (("t", token), f"the token {token!r}")):
                if key in first:
                    raise ModelFileError(f"{path}:{n} gives {what} again (line {first[key]} had it); the file is corrupt")
                first[key] = n
    return ranks


def encoding_kwargs(path: str | os.PathLike) -> dict[str, Any]:
    """The keyword arguments of ``tiktoken.Encoding`` for an export (folder, tiktoken.json
    or .tiktoken): what a tiktoken plugin's constructor returns."""
    m = meta_path(path)
    meta = read_meta(m)
    return {
        "name": meta["name"],
        "pat_str": meta["pat_str"],
        "mergeable_ranks": read_ranks(m.parent / meta["file"], expected_sha256=meta["sha256"]),
        "special_tokens": dict(meta["special_tokens"]),
        "explicit_n_vocab": meta["n_vocab"],
    }


def load_tiktoken(path: str | os.PathLike):
    """A ``tiktoken.Encoding`` for an export folder (or its tiktoken.json / .tiktoken).

    Its ids are the model's; like every tiktoken encoding it refuses text that spells a
    special unless told (``allowed_special`` / ``disallowed_special=()``), and
    ``encode_ordinary`` reads it as text, as dwstok's ``encode`` does.

    >>> enc = load_tiktoken("work/32.3/export")  # doctest: +SKIP
    >>> enc.encode_ordinary("hello world")        # doctest: +SKIP
    """
    try:
        import tiktoken
    except ImportError:
        raise ImportError("load_tiktoken needs tiktoken: pip install tiktoken (or 'dwstok[tiktoken]')") from None
    return tiktoken.Encoding(**encoding_kwargs(path))


# -- the tiktoken_ext plugin -----------------------------------------------------------


def export_dirs(env: str | None = None) -> list[Path]:
    """Export folders named by ``$DWSTOK_TIKTOKEN_DIRS`` (``os.pathsep``-separated): each
    entry is an export folder, or a folder whose subfolders (``*/``, ``*/export/``) are."""
    value = os.environ.get(DIRS_ENV, "") if env is None else env
    found: list[Path] = []
    for entry in filter(None, value.split(os.pathsep)):
        root = Path(entry).expanduser()
        if (root / TIKTOKEN_META_FILE).is_file():
            found.append(root)
            continue
        for pattern in (f"*/{TIKTOKEN_META_FILE}", f"*/export/{TIKTOKEN_META_FILE}"):
            found.extend(sorted(m.parent for m in root.glob(pattern)))
    return found


def plugin_constructors(env: str | None = None) -> dict[str, Callable[[], dict[str, Any]]]:
    """Encoding name -> constructor, for ``tiktoken_ext.dwstok.ENCODING_CONSTRUCTORS``.

    Only the small sidecars are read here; the ranks load when tiktoken asks for the
    encoding. An unreadable export or a name taken already (an earlier folder, or one of
    tiktoken's own encodings) is skipped with a warning: a plugin that raised would break
    ``tiktoken.get_encoding`` for every name.
    """
    taken = _builtin_names()
    out: dict[str, Callable[[], dict[str, Any]]] = {}
    for d in export_dirs(env):
        try:
            name = read_meta(d)["name"]
        except ModelFileError as e:
            warnings.warn(f"{DIRS_ENV}: skipping {d}: {e}", stacklevel=2)
            continue
        if name in out or name in taken:
            warnings.warn(f"{DIRS_ENV}: skipping {d}: the encoding name {name!r} is taken already", stacklevel=2)
            continue
        out[name] = _constructor(d)
    return out


def _constructor(d: Path) -> Callable[[], dict[str, Any]]:
    def construct() -> dict[str, Any]:
        return encoding_kwargs(d)

    construct.__qualname__ = f"dwstok export {d}"
    return construct


def _builtin_names() -> set[str]:
    try:
        from tiktoken_ext import openai_public
    except ImportError:
        return set()
    return set(getattr(openai_public, "ENCODING_CONSTRUCTORS", {}))
