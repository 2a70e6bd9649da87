"""Cold start: import, load and first encode with an empty Numba cache, and the compile
share of a first ``dwstok build demo`` on a small corpus (issue 17, "First use").

By default as a user meets it: the first encode goes through the HF bridge while one
background process compiles the kernels (dwstok/kernel_cache.py); the bench then waits
for that compile (its wall time is reported) and runs first use again, on the kernels.
``--foreground`` adds runs with ``DWSTOK_COMPILE=foreground``: the compile inside the
first encode, which is what first use cost before the bridge.

Every measurement runs in a fresh process with ``NUMBA_CACHE_DIR`` set to an empty
folder, so Numba finds no compiled kernel. Kernels compiled are taken from Numba's
``numba:compile`` events (outermost dwstok kernels only; nested ones are inside them).
The build's compile share is its wall time with an empty cache minus its wall time
with the cache it left (same corpus, a fresh workdir), plus the per-process compile
log (``DWSTOK_COMPILE_LOG``) where the tree has it.

    PYTHONPATH=$PWD DWSTOK_SHARED=../shared python bench/cold_start.py --tag before
    python bench/cold_start.py --make-demo   # + the first `make demo` from a clean clone of HEAD
    python bench/cold_start.py --tree /path/to/other/checkout --tag before   # another tree

Results: bench/results/cold-start-<time>-<tag>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("DWSTOK_SHARED", HERE.parent.parent / "shared"))

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from numba.core import event
compiles, stack = [], []
class L(event.Listener):
    def on_start(self, ev):
        stack.append((time.perf_counter(), time.process_time()))
    def on_end(self, ev):
        w, c = stack.pop()
        fn = getattr(ev.data.get("dispatcher"), "py_func", None)
        if not stack and fn is not None and fn.__module__.startswith("dwstok"):
            compiles.append([fn.__module__ + "." + fn.__qualname__, round(time.perf_counter() - w, 3), str(ev.data.get("args"))[:300],
                             round(time.process_time() - c, 3)])
event.register("numba:compile", L())
t1, c1 = time.perf_counter(), time.process_time()
import dwstok
t2, c2 = time.perf_counter(), time.process_time()
tok = dwstok.Tokenizer.load(sys.argv[1])
t3, c3 = time.perf_counter(), time.process_time()
ids = tok.encode("Hello world, a first encode. Grüße, 你好世界, Привет мир, 2026.")
t4, c4 = time.perf_counter(), time.process_time()
json.dump({"kernels": getattr(tok, "_native", True) is not None, "ids": ids, "import_s": t2 - t1, "load_s": t3 - t2, "first_encode_s": t4 - t3, "import_to_encode_s": t4 - t1,
           "load_cpu_s": c3 - c2, "first_encode_cpu_s": c4 - c3, "import_to_encode_cpu_s": c4 - c1,
           "compiles": compiles, "dwstok": dwstok.__file__}, sys.stdout)
"""


def fresh_env(tree: Path, cache: Path, mode: str = "background", **extra) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), NUMBA_CACHE_DIR=str(cache), DWSTOK_SHARED=str(SHARED), DWSTOK_COMPILE=mode, **extra)
    env.pop("DWSTOK_COMPILE_NOTICE", None)
    return env


def _child(tree: Path, model: Path, env: dict) -> dict:
    # cwd=tree: ``python -c`` puts the working directory first on sys.path, before PYTHONPATH
    out = subprocess.run([sys.executable, "-c", CHILD, str(model)], env=env, capture_output=True, text=True, check=True, cwd=tree)
    r = json.loads(out.stdout)
    r["stderr"] = out.stderr.strip().splitlines()
    return r


def wait_for_background(tree: Path, cache: Path, timeout: float = 3600) -> float | None:
    """Wait until the background compile in ``cache`` is done; its seconds from now, or
    None for a tree without one."""
    t0 = time.perf_counter()
    while True:
        p = subprocess.run([sys.executable, "-m", "dwstok.warm", "--status"], env=fresh_env(tree, cache), capture_output=True, text=True, cwd=tree)
        state = p.stdout.split()[0] if p.returncode == 0 and p.stdout else None
        if state not in ("compiling", "cold"):
            return time.perf_counter() - t0 if state == "ready" else None
        if time.perf_counter() - t0 > timeout:
            raise SystemExit(f"the background compile in {cache} did not finish in {timeout} s")
        time.sleep(1)


def first_use(tree: Path, model: Path, tmp: Path, k: int, mode: str = "background") -> dict:
    cache = tmp / f"numba-first-{mode}-{k}"
    cache.mkdir()
    t0 = time.perf_counter()
    r = _child(tree, model, fresh_env(tree, cache, mode))
    if mode == "background":
        waited = wait_for_background(tree, cache)
        if waited is not None:
            r["background_ready_s"] = time.perf_counter() - t0  # from the first process's start
            again = _child(tree, model, fresh_env(tree, cache, mode))
            r["after_ready"] = {k: again[k] for k in ("import_to_encode_s", "load_s", "first_encode_s", "kernels")}
            r["same_ids"] = again["ids"] == r["ids"]
    return r


def warm(tree: Path, tmp: Path) -> dict:
    """``python -m dwstok.warm`` (what ``make setup`` runs) with an empty cache: wall and CPU seconds."""
    cache = tmp / "numba-warm"
    cache.mkdir()
    log = tmp / "compile-warm-setup.log"
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "dwstok.warm"], env=fresh_env(tree, cache, DWSTOK_COMPILE_LOG=str(log)), capture_output=True, text=True, cwd=tree)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"warm failed:\n{p.stdout}\n{p.stderr}")
    lines = [ln.split(maxsplit=2) for ln in log.read_text().splitlines()] if log.exists() else []
    return {"wall_s": wall, "cpu_s": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
            "compile_logged_by_kernel": sorted(((n, float(t), int(p)) for p, t, n in lines), key=lambda r: -r[1])}


def small_corpus(path: Path, docs: int) -> None:
    import pyarrow.parquet as pq

    t = pq.read_table(SHARED / "corpus" / "dev.parquet", columns=["text", "lang"])
    pq.write_table(t.slice(0, docs), path)


def _compile_notices(lines: list[str]) -> list[str]:
    """The lines of a run that say it compiles ("compiling kernels, once per install: ..."),
    not the notice that a compile started in the background."""
    return [line for line in lines if "compiling kernels, once per install" in line]


def build(tree: Path, corpus: Path, work: Path, cache: Path, log: Path, workers: int) -> dict:
    env = fresh_env(tree, cache, DWSTOK_COMPILE_LOG=str(log))
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "dwstok_cli.main", "build", "demo", "--corpus", str(corpus), "--workdir", str(work), "--workers", str(workers)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tree,
    )
    stdout, stderr = p.communicate()
    wall = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"build failed:\n{stdout}\n{stderr}")
    p.stdout, p.stderr = stdout, stderr
    notices = _compile_notices(p.stderr.splitlines())
    bridged = any("encoding through HF tokenizers" in line for line in p.stderr.splitlines())
    return {"wall_s": wall, "pid": p.pid, "compile_notices": len(notices), "bridged": bridged, "stderr_tail": p.stderr.strip().splitlines()[-3:]}


_STAGE_LINE = re.compile(r"^(pretokenize|count|train|export|encode-shards): .*\(([\d.]+)s\)$")
_CORPUS_LINE = re.compile(r"^demo corpus built: .*\(([\d.]+)s\)$")


def _make_demo(clone: Path, cache: Path, work: str) -> dict:
    """``make demo WORK=work`` in ``clone`` with Numba's cache in ``cache``: its wall time,
    the corpus's and each stage's seconds (from its own lines), and its compile notices."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["NUMBA_CACHE_DIR"] = str(cache)
    t0 = time.perf_counter()
    p = subprocess.run(["make", "demo", f"WORK={work}"], cwd=clone, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"make demo failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    lines = (p.stdout + "\n" + p.stderr).splitlines()
    stages = {m[1]: float(m[2]) for m in map(_STAGE_LINE.match, lines) if m}
    corpus = next((float(m[1]) for m in map(_CORPUS_LINE.match, lines) if m), None)
    notices = _compile_notices(lines)
    return {"wall_s": wall, "corpus_s": corpus, "stages_s": stages, "build_s": sum(stages.values()), "notices": notices}


def make_demo(tree: Path, tmp: Path) -> dict:
    """The first ``make demo`` from a clean clone of ``tree``'s HEAD (a new venv, packages
    from the registry, an empty Numba cache), then, once the compile it started in the
    background is done, a second one in the same clone on a new WORK folder."""
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "-q", str(tree), str(clone)], check=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip()
    cache = tmp / "numba-make-demo"
    cache.mkdir()
    first = _make_demo(clone, cache, "work")
    first["background_wait_s"] = wait_for_background(clone, cache)
    second = _make_demo(clone, cache, "work-again")
    return {"head": head, "first": first, "second": second,
            "install_s": first["wall_s"] - (first["corpus_s"] or 0) - first["build_s"],
            "first_use_s": first["build_s"] - second["build_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=HERE.parent, help="checkout whose dwstok is measured")
    ap.add_argument("--tag", default="run")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--docs", type=int, default=400, help="documents of dev in the small corpus")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--warm", action="store_true", help="also time `python -m dwstok.warm` with an empty cache")
    ap.add_argument("--model", type=Path, help="first use loads this model and no demo build runs")
    ap.add_argument("--foreground", action="store_true", help="also first use with DWSTOK_COMPILE=foreground (compiling in the first encode)")
    ap.add_argument("--make-demo", action="store_true", help="also the first `make demo` from a clean clone of the tree's HEAD (installs a venv: minutes)")
    a = ap.parse_args()
    tree = a.tree.resolve()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    res: dict = {"tree": str(tree), "tag": a.tag, "utc": stamp, "load_average": os.getloadavg(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="dwstok-cold-") as tmp:
        tmp = Path(tmp)
        if a.model is None:
            corpus = tmp / "small.parquet"
            small_corpus(corpus, a.docs)
            work = tmp / "work"
            # the build also makes the model that first use loads
            cache = tmp / "numba-build"
            cache.mkdir()
            log = tmp / "compile.log"
            cold = build(tree, corpus, work, cache, log, a.workers)
            cold["background_wait_s"] = wait_for_background(tree, cache)  # the warm run finds every kernel
            warm_build = build(tree, corpus, tmp / "work-warm", cache, tmp / "compile-warm.log", a.workers)
            lines = [ln.split(maxsplit=2) for ln in log.read_text().splitlines()] if log.exists() else []
            res["build"] = {
                "docs": a.docs, "workers": a.workers, "cold": cold, "warm": warm_build,
                "compile_wall_s": cold["wall_s"] - warm_build["wall_s"],
                "compile_logged_s": sum(float(t) for _, t, _ in lines) if lines else None,
                # the build's own process: the rest is the background compile it started
                "compile_logged_in_build_s": sum(float(t) for pid, t, _ in lines if int(pid) == cold["pid"]) if lines else None,
                "compile_logged_by_kernel": sorted(((n, float(t), int(p)) for p, t, n in lines), key=lambda r: -r[1]),
                "warm_compile_lines": (tmp / "compile-warm.log").read_text().count("\n") if (tmp / "compile-warm.log").exists() else 0,
            }
            model = work / "train" / "model.json"
        else:
            model = a.model.resolve()
        runs = [first_use(tree, model, tmp, k) for k in range(a.repeat)]
        fg = [first_use(tree, model, tmp, k, "foreground") for k in range(a.repeat)] if a.foreground else []
        if a.warm:
            res["warm"] = warm(tree, tmp)
        if a.make_demo:
            res["make_demo"] = make_demo(tree, tmp)
        res["load_average_end"] = os.getloadavg()
    res["first_use"] = {
        key: statistics.median([r[key] for r in runs])
        for key in ("import_s", "load_s", "first_encode_s", "import_to_encode_s", "load_cpu_s", "first_encode_cpu_s", "import_to_encode_cpu_s")
    }
    res["first_use_runs"] = runs
    if any("background_ready_s" in r for r in runs):
        res["background"] = {
            "ready_s": statistics.median([r["background_ready_s"] for r in runs if "background_ready_s" in r]),
            "after_ready_import_to_encode_s": statistics.median([r["after_ready"]["import_to_encode_s"] for r in runs if "after_ready" in r]),
            "after_ready_on_kernels": all(r["after_ready"]["kernels"] for r in runs if "after_ready" in r),
            "first_on_kernels": any(r["kernels"] for r in runs),
            "same_ids": all(r.get("same_ids", True) for r in runs),
        }
    if fg:
        res["foreground_runs"] = fg
        res["foreground"] = {key: statistics.median([r[key] for r in fg]) for key in ("load_s", "first_encode_s", "import_to_encode_s")}
    out = HERE / "results" / f"cold-start-{stamp}-{a.tag}"
    out.with_suffix(".json").write_text(json.dumps(res, indent=1))
    fu = res["first_use"]
    md = [f"# Cold start ({a.tag}), {stamp} UTC", "",
          f"Tree {tree}; load average {res['load_average'][0]:.1f} -> {res['load_average_end'][0]:.1f} on {res['cpus']} CPUs; empty NUMBA_CACHE_DIR, fresh processes, median of {a.repeat}; dwstok from {runs[0]['dwstok']}.", "",
          "| step | wall s | CPU s |", "| --- | --- | --- |",
          f"| `import dwstok` | {fu['import_s']:.2f} | |", f"| `Tokenizer.load` ({'demo model' if a.model is None else a.model.name}) | {fu['load_s']:.2f} | {fu['load_cpu_s']:.2f} |",
          f"| first `encode` | {fu['first_encode_s']:.2f} | {fu['first_encode_cpu_s']:.2f} |", f"| import to first ids | {fu['import_to_encode_s']:.2f} | {fu['import_to_encode_cpu_s']:.2f} |", ""]
    if "background" in res:
        bg = res["background"]
        md += [f"First use encoded through {'the kernels' if bg['first_on_kernels'] else 'the HF bridge'}; the background compile was done "
               f"{bg['ready_s']:.1f} s after the first process started; then import to first ids took {bg['after_ready_import_to_encode_s']:.2f} s "
               f"on {'the kernels' if bg['after_ready_on_kernels'] else 'the bridge'}; same ids before and after: {bg['same_ids']}.", ""]
    if "foreground" in res:
        f = res["foreground"]
        md += [f"With `DWSTOK_COMPILE=foreground` (compiling in the process): load {f['load_s']:.2f} s, first encode {f['first_encode_s']:.2f} s, "
               f"import to first ids {f['import_to_encode_s']:.2f} s.", ""]
    if "warm" in res:
        w = res["warm"]
        md += [f"`python -m dwstok.warm` with an empty cache: {w['wall_s']:.1f} s wall, {w['cpu_s']:.1f} s CPU.", ""]
    if "build" in res:
        b = res["build"]
        md += [f"First `dwstok build demo` on {b['docs']} dev documents, {b['workers']} workers: {b['cold']['wall_s']:.1f} s cold, "
               f"{b['warm']['wall_s']:.1f} s warm: **{b['compile_wall_s']:.1f} s compiling** (wall)"
               + (f"; {b['compile_logged_s']:.1f} s of compiles logged across processes, {b['compile_logged_in_build_s']:.1f} s of them in the build's own" if b["compile_logged_s"] else "")
               + f"; compile notices printed: {b['cold']['compile_notices']} cold, {b['warm']['compile_notices']} warm"
               + f"; encode-shards on the HF bridge: {b['cold'].get('bridged')} cold, {b['warm'].get('bridged')} warm"
               + (f"; the warm run waited {b['cold']['background_wait_s']:.1f} s for the background compile" if b["cold"].get("background_wait_s") is not None else "")
               + ".", ""]
    if "make_demo" in res:
        d = res["make_demo"]
        f, g = d["first"], d["second"]
        md += [f"`make demo` from a clean clone of {d['head']}: first {f['wall_s']:.1f} s (install {d['install_s']:.1f} s, corpus {f['corpus_s']:.1f} s, "
               f"build {f['build_s']:.1f} s), second {g['wall_s']:.1f} s (build {g['build_s']:.1f} s): **{d['first_use_s']:.1f} s of the first build is first use** "
               f"(compiling, or the HF bridge meanwhile); compile notices {len(f['notices'])} first, {len(g['notices'])} second.", "",
               "| stage | first s | second s |", "| --- | --- | --- |"]
        md += [f"| {k} | {f['stages_s'][k]:.1f} | {g['stages_s'].get(k, float('nan')):.1f} |" for k in f["stages_s"]]
        md += [""]
    md += ["Kernels compiled by import + load + first encode (first run, outermost only):", "", "| kernel | wall s | CPU s |", "| --- | --- | --- |"]
    md += [f"| {c[0]} | {c[1]:.2f} | {c[3]:.2f} |" for c in runs[0]["compiles"]]
    out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
