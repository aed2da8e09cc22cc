"""Which weights to take: the best triples per capacity, ties counted, and what that choice is worth held out.

:func:`weight_choice` reads the rows of :func:`evictlab.analysis.sweep.run_sweep` over a grid of
weight triples (one policy and preset, one pair of half-lives) and answers, per capacity (and
for all capacities together when there are several):

* ``best``: the most supports any triple keeps, over all cases and per scenario; how many
  triples share that best (a tie the data cannot break: the first in grid order, highest
  confidence weight first, is named); DeerMem's default beside it; and how many of the named
  triple's decisions an exact tie at the cut line settled (broken by input order, spec 2.8) or
  a near tie (a margin within 1e-12, :func:`evictlab.selection.decisions.tie_counts`);
* ``held_out``: what choosing that way is worth on cases it was not chosen on
  (:func:`evictlab.analysis.validation.held_out_selection`: leave one scenario, or one loss rank,
  out, choose on the others, score on it), in counts, with a total per grouping that scores
  every case once.

:func:`choice_lines` writes both as the text ``evictlab weights`` prints and notebook 03 opens
with, each block ending in sentences a reader can check against the table above them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ContractError
from ..policies import PolicyParams
from .validation import GROUPINGS, WEIGHTS, held_out_selection

ALL_CASES = "all cases"
BEST_COLUMNS = ("capacities", "group", "decisions", "best", "optimal_settings", "settings", "setting", *WEIGHTS,
                "default", "default_is_best", "ties", "near_ties")  # fmt: skip
HELD_OUT_COLUMNS = ("capacities", "grouping", "held_out", "decisions", "optimal_settings", "first", "lowest",
                    "highest", "default")  # fmt: skip


@dataclass(frozen=True)
class WeightChoice:
    """The tables of :func:`weight_choice` (columns :data:`BEST_COLUMNS`, :data:`HELD_OUT_COLUMNS`)."""

    best: pd.DataFrame
    held_out: pd.DataFrame
    default: tuple[float, float, float]


def weight_choice(
    rows: pd.DataFrame, groups: Mapping[str, Mapping[str, str]], *, default: PolicyParams | None = None
) -> WeightChoice:
    """The best triples and their held-out worth, per capacity and for all capacities together.

    ``rows``: sweep rows of one policy and preset over weight triples at one pair of half-lives
    (``support_retained`` as decided). ``groups``: for each grouping of
    :data:`~evictlab.analysis.validation.GROUPINGS`, ``case_id -> group``
    (:func:`~evictlab.analysis.validation.case_groups`). Counts are decisions (cases x capacities).
    """
    default = default or PolicyParams()
    capacities = sorted(int(k) for k in rows["capacity"].unique())
    if rows["setting"].nunique() < 2:
        raise ContractError("choosing weights needs at least two weight triples in the rows")
    choices = [(k,) for k in capacities] + ([tuple(capacities)] if len(capacities) > 1 else [])
    best, held = [], []
    for chosen in choices:
        part = rows[rows["capacity"].isin(chosen)]
        label = ",".join(map(str, chosen))
        best += _best_rows(part, label, default.weights)
        for grouping in GROUPINGS:
            table = held_out_selection(part, groups[grouping], grouping=grouping, capacities=chosen, default=default)
            held += _held_out_rows(table, label, grouping)
    return WeightChoice(pd.DataFrame.from_records(best, columns=list(BEST_COLUMNS)),
                        pd.DataFrame.from_records(held, columns=list(HELD_OUT_COLUMNS)), default.weights)  # fmt: skip


def _best_rows(part: pd.DataFrame, label: str, default: tuple[float, float, float]) -> list[dict]:
    weights = part.drop_duplicates("setting").set_index("setting")[list(WEIGHTS)].sort_index()
    at_default = weights.index[np.isclose(weights.to_numpy(dtype=float), default).all(axis=1)]
    records = []
    for group, members in [(ALL_CASES, part), *part.groupby("scenario", sort=False, observed=True)]:
        totals = members.groupby("setting", sort=True)[["support_retained", "support_tied", "support_near_tie"]].sum()
        best = totals["support_retained"].max()
        optimal = totals.index[totals["support_retained"] == best]
        first = int(optimal[0])
        kept = int(totals.loc[at_default[0], "support_retained"]) if len(at_default) else np.nan
        records.append({
            "capacities": label, "group": str(group), "decisions": int(members["setting"].eq(first).sum()),
            "best": int(best), "optimal_settings": len(optimal), "settings": len(totals), "setting": first,
            **weights.loc[first].astype(float).to_dict(), "default": kept,
            "default_is_best": bool(len(at_default)) and at_default[0] in optimal,
            "ties": int(totals.loc[first, "support_tied"]), "near_ties": int(totals.loc[first, "support_near_tie"]),
        })  # fmt: skip
    return records


def _held_out_rows(table: pd.DataFrame, label: str, grouping: str) -> list[dict]:
    counts = table["held_out_decisions"]
    frame = pd.DataFrame({
        "capacities": label, "grouping": grouping, "held_out": table["held_out"], "decisions": counts,
        "optimal_settings": table["optimal_settings"],
        **{name: (table[column] * counts).round().astype(int) for name, column in
           (("first", "held_out_rate"), ("lowest", "held_out_min"), ("highest", "held_out_max"))},
        "default": (table["default_held_out_rate"] * counts).round(),
    })  # fmt: skip
    total = {"capacities": label, "grouping": grouping, "held_out": "total",
             "optimal_settings": int(frame["optimal_settings"].max()),
             **frame[["decisions", "first", "lowest", "highest", "default"]].sum(min_count=1).to_dict()}  # fmt: skip
    return [*frame.to_dict("records"), total]


# --------------------------------------------------------------------------- text


def triple(weights: Sequence[float]) -> str:
    """``(0.65, 0.25, 0.1)`` -> ``"0.65/0.25/0.1"``."""
    return "/".join(f"{float(weight):g}" for weight in weights)


def _count(value: float, decisions: float) -> str:
    return "-" if pd.isna(value) else f"{int(value)}/{int(decisions)}"


def choice_lines(choice: WeightChoice) -> list[str]:
    """The tables and sentences of ``choice``, one block per capacity (or set of capacities)."""
    lines: list[str] = []
    default = "DeerMem " + triple(choice.default)
    row_format = "  {:<24} {:>8} {:>18}  {:<20} {:>22}".format
    for label, best in choice.best.groupby("capacities", sort=False):
        where = f"capacity {label}" if "," not in label else f"capacities {label} together"
        lines += [f"{where}: the most supports a weight triple keeps (in sample: chosen and scored on these cases)",
                  row_format("", "best", "triples at best", "first in grid order", default)]  # fmt: skip
        for row in best.itertuples():
            first = triple((row.confidence_weight, row.confirmation_weight, row.access_weight))
            at_default = _count(row.default, row.decisions) + (", among them" if row.default_is_best else "")
            lines.append(row_format(row.group, _count(row.best, row.decisions),
                                    f"{row.optimal_settings} of {row.settings}", first, at_default))
        lines += ["  held out: chosen on the other groups, scored on the group left out",
                  row_format("left out", "first", "tied: range (n)", "", default)]
        for grouping, held in choice.held_out[choice.held_out["capacities"] == label].groupby("grouping", sort=False):
            for row in held.sort_values("held_out", key=lambda names: names == "total", ascending=False).itertuples():
                name = f"by {grouping.replace('_', ' ')}" if row.held_out == "total" else f"  {row.held_out}"
                lines.append(row_format(name, _count(row.first, row.decisions),
                                        f"{int(row.lowest)}-{int(row.highest)} ({int(row.optimal_settings)})", "",
                                        _count(row.default, row.decisions)))  # fmt: skip
        lines += [*textwrap.wrap(verdict(best, choice.held_out[choice.held_out["capacities"] == label],
                                         triple(choice.default)), 100), ""]  # fmt: skip
    return lines[:-1]


def verdict(best: pd.DataFrame, held: pd.DataFrame, default: str) -> str:
    """The sentences under one block: the choice, whether a tie decides it, what it is worth held out."""
    top = best[best["group"] == ALL_CASES].iloc[0]
    label, decisions = top["capacities"], int(top["decisions"])
    where = f"At capacity {label}" if "," not in label else f"Summed over capacities {label}"
    first = triple(top[list(WEIGHTS)])
    text = f"{where}, {top['optimal_settings']} of {top['settings']} weight triples keep the most supports," \
           f" {top['best']}/{decisions}"
    if top["optimal_settings"] > 1:
        text += f": a tie the data cannot break ({first} is only the first in grid order)"
    text += "; this is in sample, chosen on the cases that score it."
    if top["ties"] or top["near_ties"]:
        text += f" Of {first}'s {decisions} decisions, {top['ties']} are exact ties at the cut line (broken by input" \
                f" order) and {top['near_ties']} near ties (a margin of at most 1e-12: rounding decided them)."
    totals = held[held["held_out"] == "total"].set_index("grouping")
    phrases = []
    for grouping, row in totals.iterrows():
        low, high = int(row["lowest"]), int(row["highest"])
        spread = "" if low == high else f" ({low} to {high} over the tied)"
        phrases.append(f"without the {grouping.replace('_', ' ')} it is scored on, the first tied triple of each fold"
                       f" keeps {_count(row['first'], row['decisions'])}{spread}, DeerMem's default"
                       f" {_count(row['default'], row['decisions'])}")  # fmt: skip
    text += " Chosen " + "; chosen ".join(phrases) + "."
    if pd.isna(top["default"]):
        return text + f" DeerMem's default {default} is not among the triples."
    worse = [g.replace("_", " ") for g, row in totals.iterrows() if row["first"] < row["default"]]
    if top["default_is_best"] or worse:
        held_out = f"fewer held out by {' and by '.join(worse)}" if worse else "no more held out"
        if top["default_is_best"]:
            how = f"it is among the best in sample, and choosing on these cases keeps {held_out}"
        else:
            how = (f"{first} keeps {int(top['best'] - top['default'])} more in sample, but choosing on these cases"
                   f" keeps {held_out}, and a choice must hold out under both groupings")
        return text + f" Take DeerMem's default {default}: {how}. It was fixed before this sweep, though the" \
                      " pools were built to test it, so its count is not a held-out one either."
    return text + f" Take {first}: it keeps {int(top['best'] - top['default'])} more supports than DeerMem's" \
                  " default in sample, and choosing this way keeps at least as many held out under both groupings."


__all__ = ["BEST_COLUMNS", "HELD_OUT_COLUMNS", "WeightChoice", "choice_lines", "triple", "verdict", "weight_choice"]
