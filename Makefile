# Two commands do everything on a fresh machine:
#   make report   set up .venv and run the main job on the embedded demo dataset
#   make test     set up the same .venv and run the whole test suite

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.evictlab-installed
PYTEST_WORKERS ?= 2

.PHONY: setup report test benchmark lab clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

report: $(STAMP)
	$(BIN)/evictlab report

test: $(STAMP)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

benchmark: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
