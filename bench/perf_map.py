"""Name the Numba kernels in ``perf``: a ``/tmp/perf-<pid>.map`` of every compiled kernel.

``perf report`` shows JIT code as bare addresses. Linux ``perf`` reads a map file of
``start size name`` lines for such code; this writes one for every Numba overload loaded
in the process, including the kernels it calls that are not inlined (``_encode_span``,
``_scan_o200k``, ``_merge_side_by_side`` inside the fused entry kernels), each up to the
next one's start. ``--dump NAME`` also writes the machine code of the kernels whose
symbol contains NAME, for ``objdump`` beside ``perf script``'s addresses.

The run: load o200k, warm up on the warm-up text, encode the sample once (kernels
loaded), write the map, then encode the groups over and over for ``--seconds`` in the
chosen mode (``--clear``: every piece cache emptied before each pass, so that every
pass merges as a first pass does). Start ``perf`` with a delay so it skips the loading:

    perf record -D 4000 -o /tmp/perf.data .venv/bin/python bench/perf_map.py --groups en --mode numpy
    perf report -i /tmp/perf.data --no-children --sort sym
    .venv/bin/python bench/perf_map.py --groups all --clear --dump _merge_side_by_side
    perf script -i /tmp/perf.data -F ip,sym | grep side_by_side | sort | uniq -c | sort -rn | head
    objdump -D -b binary -mi386:x86-64 --adjust-vma=0x<start> /tmp/dwstok-code-<start>.bin
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import encode as E  # noqa: E402  (bench/ is on sys.path when run as a script)


def kernel_symbols() -> list[tuple[int, str]]:
    """``(address, symbol)`` of every function defined in a loaded Numba overload, sorted.

    A kernel loaded from the cache has no IR module, but the bitcode kept for linking
    (``_shared_module``) names its functions, and the JIT knows their addresses."""
    found = set()
    for obj in gc.get_objects():
        if type(obj).__name__ != "CPUDispatcher":
            continue
        for cres in obj.overloads.values():
            lib = cres.library
            module = getattr(lib, "_shared_module", None) or getattr(lib, "_final_module", None)
            names = {cres.fndesc.llvm_func_name, cres.fndesc.llvm_cpython_wrapper_name}
            if module is not None:
                names |= {fn.name for fn in module.functions if not fn.is_declaration}
            for name in names:
                try:
                    address = lib.get_pointer_to_function(name)
                except Exception:  # a name the JIT did not keep
                    address = 0
                if address:
                    found.add((address, name))
    return sorted(found)


def write_perf_map(dump: list[str] = (), dump_dir: str = "/tmp") -> Path:
    """Write ``/tmp/perf-<pid>.map``; each kernel ends where the next starts (at most 1 MB).
    Kernels whose symbol contains a string of ``dump`` are written to
    ``<dump_dir>/dwstok-code-<start>.bin``."""
    syms = kernel_symbols()
    path = Path(f"/tmp/perf-{os.getpid()}.map")
    with open(path, "w") as f:
        for i, (start, name) in enumerate(syms):
            size = min(syms[i + 1][0] - start if i + 1 < len(syms) else 1 << 16, 1 << 20)
            f.write(f"{start:x} {size:x} {name}\n")
            if any(d in name for d in dump):
                Path(dump_dir, f"dwstok-code-{start:x}.bin").write_bytes(ctypes.string_at(start, size))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", default="all", help="comma-separated language groups, or all")
    ap.add_argument("--mode", default="numpy", choices=["list", "numpy", "batch@1", "flat@1"])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--clear", action="store_true", help="empty the piece caches before each pass")
    ap.add_argument("--dump", action="append", default=[], help="write the code of kernels whose symbol has this")
    ap.add_argument("--sample", type=Path, default=Path("/tmp/dwstok-bench-sample.arrow"),
                    help="bench/encode.py's sample (written there first if missing)")
    args = ap.parse_args()

    E._pin(1)
    if not args.sample.exists():
        E.write_sample(args.sample, 220, 100)  # bench/encode.py's defaults
    warm, groups = E.read_sample(args.sample)
    names = list(groups) if args.groups == "all" else args.groups.split(",")
    texts = [t for g in names for t in groups[g]]
    run = E._runner(args.mode, "dwstok", 1, E.RANKS)
    run(warm)
    run(texts)
    tok = next(o for o in gc.get_objects() if type(o).__name__ == "Tokenizer" and type(o).__module__.startswith("dwstok"))
    from dwstok.bpe.cache import _clear_cache

    path = write_perf_map(args.dump)
    print(f"{path} written; encoding for {args.seconds:g} s", file=sys.stderr)
    passes, spent, t0 = 0, 0.0, time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        if args.clear:
            for cache, _ in tok._caches.free.values():
                _clear_cache(cache)
        copies = [(t + " ")[:-1] for t in texts]  # new str objects, as a corpus's are
        a = time.perf_counter()
        run(copies)
        spent += time.perf_counter() - a
        passes += 1
    print(f"{passes} passes, {spent / passes * 1e3:.2f} ms a pass", file=sys.stderr)


if __name__ == "__main__":
    main()
