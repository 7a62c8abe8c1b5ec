# The two commands that open the README.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev

.PHONY: run test lint typecheck pytest bench figs clean

$(BIN)/python:
	$(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP_RUN): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) install -q -c constraints.txt -e .
	touch $@

$(STAMP_DEV): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) install -q -c constraints.txt -e ".[dev,calibrate,figs]"
	touch $@ $(STAMP_RUN)

run: $(STAMP_RUN)
	$(BIN)/libra-des quickstart

lint: $(STAMP_DEV)
	$(BIN)/ruff check libra_des tests benchmarks calibration paper_figs

typecheck: $(STAMP_DEV)
	$(BIN)/mypy libra_des

pytest: $(STAMP_DEV)
	$(BIN)/python -m pytest -n 2 tests

test: lint typecheck pytest

bench: $(STAMP_RUN)
	$(BIN)/python benchmarks/planners.py
	$(BIN)/python benchmarks/scale.py

figs: $(STAMP_DEV)
	$(BIN)/python -m paper_figs.all --out figs --quick

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
