"""The protocol-variant cascade (notebook 05): what each preset step changes, and retention per preset.

:func:`cascade_changes` and :func:`cascade_retention` turn :mod:`evictlab.analysis.diff` summaries into
tidy tables; :func:`variant_cascade` draws them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .style import (
    MARKERS,
    OKABE_ITO,
    bottom_legend,
    paper_width,
    percent,
    policy_color,
    require_columns,
    styled,
    title_with_source,
)

# One colour per cascade step (the steps are not policies).
_STEP_COLORS = (OKABE_ITO["sky_blue"], OKABE_ITO["orange"], OKABE_ITO["reddish_purple"], OKABE_ITO["bluish_green"])

CASCADE_METRICS = (
    "pools: other records or metadata",
    "pools: record text",
    "distractor draws",
)


def cascade_changes(summaries: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """What each step of a preset cascade changes, from :mod:`evictlab.analysis.diff` summaries in order.

    One row per step and measure: ``step`` ("from -> to"), ``measure``, ``changed``, ``total``,
    ``changed_share``. Measures: pools whose records or metadata changed, pools whose record
    text changed, distractor draws, kept sets and support retention at each capacity (both
    policies), answer prompts at the QA capacity.
    """
    if not summaries:
        raise ValueError("cascade_changes needs at least one diff summary")
    records = []
    for summary in summaries:
        step = f"{_side_label(summary['from'])} -> {_side_label(summary['to'])}"
        measures = [
            (CASCADE_METRICS[0], summary["pools_changed"], summary["pools_total"]),
            (CASCADE_METRICS[1], summary["pools_content_changed"], summary["pools_total"]),
            (CASCADE_METRICS[2], summary["distractor_draws_changed"], summary["distractor_draws_total"]),
        ]
        for capacity in map(str, summary["capacities"]):
            measures.append((f"kept sets, capacity {capacity}", summary["kept_sets_changed"][capacity],
                             summary["kept_sets_total"][capacity]))
        for capacity in map(str, summary["capacities"]):
            measures.append((f"support retention, capacity {capacity}", summary["support_retention_changed"][capacity],
                             summary["kept_sets_total"][capacity]))
        measures.append((f"answer prompts, capacity {summary['qa_capacity']}", summary["prompts_changed"],
                         summary["prompts_total"]))
        for measure, changed, total in measures:
            records.append({"step": step, "measure": measure, "changed": int(changed), "total": int(total),
                            "changed_share": changed / total if total else math.nan})
    return pd.DataFrame.from_records(records)


def cascade_retention(summaries: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Support retained per preset (in cascade order), policy and capacity, from diff summaries.

    Columns ``preset``, ``policy``, ``capacity``, ``retained``, ``cases``.
    """
    if not summaries:
        raise ValueError("cascade_retention needs at least one diff summary")
    records = []
    for index, summary in enumerate(summaries):
        sides = (("from", "to") if index == 0 else ("to",))
        for side in sides:
            for capacity, per_policy in summary["support_retained"].items():
                for policy, counts in per_policy.items():
                    records.append({"preset": _side_label(summary[side]), "policy": policy, "capacity": int(capacity),
                                    "retained": int(counts[side]), "cases": int(summary["pools_total"])})
    return pd.DataFrame.from_records(records)


def _side_label(side: Mapping[str, Any]) -> str:
    return str(side.get("label") or side.get("preset") or "?")


@styled
def variant_cascade(changes: pd.DataFrame, retention: pd.DataFrame, *, source: str | None = None) -> Figure:
    """The preset cascade: what each step changes (top) and support retained per preset (below).

    ``changes``: :func:`cascade_changes`; ``retention``: :func:`cascade_retention`.
    """
    require_columns(changes, ["step", "measure", "changed", "total"], "variant_cascade changes")
    require_columns(retention, ["preset", "policy", "capacity", "retained", "cases"], "variant_cascade retention")
    steps = list(dict.fromkeys(changes["step"]))
    measures = list(dict.fromkeys(changes["measure"]))
    height = 1.0 + 0.24 * len(measures) * max(1, len(steps))
    fig = Figure(figsize=(paper_width(), height + 2.4), layout="constrained")
    # Stacked, each in a subfigure of its own, so that the long measure names narrow only their panel.
    top, below = fig.subfigures(2, 1, height_ratios=[height, 2.4])  # type: ignore[misc]  # two: an array
    left, right = top.subplots(), below.subplots()
    height = 0.8 / len(steps)
    y = np.arange(len(measures))
    for index, step in enumerate(steps):
        rows = changes[changes["step"] == step].set_index("measure").reindex(measures)
        share = percent(rows["changed"], rows["total"])
        offset = (index - (len(steps) - 1) / 2) * height
        color = _STEP_COLORS[index % len(_STEP_COLORS)]
        left.barh(y + offset, share, height, color=color, edgecolor="black", linewidth=0.5, label=step)
        for yi, value, changed, total in zip(y + offset, share, rows["changed"], rows["total"]):
            left.text(value + 1, yi, f"{int(changed)}/{int(total)}", va="center")
    left.set_yticks(y, measures)
    left.set_ylim(len(measures) - 0.5, -0.5)
    left.set_xlim(0, 118)
    left.set_xticks([0, 25, 50, 75, 100])
    left.set_xlabel("changed (% of the total; labels: changed/total)")
    left.set_ylabel("what is compared")
    left.set_title("What each step changes")

    presets = list(dict.fromkeys(retention["preset"]))
    capacities = sorted(retention["capacity"].unique())
    styles = ("-", "--", ":", "-.")
    x = np.arange(len(presets))
    # Lines that coincide are drawn side by side (a small shift along x per capacity).
    shifts = np.linspace(-0.08, 0.08, len(capacities)) if len(capacities) > 1 else np.zeros(1)
    for policy in list(dict.fromkeys(retention["policy"])):
        for index, capacity in enumerate(capacities):
            line = retention[(retention["policy"] == policy) & (retention["capacity"] == capacity)]
            line = line.set_index("preset").reindex(presets)
            right.plot(
                x + shifts[index],
                line["retained"],
                linestyle=styles[index % len(styles)],
                marker=MARKERS[index],
                color=policy_color(policy),
                markeredgecolor="black",
                markeredgewidth=0.4,
                linewidth=1.8,
                label=f"{policy}, capacity {capacity}",
            )
    cases = int(retention["cases"].max())
    right.set_xticks(x, presets)
    right.set_xlim(-0.3, len(presets) - 0.7)
    right.set_ylim(0, cases * 1.1)
    right.set_xlabel("preset (cascade order)")
    right.set_ylabel(f"support retained (cases of {cases})")
    right.set_title("Support retained under each preset")
    right.grid(True, axis="y")
    (steps_drawn, step_names), (lines, line_names) = left.get_legend_handles_labels(), right.get_legend_handles_labels()
    bottom_legend(fig, [*steps_drawn, *lines], [*step_names, *line_names], most=2)
    title_with_source(fig, "Protocol variants: " + " -> ".join(presets), source)
    return fig
