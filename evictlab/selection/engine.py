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
* the ranking is a stable sort on the negated score, so equal scores keep input order, the
  scalar selector's only tie-break;
* the reservation size is computed by the scalar :class:`~evictlab.policies.Reservation`.

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
``support_near_tie`` flags a non-zero margin below 1e-12 of the scores it separates (a rounding
artefact), ``support_expected`` is the probability the support is kept when tied facts are
ordered uniformly at random, and ``support_tied`` says that a tie at the cut line settled it
(0 < ``support_expected`` < 1); see :mod:`evictlab.policies.ties`.

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
from ..policies.base import Reservation
from ..policies.hybrid import CORRECTION
from ..policies.signals import (
    decay,
    elapsed_days,
    fact_fields,
    fact_key,
    heat_component,
    is_category,
    parse_timestamp,
    read_confidence,
    resolve_now,
    usable_heat,
)
from ..policies.ties import NEAR_TIE_RELATIVE, CutLine, keep_probability, tie_outcome

ENGINE_POLICIES = ("confidence", "hybrid-v1")
#: The per-(setting, case, capacity) outputs, as :class:`BatchResult` fields.
OUTPUTS = (
    "support_retained", "support_rank", "reserved_correction_slots", "support_margin",
    "support_expected", "support_tied", "support_near_tie",
)  # fmt: skip

#: Budget, in elements, of the largest intermediate array (settings x cases x capacities x
#: facts) of one chunk; a batch of settings is processed in chunks that fit it.
CHUNK_ELEMENTS = 1 << 21

# How a fact's confirmation freshness is computed (spec 1.3).
_NO_TIMESTAMP, _CONFIRMED, _CREATED = 0, 1, 2

# Decay tables kept per half-life; a slider sweeping many values must not grow them forever.
_MAX_CACHED_HALF_LIVES = 256


def _single_support(case: Any, keys: list[str]) -> int:
    """Position of the case's one support fact, by the key the selector scores it under."""
    support = tuple(case.support_fact_ids)
    if len(support) != 1:
        raise ContractError(
            f"case {case.case_id!r}: expected exactly one support fact id, got {list(support)}"
        )
    try:
        return keys.index(str(support[0]))
    except ValueError:
        raise ContractError(
            f"case {case.case_id!r}: support fact {support[0]!r} is not among its facts"
        ) from None


def _unique_keys(case: Any, facts: Sequence[Any]) -> list[str]:
    keys = [fact_key(fact, index) for index, fact in enumerate(facts)]
    seen: dict[str, int] = {}
    for index, key in enumerate(keys):
        if key in seen:
            raise ContractError(
                f"case {case.case_id!r}: duplicate fact id {key!r} at positions {seen[key]} and {index}"
            )
        seen[key] = index
    return keys


def check_policy(policy: str) -> str:
    if policy not in ENGINE_POLICIES:
        raise ContractError(
            f"the engine vectorises only {', '.join(ENGINE_POLICIES)}, not {policy!r};"
            " evaluate other policies with reference_outcome (the scalar path)"
        )
    return policy


def check_settings(settings: Sequence[PolicyParams]) -> tuple[PolicyParams, ...]:
    settings = tuple(settings)
    if not settings:
        raise ContractError("no settings to evaluate")
    for index, setting in enumerate(settings):
        if not isinstance(setting, PolicyParams):
            raise ContractError(
                f"setting {index} must be a PolicyParams, got {type(setting).__name__}"
            )
    return settings


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

        fact_lists = [list(case.facts) for case in cases]
        self.sizes = np.array([len(facts) for facts in fact_lists], dtype=np.int64)
        self.width = int(self.sizes.max())
        shape = (len(cases), self.width)
        self.valid = np.arange(self.width) < self.sizes[:, None]
        self.confidence = np.zeros(shape)
        self.correction = np.zeros(shape, dtype=bool)
        self._fresh_kind = np.zeros(shape, dtype=np.int8)
        self._fresh_index = np.zeros(shape, dtype=np.intp)
        self._heat_index = np.zeros(shape, dtype=np.intp)
        # Index 0 of both tables is a placeholder for facts (and padding) without the signal.
        self._fresh_days: list[float] = [0.0]
        self._heat_pairs: list[tuple[float, float]] = [(0.0, 0.0)]
        fresh_slots: dict[float, int] = {}
        heat_slots: dict[tuple[float, float], int] = {}

        fact_ids = []
        support_positions = []
        for c, (case, facts) in enumerate(zip(cases, fact_lists)):
            keys = _unique_keys(case, facts)
            fact_ids.append(tuple(keys))
            support_positions.append(_single_support(case, keys))
            usage = case.usage if isinstance(case.usage, Mapping) else {}
            for p, (fact, key) in enumerate(zip(facts, keys)):
                fields = fact_fields(fact)
                self.confidence[c, p] = read_confidence(fields.get("confidence"))
                self.correction[c, p] = is_category(fact, CORRECTION)
                # A malformed lastConfirmedAt falls through to createdAt (spec 1.3).
                confirmed = parse_timestamp(fields.get("lastConfirmedAt"))
                created = None if confirmed is not None else parse_timestamp(fields.get("createdAt"))
                stamp = confirmed if confirmed is not None else created
                if stamp is not None:
                    self._fresh_kind[c, p] = _CONFIRMED if confirmed is not None else _CREATED
                    days = elapsed_days(self.now, stamp)
                    self._fresh_index[c, p] = _slot(fresh_slots, self._fresh_days, days)
                pair = usable_heat(usage.get(key), self.now)
                if pair is not None:
                    self._heat_index[c, p] = _slot(heat_slots, self._heat_pairs, pair)
        self.fact_ids = tuple(fact_ids)
        self.support_positions = np.array(support_positions, dtype=np.intp)
        self.correction_counts = self.correction.sum(axis=1)
        self._heated = self._heat_index > 0
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
                self._fresh_kind == _CONFIRMED,
                by_fact,
                np.where(self._fresh_kind == _CREATED, 0.5 * by_fact, 0.0),
            )
            _remember(self._freshness_tables, half_life_days, table)
        return table

    def access(self, half_life_days: float) -> np.ndarray:
        """Access-heat component of every fact, shape (cases, width)."""
        table = self._heat_tables.get(half_life_days)
        if table is None:
            values = np.array(
                [heat_component(heat, days, half_life_days) for heat, days in self._heat_pairs]
            )
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
            values = np.broadcast_to(self.confidence, (len(settings), *self.confidence.shape))
        else:
            w_conf, w_confirm, w_access = (
                np.array([setting.weights[i] for setting in settings], dtype=np.float64)[:, None, None]
                for i in range(3)
            )
            freshness = _stacked(self.freshness, [s.confirmation_half_life_days for s in settings])
            heat = _stacked(self.access, [s.access_half_life_days for s in settings])
            # Left to right, as the scalar expression: ((w1*c) + (w2*f)) + (w3*a).
            values = w_conf * self.confidence + w_confirm * freshness + w_access * heat
        return np.where(self.valid, values, -np.inf)

    # ------------------------------------------------------------------ selection

    def chunk_size(self, n_capacities: int) -> int:
        """Settings per chunk so that one chunk's largest array stays within CHUNK_ELEMENTS."""
        per_setting = len(self) * max(1, n_capacities) * self.width
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

        With ``details`` the result also holds the kept masks, rankings and scores (memory
        grows with settings x cases x capacities x facts); without, only the four outputs.
        """
        check_policy(policy)
        settings = check_settings(settings)
        capacities = check_capacities(capacities)
        if policy == "confidence":
            # One decision per case and capacity serves every setting.
            part = self._select_chunk(self.scores(policy, settings[:1]), capacities, None, details)
            parts = [{name: np.repeat(array, len(settings), axis=0) for name, array in part.items()}]
        else:
            step = self.chunk_size(len(capacities))
            parts = [
                self._select_chunk(
                    self.scores(policy, settings[start:start + step]),
                    capacities,
                    settings[start:start + step],
                    details,
                )
                for start in range(0, len(settings), step)
            ]
        arrays = {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
        return BatchResult(self, policy, settings, capacities, **arrays)

    def _select_chunk(
        self,
        values: np.ndarray,
        capacities: tuple[int, ...],
        reservation_settings: Sequence[PolicyParams] | None,
        details: bool,
    ) -> dict[str, np.ndarray]:
        """Selection for one chunk of scores (S, C, P); reservation only when settings are given."""
        n_settings, n_cases, width = values.shape
        full = (n_settings, n_cases, len(capacities), width)
        caps = np.array(capacities, dtype=np.int64)
        cases = np.arange(n_cases)
        # Score descending, then input position: a stable sort of the negated scores.
        order = np.argsort(-values, axis=-1, kind="stable")
        ranked_values = np.take_along_axis(values, order, axis=-1)
        # Padding scores -inf, so the first `size` ranks of a case are its real facts.
        valid_ranked = np.broadcast_to(self.valid[None, :, None, :], full)
        over = (self.sizes[:, None] > caps)[None]  # (1, C, K): only then does anything go

        if reservation_settings is None:
            reserved = np.zeros((n_settings, n_cases, len(capacities)), dtype=np.int64)
            reserved_ranked = np.zeros(full, dtype=bool)
        else:
            reserved, reserved_ranked = self._reservation(reservation_settings, capacities, order, over)

        # Then the ranking fills the remaining capacity - reserved slots, skipping reserved facts.
        open_ranked = valid_ranked & ~reserved_ranked
        filled = open_ranked & (
            np.cumsum(open_ranked, axis=-1, dtype=np.int32) <= (caps - reserved)[..., None]
        )
        # At or under the cap every fact is kept and nothing is reserved.
        kept_ranked = np.where(over[..., None], reserved_ranked | filled, valid_ranked)

        # 0-based rank of the support: where its position appears in the ranking.
        support_rank = (order == self.support_positions[None, :, None]).argmax(axis=-1)  # (S, C)
        support_value = values[:, cases, self.support_positions][..., None]  # (S, C, 1)
        at_support = np.broadcast_to(support_rank[:, :, None, None], (*full[:3], 1))
        retained = np.take_along_axis(kept_ranked, at_support, axis=-1)[..., 0]

        # The displacer of an evicted support: the lowest-ranked fact kept on rank alone, or,
        # for a correction when slots are reserved, the lowest-ranked kept fact of all.
        if reservation_settings is None:
            could_displace = filled
        else:
            support_is_correction = self.correction[cases, self.support_positions][None, :, None, None]
            could_displace = np.where(support_is_correction, kept_ranked, filled)
        evicted_ranked = valid_ranked & ~kept_ranked
        ranked_values_k = np.broadcast_to(ranked_values[:, :, None, :], full)
        first_evicted = evicted_ranked.argmax(axis=-1)[..., None]
        displacer = (width - 1 - could_displace[..., ::-1].argmax(axis=-1))[..., None]
        best_evicted_value = np.take_along_axis(ranked_values_k, first_evicted, axis=-1)[..., 0]
        displacer_value = np.take_along_axis(ranked_values_k, displacer, axis=-1)[..., 0]
        margin = np.where(
            retained,
            np.where(evicted_ranked.any(axis=-1), support_value - best_evicted_value, np.nan),
            np.where(could_displace.any(axis=-1), support_value - displacer_value, np.nan),
        )

        other_value = np.where(retained, best_evicted_value, displacer_value)
        near = (
            np.isfinite(margin)
            & (margin != 0)
            & (np.abs(margin) <= NEAR_TIE_RELATIVE * np.maximum(np.abs(support_value), np.abs(other_value)))
        )
        expected = self._expected(values, support_value, reserved, capacities, over, retained)

        out = {
            "support_retained": retained,
            "support_rank": np.broadcast_to(support_rank[..., None] + 1, full[:3]).astype(np.int64),
            "reserved_correction_slots": reserved.astype(np.int64),
            "support_margin": margin,
            "support_expected": expected,
            "support_tied": (expected > 0) & (expected < 1),
            "support_near_tie": near,
        }
        if details:
            kept = np.empty(full, dtype=bool)
            np.put_along_axis(kept, np.broadcast_to(order[:, :, None, :], full), kept_ranked, axis=-1)
            out.update(kept=kept, ranking=order, scores=values)
        return out

    def _expected(
        self,
        values: np.ndarray,
        support_value: np.ndarray,
        reserved: np.ndarray,
        capacities: tuple[int, ...],
        over: np.ndarray,
        retained: np.ndarray,
    ) -> np.ndarray:
        """P(support kept) over random orders of the facts tied with it, shape (S, C, K).

        The counts of :func:`~evictlab.policies.ties.keep_probability`, vectorised; the
        closed form's sum is evaluated only where a tie group straddles the cut line and
        holds reserved corrections (without them, the group keeps ``filled / size``).
        """
        tied = (values == support_value) & self.valid
        better = (values > support_value) & self.valid
        size = tied.sum(axis=-1)[..., None]
        tied_reserved = (tied & self.correction).sum(axis=-1)[..., None]
        better_reserved = (better & self.correction).sum(axis=-1)[..., None]
        better_other = better.sum(axis=-1)[..., None] - better_reserved
        caps = np.array(capacities, dtype=np.int64)
        taken = np.minimum(tied_reserved, np.maximum(0, reserved - better_reserved))
        open_above = better_other + np.maximum(0, better_reserved - reserved)
        filled = np.clip(caps - reserved - open_above, 0, size - taken)
        straddles = over & (taken + filled > 0) & (taken + filled < size)
        expected = np.where(straddles, filled / size, retained.astype(np.float64))
        support_reserved = self.correction[np.arange(len(self)), self.support_positions]
        for s, c, k in zip(*np.nonzero(straddles & (taken > 0))):
            expected[s, c, k] = float(
                keep_probability(
                    capacity=capacities[k],
                    reserved_slots=int(reserved[s, c, k]),
                    better_reserved=int(better_reserved[s, c, 0]),
                    better_other=int(better_other[s, c, 0]),
                    tied_reserved=int(tied_reserved[s, c, 0]),
                    tied_other=int(size[s, c, 0] - tied_reserved[s, c, 0]),
                    reserved_member=bool(support_reserved[c]),
                )
            )
        return expected

    def _reservation(
        self,
        settings: Sequence[PolicyParams],
        capacities: tuple[int, ...],
        order: np.ndarray,
        over: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Reserved correction slots (S, C, K) and the reserved facts as a rank-order mask (S, C, K, P)."""
        slots_of: dict[tuple[float, int], list[int]] = {}
        for s in settings:
            key = (s.correction_reserved_fraction, s.correction_reserved_max)
            if key not in slots_of:
                reservation = Reservation(CORRECTION, *key)
                slots_of[key] = [reservation.slots(capacity) for capacity in capacities]
        slots = np.array(
            [slots_of[s.correction_reserved_fraction, s.correction_reserved_max] for s in settings],
            dtype=np.int64,
        )[:, None, :]
        # min(slots, corrections, capacity), so capacity 0 reserves nothing, as in spec 1.4.
        caps = np.array(capacities, dtype=np.int64)
        reserved = np.minimum(np.minimum(slots, self.correction_counts[None, :, None]), caps)
        reserved = np.where(over, reserved, 0)
        # The top-ranked `reserved` corrections are selected first.
        correction_ranked = np.take_along_axis(np.broadcast_to(self.correction, order.shape), order, axis=-1)
        corrections_so_far = np.cumsum(correction_ranked, axis=-1, dtype=np.int32)
        reserved_ranked = correction_ranked[:, :, None, :] & (
            corrections_so_far[:, :, None, :] <= reserved[..., None]
        )
        return reserved, reserved_ranked


def _slot(slots: dict[Any, int], values: list[Any], value: Any) -> int:
    """Index of ``value`` in ``values``, appending it the first time it is seen."""
    if value not in slots:
        slots[value] = len(values)
        values.append(value)
    return slots[value]


def _stacked(table_for: Any, half_lives: list[float]) -> np.ndarray:
    """``table_for(h)`` for each half-life, stacked along a new first axis."""
    distinct: dict[float, int] = {}
    index = [distinct.setdefault(h, len(distinct)) for h in half_lives]
    return np.stack([table_for(h) for h in distinct])[index]


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
    settings: tuple[PolicyParams, ...]
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
    keys = _unique_keys(case, facts)
    support = _single_support(case, keys)
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
