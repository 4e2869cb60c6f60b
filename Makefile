# One place for every developer and CI command. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin

.PHONY: all venv test lint typecheck contract proto pytest demo bench fmt clean chromium

all: test

# The environment is (re)built whenever pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

## test: everything CI checks — contract gate, lint, types, the test suite.
test: venv contract lint typecheck pytest

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

pytest: venv
	$(BIN)/pytest -q

## chromium: Debian's headless browser for the HTML report's browser test (CI runs this;
## without it that one test is skipped outside CI).
chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

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
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
