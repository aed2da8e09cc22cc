"""Figures of the workbench: pure functions from tidy frames to matplotlib Figures.

Every function builds a new :class:`matplotlib.figure.Figure` (no pyplot, so no backend and
no global figure registry is involved) and returns it; nothing here changes ``rcParams``,
selects a backend or touches the file system except :func:`save`. The house style is applied
with :func:`matplotlib.rc_context` while a figure is built, so it is restored afterwards.

Every figure function (and :class:`ExplorerFigure`) takes an optional ``source``, the data's
origin, shown on a line under the title, so that a saved file (and the report's copy of it)
still says what it shows. The notebooks pass the dataset's
:func:`~evictlab.workbench.loaders.dataset_label` (which says "synthetic demo data" for the
embedded demo) with the spec, the QA run's label, or the workload generator.

Colours come from the Okabe-Ito palette, which stays distinguishable under the common forms
of colour blindness; a policy has the same colour in every figure (:data:`POLICY_COLORS`,
:func:`policy_color`). :func:`save` writes PNG and SVG files whose bytes depend only on the
figure: no dates, no software version, a fixed SVG id salt.

The modules, one per family of figures; use them through this package
(``plots.retention_by_scenario(frame)``):

* :mod:`.style`: palette, house style and the panel helpers the figure modules share;
* :mod:`.saving`: :func:`save`, :func:`save_into`, :func:`figure_title`;
* :mod:`.pools` (notebook 01), :mod:`.retention` (02), :mod:`.qa` (06);
* :mod:`.sweeps` (03, 04): weight-simplex maps and half-life heatmaps;
* :mod:`.variants` (05): the protocol-variant cascade;
* :mod:`.explorer` (07, 08): the explorer's live figure and the explanation figure;
* :mod:`.zoo` (04, 08): the policy-zoo heatmap and capacity curves;
* :mod:`.robustness` (09): retention and churn against perturbation levels;
* :mod:`.traces` (10): trace-mode capacity curves, stage losses, study advantages and loss maps;
* :mod:`.store`: the shadow-mode figure of an imported store's audit.
"""

from __future__ import annotations

from ...core.manifests import SCENARIOS
from ...palette import OKABE_ITO, OKABE_ITO_SHADES
from .explorer import EXPLORER_DPI, ExplorerFigure, explanation_figure, score_weights
from .pools import evidence_lengths, pool_metadata, pool_overview
from .qa import qa_accuracy, qa_grade_rules, qa_paired, qa_tokens
from .retention import retention_by_scenario, support_rank_distribution
from .robustness import robustness_curves
from .saving import FIGURE_DPI, SVG_HASH_SALT, SavedFigure, figure_title, save, save_into
from .store import shadow_figure
from .style import (
    ALL_CASES,
    POLICY_COLORS,
    SCENARIO_COLORS,
    SEQUENTIAL_CMAP,
    policy_color,
    policy_order,
    scenario_order,
)
from .sweeps import (
    CONTROL_SCENARIOS,
    DEERMEM_HALF_LIVES,
    DEERMEM_WEIGHTS,
    WEIGHT_COLUMNS,
    control_losses,
    half_life_heatmaps,
    lattice_step,
    stability_maps,
    ternary_xy,
    weight_simplex_maps,
)
from .traces import best_baseline, loss_map_figure, stage_losses, study_advantage, trace_capacity_curves
from .variants import (
    CASCADE_METRICS,
    cascade_changes,
    cascade_retention,
    variant_cascade,
)
from .zoo import capacity_curves, zoo_heatmap

__all__ = [
    "ALL_CASES",
    "CASCADE_METRICS",
    "CONTROL_SCENARIOS",
    "DEERMEM_HALF_LIVES",
    "DEERMEM_WEIGHTS",
    "EXPLORER_DPI",
    "FIGURE_DPI",
    "OKABE_ITO",
    "OKABE_ITO_SHADES",
    "POLICY_COLORS",
    "SCENARIOS",
    "SCENARIO_COLORS",
    "SEQUENTIAL_CMAP",
    "SVG_HASH_SALT",
    "WEIGHT_COLUMNS",
    "ExplorerFigure",
    "SavedFigure",
    "best_baseline",
    "capacity_curves",
    "cascade_changes",
    "cascade_retention",
    "control_losses",
    "evidence_lengths",
    "explanation_figure",
    "figure_title",
    "half_life_heatmaps",
    "lattice_step",
    "loss_map_figure",
    "policy_color",
    "policy_order",
    "pool_metadata",
    "pool_overview",
    "qa_accuracy",
    "qa_grade_rules",
    "qa_paired",
    "qa_tokens",
    "retention_by_scenario",
    "robustness_curves",
    "save",
    "save_into",
    "scenario_order",
    "score_weights",
    "shadow_figure",
    "stability_maps",
    "stage_losses",
    "study_advantage",
    "support_rank_distribution",
    "ternary_xy",
    "trace_capacity_curves",
    "variant_cascade",
    "weight_simplex_maps",
    "zoo_heatmap",
]
