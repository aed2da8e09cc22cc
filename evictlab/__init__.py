"""evictlab: a workbench for deciding what an agent's long-term memory should forget.

``import evictlab as el`` gives the spine; everything else is implementation, reached through
these names and not meant to be imported by path::

    pools = el.open_pools(el.parse_spec("pr4810-final"))         # the 45 pools of a run spec
    frame = el.decide_grid(pools, ["confidence", "hybrid-v1"])  # one tidy decisions frame
    el.plots.retention_by_scenario(frame)                        # a matplotlib Figure
    el.load_runs("results")                                      # every run record, one row each

The names are imported on first use, so ``import evictlab`` (and ``evictlab --help``) loads
no numpy or pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: The public face: name -> the module that defines it (``plots`` is a package of its own).
_PUBLIC = {
    "RunSpec": "evictlab.core.runspec",
    "parse_spec": "evictlab.core.runspec",
    "open_pools": "evictlab.core.pools",
    "resolve_policy": "evictlab.policies",
    "decide_grid": "evictlab.selection.decisions",
    "explain": "evictlab.selection.explain",
    "run_sweep": "evictlab.analysis.sweep",
    "load_sweep": "evictlab.analysis.sweep_output",
    "replay": "evictlab.analysis.traces.replay",
    "load_runs": "evictlab.results",
    "plots": "evictlab.workbench.plots",
}

__all__ = [
    "RunSpec", "__version__", "decide_grid", "explain", "load_runs", "load_sweep", "open_pools", "parse_spec",
    "plots", "replay", "resolve_policy", "run_sweep",
]  # fmt: skip

if TYPE_CHECKING:  # what a type checker and an editor see; nothing is imported at run time
    from .analysis.sweep import run_sweep
    from .analysis.sweep_output import load_sweep
    from .analysis.traces.replay import replay
    from .core.pools import open_pools
    from .core.runspec import RunSpec, parse_spec
    from .policies import resolve_policy
    from .results import load_runs
    from .selection.decisions import decide_grid
    from .selection.explain import explain
    from .workbench import plots


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'evictlab' has no attribute {name!r}")
    imported = importlib.import_module(module)
    value = imported if name == "plots" else getattr(imported, name)
    globals()[name] = value  # later uses skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
