"""The memories a trace is replayed through: one agent's facts under one policy and capacity.

Every memory decides exactly as the spec says; they differ in speed only:

* :class:`ReferenceMemory` keeps DeerMem-shaped fact dicts (ISO timestamps, a usage sidecar
  map) and calls a selector on every write: :func:`evictlab.selection.deermem.select_facts_for_capacity`
  for ``confidence`` and ``hybrid-v1``, the policy's own ``select`` for every other policy and
  modifier. It is the straightforward reading of the spec, and the fallback for any policy.
* :class:`FastMemory` (``confidence`` and ``hybrid-v1``) keeps every signal as numbers,
  scores a whole memory with numpy and re-checks with the scalar formulas every pair of facts
  whose approximate scores lie within :data:`TIE_TOLERANCE` (numpy's ``exp2``/``log1p`` may
  differ from Python's in the last bits, which decides only such near-ties). So its kept lists
  are the reference's, in the same order, ties included; the tests and the benchmark check it
  step by step.
* :class:`~.zoo_memory.ZooMemory` does the same for every other registered policy (and a
  ``reserve`` modifier over one), on the shared row bookkeeping of :class:`RowMemory`.

Which memory a policy gets is :func:`.replay.make_memory`'s choice. The rules they apply
(update order, usage, reinforcement) are in :mod:`.replay`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import ContractError
from ...policies import BOUND, DEERMEM_POLICIES, Policy, PolicyParams, SelectionContext
from ...policies.base import Reservation
from ...policies.hybrid import CORRECTION
from ...policies.modifiers import ModifiedPolicy, resolve_policy
from ...policies.signals import LN_9, decay, heat_component, read_confidence, read_count
from ...selection.audit import audit_event, update_usage
from ...selection.deermem import select_facts_for_capacity
from .schema import from_us, iso

FAST_POLICIES = DEERMEM_POLICIES
#: Approximate scores closer than this are re-checked with the scalar formulas.
TIE_TOLERANCE = 1e-9
MICROSECONDS_PER_DAY = 86_400 * 1_000_000


class Memory:
    """One agent's memory under one policy and capacity (``None``: no cap)."""

    capacity: int | None
    #: Call the selector on every write, even under the cap (the benchmark's reference loop).
    select_every_write: bool = False

    @property
    def size(self) -> int:
        raise NotImplementedError

    def contains(self, fact_id: str) -> bool:
        raise NotImplementedError

    def kept_ids(self) -> list[str]:
        """The ids in memory, in DeerMem's stored order."""
        raise NotImplementedError

    def stamp(self, fact_ids: set[str], now: int) -> None:
        raise NotImplementedError

    def add(self, fact_id: str, confidence: float, category: str, now: int) -> None:
        raise NotImplementedError

    def access(self, fact_ids: list[str], now: int) -> None:
        raise NotImplementedError

    def select(self, now: int) -> list[str]:
        """Trim to the capacity; returns the evicted ids, lowest rank first."""
        raise NotImplementedError

    def count_corrections(self) -> int:
        raise NotImplementedError


def root_policy(selector: Policy) -> Policy:
    """The registered policy under a policy's modifiers (``lru`` for ``lru+reserve(...)``)."""
    while isinstance(selector, ModifiedPolicy):
        selector = selector.base
    return selector


def replayable(policy: str) -> bool:
    """Whether a trace can be replayed through ``policy`` (a spec), read from its traits.

    A bound that keeps to the capacity (``role`` bound, not ``unlimited``: ``oracle``) reads
    what no deployed policy can, a pool's support facts, which a trace does not have; trace
    mode's upper bound is the exact offline optimum instead. Raises for an unknown name.
    """
    root = root_policy(resolve_policy(policy))
    return not (root.role == BOUND and not root.unlimited)


def uncapped(policy: str) -> bool:
    """Whether ``policy`` is meant to run with no capacity limit (``keep-all``): its ``unlimited`` trait."""
    return resolve_policy(policy).unlimited


def check_policy_spec(policy: str) -> str:
    """A policy spec the replay can run (:func:`replayable`); raises for unknown names."""
    if not replayable(policy):
        raise ContractError(
            f"policy {policy!r} is a bound that reads a pool's support facts, which a trace does not"
            " have; trace mode's upper bound is the exact offline optimum"
        )
    return policy


#: The largest capacity a replay accepts (a memory of a billion facts is no cap at all).
MAX_CAPACITY = 10**9


def check_capacity(capacity: int) -> int:
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or not 1 <= capacity <= MAX_CAPACITY:
        raise ContractError(f"capacity must be an integer in [1, {MAX_CAPACITY:,}], got {capacity!r}")
    return int(capacity)


class ReferenceMemory(Memory):
    """Fact dicts and a usage map, exactly as DeerMem stores them; any policy."""

    def __init__(
        self,
        policy: str,
        capacity: int | None,
        params: PolicyParams | None = None,
        *,
        seed: int = 0,
        audit: list[dict[str, Any]] | None = None,
    ) -> None:
        self.policy = check_policy_spec(policy)
        self.capacity = None if capacity is None or uncapped(policy) else check_capacity(capacity)
        self.params = params or PolicyParams()
        self.seed = seed
        self.audit = audit  # when a list: DeerMem's audit events are appended to it (spec 1.6)
        self.selector = None if policy in DEERMEM_POLICIES else resolve_policy(policy)
        self.facts: list[dict[str, Any]] = []
        self.ids: set[str] = set()
        self.usage: dict[str, Any] = {}

    @property
    def size(self) -> int:
        return len(self.facts)

    def contains(self, fact_id: str) -> bool:
        return fact_id in self.ids

    def kept_ids(self) -> list[str]:
        return [fact["id"] for fact in self.facts]

    def stamp(self, fact_ids: set[str], now: int) -> None:
        stamp = iso(now)
        for fact in self.facts:
            if fact["id"] in fact_ids:
                fact["lastConfirmedAt"] = stamp
                fact["confirmationCount"] = read_count(fact.get("confirmationCount")) + 1

    def add(self, fact_id: str, confidence: float, category: str, now: int) -> None:
        self.facts.append({"id": fact_id, "confidence": confidence, "category": category, "createdAt": iso(now)})
        self.ids.add(fact_id)

    def access(self, fact_ids: list[str], now: int) -> None:
        present = [fact_id for fact_id in fact_ids if fact_id in self.ids]
        if present:
            previous = {fact_id: self.usage[fact_id] for fact_id in present if fact_id in self.usage}
            self.usage.update(
                update_usage(
                    previous,
                    present,
                    accessed_at=from_us(now),
                    access_half_life_days=self.params.access_half_life_days,
                )
            )

    def select(self, now: int) -> list[str]:
        assert self.capacity is not None  # only a capped memory selects
        moment = from_us(now)
        if self.selector is None:
            decision = self._deermem_decision(self.policy, moment)
        else:
            context = SelectionContext(now=moment, usage=self.usage, params=self.params, seed=self.seed)
            decision = self.selector.select(self.facts, self.capacity, context)
        if self.audit is not None:
            # Shadow mode (spec 1.5): under confidence, hybrid-v1's decision feeds the audit only.
            shadow = self._deermem_decision("hybrid-v1", moment) if self.policy == "confidence" else None
            event = audit_event(decision, max_facts=self.capacity, occurred_at=moment, shadow=shadow)
            if event is not None:
                self.audit.append(event)
        evicted = [item.fact_id for item in decision.evicted]
        self.facts = list(decision.kept)
        self.ids.difference_update(evicted)
        for fact_id in evicted:
            self.usage.pop(fact_id, None)  # spec 1.6: metadata of deleted facts is cleared
        return evicted

    def _deermem_decision(self, policy: str, moment: Any) -> Any:
        assert self.capacity is not None  # only a capped memory selects
        return select_facts_for_capacity(
            self.facts, max_facts=self.capacity, policy=policy, usage=self.usage, now=moment, **self.params.as_dict()
        )

    def count_corrections(self) -> int:
        return sum(str(fact.get("category", "")).strip().lower() == CORRECTION for fact in self.facts)


class RowMemory(Memory):
    """Facts as rows numbered in arrival order; the memory is its rows in stored order.

    A subclass keeps the signals its policy reads by row and ranks the rows (:meth:`rank`);
    :meth:`select` then applies DeerMem's selection (spec 1.4 steps 4-7) along that rank,
    with slots held for ``reservation``'s category when there is one.
    """

    def __init__(self, capacity: int | None, reservation: Reservation | None = None) -> None:
        self.capacity = None if capacity is None else check_capacity(capacity)
        self.reservation = reservation
        self._slots = reservation.slots(self.capacity) if reservation is not None and self.capacity else 0
        self.index: dict[str, int] = {}  # fact id -> row
        self.names: list[str] = []
        self.order = np.zeros(0, dtype=np.int64)  # rows in memory, in stored order
        self.alive: set[int] = set()
        self._correction_rows: set[int] = set()  # correction facts in memory
        self._reserved = np.zeros(1024, dtype=bool)  # by row: of the reserved category
        self._reserved_rows: set[int] = set()  # facts of the reserved category in memory

    @property
    def size(self) -> int:
        return len(self.order)

    def contains(self, fact_id: str) -> bool:
        row = self.index.get(fact_id)
        return row is not None and row in self.alive

    def kept_ids(self) -> list[str]:
        return [self.names[row] for row in self.order.tolist()]

    def count_corrections(self) -> int:
        return len(self._correction_rows)

    def row_in_memory(self, fact_id: str) -> int | None:
        row = self.index.get(fact_id)
        return row if row is not None and row in self.alive else None

    def append_row(self, fact_id: str, category: str) -> int:
        """A new row for ``fact_id``, stored last; its number."""
        row = len(self.names)
        if row == len(self._reserved):
            self._reserved = grown(self._reserved, False)
        self.names.append(fact_id)
        self.index[fact_id] = row
        self.alive.add(row)
        normalised = str(category).strip().lower()
        if normalised == CORRECTION:
            self._correction_rows.add(row)
        if self.reservation is not None and normalised == self.reservation.category:
            self._reserved[row] = True
            self._reserved_rows.add(row)
        self.order = np.concatenate((self.order, (row,)))
        return row

    def rank(self, now: int) -> np.ndarray:
        """Rows in memory, best first (ties by stored position, spec 1.4)."""
        raise NotImplementedError

    def select(self, now: int) -> list[str]:
        capacity = self.capacity
        assert capacity is not None  # only a capped memory selects
        if self.size <= capacity:
            return []  # under the cap DeerMem keeps the memory unchanged, in stored order
        rows = self.rank(now)
        size = len(rows)
        reserved = len(self._reserved_rows)
        if size == capacity + 1 and (reserved == 0 or reserved > self._slots):
            last = size - 1  # one over, and the lowest-ranked fact holds no reserved slot
        elif size == capacity + 1:
            # One over, every fact of the category reserved: evict the lowest-ranked other fact.
            held = self._reserved_rows
            last = next(position for position in range(size - 1, -1, -1) if int(rows[position]) not in held)
        else:
            return self._select_many(rows)
        evicted = int(rows[last])
        self.order = rows[:last] if last == size - 1 else np.concatenate((rows[:last], rows[last + 1 :]))
        self._forget([evicted])
        return [self.names[evicted]]

    def _select_many(self, rows: np.ndarray) -> list[str]:
        """DeerMem's selection (spec 1.4 steps 4-7) over ``rows`` in rank order."""
        capacity = self.capacity
        assert capacity is not None  # only a capped memory selects
        selected = np.zeros(len(rows), dtype=bool)
        reserved = 0
        if self.reservation is not None:
            positions = self._reserved[rows].nonzero()[0]
            reserved = max(0, min(self._slots, len(positions), capacity))
            selected[positions[:reserved]] = True
        selected[(~selected).nonzero()[0][: capacity - reserved]] = True
        evicted = rows[~selected][::-1].tolist()  # lowest rank first
        self.order = rows[selected]
        self._forget(evicted)
        return [self.names[row] for row in evicted]

    def _forget(self, rows: list[int]) -> None:
        self.alive.difference_update(rows)
        self._correction_rows.difference_update(rows)
        self._reserved_rows.difference_update(rows)


def grown(array: np.ndarray, fill: Any) -> np.ndarray:
    """``array`` with its last axis doubled, the new entries set to ``fill``."""
    extra = np.full(array.shape, fill, dtype=array.dtype)
    return np.concatenate((array, extra), axis=-1)


class FastMemory(RowMemory):
    """``confidence`` or ``hybrid-v1`` on numeric signals; decides as :class:`ReferenceMemory`.

    Each fact's signals are kept twice: exactly, as Python numbers, for the scalar score, and
    as three float arrays from which numpy computes every score of a memory in a few
    operations (to within a few ulps): ``-w_conf * confidence``, the freshness exponent
    ``log2(scale) + (reference - origin) / half-life`` and the heat exponent
    ``log2(heat) + (accessed - origin) / half-life``, in microseconds.
    """

    def __init__(self, policy: str, capacity: int | None, params: PolicyParams | None = None) -> None:
        if policy not in FAST_POLICIES:
            raise ContractError(f"the fast replay runs {', '.join(FAST_POLICIES)} only, not {policy!r}")
        self.policy = policy
        self.hybrid = policy == "hybrid-v1"
        self.params = params or PolicyParams()
        p = self.params
        reservation = (
            Reservation(CORRECTION, p.correction_reserved_fraction, p.correction_reserved_max) if self.hybrid else None
        )
        super().__init__(capacity, reservation)
        self._confirm_rate = 1.0 / (MICROSECONDS_PER_DAY * p.confirmation_half_life_days)
        self._access_rate = 1.0 / (MICROSECONDS_PER_DAY * p.access_half_life_days)
        # The confirmation weight rides in the exponent: w * 2**x == 2**(x + log2 w).
        self._log_confirm_weight = math.log2(p.confirmation_weight) if p.confirmation_weight > 0 else -math.inf
        self._access_factor = p.access_weight / LN_9
        self._shift = np.zeros((2, 1))
        self._origin = 0  # the time of the first fact added; keeps the exponents small
        # Exact signals, by row.
        self.confidence: list[float] = []
        self.reference: list[int] = []  # lastConfirmedAt, else createdAt
        self.confirmed: list[bool] = []
        self.heat: list[float] = []  # 0.0 until the first access
        self.accessed: list[int] = []
        # Approximation arrays, by row.
        # Rows: minus the weighted confidence, the freshness exponent, the heat exponent (-inf:
        # never accessed). Negated scores sort best first with a plain stable argsort.
        self._signals = np.zeros((3, 1024))
        self._signals[2] = -np.inf

    def _fresh_exponent(self, row: int) -> float:
        scale = 0.0 if self.confirmed[row] else -1.0  # log2 of 1.0 or 0.5
        return scale + self._log_confirm_weight + (self.reference[row] - self._origin) * self._confirm_rate

    def stamp(self, fact_ids: set[str], now: int) -> None:
        for fact_id in fact_ids:
            row = self.row_in_memory(fact_id)
            if row is not None:
                self.reference[row] = now
                self.confirmed[row] = True
                self._signals[1, row] = self._fresh_exponent(row)

    def add(self, fact_id: str, confidence: float, category: str, now: int) -> None:
        if not self.names:
            self._origin = now
        row = self.append_row(fact_id, category)
        if row == self._signals.shape[1]:
            self._signals = grown(self._signals, 0.0)
            self._signals[2, row:] = -np.inf
        bounded = read_confidence(confidence)
        self.confidence.append(bounded)
        self.reference.append(now)
        self.confirmed.append(False)
        self.heat.append(0.0)
        self.accessed.append(now)
        self._signals[0, row] = -(self.params.confidence_weight * bounded if self.hybrid else bounded)
        self._signals[1, row] = self._fresh_exponent(row)

    def access(self, fact_ids: list[str], now: int) -> None:
        half_life = self.params.access_half_life_days
        hot = self._signals[2]
        for fact_id in fact_ids:
            row = self.row_in_memory(fact_id)
            if row is None:
                continue
            heat = self.heat[row]
            if heat > 0:  # accessed before: decay since then (as audit.update_usage does)
                heat = heat * decay(_days(now, self.accessed[row]), half_life)
            heat = heat + 1.0
            self.heat[row] = heat
            self.accessed[row] = now
            hot[row] = math.log2(heat) + (now - self._origin) * self._access_rate

    def exact_score(self, row: int, now: int) -> float:
        """The scalar score, computed as :func:`evictlab.policies.hybrid.hybrid_score` does."""
        confidence = self.confidence[row]
        if not self.hybrid:
            return confidence
        p = self.params
        freshness = decay(_days(now, self.reference[row]), p.confirmation_half_life_days)
        if not self.confirmed[row]:
            freshness = 0.5 * freshness
        heat = self.heat[row]
        access = heat_component(heat, _days(now, self.accessed[row]), p.access_half_life_days) if heat > 0 else 0.0
        w_conf, w_confirm, w_access = p.weights
        return w_conf * confidence + w_confirm * freshness + w_access * access

    def approximate_scores(self, rows: np.ndarray, now: int) -> np.ndarray:
        """Minus the scores, to within a few ulps (exactly, for ``confidence``)."""
        if not self.hybrid:
            return self._signals[0, rows]
        elapsed = now - self._origin
        shift = self._shift
        shift[0, 0] = elapsed * self._confirm_rate
        shift[1, 0] = elapsed * self._access_rate
        signals = self._signals[:, rows]
        freshness, decayed = np.exp2(signals[1:] - shift)
        # min(1, log1p(x) / ln 9) * w_access, as min(ln 9, log1p(x)) * (w_access / ln 9).
        return signals[0] - freshness - np.minimum(LN_9, np.log1p(decayed)) * self._access_factor

    def rank(self, now: int) -> np.ndarray:
        """Rows in memory, best first: score descending, then stored position (spec 1.4)."""
        rows = self.order
        negated = self.approximate_scores(rows, now)
        ranked = np.argsort(negated, kind="stable")
        if not self.hybrid:
            return rows[ranked]  # confidence scores are exact
        ordered = negated[ranked]
        gaps = ordered[1:] - ordered[:-1]
        if gaps.min() > TIE_TOLERANCE:
            return rows[ranked]
        # Re-sort each run of near-equal scores by the exact score, then position.
        close = (gaps <= TIE_TOLERANCE).nonzero()[0]
        breaks = np.diff(close) > 1
        starts = close[np.concatenate(([True], breaks))]
        ends = close[np.concatenate((breaks, [True]))] + 2
        for start, end in zip(starts.tolist(), ends.tolist()):
            segment = ranked[start:end].tolist()
            exact = {position: self.exact_score(int(rows[position]), now) for position in segment}
            ranked[start:end] = sorted(segment, key=lambda position: (-exact[position], position))
        return rows[ranked]


def _days(now: int, then: int) -> float:
    """Elapsed days as ``(now - then).total_seconds() / 86400`` computes them (exactly)."""
    return (now - then) / 1_000_000 / 86_400
