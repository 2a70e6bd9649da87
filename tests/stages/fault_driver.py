"""Crash a build after each of its file operations; check that a re-run equals a clean build.

Run as a script (tests/stages/test_fault_injection.py does): it imports and warms
everything once, then forks one child per crash point, so a sweep of hundreds of crash
points costs no imports. A child counts the file operations inside the workdir (open
for writing, os.replace/rename, unlink, link, mkdir, rmdir, rmtree) and calls
``os._exit`` right after operation N: as a ``kill -9`` would, it leaves everything as it
is. A second child then re-runs the build without faults, and the workdir is compared
with a clean build: every file byte for byte, manifests without their timing fields.

    python tests/stages/fault_driver.py CONFIG_A CONFIG_B CORPUS OUT_JSON [STRIDE]

Scenarios: "fresh" (config A into an empty workdir) and "rebuild" (config B over a
finished build of A: the staged swap replaces every stage's result).
"""

from __future__ import annotations

import builtins
import io
import json
import os
import shutil
import sys
import time
from pathlib import Path

CRASH_EXIT = 99


def build(config_path: str, corpus: str, workdir: Path) -> None:
    from stages import STAGES, Inputs, get_run
    from stages.config import load_config
    from stages.executors import LocalExecutor

    cfg = load_config(config_path)
    inputs = Inputs(corpus=(corpus,), workdir=str(workdir))
    ex = LocalExecutor(1)
    for stage in STAGES:
        get_run(stage)(cfg, inputs, workdir / stage, ex)


def snapshot(workdir: Path) -> dict[str, object]:
    """Every file under ``workdir``: bytes, or for manifests the JSON without the run's
    own story (``created``, ``timings``, ``resumed_shards``), the workdir's path replaced."""
    out: dict[str, object] = {}
    for p in sorted(workdir.rglob("*")):
        if not p.is_file() or p.name == ".dwstok.lock":
            continue
        rel = str(p.relative_to(workdir))
        if p.name == "_manifest.json":
            # Manifests name upstream folders by path: compare them relative to the workdir.
            d = json.loads(p.read_text().replace(str(workdir), "WORKDIR"))
            d.pop("created", None)
            d.pop("timings", None)
            # How many shards a run found done is the run's story, not the result.
            d["counts"] = {k: v for k, v in d.get("counts", {}).items() if not k.startswith("resumed")}
            out[rel] = d
        else:
            out[rel] = p.read_bytes()
    return out


class Faults:
    """Counts file operations under ``root``; exits the process right after number ``at``."""

    def __init__(self, root: Path, at: int | None):
        self.root = str(root)
        self.at = at
        self.n = 0

    def _hit(self, *paths) -> None:
        if any(self._inside(p) for p in paths):
            self.n += 1
            if self.at is not None and self.n >= self.at:
                os._exit(CRASH_EXIT)

    def _inside(self, p) -> bool:
        try:
            return os.path.abspath(os.fspath(p)).startswith(self.root)
        except TypeError:  # a file descriptor
            return False

    def install(self) -> None:
        import pyarrow

        def wrap(fn, n_paths=1):
            def inner(*a, **k):
                r = fn(*a, **k)
                self._hit(*a[:n_paths])
                return r

            return inner

        for name in ("unlink", "remove", "mkdir", "rmdir"):
            setattr(os, name, wrap(getattr(os, name)))
        for name in ("replace", "rename", "link"):
            setattr(os, name, wrap(getattr(os, name), 2))
        shutil.rmtree = wrap(shutil.rmtree)
        real_open = io.open

        def opener(file, mode="r", *a, **k):
            f = real_open(file, mode, *a, **k)
            if any(c in mode for c in "wax+"):
                self._hit(file)
            return f

        builtins.open = io.open = opener
        real_osfile = pyarrow.OSFile

        def osfile(path, mode="r", *a, **k):
            f = real_osfile(path, mode, *a, **k)
            if mode != "r":
                self._hit(path)
            return f

        pyarrow.OSFile = osfile


def in_child(fn) -> int:
    """Run ``fn`` in a forked child; its exit status (0 when it returns)."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            fn()
        except BaseException as e:  # noqa: BLE001
            print(f"child failed: {type(e).__name__}: {e}", file=sys.stderr)
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def main() -> None:
    config_a, config_b, corpus, out_json = sys.argv[1:5]
    stride = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    base = Path(out_json).parent / "fault-work"
    shutil.rmtree(base, ignore_errors=True)
    t0 = time.perf_counter()
    # Clean builds (also warms every kernel and import in this parent).
    clean = {}
    for name, cfg in (("A", config_a), ("B", config_b)):
        w = base / f"clean-{name}"
        build(cfg, corpus, w)
        clean[name] = snapshot(w)
    scenarios = {"fresh": (None, config_a, "A"), "rebuild": ("A", config_b, "B")}
    results: dict[str, dict] = {}
    for scen, (start, cfg, want) in scenarios.items():
        # How many operations does the faultless run make?
        w = base / f"count-{scen}"
        if start:
            shutil.copytree(base / f"clean-{start}", w)

        def counted(w=w, cfg=cfg):
            f = Faults(w, None)
            f.install()
            build(cfg, corpus, w)
            (w.parent / f"{w.name}.n").write_text(str(f.n))

        assert in_child(counted) == 0
        total = int((base / f"count-{scen}.n").read_text())
        bad = []
        points = list(range(1, total + 1, stride))
        for n in points:
            w = base / f"{scen}-{n}"
            if start:
                shutil.copytree(base / f"clean-{start}", w)

            def crash(w=w, n=n, cfg=cfg):
                Faults(w, n).install()
                build(cfg, corpus, w)

            code = in_child(crash)
            if code != CRASH_EXIT:
                bad.append({"at": n, "problem": f"the crashing run exited {code}"})
                continue
            code = in_child(lambda w=w, cfg=cfg: build(cfg, corpus, w))
            if code != 0:
                bad.append({"at": n, "problem": f"the re-run exited {code}"})
            else:
                snap = snapshot(w)
                if snap != clean[want]:
                    diff = sorted(k for k in set(snap) | set(clean[want]) if snap.get(k) != clean[want].get(k))
                    bad.append({"at": n, "problem": "differs from a clean build", "files": diff[:10]})
            shutil.rmtree(w, ignore_errors=True)
        results[scen] = {"operations": total, "crash_points": len(points), "failures": bad}
    results["seconds"] = round(time.perf_counter() - t0, 1)
    Path(out_json).write_text(json.dumps(results, indent=1))
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
