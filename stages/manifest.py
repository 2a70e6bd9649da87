"""Atomic artifact writes, stage manifests, up-to-date checks and shard-level resume.

Every file is written under a temporary name in its final folder and ``os.replace``'d
into place, so a crash can never leave a file that looks finished. A stage's
``_manifest.json`` is written last; a map stage also writes one small marker per shard
(``part-NNNNN.json``, after ``part-NNNNN.arrow``), which is what resume looks for.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> info = write_json(d / "x.json", {"a": 1})
>>> info.bytes, (d / "x.json").read_text()
(9, '{"a": 1}\\n')
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

MANIFEST = "_manifest.json"
FORMAT = 1


# -- atomic writes ------------------------------------------------------------------
@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it into place.

    On an exception the temporary file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


@dataclass(frozen=True)
class FileInfo:
    """An output file as recorded in a manifest."""

    sha256: str
    bytes: int


def hash_file(path: str | Path) -> FileInfo:
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
            n += len(chunk)
    return FileInfo(h.hexdigest(), n)


def write_bytes(path: str | Path, data: bytes) -> FileInfo:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return FileInfo(hashlib.sha256(data).hexdigest(), len(data))


def write_json(path: str | Path, obj: Any) -> FileInfo:
    """Write JSON people can read: indented when small, keys in the order given."""
    blob = json.dumps(obj, ensure_ascii=False, indent=None if _big(obj) else 1)
    return write_bytes(path, (blob + "\n").encode("utf-8"))


def _big(obj: Any) -> bool:
    return isinstance(obj, dict) and sum(
        len(v) if isinstance(v, (dict, list)) else 1 for v in obj.values()
    ) > 2000


def read_json(path: str | Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_table(path: str | Path, table, *, metadata: dict[str, str] | None = None) -> FileInfo:
    """Write an Arrow IPC file with zstd-compressed buffers.

    The bytes depend only on the table's contents and chunking, never on threads.
    """
    import pyarrow as pa
    import pyarrow.ipc as ipc

    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    opts = ipc.IpcWriteOptions(compression="zstd", use_threads=False)
    with atomic_path(path) as tmp:
        with pa.OSFile(str(tmp), "wb") as sink, ipc.new_file(sink, table.schema, options=opts) as w:
            w.write_table(table)
        info = hash_file(tmp)
    return info


def read_table(path: str | Path):
    """Read an Arrow IPC file (memory-mapped)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    with pa.memory_map(str(path)) as src:
        return ipc.open_file(src).read_all()


# -- manifests ----------------------------------------------------------------------
@dataclass
class Manifest:
    """What a stage produced from what, written last as ``<out_dir>/_manifest.json``.

    ``inputs_hash`` covers the upstream artifacts (their manifests' output hashes, or the
    corpus files' path, size and mtime); ``config_hash`` the config sections the stage
    reads. Both must match for the stage to count as up to date.
    """

    stage: str
    config_hash: str
    inputs_hash: str
    outputs: dict[str, FileInfo] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    format: int = FORMAT
    created: str = ""
    # Set when a run found the stage up to date (not stored).
    up_to_date: bool = field(default=False, compare=False)
    out_dir: Path | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("up_to_date")
        d.pop("out_dir")
        d["outputs"] = {k: asdict(v) for k, v in sorted(self.outputs.items())}
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Manifest:
        d = dict(d)
        d["outputs"] = {k: FileInfo(**v) for k, v in d.get("outputs", {}).items()}
        return cls(**d)

    def write(self, out_dir: str | Path) -> Manifest:
        self.created = self.created or time.strftime("%Y-%m-%dT%H:%M:%S%z")
        write_json(Path(out_dir) / MANIFEST, self.to_json())
        self.out_dir = Path(out_dir)
        return self

    @property
    def output_hash(self) -> str:
        """One hash over every output file (what downstream stages record as input)."""
        return _hash_obj({k: v.sha256 for k, v in sorted(self.outputs.items())})


def read_manifest(out_dir: str | Path) -> Manifest | None:
    """The manifest in ``out_dir``, or None when missing or unreadable."""
    p = Path(out_dir) / MANIFEST
    try:
        m = Manifest.from_json(read_json(p))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    m.out_dir = Path(out_dir)
    return m


def up_to_date(out_dir: str | Path, stage: str, config_hash: str, inputs_hash: str) -> Manifest | None:
    """The existing manifest when it matches and every output is still there, else None.

    Outputs are checked by size (cheap); a truncated or deleted file re-runs the stage.
    """
    m = read_manifest(out_dir)
    if m is None or m.stage != stage or m.format != FORMAT:
        return None
    if m.config_hash != config_hash or m.inputs_hash != inputs_hash:
        return None
    for name, info in m.outputs.items():
        p = Path(out_dir) / name
        if not p.is_file() or p.stat().st_size != info.bytes:
            return None
    m.up_to_date = True
    return m


def invalidate(out_dir: str | Path) -> None:
    """Remove a stage's manifest before re-running it, so a crash mid-run reads as
    unfinished rather than as the previous (now stale) result."""
    with contextlib.suppress(FileNotFoundError):
        (Path(out_dir) / MANIFEST).unlink()


def require(out_dir: str | Path, stage: str) -> Manifest:
    """The manifest of an upstream stage, or an InputError saying which command to run."""
    from dwstok.errors import InputError

    m = read_manifest(out_dir)
    if m is None or m.stage != stage:
        raise InputError(
            f"{out_dir} holds no finished '{stage}' output: run `dwstok {stage}` first "
            "(with the same --workdir)"
        )
    for name, info in m.outputs.items():
        p = Path(out_dir) / name
        if not p.is_file() or p.stat().st_size != info.bytes:
            raise InputError(
                f"{p} is missing or changed since `dwstok {stage}` wrote it: run it again"
            )
    return m


def _hash_obj(obj: Any) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def hash_obj(obj: Any) -> str:
    """sha256 of an object's canonical JSON."""
    return _hash_obj(obj)


def file_fingerprint(path: str | Path) -> dict[str, Any]:
    """Path, size and mtime: how corpus files are recognised as unchanged (as make does;
    hashing terabytes of corpus before every run would cost more than the run)."""
    st = os.stat(path)
    return {"path": str(Path(path).resolve()), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}


# -- shard-level resume ---------------------------------------------------------------
def part_name(index: int, suffix: str = ".arrow") -> str:
    return f"part-{index:05d}{suffix}"


@dataclass(frozen=True)
class ShardDone:
    """A finished shard: its key (config + input), output files and stats."""

    index: int
    key: str
    outputs: dict[str, FileInfo]
    stats: dict[str, Any]


def shard_done(out_dir: str | Path, index: int, key: str) -> ShardDone | None:
    """The marker of shard ``index`` when it was written for ``key`` and its files are
    intact, else None (the shard must be (re)computed)."""
    p = Path(out_dir) / part_name(index, ".json")
    try:
        d = read_json(p)
    except (OSError, ValueError):
        return None
    if d.get("key") != key or d.get("format") != FORMAT:
        return None
    outputs = {k: FileInfo(**v) for k, v in d["outputs"].items()}
    for name, info in outputs.items():
        q = Path(out_dir) / name
        if not q.is_file() or q.stat().st_size != info.bytes:
            return None
    return ShardDone(index, key, outputs, d.get("stats", {}))


def mark_shard_done(out_dir: str | Path, index: int, key: str, outputs: dict[str, FileInfo], stats: dict[str, Any]) -> ShardDone:
    """Write shard ``index``'s marker; call after its output files are in place."""
    write_json(
        Path(out_dir) / part_name(index, ".json"),
        {
            "format": FORMAT,
            "index": index,
            "key": key,
            "outputs": {k: asdict(v) for k, v in sorted(outputs.items())},
            "stats": stats,
        },
    )
    return ShardDone(index, key, outputs, stats)


def remove_stale_parts(out_dir: str | Path, keep: int) -> None:
    """Delete ``part-NNNNN.*`` with NNNNN >= keep (left by an earlier, larger run) and
    temporary files of crashed writers."""
    d = Path(out_dir)
    if not d.is_dir():
        return
    for p in d.iterdir():
        name = p.name
        if name.startswith(".") and ".tmp-" in name:
            p.unlink(missing_ok=True)
        elif name.startswith("part-") and name[5:10].isdigit() and int(name[5:10]) >= keep:
            p.unlink(missing_ok=True)


class Timer:
    """``with Timer() as t: ...; t.seconds``"""

    def __enter__(self) -> Timer:
        self.t0 = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = round(time.perf_counter() - self.t0, 3)
