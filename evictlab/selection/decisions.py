"""One decisions table: every (pools, policy, seed, setting, case, capacity) a study asks for.

:func:`decide_grid` is the one way evictlab runs policies over pools for a table. It returns a
tidy DataFrame with one row per decision, in the nesting order

    pools (preset) x policy x seed x setting x case (build order) x capacity,

and the columns of :data:`DECISION_COLUMNS` (plus ``kept_fact_ids`` with ``details=True``):

==============================  ==========  =====================================================
column                          dtype       meaning
==============================  ==========  =====================================================
``preset``                      category    the label of the pools (a preset name, or the key
                                            of the ``pools`` mapping)
``policy``                      category    the registered policy name
``seed``                        int64       the seed handed to the policy (only seeded policies
                                            read it)
``setting``                     int64       index into ``settings``
seven setting columns           float64,    the :class:`~evictlab.policies.PolicyParams` of the
(:data:`SETTING_COLUMNS`)       int64       setting (``correction_reserved_max`` is int64)
``case_id``, ``source``,        category    the case
``scenario``, ``question_type``
``capacity``                    int64       the number of facts the policy may keep
``support_retained``            bool        every support fact survived
``support_rank``                int64       1-based rank of the support fact among all facts
``reserved_correction_slots``   int64       slots the policy reserved for corrections
``support_margin``              float64     the support's score distance to the cut line (NaN
                                            when undefined; see :mod:`evictlab.selection.engine`)
``support_expected``            float64     P(support kept) when the facts tied with it are
                                            ordered uniformly at random (``random``: k / n)
``support_tied``                bool        an exact tie at the cut line settled the support
``support_near_tie``            bool        ``support_margin`` is non-zero but at most 1e-12
                                            times the larger of the two scores it compares:
                                            a rounding artefact put the support on its side of
                                            the cut line (that one pair only; see
                                            :mod:`evictlab.policies.ties`)
``tie_break``                   category    ``input-order`` or ``expected``: the policy's
                                            default (DeerMem's two: input order) or the
                                            ``tie_break`` asked for
``retention``                   float64     what tables count: ``support_retained`` under
                                            ``input-order``, ``support_expected`` under
                                            ``expected``
==============================  ==========  =====================================================

``confidence`` and ``hybrid-v1`` are decided by the vectorised engine
(:meth:`evictlab.selection.engine.PreparedCases.select`); every other registered policy by the scalar
selector through :func:`evictlab.selection.engine.reference_outcome`. Both give the same decisions,
bit for bit (property-tested).

The per-decision outputs are :data:`evictlab.selection.engine.OUTPUTS` with the dtypes of
:data:`OUTPUT_DTYPES`: a new output column is one new field of
:class:`~evictlab.selection.engine.Outcome` and :class:`~evictlab.selection.engine.BatchResult`, its name in
``OUTPUTS`` and its dtype here; nothing else in this module changes.

Every table of support retention (run-policy's, the sweep's, the zoo's, the explorer's and
the report's) is a view of this frame through :func:`retention_counts` and
:func:`retention_table`.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..core.pools import PoolSet
from ..core.protocol import PRESETS
from ..errors import ContractError
from ..intervals import wilson_interval
from ..policies import DEERMEM_POLICIES, PolicyParams, resolve_policy
from ..policies.ties import EXPECTED, TIE_BREAKS, check_tie_break
from .engine import ENGINE_POLICIES, OUTPUTS, PreparedCases, reference_outcome
from .engine_settings import SettingColumns

#: The seven :class:`~evictlab.policies.PolicyParams` fields, in their order.
SETTING_COLUMNS = tuple(field.name for field in fields(PolicyParams))
_PARAMETERS = operator.attrgetter(*SETTING_COLUMNS)
#: The array type of each engine output (:data:`~evictlab.selection.engine.OUTPUTS`) in the frame.
OUTPUT_DTYPES: dict[str, Any] = {
    "support_retained": bool,
    "support_rank": np.int64,
    "reserved_correction_slots": np.int64,
    "support_margin": np.float64,
    "support_expected": np.float64,
    "support_tied": bool,
    "support_near_tie": bool,
}
KEY_COLUMNS = ("preset", "policy", "seed", "setting")
CASE_COLUMNS = ("case_id", "source", "scenario", "question_type")
#: How a table counts each row: ``retention`` is ``support_expected`` under the ``expected``
#: tie-break and ``support_retained`` under ``input-order`` (see :mod:`evictlab.policies.ties`).
RETENTION_COLUMNS = ("tie_break", "retention")
DECISION_COLUMNS = (*KEY_COLUMNS, *SETTING_COLUMNS, *CASE_COLUMNS, "capacity", *OUTPUTS, *RETENTION_COLUMNS)
#: The label of pools handed over without a name and matching no preset's variant.
CUSTOM_POOLS = "custom"

Pools = PoolSet | PreparedCases


def decide_grid(
    pools: Pools | Mapping[str, Pools],
    policies: Sequence[str] = DEERMEM_POLICIES,
    settings: Sequence[PolicyParams] | None = None,
    capacities: Sequence[int] | None = None,
    seeds: Sequence[int] = (0,),
    *,
    details: bool = False,
    progress: bool | None = False,
    progress_label: str = "decisions",
    tie_break: str | None = None,
) -> pd.DataFrame:
    """Decide every combination and return the tidy decisions frame (see the module docstring).

    ``pools``: one :class:`~evictlab.core.pools.PoolSet` (or prepared cases), or a mapping label ->
    pools. ``settings`` default to the protocol's hybrid-v1 parameters, ``capacities`` to the
    config's. ``details`` adds ``kept_fact_ids`` (a tuple per row, in the selector's kept
    order). ``progress``: ``True`` shows a progress bar, ``None`` shows it when standard error
    is a terminal; ``progress_label`` names the bar. ``tie_break`` overrides every policy's
    own (``Policy.default_tie_break``) for the ``retention`` column.
    """
    named = _named_pools(pools)
    policies = distinct("policies", tuple(policies))
    for name in policies:
        resolve_policy(name)  # an unknown name fails here, naming the known ones
    first = next(iter(named.values()))
    if settings is None:
        settings = (first.protocol.config.hybrid,) if isinstance(first, PoolSet) else (PolicyParams(),)
    settings = tuple(settings)
    if not settings:
        raise ContractError("empty grid: no settings")
    if capacities is None:
        if not isinstance(first, PoolSet):
            raise ContractError("capacities are needed when the pools carry no protocol")
        capacities = first.protocol.config.pool.capacities
    capacities = distinct("capacities", tuple(int(capacity) for capacity in capacities))
    seeds = distinct("seeds", tuple(int(seed) for seed in seeds))
    prepared = {label: prepared_cases(item) for label, item in named.items()}
    tie_breaks = {name: check_tie_break(tie_break or resolve_policy(name).default_tie_break) for name in policies}
    rows = DecisionRows(prepared, policies, seeds, settings, capacities, details=details, tie_breaks=tie_breaks)
    with tqdm(
        total=rows.total,
        desc=progress_label,
        unit=" decisions",
        unit_scale=True,
        leave=False,
        disable=not (sys.stderr.isatty() if progress is None else progress),
    ) as bar:
        for label, cases in prepared.items():
            for policy in policies:
                for seed in seeds:
                    batches = decide_batches(cases, policy, seed, settings, capacities, details)
                    for first_setting, outputs, kept in batches:
                        bar.update(rows.add(label, policy, seed, first_setting, outputs, kept))
    return rows.frame()


def decide_batches(
    cases: PreparedCases,
    policy: str,
    seed: int,
    settings: Sequence[PolicyParams],
    capacities: tuple[int, ...],
    details: bool = False,
):
    """Decide ``policy`` for every setting x case x capacity, in batches of settings.

    Yields (index of the batch's first setting in ``settings``, outputs shaped (settings,
    cases, capacities), kept ids or None), batches in setting order.
    """
    if policy in ENGINE_POLICIES:  # deterministic: the seed changes nothing
        step = len(settings) if details else cases.chunk_size(len(capacities))
        for start in range(0, len(settings), step):
            batch = cases.select(policy, settings[start:start + step], capacities, details=details)
            kept = None
            if details:
                n_settings, n_cases, n_capacities = batch.shape
                kept = [
                    batch.kept_fact_ids(s, c, k)
                    for s in range(n_settings)
                    for c in range(n_cases)
                    for k in range(n_capacities)
                ]
            yield start, batch.outputs(), kept
        return
    for index, setting in enumerate(settings):
        outcomes = [
            [reference_outcome(case, policy, setting, capacity, cases.now, seed=seed) for capacity in capacities]
            for case in cases.cases
        ]
        outputs = {
            name: np.array([[getattr(o, name) for o in row] for row in outcomes], dtype=dtype)[None]
            for name, dtype in OUTPUT_DTYPES.items()
        }
        kept = [o.kept_fact_ids for row in outcomes for o in row] if details else None
        yield index, outputs, kept


def _named_pools(pools: Pools | Mapping[str, Pools]) -> dict[str, Pools]:
    if isinstance(pools, Mapping):
        if not pools:
            raise ContractError("empty grid: no pools")
        return {str(label): item for label, item in pools.items()}
    return {pools_label(pools): pools}


def pools_label(pools: Pools) -> str:
    """The preset whose variant built ``pools``, else :data:`CUSTOM_POOLS`."""
    variant = getattr(pools, "variant", None)
    return next((name for name, preset in PRESETS.items() if preset == variant), CUSTOM_POOLS)


def prepared_cases(item: Pools) -> PreparedCases:
    """``item`` as :class:`~evictlab.selection.engine.PreparedCases` (a pool set is prepared at its clock)."""
    if isinstance(item, PreparedCases):
        return item
    if isinstance(item, PoolSet):
        return PreparedCases.from_pool_set(item)
    raise ContractError(f"expected a PoolSet or PreparedCases, got {type(item).__name__}")


def distinct(name: str, values: tuple[Any, ...]) -> tuple[Any, ...]:
    """``values`` unless empty or repeating one (a repeated capacity would count cases twice)."""
    if not values:
        raise ContractError(f"empty grid: no {name}")
    # Named as first listed: (30, 30.0) repeats 30.
    repeated = list(dict.fromkeys(values[values.index(v)] for i, v in enumerate(values) if v in values[:i]))
    if repeated:
        raise ContractError(f"{name}: {', '.join(map(repr, repeated))} listed more than once")
    return values


class DecisionRows:
    """The rows of :func:`decide_grid`, filled part by part into preallocated columns.

    Text columns are held as integer codes and decoded once, at the end, into categoricals;
    the setting parameters are looked up from the setting index then, too, so a grid of
    millions of decisions costs a few arrays, not millions of Python objects.
    """

    def __init__(
        self,
        prepared: Mapping[str, PreparedCases],
        policies: Sequence[str],
        seeds: Sequence[int],
        settings: Sequence[PolicyParams],
        capacities: Sequence[int],
        *,
        details: bool = False,
        tie_breaks: Mapping[str, str] | None = None,
        first_setting: int = 0,
        size: int | None = None,
    ) -> None:
        self.labels = list(prepared)
        self.policies = list(policies)
        self.tie_breaks = {p: (tie_breaks or {}).get(p, resolve_policy(p).default_tie_break) for p in self.policies}
        self.settings = settings if isinstance(settings, SettingColumns) else tuple(settings)
        self.capacities = np.asarray(capacities, dtype=np.int64)
        # Per label: each case's code in the case columns' categories.
        self.categories, self.codes = case_codes(prepared, CASE_COLUMNS)
        # ``settings`` may be a window of a larger grid: the ``setting`` column counts from
        # ``first_setting``, and ``size`` rows (fewer than the whole product) may be filled.
        self.first_setting = first_setting
        per_case = len(policies) * len(seeds) * len(settings) * len(capacities)
        self.total = sum(per_case * len(cases) for cases in prepared.values()) if size is None else size
        dtypes = {
            "preset": np.int32,
            "policy": np.int32,
            "seed": np.int64,
            "setting": np.int64,
            **dict.fromkeys(CASE_COLUMNS, np.int32),
            "capacity": np.int64,
            **OUTPUT_DTYPES,
        }
        self.columns = {name: np.empty(self.total, dtype=dtype) for name, dtype in dtypes.items()}
        self.kept: list[tuple[str, ...]] | None = [] if details else None
        self.filled = 0

    def add(
        self,
        label: str,
        policy: str,
        seed: int,
        first_setting: int,
        outputs: Mapping[str, np.ndarray],
        kept: Sequence[tuple[str, ...]] | None = None,
    ) -> int:
        """Append the rows of outputs shaped (settings, cases, capacities); returns their number."""
        n_settings, n_cases, n_capacities = np.shape(outputs["support_retained"])
        per_setting = n_cases * n_capacities
        count = n_settings * per_setting
        rows = slice(self.filled, self.filled + count)
        case_index = np.tile(np.repeat(np.arange(n_cases), n_capacities), n_settings)
        columns = self.columns
        columns["preset"][rows] = self.labels.index(label)
        columns["policy"][rows] = self.policies.index(policy)
        columns["seed"][rows] = seed
        first = self.first_setting + first_setting
        columns["setting"][rows] = np.repeat(np.arange(first, first + n_settings), per_setting)
        for name, codes in self.codes[label].items():
            columns[name][rows] = codes[case_index]
        columns["capacity"][rows] = np.tile(self.capacities, n_settings * n_cases)
        for name in OUTPUTS:
            columns[name][rows] = np.asarray(outputs[name]).reshape(-1)
        if self.kept is not None:
            self.kept.extend(tuple(ids) for ids in (kept or ()))
        self.filled += count
        return count

    def coded(self) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
        """The rows filled so far as arrays, one per column of :data:`DECISION_COLUMNS`.

        The category columns hold int32 codes into the returned categories (name -> values).
        """
        columns = {name: array[: self.filled] for name, array in self.columns.items()}
        categories = {
            "preset": self.labels,
            "policy": self.policies,
            **self.categories,
            "tie_break": list(TIE_BREAKS),
        }
        local = columns["setting"] - self.first_setting
        for name, values in setting_arrays(self.settings).items():
            columns[name] = values[local]
        breaks = [self.tie_breaks[p] for p in self.policies]
        columns["tie_break"] = np.array([TIE_BREAKS.index(name) for name in breaks], dtype=np.int32)[columns["policy"]]
        expected = np.array([name == EXPECTED for name in breaks])[columns["policy"]]
        columns["retention"] = np.where(
            expected, columns["support_expected"], columns["support_retained"].astype(np.float64)
        )
        return columns, categories

    def frame(self) -> pd.DataFrame:
        assert self.filled == self.total, (self.filled, self.total)
        columns: dict[str, Any]
        columns, categories = self.coded()
        for name, values in categories.items():
            columns[name] = pd.Categorical.from_codes(columns[name], values)
        frame = pd.DataFrame({name: columns[name] for name in DECISION_COLUMNS}, copy=False)
        if self.kept is not None:
            frame["kept_fact_ids"] = pd.Series(self.kept, index=frame.index, dtype=object)
        return frame


def settings_frame(settings: Sequence[PolicyParams]) -> pd.DataFrame:
    """One row per setting: ``setting`` and the seven parameters."""
    return pd.DataFrame({"setting": np.arange(len(settings), dtype=np.int64), **setting_arrays(settings)})


def setting_arrays(settings: Sequence[PolicyParams]) -> dict[str, np.ndarray]:
    """The seven parameters of each setting, one array per :data:`SETTING_COLUMNS` name
    (float64; ``correction_reserved_max`` int64)."""
    if isinstance(settings, SettingColumns):
        return {name: settings.column(name) for name in SETTING_COLUMNS}
    values = np.array([_PARAMETERS(setting) for setting in settings], dtype=np.float64).reshape(-1, 7)
    columns = {name: values[:, at] for at, name in enumerate(SETTING_COLUMNS)}
    columns["correction_reserved_max"] = np.array([s.correction_reserved_max for s in settings], dtype=np.int64)
    return columns


def case_codes(
    prepared: Mapping[str, PreparedCases], names: Sequence[str]
) -> tuple[dict[str, list[str]], dict[str, dict[str, np.ndarray]]]:
    """The values of each case column ``name`` over every label's cases, in order of first
    appearance (labels in order), and each case's int32 code into them, per label."""
    tables: dict[str, dict[str, int]] = {name: {} for name in names}
    codes = {
        label: {
            name: np.array(
                [tables[name].setdefault(str(getattr(case, name, "")), len(tables[name])) for case in cases.cases],
                dtype=np.int32,
            )
            for name in names
        }
        for label, cases in prepared.items()
    }
    return {name: list(table) for name, table in tables.items()}, codes


# --------------------------------------------------------------------------- views


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


def retention_cell(retained: float, cases: int, seeds: int = 1, *, interval: bool = False) -> str:
    """``"27/45"``; an expected count (over seeds or tie orders) with one decimal, ``"22.5/45"``.

    With ``interval``, the 95% Wilson interval of the rate follows in percent:
    ``"27/45 [45.5, 73.0]"``.
    """
    value, cases = float(retained), int(cases)
    cell = (f"{value:.1f}" if seeds > 1 or not value.is_integer() else str(int(value))) + f"/{cases}"
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


__all__ = [
    "DECISION_COLUMNS",
    "OUTPUT_DTYPES",
    "SETTING_COLUMNS",
    "decide_grid",
    "retention_cell",
    "retention_counts",
    "retention_table",
    "scenario_table",
    "settings_frame",
    "tie_counts",
]
