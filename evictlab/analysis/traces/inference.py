"""Findings over seeds: paired differences per capacity, with intervals and sign counts.

A trace finding compares two policies replayed on the same traces (seeds), so each seed gives
one paired difference. :func:`paired_table` lists, per metric, capacity and comparison, the
mean difference over seeds, a 95 % percentile-bootstrap interval of that mean (it never leaves
the range of the seeds' differences, so an interval on a rate stays inside what a rate can be)
and how many seeds go each way. The comparisons: ``hybrid-v1`` minus ``confidence`` (DeerMem's
input order at ties), minus ``confidence``'s tie-neutral expectation where it is defined
(:mod:`.expectation`), and minus the best other policy at that capacity (:func:`best_baseline`: not
DeerMem's, not a bound; the best by mean answerable rate over the same seeds, which the table says). Every capacity
replayed is in the table; the sentences of :func:`finding_sentences` speak of
:data:`FINDING_CAPACITY`, DeerMem's default ``max_facts`` (spec 1.8), fixed before any replay,
never of the capacity where a difference happens to be largest.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ...errors import ContractError
from ...policies import BOUND, DEERMEM_POLICIES, resolve_policy
from .memory import root_policy

#: The capacity the findings speak of: DeerMem's default ``max_facts`` (spec 1.8).
FINDING_CAPACITY = 100
#: Fewer seeds than this and the sentences say the finding is not established.
MIN_SEEDS = 20
PAIRED_METRICS = ("answerable_rate", "correction_survival", "stale_kept_rate")
#: The paired metrics where less is better (a question answered from a superseded fact); more is
#: better for the others. The sentences say which, so a reader need not know each metric.
LOWER_IS_BETTER = frozenset({"stale_kept_rate"})
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 20261202
LEVEL = 0.95
FIRST, SECOND = "hybrid-v1", "confidence"
#: ``confidence`` as its expectation over the order of tied facts (defined when :mod:`.expectation` says).
TIE_NEUTRAL = "confidence, tie-neutral"
BEST_OTHER = "best other policy"


def bootstrap_interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of ``values`` (seeded: the same values give
    the same interval); NaN with fewer than two values."""
    if len(values) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = values[rng.integers(0, len(values), size=(BOOTSTRAP_RESAMPLES, len(values)))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def baselines(rows: pd.DataFrame) -> list[str]:
    """The policies of ``rows`` that are neither DeerMem's (under any modifier) nor a bound."""
    replayed = rows.loc[rows["role"] != BOUND, "policy"] if "role" in rows else rows["policy"]
    return [policy for policy in dict.fromkeys(replayed) if root_policy(resolve_policy(policy)).name
            not in DEERMEM_POLICIES and root_policy(resolve_policy(policy)).role != BOUND]


def best_baseline(rows: pd.DataFrame, capacity: int | None = None) -> str | None:
    """The baseline (:func:`baselines`) of ``rows`` with the highest mean ``answerable_rate`` over its
    rows at ``capacity`` (``None``: over every capacity), the first in ``rows``' order at a tie; ``None``
    when there is none. ``rows`` are :func:`.metrics.curve_rows` rows or a :func:`.metrics.curve_summary`
    (whose rows are already means over traces); the one rule of the paired table's best other policy
    (per capacity) and of the figures' best baseline (:func:`evictlab.workbench.plots.best_baseline`)."""
    if capacity is not None:
        rows = rows[rows["capacity"] == capacity]
    others = baselines(rows)
    means = rows[rows["policy"].isin(others)].groupby("policy", sort=False)["answerable_rate"].mean()
    return str(means.sort_values(ascending=False, kind="stable").index[0]) if len(means) else None


def paired_table(rows: pd.DataFrame, metrics: tuple[str, ...] = PAIRED_METRICS) -> pd.DataFrame:
    """Per metric, capacity and comparison: the paired difference over traces (seeds).

    ``rows`` are :func:`.metrics.curve_rows` rows (one per trace, policy and capacity). A seed
    where either side's metric is undefined (no such question) is left out and ``seeds`` says
    how many remain. ``higher``/``lower``/``tied`` count seeds by the sign of the difference.
    """
    needed = {"trace", "policy", "capacity", *metrics}
    if not needed <= set(rows.columns):
        raise ContractError(f"paired_table needs columns {', '.join(sorted(needed - set(rows.columns)))}")
    if not {FIRST, SECOND} <= set(rows["policy"]):
        raise ContractError(f"paired_table needs rows of {FIRST} and {SECOND}")
    records: list[dict[str, Any]] = []
    replayed = rows
    rows = with_tie_neutral(rows)
    for capacity, at in rows.groupby("capacity", sort=True):
        wide = {metric: at.pivot_table(index="trace", columns="policy", values=metric, aggfunc="first", dropna=False)
                for metric in metrics}
        best = best_baseline(replayed, capacity) if "answerable_rate" in metrics else None
        for metric, table in wide.items():
            for label, second in ((SECOND, SECOND), (TIE_NEUTRAL, TIE_NEUTRAL), (BEST_OTHER, best)):
                if second is None or second not in table:
                    continue
                pair = table[[FIRST, second]].dropna()
                difference = (pair[FIRST] - pair[second]).to_numpy(dtype=float)
                low, high = bootstrap_interval(difference)
                records.append({
                    "metric": metric,
                    "capacity": int(capacity),
                    "comparison": f"{FIRST} - {label}",
                    "first": FIRST,
                    "second": second,
                    "seeds": len(difference),
                    "first_mean": float(pair[FIRST].mean()) if len(pair) else math.nan,
                    "second_mean": float(pair[second].mean()) if len(pair) else math.nan,
                    "mean": float(difference.mean()) if len(difference) else math.nan,
                    "low": low,
                    "high": high,
                    "higher": int((difference > 0).sum()),
                    "lower": int((difference < 0).sum()),
                    "tied": int((difference == 0).sum()),
                })
    return pd.DataFrame(records)


def with_tie_neutral(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` and, where defined, ``confidence``'s tie-neutral rows (policy :data:`TIE_NEUTRAL`:
    its expectation over the order of tied facts, :mod:`.expectation`) for a third comparison."""
    if "answerable_expected" not in rows:
        return rows
    neutral = rows[(rows["policy"] == SECOND) & rows["answerable_expected"].notna()]
    return pd.concat([rows, neutral.assign(policy=TIE_NEUTRAL, answerable_rate=neutral["answerable_expected"],
                                           correction_survival=neutral["correction_survival_expected"],
                                           stale_kept_rate=math.nan)], ignore_index=True)


def direction(mean: float) -> str:
    """``higher``, ``lower`` or ``level`` (closer than the three decimals a sentence prints)."""
    return "level" if abs(mean) < 0.0005 else "higher" if mean > 0 else "lower"


def describe_row(row: pd.Series) -> str:
    """One paired row in words: the sign, the size, the interval and the sign counts."""
    metric = str(row["metric"]).replace("_", " ")
    if not row["seeds"]:
        return f"{metric}: no seed has this measure at capacity {row['capacity']}."
    against = row["second"] if BEST_OTHER not in row["comparison"] else f"the best other policy ({row['second']})"
    interval = (
        "no interval (one seed)" if math.isnan(row["low"])
        else f"95 % interval {row['low']:+.3f} to {row['high']:+.3f}"
    )
    way = direction(row["mean"])
    compared = f"level with {against}" if way == "level" else f"{way} than {against} by {abs(row['mean']):.3f}"
    better = "lower" if row["metric"] in LOWER_IS_BETTER else "higher"
    return (
        f"{metric}: {row['first']} is {compared}"
        f" ({better} is better; {row['first_mean']:.3f} vs {row['second_mean']:.3f}; {interval};"
        f" {row['first']} higher in {row['higher']}, lower in {row['lower']}, tied in {row['tied']}"
        f" of {row['seeds']} seeds)."
    )


def finding_sentences(table: pd.DataFrame, capacity: int = FINDING_CAPACITY) -> tuple[str, str]:
    """The trace finding as (headline, detail), from a :func:`paired_table` (also as read back
    from CSV): the headline compares hybrid-v1 with confidence at ``capacity``, the detail with
    the best other policy, and says how the numbers were made."""
    at = table[table["capacity"] == capacity]
    if at.empty:
        raise ContractError(f"the paired table has no rows at capacity {capacity}")
    versus = at[at["comparison"] == f"{FIRST} - {SECOND}"]
    others = at[at["comparison"].isin([f"{FIRST} - {TIE_NEUTRAL}", f"{FIRST} - {BEST_OTHER}"])]
    seeds = int(at["seeds"].max())
    prefix = f"At capacity {capacity} (DeerMem's default, fixed in advance), over {seeds} seeds: "
    headline = prefix + " ".join(describe_row(row) for _, row in versus.iterrows())
    notes = [
        *(describe_row(row) for _, row in others.iterrows()),
        "Each number is the mean over seeds of the paired difference (the same generated trace replayed"
        " through both policies); the interval is a 95 % percentile bootstrap of that mean, so it stays"
        " within what a rate can be; ties count seeds where both policies score the same.",
        "The best other policy is the one with the highest mean answerable rate at this capacity over the"
        " same seeds, so it was chosen on the data it is compared on.",
        "The workload is synthetic (evictlab's generator), so the finding holds for its assumptions only.",
    ]
    if seeds < MIN_SEEDS:
        notes.insert(0, f"Only {seeds} seeds: fewer than {MIN_SEEDS}, so this is not an established finding.")
    return headline, " ".join(notes)
