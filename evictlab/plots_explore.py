"""Figures of the sweep, variant, explorer and zoo notebooks (03, 04, 05, 07 and 08).

The same contract as :mod:`evictlab.plots`, whose palette, house style and :func:`save` this
module uses: every function builds a new :class:`~matplotlib.figure.Figure` without pyplot,
changes no global state and touches no file. It lives apart from :mod:`evictlab.plots` only
while both are being written; it belongs there and may be merged into it.

* :func:`weight_simplex_maps` (03): support retention over the weight simplex, one ternary
  map per scenario; :func:`control_losses` gives the data of its hatched region.
* :func:`half_life_heatmaps` (04): retention over confirmation x access half-lives.
* :func:`capacity_curves` (04, 08): retention against capacity, one line per policy.
* :func:`variant_cascade` (05): what changes between protocol presets, from
  :func:`cascade_changes` and :func:`cascade_retention` of :mod:`evictlab.diff` summaries.
* :class:`ExplorerFigure` (07): the explorer's one persistent figure, updated in place.
* :func:`zoo_heatmap` (08): every policy x scenario x capacity.
* :func:`explanation_figure` (08): why each fact of one pool was kept or evicted.

Sequential colour maps use ``cividis``, which is designed to read the same under the common
colour-vision deficiencies; categories use the Okabe-Ito palette of :mod:`evictlab.plots`.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib import patheffects
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.patches import Patch, PathPatch, Polygon, Rectangle
from matplotlib.path import Path as MplPath

# The private helpers are shared on purpose: this module is the second half of evictlab.plots.
from .plots import (
    _STYLE,
    ALL_CASES,
    OKABE_ITO,
    _grid,
    _hide_unused,
    _require,
    _styled,
    _wrap_labels,
    policy_color,
    scenario_order,
)

#: The scenarios where a signal must not beat a clearly better support (spec 2.9).
CONTROL_SCENARIOS = ("confidence_control", "noisy_signal_control")
#: DeerMem's default weights (confidence, confirmation, access) and half-lives (days).
DEERMEM_WEIGHTS = (0.65, 0.25, 0.10)
DEERMEM_HALF_LIVES = (90, 30)  # confirmation, access
WEIGHT_COLUMNS = ("confidence_weight", "confirmation_weight", "access_weight")
SEQUENTIAL_CMAP = "cividis"
#: Resolution of the explorer's live image: lower than saved figures, so a redraw stays fast.
EXPLORER_DPI = 80

_SQRT3_2 = math.sqrt(3) / 2
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p", "8", "d")
#: One colour per scenario (the all-cases line is black), for figures whose colours are not policies.
SCENARIO_COLORS = {
    "confirmation_help": OKABE_ITO["sky_blue"],
    "access_help": OKABE_ITO["orange"],
    "confidence_control": OKABE_ITO["bluish_green"],
    "noisy_signal_control": OKABE_ITO["reddish_purple"],
    "correction_reserve": OKABE_ITO["vermillion"],
    ALL_CASES: OKABE_ITO["black"],
}
_STEP_COLORS = (OKABE_ITO["sky_blue"], OKABE_ITO["orange"], OKABE_ITO["reddish_purple"], OKABE_ITO["bluish_green"])


def _percent(retained: Any, cases: Any) -> np.ndarray:
    return 100 * np.asarray(retained, dtype=float) / np.asarray(cases, dtype=float)


def _count(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _text_color(cmap: Any, fraction: float) -> str:
    """Black or white, whichever reads better on the colour map at ``fraction``."""
    red, green, blue, _ = cmap(fraction)
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


def _groups(frame: pd.DataFrame) -> list[str]:
    """Scenarios in protocol order, then the all-cases group if present."""
    names = scenario_order(s for s in frame["scenario"] if s != ALL_CASES)
    return names + ([ALL_CASES] if ALL_CASES in set(frame["scenario"]) else [])


def _with_all_cases(summary: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """``summary`` (``support_retained`` and ``cases`` per scenario) plus an all-cases group per ``keys``."""
    totals = summary.groupby(list(keys), sort=False, observed=True)[["support_retained", "cases"]].sum().reset_index()
    return pd.concat([summary, totals.assign(scenario=ALL_CASES)], ignore_index=True)


def _only(frame: pd.DataFrame, column: str, what: str) -> Any:
    values = frame[column].unique() if column in frame else [None]
    if len(values) > 1:
        raise ValueError(f"{what} draws one {column}; the frame holds {', '.join(map(str, values))} (filter it first)")
    return values[0]


# --------------------------------------------------------------------------- ternary maps (03)


def ternary_xy(weights: Any) -> np.ndarray:
    """Plane coordinates of (confidence, confirmation, access) weights.

    The triangle has side 1: all weight on confidence at the top (0.5, sqrt(3)/2), on
    confirmation at the bottom left (0, 0), on access at the bottom right (1, 0).
    """
    weights = np.atleast_2d(np.asarray(weights, dtype=float))
    return np.column_stack([weights[:, 2] + 0.5 * weights[:, 0], _SQRT3_2 * weights[:, 0]])


def lattice_step(weights: np.ndarray) -> float:
    """The spacing of a simplex lattice (``1 / n``) that holds every weight triple in ``weights``."""
    values = np.unique(np.round(np.asarray(weights, dtype=float).ravel(), 12))
    gaps = np.diff(values)
    gaps = gaps[gaps > 1e-9]
    if not len(gaps):
        raise ValueError("a weight-simplex map needs at least two distinct weight triples")
    divisions = round(1 / gaps.min())
    off = np.abs(values * divisions - np.round(values * divisions)) > 1e-6
    if off.any():
        raise ValueError(
            f"weights {values[off].tolist()} are not on the simplex lattice of step 1/{divisions};"
            " draw a sweep made with a weights step only"
        )
    return 1 / divisions


def _hexagons(centres: np.ndarray, step: float) -> np.ndarray:
    """The cell of each lattice point: a regular hexagon, shape (points, 6, 2).

    Neighbouring lattice points are ``step`` apart along 0, 60 and 120 degrees, so the cells
    (vertices at the centroids of the six lattice triangles around a point) tile the plane.
    """
    angles = np.radians(30 + 60 * np.arange(6))
    radius = step / math.sqrt(3)
    offsets = radius * np.column_stack([np.cos(angles), np.sin(angles)])
    return centres[:, None, :] + offsets[None, :, :]


def _outline(hexagons: np.ndarray) -> list[np.ndarray]:
    """Edges of the union of ``hexagons``: the edges that only one of them has."""
    counts: dict[tuple, int] = {}
    segments: dict[tuple, np.ndarray] = {}
    for hexagon in hexagons:
        for start, end in zip(hexagon, np.roll(hexagon, -1, axis=0)):
            key = tuple(sorted((tuple(np.round(start, 9)), tuple(np.round(end, 9)))))
            counts[key] = counts.get(key, 0) + 1
            segments[key] = np.array([start, end])
    return [segments[key] for key, number in counts.items() if number == 1]


def control_losses(summary: pd.DataFrame, scenarios: Sequence[str] = CONTROL_SCENARIOS) -> pd.DataFrame:
    """Per setting and capacity: supports retained over all cases, and the control cases lost.

    ``summary``: :func:`evictlab.sweep.scenario_summary` rows of one policy and preset; the
    hatched region of :func:`weight_simplex_maps` is its ``safe`` rows. Columns: ``setting``,
    the three weights, ``capacity``, ``retained`` and ``cases`` (all scenarios),
    ``control_cases``, ``control_lost`` and ``safe`` (no case of ``scenarios`` lost).
    """
    _require(summary, ["setting", *WEIGHT_COLUMNS, "scenario", "capacity", "support_retained", "cases"], "control_losses")
    if not summary["scenario"].isin(scenarios).any():
        raise ValueError(f"the summary has no rows of the control scenarios {', '.join(scenarios)}")
    keys = ["setting", *WEIGHT_COLUMNS, "capacity"]
    frame = summary.assign(
        control_cases=summary["cases"].where(summary["scenario"].isin(scenarios), 0),
        control_retained=summary["support_retained"].where(summary["scenario"].isin(scenarios), 0),
    )
    totals = frame.groupby(keys, sort=True, observed=True)[
        ["support_retained", "cases", "control_cases", "control_retained"]
    ].sum().reset_index()
    totals = totals.rename(columns={"support_retained": "retained"})
    totals["control_lost"] = totals["control_cases"] - totals.pop("control_retained")
    totals["safe"] = totals["control_lost"] == 0
    return totals


@_styled
def weight_simplex_maps(
    summary: pd.DataFrame,
    capacity: int,
    *,
    marked: tuple[float, float, float] = DEERMEM_WEIGHTS,
    control_scenarios: Sequence[str] = CONTROL_SCENARIOS,
) -> Figure:
    """Support retention over the weight simplex at ``capacity``, one ternary map per scenario.

    ``summary``: :func:`evictlab.sweep.scenario_summary` of one policy and preset over a
    simplex grid (a weights step), at one pair of half-lives. Each lattice point is a
    hexagonal cell coloured by the share of the scenario's cases whose support is retained;
    ``marked`` (DeerMem's default) is a star; the hatched, outlined region holds the weights
    at which no control scenario loses a case.
    """
    _require(summary, ["setting", *WEIGHT_COLUMNS, "scenario", "capacity", "support_retained", "cases"], "weight_simplex_maps")
    policy = _only(summary, "policy", "weight_simplex_maps")
    _only(summary, "preset", "weight_simplex_maps")
    at = summary[summary["capacity"] == capacity]
    if at.empty:
        raise ValueError(f"no rows at capacity {capacity}; the summary has {sorted(summary['capacity'].unique())}")
    for column in ("confirmation_half_life_days", "access_half_life_days"):
        _only(at, column, "weight_simplex_maps")
    settings = at.drop_duplicates("setting").sort_values("setting")
    weights = settings[list(WEIGHT_COLUMNS)].to_numpy(dtype=float)
    step = lattice_step(weights)
    hexagons = _hexagons(ternary_xy(weights), step)
    position = {setting: i for i, setting in enumerate(settings["setting"])}
    safe_table = control_losses(at, control_scenarios)
    safe = np.zeros(len(settings), dtype=bool)
    safe[[position[s] for s in safe_table.loc[safe_table["safe"], "setting"]]] = True

    table = _with_all_cases(at[["setting", "scenario", "support_retained", "cases"]], ["setting"])
    groups = _groups(table)
    rows, cols = _grid(len(groups), 3)
    fig = Figure(figsize=(12.5, 4.3 * rows + 0.9), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    cmap = matplotlib.colormaps[SEQUENTIAL_CMAP]
    image = None
    for ax, group in zip(axes.flat, groups):
        members = table[table["scenario"] == group]
        values = np.full(len(settings), np.nan)
        values[[position[s] for s in members["setting"]]] = _percent(members["support_retained"], members["cases"])
        cases = int(members["cases"].iloc[0])
        image = _ternary_panel(ax, values, hexagons, safe, cmap, marked)
        ax.set_title(f"{group} ({cases} cases)")
    _hide_unused(axes, len(groups))
    colorbar = fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.75, pad=0.02)
    colorbar.set_label("support retained (% of the panel's cases)")
    half_lives = (at["confirmation_half_life_days"].iloc[0], at["access_half_life_days"].iloc[0])
    handles = [
        Line2D([], [], marker="*", linestyle="", markersize=14, markerfacecolor="white", markeredgecolor="black",
               label=f"DeerMem default {tuple(float(w) for w in marked)}"),
        Patch(facecolor="none", edgecolor="black", hatchcolor="black", hatch="///",
              label=f"no loss in {' or '.join(control_scenarios)}"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
    fig.suptitle(
        f"{policy or 'policy'} at capacity {capacity}: support retained over the weights"
        f" (confidence, confirmation, access), lattice step {step:g};"
        f" half-lives {half_lives[0]:g} / {half_lives[1]:g} days"
    )
    return fig


def _ternary_panel(ax: Any, values: np.ndarray, hexagons: np.ndarray, safe: np.ndarray, cmap: Any,
                   marked: tuple[float, float, float]) -> Any:
    corners = np.array([[0.5, _SQRT3_2], [0.0, 0.0], [1.0, 0.0]])
    frame = Polygon(corners, closed=True, facecolor="none", edgecolor="black", linewidth=1.0, zorder=5)
    ax.add_patch(frame)
    image = PolyCollection(hexagons, array=values, cmap=cmap, edgecolors="face", linewidths=0.3)
    image.set_clim(0, 100)
    image.set_clip_path(frame)
    ax.add_collection(image)
    _ternary_grid(ax)
    if safe.any():
        inside = hexagons[safe]
        path = MplPath.make_compound_path(*(MplPath(hexagon, closed=True) for hexagon in inside))
        hatch = PathPatch(path, facecolor="none", edgecolor="none", hatch="///", hatchcolor="white", zorder=3)
        hatch.set_clip_path(frame)
        ax.add_patch(hatch)
        outline = LineCollection(_outline(inside), colors="black", linewidths=1.8, zorder=4,
                                 path_effects=[patheffects.withStroke(linewidth=3.2, foreground="white")])
        outline.set_clip_path(frame)
        ax.add_collection(outline)
    x, y = ternary_xy(marked)[0]
    ax.plot(x, y, marker="*", markersize=15, markerfacecolor="white", markeredgecolor="black", zorder=6)
    labels = (("confidence", 0.5, _SQRT3_2 + 0.04, "bottom", "center"),
              ("confirmation", -0.02, -0.05, "top", "left"),
              ("access", 1.02, -0.05, "top", "right"))
    for text, tx, ty, va, ha in labels:
        ax.text(tx, ty, f"{text} = 1", ha=ha, va=va, fontsize=9, fontweight="bold")
    ax.set_xlim(-0.08, 1.08)
    ax.set_ylim(-0.14, _SQRT3_2 + 0.12)
    ax.set_aspect("equal")
    ax.axis("off")
    return image


def _ternary_grid(ax: Any) -> None:
    """Lines of constant weight at 0.2 steps, labelled on the edge where that weight grows."""
    for level in (0.2, 0.4, 0.6, 0.8):
        lines = (
            ([level, 1 - level, 0.0], [level, 0.0, 1 - level]),  # confidence = level: horizontal
            ([1 - level, level, 0.0], [0.0, level, 1 - level]),  # confirmation = level: parallel to the right edge
            ([0.0, 1 - level, level], [1 - level, 0.0, level]),  # access = level: parallel to the left edge
        )
        for start, end in lines:
            (x0, y0), (x1, y1) = ternary_xy(np.array([start, end]))
            ax.plot([x0, x1], [y0, y1], color="white", linewidth=0.5, alpha=0.6, zorder=2)
        cx, cy = ternary_xy([level, 0.0, 1 - level])[0]
        ax.text(cx + 0.02, cy, f"{level:.1f}", fontsize=7, ha="left", va="center", color="#333333")
        lx, ly = ternary_xy([1 - level, level, 0.0])[0]
        ax.text(lx - 0.02, ly, f"{level:.1f}", fontsize=7, ha="right", va="center", color="#333333")
        bx, by = ternary_xy([0.0, 1 - level, level])[0]
        ax.text(bx, by - 0.015, f"{level:.1f}", fontsize=7, ha="center", va="top", color="#333333")
    # Which weight each edge's numbers measure, written along that edge.
    ax.text(0.5, -0.085, "access weight", fontsize=7.5, ha="center", va="top", style="italic")
    ax.text(0.87, 0.45, "confidence weight", fontsize=7.5, ha="center", va="center", rotation=-60, style="italic")
    ax.text(0.13, 0.45, "confirmation weight", fontsize=7.5, ha="center", va="center", rotation=60, style="italic")


# --------------------------------------------------------------------------- half-life maps (04)


@_styled
def half_life_heatmaps(
    summary: pd.DataFrame,
    capacity: int,
    *,
    marked: tuple[float, float] = DEERMEM_HALF_LIVES,
) -> Figure:
    """Support retention over confirmation x access half-lives at ``capacity``, one map per scenario.

    ``summary``: :func:`evictlab.sweep.scenario_summary` of one policy, preset and weight
    triple over a half-life grid. Cells show the retained count; ``marked`` (DeerMem's
    90 / 30 days) is outlined when it is on the grid.
    """
    columns = ["confirmation_half_life_days", "access_half_life_days", "scenario", "capacity", "support_retained", "cases"]
    _require(summary, columns, "half_life_heatmaps")
    policy = _only(summary, "policy", "half_life_heatmaps")
    _only(summary, "preset", "half_life_heatmaps")
    at = summary[summary["capacity"] == capacity]
    if at.empty:
        raise ValueError(f"no rows at capacity {capacity}; the summary has {sorted(summary['capacity'].unique())}")
    weights = tuple(float(_only(at, column, "half_life_heatmaps")) for column in WEIGHT_COLUMNS if column in at)
    keys = ["confirmation_half_life_days", "access_half_life_days"]
    table = _with_all_cases(at[[*keys, "scenario", "support_retained", "cases"]], keys)
    confirmation = np.sort(table["confirmation_half_life_days"].unique())
    access = np.sort(table["access_half_life_days"].unique())
    groups = _groups(table)
    rows, cols = _grid(len(groups), 3)
    fig = Figure(figsize=(13, 4.1 * rows + 0.9), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    cmap = matplotlib.colormaps[SEQUENTIAL_CMAP]
    annotate = len(confirmation) * len(access) <= 100
    image = None
    for ax, group in zip(axes.flat, groups):
        members = table[table["scenario"] == group]
        retained = members.pivot_table(index=keys[0], columns=keys[1], values="support_retained", aggfunc="sum")
        retained = retained.reindex(index=confirmation, columns=access)
        cases = int(members["cases"].iloc[0])
        share = 100 * retained.to_numpy(dtype=float) / cases
        image = ax.imshow(share, origin="lower", cmap=cmap, vmin=0, vmax=100, aspect="auto")
        if annotate:
            for (i, j), value in np.ndenumerate(retained.to_numpy(dtype=float)):
                if not np.isnan(value):
                    ax.text(j, i, _count(value), ha="center", va="center", fontsize=7.5,
                            color=_text_color(cmap, share[i, j] / 100))
        if marked[0] in confirmation and marked[1] in access:
            i, j = list(confirmation).index(marked[0]), list(access).index(marked[1])
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="white",
                                                      linewidth=3.2, zorder=3))
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black",
                                                      linewidth=1.6, zorder=4))
        ax.set_xticks(range(len(access)), [f"{a:g}" for a in access], rotation=45 if len(access) > 6 else 0)
        ax.set_yticks(range(len(confirmation)), [f"{c:g}" for c in confirmation])
        ax.set_xlabel("access half-life (days)")
        ax.set_ylabel("confirmation half-life (days)")
        ax.set_title(f"{group} (retained of {cases} cases)")
    _hide_unused(axes, len(groups))
    colorbar = fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.75, pad=0.02)
    colorbar.set_label("support retained (% of the panel's cases)")
    handles = [Patch(facecolor="none", edgecolor="black", linewidth=1.6,
                     label=f"DeerMem default: confirmation {marked[0]:g} days, access {marked[1]:g} days")]
    fig.legend(handles=handles, loc="outside lower center", frameon=False)
    weight_text = f" with weights {weights}" if len(weights) == 3 else ""
    fig.suptitle(f"{policy or 'policy'} at capacity {capacity}{weight_text}: support retained over the half-lives")
    return fig


# --------------------------------------------------------------------------- capacity curves (04, 08)


@_styled
def capacity_curves(summary: pd.DataFrame) -> Figure:
    """Support retained against capacity: one panel per policy, one line per scenario.

    ``summary``: :func:`evictlab.zoo.zoo_summary` (``policy``, ``role``, ``scenario``,
    ``capacity``, ``retained``, ``cases``). Every policy but the bounds gets a panel, in the
    summary's order; each panel repeats the all-cases curves of the ``random`` floor and of the
    ``oracle`` ceiling when the summary has them. Scenario lines are shifted up or down by at
    most 2 percentage points so that coinciding lines stay visible; the all-cases line is not.
    """
    _require(summary, ["policy", "role", "scenario", "capacity", "retained", "cases"], "capacity_curves")
    roles = summary.drop_duplicates("policy").set_index("policy")["role"]
    policies = [p for p in dict.fromkeys(summary["policy"]) if roles[p] != "bound"]
    if not policies:
        raise ValueError("capacity_curves needs at least one policy that is not a bound")
    groups = _groups(summary)
    capacities = sorted(summary["capacity"].unique())
    totals = summary[summary["scenario"] == ALL_CASES]
    references = [(name, label, style) for name, label, style in (
        ("oracle", "oracle (all cases): ceiling", "-."), ("random", "random (all cases): floor", ":"))
        if name in set(totals["policy"])]
    rows, cols = _grid(len(policies), 4)
    fig = Figure(figsize=(14, 2.9 * rows + 1.3), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)
    scenario_lines = [group for group in groups if group != ALL_CASES]
    shifts = np.linspace(-2, 2, len(scenario_lines)) if len(scenario_lines) > 1 else np.zeros(len(scenario_lines))
    dodge = [dict(zip(scenario_lines, shifts)).get(group, 0.0) for group in groups]
    handles: dict[str, Any] = {}
    for ax, policy in zip(axes.flat, policies):
        for name, label, style in references:
            line = totals[totals["policy"] == name].sort_values("capacity")
            (handle,) = ax.plot(line["capacity"], _percent(line["retained"], line["cases"]), linestyle=style,
                                color=OKABE_ITO["grey"], linewidth=1.6, zorder=1, label=label)
            handles.setdefault(label, handle)
        members = summary[summary["policy"] == policy]
        for index, (group, offset) in enumerate(zip(groups, dodge)):
            line = members[members["scenario"] == group].sort_values("capacity")
            if line.empty:
                continue
            everything = group == ALL_CASES
            (handle,) = ax.plot(line["capacity"], _percent(line["retained"], line["cases"]) + offset,
                                color=SCENARIO_COLORS.get(group, OKABE_ITO["grey"]), linewidth=2.6 if everything else 1.4,
                                marker=_MARKERS[index % len(_MARKERS)], markersize=4.5 if not everything else 5.5,
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
    _hide_unused(axes, used)
    fig.legend(handles=list(handles.values()), loc="outside lower center", ncols=4, frameon=False)
    fig.suptitle("Support retained against capacity, per policy and scenario")
    return fig


# --------------------------------------------------------------------------- variant cascade (05)

CASCADE_METRICS = (
    "pools: other records or metadata",
    "pools: record text",
    "distractor draws",
)


def cascade_changes(summaries: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """What each step of a preset cascade changes, from :mod:`evictlab.diff` summaries in order.

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


@_styled
def variant_cascade(changes: pd.DataFrame, retention: pd.DataFrame) -> Figure:
    """The preset cascade: what each step changes (left) and support retained per preset (right).

    ``changes``: :func:`cascade_changes`; ``retention``: :func:`cascade_retention`.
    """
    _require(changes, ["step", "measure", "changed", "total"], "variant_cascade changes")
    _require(retention, ["preset", "policy", "capacity", "retained", "cases"], "variant_cascade retention")
    steps = list(dict.fromkeys(changes["step"]))
    measures = list(dict.fromkeys(changes["measure"]))
    fig = Figure(figsize=(13, 1.6 + 0.42 * len(measures) * max(1, len(steps)) / 1.4), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1.45, 1])
    height = 0.8 / len(steps)
    y = np.arange(len(measures))
    for index, step in enumerate(steps):
        rows = changes[changes["step"] == step].set_index("measure").reindex(measures)
        share = _percent(rows["changed"], rows["total"])
        offset = (index - (len(steps) - 1) / 2) * height
        color = _STEP_COLORS[index % len(_STEP_COLORS)]
        left.barh(y + offset, share, height, color=color, edgecolor="black", linewidth=0.5, label=step)
        for yi, value, changed, total in zip(y + offset, share, rows["changed"], rows["total"]):
            left.text(value + 1, yi, f"{int(changed)}/{int(total)}", va="center", fontsize=8)
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
            right.plot(x + shifts[index], line["retained"], linestyle=styles[index % len(styles)], marker=_MARKERS[index],
                       color=policy_color(policy), markeredgecolor="black", markeredgewidth=0.4, linewidth=1.8,
                       label=f"{policy}, capacity {capacity}")
    cases = int(retention["cases"].max())
    right.set_xticks(x, presets)
    right.set_xlim(-0.3, len(presets) - 0.7)
    right.set_ylim(0, cases * 1.1)
    right.set_xlabel("preset (cascade order)")
    right.set_ylabel(f"support retained (cases of {cases})")
    right.set_title("Support retained under each preset")
    right.grid(axis="y", color="#e5e5e5", linewidth=0.7)
    right.legend(frameon=False, fontsize=8, loc="lower right", ncols=2)
    fig.legend(*left.get_legend_handles_labels(), title="step", loc="outside lower center", ncols=len(steps),
               frameon=False)
    fig.suptitle("Protocol variants: " + " -> ".join(presets))
    return fig


# --------------------------------------------------------------------------- zoo table (08)


@_styled
def zoo_heatmap(summary: pd.DataFrame) -> Figure:
    """Every policy (rows) x capacity x scenario (columns), coloured by support retained.

    ``summary``: :func:`evictlab.zoo.zoo_summary`. Cells read "retained/cases" (expected
    counts of seeded policies with one decimal); rows keep the summary's order and are
    separated by role (DeerMem, zoo, random floor, bounds).
    """
    _require(summary, ["policy", "role", "scenario", "capacity", "retained", "cases", "seeds"], "zoo_heatmap")
    policies = list(dict.fromkeys(summary["policy"]))
    roles = summary.drop_duplicates("policy").set_index("policy")["role"].reindex(policies)
    groups = _groups(summary)
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
            count = f"{value:.1f}" if policies[i] in averaged else _count(value)
            ax.text(j, i, f"{count}/{int(cases[i, j])}", ha="center", va="center", fontsize=7.5,
                    color=_text_color(cmap, share[i, j] / 100))
    for block in range(1, len(capacities)):
        ax.axvline(block * len(groups) - 0.5, color="white", linewidth=4)
    changes = [i for i in range(1, len(policies)) if roles.iloc[i] != roles.iloc[i - 1]]
    for i in changes:
        ax.axhline(i - 0.5, color="white", linewidth=3)
    ax.set_xticks(range(len(columns)), _wrap_labels([group for _, group in columns]), fontsize=8)
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


# --------------------------------------------------------------------------- explanations (08)

_COMPONENT_COLORS = {
    "confidence": OKABE_ITO["blue"],
    "confirmationFreshness": OKABE_ITO["bluish_green"],
    "accessHeat": OKABE_ITO["orange"],
}


def score_weights(policy: str, params: Any) -> dict[str, float] | None:
    """The weight of each score component for a policy whose score is a weighted sum (hybrid-v1's
    three components under ``params``, a :class:`~evictlab.policies.PolicyParams`); None otherwise."""
    if policy != "hybrid-v1":
        return None
    return dict(zip(("confidence", "confirmationFreshness", "accessHeat"), params.weights))


@_styled
def explanation_figure(
    frame: pd.DataFrame,
    *,
    policy: str,
    capacity: int,
    support_fact_ids: Sequence[str] = (),
    weights: Mapping[str, float] | None = None,
    case_label: str = "",
) -> Figure:
    """Every fact of one pool by rank: its score, the cut line, the support and why it went.

    ``frame``: :meth:`evictlab.explain.Explanation.to_frame`. With ``weights`` (component
    name -> weight, e.g. hybrid-v1's), each bar is split into its weighted components; else
    it is the score. Evicted facts are hatched; the support is named in bold, with its
    displacer and the smallest single-signal changes that would have kept it.
    """
    _require(frame, ["fact_id", "rank", "kept", "reserved", "score", "margin", "displaced_by"], "explanation_figure")
    ordered = frame.sort_values("rank")
    support = set(support_fact_ids)
    fig = Figure(figsize=(11, 1.6 + 0.42 * len(ordered)), layout="constrained")
    ax = fig.subplots()
    y = np.arange(len(ordered))
    if weights:
        start = np.zeros(len(ordered))
        for name, weight in weights.items():
            part = weight * ordered[name].to_numpy(dtype=float)
            ax.barh(y, part, left=start, height=0.65, color=_COMPONENT_COLORS.get(name, OKABE_ITO["grey"]),
                    edgecolor="black", linewidth=0.5, label=f"{weight:g} x {name}")
            start += part
    else:
        ax.barh(y, ordered["score"], height=0.65, color=policy_color(policy), edgecolor="black", linewidth=0.5,
                label="score")
    evicted = ~ordered["kept"].to_numpy(dtype=bool)
    ax.barh(y[evicted], ordered["score"].to_numpy(dtype=float)[evicted], height=0.65, facecolor="white", alpha=0.55,
            edgecolor="black", hatch="//", linewidth=0.0, label="evicted (hatched)")
    scores = ordered["score"].to_numpy(dtype=float)
    low, high = min(0.0, scores.min()), max(0.0, scores.max())
    span = (high - low) or 1.0
    # Room on the right for the cut-line label and the support's explanation.
    ax.set_xlim(low - 0.02 * span, high + 0.55 * span)
    kept_count = int((~evicted).sum())
    if 0 < kept_count < len(ordered):
        ax.axhline(kept_count - 0.5, color=OKABE_ITO["vermillion"], linestyle="--", linewidth=1.5,
                   label=f"cut line: {kept_count} kept above it")
    labels = []
    for _, row in ordered.iterrows():
        status = "reserved" if row["reserved"] else ("kept" if row["kept"] else "evicted")
        labels.append(f"{row['fact_id']} ({status})")
    ax.set_yticks(y, labels)
    for tick, fact_id in zip(ax.get_yticklabels(), ordered["fact_id"]):
        if fact_id in support:
            tick.set_fontweight("bold")
            tick.set_color(OKABE_ITO["blue"])
    ax.set_ylim(len(ordered) - 0.5, -0.5)
    ax.set_xlabel("score" + (" = sum of the weighted components" if weights else ""))
    ax.set_ylabel("fact (rank order, best first)")
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.7)
    ax.set_axisbelow(True)
    notes = [_support_note(row) for _, row in ordered.iterrows() if row["fact_id"] in support]
    if notes:
        # In the empty band right of the longest bar, at the top.
        ax.text(high + 0.04 * span, -0.4, "\n\n".join(notes), ha="left", va="top", fontsize=8.5,
                bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": OKABE_ITO["grey"]})
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=5, frameon=False)
    fig.suptitle(f"Why each fact was kept or evicted: {policy} at capacity {capacity}"
                 + (f", {case_label}" if case_label else "") + " (support in bold)")
    return fig


def _support_note(row: pd.Series) -> str:
    if row["kept"]:
        margin = row["margin"]
        return f"support kept at rank {row['rank']}" + ("" if pd.isna(margin) else f", margin {margin:+.4f}")
    parts = [f"support evicted at rank {row['rank']}"]
    if row["displaced_by"] is not None and not pd.isna(row["displaced_by"]):
        parts.append(f"displaced by\n  {row['displaced_by']}\n  (margin {row['margin']:+.4f})")
    changes = []
    if "min_confidence" in row and not pd.isna(row["min_confidence"]):
        # Rounded up, so that the printed value still keeps the fact.
        changes.append(f"confidence >= {math.ceil(row['min_confidence'] * 1e4) / 1e4:.4f}")
    if "confirm_within_days" in row and not pd.isna(row["confirm_within_days"]):
        changes.append(f"confirmed within {int(row['confirm_within_days'])} days")
    if "min_access_heat" in row and not pd.isna(row["min_access_heat"]):
        changes.append(f"access heat >= {int(row['min_access_heat'])}")
    if changes:
        parts.append("kept if (any one of):\n  " + "\n  ".join(changes))
    else:
        parts.append("no single-signal change\nkeeps it (or none is\ncomputed for this policy)")
    return "\n".join(parts)


# --------------------------------------------------------------------------- the explorer (07)


class ExplorerFigure:
    """The explorer's one figure: retention per scenario (left) and every support's rank (right).

    Built once from the first view; :meth:`update` sets new data on the same artists (bar
    widths, labels, marker positions and colours, the cut line, titles), so the figure object
    and its artists persist across updates. :meth:`png` renders the current state for an
    ``ipywidgets.Image``. Two things keep a redraw fast: after the first draw the layout is
    frozen (the axes never change size), and everything that never changes (axes, ticks,
    labels, legends) is drawn once into a background that each redraw restores before it
    draws the changing artists on top. :attr:`figure` stays an ordinary figure: saving it
    draws everything.

    A *view* is three frames: ``summary`` (``scenario`` incl. all cases, ``retained``,
    ``cases``), ``reference`` (``scenario``, ``policy``, ``retained``, ``cases``: DeerMem's two
    policies at their defaults) and ``cases`` (``scenario``, ``support_rank``,
    ``support_retained``, ``reserved``, ``selected``, one row per case in a fixed order), plus
    ``policy`` (the bars' colour), ``capacity`` (the cut line), ``pool_size`` and a ``subtitle``
    (the figure title, which should name the setting). Axes titles are static: matplotlib
    repositions them on every full draw, and the background is drawn without the changing
    artists.
    """

    def __init__(self, summary: pd.DataFrame, reference: pd.DataFrame, cases: pd.DataFrame, *, policy: str,
                 capacity: int, pool_size: int, subtitle: str = "") -> None:
        with matplotlib.rc_context(_STYLE):
            self.figure = Figure(figsize=(11.5, 5.0), dpi=EXPLORER_DPI, layout="constrained")
            FigureCanvasAgg(self.figure)
            self.groups = _groups(summary)
            self.scenarios = [g for g in self.groups if g != ALL_CASES]
            self._build(cases, pool_size)
            self.update(summary, reference, cases, policy=policy, capacity=capacity, subtitle=subtitle)
            self.figure.canvas.draw()
        self.figure.set_layout_engine("none")
        self._changing = [*self.bars.patches, *self.bar_labels, *self.references.values(), self.points, self.selected,
                          self.cut, self.cut_label, self.title]
        self._background: Any = None

    def _build(self, cases: pd.DataFrame, pool_size: int) -> None:
        left, right = self.left, self.right = self.figure.subplots(1, 2, width_ratios=[1, 1.25])
        y = np.arange(len(self.groups))
        self.bars = left.barh(y, np.zeros(len(y)), 0.6, edgecolor="black", linewidth=0.5)
        # Counts in a column right of 100 %, where no bar or marker reaches.
        self.bar_labels = [left.text(105, yi, "", va="center", ha="left", fontsize=9) for yi in y]
        self.references = {}
        for policy, marker, shift in (("hybrid-v1", "D", -0.17), ("confidence", "o", 0.17)):
            self.references[policy] = left.scatter(np.zeros(len(y)), y + shift, marker=marker, s=40, zorder=3,
                                                   color=policy_color(policy), edgecolor="black", linewidth=0.6,
                                                   label=f"{policy} at DeerMem's defaults")
        self.reference_y = {policy: y + shift for policy, shift in (("hybrid-v1", -0.17), ("confidence", 0.17))}
        left.set_yticks(y, _wrap_labels(self.groups))
        left.set_ylim(len(y) - 0.5, -0.5)
        left.set_xlim(0, 122)
        left.set_xticks([0, 25, 50, 75, 100])
        left.set_xlabel("support retained (% of cases; right: retained/cases)")
        left.set_ylabel("scenario")
        left.set_title("Supports retained per scenario (bars: the setting above)")

        row = {scenario: i for i, scenario in enumerate(self.scenarios)}
        order = cases.groupby("scenario", sort=False).cumcount().to_numpy()
        size = cases.groupby("scenario", sort=False)["scenario"].transform("size").to_numpy()
        self.case_y = np.array([row[s] for s in cases["scenario"]]) + (order - (size - 1) / 2) * (0.6 / np.maximum(size, 1))
        self.points = right.scatter(np.ones(len(cases)), self.case_y, s=34, edgecolor="black", linewidth=0.6, zorder=3)
        self.selected = right.scatter([np.nan], [np.nan], s=170, facecolor="none", edgecolor="black", linewidth=1.6,
                                      zorder=4, label="selected case")
        self.cut = right.axvline(0.5, color=OKABE_ITO["vermillion"], linestyle="--", linewidth=1.5)
        self.cut_label = right.text(0.5, -0.65, "", color=OKABE_ITO["vermillion"], fontsize=8.5, ha="left", va="center")
        right.set_yticks(range(len(self.scenarios)), _wrap_labels(self.scenarios))
        right.set_ylim(len(self.scenarios) - 0.5, -0.85)
        right.set_xlim(0.4, pool_size + 0.6)
        right.set_xticks(range(1, pool_size + 1))
        right.set_xlabel("rank of the support fact in its pool (1 = highest score)")
        right.set_ylabel("scenario (one dot per case)")
        right.grid(axis="x", color="#eeeeee", linewidth=0.7)
        right.set_axisbelow(True)
        right.set_title("Where each support ranks")
        handles = [
            *self.references.values(),
            Line2D([], [], marker="o", linestyle="", markerfacecolor=OKABE_ITO["grey"], markeredgecolor="black",
                   label="support kept"),
            Line2D([], [], marker="o", linestyle="", markerfacecolor="white", markeredgecolor="black",
                   label="support evicted"),
            Line2D([], [], marker="s", linestyle="", markerfacecolor=OKABE_ITO["grey"], markeredgecolor="black",
                   label="kept by a reserved slot"),
            self.selected,
        ]
        self.figure.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False, fontsize=8.5)
        self.title = self.figure.suptitle("")

    def update(self, summary: pd.DataFrame, reference: pd.DataFrame, cases: pd.DataFrame, *, policy: str,
               capacity: int, subtitle: str = "") -> None:
        """Show a new view on the existing artists."""
        color = policy_color(policy)
        rates = summary.set_index("scenario").reindex(self.groups)
        shares = _percent(rates["retained"], rates["cases"])
        for bar, label, share, retained, total in zip(self.bars, self.bar_labels, shares, rates["retained"],
                                                      rates["cases"]):
            bar.set_width(share)
            bar.set_facecolor(color)
            label.set_text(f"{_count(retained)}/{int(total)}")
        for name, artist in self.references.items():
            rows = reference[reference["policy"] == name].set_index("scenario").reindex(self.groups)
            artist.set_offsets(np.column_stack([_percent(rows["retained"], rows["cases"]), self.reference_y[name]]))
        kept = cases["support_retained"].to_numpy(dtype=bool)
        reserved = cases["reserved"].to_numpy(dtype=bool)
        self.points.set_offsets(np.column_stack([cases["support_rank"].to_numpy(dtype=float), self.case_y]))
        self.points.set_facecolors([color if k else "white" for k in kept])
        self.points.set_paths([_marker_path("s" if r else "o") for r in reserved])
        chosen = np.flatnonzero(cases["selected"].to_numpy(dtype=bool))
        if len(chosen):
            index = chosen[0]
            self.selected.set_offsets([[cases["support_rank"].iloc[index], self.case_y[index]]])
        else:
            self.selected.set_offsets([[np.nan, np.nan]])
        self.cut.set_xdata([capacity + 0.5, capacity + 0.5])
        self.cut_label.set_position((capacity + 0.6, -0.6))
        self.cut_label.set_text(f"cut: ranks 1-{capacity} kept")
        self.title.set_text(subtitle)

    def png(self) -> bytes:
        """The current state as PNG bytes (fast compression: it is redrawn on every change)."""
        from PIL import Image

        canvas = self.figure.canvas
        if self._background is None:
            for artist in self._changing:
                artist.set_visible(False)
            canvas.draw()
            self._background = canvas.copy_from_bbox(self.figure.bbox)
            for artist in self._changing:
                artist.set_visible(True)
        canvas.restore_region(self._background)
        for artist in self._changing:
            self.figure.draw_artist(artist)
        buffer = io.BytesIO()
        image = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
        image.convert("RGB").save(buffer, format="png", compress_level=1)  # opaque: alpha would be 1/4 of the bytes
        return buffer.getvalue()


def _marker_path(marker: str) -> MplPath:
    style = MarkerStyle(marker)
    return style.get_path().transformed(style.get_transform())


__all__ = [
    "CONTROL_SCENARIOS",
    "DEERMEM_HALF_LIVES",
    "DEERMEM_WEIGHTS",
    "SCENARIO_COLORS",
    "ExplorerFigure",
    "capacity_curves",
    "cascade_changes",
    "cascade_retention",
    "control_losses",
    "explanation_figure",
    "half_life_heatmaps",
    "lattice_step",
    "score_weights",
    "ternary_xy",
    "variant_cascade",
    "weight_simplex_maps",
    "zoo_heatmap",
]
