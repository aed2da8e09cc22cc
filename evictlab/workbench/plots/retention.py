"""Figures of support retention (notebook 02): retained per scenario, and the support's rank."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .style import (
    ALL_CASES,
    MIN_TEXT_PT,
    dodge,
    grid_shape,
    hide_unused,
    label_panels,
    paper_figure,
    paper_width,
    policy_color,
    policy_legend,
    policy_order,
    require_columns,
    scenario_order,
    styled,
    text_width,
    title_with_source,
)


@styled
def retention_by_scenario(frame: pd.DataFrame, *, include_total: bool = True, source: str | None = None) -> Figure:
    """Support retained per scenario x capacity x policy, with "retained/cases" on every bar.

    ``frame``: :func:`evictlab.selection.decisions.decide_grid`'s frame (needs ``scenario``, ``policy``,
    ``capacity`` and ``support_retained``). One panel per scenario, plus one for all cases.
    """
    require_columns(frame, ["scenario", "policy", "capacity", "support_retained"], "retention_by_scenario")
    scenarios = scenario_order(frame["scenario"])
    policies = policy_order(frame["policy"])
    capacities = sorted(frame["capacity"].unique())
    groups: list[tuple[str, pd.DataFrame]] = [(s, frame[frame["scenario"] == s]) for s in scenarios]
    if include_total:
        groups.append((ALL_CASES, frame))
    rows, cols = grid_shape(len(groups), 3)
    fig = paper_figure(2.3 * rows + 0.8)
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True)
    offsets, width = dodge(len(policies))
    # Bar labels across where the widest fits its bar (a panel less its tick labels), else upright.
    most = frame["case_id"].nunique() if "case_id" in frame else 999
    widest = text_width(f"{most}/{most}", MIN_TEXT_PT)
    vertical = widest + 2 > (72 * paper_width() / cols - 45) * width / len(capacities)
    for ax, (name, members) in zip(axes.flat, groups):
        counts = members.groupby(["policy", "capacity"], observed=True)["support_retained"].agg(["sum", "count"])
        cases = _case_count(members[members["capacity"] == capacities[0]], policies)
        for offset, policy in zip(offsets, policies):
            for x, capacity in enumerate(capacities):
                if (policy, capacity) not in counts.index:
                    continue
                kept, total = counts.loc[(policy, capacity)]
                share = 100 * kept / total
                ax.bar(x + offset, share, width, color=policy_color(policy), edgecolor="black", linewidth=0.5)
                ax.text(x + offset, share + 2, f"{int(kept)}/{int(total)}", ha="center", va="bottom",
                        rotation=90 if vertical else 0)
        ax.set_xticks(range(len(capacities)), [str(c) for c in capacities])
        ax.set_title(f"{name} ({cases} cases)")
        ax.set_ylim(0, 145 if vertical else 115)
        ax.set_yticks([0, 25, 50, 75, 100])
    label_panels(axes, len(groups), "capacity (facts kept)", "support retained (% of cases)")
    hide_unused(axes, len(groups))
    policy_legend(fig, policies)
    title_with_source(fig, "Support fact retained after eviction, per scenario and capacity", source)
    return fig


@styled
def support_rank_distribution(
    frame: pd.DataFrame, *, capacity: int | None = None, source: str | None = None
) -> Figure:
    """Where each support fact ranks among its 10 facts, per scenario and policy.

    ``frame``: :func:`evictlab.selection.decisions.decide_grid`'s frame. A score-based policy ranks the same
    way at every capacity, so one capacity is shown (default: the middle one); the dashed line
    marks it: a support ranked to its right survives only through a reserved correction slot.
    With a ``support_retained`` column, the supports kept that way are drawn hatched.
    """
    require_columns(frame, ["scenario", "policy", "capacity", "support_rank"], "support_rank_distribution")
    capacities = sorted(frame["capacity"].unique())
    capacity = capacities[len(capacities) // 2] if capacity is None else capacity
    if capacity not in capacities:
        raise ValueError(f"capacity {capacity} is not in the frame; it has {capacities}")
    shown = frame[frame["capacity"] == capacity]
    scenarios = scenario_order(shown["scenario"])
    policies = policy_order(shown["policy"])
    max_rank = int(max(10, shown["support_rank"].max()))
    ranks = np.arange(1, max_rank + 1)
    rows, cols = grid_shape(len(scenarios), 3)
    fig = paper_figure(2.2 * rows + 0.8)
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True)
    offsets, width = dodge(len(policies))
    for ax, scenario in zip(axes.flat, scenarios):
        members = shown[shown["scenario"] == scenario]
        for offset, policy in zip(offsets, policies):
            rows = members[members["policy"] == policy]
            counts = rows["support_rank"].value_counts()
            # Kept although ranked right of the line: only a reserved slot keeps such a support.
            beyond = rows["support_retained"].astype(bool) & (rows["support_rank"] > capacity) if "support_retained" \
                in rows else np.zeros(len(rows), dtype=bool)
            reserved = rows.loc[beyond, "support_rank"].value_counts()
            held = np.array([reserved.get(r, 0) for r in ranks])
            total = np.array([counts.get(r, 0) for r in ranks])
            ax.bar(ranks + offset, total - held, width, color=policy_color(policy), edgecolor="black", linewidth=0.5)
            if held.any():
                ax.bar(ranks + offset, held, width, bottom=total - held, color=policy_color(policy),
                       edgecolor="black", linewidth=0.5, hatch="xx")
        ax.axvline(capacity + 0.5, color="black", linestyle="--", linewidth=1)
        ax.set_xticks(ranks)
        ax.set_title(f"{scenario} ({_case_count(members, policies)} cases)")
    top = max(ax.get_ylim()[1] for ax in axes.flat[: len(scenarios)])
    for ax in axes.flat[: len(scenarios)]:
        ax.set_ylim(0, top * 1.15)
        ax.text(capacity + 0.35, top * 1.08, f"kept: rank ≤ {capacity}", va="top", ha="right")
    label_panels(axes, len(scenarios), "support rank (1 = highest score)", "cases")
    hide_unused(axes, len(scenarios))
    reserved = Patch(facecolor="white", edgecolor="black", linewidth=0.5, hatch="xx", label="kept by a reserved slot")
    policy_legend(fig, policies, extra=[reserved] if "support_retained" in shown else ())
    title = f"Rank of the support fact among its pool's facts (dashed line: capacity {capacity})"
    title_with_source(fig, title, source)
    return fig


def _case_count(members: pd.DataFrame, policies: Sequence[str]) -> int:
    """Cases behind one capacity's rows: distinct ids when the frame has them."""
    if "case_id" in members:
        return int(members["case_id"].nunique())
    return len(members) // max(len(policies), 1)
