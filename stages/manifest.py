"""Atomic artifact writes, stage manifests, staged commits and shard-level resume.

Every file is written under a temporary name and ``os.replace``'d into place, so a crash
can never leave a file that looks finished. A stage builds its new result in a staging
folder next to the old one (``<out_dir>/.staging-<config hash>/``, see ``Staging``) and
swaps it in with renames once it is complete, ``_manifest.json`` last: until then the
previous result stays whole and up to date for its own config. A map stage also writes
one small marker per shard (``part-NNNNN.json``, after ``part-NNNNN.arrow``) in the
staging folder, which is what resume looks for.

Whatever reads a stage's result checks it first: every output named by a manifest or a
marker must lie inside its folder (``ModelFileError`` otherwise: a crafted manifest
must not make dwstok read or delete files elsewhere), and must still hash to the
sha256 recorded for it (``first_bad_output``). A corrupt output makes its stage "not up to
date" (it is rebuilt) and is an error where a later stage consumes it.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> info = write_json(d / "x.json", {"a": 1})
>>> info.bytes, (d / "x.json").read_text()
(12, '{\\n "a": 1\\n}\\n')
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from dwstok.durable import sync_dir, sync_file

MANIFEST = "_manifest.json"
# 2: manifests record what built them (``built_with``), and outputs are verified by hash.
# A result of an older format reads as unfinished: it is rebuilt, never trusted.
FORMAT = 2


# -- atomic writes ------------------------------------------------------------------
@contextlib.contextmanager
def atomic_path(path: str | Path, *, durable: bool = True) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it into place.

    On an exception the temporary file is removed and ``path`` is left untouched. The
    file is synced to the disk before the rename and the folder after it (dwstok.durable);
    ``durable=False`` skips both, for scratch files that a crashed run never reads again.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        if durable:
            sync_file(tmp)
        os.replace(tmp, path)
        if durable:
            sync_dir(path.parent)
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


# (device, inode, size, mtime, ctime) -> sha256 of files this process has hashed: a
# build checks a stage's outputs when it finds the stage up to date and again when the
# next stage reads them; the second check costs nothing unless the file changed.
_VERIFIED: dict[tuple[int, ...], str] = {}


def _stat_key(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_matches(path: str | Path, info: FileInfo, *, cached: bool = True) -> bool:
    """True when ``path`` is a regular file of ``info.bytes`` bytes hashing to ``info.sha256``.

    The size is compared first (free); the hash is computed once per process for an
    unchanged file (``cached=False`` always rehashes, as ``dwstok verify`` does).
    """
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_size != info.bytes:
        return False
    key = _stat_key(st)
    if cached and _VERIFIED.get(key) == info.sha256:
        return True
    try:
        got = hash_file(path)
    except OSError:
        return False
    if got.sha256 != info.sha256:
        return False
    _VERIFIED[key] = got.sha256
    return True


def first_bad_output(out_dir: str | Path, outputs: dict[str, FileInfo], *, cached: bool = True) -> str | None:
    """The name of the first output that is missing or does not match its recorded
    size and sha256, or None when all are intact."""
    for name, info in sorted(outputs.items()):
        if not file_matches(Path(out_dir) / name, info, cached=cached):
            return name
    return None


# -- paths read from manifests and markers -------------------------------------------
def check_names(folder: str | Path, names, source: str | Path) -> None:
    """Refuse (``ModelFileError``, naming ``source``) any name that would leave ``folder``:
    absolute, with ``..``, or resolving outside it through a symlink.

    >>> check_names("/tmp/w/count", ["pieces.arrow"], "/tmp/w/count/_manifest.json")
    >>> check_names("/tmp/w/count", ["../../canary.txt"], "m.json")
    Traceback (most recent call last):
    ...
    dwstok.errors.ModelFileError: m.json names '../../canary.txt', a path outside /tmp/w/count; the file was crafted or corrupted: delete /tmp/w/count and run the stage again
    """
    from dwstok.errors import ModelFileError

    folder = Path(folder)
    root = None
    for name in names:
        bad = not isinstance(name, str) or not name or "\\" in name or "\0" in name
        if not bad:
            parts = Path(name).parts
            bad = Path(name).is_absolute() or any(q in ("..", ".") for q in parts) or not parts
        if not bad:  # through a symlink, dangling or not?
            root = root or os.path.realpath(folder)
            real = os.path.realpath(folder / name)
            bad = os.path.commonpath([root, real]) != root
        if bad:
            raise ModelFileError(
                f"{source} names {name!r}, a path outside {folder}; the file was crafted or "
                f"corrupted: delete {folder} and run the stage again"
            )


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
    reads. Both must match for the stage to count as up to date. ``built_with`` says
    what shaped the result, upstream stages included: the config file, version and
    pattern, and a hash per config section (``stages.lineage``); a later stage refuses
    a result whose sections differ from its own config.
    """

    stage: str
    config_hash: str
    inputs_hash: str
    outputs: dict[str, FileInfo] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    built_with: dict[str, Any] = field(default_factory=dict)
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
    """The manifest in ``out_dir``, or None when missing or unreadable.

    A manifest naming an output outside ``out_dir`` is a ``ModelFileError``, not None:
    such a file was crafted, and a workdir holding one is not to be trusted or cleaned.
    """
    p = Path(out_dir) / MANIFEST
    try:
        m = Manifest.from_json(read_json(p))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    check_names(out_dir, m.outputs, p)
    m.out_dir = Path(out_dir)
    return m


def up_to_date(out_dir: str | Path, stage: str, config_hash: str, inputs_hash: str) -> Manifest | None:
    """The existing manifest when it matches and every output is intact, else None.

    A result that was complete but not yet swapped in when a run crashed is swapped in
    first (``recover``). Every output must still have its recorded size and sha256: a
    deleted, truncated or corrupted file re-runs the stage. When the stage is up to date,
    the leftovers of abandoned runs of the same config are removed (``clean_leftovers``).
    """
    recover(out_dir)
    m = read_manifest(out_dir)
    if m is None or m.stage != stage or m.format != FORMAT:
        return None
    if m.config_hash != config_hash or m.inputs_hash != inputs_hash:
        return None
    if first_bad_output(out_dir, m.outputs) is not None:
        return None
    with contextlib.suppress(OSError):
        clean_leftovers(out_dir, only=staging_dir(out_dir, config_hash))
    m.up_to_date = True
    return m


def require(out_dir: str | Path, stage: str, *, check=None) -> Manifest:
    """The manifest of an upstream stage with every output verified by its sha256.

    ``InputError`` says which command to run when the result is missing or unfinished;
    ``ModelFileError`` names a file that no longer matches its recorded hash.
    ``check(manifest)``, if given, runs before the (costlier) hashing.
    """
    from dwstok.errors import InputError, ModelFileError

    with contextlib.suppress(OSError):  # a read-only workdir: read what is there
        recover(out_dir)
    m = read_manifest(out_dir)
    if m is None or m.stage != stage:
        raise InputError(
            f"{out_dir} holds no finished '{stage}' output: run `dwstok {stage}` first "
            "(with the same --workdir)"
        )
    if m.format != FORMAT:
        raise InputError(
            f"{out_dir} was written by another dwstok version (manifest format {m.format}, "
            f"this one reads {FORMAT}): run `dwstok {stage}` again (with the same --workdir)"
        )
    if check is not None:
        check(m)
    bad = first_bad_output(out_dir, m.outputs)
    if bad is not None:
        p = Path(out_dir) / bad
        if not p.is_file():
            raise InputError(f"{p} is missing since `dwstok {stage}` wrote it: run it again")
        raise ModelFileError(
            f"{p} does not match the size and sha256 recorded in {Path(out_dir) / MANIFEST}: "
            f"it was modified or corrupted; run `dwstok {stage}` again to rebuild it"
        )
    return m


# -- staged commits -------------------------------------------------------------------
STAGING_PREFIX = ".staging-"


class Staging:
    """Where a stage builds its new result: ``<out_dir>/.staging-<config hash>/``.

    The stage writes every output (and, for map stages, its shard markers) into
    ``staging.dir``, then ``staging.commit(manifest)``: the manifest is written into the
    staging folder (the commit point), then the outputs are renamed into ``out_dir``
    and the manifest last. Before the commit point ``out_dir`` still holds the previous
    result, untouched and up to date for its own config; after it, ``recover`` (run by
    ``up_to_date`` and ``require``) finishes an interrupted swap. So a crash or a bad
    document at any point leaves the old complete result or the new one, never a mix.

    A staging folder survives a failed run: re-running the same config resumes in it
    shard by shard. ``reuse_parts=True`` (map stages) also hard-links the shard files
    already in ``out_dir`` into it, so shards whose marker still matches are not
    recomputed (e.g. after adding one file to the corpus). Hard links are safe here
    because files are only ever replaced by rename, never rewritten in place.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> st = Staging(d, "demo", "c" * 64)
    >>> info = write_json(st.dir / "x.json", {"a": 1})
    >>> m = st.commit(Manifest("demo", "c" * 64, "i", outputs={"x.json": info}))
    >>> sorted(p.name for p in d.iterdir())
    ['_manifest.json', 'x.json']
    """

    def __init__(self, out_dir: str | Path, stage: str, config_hash: str, *, reuse_parts: bool = False):
        self.out_dir = Path(out_dir)
        self.stage = stage
        self.dir = staging_dir(self.out_dir, config_hash)
        recover(self.out_dir)
        # Staging folders of other configs belong to abandoned runs (unless their owner
        # is alive): drop them, so the disk holds at most the old result and one new one.
        clean_leftovers(self.out_dir, keep=self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        # A commit point left here by a run that failed during recovery is void now.
        (self.dir / MANIFEST).unlink(missing_ok=True)
        write_json(self.dir / OWNER, {"pid": os.getpid(), "host": socket.gethostname()})
        if reuse_parts:
            self._link_parts()

    def _link_parts(self) -> None:
        by_index: dict[str, list[Path]] = {}
        for p in self.out_dir.iterdir():
            if p.is_file() and _is_part(p.name):
                by_index.setdefault(p.name[:10], []).append(p)
        have = {p.name[:10] for p in self.dir.iterdir() if _is_part(p.name)}
        for index, files in by_index.items():
            if index in have:  # this run's own files of that shard win
                continue
            for p in files:
                try:
                    os.link(p, self.dir / p.name)
                except OSError:  # no hard links here: the shard is just recomputed
                    break

    def commit(self, m: Manifest) -> Manifest:
        """Write ``m`` (the commit point), swap the new result in, return ``m``."""
        m.write(self.dir)
        _swap(self.out_dir, self.dir)
        m.out_dir = self.out_dir
        with contextlib.suppress(OSError):
            clean_leftovers(self.out_dir)
        return m


def staging_dir(out_dir: str | Path, config_hash: str) -> Path:
    """Where a run of ``config_hash`` stages its result in ``out_dir``."""
    return Path(out_dir) / f"{STAGING_PREFIX}{config_hash[:16]}"


OWNER = ".owner"  # in a staging folder: {"pid", "host"} of the run that last used it
_TMP_PID = re.compile(r"\.tmp-(\d+)")


def clean_leftovers(out_dir: str | Path, *, keep: Path | None = None, only: Path | None = None) -> None:
    """Remove what abandoned runs left in ``out_dir``: staging folders (all but ``keep``,
    or just ``only``) and temporary files (``.NAME.tmp-PID``).

    Never what a live run is writing: a staging folder whose owner process is alive,
    or a temporary file whose PID is alive, stays (another host's run counts as alive).
    """
    out_dir = Path(out_dir)
    for d in _staging_dirs(out_dir):
        if d == keep or (only is not None and d != only):
            continue
        if not _owner_alive(d):
            shutil.rmtree(d, ignore_errors=True)
    if out_dir.is_dir():
        for p in out_dir.iterdir():
            if _abandoned_temp(p.name) and p.is_file():
                p.unlink(missing_ok=True)


def _owner_alive(d: Path) -> bool:
    try:
        o = read_json(d / OWNER)
        return _alive_elsewhere(int(o["pid"]), o.get("host"))
    except (OSError, ValueError, TypeError, KeyError):
        return False  # no owner recorded: an older dwstok's, or torn; abandoned


def _abandoned_temp(name: str) -> bool:
    """``.x.json.tmp-4242`` (or ``...tmp-4242-…``) written by a process no longer alive."""
    m = _TMP_PID.search(name) if name.startswith(".") else None
    return m is not None and not _alive_elsewhere(int(m[1]))


def _alive_elsewhere(pid: int, host: str | None = None) -> bool:
    """True when ``pid`` is another live process (this process's own leftovers are not:
    it removes them only once its own writers are done)."""
    if host is not None and host != socket.gethostname():
        return True  # cannot tell from here: keep
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    except (OSError, OverflowError):
        return False
    return True


def _is_part(name: str) -> bool:
    return name.startswith("part-") and name[5:10].isdigit()


def _staging_dirs(out_dir: Path) -> list[Path]:
    if not out_dir.is_dir():
        return []
    return sorted(p for p in out_dir.iterdir() if p.name.startswith(STAGING_PREFIX) and p.is_dir())


def recover(out_dir: str | Path) -> None:
    """Finish swapping in a staged result that reached its commit point before a crash."""
    for d in _staging_dirs(Path(out_dir)):
        if (d / MANIFEST).is_file():
            _swap(Path(out_dir), d)


def _swap(out_dir: Path, staging: Path) -> None:
    """Move a committed staging folder's outputs into ``out_dir``, manifest last.

    Idempotent, so ``recover`` can redo it after a crash at any step: an output already
    moved is recognised by its size.
    """
    new = read_manifest(staging)
    if new is None:  # unreadable commit point: the staged run never finished
        (staging / MANIFEST).unlink(missing_ok=True)
        return
    # 1. The old manifest goes first: from here on out_dir reads as unfinished (and
    #    recover() completes it), never as the old result with some new files in it.
    old = read_manifest(out_dir)
    (out_dir / MANIFEST).unlink(missing_ok=True)
    # 2. Old outputs the new result does not have, shard leftovers, crashed writers' temps.
    stale = set(old.outputs) if old is not None else set()
    for p in out_dir.iterdir():
        if p.is_file() and (_is_part(p.name) or _abandoned_temp(p.name)):
            stale.add(p.name)
    for name in stale - set(new.outputs):
        (out_dir / name).unlink(missing_ok=True)
    # 3. The new outputs, by rename (same file system: the staging folder is inside).
    for name, info in sorted(new.outputs.items()):
        src, dst = staging / name, out_dir / name
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
        elif not (dst.is_file() and dst.stat().st_size == info.bytes):
            # Neither staged nor already moved: the staged result is gone; void it.
            (staging / MANIFEST).unlink(missing_ok=True)
            return
    # 4. The manifest last, once the renames above are on the disk; then the staging
    #    folder is only leftovers.
    sync_dir(out_dir)
    os.replace(staging / MANIFEST, out_dir / MANIFEST)
    sync_dir(out_dir)
    shutil.rmtree(staging, ignore_errors=True)


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
    intact (size and sha256), else None (the shard must be (re)computed). A marker
    naming a file outside ``out_dir`` is a ``ModelFileError``."""
    p = Path(out_dir) / part_name(index, ".json")
    try:
        d = read_json(p)
        if d.get("key") != key or d.get("format") != FORMAT:
            return None
        outputs = {k: FileInfo(**v) for k, v in d["outputs"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    check_names(out_dir, outputs, p)
    if first_bad_output(out_dir, outputs) is not None:
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
        if _abandoned_temp(name):
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
