"""Held-out validation and stability of tuned weights (sweep rows in, tables out).

The 45 pools were built to test DeerMem's signals, and a weight setting chosen because it
keeps the most supports *on those same pools* is an in-sample optimum: it says nothing about
pools it was not chosen on. :func:`held_out_selection` therefore leaves one group of cases out
(one scenario, or one loss rank), picks the settings that keep the most supports on the other
groups, and reports how those settings do on the group left out, beside their in-sample
retention. Many settings usually tie for the in-sample best, so the held-out retention is
given over all of them (minimum, median, maximum) and for the first in grid order.

:func:`stability` answers the other question a map raises: is a point on a plateau or on a
knife edge? For every weight point of a lattice it gives the range of retention over the
point and its neighbours one lattice step away (each weight within one step).

Both read the rows of :func:`evictlab.analysis.sweep.run_sweep` (``support_retained`` as decided,
DeerMem's input-order rule) of one policy and preset, at one pair of half-lives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ContractError
from ..policies import PolicyParams

GROUPINGS = ("scenario", "loss_rank")
WEIGHTS = ("confidence_weight", "confirmation_weight", "access_weight")
HELD_OUT_COLUMNS = (
    "grouping", "held_out", "capacities", "train_decisions", "held_out_decisions", "optimal_settings",
    "setting", *WEIGHTS, "in_sample_rate", "held_out_rate", "held_out_min", "held_out_median",
    "held_out_max", "default_held_out_rate", "best_held_out_rate",
)  # fmt: skip


def case_groups(pool_set: Any, grouping: str) -> dict[str, str]:
    """``case_id -> group`` for ``grouping`` (``scenario`` or ``loss_rank``) of a pool set's cases."""
    if grouping not in GROUPINGS:
        raise ContractError(f"unknown grouping {grouping!r}; known: {', '.join(GROUPINGS)}")
    return {case.case_id: str(getattr(case, grouping)) for case in pool_set.cases}


def _retained_by_setting(rows: pd.DataFrame, capacities: Sequence[int] | None) -> tuple[pd.DataFrame, tuple[int, ...]]:
    """Supports retained per setting (rows) and case (columns), summed over ``capacities``."""
    missing = [c for c in ("policy", "preset", "setting", *WEIGHTS, "case_id", "capacity", "support_retained")
               if c not in rows.columns]
    if missing:
        raise ContractError(f"sweep rows need the columns {', '.join(missing)}")
    for column in ("policy", "preset", "confirmation_half_life_days", "access_half_life_days"):
        if column in rows.columns and rows[column].nunique() > 1:
            raise ContractError(f"held-out validation reads one {column} at a time; filter the rows first")
    chosen = tuple(sorted(rows["capacity"].unique())) if capacities is None else tuple(capacities)
    part = rows[rows["capacity"].isin(chosen)]
    if part.empty:
        raise ContractError(f"no sweep rows at capacities {list(chosen)}")
    table = part.pivot_table(index="setting", columns="case_id", values="support_retained", aggfunc="sum",
                             observed=True).astype(np.int64)
    return table, chosen


def held_out_selection(
    rows: pd.DataFrame, groups: Mapping[str, str], *, grouping: str = "scenario",
    capacities: Sequence[int] | None = None, default: PolicyParams | None = None,
) -> pd.DataFrame:
    """Leave one group out: choose on the others, score on it (columns :data:`HELD_OUT_COLUMNS`).

    ``groups`` maps every case id of ``rows`` to its group (:func:`case_groups`). Retention is
    summed over ``capacities`` (default: all in the rows); rates are shares of decisions.
    ``optimal_settings`` counts the settings tied for the in-sample best; ``setting`` (and its
    weights) is the first of them in grid order, ``held_out_rate`` its held-out retention, and
    ``held_out_min``/``median``/``max`` run over all of them. ``default_held_out_rate`` is
    DeerMem's default setting (when on the grid), ``best_held_out_rate`` the best any setting
    reaches on the held-out group (an in-sample number for that group, for scale only).
    """
    table, chosen = _retained_by_setting(rows, capacities)
    unknown = sorted(set(table.columns) - set(groups))
    if unknown:
        raise ContractError(f"no group for case(s) {', '.join(unknown[:5])}")
    labels = pd.Series({case: groups[case] for case in table.columns})
    by_group = table.T.groupby(labels).sum().T  # settings x groups
    cases = labels.value_counts()
    weights = rows.drop_duplicates("setting").set_index("setting")[list(WEIGHTS)]
    default_setting = _default_setting(weights, default or PolicyParams())
    records = []
    for group in sorted(by_group.columns, key=_natural):
        train = by_group.drop(columns=group).sum(axis=1)
        train_decisions = int(cases.drop(group).sum()) * len(chosen)
        held_decisions = int(cases[group]) * len(chosen)
        optimal = train.index[train == train.max()]
        held = by_group.loc[optimal, group] / held_decisions
        first = int(optimal[0])
        records.append(
            {
                "grouping": grouping,
                "held_out": group,
                "capacities": ",".join(map(str, chosen)),
                "train_decisions": train_decisions,
                "held_out_decisions": held_decisions,
                "optimal_settings": len(optimal),
                "setting": first,
                **{name: float(weights.loc[first, name]) for name in WEIGHTS},
                "in_sample_rate": float(train.max()) / train_decisions,
                "held_out_rate": float(held.loc[first]),
                "held_out_min": float(held.min()),
                "held_out_median": float(held.median()),
                "held_out_max": float(held.max()),
                "default_held_out_rate": (
                    np.nan if default_setting is None else float(by_group.loc[default_setting, group]) / held_decisions
                ),
                "best_held_out_rate": float(by_group[group].max()) / held_decisions,
            }
        )
    return pd.DataFrame.from_records(records, columns=list(HELD_OUT_COLUMNS))


def _default_setting(weights: pd.DataFrame, default: PolicyParams) -> int | None:
    close = np.isclose(weights.to_numpy(dtype=float), np.array(default.weights)).all(axis=1)
    return int(weights.index[close][0]) if close.any() else None


def _natural(label: str) -> tuple[int, Any]:
    """Numbers (loss ranks) in numeric order, names in text order."""
    return (0, int(label)) if label.lstrip("-").isdigit() else (1, label)


def stability(rows: pd.DataFrame, *, step: float | None = None) -> pd.DataFrame:
    """Per weight point and capacity: retention over all cases and its range one lattice step around.

    Columns: ``setting``, the weights, ``capacity``, ``retained``, ``cases``,
    ``neighbourhood_min``, ``neighbourhood_max``, ``range`` (max - min over the point and
    every lattice point whose weights each differ by at most ``step``; ``step`` defaults to
    the lattice's own) and ``neighbours``.
    """
    missing = [c for c in ("setting", *WEIGHTS, "capacity", "support_retained") if c not in rows.columns]
    if missing:
        raise ContractError(f"sweep rows need the columns {', '.join(missing)}")
    totals = (
        rows.groupby(["setting", *WEIGHTS, "capacity"], observed=True, sort=True)["support_retained"]
        .agg(retained="sum", cases="size")
        .reset_index()
    )
    points = totals.drop_duplicates("setting")[["setting", *WEIGHTS]].set_index("setting")
    values = points.to_numpy(dtype=float)
    if step is None:
        differences = np.abs(values[:, None, :] - values[None, :, :]).max(axis=-1)
        positive = differences[differences > 1e-9]
        if positive.size == 0:
            raise ContractError("stability needs at least two weight points")
        step = float(positive.min())
    near = (np.abs(values[:, None, :] - values[None, :, :]) <= step + 1e-9).all(axis=-1)
    position = {setting: index for index, setting in enumerate(points.index)}
    records = []
    for capacity, members in totals.groupby("capacity", sort=True):
        retained = np.full(len(points), np.nan)
        retained[[position[s] for s in members["setting"]]] = members["retained"].to_numpy()
        for row in members.itertuples(index=False):
            around = retained[near[position[row.setting]]]
            low, high = float(np.nanmin(around)), float(np.nanmax(around))
            records.append(
                {"setting": row.setting, **{name: getattr(row, name) for name in WEIGHTS},
                 "capacity": int(capacity), "retained": int(row.retained), "cases": int(row.cases),
                 "neighbourhood_min": low, "neighbourhood_max": high, "range": high - low,
                 "neighbours": int(near[position[row.setting]].sum()) - 1}
            )  # fmt: skip
    return pd.DataFrame.from_records(records)


__all__ = ["GROUPINGS", "HELD_OUT_COLUMNS", "case_groups", "held_out_selection", "stability"]
