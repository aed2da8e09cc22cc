"""One parameter followed from the command line and from a notebook to the selector.

Both routes are traced with ``sys.setprofile`` while they really run (``evictlab run-policy``
through ``main``, and the parameters and loading cells of notebook 02 executed as papermill
would, with an injected ``capacities``): every call of a spine function is recorded with the
value it received. Both must pass the capacity through the same functions, from the run spec
to the engine's selector.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from evictlab.cli import main
from evictlab.resources import NOTEBOOK_DIR

#: The spine, in the order a run passes it: spec -> pools -> decisions -> selector.
SPINE = (
    "open_pools",  # evictlab.core.pools: the one way from a spec to pools
    "resolve",  # evictlab.core.runspec: the spec's files read and checked
    "DecisionPlan.build",  # evictlab.selection.decisions: the grid checked once and cut into chunks
    "DecisionPlan.batch",  # one chunk decided (run-policy's decide_run and decide_grid both)
    "PreparedCases.select",  # evictlab.selection.engine: the selector of confidence and hybrid-v1
)


def trace(action: Callable[[], object]) -> list[tuple[str, dict]]:
    """The spine calls ``action`` makes, in order, each with its arguments as received."""
    calls: list[tuple[str, dict]] = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_globals.get("__name__", "").startswith("evictlab."):
            name = frame.f_code.co_qualname
            if name in SPINE:
                calls.append((name, dict(frame.f_locals)))

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return calls


def capacities_seen(calls: list[tuple[str, dict]], name: str) -> list[tuple[int, ...]]:
    return [tuple(int(k) for k in arguments["capacities"]) for called, arguments in calls if called == name]


def run_notebook_02(injected: str) -> dict:
    """Notebook 02's parameters cell, papermill's injected cell, then its loading cell."""
    notebook = json.loads((NOTEBOOK_DIR / "02_retention.ipynb").read_text(encoding="utf-8"))
    sources = {"".join(cell["source"]): cell for cell in notebook["cells"] if cell["cell_type"] == "code"}
    parameters = next(text for text, cell in sources.items() if "parameters" in cell["metadata"].get("tags", []))
    loading = next(text for text in sources if "loaders.load_pool_set(" in text)
    assert "loaders.retention(pool_set, capacities=capacities)" in loading
    namespace: dict = {}
    exec("from evictlab.workbench import loaders", namespace)
    for source in (parameters, injected, loading):
        exec(compile(source, "02_retention.ipynb", "exec"), namespace)
    return namespace


def test_a_capacity_reaches_the_selector_through_the_same_functions_from_the_cli_and_a_notebook(tmp_path, capsys):
    argv = ["run-policy", "--output-dir", str(tmp_path / "run"), "--policies", "hybrid-v1", "--capacities", "4"]
    from_cli = trace(lambda: main(argv))
    from_notebook = trace(lambda: run_notebook_02("capacities = [4]\n"))
    capsys.readouterr()
    for calls in (from_cli, from_notebook):
        names = [name for name, _ in calls]
        assert set(names) == set(SPINE), names
        # Pools first (resolved once per spec), then one decisions plan, then the engine.
        assert names.index("open_pools") < names.index("DecisionPlan.build") < names.index("PreparedCases.select")
        assert names.count("resolve") == 1
        for name in ("DecisionPlan.build", "PreparedCases.select"):
            assert capacities_seen(calls, name) and set(capacities_seen(calls, name)) == {(4,)}, name


def test_a_weight_in_the_notebooks_spec_reaches_the_selector(capsys):
    spec = "pr4810-final:confidence_weight=0.55,confirmation_weight=0.35"
    calls = trace(lambda: run_notebook_02(f"spec = {spec!r}\ncapacities = [7]\n"))
    capsys.readouterr()
    resolved = [arguments["spec"].label for name, arguments in calls if name == "resolve"]
    assert resolved == [spec]
    settings = [arguments["settings"] for name, arguments in calls if name == "PreparedCases.select"]
    assert settings and all(setting.confidence_weight == 0.55 for batch in settings for setting in batch)
    assert all(setting.confirmation_weight == 0.35 for batch in settings for setting in batch)


def test_the_commands_that_build_pools_open_them_through_open_pools(tmp_path, capsys):
    commands = [
        ["validate", "--preset", "pr4810-run1"],
        ["explain", "--case", "3d2da0bb", "--policy", "confidence", "--capacity", "7"],
        ["diff", "--from", "pr4810-run2", "--to", "pr4810-final", "--output-dir", str(tmp_path / "diff")],
    ]
    for argv in commands:
        calls = trace(lambda argv=argv: main(argv))
        assert [name for name, _ in calls].count("open_pools") == (2 if argv[0] == "diff" else 1), argv
    capsys.readouterr()
