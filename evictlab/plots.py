"""Figures of the workbench: pure functions from tidy frames to matplotlib Figures.

Every function builds a new :class:`matplotlib.figure.Figure` (no pyplot, so no backend and
no global figure registry is involved) and returns it; nothing here changes ``rcParams``,
selects a backend or touches the file system except :func:`save`. The house style is applied
with :func:`matplotlib.rc_context` while a figure is built, so it is restored afterwards.

Every figure function takes an optional ``source`` (say, the dataset or QA run the data came
from), shown under the title, so that a saved file still says what it shows.

Colours come from the Okabe-Ito palette, which stays distinguishable under the common forms
of colour blindness. A policy has the same colour in every figure (:data:`POLICY_COLORS`,
:func:`policy_color`).

:func:`save` writes PNG and SVG files whose bytes depend only on the figure: no dates, no
software version, a fixed SVG id salt.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Iterable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .protocol import SCENARIO_ORDER, SYNTHETIC_SCENARIO
from .qa.report import interval_label
from .results import atomic_write_bytes

#: The Okabe-Ito palette (Okabe & Ito 2008), plus a neutral grey.
OKABE_ITO: dict[str, str] = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
    "grey": "#999999",
}

#: Fixed colours of the policies; the two DeerMem policies get the two most distinct hues.
POLICY_COLORS: dict[str, str] = {
    "confidence": OKABE_ITO["vermillion"],
    "hybrid-v1": OKABE_ITO["blue"],
    "oracle": OKABE_ITO["black"],
    "keep-all": OKABE_ITO["grey"],
    "random": OKABE_ITO["yellow"],
    "fifo": OKABE_ITO["sky_blue"],
    "lru": OKABE_ITO["bluish_green"],
    "lfu-aging": OKABE_ITO["reddish_purple"],
    "memoryos-heat": OKABE_ITO["orange"],
}

# Colours a policy without a fixed entry may get (black and grey stay reserved for baselines).
_FALLBACK_COLORS = tuple(
    OKABE_ITO[name]
    for name in ("orange", "sky_blue", "bluish_green", "yellow", "reddish_purple", "vermillion", "blue")
)

#: Scenario order on every axis: the four official scenarios, then the synthetic one.
SCENARIOS: tuple[str, ...] = (*SCENARIO_ORDER, SYNTHETIC_SCENARIO)

#: Name of the pooled group that figures add after the scenarios.
ALL_CASES = "all cases"

# A 12-inch figure at 150 dpi is 1800 px wide: still sharp when a report page scales it to ~900 px.
FIGURE_DPI = 150
SVG_HASH_SALT = "evictlab"

_STYLE: dict[str, Any] = {
    "font.size": 10,
    "axes.titlesize": 10.5,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "figure.titlesize": 12,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": False,
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
}


def policy_color(policy: str) -> str:
    """The colour of ``policy``: its fixed entry, else a hue chosen by a hash of its name.

    The hash (not the order in which policies appear) makes the colour the same in every
    figure, whichever other policies share it.
    """
    if policy in POLICY_COLORS:
        return POLICY_COLORS[policy]
    digest = hashlib.sha256(policy.encode("utf-8")).digest()
    return _FALLBACK_COLORS[digest[0] % len(_FALLBACK_COLORS)]


def scenario_order(values: Iterable[str]) -> list[str]:
    """The distinct scenarios in ``values``: protocol order first, unknown ones sorted after."""
    present = set(values)
    return [s for s in SCENARIOS if s in present] + sorted(present - set(SCENARIOS))


def policy_order(values: Iterable[str]) -> list[str]:
    """The distinct policies in ``values``: ``confidence``, ``hybrid-v1``, then the rest sorted."""
    present = set(values)
    head = [p for p in ("confidence", "hybrid-v1") if p in present]
    return head + sorted(present - set(head))


def _styled(build: Callable[..., Figure]) -> Callable[..., Figure]:
    """Build the figure inside the house style; text sizes are fixed when artists are created."""

    @wraps(build)
    def wrapper(*args: Any, **kwargs: Any) -> Figure:
        with matplotlib.rc_context(_STYLE):
            return build(*args, **kwargs)

    return wrapper


def _require(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} needs columns {', '.join(missing)}; got {', '.join(map(str, frame.columns))}")
    if frame.empty:
        raise ValueError(f"{what} needs at least one row")


def _grid(count: int, columns: int) -> tuple[int, int]:
    columns = min(columns, count)
    return -(-count // columns), columns


def _hide_unused(axes: np.ndarray, used: int) -> None:
    for ax in axes.flat[used:]:
        ax.set_visible(False)


def _label_panels(axes: np.ndarray, used: int, xlabel: str, ylabel: str) -> None:
    """x label on every used panel (their x axes differ in meaning per row); y label on the
    first column, whose y axis the others share."""
    columns = axes.shape[1]
    for index, ax in enumerate(axes.flat[:used]):
        ax.set_xlabel(xlabel)
        if index % columns == 0:
            ax.set_ylabel(ylabel)


def _policy_legend(fig: Figure, policies: Sequence[str], *, title: str = "policy") -> None:
    handles = [Patch(facecolor=policy_color(p), edgecolor="black", linewidth=0.5, label=p) for p in policies]
    # Below the panels: matplotlib does not stack an outside-top legend under the suptitle.
    fig.legend(handles=handles, title=title, loc="outside lower center", ncols=min(len(handles), 7), frameon=False)


def _suptitle(fig: Figure, title: str, source: str | None) -> None:
    """The figure title, with the data's origin on a second line so the file explains itself."""
    fig.suptitle(title if not source else f"{title}\n{source}")


def _dodge(count: int, width: float = 0.8) -> tuple[np.ndarray, float]:
    """Offsets and width of ``count`` bars sharing one x position."""
    bar = width / count
    return (np.arange(count) - (count - 1) / 2) * bar, bar


# --------------------------------------------------------------------------- pools (notebook 01)


@_styled
def pool_overview(cases: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Cases per scenario by question type, and the loss ranks the protocol assigns.

    ``cases``: one row per case with ``scenario``, ``question_type`` and ``loss_rank``.
    """
    _require(cases, ["scenario", "question_type", "loss_rank"], "pool_overview")
    scenarios = scenario_order(cases["scenario"])
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
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
    left.set_xticks(x, _wrap_labels(scenarios))
    left.set_xlabel("scenario")
    left.set_ylabel("cases")
    left.set_title("Cases per scenario, by question type")
    left.set_ylim(0, bottom.max() * 1.55)
    left.legend(frameon=False, loc="upper right")

    ranks = sorted(cases["loss_rank"].unique())
    rank_counts = cases.groupby(["scenario", "loss_rank"]).size().unstack(fill_value=0).reindex(scenarios, fill_value=0)
    offsets, width = _dodge(len(ranks))
    rank_colors = [OKABE_ITO[c] for c in ("bluish_green", "yellow", "vermillion", "sky_blue", "reddish_purple", "orange")]
    for offset, rank, color in zip(offsets, ranks, rank_colors * len(ranks)):
        values = rank_counts[rank].to_numpy()
        right.bar(x + offset, values, width, color=color, edgecolor="black", linewidth=0.5, label=f"loss rank {rank}")
    right.set_xticks(x, _wrap_labels(scenarios))
    right.set_xlabel("scenario")
    right.set_ylabel("cases")
    right.set_title("Loss rank: the support's rank under the confidence policy")
    right.legend(frameon=False, loc="upper right")
    right.set_ylim(0, rank_counts.to_numpy().max() * 1.55)
    _suptitle(fig, "The 45 prepared cases", source)
    return fig


@_styled
def pool_metadata(facts: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Every fact of every pool: its confidence, its freshness signal and whether it is the support.

    ``facts``: one row per fact with ``case_id``, ``scenario``, ``loss_rank``, ``role``
    (``support`` or ``distractor``), ``confidence``, ``confirmed`` (bool) and ``heated`` (bool).
    One panel per scenario, one line per case.
    """
    _require(facts, ["case_id", "scenario", "loss_rank", "role", "confidence", "confirmed", "heated"], "pool_metadata")
    scenarios = scenario_order(facts["scenario"])
    rows, cols = _grid(len(scenarios) + 1, 3)
    fig = Figure(figsize=(12, 3.4 * rows), layout="constrained")
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
        ax.set_yticks(range(len(case_ids)), labels, fontsize=7.5)
        ax.set_ylim(len(case_ids) - 0.5, -0.5)
        ax.set_xlim(0.45, 1.0)
        ax.set_xlabel("confidence (0 to 1)")
        ax.set_ylabel("case (loss rank)")
        ax.set_title(scenario)
    legend_ax = axes.flat[len(scenarios)]
    legend_ax.axis("off")
    handles = [
        Line2D([], [], marker="o", linestyle="", markersize=9, color=role_colors["support"], markeredgecolor="black", label="support fact"),
        Line2D([], [], marker="o", linestyle="", markersize=6, color=role_colors["distractor"], markeredgecolor="black", label="distractor"),
        Line2D([], [], marker="o", linestyle="", markersize=7, color="white", markeredgecolor="black", label="no signal"),
        Line2D([], [], marker="^", linestyle="", markersize=7, color="white", markeredgecolor="black", label="confirmed 7 days ago"),
        Line2D([], [], marker="s", linestyle="", markersize=7, color="white", markeredgecolor="black", label="access heat 8 at the clock"),
    ]
    legend_ax.legend(handles=handles, loc="center", frameon=False, title="(L8) = the case's loss rank")
    _hide_unused(axes, len(scenarios) + 1)
    legend_ax.set_visible(True)
    _suptitle(fig, "Fact metadata of every pool: confidence and freshness signals", source)
    return fig


@_styled
def evidence_lengths(
    cases: pd.DataFrame,
    bank: pd.DataFrame,
    *,
    support_limit: int | None = None,
    bank_limits: tuple[int, int] | None = None,
    source: str | None = None,
) -> Figure:
    """Rendered evidence lengths: each official case's support, and the distractor bank.

    ``cases``: ``scenario``, ``source`` and ``support_chars``; only ``longmemeval`` cases are
    drawn (synthetic supports are one sentence). ``bank``: ``evidence_chars`` and
    ``question_type``. The optional limits draw the protocol's length filters.
    """
    _require(cases, ["scenario", "source", "support_chars"], "evidence_lengths cases")
    _require(bank, ["evidence_chars", "question_type"], "evidence_lengths bank")
    official = cases[cases["source"] == "longmemeval"]
    scenarios = scenario_order(official["scenario"])
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1.2, 1])
    for x, scenario in enumerate(scenarios):
        values = np.sort(official.loc[official["scenario"] == scenario, "support_chars"].to_numpy())
        # Spread points evenly around the column: deterministic, unlike random jitter.
        spread = np.linspace(-0.18, 0.18, len(values)) if len(values) > 1 else np.zeros(len(values))
        left.scatter(x + spread, values, color=OKABE_ITO["blue"], edgecolor="black", linewidth=0.4, s=30, zorder=3)
        if len(values):
            left.hlines(np.median(values), x - 0.3, x + 0.3, color="black", linewidth=1.5, zorder=4)
    if support_limit is not None:
        left.axhline(support_limit, color=OKABE_ITO["vermillion"], linestyle="--", linewidth=1)
        left.text(len(scenarios) - 0.5, support_limit, f"selection limit {support_limit}", ha="right", va="bottom",
                  color=OKABE_ITO["vermillion"], fontsize=8.5)
    left.set_xticks(range(len(scenarios)), _wrap_labels(scenarios))
    left.set_xlabel("scenario")
    left.set_ylim(bottom=0)
    left.set_ylabel("support evidence length (characters)")
    left.set_title("Support evidence per official case (bar = median)")

    types = sorted(bank["question_type"].unique())
    type_colors = [OKABE_ITO[c] for c in ("sky_blue", "orange", "reddish_purple", "bluish_green")]
    upper = max(int(bank["evidence_chars"].max()), bank_limits[1] if bank_limits else 0)
    bins = np.linspace(0, upper * 1.05, 16)
    right.hist([bank.loc[bank["question_type"] == t, "evidence_chars"].to_numpy() for t in types], bins=bins,
               stacked=True, color=type_colors[: len(types)], edgecolor="black", linewidth=0.5, label=types)
    if bank_limits is not None:
        for limit in bank_limits:
            right.axvline(limit, color=OKABE_ITO["vermillion"], linestyle="--", linewidth=1)
        right.text(bank_limits[1] - upper * 0.02, right.get_ylim()[1] * 0.97,
                   f"bank filter\n{bank_limits[0]}..{bank_limits[1]}", ha="right", va="top",
                   color=OKABE_ITO["vermillion"], fontsize=8.5)
    right.set_xlabel("distractor evidence length (characters)")
    right.set_ylabel("bank records")
    right.set_title(f"Distractor bank ({len(bank)} records)")
    right.legend(frameon=False, loc="upper center")
    _suptitle(fig, "Evidence lengths that the protocol's filters see", source)
    return fig


# --------------------------------------------------------------------------- retention (notebook 02)


@_styled
def retention_by_scenario(frame: pd.DataFrame, *, include_total: bool = True, source: str | None = None) -> Figure:
    """Support retained per scenario x capacity x policy, with "retained/cases" on every bar.

    ``frame``: :func:`evictlab.evaluate.retention_frame` (needs ``scenario``, ``policy``,
    ``capacity`` and ``support_retained``). One panel per scenario, plus one for all cases.
    """
    _require(frame, ["scenario", "policy", "capacity", "support_retained"], "retention_by_scenario")
    scenarios = scenario_order(frame["scenario"])
    policies = policy_order(frame["policy"])
    capacities = sorted(frame["capacity"].unique())
    groups: list[tuple[str, pd.DataFrame]] = [(s, frame[frame["scenario"] == s]) for s in scenarios]
    if include_total:
        groups.append((ALL_CASES, frame))
    rows, cols = _grid(len(groups), 3)
    fig = Figure(figsize=(12, 3.3 * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True)
    offsets, width = _dodge(len(policies))
    vertical = len(policies) > 3
    for ax, (name, members) in zip(axes.flat, groups):
        counts = members.groupby(["policy", "capacity"])["support_retained"].agg(["sum", "count"])
        cases = _case_count(members[members["capacity"] == capacities[0]], policies)
        for offset, policy in zip(offsets, policies):
            for x, capacity in enumerate(capacities):
                if (policy, capacity) not in counts.index:
                    continue
                kept, total = counts.loc[(policy, capacity)]
                share = 100 * kept / total
                ax.bar(x + offset, share, width, color=policy_color(policy), edgecolor="black", linewidth=0.5)
                ax.text(x + offset, share + 2, f"{int(kept)}/{int(total)}", ha="center", va="bottom",
                        fontsize=7 if vertical else 8, rotation=90 if vertical else 0)
        ax.set_xticks(range(len(capacities)), [str(c) for c in capacities])
        ax.set_title(f"{name} ({cases} cases)")
        ax.set_ylim(0, 125 if vertical else 115)
        ax.set_yticks([0, 25, 50, 75, 100])
    _label_panels(axes, len(groups), "capacity (facts kept of 10)", "support retained (% of cases)")
    _hide_unused(axes, len(groups))
    _policy_legend(fig, policies)
    _suptitle(fig, "Support fact retained after eviction, per scenario and capacity", source)
    return fig


@_styled
def support_rank_distribution(
    frame: pd.DataFrame, *, capacity: int | None = None, source: str | None = None
) -> Figure:
    """Where each support fact ranks among its 10 facts, per scenario and policy.

    ``frame``: :func:`evictlab.evaluate.retention_frame`. A score-based policy ranks the same
    way at every capacity, so one capacity is shown (default: the middle one); the dashed line
    marks it: a support ranked to its right survives only through a reserved correction slot.
    """
    _require(frame, ["scenario", "policy", "capacity", "support_rank"], "support_rank_distribution")
    capacities = sorted(frame["capacity"].unique())
    capacity = capacities[len(capacities) // 2] if capacity is None else capacity
    if capacity not in capacities:
        raise ValueError(f"capacity {capacity} is not in the frame; it has {capacities}")
    shown = frame[frame["capacity"] == capacity]
    scenarios = scenario_order(shown["scenario"])
    policies = policy_order(shown["policy"])
    max_rank = int(max(10, shown["support_rank"].max()))
    ranks = np.arange(1, max_rank + 1)
    rows, cols = _grid(len(scenarios), 3)
    fig = Figure(figsize=(12, 3.2 * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True)
    offsets, width = _dodge(len(policies))
    for ax, scenario in zip(axes.flat, scenarios):
        members = shown[shown["scenario"] == scenario]
        for offset, policy in zip(offsets, policies):
            counts = members.loc[members["policy"] == policy, "support_rank"].value_counts()
            ax.bar(ranks + offset, [counts.get(r, 0) for r in ranks], width, color=policy_color(policy),
                   edgecolor="black", linewidth=0.5)
        ax.axvline(capacity + 0.5, color="black", linestyle="--", linewidth=1)
        ax.set_xticks(ranks)
        ax.set_title(f"{scenario} ({_case_count(members, policies)} cases)")
    top = max(ax.get_ylim()[1] for ax in axes.flat[: len(scenarios)])
    for ax in axes.flat[: len(scenarios)]:
        ax.set_ylim(0, top * 1.15)
        ax.text(capacity + 0.35, top * 1.08, f"kept: rank ≤ {capacity}", fontsize=8, va="top", ha="right")
    _label_panels(axes, len(scenarios), "support rank (1 = highest score)", "cases")
    _hide_unused(axes, len(scenarios))
    if len(scenarios) < axes.size:
        note = axes.flat[len(scenarios)]
        note.set_visible(True)
        note.axis("off")
        note.text(0.05, 0.5, f"A support ranked right of the dashed line\nis evicted at capacity {capacity}, unless the\n"
                  "policy reserves a slot for it (hybrid-v1\nkeeps one correction fact this way).",
                  transform=note.transAxes, va="center", fontsize=9.5)
    _policy_legend(fig, policies)
    _suptitle(fig, f"Rank of the support fact in its pool of {max_rank} (dashed line: capacity {capacity})", source)
    return fig


# --------------------------------------------------------------------------- QA (notebook 06)


@_styled
def qa_accuracy(accuracy: pd.DataFrame, *, source: str | None = None) -> Figure:
    """QA accuracy with confidence intervals per scenario and per suite, one marker per policy.

    ``accuracy``: :func:`evictlab.qa.report.accuracy_frame` (``level``, ``group``, ``policy``,
    ``correct``, ``cases``, ``accuracy``, ``lower``, ``upper``, ``method``, ``alpha``).
    """
    _require(accuracy, ["level", "group", "policy", "correct", "cases", "accuracy", "lower", "upper"], "qa_accuracy")
    policies = policy_order(accuracy["policy"])
    levels = [level for level in ("scenario", "suite") if level in set(accuracy["level"])]
    heights = [accuracy.loc[accuracy["level"] == level, "group"].nunique() for level in levels]
    fig = Figure(figsize=(10, 1.2 + 0.55 * sum(heights) + 0.5 * len(levels)), layout="constrained")
    axes = np.atleast_1d(fig.subplots(len(levels), 1, sharex=True, height_ratios=heights))
    offsets, _ = _dodge(len(policies), width=0.5)
    for ax, level in zip(axes, levels):
        members = accuracy[accuracy["level"] == level]
        groups = list(dict.fromkeys(members["group"]))
        for offset, policy in zip(offsets, policies):
            rows = members[members["policy"] == policy].set_index("group").reindex(groups)
            y = np.arange(len(groups)) + offset
            value, low, high = (100 * rows[c].to_numpy(dtype=float) for c in ("accuracy", "lower", "upper"))
            ax.errorbar(value, y, xerr=[value - low, high - value], fmt="o", color=policy_color(policy),
                        ecolor=policy_color(policy), markeredgecolor="black", markersize=7, capsize=3, linewidth=1.5)
            for yi, hi, k, n in zip(y, high, rows["correct"], rows["cases"]):
                if not np.isnan(hi):
                    ax.annotate(f"{int(k)}/{int(n)}", (hi, yi), xytext=(5, 0), textcoords="offset points",
                                ha="left", va="center", fontsize=8)
        ax.set_yticks(range(len(groups)), groups)
        ax.set_ylabel(level)
        ax.set_ylim(len(groups) - 0.5, -0.5)
        ax.set_xlim(-3, 112)
        ax.set_xticks([0, 20, 40, 60, 80, 100])
        ax.grid(axis="x", color="#e5e5e5", linewidth=0.8)
        ax.set_axisbelow(True)
        ax.set_title("per scenario" if level == "scenario" else "per suite (official = LongMemEval, overall = all)",
                     loc="left")
    axes[-1].set_xlabel("accuracy (% of cases answered correctly)")
    _policy_legend(fig, policies)
    _suptitle(fig, f"QA accuracy with {_interval_label(accuracy)} confidence intervals", source)
    return fig


@_styled
def qa_paired(stats: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Paired outcomes per suite (the McNemar table) and the bootstrap interval of the difference.

    ``stats``: :func:`evictlab.qa.report.stats_frame` (``suite``, ``first_policy``,
    ``second_policy``, ``both_correct``, ``only_first_correct``, ``only_second_correct``,
    ``both_wrong``, ``p_value``, ``mean_difference``, ``lower``, ``upper``, ``alpha``).
    """
    _require(stats, ["suite", "first_policy", "second_policy", "both_correct", "only_first_correct",
                     "only_second_correct", "both_wrong", "p_value", "mean_difference", "lower", "upper"], "qa_paired")
    first, second = stats["first_policy"].iloc[0], stats["second_policy"].iloc[0]
    suites = list(stats["suite"])
    fig = Figure(figsize=(11, 1.6 + 0.7 * len(suites)), layout="constrained")
    left, right = fig.subplots(1, 2, sharey=True, width_ratios=[1.3, 1])
    parts = [
        ("both_correct", "both correct", OKABE_ITO["bluish_green"]),
        ("only_first_correct", f"only {first} correct", policy_color(first)),
        ("only_second_correct", f"only {second} correct", policy_color(second)),
        ("both_wrong", "both wrong", OKABE_ITO["grey"]),
    ]
    y = np.arange(len(suites))
    totals = stats[[p[0] for p in parts]].sum(axis=1).to_numpy()
    start = np.zeros(len(suites))
    for column, label, color in parts:
        share = 100 * stats[column].to_numpy() / totals
        left.barh(y, share, left=start, color=color, edgecolor="black", linewidth=0.5, label=label, height=0.6)
        for yi, s, w, count in zip(y, start, share, stats[column]):
            if count:
                left.text(s + w / 2, yi, str(int(count)), ha="center", va="center", fontsize=8.5,
                          color="white" if color in (OKABE_ITO["blue"], OKABE_ITO["vermillion"]) else "black")
        start += share
    left.set_yticks(y, [f"{s}\n(n={int(n)}, McNemar p={_format_p(p)})" for s, n, p in zip(suites, totals, stats["p_value"])])
    left.set_ylabel("suite")
    left.set_ylim(len(suites) - 0.5, -0.5)
    left.set_xlim(0, 100)
    left.set_xlabel("cases (% of suite; numbers are counts)")
    left.set_title("Paired outcomes per case (exact McNemar test)")
    fig.legend(*left.get_legend_handles_labels(), loc="outside lower center", ncols=4, frameon=False)

    alpha = float(stats["alpha"].iloc[0]) if "alpha" in stats else 0.05
    value, low, high = (100 * stats[c].to_numpy(dtype=float) for c in ("mean_difference", "lower", "upper"))
    right.errorbar(value, y, xerr=[value - low, high - value], fmt="D", color="black", capsize=4, markersize=6)
    for yi, v, lo, hi in zip(y, value, low, high):
        right.annotate(f"{v:+.1f} [{lo:+.1f}, {hi:+.1f}]", (v, yi), xytext=(0, 8), textcoords="offset points",
                       ha="center", va="bottom", fontsize=8.5)
    right.axvline(0, color=OKABE_ITO["grey"], linestyle="--", linewidth=1)
    right.set_xlim(min(-10, low.min() - 10), max(10, high.max() + 10))
    right.set_xlabel(f"accuracy of {second} minus {first}\n(percentage points)")
    right.set_title(f"Paired bootstrap, {round(100 * (1 - alpha))}% percentile interval")
    _suptitle(fig, f"{second} vs {first} on the same cases", source)
    return fig


@_styled
def qa_grade_rules(rows: pd.DataFrame, *, source: str | None = None) -> Figure:
    """How each policy's answers were graded: counts per grader rule.

    ``rows``: :func:`evictlab.qa.report.rows_frame` (``policy``, ``grade_rule``, ``grade_correct``).
    """
    _require(rows, ["policy", "grade_rule", "grade_correct"], "qa_grade_rules")
    policies = policy_order(rows["policy"])
    correct_rules = sorted(rows.loc[rows["grade_correct"], "grade_rule"].unique())
    wrong_rules = sorted(set(rows.loc[~rows["grade_correct"], "grade_rule"]) - set(correct_rules))
    rules = correct_rules + wrong_rules
    counts = rows.groupby(["grade_rule", "policy"]).size().unstack(fill_value=0).reindex(index=rules, columns=policies, fill_value=0)
    fig = Figure(figsize=(9, 1.5 + 0.5 * len(rules)), layout="constrained")
    ax = fig.subplots()
    offsets, width = _dodge(len(policies))
    y = np.arange(len(rules))
    for offset, policy in zip(offsets, policies):
        values = counts[policy].to_numpy()
        ax.barh(y + offset, values, width, color=policy_color(policy), edgecolor="black", linewidth=0.5)
        for yi, v in zip(y + offset, values):
            ax.text(v + 0.3, yi, str(int(v)), va="center", fontsize=8.5)
    ax.set_yticks(y, [f"{rule} ({'correct' if rule in correct_rules else 'wrong'})" for rule in rules])
    ax.set_ylim(len(rules) - 0.5, -0.5)
    ax.set_xlim(0, counts.to_numpy().max() * 1.15 + 1)
    ax.set_xlabel("answers (rows)")
    ax.set_ylabel("grader rule (outcome)")
    _policy_legend(fig, policies)
    _suptitle(fig, "Grader rule that decided each answer", source)
    return fig


@_styled
def qa_tokens(rows: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Prompt and completion tokens per answer request, per scenario and policy.

    ``rows``: :func:`evictlab.qa.report.rows_frame` (``scenario``, ``policy``,
    ``prompt_tokens``, ``completion_tokens``). Rows without usage are left out.
    """
    _require(rows, ["scenario", "policy", "prompt_tokens", "completion_tokens"], "qa_tokens")
    scenarios = scenario_order(rows["scenario"])
    policies = policy_order(rows["policy"])
    fig = Figure(figsize=(12, 4.4), layout="constrained")
    axes = fig.subplots(1, 2)
    offsets, width = _dodge(len(policies))
    for ax, column, label in zip(axes, ("prompt_tokens", "completion_tokens"), ("prompt", "completion")):
        for offset, policy in zip(offsets, policies):
            members = rows[rows["policy"] == policy]
            data = [members.loc[members["scenario"] == s, column].dropna().to_numpy(dtype=float) for s in scenarios]
            positions = [x + offset for x, values in enumerate(data) if len(values)]
            data = [values for values in data if len(values)]
            if not data:
                continue
            ax.boxplot(data, positions=positions, widths=width * 0.85, patch_artist=True, manage_ticks=False,
                       boxprops={"facecolor": policy_color(policy), "edgecolor": "black", "linewidth": 0.7},
                       medianprops={"color": "black", "linewidth": 1.2},
                       whiskerprops={"linewidth": 0.8}, capprops={"linewidth": 0.8},
                       flierprops={"marker": "o", "markersize": 3, "markerfacecolor": policy_color(policy)})
        ax.set_xticks(range(len(scenarios)), _wrap_labels(scenarios))
        ax.set_xlabel("scenario")
        ax.set_ylabel(f"{label} tokens per request")
        ax.set_ylim(bottom=0)
        totals = ", ".join(f"{p} {int(rows.loc[rows['policy'] == p, column].sum()):,}" for p in policies)
        ax.set_title(f"{label.capitalize()} tokens (sum: {totals})", fontsize=9.5)
    _policy_legend(fig, policies)
    _suptitle(fig, "Token use of the answer requests", source)
    return fig


# --------------------------------------------------------------------------- saving


def save_into(fig: Figure, figures_dir: str | os.PathLike | None, name: str) -> Figure:
    """:func:`save` ``fig`` as ``figures_dir/name`` when ``figures_dir`` is set; return ``fig``.

    Lets a notebook cell end with ``plots.save_into(fig, figures_dir, "01_x")`` to both keep
    the files (when run by the report) and display the figure.
    """
    if figures_dir is not None:
        save(fig, Path(figures_dir) / name)
    return fig


def figure_title(fig: Figure) -> str:
    """The figure's suptitle, else its first axes title, else an empty string."""
    if fig.get_suptitle():
        return fig.get_suptitle()
    for ax in fig.axes:
        if ax.get_title():
            return ax.get_title()
    return ""


def save(fig: Figure, path_without_suffix: str | os.PathLike, *, dpi: int = FIGURE_DPI) -> list[Path]:
    """Write ``fig`` as ``<path>.png`` and ``<path>.svg``; return both paths.

    The bytes depend only on the figure: PNG without the ``Software`` entry, SVG without date
    and creator and with a fixed id salt (matplotlib otherwise salts ids randomly). The figure
    title is stored as the files' ``Title`` metadata. Each file is written atomically; the
    parent folder is created when missing.
    """
    base = Path(path_without_suffix)
    if base.suffix in (".png", ".svg"):
        raise ValueError(f"give the path without a suffix, got {base}")
    title = figure_title(fig)
    written = []
    for suffix, metadata in (
        (".png", {"Software": None, "Title": title or None}),
        (".svg", {"Date": None, "Creator": None, "Title": title or None}),
    ):
        buffer = io.BytesIO()
        with matplotlib.rc_context({"svg.hashsalt": SVG_HASH_SALT}):
            fig.savefig(buffer, format=suffix[1:], dpi=dpi, metadata=metadata)
        written.append(atomic_write_bytes(base.with_name(base.name + suffix), buffer.getvalue()))
    return written


def _short_case_id(case_id: str) -> str:
    """Axis label of a case: the synthetic ids lose their shared ``correction_`` prefix."""
    short = case_id.removeprefix("correction_")
    return short if len(short) <= 16 else short[:15] + "…"


def _wrap_labels(names: Sequence[str]) -> list[str]:
    """``confirmation_help`` -> ``confirmation\\nhelp`` so that long scenario names fit under a bar."""
    return [name.replace("_", "\n", 1) if len(name) > 12 else name for name in names]


def _case_count(members: pd.DataFrame, policies: Sequence[str]) -> int:
    """Cases behind one capacity's rows: distinct ids when the frame has them."""
    if "case_id" in members:
        return int(members["case_id"].nunique())
    return len(members) // max(len(policies), 1)


def _format_p(p: float) -> str:
    return f"{p:.4f}" if p >= 0.0001 else f"{p:.1e}"


def _interval_label(frame: pd.DataFrame) -> str:
    method = str(frame["method"].iloc[0]) if "method" in frame else "binomial"
    alpha = float(frame["alpha"].iloc[0]) if "alpha" in frame else 0.05
    return interval_label(method, alpha)


__all__ = [
    "ALL_CASES",
    "OKABE_ITO",
    "POLICY_COLORS",
    "SCENARIOS",
    "evidence_lengths",
    "figure_title",
    "policy_color",
    "policy_order",
    "pool_metadata",
    "pool_overview",
    "qa_accuracy",
    "qa_grade_rules",
    "qa_paired",
    "qa_tokens",
    "retention_by_scenario",
    "save",
    "save_into",
    "scenario_order",
    "support_rank_distribution",
]
