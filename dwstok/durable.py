"""Make a finished file, and its name, survive a power loss: ``fsync`` both.

Writing under a temporary name and renaming it into place protects against a crashed
process, not against the machine losing power: the rename can reach the disk before the
file's bytes do, leaving a finished-looking name on an empty or partial file. So a
writer syncs the file before the rename and the folder after it; a stage syncs its
folder before the manifest that declares the result complete is renamed into place.

>>> import pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> (d / "x").write_bytes(b"data")
4
>>> sync_file(d / "x"); sync_dir(d)
"""

from __future__ import annotations

import os


def sync_file(path: str | os.PathLike) -> None:
    """Flush a closed file's bytes to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_dir(path: str | os.PathLike) -> None:
    """Flush a folder's entries (renames, new names) to the disk, where the OS allows it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # e.g. Windows cannot open a folder; its renames are journaled anyway
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems refuse fsync on a folder
        pass
    finally:
        os.close(fd)
