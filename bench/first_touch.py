"""What first touching fresh memory costs on this machine: 2 MB pages against 4 KB pages,
each in fresh processes, 32 MB at a time.

On a VM whose host backs guest memory lazily and takes back what the guest frees
(Firecracker with free page reporting, as this project's test machines), a 2 MB page the
host does not back takes 10-25 ms to first touch, against 0.1-0.3 ms for one it does; which
one a process gets varies from run to run. The encoders' piece caches grow while a run
goes on, so a run that gets such pages stalls (bench/encode.py shows it as system time).

    .venv/bin/python bench/first_touch.py --repeats 6
"""

from __future__ import annotations

import argparse
import mmap
import statistics
import subprocess
import sys
import time

import numpy as np

from dwstok.bpe.pages import huge_page_array

MB = 32


def touch(kind: str) -> float:
    """ms to write one byte a 4 KB page of a new 32 MB array on ``kind`` pages."""
    n = MB << 20
    if kind == "huge":  # as dwstok's tables and caches are made
        a = huge_page_array(n // 8).view(np.uint8)
    else:
        m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_NOHUGEPAGE"):
            m.madvise(mmap.MADV_NOHUGEPAGE)
        a = np.frombuffer(m, np.uint8)
    t0 = time.perf_counter()
    a[::4096] = 1
    return 1e3 * (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--worker", choices=["huge", "small"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(touch(args.worker))
        return
    times: dict[str, list[float]] = {"huge": [], "small": []}
    for _ in range(args.repeats):  # interleaved, each in a fresh process
        for kind in times:
            out = subprocess.run([sys.executable, __file__, "--worker", kind], capture_output=True, text=True, check=True)
            times[kind].append(float(out.stdout))
    print(f"first touch of {MB} MB, ms, one fresh process each")
    print("| pages | median | min | max | each |")
    print("| --- | ---: | ---: | ---: | --- |")
    for kind, ts in times.items():
        print(f"| {kind} | {statistics.median(ts):.1f} | {min(ts):.1f} | {max(ts):.1f} | {', '.join(f'{t:.1f}' for t in ts)} |")


if __name__ == "__main__":
    main()
