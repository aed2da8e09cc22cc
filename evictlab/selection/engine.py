"""Vectorised selection for ``confidence`` and ``hybrid-v1`` over settings x cases x capacities.

A *setting* is one :class:`~evictlab.policies.PolicyParams`: the three weights, the two
half-lives and the correction reservation. :class:`PreparedCases` reads every fact's signals
once; :meth:`PreparedCases.select` then decides a whole batch of settings x cases x
capacities with numpy and returns the same kept sets, support ranks and reserved counts as
the scalar selector (:func:`evictlab.policies.select`), bit for bit, ties
included. That holds because:

* the raw signals (bounded confidence, elapsed days since ``lastConfirmedAt`` or
  ``createdAt``, usage heat and the days since its ``lastAccessedAt``, the correction flag)
  are read by the scalar parsing helpers of :mod:`evictlab.policies.signals`;
* every decay factor comes from the scalar :func:`~evictlab.policies.signals.decay`
  (Python's float power), once per distinct (elapsed days, half-life), never from numpy's
  vectorised power, whose last bit may differ; likewise every access-heat component comes
  from the scalar ``heat_component`` (``math.log1p``; numpy's ``log1p`` differs on 2.0);
* the score is ``w_conf * confidence + w_confirm * freshness + w_access * heat`` evaluated
  left to right in float64, and numpy's elementwise multiply and add are the same IEEE
  operations as Python's;
* a fact outranks the support when its score is higher, or equal and earlier in the pool,
  the scalar selector's only tie-break; scores are compared exactly, never rounded;
* the reservation size is the count of :class:`~evictlab.policies.base.Reservation`
  (``min(maximum, ceil(capacity * fraction))``), the same IEEE product and ceiling.

The modules behind it: :mod:`evictlab.selection.engine_cases` reads the cases (column by column),
:mod:`evictlab.selection.engine_settings` holds a batch of settings as columns
(:class:`~evictlab.selection.engine_settings.SettingColumns`, which also builds a grid without one object
per setting), and :mod:`evictlab.selection.engine_kernel` decides a chunk of settings from its scores
without building a ranking (narrow pools through :mod:`evictlab.selection.engine_dense`).
Settings are processed in chunks whose largest intermediate array holds at most
:data:`CHUNK_ELEMENTS` elements, so memory stays bounded however large the grid.

Each (setting, case, capacity) yields ``support_retained``, ``support_rank`` (1-based rank of
the support fact among all facts), ``reserved_correction_slots`` and ``support_margin``, the
support fact's score distance to the cut line:

* support retained: support score minus the score of the best-ranked evicted fact (negative
  when the support survived only through a reserved slot);
* support evicted: support score minus the score of the fact it would have had to outrank
  to stay, its displacer: the lowest-ranked kept fact that holds no reserved slot or, for a
  correction under ``hybrid-v1`` (which could take a reserved slot too), the lowest-ranked
  kept fact of all;
* NaN when that other fact does not exist (nothing evicted; no kept fact it could displace).

This is the ``margin`` of :mod:`evictlab.selection.explain` for the support fact (``None`` there).
``support_near_tie`` flags a non-zero margin of at most 1e-12 of the larger of the two scores
it compares (the support's and the other fact's above: a rounding artefact; near-equal scores
elsewhere in the ranking are not counted), ``support_expected`` is the probability the
support is kept when tied facts are ordered uniformly at random, and ``support_tied`` says that
a tie at the cut line settled it (0 < ``support_expected`` < 1); see :mod:`evictlab.policies.ties`.

:func:`reference_outcome` computes the same five outputs from one scalar decision; the tests
and the benchmark compare the two paths, and the sweep uses it for registry policies the
engine does not vectorise.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ContractError
from ..policies import PolicyParams, SelectionContext, resolve_policy, select
from ..policies.signals import LN_9, decay, is_category, resolve_now
from ..policies.ties import CutLine, tie_outcome
from .engine_cases import CONFIRMED, CREATED, read_cases, single_support, unique_keys
from .engine_kernel import decide, kept_in_rank_order
from .engine_settings import FIELDS, SettingColumns

ENGINE_POLICIES = ("confidence", "hybrid-v1")
#: The engine's policies whose decisions do not depend on the setting: one decision per case
#: and capacity serves every setting.
SETTING_FREE_POLICIES = ("confidence",)
#: The per-(setting, case, capacity) outputs, as :class:`BatchResult` fields.
OUTPUTS = (
    "support_retained", "support_rank", "reserved_correction_slots", "support_margin",
    "support_expected", "support_tied", "support_near_tie",
)  # fmt: skip

#: Budget, in elements, of the largest intermediate array of one chunk (settings x cases x
#: facts; with details, x capacities too); a batch of settings is processed in chunks that
#: fit it. Half a million keeps a chunk's arrays near the caches and is faster than larger.
CHUNK_ELEMENTS = 1 << 19

# The integer outputs, int64 in a result (the kernel computes them in int32).
_INT64_OUTPUTS = ("support_rank", "reserved_correction_slots")

# Decay tables kept per half-life; a slider sweeping many values must not grow them forever.
_MAX_CACHED_HALF_LIVES = 256


def check_policy(policy: str) -> str:
    if policy not in ENGINE_POLICIES:
        raise ContractError(
            f"the engine vectorises only {', '.join(ENGINE_POLICIES)}, not {policy!r};"
            " evaluate other policies with reference_outcome (the scalar path)"
        )
    return policy


def check_settings(settings: Sequence[PolicyParams]) -> SettingColumns:
    """The settings as columns; an error for an empty batch or an item that is not a PolicyParams."""
    columns = SettingColumns.of(settings)
    if not len(columns):
        raise ContractError("no settings to evaluate")
    return columns


def check_capacities(capacities: Sequence[int]) -> tuple[int, ...]:
    capacities = tuple(capacities)
    if not capacities:
        raise ContractError("no capacities to evaluate")
    for capacity in capacities:
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 0:
            raise ContractError(f"capacity must be an integer >= 0, got {capacity!r}")
    return tuple(int(capacity) for capacity in capacities)


@dataclass(frozen=True)
class Outcome:
    """The engine's outputs for one (setting, case, capacity)."""

    kept_fact_ids: tuple[str, ...]  # in the scalar selector's kept order
    support_retained: bool
    support_rank: int
    reserved_correction_slots: int
    support_margin: float  # NaN when undefined (see the module docstring)
    support_expected: float = math.nan
    support_tied: bool = False
    support_near_tie: bool = False


class PreparedCases:
    """The setting-independent signals of a list of cases, as arrays.

    ``cases`` are :class:`~evictlab.core.pools.Case` objects or anything with ``case_id``,
    ``scenario``, ``source``, ``facts``, ``usage`` and ``support_fact_ids``. Each case needs
    unique fact ids (as scored: ``str(id)``, or ``__missing_{index}``) and exactly one
    support fact. Pools of different sizes are padded to the largest; padding never ranks
    or counts.
    """

    def __init__(self, cases: Sequence[Any], now: _dt.datetime) -> None:
        cases = tuple(cases)
        if not cases:
            raise ContractError("no cases to prepare")
        if not isinstance(now, _dt.datetime):
            raise ContractError(f"now must be a datetime, got {now!r}")
        self.now = resolve_now(now)
        self.cases = cases
        self.case_ids = tuple(str(case.case_id) for case in cases)
        duplicates = sorted(case_id for case_id, count in Counter(self.case_ids).items() if count > 1)
        if duplicates:
            raise ContractError(f"duplicate case ids: {', '.join(duplicates)}")
        self.scenarios = tuple(str(case.scenario) for case in cases)
        self.sources = tuple(str(case.source) for case in cases)

        signals = read_cases(cases, self.now)
        self.fact_ids = signals.fact_ids
        self.sizes = signals.sizes
        self.width = int(self.sizes.max())
        self.valid = np.arange(self.width) < self.sizes[:, None]
        self.support_positions = signals.support_positions
        self.confidence = signals.confidence
        self.correction = signals.correction
        self.correction_counts = self.correction.sum(axis=1)
        self._fresh_kind = signals.fresh_kind
        self._fresh_index = signals.fresh_index
        self._fresh_days = signals.fresh_days
        self._heat_index = signals.heat_index
        pairs = np.array(signals.heat_pairs, dtype=np.float64).reshape(-1, 2)
        self._heats = pairs[:, 0]
        self._access_days, self._access_day_index = np.unique(pairs[:, 1], return_inverse=True)
        self._heated = self._heat_index > 0
        padding = np.nonzero(~self.valid)
        self._padding = padding if padding[0].size else None
        self._freshness_tables: dict[float, np.ndarray] = {}
        self._heat_tables: dict[float, np.ndarray] = {}

    @classmethod
    def from_pool_set(cls, pool_set: Any) -> PreparedCases:
        """The cases of a :class:`~evictlab.core.pools.PoolSet` at its protocol's evaluation clock."""
        return cls(pool_set.cases, pool_set.protocol.evaluation_time)

    def __len__(self) -> int:
        return len(self.cases)

    # ------------------------------------------------------------------ components

    def freshness(self, half_life_days: float) -> np.ndarray:
        """Confirmation freshness of every fact, shape (cases, width)."""
        table = self._freshness_tables.get(half_life_days)
        if table is None:
            factors = np.array([decay(days, half_life_days) for days in self._fresh_days])
            by_fact = factors[self._fresh_index]
            # Unconfirmed facts get half the decay since createdAt: 0.5 * factor, as scalar.
            table = np.where(
                self._fresh_kind == CONFIRMED,
                by_fact,
                np.where(self._fresh_kind == CREATED, 0.5 * by_fact, 0.0),
            )
            _remember(self._freshness_tables, half_life_days, table)
        return table

    def access(self, half_life_days: float) -> np.ndarray:
        """Access-heat component of every fact, shape (cases, width)."""
        table = self._heat_tables.get(half_life_days)
        if table is None:
            # heat_component per distinct (heat, days) pair, its steps spelled out: the decay
            # per distinct day count (Python's power), then the same IEEE product, math.log1p
            # (numpy's differs in the last bit) and the same division and min.
            factors = np.array([decay(days, half_life_days) for days in self._access_days])
            decayed = self._heats * factors[self._access_day_index]
            logs = np.array([math.log1p(value) for value in decayed.tolist()])
            values = np.minimum(1.0, logs / LN_9)
            table = np.where(self._heated, values[self._heat_index], 0.0)
            _remember(self._heat_tables, half_life_days, table)
        return table

    def scores(self, policy: str, settings: Sequence[PolicyParams]) -> np.ndarray:
        """Scores of every fact under every setting, shape (settings, cases, width).

        Padding scores ``-inf``. The confidence policy ignores the settings.
        """
        check_policy(policy)
        settings = check_settings(settings)
        if policy == "confidence":
            return np.broadcast_to(self._confidence_scores(), (len(settings), *self.valid.shape))
        order = _by_half_lives(settings)
        values = np.empty((len(settings), *self.valid.shape))
        values[order] = self._hybrid_scores(settings.take(order))
        return values

    def _confidence_scores(self) -> np.ndarray:
        return np.where(self.valid, self.confidence, -np.inf)

    def _hybrid_scores(self, settings: SettingColumns) -> np.ndarray:
        """Scores (S, C, width) for settings whose equal half-life pairs are adjacent."""
        values = np.empty((len(settings), *self.valid.shape))
        term = np.empty_like(values)
        confirm = settings.column("confirmation_half_life_days")
        access = settings.column("access_half_life_days")
        w_conf, w_confirm, w_access = (settings.column(name)[:, None, None] for name in FIELDS[:3])
        starts = np.flatnonzero((np.diff(confirm) != 0) | (np.diff(access) != 0)) + 1
        for start, stop in zip([0, *starts], [*starts, len(settings)]):
            run, part = slice(start, stop), term[start:stop]
            # Left to right, as the scalar expression: ((w1*c) + (w2*f)) + (w3*a).
            np.multiply(w_conf[run], self.confidence, out=values[run])
            values[run] += np.multiply(w_confirm[run], self.freshness(float(confirm[start])), out=part)
            values[run] += np.multiply(w_access[run], self.access(float(access[start])), out=part)
        if self._padding is not None:
            values[:, self._padding[0], self._padding[1]] = -np.inf
        return values

    # ------------------------------------------------------------------ selection

    def chunk_size(self, n_capacities: int, *, details: bool = False) -> int:
        """Settings per chunk so that one chunk's largest array stays within CHUNK_ELEMENTS.

        Without details that is a score array (cases x width per setting); with them, the
        kept masks (cases x capacities x width).
        """
        per_setting = len(self) * self.width * (max(1, n_capacities) if details else 1)
        return max(1, CHUNK_ELEMENTS // per_setting)

    def select(
        self,
        policy: str,
        settings: Sequence[PolicyParams],
        capacities: Sequence[int],
        *,
        details: bool = False,
    ) -> BatchResult:
        """Decide every (setting, case, capacity).

        ``settings``: any sequence of :class:`PolicyParams`, or a
        :class:`~evictlab.selection.engine_settings.SettingColumns` (the fastest: no object per setting).
        With ``details`` the result also holds the kept masks, rankings and scores (memory
        grows with settings x cases x capacities x facts); without, only the outputs.
        """
        check_policy(policy)
        settings = check_settings(settings)
        capacities = check_capacities(capacities)
        if policy in SETTING_FREE_POLICIES:
            part = self._select_chunk(self._confidence_scores()[None], capacities, None, details)
            arrays = {
                name: np.repeat(array.astype(_result_type(name, array)), len(settings), axis=0)
                for name, array in part.items()
            }
            return BatchResult(self, policy, settings, capacities, **arrays)
        # Settings sharing a half-life pair are scored together; outputs return to input order.
        order = _by_half_lives(settings)
        ordered = settings.take(order)
        slots = ordered.reserved_slots(capacities)
        step = self.chunk_size(len(capacities), details=details)
        parts = [
            self._select_chunk(
                self._hybrid_scores(ordered[start:start + step]), capacities, slots[start:start + step], details
            )
            for start in range(0, len(settings), step)
        ]
        arrays = {}
        for name in parts[0]:
            chunks = [part[name] for part in parts]
            arrays[name] = np.empty((len(settings), *chunks[0].shape[1:]), dtype=_result_type(name, chunks[0]))
            if len(chunks) == 1 and name in OUTPUTS:
                # An (S, C, K) view of a (K, S, C) array: reordered capacity by capacity,
                # far faster than through the view's rows of K elements.
                np.moveaxis(arrays[name], -1, 0)[:, order] = np.moveaxis(chunks[0], -1, 0)
            else:
                arrays[name][order] = np.concatenate(chunks)
        return BatchResult(self, policy, settings, capacities, **arrays)

    def _select_chunk(
        self,
        values: np.ndarray,
        capacities: tuple[int, ...],
        slots: np.ndarray | None,
        details: bool,
    ) -> dict[str, np.ndarray]:
        """Selection for one chunk of scores (S, C, P); ``slots`` (S, K), or ``None``: no reservation."""
        out = decide(
            values,
            correction=self.correction,
            sizes=self.sizes,
            support_positions=self.support_positions,
            capacities=capacities,
            slots=slots,
            scratch=not details,  # without details the scores are not kept: the kernel may sort them
        )
        if details:
            ranking, kept = kept_in_rank_order(
                values,
                valid=self.valid,
                correction=self.correction,
                capacities=capacities,
                reserved=out["reserved_correction_slots"],
            )
            out.update(kept=kept, ranking=ranking, scores=values)
        return out


def _result_type(name: str, array: np.ndarray) -> np.dtype:
    """The type of an output in a result: the kernel's int32 counts as int64."""
    return np.dtype(np.int64) if name in _INT64_OUTPUTS else array.dtype


def _by_half_lives(settings: SettingColumns) -> np.ndarray:
    """A stable order of the settings that makes equal (confirmation, access) half-life pairs adjacent."""
    confirm = settings.column("confirmation_half_life_days")
    access = settings.column("access_half_life_days")
    return np.lexsort((np.arange(len(settings)), access, confirm))


def _remember(cache: dict[float, np.ndarray], key: float, table: np.ndarray) -> None:
    if len(cache) >= _MAX_CACHED_HALF_LIVES:
        cache.clear()
    table.flags.writeable = False
    cache[key] = table


@dataclass(frozen=True)
class BatchResult:
    """Decisions for settings x cases x capacities; axis order (setting, case, capacity).

    ``kept`` (mask in input position order, shape (S, C, K, width)), ``ranking`` (input
    positions in rank order, padding last, shape (S, C, width)) and ``scores`` (shape
    (S, C, width), padding ``-inf``) are present only when selected with ``details``.
    """

    cases: PreparedCases = field(repr=False)
    policy: str
    settings: SettingColumns
    capacities: tuple[int, ...]
    support_retained: np.ndarray
    support_rank: np.ndarray
    reserved_correction_slots: np.ndarray
    support_margin: np.ndarray
    support_expected: np.ndarray
    support_tied: np.ndarray
    support_near_tie: np.ndarray
    kept: np.ndarray | None = field(default=None, repr=False)
    ranking: np.ndarray | None = field(default=None, repr=False)
    scores: np.ndarray | None = field(default=None, repr=False)

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.support_retained.shape

    def kept_fact_ids(self, setting: int, case: int, capacity: int) -> tuple[str, ...]:
        """Kept ids in the scalar selector's order: input order at or under the cap, else rank order."""
        if self.kept is None or self.ranking is None:
            raise ContractError("kept fact ids need a result selected with details=True")
        ids = self.cases.fact_ids[case]
        mask = self.kept[setting, case, capacity]
        order = range(len(ids)) if len(ids) <= self.capacities[capacity] else self.ranking[setting, case]
        return tuple(ids[p] for p in order if p < len(ids) and mask[p])

    def outputs(self) -> dict[str, np.ndarray]:
        """The output arrays by name (see :data:`OUTPUTS`)."""
        return {name: getattr(self, name) for name in OUTPUTS}

    def outcome(self, setting: int, case: int, capacity: int) -> Outcome:
        """One decision, comparable with :func:`reference_outcome` (needs ``details``)."""
        index = (setting, case, capacity)
        return Outcome(
            self.kept_fact_ids(*index),
            bool(self.support_retained[index]),
            int(self.support_rank[index]),
            int(self.reserved_correction_slots[index]),
            float(self.support_margin[index]),
            float(self.support_expected[index]),
            bool(self.support_tied[index]),
            bool(self.support_near_tie[index]),
        )


def reference_outcome(
    case: Any, policy: str, params: PolicyParams, capacity: int, now: _dt.datetime, *, seed: int = 0
) -> Outcome:
    """The engine's outputs computed from one scalar decision.

    Every policy goes through :func:`evictlab.policies.select`, which must report a ranking
    (for ``confidence`` and ``hybrid-v1`` its decisions are those of
    :func:`~evictlab.selection.deermem.select_facts_for_capacity` wherever DeerMem does not raise). Reserved facts
    are the top-ranked facts of the policy's reservation category, as spec 1.4 selects them;
    the margin follows :mod:`evictlab.selection.explain`. ``seed`` reaches seeded policies only.
    """
    facts = list(case.facts)
    keys = unique_keys(case, facts)
    support = single_support(case, keys)
    usage = case.usage if isinstance(case.usage, Mapping) else {}
    selector = resolve_policy(policy)
    if selector.unlimited:
        capacity = max(capacity, len(facts))  # a bound meaning "no capacity" (keep-all)
    decision = select(
        policy, facts, capacity, usage=usage, now=now, params=params,
        support_fact_ids=case.support_fact_ids, seed=seed,
    )
    if not decision.ranking:
        raise ContractError(
            f"policy {policy!r} reports no ranking, so support rank and margin are undefined for it"
        )
    context = SelectionContext(resolve_now(now), usage, params, frozenset(case.support_fact_ids))
    reservation = selector.reservation(context)
    ranking = list(decision.ranking)
    # Kept = not evicted (keys are unique); listed in input order at or under the cap, else
    # in rank order, as spec 1.4 lists them.
    evicted = {item.fact_id for item in decision.evicted}
    kept = [p for p in (range(len(facts)) if len(facts) <= capacity else ranking) if keys[p] not in evicted]
    kept_set = set(kept)
    reserved_positions = set()
    if reservation is not None and decision.reserved_correction_slots:
        in_category = [p for p in ranking if is_category(facts[p], reservation.category)]
        reserved_positions = set(in_category[: decision.reserved_correction_slots])

    def value(position: int) -> float:
        return decision.scores[keys[position]].value

    retained = support in kept_set
    if retained:
        below_cut = [p for p in ranking if p not in kept_set]
        margin = value(support) - value(below_cut[0]) if below_cut else math.nan
    else:
        takes_reserved = reservation is not None and is_category(facts[support], reservation.category)
        could_displace = [
            p for p in ranking if p in kept_set and (takes_reserved or p not in reserved_positions)
        ]
        margin = value(support) - value(could_displace[-1]) if could_displace else math.nan
    ties = tie_outcome(facts, decision, capacity, reservation, support, uniform=selector.uniform_order)
    return Outcome(
        tuple(keys[p] for p in kept),
        retained,
        ranking.index(support) + 1,
        decision.reserved_correction_slots,
        margin,
        ties.expected,
        ties.tied,
        CutLine(facts, decision, reservation).near_tie(support),
    )
