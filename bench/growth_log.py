"""Every piece-cache growth in one case of bench/encode.py, in fresh processes: the
thread, the sizes before and after, the entries moved, and its wall and CPU time,
with when the warm-up ends and each pass starts, each pass's total and the groups
that took over 8 ms. For a one-thread case, also the time spent clearing the next
cache ahead (``NextCache``, a slice at a time) in the warm-up and in each pass, and
each pass's system time and page faults.

Growing a cache first touches its new memory, which on this VM can be slow; on 2
threads it falls inside a call. With ``--baseline``, runs alternate with that
checkout's code.

    .venv/bin/python bench/growth_log.py --case dwstok-batch@2 --runs 4 [--baseline /tmp/wt]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _child(case: str, sample: Path) -> None:
    import encode as E

    from dwstok import bpe
    from dwstok.bpe import cache as C

    events = []
    t_start = time.perf_counter()
    plain = C.grown_cache

    def logged(cache, nbytes=None, into=None):
        t, c = time.perf_counter(), time.thread_time()
        out = plain(cache, nbytes, into)
        if out.size != cache.size:
            events.append(f"  grow {threading.current_thread().name:>18} at {(t - t_start) * 1e3:7.1f} ms: "
                          f"{cache.nbytes >> 20} -> {out.nbytes >> 20} MB, {int(cache[1])} entries, "
                          f"{(time.perf_counter() - t) * 1e3:.1f} ms ({(time.thread_time() - c) * 1e3:.1f} ms CPU)")
        return out

    C.grown_cache = bpe.grown_cache = logged  # the pool calls bpe.grown_cache
    clearing = {"ms": 0.0, "slices": 0}
    plain_clear = C.NextCache._clear

    def timed_clear(self, upto):
        t = time.perf_counter()
        plain_clear(self, upto)
        clearing["ms"] += (time.perf_counter() - t) * 1e3
        clearing["slices"] += 1

    C.NextCache._clear = timed_clear

    def cleared(what):
        events.append(f"  {what}: clearing the next cache ahead {clearing['ms']:.1f} ms in {clearing['slices']} slices")
        clearing.update(ms=0.0, slices=0)

    mode, encoder, threads = E._case(case)
    E._pin(threads)
    warm, groups = E.read_sample(sample)
    run = E._runner(mode, encoder, threads, E.RANKS)
    run(warm)
    events.append(f"  warm-up done at {(time.perf_counter() - t_start) * 1e3:7.1f} ms")
    cleared("warm-up")
    fresh = {g: [t.encode().decode() for t in texts] for g, texts in groups.items()}  # as encode.py's worker
    for p, texts in enumerate((groups, fresh)):
        t0 = time.perf_counter()
        events.append(f"  pass {p + 1} starts at {(t0 - t_start) * 1e3:7.1f} ms")
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        for g, ts in texts.items():
            t1 = time.perf_counter()
            run(ts)
            if (ms := (time.perf_counter() - t1) * 1e3) > 8:
                events.append(f"  group {g} took {ms:.1f} ms")
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        cleared(f"pass {p + 1}")
        events.append(f"pass {p + 1}: {(time.perf_counter() - t0) * 1e3:.1f} ms, sys {(r1.ru_stime - r0.ru_stime) * 1e3:.0f} ms, "
                      f"{r1.ru_minflt - r0.ru_minflt} page faults")
    print("\n".join(events))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="dwstok-batch@2")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--sample", type=Path, default=Path("/tmp/growth-sample.arrow"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(a.case, a.sample)
        return
    if not a.sample.exists():  # the same sample as bench/encode.py's
        import encode as E

        E.write_sample(a.sample, 220, 100)
    roots = [("this", HERE.parent)] + ([("base", a.baseline.resolve())] if a.baseline else [])
    for i in range(a.runs):
        for name, root in roots:
            env = dict(os.environ, PYTHONPATH=str(root))
            out = subprocess.run([sys.executable, __file__, "--child", "--case", a.case, "--sample", str(a.sample)],
                                 env=env, cwd="/tmp", capture_output=True, text=True, check=True)
            print(f"run {i + 1}, {name} ({root}):\n{out.stdout}", flush=True)


if __name__ == "__main__":
    main()
