"""A sweep's tables from its rows: the scenario summary and the best and worst settings.

One implementation serves both ways a sweep is held: :func:`evictlab.analysis.sweep.run_sweep`'s
rows in memory, and the chunks :mod:`evictlab.analysis.sweep_output` writes one by one (the
summary of each chunk is this summary of its rows; the extremes of the chunks merge into the
extremes of the whole, :func:`merge_extremes`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from ..selection.decisions import SETTING_COLUMNS
from ..selection.tables import group_ids, key_codes

SUMMARY_COLUMNS = (
    "preset",
    "policy",
    "setting",
    *SETTING_COLUMNS,
    "source",
    "scenario",
    "capacity",
    "support_retained",
    "cases",
    "support_retained_rate",
    "support_expected",
    "ties",
    "near_ties",
    "retention",
)
SUMMARY_KEYS = ("preset", "policy", "setting", "source", "scenario", "capacity")
EXTREME_KEYS = ("preset", "policy", "scenario")
EXTREME_COLUMNS = (
    *EXTREME_KEYS, "extreme", "setting", "support_retained", "cases", "tied", "settings", *SETTING_COLUMNS,
)  # fmt: skip


def scenario_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Support retention per preset x policy x setting x scenario x capacity (columns :data:`SUMMARY_COLUMNS`).

    ``support_retained`` counts the decisions as made (ties by input order), ``support_expected``
    sums the expectation over random tie orders (``random``: its exact expectation), ``ties``
    counts the decisions a tie at the cut line settled, ``near_ties`` those whose support's
    margin to the cut line is non-zero but at most 1e-12 of the larger score (a rounding
    artefact; one count per case, not per pair of near-equal facts: see
    :func:`evictlab.selection.decisions.tie_counts`), and ``retention`` what tables count under
    each policy's tie-break (:func:`evictlab.selection.decisions.decide_grid`). Groups appear in
    the order of the rows: scenarios in case build order, then capacities. A group's sums
    depend on its rows alone (pandas' compensated group sums, in row order), so the summaries
    of a sweep's chunks are this summary of all its rows, cut where the chunks are cut.
    """
    group, first = group_ids([key_codes(rows[key]) for key in SUMMARY_KEYS])
    # Grouped by codes already numbered: a categorical of them is grouped without hashing again.
    codes = pd.Categorical.from_codes(group, categories=pd.RangeIndex(len(first)))
    sums = (
        rows[["support_retained", "support_expected", "support_tied", "support_near_tie", "retention"]]
        .groupby(codes, observed=True, sort=True)
        .sum()
    )
    counts = rows[[*SUMMARY_KEYS, *SETTING_COLUMNS]].iloc[first].reset_index(drop=True)
    for name, column in (("support_tied", "ties"), ("support_near_tie", "near_ties"), ("support_retained", None)):
        counts[column or name] = sums[name].to_numpy().astype(np.int64)
    counts["cases"] = np.bincount(group).astype(np.int64)
    counts["support_expected"] = sums["support_expected"].to_numpy()
    counts["retention"] = sums["retention"].to_numpy()
    counts["support_retained_rate"] = counts["support_retained"] / counts["cases"]
    return counts[list(SUMMARY_COLUMNS)]


def extreme_settings(summary: pd.DataFrame) -> pd.DataFrame:
    """The best and the worst setting per preset x policy x scenario, by support retained
    summed over capacities (columns :data:`EXTREME_COLUMNS`, keys sorted).

    Ties go to the lowest setting index (the first in grid order); ``tied`` counts the
    settings that share the extreme total (1 when it is unique). It is
    :func:`merge_extremes` of :func:`setting_extremes`: a sweep written in chunks merges
    the extremes of each chunk's summary the same way.
    """
    return merge_extremes([setting_extremes(summary)])


def setting_extremes(summary: pd.DataFrame) -> pd.DataFrame:
    """The best and the worst settings of ``summary`` per preset x policy x scenario, by support
    retained summed over capacities: candidates :func:`merge_extremes` joins with others."""
    keys = [*EXTREME_KEYS, "setting"]
    totals = summary.groupby(keys, observed=True, sort=True)[["support_retained", "cases"]].sum().reset_index()
    candidates = merge_extremes([pd.concat([totals.assign(extreme="best"), totals.assign(extreme="worst")])], 1)
    parameters = summary[["setting", *SETTING_COLUMNS]].drop_duplicates("setting")
    return candidates.merge(parameters, on="setting", how="left")[list(EXTREME_COLUMNS)]


def merge_extremes(parts: Iterable[pd.DataFrame], tied: int | None = None) -> pd.DataFrame:
    """The best and the worst of candidate rows (:data:`EXTREME_COLUMNS`) over disjoint sets of
    settings: per key and extreme, the highest (lowest) total, the first setting that reaches
    it, the ``tied`` summed over the candidates that reach it, the ``settings`` summed.
    ``tied``: every candidate is one setting (rows of setting totals, without those columns)."""
    rows = pd.concat(list(parts), ignore_index=True)
    if tied is not None:
        rows = rows.assign(tied=tied, settings=tied)
    keys = [*EXTREME_KEYS, "extreme"]
    grouped = rows.groupby(keys, observed=True, sort=False)["support_retained"]
    target = np.where(rows["extreme"] == "best", grouped.transform("max"), grouped.transform("min"))
    hits = rows[rows["support_retained"].to_numpy() == target].sort_values([*keys, "setting"], kind="stable")
    columns = [name for name in EXTREME_COLUMNS if name in rows and name not in keys]
    merged = hits.groupby(keys, observed=True, sort=False).agg(dict.fromkeys(columns, "first") | {"tied": "sum"})
    merged["settings"] = rows.groupby(keys, observed=True, sort=False)["settings"].sum()
    frame = merged.reset_index()[[name for name in EXTREME_COLUMNS if name in rows]]
    counts = dict.fromkeys(("setting", "support_retained", "cases", "tied", "settings"), np.int64)
    if tied is not None:  # candidates: the keys stay as they came, for the next merge
        return frame.astype(counts)
    return frame.astype({**dict.fromkeys(EXTREME_KEYS, str), "extreme": str, **counts})
