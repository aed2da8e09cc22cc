"""Figures of the prepared pools (notebook 01): cases, fact metadata and evidence lengths."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from .style import (
    OKABE_ITO,
    bottom_legend,
    dodge,
    grid_shape,
    hide_unused,
    paper_figure,
    require_columns,
    scenario_order,
    side_by_side,
    styled,
    title_with_source,
    wrap_labels,
)


@styled
def pool_overview(cases: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Cases per scenario by question type, and the loss ranks the protocol assigns.

    ``cases``: one row per case with ``scenario``, ``question_type`` and ``loss_rank``.
    """
    require_columns(cases, ["scenario", "question_type", "loss_rank"], "pool_overview")
    scenarios = scenario_order(cases["scenario"])
    fig = paper_figure(4.4, 7.6)  # room for the upright scenario names
    left, right = side_by_side(fig)
    x = np.arange(len(scenarios))

    types = sorted(cases["question_type"].unique())
    type_colors = [OKABE_ITO[c] for c in ("sky_blue", "orange", "reddish_purple", "bluish_green", "yellow")]
    counts = cases.groupby(["scenario", "question_type"]).size().unstack(fill_value=0).reindex(scenarios, fill_value=0)
    bottom = np.zeros(len(scenarios))
    for i, kind in enumerate(types):
        values = counts[kind].to_numpy() if kind in counts else np.zeros(len(scenarios))
        left.bar(x, values, bottom=bottom, color=type_colors[i % len(type_colors)], edgecolor="black",
                 linewidth=0.5, label=kind)
        bottom += values
    for xi, total in zip(x, bottom):
        left.text(xi, total, f"{int(total)}", ha="center", va="bottom")
    left.set_xticks(x, scenarios, rotation=90)
    left.set_xlabel("scenario")
    left.set_ylabel("cases")
    left.set_title("Cases per scenario, by question type")
    left.set_ylim(0, bottom.max() * 1.12)

    ranks = sorted(cases["loss_rank"].unique())
    rank_counts = cases.groupby(["scenario", "loss_rank"]).size().unstack(fill_value=0).reindex(scenarios, fill_value=0)
    offsets, width = dodge(len(ranks))
    rank_colors = [
        OKABE_ITO[c] for c in ("bluish_green", "yellow", "vermillion", "sky_blue", "reddish_purple", "orange")
    ]
    for offset, rank, color in zip(offsets, ranks, rank_colors * len(ranks)):
        values = rank_counts[rank].to_numpy()
        right.bar(x + offset, values, width, color=color, edgecolor="black", linewidth=0.5, label=f"loss rank {rank}")
    right.set_xticks(x, scenarios, rotation=90)
    right.set_xlabel("scenario")
    right.set_ylabel("cases")
    right.set_title("Loss rank: the support's rank under the confidence policy")
    right.set_ylim(0, rank_counts.to_numpy().max() * 1.1)
    bottom_legend(fig, [*left.get_legend_handles_labels()[0], *right.get_legend_handles_labels()[0]])
    title_with_source(fig, f"The {len(cases)} prepared cases", source)
    return fig


@styled
def pool_metadata(facts: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Every fact of every pool: its confidence, its freshness signal and whether it is the support.

    ``facts``: one row per fact with ``case_id``, ``scenario``, ``loss_rank``, ``role``
    (``support`` or ``distractor``), ``confidence``, ``confirmed`` (bool) and ``heated`` (bool).
    One panel per scenario, one line per case.
    """
    require_columns(facts, ["case_id", "scenario", "loss_rank", "role", "confidence", "confirmed", "heated"],
                    "pool_metadata")
    scenarios = scenario_order(facts["scenario"])
    rows, cols = grid_shape(len(scenarios) + 1, 2)
    fig = paper_figure(2.5 * rows + 0.5, 2.2 * rows + 0.5)
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False))
    markers = {"plain": "o", "confirmed": "^", "heated": "s"}
    # Each signal on its own sub-line of a case (axis inverted: negative is above).
    lanes = {"confirmed": -0.22, "plain": 0.0, "heated": 0.22}
    role_colors = {"support": OKABE_ITO["blue"], "distractor": OKABE_ITO["grey"]}
    signal = np.where(facts["confirmed"], "confirmed", np.where(facts["heated"], "heated", "plain"))
    facts = facts.assign(_signal=signal, _x=facts["confidence"].astype(float))
    # Facts sharing case, signal and confidence would hide each other: spread them side by side.
    same = facts.groupby(["case_id", "_signal", facts["confidence"].round(9)])
    facts["_x"] += (same.cumcount() - (same["confidence"].transform("size") - 1) / 2) * 0.011
    for ax, scenario in zip(axes.flat, scenarios):
        members = facts[facts["scenario"] == scenario]
        case_ids = list(dict.fromkeys(members["case_id"]))
        row_of = {case_id: y for y, case_id in enumerate(case_ids)}
        for y in row_of.values():
            ax.axhline(y, color="#e5e5e5", linewidth=0.6, zorder=0)
        # One scatter call per (role, signal): supports drawn last, larger and outlined.
        for role in ("distractor", "support"):
            for name, marker in markers.items():
                group = members[(members["role"] == role) & (members["_signal"] == name)]
                if group.empty:
                    continue
                support = role == "support"
                ax.scatter(group["_x"], group["case_id"].map(row_of) + lanes[name], marker=marker,
                           s=64 if support else 22, color=role_colors[role], edgecolor="black",
                           linewidth=0.7 if support else 0.3, zorder=3 if support else 2)
        loss_rank = members.groupby("case_id", sort=False)["loss_rank"].first()
        labels = [f"{_short_case_id(c)} (L{int(loss_rank[c])})" for c in case_ids]
        ax.set_yticks(range(len(case_ids)), labels)
        ax.set_ylim(len(case_ids) - 0.5, -0.5)
        ax.set_xlim(0.45, 1.0)
        ax.set_title(wrap_labels([scenario])[0])
        ax.set_xlabel("confidence")
        ax.set_ylabel("case (loss rank)")
    legend_ax = axes.flat[len(scenarios)]
    legend_ax.axis("off")

    def key(marker: str, size: float, color: str, label: str) -> Line2D:
        return Line2D(
            [], [], marker=marker, linestyle="", markersize=size, color=color, markeredgecolor="black", label=label
        )

    handles = [
        key("o", 9, role_colors["support"], "support fact"),
        key("o", 6, role_colors["distractor"], "distractor"),
        key("o", 7, "white", "no signal"),
        key("^", 7, "white", "confirmed (lastConfirmedAt set)"),
        key("s", 7, "white", "access heat above 0 at the clock"),
    ]
    legend_ax.legend(handles=handles, loc="center", frameon=False, title="(L8) = the case's loss rank")
    hide_unused(axes, len(scenarios) + 1)
    legend_ax.set_visible(True)
    title_with_source(fig, "Fact metadata of every pool: confidence and freshness signals", source)
    return fig


@styled
def evidence_lengths(cases: pd.DataFrame, bank: pd.DataFrame, *, support_limit: int | None = None,
                     bank_limits: tuple[int, int] | None = None, source: str | None = None) -> Figure:
    """Rendered evidence lengths: each official case's support, and the distractor bank.

    ``cases``: ``scenario``, ``source`` and ``support_chars``; only ``longmemeval`` cases are
    drawn (synthetic supports are one sentence). ``bank``: ``evidence_chars`` and
    ``question_type``. The optional limits draw the protocol's length filters.
    """
    require_columns(cases, ["scenario", "source", "support_chars"], "evidence_lengths cases")
    require_columns(bank, ["evidence_chars", "question_type"], "evidence_lengths bank")
    official = cases[cases["source"] == "longmemeval"]
    scenarios = scenario_order(official["scenario"])
    fig = paper_figure(3.4, 6.4)
    left, right = side_by_side(fig, width_ratios=[1.2, 1])
    for x, scenario in enumerate(scenarios):
        values = np.sort(official.loc[official["scenario"] == scenario, "support_chars"].to_numpy())
        # Spread points evenly around the column: deterministic, unlike random jitter.
        spread = np.linspace(-0.18, 0.18, len(values)) if len(values) > 1 else np.zeros(len(values))
        left.scatter(x + spread, values, color=OKABE_ITO["blue"], edgecolor="black", linewidth=0.4, s=30, zorder=3)
        if len(values):
            left.hlines(np.median(values), x - 0.3, x + 0.3, color="black", linewidth=1.5, zorder=4)
    if support_limit is not None:
        left.axhline(support_limit, color=OKABE_ITO["vermillion"], linestyle="--", linewidth=1)
        left.text(len(scenarios) - 0.5, support_limit, f"selection limit {support_limit}", ha="right", va="top",
                  color=OKABE_ITO["vermillion"])
    left.set_xticks(range(len(scenarios)), wrap_labels(scenarios))
    left.set_xlabel("scenario")
    left.set_ylim(bottom=0)
    left.set_ylabel("support evidence length (characters)")
    left.set_title("Support evidence per official case (bar = median)")

    types = sorted(bank["question_type"].unique())
    type_colors = [OKABE_ITO[c] for c in ("sky_blue", "orange", "reddish_purple", "bluish_green")]
    lengths = bank["evidence_chars"].to_numpy()
    bins = length_bins(lengths, bank_limits)
    right.hist([bank.loc[bank["question_type"] == t, "evidence_chars"].to_numpy() for t in types], bins=bins,
               stacked=True, color=type_colors[: len(types)], edgecolor="black", linewidth=0.5, label=types)
    if bank_limits is not None:
        # The filter keeps lo <= length <= hi (whole characters): its edges lie half a character
        # outside, where the bins also break, so a record at exactly lo or hi is drawn inside.
        for edge in (bank_limits[0] - 0.5, bank_limits[1] + 0.5):
            kept = f"bank filter {bank_limits[0]} to {bank_limits[1]} (both kept)"
            right.axvline(edge, color=OKABE_ITO["vermillion"], linestyle="--", linewidth=1,
                          label=kept if edge > bank_limits[0] else None)
    right.set_xlabel("distractor evidence length (characters)")
    right.set_ylabel("bank records")
    right.yaxis.set_major_locator(MaxNLocator(integer=True))
    right.set_title(f"Distractor bank ({len(bank)} records)")
    right.legend(frameon=False, loc="upper right")
    title_with_source(fig, "Evidence lengths that the protocol's filters see", source)
    return fig


def length_bins(lengths: np.ndarray, limits: tuple[int, int] | None, count: int = 14) -> np.ndarray:
    """Histogram edges for whole-character lengths that never straddle an inclusive filter.

    With ``limits`` (lo, hi), ``count`` equal bins span exactly lo - 0.5 to hi + 0.5, so the
    records a filter keeps (lo <= length <= hi, the bounds included) fall in bins inside the
    filter's edges; lengths outside get bins of the same width beyond them.
    """
    lengths = np.asarray(lengths, dtype=float)
    if limits is None:
        return np.linspace(0, max(1.0, lengths.max()) * 1.05, count + 1)
    low, high = limits[0] - 0.5, limits[1] + 0.5
    width = (high - low) / count
    below = int(np.ceil(max(0.0, low - min(lengths.min(), low)) / width))
    above = int(np.ceil(max(0.0, max(lengths.max(), high) - high) / width))
    return low + width * np.arange(-below, count + above + 1)


def _short_case_id(case_id: str) -> str:
    """Axis label of a case: the synthetic ids lose their shared ``correction_`` prefix."""
    short = case_id.removeprefix("correction_")
    return short if len(short) <= 16 else short[:15] + "…"
