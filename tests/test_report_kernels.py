"""What a warm kernel imports before its notebook runs (the kernels themselves: test_report.py)."""

from __future__ import annotations

import json

from evictlab.resources import NOTEBOOK_DIR
from evictlab.workbench.report_kernels import WARM_IMPORTS, notebook_imports, warm_code


def test_a_notebook_s_imports_are_warmed_and_its_magics_skipped(tmp_path):
    path = tmp_path / "nb.ipynb"
    cells = [
        {"cell_type": "markdown", "source": "import not_code"},
        {"cell_type": "code", "source": ["import pandas as pd\n", "%matplotlib inline\n", "!ls\n"]},
        {"cell_type": "code", "source": "from evictlab.sweep import make_grid, run_sweep\nfrom . import local"},
        {"cell_type": "code", "source": "def f(:\n    import broken"},  # unparsable: skipped
    ]
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    modules = notebook_imports(path)
    assert modules[: len(WARM_IMPORTS)] == WARM_IMPORTS
    assert set(modules[len(WARM_IMPORTS):]) == {
        "pandas", "evictlab.sweep", "evictlab.sweep.make_grid", "evictlab.sweep.run_sweep"}
    assert notebook_imports(tmp_path / "missing.ipynb") == WARM_IMPORTS


def test_the_suite_s_modules_are_named():
    modules = notebook_imports(NOTEBOOK_DIR / "03_weight_sweep.ipynb")
    expected = {"pandas", "evictlab.workbench.plots", "evictlab.analysis.validation", "evictlab.analysis.sweep"}
    assert expected <= set(modules)


def test_warming_imports_what_it_can_and_leaves_no_names():
    namespace: dict = {}
    exec(warm_code(["json", "json.decoder", "json.no_such_module", "no_such_package"]), namespace)
    assert set(namespace) == {"__builtins__"}


def test_the_notebooks_a_previous_report_timed_longest_start_first(tmp_path):
    from types import SimpleNamespace

    from evictlab.workbench.report import NotebookRun, longest_first

    names = ("01.ipynb", "02.ipynb", "03.ipynb", "04.ipynb")
    runs = [NotebookRun(name, tmp_path / name, tmp_path / "out" / name) for name in names]
    assert longest_first(runs, None) == [0, 1, 2, 3]
    previous = SimpleNamespace(summary={"notebooks": [
        {"name": "01.ipynb", "cpu_seconds": 2.0, "duration_seconds": 9.0},
        {"name": "02.ipynb", "cpu_seconds": None, "duration_seconds": 30.0},  # no CPU time: its duration
        {"name": "03.ipynb", "cpu_seconds": 14.0},
        "not a notebook entry",
    ]})
    # 04 was not in the previous report: it keeps its place ahead of the timed ones.
    assert longest_first(runs, previous) == [3, 1, 2, 0]
