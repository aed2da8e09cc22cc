"""Views of the decisions frame: support retained per group, its ``retained/cases`` tables, tie counts.

Every table of support retention (run-policy's, the sweep's, the zoo's, the explorer's and
the report's) is a view of :func:`evictlab.selection.decisions.decide_grid`'s frame through
:func:`retention_counts` and :func:`retention_table`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..intervals import wilson_interval


def retention_counts(
    decisions: pd.DataFrame, keys: Sequence[str], *, total: str | None = None, total_key: str = "scenario"
) -> pd.DataFrame:
    """Support retained per group of ``keys``: columns ``*keys``, ``retained``, ``cases``, ``seeds``, ``ties``.

    Counts the ``retention`` column (the row's tie-break; ``support_retained`` for rows
    without one). A case decided under several seeds counts as the mean over its seeds (so
    ``retained`` is an expected count, a float, when ``seeds`` > 1 or a tie-break expects;
    whole counts stay integers). Rows that are such means already (the zoo's) carry the
    number in a ``seeds`` column. ``ties`` counts the decisions a tie at the cut line settled
    (``support_tied``, 0 without that column). Groups come in the order of the rows. With
    ``total``, every group is repeated with ``total_key`` set to ``total`` over all its values
    (e.g. an "all cases" scenario).
    """
    keys = list(keys)
    per_case_keys = [*keys, "case_id"] if "case_id" not in keys else keys
    copies = 1 if total is None else 2
    value = "retention" if "retention" in decisions else "support_retained"
    columns = {key: key_codes(decisions[key], total if key == total_key else None, copies) for key in per_case_keys}
    case, first_row = group_ids([columns[key] for key in per_case_keys])
    per_case = np.bincount(case)
    retained = np.bincount(case, weights=_doubles(decisions, value, copies)) / per_case
    ties = np.bincount(case, weights=_doubles(decisions, "support_tied", copies)) / per_case
    # Rows already averaged over seeds (the zoo's) say how many in their own "seeds" column.
    seeds = per_case
    if "seeds" in decisions:
        seeds = np.zeros(len(per_case), dtype=np.int64)
        np.maximum.at(seeds, case, _doubles(decisions, "seeds", copies).astype(np.int64))
    group, first_case = group_ids([(columns[key][0][first_row], columns[key][1]) for key in keys])
    first = first_row[first_case]
    most_seeds = np.zeros(len(first), dtype=np.int64)
    np.maximum.at(most_seeds, group, seeds)
    counts = pd.DataFrame({key: columns[key][1][columns[key][0][first]] for key in keys}).assign(
        retained=np.bincount(group, weights=retained), cases=np.bincount(group).astype(np.int64),
        seeds=most_seeds, ties=np.bincount(group, weights=ties),
    )  # fmt: skip
    if (counts["seeds"] == 1).all() and (counts["retained"] % 1 == 0).all():
        counts["retained"] = counts["retained"].round().astype(np.int64)
    if (counts["ties"] % 1 == 0).all():
        counts["ties"] = counts["ties"].round().astype(np.int64)
    return counts


def key_codes(column: pd.Series, total: object = None, copies: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """A key column as ``(codes, values)``, ``values[codes]`` being the column: a categorical's
    codes, an integer's offsets from its least value, other values numbered as they first appear.
    The rows come ``copies`` times over; with ``total``, the second copy is all ``total``."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes, values = column.cat.codes.to_numpy(dtype=np.int64), np.asarray(column.cat.categories, dtype=object)
    elif pd.api.types.is_integer_dtype(column.dtype) and len(column):
        numbers = column.to_numpy(dtype=np.int64)
        low = int(numbers.min())
        codes, values = numbers - low, np.arange(low, int(numbers.max()) + 1)
    else:
        codes, values = pd.factorize(column.to_numpy())
    if total is not None:
        every = np.append(np.asarray(values, object), np.array([total], object))
        return np.concatenate([codes, np.full(len(codes), len(values))]), every
    return np.tile(codes, copies), np.asarray(values)


def group_ids(keys: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's group of equal keys (:func:`key_codes` of each), numbered in order of first
    appearance, and each group's first row."""
    count = len(keys[0][0]) if keys else 0
    sizes = [max(len(values), 1) for _, values in keys]
    total = math.prod(sizes)
    if total > max(4 * count, 1 << 20):  # too many possible keys for a table of them: hash
        group = np.zeros(count, dtype=np.int64)
        for (codes, _), size in zip(keys, sizes):
            group = pd.factorize(group * size + codes)[0]
        rises = np.ones(count, dtype=bool)
        rises[1:] = group[1:] > np.maximum.accumulate(group)[:-1]  # a group's first row: the count rises
        return group, np.flatnonzero(rises)
    ids = np.ravel_multi_index([codes for codes, _ in keys], sizes) if count and keys else np.zeros(count, np.int64)
    first_at = np.full(total, count, dtype=np.int64)
    np.minimum.at(first_at, ids, np.arange(count))
    first = np.sort(first_at[first_at < count])
    number = np.empty(total, dtype=np.int64)
    number[ids[first]] = np.arange(len(first))
    return number[ids], first


def _doubles(frame: pd.DataFrame, name: str, copies: int) -> np.ndarray:
    """A column as doubles, its rows ``copies`` times over (zeros where the frame has no such column)."""
    return np.tile(frame[name].to_numpy(dtype=np.float64) if name in frame else np.zeros(len(frame)), copies)


def format_count(value: float) -> str:
    """A count as text: whole numbers without decimals, expected counts (seed means) with one."""
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def retention_cell(retained: float, cases: int, seeds: int = 1, *, interval: bool = False) -> str:
    """``"27/45"``; an expected count (over seeds or tie orders) with one decimal, ``"22.5/45"``.

    With ``interval``, the 95% Wilson interval of the rate follows in percent:
    ``"27/45 [45.5, 73.0]"``.
    """
    value, cases = float(retained), int(cases)
    cell = (f"{value:.1f}" if seeds > 1 else format_count(value)) + f"/{cases}"
    if interval:
        lower, upper = wilson_interval(value, cases)
        cell += f" [{100 * lower:.1f}, {100 * upper:.1f}]"
    return cell


def retention_table(
    counts: pd.DataFrame,
    index: str | Sequence[str],
    columns: str | Sequence[str],
    *,
    total: str | None = None,
    sort_columns_by: str | None = None,
    intervals: bool = False,
) -> pd.DataFrame:
    """``"retained/cases"`` cells of :func:`retention_counts` output, ``index`` x ``columns``.

    Rows and columns keep the order in which they first appear in ``counts``; with
    ``sort_columns_by`` (one of ``columns``), columns are sorted by that key, stably. With
    ``total``, a last row of that name sums each column over all rows. ``intervals`` adds
    each cell's Wilson interval (:func:`retention_cell`).
    """
    index_keys = [index] if isinstance(index, str) else list(index)
    column_keys = [columns] if isinstance(columns, str) else list(columns)
    cells = counts.assign(
        cell=[
            retention_cell(r, c, s, interval=intervals)
            for r, c, s in zip(counts["retained"], counts["cases"], counts["seeds"])
        ]
    )
    table = cells.pivot(index=index_keys, columns=column_keys, values="cell")
    row_order = list(dict.fromkeys(_keys(cells, index_keys)))
    column_order = list(dict.fromkeys(_keys(cells, column_keys)))
    if sort_columns_by is not None:
        level = column_keys.index(sort_columns_by)
        column_order.sort(key=lambda key: key if len(column_keys) == 1 else key[level])
    table = table.reindex(index=_axis(row_order, index_keys), columns=_axis(column_order, column_keys))
    if total is not None:
        sums = cells.groupby(column_keys, sort=False)[["retained", "cases", "seeds"]].agg(
            {"retained": "sum", "cases": "sum", "seeds": "max"}
        )
        row = [retention_cell(*sums.loc[key], interval=intervals) for key in column_order]
        table.loc[total if len(index_keys) == 1 else (total,) * len(index_keys)] = row
    return table


def scenario_table(decisions: pd.DataFrame, *, total: str = "total", intervals: bool = False) -> pd.DataFrame:
    """Retained/cases per scenario (rows, in case order) and (policy, capacity) (columns,
    capacity outermost), with a ``total`` row: the table ``evictlab run-policy`` prints
    (``intervals``: with Wilson intervals)."""
    counts = retention_counts(decisions, ["scenario", "policy", "capacity"])
    return retention_table(
        counts, "scenario", ["policy", "capacity"], total=total, sort_columns_by="capacity", intervals=intervals
    )


def tie_counts(decisions: pd.DataFrame) -> pd.DataFrame:
    """How many decisions of ``decisions`` a tie at the cut line settled, per preset x policy x capacity.

    Columns ``preset``, ``policy``, ``capacity``; ``decisions``, the rows of the group (one per
    seed x setting x case); ``ties``, those whose support an exact tie settled (``support_tied``);
    ``near_ties``, those whose support's margin to the cut line is non-zero but at most 1e-12 of
    the larger score (``support_near_tie``); ``near_ties_kept``, the near ties whose support was
    kept; and ``near_tie_settings``, the settings with at least one near tie. Each count is of
    supports at one capacity, not of pairs of facts: near-equal scores of two other facts, or of
    the support and a fact on its own side of the cut line, count nowhere, and a sum over
    capacities counts one case once per capacity. Groups come in the order of the rows.
    """
    keys = ["preset", "policy", "capacity"]
    flagged = decisions.assign(
        near_kept=decisions["support_near_tie"] & decisions["support_retained"],
        near_setting=decisions["setting"].where(decisions["support_near_tie"]),
    )
    counts = (
        flagged.groupby(keys, sort=False, observed=True)
        .agg(
            decisions=("support_near_tie", "size"),
            ties=("support_tied", "sum"),
            near_ties=("support_near_tie", "sum"),
            near_ties_kept=("near_kept", "sum"),
            near_tie_settings=("near_setting", "nunique"),
        )
        .reset_index()
    )
    for name in ("decisions", "ties", "near_ties", "near_ties_kept", "near_tie_settings"):
        counts[name] = counts[name].astype(np.int64)
    return counts


def _keys(frame: pd.DataFrame, keys: list[str]) -> list[Any]:
    if len(keys) == 1:
        return list(frame[keys[0]])
    return list(zip(*(frame[key] for key in keys)))


def _axis(values: list[Any], names: list[str]) -> pd.Index:
    if len(names) == 1:
        return pd.Index(values, name=names[0])
    return pd.MultiIndex.from_tuples(values, names=names)
