"""Figures of the policy zoo (notebooks 04 and 08), drawn from :func:`evictlab.zoo.zoo_summary`.

* :func:`zoo_heatmap` (08): every policy x scenario x capacity.
* :func:`capacity_curves` (04, 08): retention against capacity, one panel per policy.
"""

from __future__ import annotations

from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .style import (
    ALL_CASES,
    MARKERS,
    OKABE_ITO,
    SCENARIO_COLORS,
    SEQUENTIAL_CMAP,
    format_count,
    grid_shape,
    hide_unused,
    percent,
    require_columns,
    scenario_groups,
    styled,
    text_color,
    wrap_labels,
)

# --------------------------------------------------------------------------- zoo table (08)


@styled
def zoo_heatmap(summary: pd.DataFrame) -> Figure:
    """Every policy (rows) x capacity x scenario (columns), coloured by support retained.

    ``summary``: :func:`evictlab.zoo.zoo_summary`. Cells read "retained/cases" (expected
    counts of seeded policies with one decimal); rows keep the summary's order and are
    separated by role (DeerMem, zoo, random floor, bounds).
    """
    require_columns(summary, ["policy", "role", "scenario", "capacity", "retained", "cases", "seeds"], "zoo_heatmap")
    policies = list(dict.fromkeys(summary["policy"]))
    roles = summary.drop_duplicates("policy").set_index("policy")["role"].reindex(policies)
    groups = scenario_groups(summary)
    capacities = sorted(summary["capacity"].unique())
    columns = [(capacity, group) for capacity in capacities for group in groups]
    indexed = summary.set_index(["policy", "capacity", "scenario"])
    retained = np.array([[indexed["retained"].get((p, c, g), np.nan) for c, g in columns] for p in policies], dtype=float)
    seeds = summary.groupby("policy", sort=False)["seeds"].max()
    averaged = seeds[seeds > 1]
    cases = np.array([[indexed["cases"].get((p, c, g), np.nan) for c, g in columns] for p in policies], dtype=float)
    share = 100 * retained / cases
    fig = Figure(figsize=(max(9.0, 0.75 * len(columns) + 3.2), 0.42 * len(policies) + 2.8), layout="constrained")
    ax = fig.subplots()
    cmap = matplotlib.colormaps[SEQUENTIAL_CMAP]
    image = ax.imshow(share, cmap=cmap, vmin=0, vmax=100, aspect="auto")
    for (i, j), value in np.ndenumerate(retained):
        if not np.isnan(value):
            count = f"{value:.1f}" if policies[i] in averaged else format_count(value)
            ax.text(j, i, f"{count}/{int(cases[i, j])}", ha="center", va="center", fontsize=7.5,
                    color=text_color(cmap, share[i, j] / 100))
    for block in range(1, len(capacities)):
        ax.axvline(block * len(groups) - 0.5, color="white", linewidth=4)
    changes = [i for i in range(1, len(policies)) if roles.iloc[i] != roles.iloc[i - 1]]
    for i in changes:
        ax.axhline(i - 0.5, color="white", linewidth=3)
    ax.set_xticks(range(len(columns)), wrap_labels([group for _, group in columns]), fontsize=8)
    ax.set_yticks(range(len(policies)), [f"{p} ({roles[p]})" for p in policies])
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    for block, capacity in enumerate(capacities):
        ax.text((block + 0.5) * len(groups) - 0.5, -0.75, f"capacity {capacity}", ha="center", va="bottom",
                fontsize=10, fontweight="bold")
    ax.set_ylim(len(policies) - 0.5, -1.3)
    ax.set_xlabel("scenario, per capacity (facts kept of 10)")
    ax.set_ylabel("policy (role)")
    colorbar = fig.colorbar(image, ax=ax, shrink=0.8, pad=0.01)
    colorbar.set_label("support retained (% of cases)")
    note = "".join(f"; {policy}: mean over {count} seeds" for policy, count in averaged.items())
    fig.suptitle(f"Every policy on the same pools: support retained per scenario and capacity{note}")
    return fig


# --------------------------------------------------------------------------- capacity curves (04, 08)


@styled
def capacity_curves(summary: pd.DataFrame) -> Figure:
    """Support retained against capacity: one panel per policy, one line per scenario.

    ``summary``: :func:`evictlab.zoo.zoo_summary` (``policy``, ``role``, ``scenario``,
    ``capacity``, ``retained``, ``cases``). Every policy but the bounds gets a panel, in the
    summary's order; each panel repeats the all-cases curves of the ``random`` floor and of the
    ``oracle`` ceiling when the summary has them. Scenario lines are shifted up or down by at
    most 2 percentage points so that coinciding lines stay visible; the all-cases line is not.
    """
    require_columns(summary, ["policy", "role", "scenario", "capacity", "retained", "cases"], "capacity_curves")
    roles = summary.drop_duplicates("policy").set_index("policy")["role"]
    policies = [p for p in dict.fromkeys(summary["policy"]) if roles[p] != "bound"]
    if not policies:
        raise ValueError("capacity_curves needs at least one policy that is not a bound")
    groups = scenario_groups(summary)
    capacities = sorted(summary["capacity"].unique())
    totals = summary[summary["scenario"] == ALL_CASES]
    references = [(name, label, style) for name, label, style in (
        ("oracle", "oracle (all cases): ceiling", "-."), ("random", "random (all cases): floor", ":"))
        if name in set(totals["policy"])]
    rows, cols = grid_shape(len(policies), 4)
    fig = Figure(figsize=(14, 2.9 * rows + 1.3), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)
    scenario_lines = [group for group in groups if group != ALL_CASES]
    shifts = np.linspace(-2, 2, len(scenario_lines)) if len(scenario_lines) > 1 else np.zeros(len(scenario_lines))
    dodge = [dict(zip(scenario_lines, shifts)).get(group, 0.0) for group in groups]
    handles: dict[str, Any] = {}
    for ax, policy in zip(axes.flat, policies):
        for name, label, style in references:
            line = totals[totals["policy"] == name].sort_values("capacity")
            (handle,) = ax.plot(line["capacity"], percent(line["retained"], line["cases"]), linestyle=style,
                                color=OKABE_ITO["grey"], linewidth=1.6, zorder=1, label=label)
            handles.setdefault(label, handle)
        members = summary[summary["policy"] == policy]
        for index, (group, offset) in enumerate(zip(groups, dodge)):
            line = members[members["scenario"] == group].sort_values("capacity")
            if line.empty:
                continue
            everything = group == ALL_CASES
            (handle,) = ax.plot(line["capacity"], percent(line["retained"], line["cases"]) + offset,
                                color=SCENARIO_COLORS.get(group, OKABE_ITO["grey"]), linewidth=2.6 if everything else 1.4,
                                marker=MARKERS[index % len(MARKERS)], markersize=4.5 if not everything else 5.5,
                                markeredgecolor="black", markeredgewidth=0.4, zorder=3 if everything else 2,
                                label=f"{group} ({int(line['cases'].iloc[0])} cases)")
            handles.setdefault(group, handle)
        ax.set_title(f"{policy} ({roles[policy]})")
        ax.set_xticks(capacities)
        ax.set_ylim(-6, 106)
        ax.set_yticks([0, 25, 50, 75, 100])
        ax.grid(color="#e5e5e5", linewidth=0.7)
        ax.set_axisbelow(True)
    for ax in axes[:, 0]:
        ax.set_ylabel("support retained (%)")
    used = len(policies)
    for index, ax in enumerate(axes.flat[:used]):
        if index + cols >= used:  # the lowest panel of its column: its x axis carries the label
            ax.set_xlabel("capacity (facts kept of 10)")
            ax.xaxis.set_tick_params(labelbottom=True)
    hide_unused(axes, used)
    fig.legend(handles=list(handles.values()), loc="outside lower center", ncols=4, frameon=False)
    fig.suptitle("Support retained against capacity, per policy and scenario")
    return fig
