"""Progress display: rich bars on a terminal, plain line-buffered lines otherwise.

Both implement ``stages.executors.Progress``; the stages never know which is used.
"""

from __future__ import annotations

import sys
import threading
import time


def make_progress(*, enabled: bool = True, stream=None):
    """Rich bars when ``stream`` (stderr) is a terminal, plain timestamped lines when not;
    nothing when not ``enabled`` (``--quiet``)."""
    from stages.executors import Progress

    stream = stream or sys.stderr
    if not enabled:
        return Progress()
    if stream.isatty():
        return RichProgress(stream)
    return PlainProgress(stream)


def human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


def _base():
    from stages.executors import Progress

    return Progress


class PlainProgress(_base()):
    """One line per finished item (shard), flushed at once, for cron and CI logs, each
    stamped with the UTC time (``timestamps=False`` leaves it off):

    ``2026-12-02T02:20:01Z pretokenize: 3/22 shards, 27.0 MB, 6,021 docs, 9.1 MB/s, ETA 0:00:19``
    """

    def __init__(self, stream, min_interval: float = 0.0, *, timestamps: bool = True):
        self.stream = stream
        self.min_interval = min_interval
        self.timestamps = timestamps
        self.label = ""
        # Shard threads report while the main thread starts and finishes stages: a report
        # is printed whole, and none after its stage has finished.
        self._lock = threading.Lock()

    def start(self, label, *, total_bytes=None, total_items=None):
        self.label, self.total_bytes, self.total_items = label, total_bytes, total_items
        self.bytes = self.docs = self.items = 0
        self.t0 = time.perf_counter()
        what = f"{total_items} shard{'s' if total_items != 1 else ''}" if total_items is not None else ""
        size = f", {human_bytes(total_bytes)}" if total_bytes else ""
        self._line(f"{label}: starting ({what}{size})")

    def advance(self, *, bytes=0, docs=0, items=0):
        with self._lock:
            if self.label:  # (not once finished: a late report would follow the run's last line)
                self._advance(bytes, docs, items)

    def _advance(self, bytes, docs, items):
        self.bytes += bytes
        self.docs += docs
        self.items += items
        dt = max(time.perf_counter() - self.t0, 1e-9)
        rate = self.bytes / dt
        parts = [f"{self.items}/{self.total_items} shards" if self.total_items else f"{self.items} shards"]
        parts.append(human_bytes(self.bytes))
        if self.docs:
            parts.append(f"{self.docs:,} docs")
        parts.append(f"{human_bytes(rate)}/s")
        if self.total_bytes and rate > 0 and self.bytes < self.total_bytes:
            parts.append(f"ETA {_hms((self.total_bytes - self.bytes) / rate)}")
        self._line(f"{self.label}: " + ", ".join(parts))

    def finish(self, ok=True):
        with self._lock:
            if self.label:
                outcome = "done in" if ok else "stopped after"
                self._line(f"{self.label}: {outcome} {time.perf_counter() - self.t0:.1f}s")
                self.label = ""

    def note(self, message):
        self._line(message)

    def _line(self, s: str) -> None:
        if self.timestamps:
            s = time.strftime("%Y-%m-%dT%H:%M:%SZ ", time.gmtime()) + s
        self.stream.write(s + "\n")
        self.stream.flush()


def _hms(s: float) -> str:
    s = int(s + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class RichProgress(_base()):
    """rich bars: bytes done/total, documents, throughput and ETA."""

    def __init__(self, stream):
        from rich.console import Console

        self.console = Console(file=stream)
        self.bar = None

    def start(self, label, *, total_bytes=None, total_items=None):
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self.finish()
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            DownloadColumn(),
            TextColumn("{task.fields[docs]:,} docs"),
            TextColumn("{task.fields[items]}/{task.fields[total_items]} shards"),
            TransferSpeedColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
        )
        self.bar.start()
        self.task = self.bar.add_task(label, total=total_bytes, docs=0, items=0, total_items=total_items or "?")

    def advance(self, *, bytes=0, docs=0, items=0):
        bar = self.bar  # (once: finish, on another thread, may set it to None meanwhile)
        if bar is None:
            return
        t = bar.tasks[0]
        bar.update(self.task, advance=bytes, docs=t.fields["docs"] + docs, items=t.fields["items"] + items)

    def finish(self, ok=True):
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def note(self, message):
        self.console.print(message, markup=False, highlight=False)
