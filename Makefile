# The two commands that open the README.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev
# run and figs need only the plotting extra (no torch): their own stamp.
STAMP_FIGS := $(VENV)/.installed-figs

.PHONY: run test lint typecheck pytest bench figs clean

$(BIN)/python:
	$(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP_RUN): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) install -q -c constraints.txt -e .
	touch $@

$(STAMP_FIGS): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) install -q -c constraints.txt -e ".[figs]"
	touch $@ $(STAMP_RUN)

$(STAMP_DEV): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) install -q -c constraints.txt -e ".[dev,calibrate,figs,tables]"
	touch $@ $(STAMP_RUN) $(STAMP_FIGS)

run: $(STAMP_FIGS)
	$(BIN)/libra-des quickstart --out out

lint: $(STAMP_DEV)
	$(BIN)/ruff check libra_des paper_figs tests benchmarks calibration

typecheck: $(STAMP_DEV)
	$(BIN)/mypy libra_des paper_figs

pytest: $(STAMP_DEV)
	$(BIN)/python -m pytest -n 2 tests

test: lint typecheck pytest

bench: $(STAMP_RUN)
	$(BIN)/python benchmarks/planners.py
	$(BIN)/python benchmarks/scale.py

figs: $(STAMP_FIGS)
	$(BIN)/libra-des figs --quick --out figs

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache

# Regenerate libra_des/sim/chakra/et_def_pb2.py(i) from et_def.proto (needs grpcio-tools;
# the runtime needs only protobuf). Commit the generated files.
.PHONY: chakra-proto
chakra-proto:
	$(PY) -m grpc_tools.protoc -I. --python_out=. --pyi_out=. libra_des/sim/chakra/et_def.proto
