"""Figures of parameter sweeps (notebooks 03 and 04): the score's weights and half-lives.

* :func:`weight_simplex_maps` (03): support retention over the weight simplex, one ternary
  map per scenario; :func:`control_losses` gives the data of its hatched region.
* :func:`half_life_heatmaps` (04): retention over confirmation x access half-lives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib import patheffects
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, PathPatch, Polygon, Rectangle
from matplotlib.path import Path as MplPath

from ...policies import PolicyParams
from ...selection.tables import format_count
from .style import (
    ALL_CASES,
    SEQUENTIAL_CMAP,
    bottom_legend,
    grid_shape,
    hide_unused,
    label_panels,
    one_column,
    paper_figure,
    percent,
    require_columns,
    retention_cmap,
    retention_colorbar,
    retention_norm,
    scenario_groups,
    styled,
    text_color,
    title_with_source,
)

#: The scenarios where a signal must not beat a clearly better support (spec 2.9).
CONTROL_SCENARIOS = ("confidence_control", "noisy_signal_control")
#: DeerMem's default weights (confidence, confirmation, access) and half-lives (days, confirmation and access).
DEERMEM_WEIGHTS = PolicyParams().weights
DEERMEM_HALF_LIVES = (PolicyParams().confirmation_half_life_days, PolicyParams().access_half_life_days)
WEIGHT_COLUMNS = ("confidence_weight", "confirmation_weight", "access_weight")

_SQRT3_2 = math.sqrt(3) / 2


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


#: The corners of the ternary triangle (confidence at the top), counter-clockwise.
_CORNERS = np.array([[0.5, _SQRT3_2], [0.0, 0.0], [1.0, 0.0]])


def _clip_to_triangle(hexagons: np.ndarray) -> list[np.ndarray]:
    """Each cell cut to the triangle (Sutherland-Hodgman against its three edges).

    Cut here rather than with a clip path (also the outline, :func:`_clip_segments`): the SVG
    writer spells a clip path's transform out for every clipped cell and segment, which made
    the simplex maps the slowest figures to save.
    """
    edges = list(zip(_CORNERS, np.roll(_CORNERS, -1, axis=0)))
    inside = np.ones(len(hexagons), dtype=bool)
    for start, end in edges:
        inside &= (_side(start, end, hexagons) >= -1e-12).all(axis=1)
    cells = list(hexagons)
    for index in np.flatnonzero(~inside):
        polygon = hexagons[index]
        for start, end in edges:
            if not len(polygon):
                break
            side = _side(start, end, polygon)
            kept = []
            for i in range(len(polygon)):
                j = (i + 1) % len(polygon)
                if side[i] >= 0:
                    kept.append(polygon[i])
                if (side[i] >= 0) != (side[j] >= 0):  # the edge crosses the line: add the crossing
                    kept.append(polygon[i] + (polygon[j] - polygon[i]) * side[i] / (side[i] - side[j]))
            polygon = np.array(kept).reshape(-1, 2)
        cells[index] = polygon
    return cells


def _clip_segments(segments: list[np.ndarray]) -> list[np.ndarray]:
    """The parts of line segments (2 x 2 arrays) inside the triangle; segments outside it go."""
    clipped = []
    for segment in segments:
        start, end = segment
        for corner, following in zip(_CORNERS, np.roll(_CORNERS, -1, axis=0)):
            first, second = _side(corner, following, start), _side(corner, following, end)
            if first < 0 and second < 0:
                break
            if first < 0 or second < 0:  # move the outer end to where the segment crosses the edge
                crossing = start + (end - start) * first / (first - second)
                start, end = (crossing, end) if first < 0 else (start, crossing)
        else:
            if np.hypot(*(end - start)) > 1e-12:
                clipped.append(np.array([start, end]))
    return clipped


def _side(start: np.ndarray, end: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Positive where ``points`` lie left of the line from ``start`` to ``end`` (inside the triangle)."""
    direction = end - start
    return direction[0] * (points[..., 1] - start[1]) - direction[1] * (points[..., 0] - start[0])


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

    ``summary``: :func:`evictlab.analysis.sweep.scenario_summary` rows of one policy and preset; the
    hatched region of :func:`weight_simplex_maps` is its ``safe`` rows. Columns: ``setting``,
    the three weights, ``capacity``, ``retained`` and ``cases`` (all scenarios),
    ``control_cases``, ``control_lost`` and ``safe`` (no case of ``scenarios`` lost).
    """
    require_columns(summary, ["setting", *WEIGHT_COLUMNS, "scenario", "capacity", "support_retained", "cases"],
                    "control_losses")
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


@styled
def weight_simplex_maps(summary: pd.DataFrame, capacity: int, *, marked: tuple[float, float, float] = DEERMEM_WEIGHTS,
                        control_scenarios: Sequence[str] = CONTROL_SCENARIOS, source: str | None = None) -> Figure:
    """Support retention over the weight simplex at ``capacity``, one ternary map per scenario.

    ``summary``: :func:`evictlab.analysis.sweep.scenario_summary` of one policy and preset over a
    simplex grid (a weights step), at one pair of half-lives. Each lattice point is a
    hexagonal cell coloured by the share of the scenario's cases whose support is retained;
    ``marked`` (DeerMem's default) is a ring around its cell, which stays visible, and its
    value is written in each panel; the hatched, outlined region holds the weights at which no
    control scenario loses a case. The colour scale is binned (:func:`.style.retention_norm`),
    with a bin of its own for 100 %.
    """
    require_columns(summary, ["setting", *WEIGHT_COLUMNS, "scenario", "capacity", "support_retained", "cases"],
                    "weight_simplex_maps")
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
    marked_settings = list(settings.loc[np.all(np.isclose(weights, marked, atol=1e-9), axis=1), "setting"])
    safe_table = control_losses(at, control_scenarios)
    safe = np.zeros(len(settings), dtype=bool)
    safe[[position[s] for s in safe_table.loc[safe_table["safe"], "setting"]]] = True

    table = _with_all_cases(at[["setting", "scenario", "support_retained", "cases"]], ["setting"])
    groups = scenario_groups(table)
    rows, cols = grid_shape(len(groups), 3)
    fig = paper_figure(2.6 * rows + 1.1, 2.1 * rows + 1.3)
    axes = fig.subplots(rows, cols, squeeze=False)
    cmap = retention_cmap()
    image = None
    for ax, group in zip(axes.flat, groups):
        members = table[table["scenario"] == group]
        values = np.full(len(settings), np.nan)
        values[[position[s] for s in members["setting"]]] = percent(members["support_retained"], members["cases"])
        cases = int(members["cases"].iloc[0])
        image = _ternary_panel(ax, values, hexagons, safe, cmap, retention_norm(), marked)
        retained = members.set_index("setting")["support_retained"]
        at_marked = [retained.get(setting) for setting in marked_settings]
        deermem = f"{format_count(at_marked[0])}/{cases} kept" if at_marked else "not on the lattice"
        ax.set_title(f"{group} ({cases} cases)\nDeerMem default: {deermem}")
    hide_unused(axes, len(groups))
    retention_colorbar(fig, image, axes.ravel().tolist(), "support retained (% of the panel's cases)")
    half_lives = (at["confirmation_half_life_days"].iloc[0], at["access_half_life_days"].iloc[0])
    handles = [
        Line2D([], [], marker="o", linestyle="", markersize=11, markerfacecolor="none", markeredgecolor="black",
               markeredgewidth=2, label=f"DeerMem default {tuple(float(w) for w in marked)}"),
        Patch(facecolor="none", edgecolor="black", hatchcolor="black", hatch="///",
              label=f"no loss in {' or '.join(control_scenarios)}"),
    ]
    bottom_legend(fig, handles)
    title_with_source(
        fig,
        f"{policy or 'policy'} at capacity {capacity}: support retained over the weights"
        f" (confidence, confirmation, access), lattice step {step:g};"
        f" half-lives {half_lives[0]:g} / {half_lives[1]:g} days",
        source,
    )
    return fig


@styled
def stability_maps(
    stability: pd.DataFrame, *, marked: tuple[float, float, float] = DEERMEM_WEIGHTS, source: str | None = None
) -> Figure:
    """Knife edges of the weight simplex: one ternary map per capacity.

    ``stability``: :func:`evictlab.analysis.validation.stability`. Each lattice point is coloured by the
    range of supports retained (all cases) over itself and its neighbours one lattice step
    away, in percentage points of the cases: 0 is a plateau, a dark cell a point where a
    step of one weight changes the result.
    """
    require_columns(stability, ["setting", *WEIGHT_COLUMNS, "capacity", "range", "cases"], "stability_maps")
    capacities = sorted(stability["capacity"].unique())
    rows, cols = grid_shape(len(capacities), 3)
    fig = paper_figure(2.6 * rows + 0.9, 2.1 * rows + 1.1)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    hide_unused(axes, len(capacities))
    cmap = matplotlib.colormaps[SEQUENTIAL_CMAP]
    # One continuous scale for every capacity, from a plateau (0) to the largest range.
    top = max(1.0, float(np.nanmax(percent(stability["range"], stability["cases"]))))
    norm = Normalize(0, top)
    images = []
    for ax, capacity in zip(axes, capacities):
        at = stability[stability["capacity"] == capacity].sort_values("setting")
        weights = at[list(WEIGHT_COLUMNS)].to_numpy(dtype=float)
        hexagons = _hexagons(ternary_xy(weights), lattice_step(weights))
        values = percent(at["range"], at["cases"])
        images.append(_ternary_panel(ax, values, hexagons, np.zeros(len(at), dtype=bool), cmap, norm, marked))
        ax.set_title(f"capacity {capacity}")
    colorbar = fig.colorbar(images[-1], ax=list(axes), shrink=0.8, pad=0.02, location="bottom")
    colorbar.set_label("retention range within one lattice step (points of %)")
    title_with_source(
        fig, "Stability of the weights: how much one lattice step can change support retained (all cases)", source
    )
    return fig


def _ternary_panel(ax: Any, values: np.ndarray, hexagons: np.ndarray, safe: np.ndarray, cmap: Any, norm: Any,
                   marked: tuple[float, float, float]) -> Any:
    frame = Polygon(_CORNERS, closed=True, facecolor="none", edgecolor="black", linewidth=1.0, zorder=5)
    ax.add_patch(frame)
    cells = _clip_to_triangle(hexagons)
    image = PolyCollection(
        cells,
        array=values, cmap=cmap, norm=norm, edgecolors="face", linewidths=0.3,
    )
    ax.add_collection(image)
    _ternary_grid(ax)
    if safe.any():
        inside = hexagons[safe]
        path = MplPath.make_compound_path(*(MplPath(cells[index], closed=True) for index in np.flatnonzero(safe)))
        hatch = PathPatch(path, facecolor="none", edgecolor="none", hatch="///", hatchcolor="white", zorder=3)
        ax.add_patch(hatch)
        outline = LineCollection(_clip_segments(_outline(inside)), colors="black", linewidths=1.8, zorder=4,
                                 path_effects=[patheffects.withStroke(linewidth=3.2, foreground="white")])
        ax.add_collection(outline)
    x, y = ternary_xy(marked)[0]
    # A ring, not a filled marker: the cell it marks keeps its colour.
    ax.plot(x, y, marker="o", markersize=11, markerfacecolor="none", markeredgecolor="black", markeredgewidth=2,
            zorder=6, path_effects=[patheffects.withStroke(linewidth=4, foreground="white")])
    # Each corner is named once; the bottom two sit under the edge's numbers, one row each, so
    # that neither runs into the other in a panel of a one-column figure.
    labels = (("confidence = 1", 0.5, _SQRT3_2 + 0.04, "bottom", "center"),
              ("confirmation = 1", -0.04, -0.13, "top", "left"),
              ("access = 1", 1.04, -0.24, "top", "right"))
    for text, tx, ty, va, ha in labels:
        ax.text(tx, ty, text, ha=ha, va=va, fontweight="bold")
    ax.set_xlim(-0.08, 1.08)
    ax.set_ylim(-0.36, _SQRT3_2 + 0.12)
    ax.set_aspect("equal")
    ax.axis("off")
    return image


def _ternary_grid(ax: Any) -> None:
    """Lines of constant weight at 0.2 steps, labelled on the edge where that weight grows (towards
    the next corner, counter-clockwise: confirmation on the left edge, access on the bottom one,
    confidence on the right one)."""
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
        ax.text(cx + 0.02, cy, f"{level:.1f}", ha="left", va="center", color="#333333")
        lx, ly = ternary_xy([1 - level, level, 0.0])[0]
        ax.text(lx - 0.02, ly, f"{level:.1f}", ha="right", va="center", color="#333333")
        bx, by = ternary_xy([0.0, 1 - level, level])[0]
        ax.text(bx, by - 0.015, f"{level:.1f}", ha="center", va="top", color="#333333")


# --------------------------------------------------------------------------- half-life maps (04)


@styled
def half_life_heatmaps(summary: pd.DataFrame, capacity: int, *, marked: tuple[float, float] = DEERMEM_HALF_LIVES,
                       source: str | None = None) -> Figure:
    """Support retention over confirmation x access half-lives at ``capacity``, one map per scenario.

    ``summary``: :func:`evictlab.analysis.sweep.scenario_summary` of one policy, preset and weight
    triple over a half-life grid. Cells show the retained count; ``marked`` (DeerMem's
    90 / 30 days) is outlined when it is on the grid.
    """
    columns = ["confirmation_half_life_days", "access_half_life_days", "scenario", "capacity", "support_retained",
               "cases"]
    require_columns(summary, columns, "half_life_heatmaps")
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
    groups = scenario_groups(table)
    rows, cols = grid_shape(len(groups), 3)
    fig = paper_figure(2.4 * rows + 1.1, 2.0 * rows + 1.3)
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
                    ax.text(j, i, format_count(value), ha="center", va="center",
                            color=text_color(cmap, share[i, j] / 100))
        if marked[0] in confirmation and marked[1] in access:
            i, j = list(confirmation).index(marked[0]), list(access).index(marked[1])
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="white",
                                                      linewidth=3.2, zorder=3))
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black",
                                                      linewidth=1.6, zorder=4))
        ax.set_xticks(range(len(access)), [f"{a:g}" for a in access], rotation=45 if len(access) > 6 else 0)
        ax.set_yticks(range(len(confirmation)), [f"{c:g}" for c in confirmation])
        ax.set_title(f"{group} ({cases} cases)")
    label_panels(axes, len(groups), "access half-life (days)", "confirmation half-life (days)")
    hide_unused(axes, len(groups))
    assert image is not None  # there is always the all-cases panel
    colorbar = fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.75, pad=0.02,
                            location="bottom" if one_column() else "right")
    colorbar.set_label("support retained (% of the panel's cases)")
    handles = [Patch(facecolor="none", edgecolor="black", linewidth=1.6,
                     label=f"DeerMem default: confirmation {marked[0]:g} days, access {marked[1]:g} days")]
    bottom_legend(fig, handles)
    weight_text = f" with weights {weights}" if len(weights) == 3 else ""
    title_with_source(
        fig, f"{policy or 'policy'} at capacity {capacity}{weight_text}: support retained over the half-lives", source
    )
    return fig
