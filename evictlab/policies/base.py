"""The selector contract shared by every policy.

A policy scores each fact of a snapshot; :func:`select_by_rank` turns scores into a decision
exactly as DeerMem does (spec 1.4): rank by score descending with the input position as the
only tie-break, optionally reserve slots for one category, keep in rank order, and list the
evicted facts from the lowest rank up.
"""

from __future__ import annotations

import datetime as _dt
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ContractError
from .signals import fact_key, is_category, reported_category

if TYPE_CHECKING:
    import numpy as np

    from .arrays import Params, Signals

WEIGHT_TOLERANCE = 1e-9
#: The roles a policy plays in a comparison (:attr:`Policy.role`).
POLICY, BASELINE, BOUND = "policy", "baseline", "bound"
ROLES = (POLICY, BASELINE, BOUND)
#: How trace replay stores a write's new facts over the cap (:attr:`Policy.admission`).
COMPETE, ADMIT = "compete", "admit"
ADMISSIONS = (COMPETE, ADMIT)


@dataclass(frozen=True)
class PolicyParams:
    """Validated parameters of the scoring policies (DeerMem's defaults).

    ``hybrid-v1`` reads all of them; ``confidence`` reads none. Construction fails with a
    :class:`ContractError` naming the first field that breaks its bound.
    """

    confidence_weight: float = 0.65
    confirmation_weight: float = 0.25
    access_weight: float = 0.10
    confirmation_half_life_days: float = 90
    access_half_life_days: float = 30
    correction_reserved_fraction: float = 0.10
    correction_reserved_max: int = 10

    def __post_init__(self) -> None:
        for name in (
            "confidence_weight",
            "confirmation_weight",
            "access_weight",
            "confirmation_half_life_days",
            "access_half_life_days",
            "correction_reserved_fraction",
        ):
            object.__setattr__(self, name, _require_real(name, getattr(self, name)))
        object.__setattr__(
            self,
            "correction_reserved_max",
            _require_count("correction_reserved_max", self.correction_reserved_max),
        )
        for name in ("confidence_weight", "confirmation_weight", "access_weight"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ContractError(f"{name} must be in [0, 1], got {value!r}")
        # Summed left to right, as DeerMem's config validator does.
        total = self.confidence_weight + self.confirmation_weight + self.access_weight
        if abs(total - 1.0) > WEIGHT_TOLERANCE:
            raise ContractError(
                "weights must sum to 1.0 within 1e-9: confidence_weight + confirmation_weight"
                f" + access_weight = {total!r}"
            )
        for name in ("confirmation_half_life_days", "access_half_life_days"):
            value = getattr(self, name)
            if not value > 0:
                raise ContractError(f"{name} must be > 0, got {value!r}")
        fraction = self.correction_reserved_fraction
        if not 0.0 <= fraction <= 1.0:
            raise ContractError(f"correction_reserved_fraction must be in [0, 1], got {fraction!r}")

    @property
    def weights(self) -> tuple[float, float, float]:
        return (self.confidence_weight, self.confirmation_weight, self.access_weight)

    def replace(self, **changes: Any) -> PolicyParams:
        values = self.as_dict()
        unknown = sorted(set(changes) - set(values))
        if unknown:
            raise ContractError(
                f"unknown policy parameter(s) {', '.join(unknown)}; known: {', '.join(values)}"
            )
        values.update(changes)
        return PolicyParams(**values)

    def as_dict(self) -> dict[str, Any]:
        """Every parameter by name: also the keyword arguments of DeerMem's ``select_facts_for_capacity``."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite real number (numpy's too), not a boolean."""
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)


def _require_real(name: str, value: Any) -> int | float:
    """A finite real number as a plain Python ``int`` or ``float`` (numpy scalars included)."""
    # The common cases first, without the ABC checks (an int of any size but finite as a float).
    if (type(value) is float and math.isfinite(value)) or (type(value) is int and abs(value) < 1 << 1000):
        return value
    if not isinstance(value, bool) and isinstance(value, numbers.Real):
        try:
            as_float = float(value)
        except OverflowError:  # an int beyond the double range
            as_float = math.inf
        if math.isfinite(as_float):
            return int(value) if isinstance(value, numbers.Integral) else as_float
    raise ContractError(f"{name} must be a finite number, got {value!r}")


def _require_count(name: str, value: Any) -> int:
    """A non-negative integer as a plain Python ``int`` (numpy integers included, booleans not)."""
    if type(value) is int and value >= 0:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ContractError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Parameter:
    """A tunable number a policy declares: its name, default and inclusive range.

    ``integer`` parameters take integers only; the others any finite real number. A value
    is checked against the range when a policy is built (:meth:`Policy.__init__`).
    """

    name: str
    default: int | float
    low: int | float
    high: int | float
    integer: bool = False
    doc: str = ""

    def check(self, value: Any, policy: str) -> int | float:
        what = f"{policy} parameter {self.name}"
        number = _require_count(what, value) if self.integer else _require_real(what, value)
        if not self.low <= number <= self.high:
            raise ContractError(f"{what} must be in [{self.low:g}, {self.high:g}], got {value!r}")
        return number


@dataclass(frozen=True)
class Score:
    """A fact's score and the components it was computed from."""

    value: float
    components: dict[str, float]


@dataclass(frozen=True)
class EvictedFact:
    fact_id: str
    category: str
    score: float
    components: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        """The evicted fact as a plain record: id, category, score and its components."""
        return {
            "fact_id": self.fact_id,
            "category": self.category,
            "score": self.score,
            "components": dict(self.components),
        }


@dataclass(frozen=True)
class Decision:
    """What a selector decided for one snapshot at one capacity."""

    kept: list[Any]
    evicted: list[EvictedFact]
    scores: dict[str, Score]
    policy: str
    reserved_correction_slots: int = 0
    ranking: tuple[int, ...] = field(default=(), repr=False)  # input positions, best first
    kept_positions: tuple[int, ...] = field(default=(), repr=False)  # input positions of ``kept``
    # By input position: what the ranking sorts on before the input position (ascending).
    # Facts with equal keys are tied; empty when the ranking is not a sort on keys.
    rank_keys: tuple[tuple[float, ...], ...] = field(default=(), repr=False)

    @property
    def kept_ids(self) -> list[str]:
        """Ids of the kept facts as scores are keyed (``__missing_{index}`` for a fact without one)."""
        return [fact_key(fact, index) for fact, index in zip(self.kept, self.kept_positions)]


@dataclass(frozen=True)
class Reservation:
    """Slots held for one category: ``min(maximum, ceil(capacity * fraction))``."""

    category: str
    fraction: float
    maximum: int

    def slots(self, capacity: int) -> int:
        return min(self.maximum, math.ceil(capacity * self.fraction))


@dataclass(frozen=True)
class SelectionContext:
    """Everything a policy may read besides the facts themselves."""

    now: _dt.datetime
    usage: Mapping[str, Any] = field(default_factory=dict)
    params: PolicyParams = field(default_factory=PolicyParams)
    # Only bounds such as ``oracle`` read these; deployable policies must not.
    support_fact_ids: frozenset[str] = frozenset()
    seed: int = 0


class Policy:
    """Base class of a capacity policy. Subclasses set ``name`` and implement :meth:`score`
    (the reference, one snapshot) and :meth:`rank_keys` (the same order as arrays, for the
    selector of :mod:`evictlab.selection.selector`).

    A policy whose selection is not "rank by score" overrides :meth:`select` instead.
    """

    # Class attributes of a registered policy; a modified policy sets them per instance.
    name: str = ""
    summary: str = ""
    component_names: tuple[str, ...] = ()
    #: ``policy`` (deployable), ``baseline`` (a floor to beat) or ``bound`` (a reference that
    #: reads what no deployed policy can, or ignores the capacity).
    role: str = POLICY
    #: Whether the decision depends on ``SelectionContext.seed`` (then one seed is one sample).
    seeded: bool = False
    #: Whether the policy is meant to run with no capacity limit (a bound on infinite memory):
    #: evaluations run it at the pool size.
    unlimited: bool = False
    #: How tables report ties at the cut line (:mod:`.ties`): DeerMem's two policies keep
    #: ``input-order``, the rule their exactness needs; the others report the expectation.
    default_tie_break: str = "expected"
    #: The ranking is a uniformly random order (``random``): its expectation ties every fact.
    uniform_order: bool = False
    #: The policy's fixed colour in every figure (from :mod:`evictlab.palette`); None: a hue
    #: chosen by a hash of the name.
    color: str | None = None
    #: The numbers of the rule a user may change (``get_policy("lfu-aging", half_life_days=7)``).
    parameters: tuple[Parameter, ...] = ()
    #: Whether decisions depend on ``SelectionContext.params`` (weights, half-lives, reservation).
    reads_params: bool = False
    #: Which of :meth:`rank_keys` is minus the score (margins are in score units).
    value_key: int = 0
    #: How trace replay treats a write's new facts over the cap: ``compete`` (DeerMem's rule:
    #: they are ranked with the residents and may be evicted on arrival) or ``admit`` (cache
    #: semantics: they are stored and residents are evicted to make room).
    admission: str = COMPETE
    #: Whether a replay stamps confirmations in this policy's memories (spec 1.9's reinforcement):
    #: DeerMem stamps only when its ranking reads them, so ``confidence`` does not.
    stamps_confirmations: bool = True

    def __init__(self, **values: Any) -> None:
        """A policy with its declared parameters at their defaults, except those in ``values``.

        With values the name becomes ``name(parameter=value, ...)`` (in declared order), so
        tables and figures tell the variants apart.
        """
        declared = {parameter.name: parameter for parameter in self.parameters}
        unknown = sorted(set(values) - set(declared))
        if unknown:
            known = ", ".join(declared) or "none"
            raise ContractError(f"policy {self.name} has no parameter {unknown[0]}; its parameters: {known}")
        #: Every declared parameter's value, by name.
        self.values: dict[str, int | float] = {
            name: parameter.check(values[name], self.name) if name in values else parameter.default
            for name, parameter in declared.items()
        }
        if values:
            given = ",".join(f"{name}={self.values[name]!r}" for name in declared if name in values)
            self.name = f"{self.name}({given})"

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        raise NotImplementedError

    @property
    def vectorised(self) -> bool:
        """Whether :meth:`rank_keys` expresses the policy's order (it is defined).

        A greedy re-ranking (``mmr``) cannot be: each step depends on the facts ranked before
        it, so only :meth:`select` decides it (the selector's scalar path).
        """
        return type(self).rank_keys is not Policy.rank_keys

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        """The rank order of :meth:`select` as arrays, most significant first.

        Each key broadcasts to ``signals.shape`` (or ``(settings, *signals.shape)`` when it
        reads settings shaped so, see :class:`~.arrays.Params`); ascending ranks better, and
        the selector breaks every remaining tie by input position. Facts whose keys are all
        equal are tied exactly as :attr:`Decision.rank_keys` ties them, and
        ``-keys[value_key]`` is each fact's score (both property-tested against :meth:`score`).
        """
        raise NotImplementedError(f"policy {self.name!r} has no rank keys")

    def trace_key(self) -> Callable[[Mapping[str, Any]], float] | None:
        """The rank key as a function of one trace ``add`` row (higher kept) when the rank is the
        fact's own and never changes, so that a replay's tie expectation is exact; else None."""
        return None

    def reservation(self, context: SelectionContext) -> Reservation | None:
        return None

    def select(self, facts: Sequence[Any], capacity: int, context: SelectionContext) -> Decision:
        scores = self.score(facts, context)
        return select_by_rank(facts, scores, capacity, self.reservation(context), self.name)


def select_by_rank(
    facts: Sequence[Any],
    scores: Sequence[Score],
    capacity: int,
    reservation: Reservation | None,
    policy_name: str,
    ranked: Sequence[int] | None = None,
    rank_keys: Sequence[tuple[float, ...]] | None = None,
) -> Decision:
    """DeerMem's selection (spec 1.4) over precomputed per-position scores.

    ``ranked`` (every input position once, best first) replaces the default rank order of
    score descending, then input position, for policies that rank by more than one value;
    ``rank_keys`` are the keys it sorted on (by input position), so that ties can be found.
    """
    keys = [fact_key(fact, index) for index, fact in enumerate(facts)]
    by_id: dict[str, Score] = {}
    for key, score in zip(keys, scores):
        by_id[key] = score  # a later duplicate id overwrites the earlier score, as in DeerMem
    if ranked is None:
        values = [(-by_id[key].value,) for key in keys]
        # Score descending, then input position: the only tie-break.
        ranked = sorted(range(len(facts)), key=lambda index: (*values[index], index))
        rank_keys = values
    ranked = tuple(ranked)
    rank_keys = tuple(rank_keys) if rank_keys is not None else ()
    if len(facts) <= capacity:
        # Under the cap the snapshot comes back unchanged, in input order.
        return Decision(
            list(facts), [], by_id, policy_name, 0, ranked, tuple(range(len(facts))), rank_keys
        )
    limit = max(0, capacity)
    selected: set[int] = set()
    reserved = 0
    if reservation is not None and capacity > 0:
        candidates = [index for index in ranked if is_category(facts[index], reservation.category)]
        # Never negative for validated parameters; the DeerMem-compatible entry point passes
        # a negative maximum through, and the slice then keeps all but the last |reserved|.
        reserved = min(reservation.slots(capacity), len(candidates), capacity)
        selected.update(candidates[:reserved])
    for index in ranked:
        if len(selected) >= limit:
            break
        selected.add(index)
    kept_positions = tuple(index for index in ranked if index in selected)
    evicted = [
        EvictedFact(
            keys[index],
            reported_category(facts[index]),
            by_id[keys[index]].value,
            dict(by_id[keys[index]].components),
        )
        for index in reversed(ranked)
        if index not in selected
    ]
    kept = [facts[index] for index in kept_positions]
    return Decision(kept, evicted, by_id, policy_name, reserved, ranked, kept_positions, rank_keys)
