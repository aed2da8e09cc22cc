# Two commands do everything on a fresh machine:
#   make report   set up .venv and run the main job on the embedded demo dataset
#   make test     set up the same .venv and run the whole test suite

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.evictlab-installed
PYTEST_WORKERS ?= 2

.PHONY: setup report test benchmark lab clean help notebook-filter

setup: $(STAMP) notebook-filter

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

report: $(STAMP)
	$(BIN)/evictlab report
	@echo "Run '. $(BIN)/activate' to use the bare 'evictlab ...' commands of the README."

test: $(STAMP)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

benchmark: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

# Jupyter refuses to start as root (containers, CI, cloud notebooks) without --allow-root.
LAB_FLAGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP) notebook-filter
	$(BIN)/jupyter lab $(LAB_FLAGS) notebooks/

# Notebooks are committed without outputs: git runs nbstripout (from this checkout's .venv)
# on every *.ipynb it stages or diffs (.gitattributes names the filter).
notebook-filter: $(STAMP)
	@git rev-parse --git-dir >/dev/null 2>&1 || exit 0; \
	git config filter.nbstripout.clean '$(BIN)/python -m nbstripout' && \
	git config filter.nbstripout.smudge cat && \
	git config diff.ipynb.textconv '$(BIN)/python -m nbstripout -t'

help:
	@echo "make report          set up .venv and run the notebook suite on the demo dataset"
	@echo "make test            set up .venv and run the whole test suite"
	@echo "make lab             JupyterLab on the notebooks (adds --allow-root when run as root)"
	@echo "make benchmark       the speed measurements in benchmarks/"
	@echo "make setup           only create .venv and install the notebook output filter"
	@echo "make clean           remove .venv and build leftovers"
	@echo
	@echo "Then: . $(BIN)/activate    (puts evictlab and jupyter on PATH for this shell)"

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
