"""Figures of the policy zoo (notebooks 04 and 08), drawn from :func:`evictlab.analysis.zoo.zoo_summary`.

* :func:`zoo_heatmap` (08): every policy x scenario x capacity.
* :func:`capacity_curves` (04): retention against capacity, one panel per scenario.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ...policies import policy_class
from ...policies.ties import INPUT_ORDER
from ...selection.tables import format_count
from .style import (
    ALL_CASES,
    MARKERS,
    MIN_TEXT_PT,
    SEQUENTIAL_CMAP,
    bottom_legend,
    grid_shape,
    hide_unused,
    identical_lines,
    merged_label,
    one_column,
    paper_figure,
    paper_width,
    percent,
    policy_color,
    require_columns,
    scenario_groups,
    styled,
    text_color,
    text_width,
    title_with_source,
)

# --------------------------------------------------------------------------- zoo table (08)


@styled
def zoo_heatmap(summary: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Every policy (rows) x capacity x scenario (columns), coloured by support retained.

    ``summary``: :func:`evictlab.analysis.zoo.zoo_summary`. One panel per capacity (in a row at
    two-column size, stacked at one-column size). Cells read the supports retained (expected counts
    with one decimal) of the cases the column names, where they fit the cell, else the colour
    alone says it; rows keep the
    summary's order and are separated by role (DeerMem, zoo, random floor, bounds), and each row
    label says how many of its decisions a tie at the cut line settled (when the summary has ``ties``).
    """
    require_columns(summary, ["policy", "role", "scenario", "capacity", "retained", "cases", "seeds"], "zoo_heatmap")
    policies = list(dict.fromkeys(summary["policy"]))
    roles = summary.drop_duplicates("policy").set_index("policy")["role"].reindex(policies)
    groups = scenario_groups(summary)
    capacities = sorted(summary["capacity"].unique())
    columns = [(capacity, group) for capacity in capacities for group in groups]
    indexed = summary.set_index(["policy", "capacity", "scenario"])
    retained = np.array(
        [[indexed["retained"].get((p, c, g), np.nan) for c, g in columns] for p in policies], dtype=float
    )
    seeds = summary.groupby("policy", sort=False)["seeds"].max()
    averaged = seeds[seeds > 1]
    share = 100 * retained / np.array([[indexed["cases"].get((p, c, g), np.nan) for c, g in columns]
                                       for p in policies], dtype=float)
    counts = [[f"{value:.1f}" if p in averaged else format_count(value) for value in values]
              for p, values in zip(policies, retained)]
    ties = summary[summary["scenario"] == ALL_CASES].groupby("policy")["ties"].sum() if "ties" in summary else {}
    labels = [f"{p} ({roles[p]}" + (f", {format_count(ties[p])} tied)" if ties.get(p, 0) else ")") for p in policies]
    cases = summary.groupby("scenario")["cases"].max()
    # One panel per capacity: in a row at two-column size, in a column at one-column size.
    row = 12.0 if one_column() else 21.6  # points per policy
    stack = len(capacities) if one_column() else 1
    fig = paper_figure(stack * (row * len(policies) / 72 + 0.4) + 2.4)
    axes = np.atleast_1d(fig.subplots(stack, len(capacities) // stack, sharex=one_column(), sharey=not one_column()))
    # Each cell's count (of the cases its column names) where the widest fits the cells, else only the colour.
    room = 72 * paper_width() - max(text_width(label, MIN_TEXT_PT) for label in labels) - 40
    fits = room / (len(columns) // stack) > max(text_width(count, MIN_TEXT_PT) for line in counts for count in line) + 3
    cmap = matplotlib.colormaps[SEQUENTIAL_CMAP]
    changes = [i for i in range(1, len(policies)) if roles.iloc[i] != roles.iloc[i - 1]]
    for block, (ax, capacity) in enumerate(zip(axes, capacities)):
        part = slice(block * len(groups), (block + 1) * len(groups))
        image = ax.imshow(share[:, part], cmap=cmap, vmin=0, vmax=100, aspect="auto")
        for (i, j), value in np.ndenumerate(share[:, part]):
            if fits and not np.isnan(value):
                ax.text(j, i, counts[i][part.start + j], ha="center", va="center", color=text_color(cmap, value / 100))
        for i in changes:
            ax.axhline(i - 0.5, color="white", linewidth=3)
        ax.set_xticks(range(len(groups)), [f"{group} ({int(cases[group])})" for group in groups], rotation=90)
        ax.set_yticks(range(len(policies)), labels)
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.set_title(f"capacity {capacity}", fontweight="bold")
    axes[-1 if one_column() else len(axes) // 2].set_xlabel("scenario (cases)")
    axes[len(axes) // 2 if one_column() else 0].set_ylabel("policy (role)")
    colorbar = fig.colorbar(image, ax=list(axes), shrink=0.8, pad=0.01, location="bottom")
    colorbar.set_label("support retained (% of cases)")
    note = "".join(f"; {policy}: mean over {count} seeds" for policy, count in averaged.items())
    title_with_source(
        fig,
        f"Every policy on the same pools: support retained per scenario and capacity{note}\n"
        f"({tie_sentence(policies)})",
        source,
    )
    return fig


def tie_sentence(policies: Sequence[str]) -> str:
    """Which of ``policies`` count a tie at the cut line by input order and which by the expectation
    over tie orders, from each policy's declared default (as the zoo counts them)."""
    by_order = [p for p in policies if policy_class(p).default_tie_break == INPUT_ORDER]
    if not by_order:
        return "every policy reports the expectation over tie orders"
    others = "the others report" if len(by_order) < len(policies) else "none reports"
    return f"{', '.join(by_order)} break ties by input order; {others} the expectation over tie orders"


# --------------------------------------------------------------------------- capacity curves (04, 08)


@styled
def capacity_curves(summary: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Support retained against capacity: one panel per scenario, one line per policy.

    ``summary``: :func:`evictlab.analysis.zoo.zoo_summary` (``policy``, ``role``, ``scenario``,
    ``capacity``, ``retained``, ``cases``). Panels follow the protocol's scenario order, then
    all cases pooled; lines keep the summary's policy order, each in its policy's colour and
    marker. The values are drawn as they are (no offsets): where policies coincide their lines
    lie on top of each other; the DeerMem policies are thickest, and the bounds (``oracle``,
    ``keep-all``) are dashed and drawn on top so that what they cover shows through.
    """
    require_columns(summary, ["policy", "role", "scenario", "capacity", "retained", "cases"], "capacity_curves")
    roles = summary.drop_duplicates("policy").set_index("policy")["role"]
    groups = scenario_groups(summary)
    capacities = sorted(summary["capacity"].unique())
    rows, cols = grid_shape(len(groups), 3)
    fig = paper_figure(2.2 * rows + 1.6)
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)
    ordered = summary.sort_values(["scenario", "capacity"], kind="stable")
    lines = identical_lines(ordered, "policy", ["scenario", "capacity", "retained", "cases"])
    for ax, group in zip(axes.flat, groups):
        members = summary[summary["scenario"] == group]
        for index, (policy, same) in enumerate(lines.items()):
            line = members[members["policy"] == policy].sort_values("capacity")
            if line.empty:
                continue
            deermem = any(roles[p] == "deermem" for p in same)
            bound = roles[policy] == "bound"
            ax.plot(
                line["capacity"], percent(line["retained"], line["cases"]),
                color=policy_color(policy), label=merged_label([f"{p} ({roles[p]})" for p in same]),
                marker=MARKERS[index % len(MARKERS)],
                linestyle=(0, (4, 3)) if bound else "-", linewidth=2.6 if deermem else 1.3,
                markersize=5.5 if deermem else 4, markeredgecolor="black", markeredgewidth=0.3,
                zorder=4 if bound else 3 if deermem else 2,  # dashed bounds on top show what they cover
            )
        ax.set_title(f"{group} ({int(members['cases'].iloc[0])} cases)")
        ax.set_xticks(capacities)
        ax.set_ylim(-4, 104)  # room for the markers at 0 and 100, which are drawn where they are
        ax.set_yticks([0, 25, 50, 75, 100])
        ax.grid(True)
    for ax in axes[:, 0]:
        ax.set_ylabel("support retained (%)")
    used = len(groups)
    for index, ax in enumerate(axes.flat[:used]):
        if index + cols >= used:  # the lowest panel of its column: its x axis carries the label
            ax.set_xlabel("capacity (facts kept)")
            ax.xaxis.set_tick_params(labelbottom=True)
    hide_unused(axes, used)
    bottom_legend(fig, *axes.flat[0].get_legend_handles_labels(), most=3)
    title_with_source(fig, "Support retained against capacity, per scenario: one line per policy"
                           " (a = b: equal values in every panel, one line)", source)
    return fig
