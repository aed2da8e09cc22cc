"""Figures of a QA run (notebook 06): accuracy, paired outcomes, grader rules and token use."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ...analysis.qa.report import interval_label
from .style import (
    OKABE_ITO,
    bottom_legend,
    dodge,
    paper_figure,
    policy_color,
    policy_legend,
    policy_order,
    require_columns,
    scenario_order,
    side_by_side,
    styled,
    title_with_source,
)


@styled
def qa_accuracy(accuracy: pd.DataFrame, *, source: str | None = None) -> Figure:
    """QA accuracy with confidence intervals per scenario and per suite, one marker per policy.

    ``accuracy``: :func:`evictlab.analysis.qa.report.accuracy_frame` (``level``, ``group``, ``policy``,
    ``correct``, ``cases``, ``accuracy``, ``lower``, ``upper``, ``method``, ``alpha``).
    """
    require_columns(accuracy, ["level", "group", "policy", "correct", "cases", "accuracy", "lower", "upper"],
                    "qa_accuracy")
    policies = policy_order(accuracy["policy"])
    levels = [level for level in ("scenario", "suite") if level in set(accuracy["level"])]
    heights = [accuracy.loc[accuracy["level"] == level, "group"].nunique() for level in levels]
    fig = paper_figure(1.2 + 0.45 * sum(heights) + 0.5 * len(levels))
    axes = np.atleast_1d(fig.subplots(len(levels), 1, sharex=True, height_ratios=heights))
    offsets, _ = dodge(len(policies), width=0.5)
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
        ax.grid(True, axis="x")
        ax.set_title("per scenario" if level == "scenario" else "per suite (official = LongMemEval, overall = all)",
                     loc="left")
    axes[-1].set_xlabel("accuracy (% of cases answered correctly)")
    policy_legend(fig, policies)
    method = str(accuracy["method"].iloc[0]) if "method" in accuracy else "binomial"
    alpha = float(accuracy["alpha"].iloc[0]) if "alpha" in accuracy else 0.05
    title_with_source(fig, f"QA accuracy with {interval_label(method, alpha)} confidence intervals", source)
    return fig


@styled
def qa_paired(stats: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Paired outcomes per suite (the McNemar table) and the bootstrap interval of the difference.

    ``stats``: :func:`evictlab.analysis.qa.report.stats_frame` (``suite``, ``first_policy``,
    ``second_policy``, ``both_correct``, ``only_first_correct``, ``only_second_correct``,
    ``both_wrong``, ``p_value``, ``mean_difference``, ``lower``, ``upper``, ``alpha``).
    """
    require_columns(stats, ["suite", "first_policy", "second_policy", "both_correct", "only_first_correct",
                            "only_second_correct", "both_wrong", "p_value", "mean_difference", "lower", "upper"],
                    "qa_paired")
    first, second = stats["first_policy"].iloc[0], stats["second_policy"].iloc[0]
    suites = list(stats["suite"])
    fig = paper_figure(1.6 + 0.7 * len(suites), 2.4 + 1.4 * len(suites))
    left, right = side_by_side(fig, sharey=True, width_ratios=[1.3, 1])
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
                left.text(s + w / 2, yi, str(int(count)), ha="center", va="center",
                          color="white" if color in (OKABE_ITO["blue"], OKABE_ITO["vermillion"]) else "black")
        start += share
    left.set_yticks(
        y, [f"{s}\n(n={int(n)}, McNemar p={_format_p(p)})" for s, n, p in zip(suites, totals, stats["p_value"])]
    )
    left.set_ylabel("suite")
    left.set_ylim(len(suites) - 0.5, -0.5)
    left.set_xlim(0, 100)
    left.set_xlabel("cases (% of suite; numbers are counts)")
    left.set_title("Paired outcomes per case (exact McNemar test)")
    bottom_legend(fig, *left.get_legend_handles_labels())

    alpha = float(stats["alpha"].iloc[0]) if "alpha" in stats else 0.05
    value, low, high = (100 * stats[c].to_numpy(dtype=float) for c in ("mean_difference", "lower", "upper"))
    right.errorbar(value, y, xerr=[value - low, high - value], fmt="D", color="black", capsize=4, markersize=6)
    for yi, v, lo, hi in zip(y, value, low, high):
        right.annotate(f"{v:+.1f} [{lo:+.1f}, {hi:+.1f}]", (v, yi), xytext=(0, 8), textcoords="offset points",
                       ha="center", va="bottom")
    right.axvline(0, color=OKABE_ITO["grey"], linestyle="--", linewidth=1)
    right.set_xlim(min(-10, low.min() - 10), max(10, high.max() + 10))
    right.set_xlabel(f"accuracy of {second} minus {first}\n(percentage points)")
    right.set_title(f"Paired bootstrap, {round(100 * (1 - alpha))}% percentile interval")
    title_with_source(fig, f"{second} vs {first} on the same cases", source)
    return fig


@styled
def qa_grade_rules(rows: pd.DataFrame, *, source: str | None = None) -> Figure:
    """How each policy's answers were graded: counts per grader rule.

    ``rows``: :func:`evictlab.analysis.qa.report.rows_frame` (``policy``, ``grade_rule``, ``grade_correct``).
    """
    require_columns(rows, ["policy", "grade_rule", "grade_correct"], "qa_grade_rules")
    policies = policy_order(rows["policy"])
    correct_rules = sorted(rows.loc[rows["grade_correct"], "grade_rule"].unique())
    wrong_rules = sorted(set(rows.loc[~rows["grade_correct"], "grade_rule"]) - set(correct_rules))
    rules = correct_rules + wrong_rules
    counts = (
        rows.groupby(["grade_rule", "policy"])
        .size()
        .unstack(fill_value=0)
        .reindex(index=rules, columns=policies, fill_value=0)
    )
    fig = paper_figure(1.5 + 0.4 * len(rules))
    ax = fig.subplots()
    offsets, width = dodge(len(policies))
    y = np.arange(len(rules))
    for offset, policy in zip(offsets, policies):
        values = counts[policy].to_numpy()
        ax.barh(y + offset, values, width, color=policy_color(policy), edgecolor="black", linewidth=0.5)
        for yi, v in zip(y + offset, values):
            ax.text(v + 0.3, yi, str(int(v)), va="center")
    ax.set_yticks(y, [f"{rule} ({'correct' if rule in correct_rules else 'wrong'})" for rule in rules])
    ax.set_ylim(len(rules) - 0.5, -0.5)
    ax.set_xlim(0, counts.to_numpy().max() * 1.15 + 1)
    ax.set_xlabel("answers (rows)")
    ax.set_ylabel("grader rule (outcome)")
    policy_legend(fig, policies)
    title_with_source(fig, "Grader rule that decided each answer", source)
    return fig


@styled
def qa_tokens(rows: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Prompt and completion tokens per answer request, per scenario and policy.

    ``rows``: :func:`evictlab.analysis.qa.report.rows_frame` (``scenario``, ``policy``,
    ``prompt_tokens``, ``completion_tokens``). Rows without usage are left out.
    """
    require_columns(rows, ["scenario", "policy", "prompt_tokens", "completion_tokens"], "qa_tokens")
    scenarios = scenario_order(rows["scenario"])
    policies = policy_order(rows["policy"])
    fig = paper_figure(4.4, 7.6)  # room for the upright scenario names
    axes = side_by_side(fig)
    offsets, width = dodge(len(policies))
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
        ax.set_xticks(range(len(scenarios)), scenarios, rotation=90)
        ax.set_xlabel("scenario")
        ax.set_ylabel(f"{label} tokens per request")
        ax.set_ylim(bottom=0)
        totals = "\n".join(f"{p} {int(rows.loc[rows['policy'] == p, column].sum()):,}" for p in policies)
        ax.set_title(f"{label.capitalize()} tokens, sums:\n{totals}")
    policy_legend(fig, policies)
    title_with_source(fig, "Token use of the answer requests", source)
    return fig


def _format_p(p: float) -> str:
    return f"{p:.4f}" if p >= 0.0001 else f"{p:.1e}"
