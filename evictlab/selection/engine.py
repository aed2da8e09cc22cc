"""Pools as prepared batches: every policy over settings x cases x capacities, through the one selector.

A *setting* is one :class:`~evictlab.policies.PolicyParams`: the three weights, the two
half-lives and the correction reservation. :class:`PreparedCases` reads every fact's signals
once (:class:`~evictlab.policies.arrays.Signals`); :meth:`PreparedCases.select` then decides a
whole batch of settings x cases x capacities for any policy spec: the policy's rank keys
(:meth:`~evictlab.policies.base.Policy.rank_keys`) and :mod:`evictlab.selection.selector`,
with the same kept sets, support ranks, reserved counts, margins and ties as the scalar
selector (:func:`evictlab.policies.select`), bit for bit. A policy whose order no keys express
(``mmr``) is decided by the scalar selector, decision by decision (:func:`reference_outcome`).
A policy that ignores the setting (``Policy.reads_params`` False) is decided once and repeated.
Settings are processed in chunks whose largest array holds at most :data:`CHUNK_ELEMENTS`
elements, so memory stays bounded however large the grid.

Each (setting, case, capacity) yields the outputs of :data:`OUTPUTS`: ``support_retained``,
``support_rank`` (1-based rank of the support fact among all facts),
``reserved_correction_slots``, ``support_margin`` (the support's score distance to the cut
line: minus the best evicted fact's score when it was kept, minus its displacer's when it
was evicted: the lowest-ranked kept fact holding no reserved slot or, for a fact of the
reserved category, the lowest-ranked kept fact of all; NaN when that fact does not exist),
``support_expected`` (P(kept) over uniformly random orders of the facts tied with it),
``support_tied`` (an exact tie at the cut line settled it) and ``support_near_tie`` (a
non-zero margin of at most 1e-12 of the larger score: a rounding artefact); see
:mod:`evictlab.policies.ties`.
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
from ..policies import (
    Decision,
    EvictedFact,
    Policy,
    PolicyParams,
    SelectionContext,
    check_capacity_range,
    resolve_policy,
)
from ..policies.arrays import Params, Signals
from ..policies.signals import fact_key, reported_category, resolve_now
from ..policies.ties import CutLine, tie_outcome
from .engine_settings import FIELDS, SettingColumns
from .selector import kept_masks, ranked_keys, reservation_of, support_outputs

#: The per-(setting, case, capacity) outputs, as :class:`BatchResult` fields.
OUTPUTS = (
    "support_retained", "support_rank", "reserved_correction_slots", "support_margin",
    "support_expected", "support_tied", "support_near_tie",
)  # fmt: skip
_DTYPES = {"support_rank": np.int64, "reserved_correction_slots": np.int64}

#: Budget, in elements, of the largest array of one chunk (settings x cases x facts; with
#: details, x capacities too); a batch of settings is decided in chunks that fit it.
CHUNK_ELEMENTS = 1 << 19


def vectorised(policy: str | Policy) -> bool:
    """Whether a policy spec is decided by the selector on rank keys (all but ``mmr``)."""
    return resolve_policy(policy).vectorised


def check_settings(settings: Sequence[PolicyParams]) -> SettingColumns:
    """The settings as columns; an error for an empty batch or an item that is not a PolicyParams."""
    columns = SettingColumns.of(settings)
    if not len(columns):
        raise ContractError("no settings to evaluate")
    return columns


@dataclass(frozen=True)
class Outcome:
    """The outputs for one (setting, case, capacity)."""

    kept_fact_ids: tuple[str, ...]  # in the scalar selector's kept order
    support_retained: bool
    support_rank: int
    reserved_correction_slots: int
    support_margin: float  # NaN when undefined (see the module docstring)
    support_expected: float = math.nan
    support_tied: bool = False
    support_near_tie: bool = False
    ranking: tuple[int, ...] = field(default=(), compare=False, repr=False)  # input positions, best first


class PreparedCases:
    """The signals of a list of cases, read once, and their decisions in batches.

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
        self.signals = Signals.of_cases(cases, self.now)
        self.sizes = self.signals.sizes
        self.width = self.signals.shape[1]
        self.valid = self.signals.valid
        self.fact_ids = tuple(
            tuple(ids[: int(size)].tolist()) for ids, size in zip(self.signals.fact_ids, self.sizes)
        )
        self.support_positions = np.array(
            [_support_position(case, keys) for case, keys in zip(cases, self.fact_ids)], dtype=np.intp
        )

    @classmethod
    def from_pool_set(cls, pool_set: Any) -> PreparedCases:
        """The cases of a :class:`~evictlab.core.pools.PoolSet` at its protocol's evaluation clock."""
        return cls(pool_set.cases, pool_set.protocol.evaluation_time)

    def __len__(self) -> int:
        return len(self.cases)

    def chunk_size(self, n_capacities: int, *, details: bool = False) -> int:
        """Settings per chunk so that one chunk's largest array stays within CHUNK_ELEMENTS."""
        per_setting = len(self) * self.width * (max(1, n_capacities) if details else 1)
        return max(1, CHUNK_ELEMENTS // max(1, per_setting))

    def scores(self, policy: str | Policy, settings: Sequence[PolicyParams], *, seed: int = 0) -> np.ndarray:
        """Scores of every fact under every setting, shape (settings, cases, width); padding ``-inf``."""
        selector = resolve_policy(policy)
        columns = check_settings(settings)
        keys = ranked_keys(selector, self.signals, self._params(selector, columns, seed))
        return np.broadcast_to(np.where(self.valid, keys.value, -np.inf), (len(columns), *self.valid.shape))

    def _params(self, selector: Policy, settings: SettingColumns, seed: int) -> Params:
        if not selector.reads_params:
            return Params.of(settings[0], seed)
        return Params.columns({name: settings.column(name) for name in FIELDS}, seed)

    def select(
        self,
        policy: str | Policy,
        settings: Sequence[PolicyParams],
        capacities: Sequence[int],
        *,
        details: bool = False,
        seed: int = 0,
    ) -> BatchResult:
        """Decide every (setting, case, capacity) of ``policy`` (a spec or a :class:`Policy`).

        ``settings``: any sequence of :class:`PolicyParams`, or a
        :class:`~evictlab.selection.engine_settings.SettingColumns` (the fastest: no object per
        setting). ``seed`` reaches seeded policies. With ``details`` the result also holds the
        kept masks, rankings and scores (memory grows with settings x cases x capacities x
        facts); without, only the outputs.
        """
        selector = resolve_policy(policy)
        columns = check_settings(settings)
        capacities = check_capacity_range(capacities)
        caps = np.broadcast_to(np.asarray(capacities, dtype=np.int64), (len(self), len(capacities)))
        if selector.unlimited:
            caps = np.maximum(caps, self.sizes[:, None])  # a bound meaning "no capacity" (keep-all)
        if not selector.vectorised:
            arrays = self._scalar(selector, columns, capacities, details, seed)
        elif not selector.reads_params:
            part = self._decide(selector, columns[:1], caps, details, seed)
            arrays = {name: np.repeat(array, len(columns), axis=0) for name, array in part.items()}
        else:
            step = len(columns) if details else self.chunk_size(len(capacities))
            parts = [
                self._decide(selector, columns[start : start + step], caps, details, seed)
                for start in range(0, len(columns), step)
            ]
            arrays = {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
        return BatchResult(self, selector.name, columns, capacities, **arrays, selector=selector, seed=seed)

    def _decide(
        self, selector: Policy, settings: SettingColumns, caps: np.ndarray, details: bool, seed: int
    ) -> dict[str, np.ndarray]:
        params = self._params(selector, settings, seed)
        keys = ranked_keys(selector, self.signals, params)
        reservation = reservation_of(selector, params)
        outputs = support_outputs(
            keys, self.signals, self.support_positions, reservation, caps, uniform=selector.uniform_order
        )
        shape = (len(settings), *caps.shape)
        arrays = {
            name: np.array(np.broadcast_to(array, shape), dtype=_DTYPES.get(name, array.dtype))
            for name, array in outputs.items()
        }
        if details:
            ranking, kept, _ = kept_masks(keys, self.signals, reservation, caps)
            full = (len(settings), *self.valid.shape)
            arrays["ranking"] = np.array(np.broadcast_to(ranking, full))
            arrays["kept"] = np.array(np.broadcast_to(kept, (*shape, self.width)))
            arrays["scores"] = np.array(np.broadcast_to(np.where(self.valid, keys.value, -np.inf), full))
        return arrays

    def _scalar(
        self, selector: Policy, settings: SettingColumns, capacities: tuple[int, ...], details: bool, seed: int
    ) -> dict[str, np.ndarray]:
        """Every decision through the scalar selector (a policy without rank keys)."""
        outcomes = [
            [
                [reference_outcome(case, selector, setting, capacity, self.now, seed=seed) for capacity in capacities]
                for case in self.cases
            ]
            for setting in settings
        ]
        arrays = {
            name: np.array([[[getattr(o, name) for o in row] for row in block] for block in outcomes])
            for name in OUTPUTS
        }
        arrays = {name: array.astype(_DTYPES.get(name, array.dtype)) for name, array in arrays.items()}
        if details:
            shape = (len(settings), len(self), self.width)
            arrays["ranking"] = np.tile(np.arange(self.width), (*shape[:2], 1))
            arrays["kept"] = np.zeros((*shape[:2], len(capacities), self.width), dtype=bool)
            arrays["scores"] = np.full(shape, np.nan)
            for s, block in enumerate(outcomes):
                for c, row in enumerate(block):
                    arrays["ranking"][s, c, : self.sizes[c]] = row[0].ranking
                    positions = {key: p for p, key in enumerate(self.fact_ids[c])}
                    for k, outcome in enumerate(row):
                        arrays["kept"][s, c, k, [positions[key] for key in outcome.kept_fact_ids]] = True
        return arrays


def _support_position(case: Any, keys: Sequence[str]) -> int:
    """Position of the case's one support fact (ids unique), by the key the selector scores it under."""
    if len(set(keys)) != len(keys):
        seen: dict[str, int] = {}
        for index, key in enumerate(keys):
            if key in seen:
                raise ContractError(
                    f"case {case.case_id!r}: duplicate fact id {key!r} at positions {seen[key]} and {index}"
                )
            seen[key] = index
    support = tuple(case.support_fact_ids)
    if len(support) != 1:
        raise ContractError(f"case {case.case_id!r}: expected exactly one support fact id, got {list(support)}")
    try:
        return list(keys).index(str(support[0]))
    except ValueError:
        raise ContractError(f"case {case.case_id!r}: support fact {support[0]!r} is not among its facts") from None


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
    selector: Policy | None = field(default=None, repr=False)
    seed: int = 0

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

    def decision(self, setting: int, case: int, capacity: int) -> Decision:
        """One decision as the scalar selector returns it (needs ``details``): the kept facts and
        the evicted records (lowest rank first) from this batch's mask and ranking, each fact's
        score and components from the policy's ``score``, the reserved count from the batch."""
        kept_ids = self.kept_fact_ids(setting, case, capacity)
        assert self.kept is not None
        facts, scores, ranking, position = self._scored(setting, case)
        ids = self.cases.fact_ids[case]
        mask = self.kept[setting, case, capacity]
        kept = tuple(position[key] for key in kept_ids)
        evicted = [
            EvictedFact(ids[p], reported_category(facts[p]), scores[ids[p]].value, dict(scores[ids[p]].components))
            for p in reversed(ranking)
            if not mask[p]
        ]
        reserved = int(self.reserved_correction_slots[setting, case, capacity])
        return Decision([facts[p] for p in kept], evicted, scores, self.policy, reserved, ranking, kept)

    def _scored(self, setting: int, case: int) -> tuple[list[Any], dict[str, Any], tuple[int, ...], dict[str, int]]:
        """The capacity-independent half of :meth:`decision` (the facts, the scalar scores, the
        ranking and the positions by id), scored once per (setting, case) however many
        capacities are asked for."""
        cache: dict[tuple[int, int], Any] = self.__dict__.setdefault("_scored_cache", {})
        if (setting, case) not in cache:
            assert self.ranking is not None and self.selector is not None
            source, ids = self.cases.cases[case], self.cases.fact_ids[case]
            facts = list(source.facts)
            usage = source.usage if isinstance(source.usage, Mapping) else {}
            context = SelectionContext(self.cases.now, usage, self.settings[setting],
                                       frozenset(source.support_fact_ids), self.seed)  # fmt: skip
            scores = dict(zip(ids, self.selector.score(facts, context)))
            ranking = tuple(self.ranking[setting, case, : len(ids)].tolist())
            cache[setting, case] = facts, scores, ranking, {key: index for index, key in enumerate(ids)}
        return cache[setting, case]

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
    case: Any, policy: str | Policy, params: PolicyParams, capacity: int, now: _dt.datetime, *, seed: int = 0
) -> Outcome:
    """The outputs computed from one scalar decision (:func:`evictlab.policies.select`).

    The reference the selector is tested against, and the path of a policy without rank keys
    (``mmr``). Reserved facts are the top-ranked facts of the policy's reservation category, as
    spec 1.4 selects them; the margin follows :mod:`evictlab.selection.explain`.
    """
    facts = list(case.facts)
    selector = resolve_policy(policy)
    keys = [fact_key(fact, index) for index, fact in enumerate(facts)]
    support = _support_position(case, keys)
    usage = case.usage if isinstance(case.usage, Mapping) else {}
    if selector.unlimited:
        capacity = max(capacity, len(facts))  # a bound meaning "no capacity" (keep-all)
    context = SelectionContext(resolve_now(now), usage, params, frozenset(case.support_fact_ids), seed)
    decision = selector.select(facts, capacity, context)
    if not decision.ranking:
        raise ContractError(
            f"policy {selector.name!r} reports no ranking, so support rank and margin are undefined for it"
        )
    reservation = selector.reservation(context)
    ranking = list(decision.ranking)
    # Kept = not evicted (keys are unique); listed in input order at or under the cap, else
    # in rank order, as spec 1.4 lists them.
    evicted = {item.fact_id for item in decision.evicted}
    kept = [p for p in (range(len(facts)) if len(facts) <= capacity else ranking) if keys[p] not in evicted]
    cut = CutLine(facts, decision, reservation)
    margin = cut.margin(support)
    ties = tie_outcome(facts, decision, capacity, reservation, support, uniform=selector.uniform_order)
    return Outcome(
        tuple(keys[p] for p in kept),
        support in set(kept),
        ranking.index(support) + 1,
        decision.reserved_correction_slots,
        math.nan if margin is None else margin,
        ties.expected,
        ties.tied,
        cut.near_tie(support),
        tuple(ranking),
    )
