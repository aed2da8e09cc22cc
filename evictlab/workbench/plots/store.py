"""The shadow-mode figure of an imported store's audit (``evictlab audit --output-dir``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .style import policy_color, styled, title_with_source


@styled
def shadow_figure(summary: dict[str, Any], facts: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Three panels from :func:`evictlab.analysis.store_audit.shadow_summary` and ``shadow_facts``:
    the share of events where ``hybrid-v1`` would have evicted differently, per month (events
    above each bar); the facts of each category it would have saved and lost (corrections
    first); the confidence margins of those facts to each event's cut line."""
    fig = Figure(figsize=(13, 4.2), layout="constrained")
    months, categories, margins = fig.subplots(1, 3, width_ratios=[1.3, 1, 1])
    hybrid, confidence = policy_color("hybrid-v1"), policy_color("confidence")
    by_month = pd.DataFrame(summary["months"], columns=["month", "events", "disagreeing"])
    x = np.arange(len(by_month))
    share = 100 * by_month["disagreeing"] / by_month["events"].where(by_month["events"] > 0)
    bars = months.bar(x, share.fillna(0), color=hybrid, edgecolor="black", linewidth=0.5)
    months.bar_label(bars, labels=[f"n={n}" for n in by_month["events"]], fontsize=7)
    months.set_xticks(x, by_month["month"], rotation=45, ha="right")
    months.set_ylim(0, 110)
    months.set_ylabel("events where hybrid-v1 disagrees (%)")
    months.set_xlabel("month of the event")
    rate = summary["rate"]
    months.set_title(f"disagreement {100 * rate:.0f}% of {summary['events']} events" if summary["events"]
                     else "no event with a shadow block")  # fmt: skip
    names = [item["category"] for item in summary["categories"]]
    y = np.arange(len(names))
    categories.barh(y - 0.2, [item["saved"] for item in summary["categories"]], 0.4, color=hybrid,
                    label="saved by hybrid-v1 (confidence evicted)")  # fmt: skip
    categories.barh(y + 0.2, [item["lost"] for item in summary["categories"]], 0.4, color=confidence,
                    label="lost by hybrid-v1 (confidence kept)")  # fmt: skip
    categories.set_yticks(y, names)
    categories.invert_yaxis()
    categories.set_xlabel("facts")
    categories.set_ylabel("category")
    categories.set_title("categories (corrections first)")
    categories.legend(fontsize=7, loc="best")
    known = facts["margin"].dropna()
    bins = np.histogram_bin_edges(known, bins=24) if len(known) else 10
    for direction, colour in (("saved", hybrid), ("lost", confidence)):
        values = facts.loc[facts["direction"] == direction, "margin"].dropna()
        if len(values):
            margins.hist(values, bins=bins, color=colour, alpha=0.7, label=direction)
    margins.axvline(0, color="black", linewidth=0.8)
    margins.set_xlabel("confidence minus the cut line")
    margins.set_ylabel("facts")
    if len(known):
        margins.legend(fontsize=7)
    margins.set_title("margins (cut line: highest evicted confidence)")
    for ax in (months, categories, margins):
        ax.grid(color="#e5e5e5", linewidth=0.7)
        ax.set_axisbelow(True)
    title_with_source(fig, "Shadow mode: what hybrid-v1 would have evicted instead of confidence", source)
    return fig
