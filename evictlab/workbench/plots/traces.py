"""Figures of trace mode (notebook 10), drawn from :mod:`evictlab.analysis.traces` tables.

* :func:`trace_capacity_curves`: answerable and stale-kept rate against capacity, one line
  per policy, with the bounds (the exact offline optimum, the rate-aware bound, keep-all);
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

from ...analysis.traces import inference
from ...analysis.traces.inference import FINDING_CAPACITY
from ...analysis.traces.study import loss_map
from .style import (
    MARKERS,
    OKABE_ITO,
    SEQUENTIAL_CMAP,
    bottom_legend,
    dodge,
    grid_shape,
    hide_unused,
    identical_lines,
    label_panels,
    merged_label,
    paper_figure,
    policy_color,
    policy_legend,
    policy_order,
    require_columns,
    side_by_side,
    styled,
    text_color,
    title_with_source,
)

BOUND_NAMES = ("optimum", "rate-aware", "keep-all")
#: How each bound is drawn (answerable panel only): colour, line style, width, legend label; a bound
#: identical to an earlier one is drawn in that one's style with both labels. The optimum and the
#: rate-aware bound replay no ``injection`` stage (:mod:`evictlab.analysis.traces.metrics`): their
#: question is answered when the needed fact is in memory, which their labels say.
BOUND_STYLES = {
    "optimum": ("black", "-", 2.2, "exact offline optimum (fact in memory)"),
    "rate-aware": ("black", ":", 2.2, "rate-aware bound (fact in memory)"),
    "keep-all": (OKABE_ITO["grey"], "--", 1.6, "keep-all (no cap)"),
}
#: Each panel's metric and y label with and without the ``injection`` stage: what a policy's memory
#: (and keep-all's) needed for an answer, the fact shown to the model or only in memory.
CURVE_PANELS = (
    ("answerable_rate", {True: "answerable rate (needed fact shown to the model)",
                         False: "answerable rate (needed fact in memory)"}),
    ("stale_kept_rate", dict.fromkeys((True, False), "stale-kept rate (old value kept, update gone)")),
)


def baseline_capacity(summary: pd.DataFrame, at: int = FINDING_CAPACITY) -> int | None:
    """The capacity the trace figures choose their best baseline at: ``at`` (by default the paired
    findings' :data:`~evictlab.analysis.traces.inference.FINDING_CAPACITY`) when ``summary`` has it,
    else ``None`` (over every capacity)."""
    return at if at in set(summary["capacity"]) else None


def best_baseline(summary: pd.DataFrame, at: int = FINDING_CAPACITY) -> str | None:
    """The trace figures' best baseline: :func:`evictlab.analysis.traces.inference.best_baseline` of
    ``summary``'s policies that are not bounds, at :func:`baseline_capacity` (capacity ``at`` when
    ``summary`` has it, so the paired findings' best other policy there; else over every capacity)."""
    return inference.best_baseline(summary[~summary["policy"].isin(BOUND_NAMES)], baseline_capacity(summary, at))


def baseline_scope(capacity: int | None) -> str:
    """Where the best baseline was chosen, in words: ``at capacity 100`` or ``over every capacity``."""
    return "over every capacity" if capacity is None else f"at capacity {capacity}"


@styled
def trace_capacity_curves(summary: pd.DataFrame, *, injection: bool = True, source: str | None = None) -> Figure:
    """Answerable and stale-kept rate against capacity (log axis), one line per policy.

    ``summary``: :func:`evictlab.analysis.traces.metrics.curve_summary`. Drawn strong: DeerMem's two
    policies, the best baseline (:func:`best_baseline`; the title says at which capacity it was chosen)
    and, in the answerable panel, the bounds (the exact offline optimum, the rate-aware bound,
    keep-all); every other policy faint. Policies with identical curves are one line with both names.
    ``injection``: whether the policies' memories ran the ``injection`` stage (the y label then says the
    needed fact was shown to the model, else in memory); the optimum and the rate-aware bound never run
    it, which their legend labels say. With several traces each strong policy's 95 % interval is a bar
    beside its marker, the bars of one capacity side by side.
    """
    require_columns(summary, ["policy", "capacity", "answerable_rate", "stale_kept_rate"], "trace_capacity_curves")
    capacities = sorted(summary["capacity"].unique())
    ordered = summary[~summary["policy"].isin(BOUND_NAMES)].sort_values("capacity", kind="stable")
    lines = identical_lines(ordered, "policy", ["capacity", *(metric for metric, _ in CURVE_PANELS)])
    drawn = summary[summary["policy"].isin(BOUND_NAMES)]
    drawn = drawn.iloc[np.lexsort((drawn["capacity"], drawn["policy"].map(BOUND_NAMES.index)))]
    bounds = identical_lines(drawn, "policy", ["capacity", "answerable_rate"])
    scope = baseline_capacity(summary)
    best = best_baseline(summary)
    strong = [p for p in policy_order(lines) if {"confidence", "hybrid-v1", best} & set(lines[p])]
    faint = [p for p in policy_order(lines) if p not in strong]
    traces = int(summary["traces"].max()) if "traces" in summary else 1
    fig = paper_figure(3.4, 6.4)
    axes = side_by_side(fig, sharex=True)
    by_policy = {policy: frame.sort_values("capacity") for policy, frame in summary.groupby("policy")}
    for ax, (metric, ylabels) in zip(axes, CURVE_PANELS):
        for bound, same in (bounds.items() if metric == "answerable_rate" else ()):
            color, style, width, _ = BOUND_STYLES[bound]
            ax.plot(by_policy[bound]["capacity"], by_policy[bound][metric], color=color, linestyle=style,
                    linewidth=width, label=merged_label([BOUND_STYLES[name][3] for name in same]), zorder=4)
        for index, policy in enumerate(strong):
            line = by_policy[policy]
            ax.plot(line["capacity"], line[metric], color=policy_color(policy), marker=MARKERS[index],
                    markersize=5, markeredgecolor="black", markeredgewidth=0.4, linewidth=2.4, zorder=3,
                    label=merged_label(lines[policy]) + (" (best baseline)" if best in lines[policy] else ""))
            low, high = f"{metric}_low", f"{metric}_high"
            if traces > 1 and low in line and line[low].notna().any():
                # Side by side, 0.03 decades of capacity apart: no two bars of one capacity overlap.
                x = line["capacity"].to_numpy(dtype=float) * 10 ** (0.03 * (index - (len(strong) - 1) / 2))
                ax.vlines(x, line[low], line[high], color=policy_color(policy), linewidth=1.4, zorder=5)
        for policy in faint:
            line = by_policy[policy]
            ax.plot(line["capacity"], line[metric], color=policy_color(policy), linewidth=1.0, alpha=0.45, zorder=2,
                    label=merged_label(lines[policy]))
        ax.set_xscale("log")
        ax.set_xticks(capacities, [str(capacity) for capacity in capacities])
        ax.minorticks_off()
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("capacity (max facts)")
        ax.set_ylabel(ylabels[injection])
        ax.grid(True)
    handles, labels = axes[0].get_legend_handles_labels()
    bottom_legend(fig, handles, labels)
    mean = f"mean over {traces} traces; bars: 95 % bootstrap intervals, side by side" if traces > 1 else "one trace"
    title_with_source(fig, f"Memory over time: capacity curves, DeerMem's policies, the best baseline (chosen"
                           f" {baseline_scope(scope)}) and the bounds strong, the others faint ({mean})", source)
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
    policy_legend(fig, policies)
    legend = "bar: 10th-90th percentile over workloads and seeds, dot: median, text: win rate"
    title_with_source(fig, f"Answerable-rate advantage over {baseline}", f"{legend}; {source}" if source else legend)
    return fig


@styled
def loss_map_figure(rows: pd.DataFrame, x: str, y: str, *, policy: str = "hybrid-v1", baseline: str = "confidence",
                    source: str | None = None) -> Figure:
    """A heat map of :func:`evictlab.analysis.traces.study.loss_map` of a study's ``rows`` over grid
    parameters ``x`` and ``y``: the share of cells where ``policy`` answers fewer questions than
    ``baseline`` (the two the title names)."""
    losses = loss_map(rows, x, y, policy=policy, baseline=baseline)
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
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    fig.colorbar(image, ax=ax, shrink=0.85).set_label(f"share of cells where {policy} < {baseline}")
    title_with_source(fig, f"Where {policy} answers fewer questions than {baseline}", source)
    return fig


def _label(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@styled
def stage_losses(table: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Stacked bars of :func:`evictlab.analysis.traces.stages.stage_table`: one panel per policy, a bar
    per capacity, the share of questions answered and lost to each lifecycle stage (each bar sums to 1)."""
    require_columns(table, ["policy", "capacity", "answered"], "stage_losses")
    parts = [column for column in table.columns if column not in ("policy", "capacity")]
    capacities = sorted(table["capacity"].unique())
    policies = policy_order(table["policy"].unique())
    rows, cols = grid_shape(len(policies), 4)
    fig = paper_figure(2.0 * rows + 1.6)
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True)
    colors = ["#d9d9d9", *map(OKABE_ITO.get, ("orange", "sky_blue", "bluish_green", "yellow", "blue", "vermillion",
                                              "reddish_purple"))]
    for ax, policy in zip(axes.flat, policies):
        cells = table[table["policy"] == policy].set_index("capacity").reindex(capacities).fillna(0.0)
        bottom = np.zeros(len(capacities))
        for part, color in zip(parts, colors):
            ax.bar(range(len(capacities)), cells[part], bottom=bottom, color=color, label=part, width=0.75)
            bottom += cells[part].to_numpy()
        ax.set_xticks(range(len(capacities)), [str(capacity) for capacity in capacities],
                      rotation=90 if len(capacities) > 4 else 0)
        ax.set_title(policy)
        ax.set_ylim(0, 1)
    label_panels(axes, len(policies), "capacity", "share of questions")
    hide_unused(axes, len(policies))
    handles, labels = axes.flat[0].get_legend_handles_labels()
    bottom_legend(fig, handles, labels)
    title_with_source(fig, "Where the unanswered questions were lost, by lifecycle stage", source)
    return fig
