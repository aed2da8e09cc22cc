"""Figures of the robustness curves (notebook 09), drawn from :func:`evictlab.analysis.robustness.robustness_curves`."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .style import (
    grid_shape,
    hide_unused,
    label_panels,
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

    A line per policy is the mean over seeds, the band the 95% range of single seeds (2.5 %
    to 97.5 % quantiles); the dotted line of each policy is its decision churn (share of kept
    sets that changed), on the right axis.
    """
    require_columns(curves, _COLUMNS, "robustness_curves")
    at = curves[curves["capacity"] == capacity]
    if at.empty:
        raise ValueError(f"no curves at capacity {capacity}; the frame has {sorted(curves['capacity'].unique())}")
    names = list(dict.fromkeys(at["perturbation"]))
    policies = list(dict.fromkeys(at["policy"]))
    rows, cols = grid_shape(len(names), 3)
    fig = Figure(figsize=(13, 3.6 * rows + 1.4), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True)
    for ax, name in zip(axes.flat, names):
        churn_axis = ax.twinx()
        for policy in policies:
            line = at[(at["perturbation"] == name) & (at["policy"] == policy)].sort_values("level")
            x = np.arange(len(line))
            colour = policy_color(policy)
            ax.fill_between(x, percent(line["lower"], line["cases"]), percent(line["upper"], line["cases"]),
                            color=colour, alpha=0.2, linewidth=0)
            ax.plot(x, percent(line["mean_retained"], line["cases"]), color=colour, marker="o", linewidth=2)
            churn_axis.plot(x, 100 * line["churn"].to_numpy(), color=colour, linestyle=":", linewidth=1.4)
            ax.set_xticks(x, [f"{level:g}" for level in line["level"]])
        churn_axis.set_ylim(0, 100)
        churn_axis.set_ylabel("decision churn (%, dotted)", fontsize=8)
        ax.set_title(name)
        ax.set_ylim(0, 105)
        ax.grid(color="#e5e5e5", linewidth=0.7)
        ax.set_axisbelow(True)
    label_panels(axes, len(names), "perturbation level", "support retained (% of cases)")
    hide_unused(axes, len(names))
    policy_legend(fig, policies)
    title_with_source(
        fig,
        f"Robustness at capacity {capacity}: mean over seeds (line), 95% of single seeds (band), churn (dotted)",
        source,
    )
    return fig
