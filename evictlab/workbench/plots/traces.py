"""Figures of trace mode (notebook 10), drawn from :mod:`evictlab.analysis.traces` tables.

* :func:`trace_capacity_curves`: answerable and stale-kept rate against capacity, one line
  per policy, the region between the offline optimum and the keep-all ceiling shaded;
* :func:`study_advantage`: each policy's answerable-rate advantage over a baseline across a
  study's workloads (10th-90th percentile bar, median dot) per capacity;
* :func:`loss_map_figure`: where ``hybrid-v1`` loses to ``confidence`` over two parameters;
* :func:`stage_losses`: the lifecycle stage each unanswered question was lost to (stacked bars).
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .style import (
    MARKERS,
    OKABE_ITO,
    SEQUENTIAL_CMAP,
    bottom_legend,
    dodge,
    identical_lines,
    merged_label,
    paper_figure,
    policy_color,
    policy_order,
    require_columns,
    side_by_side,
    styled,
    text_color,
    title_with_source,
)

BOUND_NAMES = ("optimum", "rate-aware", "keep-all")
CURVE_PANELS = (
    ("answerable_rate", "answerable rate (needed fact in memory)"),
    ("stale_kept_rate", "stale-kept rate (old value kept, update gone)"),
)


@styled
def trace_capacity_curves(summary: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Answerable and stale-kept rate against capacity (log axis), one line per policy.

    ``summary``: :func:`evictlab.analysis.traces.metrics.curve_summary`. The band between the exact
    offline optimum (its lower edge) and the keep-all ceiling (no cap) is shaded in the
    answerable panel: no policy can rise above the optimum at its capacity. Where the summary
    has intervals (several traces), each policy's 95 % interval is drawn as a thin band.
    """
    require_columns(summary, ["policy", "capacity", "answerable_rate", "stale_kept_rate"], "trace_capacity_curves")
    capacities = sorted(summary["capacity"].unique())
    ordered = summary[~summary["policy"].isin(BOUND_NAMES)].sort_values("capacity", kind="stable")
    lines = identical_lines(ordered, "policy", ["capacity", *(metric for metric, _ in CURVE_PANELS)])
    policies = [p for p in policy_order(ordered["policy"]) if p in lines]
    fig = paper_figure(3.2, 6.0)
    axes = side_by_side(fig, sharex=True)
    by_policy = {policy: frame.sort_values("capacity") for policy, frame in summary.groupby("policy")}
    for ax, (metric, label) in zip(axes, CURVE_PANELS):
        if metric == "answerable_rate" and {"optimum", "keep-all"} <= set(by_policy):
            optimum, keep_all = by_policy["optimum"], by_policy["keep-all"]
            ax.fill_between(optimum["capacity"], optimum[metric], keep_all.set_index("capacity")[metric]
                            .reindex(optimum["capacity"]).to_numpy(), color=OKABE_ITO["grey"], alpha=0.18,
                            linewidth=0, label="optimum to keep-all (bounds)")
            ax.plot(optimum["capacity"], optimum[metric], color="black", linewidth=2.2, label="exact offline optimum")
            ax.plot(keep_all["capacity"], keep_all[metric], color=OKABE_ITO["grey"], linestyle="--", linewidth=1.6,
                    label="keep-all (no cap)")
            if "rate-aware" in by_policy:
                aware = by_policy["rate-aware"]
                ax.plot(aware["capacity"], aware[metric], color="black", linestyle=":", linewidth=1.8,
                        label="rate-aware bound (knows ask rates)")
        for index, policy in enumerate(policies):
            line = by_policy[policy]
            values = line[metric].to_numpy(dtype=float)
            ax.plot(line["capacity"], values, color=policy_color(policy), marker=MARKERS[index % len(MARKERS)],
                    markersize=4.5, markeredgecolor="black", markeredgewidth=0.4,
                    linewidth=2.6 if policy in ("confidence", "hybrid-v1") else 1.3, label=merged_label(lines[policy]))
            low, high = f"{metric}_low", f"{metric}_high"
            if low in line and line[low].notna().any():
                ax.fill_between(line["capacity"], line[low], line[high], color=policy_color(policy), alpha=0.12,
                                linewidth=0)
        ax.set_xscale("log")
        ax.set_xticks(capacities, [str(capacity) for capacity in capacities])
        ax.minorticks_off()
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("capacity (max facts)")
        ax.set_ylabel(label)
        ax.grid(color="#e5e5e5", linewidth=0.7)
        ax.set_axisbelow(True)
    handles, labels = axes[0].get_legend_handles_labels()
    bottom_legend(fig, handles, labels)
    title_with_source(fig, "Memory over time: capacity curves of every policy against the bounds", source)
    return fig


@styled
def study_advantage(summary: pd.DataFrame, baseline: str = "confidence", *, source: str | None = None) -> Figure:
    """Each policy's answerable-rate advantage over ``baseline`` per capacity, across workloads.

    ``summary``: :func:`evictlab.analysis.traces.study.study_summary`. A bar spans the 10th to 90th
    percentile over (workload, seed) cells, the dot is the median; the win rate is printed above.
    """
    prefix = f"advantage_vs_{baseline}"
    columns = ["policy", "capacity", f"{prefix}_p10", f"{prefix}_p50", f"{prefix}_p90"]
    require_columns(summary, columns, "study_advantage")
    policies = [p for p in policy_order(summary["policy"]) if p != baseline]
    capacities = sorted(summary["capacity"].unique())
    offsets, width = dodge(len(policies))
    fig = paper_figure(3.4, 4.0)
    ax = fig.subplots()
    indexed = summary.set_index(["policy", "capacity"])
    for offset, policy in zip(offsets, policies):
        for position, capacity in enumerate(capacities):
            if (policy, capacity) not in indexed.index:
                continue
            row = indexed.loc[(policy, capacity)]
            x = position + offset
            color = policy_color(policy)
            ax.vlines(x, row[f"{prefix}_p10"], row[f"{prefix}_p90"], color=color, linewidth=max(2.0, 40 * width))
            ax.plot(x, row[f"{prefix}_p50"], "o", color="white", markeredgecolor="black", markersize=4)
            ax.text(x, row[f"{prefix}_p90"] + 0.01, f"{row[f'win_rate_vs_{baseline}']:.0%}", ha="center", va="bottom",
                    rotation=90)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(capacities)), [str(capacity) for capacity in capacities])
    ax.set_xlabel("capacity (max facts)")
    ax.set_ylabel(f"answerable rate minus {baseline}'s")
    for policy in policies:
        ax.plot([], [], color=policy_color(policy), linewidth=6, label=policy)
    bottom_legend(fig, *ax.get_legend_handles_labels())
    legend = "bar: 10th-90th percentile over workloads and seeds, dot: median, text: win rate"
    title_with_source(fig, f"Answerable-rate advantage over {baseline}", f"{legend}; {source}" if source else legend)
    return fig


@styled
def loss_map_figure(losses: pd.DataFrame, *, policy: str = "hybrid-v1", baseline: str = "confidence",
                    source: str | None = None) -> Figure:
    """A heat map of :func:`evictlab.analysis.traces.study.loss_map`: share of cells where ``policy`` loses."""
    if losses.empty:
        raise ValueError("loss_map_figure needs at least one cell")
    cmap = matplotlib.colormaps[SEQUENTIAL_CMAP]
    values = losses.to_numpy(dtype=float)
    fig = paper_figure(0.5 * values.shape[0] + 2.0)
    ax = fig.subplots()
    image = ax.imshow(values, cmap=cmap, vmin=0, vmax=1, aspect="auto", origin="lower")
    for (i, j), value in np.ndenumerate(values):
        if not np.isnan(value):
            ax.text(j, i, f"{value:.0%}", ha="center", va="center", color=text_color(cmap, value))
    ax.set_xticks(range(values.shape[1]), [_label(value) for value in losses.columns])
    ax.set_yticks(range(values.shape[0]), [_label(value) for value in losses.index])
    ax.set_xlabel(str(losses.columns.name))
    ax.set_ylabel(str(losses.index.name))
    fig.colorbar(image, ax=ax, shrink=0.85).set_label(f"share of cells where {policy} < {baseline}")
    title_with_source(fig, f"Where {policy} answers fewer questions than {baseline}", source)
    return fig


def _label(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@styled
def stage_losses(table: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Stacked bars of :func:`evictlab.analysis.traces.stages.stage_table`: per capacity (one
    panel each) and policy, the share of questions answered and lost to each lifecycle stage."""
    require_columns(table, ["policy", "capacity", "answered"], "stage_losses")
    parts = [column for column in table.columns if column not in ("policy", "capacity")]
    capacities = sorted(table["capacity"].unique())
    policies = policy_order(table["policy"].unique())
    fig = paper_figure(3.4, 2.4 * len(capacities) + 1.2)
    axes = np.atleast_1d(side_by_side(fig, len(capacities), sharey=True, squeeze=False)).ravel()
    hues = ("orange", "sky_blue", "bluish_green", "yellow", "blue", "vermillion", "reddish_purple")
    colors = ["#d9d9d9", *(OKABE_ITO[hue] for hue in hues)]
    for ax, capacity in zip(axes, capacities):
        cells = table[table["capacity"] == capacity].set_index("policy").reindex(policies).fillna(0.0)
        bottom = np.zeros(len(policies))
        for part, color in zip(parts, colors):
            ax.bar(range(len(policies)), cells[part], bottom=bottom, color=color, label=part, width=0.75)
            bottom += cells[part].to_numpy()
        ax.set_xticks(range(len(policies)), policies, rotation=60, ha="right")
        ax.set_title(f"capacity {capacity}")
        ax.set_ylim(0, 1)
        ax.set_ylabel("share of questions")
    handles, labels = axes[0].get_legend_handles_labels()
    bottom_legend(fig, handles, labels)
    title_with_source(fig, "Where the unanswered questions were lost, by lifecycle stage", source)
    return fig
