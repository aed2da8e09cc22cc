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

Every policy is decided by :meth:`evictlab.selection.engine.PreparedCases.select`: on its rank
keys through the one selector (:mod:`evictlab.selection.selector`), or, for a policy no keys
express (``mmr``), by the scalar selector decision by decision. Both give the scalar selector's
decisions, bit for bit (``tests/test_golden_decisions.py``, property tests).

The per-decision outputs are :data:`evictlab.selection.engine.OUTPUTS` with the dtypes of
:data:`OUTPUT_DTYPES`: a new output column is one new field of
:class:`~evictlab.selection.engine.Outcome` and :class:`~evictlab.selection.engine.BatchResult`, its name in
``OUTPUTS`` and its dtype here; nothing else in this module changes.

The frame is made in chunks: :class:`DecisionPlan` checks a grid once and cuts it into
:class:`DecisionChunk` parts (pools x policy x seed x a run of settings, about
:data:`CHUNK_ROWS` rows each); :func:`iter_decisions` yields their frames in order, and
:func:`decide_grid` is their concatenation. ``evictlab sweep`` writes each chunk's frame as it
comes (:mod:`evictlab.analysis.sweep_output`), so a grid of any size is decided in bounded
memory by this one path.

Every table of support retention is a view of this frame (:mod:`evictlab.selection.tables`:
:func:`retention_counts`, :func:`retention_table`, re-exported here).
"""

from __future__ import annotations

import itertools
import operator
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..core.pools import PoolSet
from ..core.protocol import PRESETS
from ..errors import ContractError
from ..policies import DEERMEM_POLICIES, Policy, PolicyParams, resolve_policy
from ..policies.ties import EXPECTED, TIE_BREAKS, check_tie_break
from .engine import OUTPUTS, BatchResult, PreparedCases
from .engine_settings import SettingColumns
from .tables import retention_cell, retention_counts, retention_table, scenario_table, tie_counts

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

#: Rows a chunk of :func:`iter_decisions` holds at most (unless one setting's rows, cases x
#: capacities, are more): a chunk is one pools x policy x seed x run of settings.
CHUNK_ROWS = 1_000_000

Pools = PoolSet | PreparedCases
PolicyLike = str | Policy


@dataclass(frozen=True)
class DecisionChunk:
    """Rows of pools ``label`` x ``policy`` x ``seed`` x settings ``start`` to ``stop - 1``
    (every case and capacity): the unit :func:`iter_decisions` yields and a sweep stores."""

    index: int
    label: str
    policy: str
    seed: int
    start: int
    stop: int
    rows: int


@dataclass(frozen=True)
class DecisionPlan:
    """A checked grid and its chunks: everything a chunk needs to be decided anywhere (it
    pickles, for Dask). Build it with :meth:`build`; :meth:`decide` makes one chunk's frame."""

    prepared: Mapping[str, PreparedCases] = field(repr=False)
    policies: tuple[str, ...]
    seeds: tuple[int, ...]
    settings: Sequence[PolicyParams] = field(repr=False)  # SettingColumns, or slices to them
    capacities: tuple[int, ...]
    tie_breaks: Mapping[str, str]
    details: bool
    chunk_rows: int
    chunks: tuple[DecisionChunk, ...] = field(repr=False)
    resolved: Mapping[str, Policy] = field(repr=False)  # each policy spec, parsed once

    @classmethod
    def build(
        cls,
        pools: Pools | Mapping[str, Pools],
        policies: Sequence[PolicyLike] = DEERMEM_POLICIES,
        settings: Sequence[PolicyParams] | None = None,
        capacities: Sequence[int] | None = None,
        seeds: Sequence[int] = (0,),
        *,
        details: bool = False,
        tie_break: str | None = None,
        chunk_rows: int = CHUNK_ROWS,
    ) -> DecisionPlan:
        """Check the grid (see :func:`decide_grid`) and cut it into chunks of about ``chunk_rows``."""
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
            raise ContractError(f"chunk rows must be an integer >= 1, got {chunk_rows!r}")
        named = _named_pools(pools)
        names = distinct("policies", tuple(p if isinstance(p, str) else p.name for p in policies))
        resolved = dict(zip(names, map(resolve_policy, policies)))  # an unknown name fails here
        first = next(iter(named.values()))
        if settings is None:
            settings = (first.protocol.config.hybrid,) if isinstance(first, PoolSet) else (PolicyParams(),)
        if not isinstance(settings, Sequence) or isinstance(settings, (list, tuple)):
            settings = SettingColumns.of(tuple(settings))  # a sequence of another kind is sliced as needed
        if not len(settings):
            raise ContractError("empty grid: no settings")
        if capacities is None:
            if not isinstance(first, PoolSet):
                raise ContractError("capacities are needed when the pools carry no protocol")
            capacities = first.protocol.config.pool.capacities
        capacities = distinct("capacities", tuple(int(capacity) for capacity in capacities))
        seeds = distinct("seeds", tuple(int(seed) for seed in seeds))
        prepared = {label: prepared_cases(item) for label, item in named.items()}
        tie_breaks = {name: check_tie_break(tie_break or policy.default_tie_break) for name, policy in resolved.items()}
        chunks: list[DecisionChunk] = []
        for label, cases in prepared.items():
            per_setting = len(cases) * len(capacities)
            step = max(1, chunk_rows // per_setting)
            for policy, seed in itertools.product(names, seeds):
                for start in range(0, len(settings), step):
                    stop = min(start + step, len(settings))
                    rows = (stop - start) * per_setting
                    chunks.append(DecisionChunk(len(chunks), label, policy, seed, start, stop, rows))
        return cls(
            prepared, names, seeds, settings, capacities, tie_breaks, details, chunk_rows, tuple(chunks), resolved
        )

    @property
    def rows(self) -> int:
        return sum(chunk.rows for chunk in self.chunks)

    def frames(self, progress: bool | None = False, label: str = "decisions") -> Iterator[pd.DataFrame]:
        """Every chunk's frame, in row order (``progress`` as :func:`decide_grid`'s)."""
        show = sys.stderr.isatty() if progress is None else progress
        bar = tqdm(total=self.rows, desc=label, unit=" decisions", unit_scale=True, leave=False, disable=not show)
        with bar:
            for chunk in self.chunks:
                yield self.decide(chunk)
                bar.update(chunk.rows)

    @cached_property
    def _case_codes(self) -> tuple[dict[str, list[str]], dict[str, dict[str, np.ndarray]]]:
        return case_codes(self.prepared, CASE_COLUMNS)

    def decide(self, chunk: DecisionChunk) -> pd.DataFrame:
        """The tidy frame of one chunk (the module docstring's columns, in its nesting order)."""
        return self.frame(chunk, self.batch(chunk))

    def batch(self, chunk: DecisionChunk) -> BatchResult:
        """One chunk decided by the one selector (a policy without rank keys, ``mmr``, on the
        scalar selector inside it); with ``details``, each decision is :meth:`BatchResult.decision`."""
        settings = SettingColumns.of(self.settings[chunk.start : chunk.stop])
        policy = self.resolved[chunk.policy]
        return self.prepared[chunk.label].select(policy, settings, self.capacities, details=self.details,
                                                 seed=chunk.seed)  # fmt: skip

    def frame(self, chunk: DecisionChunk, batch: BatchResult) -> pd.DataFrame:
        """The tidy frame of ``chunk`` from its :meth:`batch`."""
        outputs = batch.outputs()
        kept = [batch.kept_fact_ids(*index) for index in np.ndindex(*batch.shape)] if self.details else None
        settings = batch.settings
        n_settings, n_cases, n_capacities = batch.shape
        size, per_setting = n_settings * n_cases * n_capacities, n_cases * n_capacities
        categories, codes = self._case_codes
        tie_break = self.tie_breaks[chunk.policy]
        case_index = np.tile(np.repeat(np.arange(n_cases), n_capacities), n_settings)
        columns: dict[str, Any] = {
            "preset": _constant(list(self.prepared), chunk.label, size),
            "policy": _constant(list(self.policies), chunk.policy, size),
            "seed": np.full(size, chunk.seed, dtype=np.int64),
            "setting": np.repeat(np.arange(chunk.start, chunk.stop, dtype=np.int64), per_setting),
            **{name: np.repeat(values, per_setting) for name, values in setting_arrays(settings).items()},
            **{name: pd.Categorical.from_codes(codes[chunk.label][name][case_index], categories[name])
               for name in CASE_COLUMNS},
            "capacity": np.tile(np.asarray(self.capacities, dtype=np.int64), n_settings * n_cases),
            **{name: np.asarray(outputs[name], dtype=OUTPUT_DTYPES[name]).reshape(-1) for name in OUTPUTS},
            "tie_break": _constant(list(TIE_BREAKS), tie_break, size),
        }  # fmt: skip
        retained = columns["support_retained"]
        columns["retention"] = columns["support_expected"] if tie_break == EXPECTED else retained.astype(np.float64)
        frame = pd.DataFrame(columns, copy=False)
        if kept is not None:
            frame["kept_fact_ids"] = pd.Series(kept, index=frame.index, dtype=object)
        return frame


def iter_decisions(
    pools: Pools | Mapping[str, Pools],
    policies: Sequence[PolicyLike] = DEERMEM_POLICIES,
    settings: Sequence[PolicyParams] | None = None,
    capacities: Sequence[int] | None = None,
    seeds: Sequence[int] = (0,),
    *,
    details: bool = False,
    progress: bool | None = False,
    progress_label: str = "decisions",
    tie_break: str | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> Iterator[pd.DataFrame]:
    """:func:`decide_grid`'s rows as frames of about ``chunk_rows`` rows, in its row order
    (each one pools x policy x seed x run of settings; :class:`DecisionPlan` says which).
    The grid is checked before the first frame."""
    plan = DecisionPlan.build(
        pools, policies, settings, capacities, seeds, details=details, tie_break=tie_break, chunk_rows=chunk_rows
    )
    return plan.frames(progress, progress_label)


def decide_grid(
    pools: Pools | Mapping[str, Pools],
    policies: Sequence[PolicyLike] = DEERMEM_POLICIES,
    settings: Sequence[PolicyParams] | None = None,
    capacities: Sequence[int] | None = None,
    seeds: Sequence[int] = (0,),
    *,
    details: bool = False,
    progress: bool | None = False,
    progress_label: str = "decisions",
    tie_break: str | None = None,
) -> pd.DataFrame:
    """Decide every combination and return the tidy decisions frame (see the module docstring):
    the frames of :func:`iter_decisions`, concatenated.

    ``pools``: one :class:`~evictlab.core.pools.PoolSet` (or prepared cases), or a mapping label ->
    pools. ``policies``: spec strings or :class:`~evictlab.policies.Policy` objects.
    ``settings`` default to the protocol's hybrid-v1 parameters, ``capacities`` to the
    config's. ``details`` adds ``kept_fact_ids`` (a tuple per row, in the selector's kept
    order). ``progress``: ``True`` shows a progress bar, ``None`` shows it when standard error
    is a terminal; ``progress_label`` names the bar. ``tie_break`` overrides every policy's
    own (``Policy.default_tie_break``) for the ``retention`` column.
    """
    frames = iter_decisions(
        pools, policies, settings, capacities, seeds,
        details=details, progress=progress, progress_label=progress_label, tie_break=tie_break,
    )  # fmt: skip
    return pd.concat(list(frames), ignore_index=True)


def _constant(categories: list[str], value: str, size: int) -> pd.Categorical:
    return pd.Categorical.from_codes(np.full(size, categories.index(value), dtype=np.int8), categories)


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
    if len(set(values)) == len(values):  # at once for a grid's 20,301 weight triples
        return values
    # Named as first listed: (30, 30.0) repeats 30.
    repeated = list(dict.fromkeys(values[values.index(v)] for i, v in enumerate(values) if v in values[:i]))
    if repeated:
        raise ContractError(f"{name}: {', '.join(map(repr, repeated))} listed more than once")
    return values


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


__all__ = [
    "CHUNK_ROWS",
    "DECISION_COLUMNS",
    "OUTPUT_DTYPES",
    "SETTING_COLUMNS",
    "DecisionChunk",
    "DecisionPlan",
    "decide_grid",
    "iter_decisions",
    "retention_cell",
    "retention_counts",
    "retention_table",
    "scenario_table",
    "settings_frame",
    "tie_counts",
]
