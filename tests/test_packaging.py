"""The wheel: what it holds, and what a fresh venv with it installed can do.

The wheel is built from a copy of the tracked files (so the checkout gets no build/ or
egg-info), without build isolation (setuptools and wheel come from the test extra).

The fresh venv gets the wheel with ``--no-deps`` and borrows the dependencies from the
running environment through a ``.pth`` line. A ``.pth`` line only appends a folder to
``sys.path``: the ``.pth`` files *inside* that folder (an editable install of this
checkout) are not run, so ``dwstok``, ``stages`` and the presets come from the wheel.
Set ``DWSTOK_TEST_ONLINE_INSTALL=1`` to install the dependencies from the package
registry instead (a true fresh install; needs network).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _pip(*args: str, python: Path | None = None) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    if python is not None:
        cmd += ["--python", str(python)]
    # without PYTHONPATH: a checkout on it would read as dwstok already installed
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(cmd + list(args), check=True, capture_output=True, timeout=600, env=env)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        p = ROOT / name
        if p.is_file() and not p.is_symlink():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, src / name)
    out = tmp_path_factory.mktemp("dist")
    _pip("wheel", "--no-deps", "--no-build-isolation", str(src), "-w", str(out))
    (whl,) = out.glob("dwstok-*.whl")
    return whl


def test_wheel_holds_the_presets_the_plugin_and_the_package_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for preset in ("32.1", "32.2", "32.3", "demo"):
        assert f"stages/configs/{preset}.yaml" in names
    assert "tiktoken_ext/dwstok.py" in names and "tiktoken_ext/__init__.py" not in names  # a namespace package
    assert "dwstok/data/unicode_classes.zlib" in names
    assert {"dwstok/tiktoken_compat.py", "dwstok/export_files.py", "dwstok_cli/config_cmd.py"} <= names
    assert not any(n.startswith(("tests/", "bench/", "configs/")) for n in names)
    ep = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "dwstok = dwstok_cli.main:main" in ep


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("venv")
    online = os.environ.get("DWSTOK_TEST_ONLINE_INSTALL") == "1"
    subprocess.run([sys.executable, "-m", "venv", *([] if online else ["--without-pip"]), str(d)], check=True, timeout=300)
    py = d / "bin" / "python"
    if online:
        subprocess.run([str(py), "-m", "pip", "install", "-q", f"{wheel}[tiktoken]"], check=True, timeout=1800)
    else:
        purelib = subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        Path(purelib, "_dwstok_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        _pip("install", "--no-deps", str(wheel), python=py)
    return d


def run(venv: Path, *args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | (env or {})
    return subprocess.run([str(a) for a in args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=3600)


def test_installed_wheel_runs_from_anywhere(venv, tmp_path):
    # imports come from the venv, not this checkout; presets are found in the package
    r = run(venv, venv / "bin" / "python", "-c",
            "import dwstok, stages, tiktoken_ext; print(dwstok.__file__); print(stages.__file__)", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert all(line.startswith(str(venv)) for line in r.stdout.splitlines())
    r = run(venv, venv / "bin" / "dwstok", "config", "show", "32.3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (ROOT / "stages" / "configs" / "32.3.yaml").read_text()
    r = run(venv, venv / "bin" / "dwstok", "config", "list", cwd=tmp_path)
    assert str(venv) in r.stdout and "32.3" in r.stdout


@pytest.mark.slow
def test_installed_wheel_builds_32_3_and_reports(venv, tmp_path, corpus_dir):
    """`dwstok build 32.3` on a small corpus, `dwstok info`, and the tiktoken plugin, all
    from the installed wheel (a fresh Numba cache: minutes of compiling)."""
    import pyarrow.parquet as pq

    rows = pq.read_table(corpus_dir / "dev.parquet", columns=["text", "lang"]).slice(0, 200).to_pylist()
    corpus = tmp_path / "small.jsonl"
    corpus.write_text("".join(json.dumps({"text": r["text"][:2000], "lang": r["lang"]}) + "\n" for r in rows))
    dwstok = venv / "bin" / "dwstok"
    r = run(venv, dwstok, "build", "32.3", "--corpus", corpus, "--workdir", "w", "--workers", "1",
            "--set", "vocab_size=800", "--set", "han.coverage=null", "--set", "han.count=50", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run(venv, dwstok, "info", "w/train/model.json", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["version"] == "32.3"
    code = "import tiktoken; print(tiktoken.get_encoding('dwslmtok-32.3').n_vocab)"
    r = run(venv, venv / "bin" / "python", "-c", code, cwd=tmp_path, env={"DWSTOK_TIKTOKEN_DIRS": str(tmp_path / "w")})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "800"
