"""Figures of the robustness curves (notebook 09), drawn from :func:`evictlab.analysis.robustness.robustness_curves`."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ...analysis.robustness import PERTURBATIONS
from .style import (
    grid_shape,
    hide_unused,
    paper_figure,
    percent,
    policy_color,
    policy_legend,
    require_columns,
    styled,
    title_with_source,
)

_COLUMNS = ["perturbation", "level", "policy", "capacity", "cases", "mean_retained", "lower", "upper", "churn"]


@styled
def robustness_curves(curves: pd.DataFrame, capacity: int, *, source: str | None = None) -> Figure:
    """Support retained against the perturbation level at ``capacity``: one panel per perturbation.

    A solid line per policy is the mean over seeds, the band the 95% range of single seeds (2.5 %
    to 97.5 % quantiles); the dotted line of each policy is its decision churn (share of kept
    sets that changed). Both are percentages on the one y axis, so they share its zero. The
    levels are placed by value, in the perturbation's unit (a symmetric log axis when they
    span more than a factor of ten).
    """
    require_columns(curves, _COLUMNS, "robustness_curves")
    at = curves[curves["capacity"] == capacity]
    if at.empty:
        raise ValueError(f"no curves at capacity {capacity}; the frame has {sorted(curves['capacity'].unique())}")
    names = list(dict.fromkeys(at["perturbation"]))
    policies = list(dict.fromkeys(at["policy"]))
    rows, cols = grid_shape(len(names), 3)
    fig = paper_figure(2.3 * rows + 1.3)
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True)
    for index, (ax, name) in enumerate(zip(axes.flat, names)):
        levels = np.sort(at.loc[at["perturbation"] == name, "level"].unique())
        for policy in policies:
            line = at[(at["perturbation"] == name) & (at["policy"] == policy)].sort_values("level")
            x, colour = line["level"].to_numpy(dtype=float), policy_color(policy)
            ax.fill_between(x, percent(line["lower"], line["cases"]), percent(line["upper"], line["cases"]),
                            color=colour, alpha=0.2, linewidth=0)
            ax.plot(x, percent(line["mean_retained"], line["cases"]), color=colour, marker="o", linewidth=2)
            ax.plot(x, 100 * line["churn"].to_numpy(), color=colour, linestyle=":", linewidth=1.4)
        positive = levels[levels > 0]
        if len(positive) and levels.max() / positive.min() > 10:
            ax.set_xscale("symlog", linthresh=positive.min())
        ax.set_xticks(levels, [f"{level:g}" for level in levels], rotation=90 if len(levels) > 4 else 0)
        ax.minorticks_off()
        unit = PERTURBATIONS[name].unit if name in PERTURBATIONS else "level"
        ax.set_xlabel(f"{name} ({unit})")
        if index % cols == 0:
            ax.set_ylabel("% (solid: supports retained, dotted: kept sets changed)")
        ax.set_ylim(0, 105)
        ax.grid(True)
    hide_unused(axes, len(names))
    styles = [Line2D([], [], color="black", linewidth=2, marker="o", label="support retained (mean)"),
              Line2D([], [], color="black", linestyle=":", linewidth=1.4, label="decision churn")]
    policy_legend(fig, policies, extra=styles)
    title_with_source(fig, f"Robustness at capacity {capacity}: mean over seeds (line), 95% of single seeds (band),"
                           " churn (dotted)", source)
    return fig
