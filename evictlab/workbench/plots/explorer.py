"""Figures of one pool's decisions: the explorer's live figure (07) and the explanation figure (08).

* :class:`ExplorerFigure` (07): the explorer's one persistent figure, updated in place.
* :func:`explanation_figure` (08): why each fact of one pool was kept or evicted.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.patches import Patch
from matplotlib.path import Path as MplPath
from PIL import Image

from ...selection.explain import at_least
from ...selection.tables import format_count
from .style import (
    ALL_CASES,
    MIN_TEXT_PT,
    OKABE_ITO,
    STYLE,
    bottom_legend,
    one_column,
    paper_figure,
    paper_width,
    percent,
    policy_color,
    require_columns,
    scenario_groups,
    styled,
    title_with_source,
    with_source,
    wrap_labels,
    wrap_text,
)

#: The explorer's live resolution: its 11.5-inch figure is 1,150 pixels wide, shown in 828 CSS
#: pixels (a point each), so it stays sharp on a 1.4x screen while a frame takes a few ms.
EXPLORER_DPI = 100

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


@styled
def explanation_figure(
    frame: pd.DataFrame,
    *,
    policy: str,
    capacity: int,
    support_fact_ids: Sequence[str] = (),
    weights: Mapping[str, float] | None = None,
    case_label: str = "",
    source: str | None = None,
) -> Figure:
    """Every fact of one pool by rank: its score, the cut line, the support and why it went.

    ``frame``: :meth:`evictlab.selection.explain.Explanation.to_frame`. With ``weights`` (component
    name -> weight, e.g. hybrid-v1's), each bar is split into its weighted components; else
    it is the score. Evicted facts are hatched; the support is named in bold, with its
    displacer and the smallest single-signal changes that would have kept it. The cut line
    closes the facts kept on rank alone; a fact held by a reserved slot (``(reserved)``) may
    rank above or below it.
    """
    require_columns(frame, ["fact_id", "rank", "kept", "reserved", "status", "score", "margin", "displaced_by"],
                    "explanation_figure")
    ordered = frame.sort_values("rank")
    support = set(support_fact_ids)
    fig = paper_figure(1.9 + 0.3 * len(ordered))
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
            edgecolor="black", hatch="//", linewidth=0.0)
    scores = ordered["score"].to_numpy(dtype=float)
    low, high = min(0.0, scores.min()), max(0.0, scores.max())
    span = (high - low) or 1.0
    # Room on the right for the cut-line label and the support's explanation.
    room = 1.3 if one_column() else 0.55
    ax.set_xlim(low - 0.02 * span, high + room * span)
    # The line closes the facts kept on rank alone; a reserved slot holds its fact wherever it ranks.
    status = ordered["status"].to_numpy()
    on_rank = np.flatnonzero(status == "kept")
    above = int(on_rank[-1]) + 1 if len(on_rank) else 0
    reserved_below = int((status[above:] == "reserved").sum())
    if 0 < above < len(ordered):
        ax.axhline(above - 0.5, color=OKABE_ITO["vermillion"], linestyle="--", linewidth=1.5,
                   label=f"cut line: {above} kept above it"
                   + (f", {reserved_below} reserved below" if reserved_below else ""))
    # One column is too narrow for long ids: their distinct tail (a hash) names them there.
    names = [f"…{i[-10:]}" if one_column() and len(i) > 14 else i for i in ordered["fact_id"]]
    labels = [f"{name} ({status})" for name, status in zip(names, ordered["status"])]
    ax.set_yticks(y, labels)
    for tick, fact_id in zip(ax.get_yticklabels(), ordered["fact_id"]):
        if fact_id in support:
            tick.set_fontweight("bold")
            tick.set_color(OKABE_ITO["blue"])
    ax.set_ylim(len(ordered) - 0.5, -0.5)
    ax.set_xlabel("score" + (" = sum of the weighted components" if weights else ""))
    ax.set_ylabel("fact (rank order, best first)")
    ax.grid(True, axis="x")
    notes = [_support_note(row) for _, row in ordered.iterrows() if row["fact_id"] in support]
    if notes:
        # In the empty band right of the longest bar, at the top.
        note_width = 0.9 * (room - 0.06) / (room + 1.02) * (72 * paper_width() - 110)  # less the fact labels
        ax.text(high + 0.04 * span, -0.4, wrap_text("\n\n".join(notes), MIN_TEXT_PT, note_width), ha="left", va="top",
                bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": OKABE_ITO["grey"]})
    handles, names = ax.get_legend_handles_labels()
    # Its own swatch: the bars' overlay (translucent, no edge) reads as stray marks in a legend box.
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", linewidth=0.8))
    names.append("evicted (hatched)")
    bottom_legend(fig, handles, names)
    title_with_source(fig, f"Why each fact was kept or evicted: {policy} at capacity {capacity}"
                      + (f", {case_label}" if case_label else "") + " (support in bold)", source)
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
        changes.append(f"confidence {at_least(row['min_confidence'])}")  # rounded so that it still keeps it
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
    widths, labels, marker positions and colours, the cut line, the title), so the figure
    object and its artists persist across updates. On screen it is matplotlib's blitting:
    everything that never changes (axes, ticks, labels, legends) is rasterised once by Agg and
    kept as a region; :meth:`frame_jpeg` restores it and draws only the changing artists on
    top (``Figure.draw_artist``), so a move costs neither a full redraw nor a layout. The
    title is not part of that raster: the live view shows :attr:`title_lines` as page text
    above it, where it wraps to the page and is never clipped (a long title drawn by Agg on
    every move would also cost most of a frame). After the first draw the layout is frozen.
    :attr:`figure` stays an ordinary figure: saving it draws everything, title included.

    A *view* is three frames: ``summary`` (``scenario`` incl. all cases, ``retained``,
    ``cases``), ``reference`` (``scenario``, ``policy``, ``retained``, ``cases``: DeerMem's two
    policies at their defaults) and ``cases`` (``scenario``, ``support_rank``,
    ``support_retained``, ``reserved``, ``selected``, one row per case in a fixed order), plus
    ``policy`` (the bars' colour), ``capacity`` (the cut line), ``pool_size``, a ``subtitle``
    (the figure title, which should name the setting; a line break splits it) and a ``source``
    (the data's origin, on a line under it). Axes titles are static: matplotlib repositions
    them on every full draw, and the background is drawn without the changing artists.
    """

    def __init__(self, summary: pd.DataFrame, reference: pd.DataFrame, cases: pd.DataFrame, *, policy: str,
                 capacity: int, pool_size: int, subtitle: str = "", source: str | None = None) -> None:
        with matplotlib.rc_context(STYLE):  # type: ignore[arg-type]  # the stubs want literal rc keys
            self.figure = Figure(figsize=(11.5, 5.0), dpi=EXPLORER_DPI, layout="constrained")
            self.canvas = FigureCanvasAgg(self.figure)
            self.groups = scenario_groups(summary)
            self.scenarios = [g for g in self.groups if g != ALL_CASES]
            self._build(cases, pool_size)
            self.update(summary, reference, cases, policy=policy, capacity=capacity, subtitle=subtitle, source=source)
            self.canvas.draw()
        self.figure.set_layout_engine("none")
        self._changing = [*self.bars.patches, *self.bar_labels, *self.references.values(), self.points, self.selected,
                          self.cut, self.cut_label]
        # The live raster starts below the title's band (the page shows the title as text).
        self._top = round(self.figure.bbox.height - self.title.get_window_extent().y0)
        self._background: Any = None

    def _build(self, cases: pd.DataFrame, pool_size: int) -> None:
        left, right = self.left, self.right = self.figure.subplots(1, 2, width_ratios=[1, 1.25])
        y = np.arange(len(self.groups))
        self.bars = left.barh(y, np.zeros(len(y)), 0.6, edgecolor="black", linewidth=0.5)
        # Counts in a column right of 100 %, where no bar or marker reaches.
        self.bar_labels = [left.text(105, yi, "", va="center", ha="left") for yi in y]
        self.references, self.reference_y = {}, {}
        for policy, marker, shift in (("hybrid-v1", "D", -0.17), ("confidence", "o", 0.17)):
            self.reference_y[policy] = y + shift
            self.references[policy] = left.scatter(np.zeros(len(y)), y + shift, marker=marker, s=40, zorder=3,
                                                   color=policy_color(policy), edgecolor="black", linewidth=0.6,
                                                   label=f"{policy} at DeerMem's defaults")
        left.set_yticks(y, wrap_labels(self.groups))
        left.set_ylim(len(y) - 0.5, -0.5)
        left.set_xlim(0, 122)
        left.set_xticks([0, 25, 50, 75, 100])
        left.set_xlabel("support retained (% of cases; right: retained/cases)")
        left.set_ylabel("scenario")
        left.set_title("Supports retained per scenario (bars: the setting above)")

        row = {scenario: i for i, scenario in enumerate(self.scenarios)}
        order = cases.groupby("scenario", sort=False).cumcount().to_numpy()
        size = cases.groupby("scenario", sort=False)["scenario"].transform("size").to_numpy()
        self.case_y = np.array([row[s] for s in cases["scenario"]]) + (order - (size - 1) / 2) * (
            0.6 / np.maximum(size, 1)
        )
        self.points = right.scatter(np.ones(len(cases)), self.case_y, s=34, edgecolor="black", linewidth=0.6, zorder=3)
        self.selected = right.scatter([np.nan], [np.nan], s=170, facecolor="none", edgecolor="black", linewidth=1.6,
                                      zorder=4, label="selected case")
        self.cut = right.axvline(0.5, color=OKABE_ITO["vermillion"], linestyle="--", linewidth=1.5)
        self.cut_label = right.text(0.5, -0.65, "", color=OKABE_ITO["vermillion"], ha="left", va="center")
        right.set_yticks(range(len(self.scenarios)), wrap_labels(self.scenarios))
        right.set_ylim(len(self.scenarios) - 0.5, -0.85)
        right.set_xlim(0.4, pool_size + 0.6)
        right.set_xticks(range(1, pool_size + 1))
        right.set_xlabel("rank of the support fact in its pool (1 = highest score)")
        right.set_ylabel("scenario (one dot per case)")
        right.grid(True, axis="x")
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
        self.figure.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
        self.title = self.figure.suptitle("")

    def update(self, summary: pd.DataFrame, reference: pd.DataFrame, cases: pd.DataFrame, *, policy: str,
               capacity: int, subtitle: str = "", source: str | None = None) -> None:
        """Show a new view on the existing artists."""
        color = policy_color(policy)
        rates = summary.set_index("scenario").reindex(self.groups)
        shares = percent(rates["retained"], rates["cases"])
        for bar, label, share, retained, total in zip(self.bars, self.bar_labels, shares, rates["retained"],
                                                      rates["cases"]):
            bar.set_width(share)
            bar.set_facecolor(color)
            label.set_text(f"{format_count(retained)}/{int(total)}")
        for name, artist in self.references.items():
            rows = reference[reference["policy"] == name].set_index("scenario").reindex(self.groups)
            artist.set_offsets(np.column_stack([percent(rows["retained"], rows["cases"]), self.reference_y[name]]))
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
        # Not "ranks 1-k kept": a reserved slot can take a rank's place on either side of the line.
        self.cut_label.set_text(f"cut at capacity {capacity}")
        self.title.set_text(with_source(subtitle, source))

    @property
    def title_lines(self) -> list[str]:
        """The figure title's lines: the setting, then the data's origin."""
        return self.title.get_text().splitlines()

    def frame_jpeg(self) -> bytes:
        """The figure below its title as JPEG bytes: the static raster with the changing artists
        drawn on it at their current state (the raster is made on the first call).

        JPEG at quality 95 without chroma subsampling: a frame is a live preview, replaced at the
        next move, and encodes in a quarter of a PNG's time (Pillow filters every PNG row five
        ways); pixels stay within about 8 % of the raster at edges, flat areas exact. Saved
        figures are PNG and SVG (:func:`~evictlab.workbench.plots.save`).
        """
        if self._background is None:
            hidden = [*self._changing, self.title]
            for artist in hidden:
                artist.set_visible(False)
            try:
                self.canvas.draw()
                self._background = self.canvas.copy_from_bbox(self.figure.bbox)
            finally:
                for artist in hidden:
                    artist.set_visible(True)
        self.canvas.restore_region(self._background)
        for artist in self._changing:
            self.figure.draw_artist(artist)
        rows = np.asarray(self.canvas.buffer_rgba())[self._top:]  # contiguous: whole rows
        frame = Image.frombuffer("RGBA", (rows.shape[1], rows.shape[0]), rows, "raw", "RGBA", 0, 1).convert("RGB")
        buffer = io.BytesIO()
        frame.save(buffer, format="jpeg", quality=95, subsampling=0)
        return buffer.getvalue()


@functools.lru_cache(maxsize=8)
def _marker_path(marker: str) -> MplPath:
    """A marker's outline at unit size (cached: every update asks for one per case)."""
    style = MarkerStyle(marker)
    return style.get_path().transformed(style.get_transform())
