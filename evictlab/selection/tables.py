"""Views of the decisions frame: support retained per group, its ``retained/cases`` tables, tie counts.

Every table of support retention (run-policy's, the sweep's, the zoo's, the explorer's and
the report's) is a view of :func:`evictlab.selection.decisions.decide_grid`'s frame through
:func:`retention_counts` and :func:`retention_table`.
"""

from __future__ import annotations

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
    if total is not None:
        spread = decisions.assign(**{total_key: total})
        frames = [decisions, spread]
        decisions = pd.concat([_plain(frame, per_case_keys) for frame in frames], ignore_index=True)
    else:
        decisions = _plain(decisions, per_case_keys)
    per_case = decisions.groupby(per_case_keys, sort=False)
    mean = per_case["value"].mean().rename("retained")
    tied = per_case["support_tied"].mean().rename("ties")
    # Rows already averaged over seeds (the zoo's) say how many in their own "seeds" column.
    seeds = (per_case["seeds"].max() if "seeds" in decisions else per_case["value"].size()).rename("seeds")
    cases = pd.concat([mean, seeds, tied], axis=1).reset_index()
    grouped = cases.groupby(keys, sort=False)
    counts = grouped.agg(
        retained=("retained", "sum"), cases=("retained", "size"), seeds=("seeds", "max"), ties=("ties", "sum")
    ).reset_index()
    counts["cases"] = counts["cases"].astype(np.int64)
    counts["seeds"] = counts["seeds"].astype(np.int64)
    counts["retained"] = counts["retained"].astype(np.float64)
    if (counts["seeds"] == 1).all() and (counts["retained"] % 1 == 0).all():
        counts["retained"] = counts["retained"].round().astype(np.int64)
    if (counts["ties"] % 1 == 0).all():
        counts["ties"] = counts["ties"].round().astype(np.int64)
    return counts


def _plain(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """The key columns as plain objects (so groups follow the rows), the counted ``value``
    (``retention``, else ``support_retained``) and ``support_tied``."""
    value = "retention" if "retention" in frame else "support_retained"
    out = frame[[*keys, *(["seeds"] if "seeds" in frame else [])]].copy()
    out["value"] = frame[value].astype(np.float64)
    out["support_tied"] = frame["support_tied"].astype(np.float64) if "support_tied" in frame else 0.0
    for key in keys:
        if isinstance(out[key].dtype, pd.CategoricalDtype):
            out[key] = out[key].astype(object)
    return out


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
