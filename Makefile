# One place for every developer and CI command. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin


.PHONY: all venv test lint typecheck contract proto pytest demo bench fmt clean chromium bubblewrap test-real-model docs

all: test

# The environment is (re)built whenever pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

## test: everything CI checks — contract gate, lint, types, the docs, the test suite.
test: venv contract lint typecheck docs pytest

## docs: the documentation site (docs/, MyST Markdown) into build/docs/; strict: any
## warning (a broken link or anchor, a page in no toctree) fails the build. Built anew
## each time: an incremental build would not re-check the links of a page that did not
## change into a heading that did, and would keep the HTML of a page that is gone.
docs: venv
	rm -rf build/docs
	$(BIN)/sphinx-build -W --keep-going -n -q -b html docs build/docs

## test-real-model: the whole service against SmolLM2-135M-Instruct behind llama-cpp-python's
## server on loopback (its own venv, REAL_VENV; figures in out/real_model.json).
REAL_VENV ?= .venv-real-model

$(REAL_VENV)/.installed: scripts/real_model_venv.sh
	PYTHON=$(PYTHON) scripts/real_model_venv.sh $(REAL_VENV)

test-real-model: venv $(REAL_VENV)/.installed
	mkdir -p out
	EVALD_REAL_MODEL_PYTHON=$(REAL_VENV)/bin/python EVALD_REAL_MODEL_REPORT=out/real_model.json \
		$(BIN)/pytest -q -p no:cacheprovider --timeout 600 tests/real_model
	@cat out/real_model.json

## contract: buf lint, buf format, buf breaking against the released baseline, codegen drift.
contract: venv
	$(PY) scripts/contract_gate.py

## proto: regenerate the Python contract code from proto/ (never edit it by hand).
proto: venv
	$(PY) scripts/gen_protos.py

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

## pytest: the suite on PYTEST_WORKERS parallel processes (pytest-xdist; each test makes
## its own server, port, SQLite file and PostgreSQL database). Most tests wait on
## servers and providers rather than the CPU: on 2 cores CI's whole run went from 761 s
## (one process) to 616 s (4 workers), with more tests; 2 and 4 are not yet compared.
PYTEST_WORKERS ?= 4

pytest: venv
	$(BIN)/pytest -q -n $(PYTEST_WORKERS)

## chromium: Debian's headless browser for the HTML report's browser test (CI runs this;
## without it that one test is skipped outside CI).
chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

## bubblewrap: the code sandbox's isolation tool (CI runs this; without it the sandbox's
## tests are skipped outside CI and code tasks are refused).
bubblewrap:
	@command -v bwrap >/dev/null || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }

fmt: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## demo: server + simulated models + bundled datasets, live progress, results.
demo: venv
	$(BIN)/evald demo

## bench: the benchmarks of bench/; prints tables and writes JSON under bench/results/.
bench: venv
	$(PY) -m bench

clean:
	rm -rf $(VENV) $(REAL_VENV) .mypy_cache .ruff_cache .pytest_cache
