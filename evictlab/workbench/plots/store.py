"""The shadow-mode figure of an imported store's audit (``evictlab audit --output-dir``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .style import bottom_legend, paper_figure, policy_color, side_by_side, styled, title_with_source


@styled
def shadow_figure(summary: dict[str, Any], facts: pd.DataFrame, *, source: str | None = None) -> Figure:
    """Three panels from :func:`evictlab.analysis.store_audit.shadow_summary` and ``shadow_facts``:
    the share of events where ``hybrid-v1`` would have evicted differently, per month (events
    above each bar); the facts of each category it would have saved and lost (corrections
    first); the confidence margins of those facts to each event's cut line."""
    fig = paper_figure(3.0, 8.0)
    months, categories, margins = side_by_side(fig, 3, width_ratios=[1.3, 1, 1])
    hybrid, confidence = policy_color("hybrid-v1"), policy_color("confidence")
    by_month = pd.DataFrame(summary["months"], columns=["month", "events", "disagreeing"])
    x = np.arange(len(by_month))
    share = 100 * by_month["disagreeing"] / by_month["events"].where(by_month["events"] > 0)
    bars = months.bar(x, share.fillna(0), color=hybrid, edgecolor="black", linewidth=0.5)
    months.bar_label(bars, labels=[f"n={n}" for n in by_month["events"]], rotation=90)
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
    bottom_legend(fig, *categories.get_legend_handles_labels())  # the margins' colours too
    known = facts["margin"].dropna()
    bins = np.histogram_bin_edges(known, bins=24) if len(known) else 10
    for direction, colour in (("saved", hybrid), ("lost", confidence)):
        values = facts.loc[facts["direction"] == direction, "margin"].dropna()
        if len(values):
            margins.hist(values, bins=bins, color=colour, alpha=0.7)
    margins.axvline(0, color="black", linewidth=0.8)
    margins.set_xlabel("confidence minus the cut line")
    margins.set_ylabel("facts")
    margins.set_title("margins (cut line: highest evicted confidence)")
    for ax in (months, categories, margins):
        ax.grid(True)
    title_with_source(fig, "Shadow mode: what hybrid-v1 would have evicted instead of confidence", source)
    return fig
