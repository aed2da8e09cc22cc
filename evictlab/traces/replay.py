"""Replaying a trace through a capacity policy, in DeerMem's update order.

The event loop (:func:`replay`) is shared by two memories that must decide identically:

* :class:`ReferenceMemory` keeps DeerMem-shaped fact dicts (ISO timestamps, a usage sidecar
  map) and calls a selector on every write: :func:`evictlab.deermem.select_facts_for_capacity`
  for ``confidence`` and ``hybrid-v1``, the policy's own ``select`` for every other policy and
  modifier. It is the straightforward reading of the spec, and the fallback for any policy.
* :class:`FastMemory` (``confidence`` and ``hybrid-v1``) keeps every signal as numbers,
  scores a whole memory with numpy and re-checks with the scalar formulas every pair of facts
  whose approximate scores lie within :data:`TIE_TOLERANCE` (numpy's ``exp2``/``log1p`` may
  differ from Python's in the last bits, which decides only such near-ties). So its kept lists
  are the reference's, in the same order, ties included; the tests and the benchmark check it
  step by step.

Rules, from the spec:

* An *update* is a run of consecutive ``confirm`` and ``add`` rows with the same time (one
  ``_apply_updates`` call, spec 1.5): first reinforcement stamping on the facts already in
  memory (spec 1.9: an id passes the gate when its scope, stripped and lower-cased, is
  ``user``, the id is non-empty after stripping and the row's signal was detected; each
  reinforced fact gets ``lastConfirmedAt`` = the update's time and ``confirmationCount`` + 1),
  then the new facts are appended in row order, then, only when memory holds more than the
  capacity, one capacity selection. Memory becomes the kept list, in rank order, as DeerMem
  stores it (so later ties break by that order).
* ``search`` updates usage heat for the returned ids (spec 1.7: de-duplicated in order, empty
  ids dropped, ids not in memory skipped; heat decayed since the last access, plus 1).
  DeerMem writes usage and stamps confirmations only under ``hybrid-v1`` or shadow mode; the
  replay always records both, which changes nothing for ``confidence`` (it reads neither) and
  gives the other policies the signals they read.
* An evicted fact never returns: memory is not a cache and there is no re-admission.
* ``ask`` is answerable when the fact it needs is in memory; it is *stale-kept* when it names
  a superseded fact that is in memory while the needed fact is not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ..audit import audit_event, update_usage
from ..deermem import select_facts_for_capacity
from ..errors import ContractError
from ..policies import DEERMEM_POLICIES, PolicyParams, SelectionContext
from ..policies.base import Reservation
from ..policies.hybrid import CORRECTION
from ..policies.modifiers import resolve_policy
from ..policies.signals import LN_9, decay, heat_component, read_confidence, read_count
from .schema import ADD, ASK, CONFIRM, SEARCH, Chunk, from_us, iso

#: Policies the replay cannot run: ``oracle`` reads a pool's support facts, which a trace
#: does not have (the trace-mode bound is the exact offline optimum).
UNSUPPORTED = ("oracle",)
#: Replayed without a cap, as the zoo evaluates it.
UNCAPPED = ("keep-all",)
FAST_POLICIES = DEERMEM_POLICIES
#: Approximate scores closer than this are re-checked with the scalar formulas.
TIE_TOLERANCE = 1e-9
MICROSECONDS_PER_DAY = 86_400 * 1_000_000


# --------------------------------------------------------------------------- counts


@dataclass
class ReplayCounts:
    """What one replay counted; :meth:`metrics` turns it into rates."""

    events: int = 0
    updates: int = 0
    selections: int = 0
    facts_added: int = 0
    asks: int = 0
    answerable: int = 0
    supersede_asks: int = 0
    stale_kept: int = 0
    evictions: int = 0
    churn: int = 0
    occupancy_sum: int = 0
    corrections_added: int = 0
    corrections_kept: int = 0  # corrections still in memory at the end
    final_size: int = 0

    def metrics(self, capacity: int | None) -> dict[str, float]:
        """Rates: answerable and stale-kept per ask, correction survival, per-event churn."""
        return {
            "answerable_rate": _ratio(self.answerable, self.asks),
            "stale_kept_rate": _ratio(self.stale_kept, self.supersede_asks),
            "correction_survival": _ratio(self.corrections_kept, self.corrections_added),
            "evictions_per_event": _ratio(self.evictions, self.events),
            "churn_per_event": _ratio(self.churn, self.events),
            "mean_occupancy": _ratio(self.occupancy_sum, self.events),
            "occupancy_fraction": (
                _ratio(self.occupancy_sum, self.events * capacity) if capacity else math.nan
            ),
        }

    def as_dict(self) -> dict[str, int]:
        return {item.name: getattr(self, item.name) for item in fields(self)}


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


# --------------------------------------------------------------------------- the event loop


def reinforced_ids(fact_ids: Sequence[str], scopes: Sequence[str] | None, signal: bool) -> set[str]:
    """The ids one ``confirm`` row reinforces (spec 1.9's normalisation and batch gate)."""
    if not signal:
        return set()
    passed = set()
    for position, raw_id in enumerate(fact_ids):
        scope = "user" if scopes is None else scopes[position]
        fact_id = raw_id.strip() if isinstance(raw_id, str) else ""
        if fact_id and isinstance(scope, str) and scope.strip().lower() == "user":
            passed.add(fact_id)
    return passed


def returned_ids(fact_ids: Sequence[str]) -> list[str]:
    """The ids of a ``search`` row as usage counts them: empty dropped, de-duplicated in order."""
    unique = dict.fromkeys(fact_ids)
    unique.pop("", None)
    return list(unique)


def replay(
    chunks: Iterable[Chunk],
    memory: Memory,
    *,
    on_write: Callable[[int, Memory], None] | None = None,
) -> ReplayCounts:
    """Run every event of ``chunks`` (in order) through ``memory`` and count the outcomes.

    ``on_write(update_index, memory)`` is called after every update (a write), for checks.
    """
    counts = ReplayCounts()
    pending: list[tuple[Chunk, int]] = []  # the rows of the update being gathered
    pending_time = 0  # the time of the pending rows (read only while there are some)
    capacity = memory.capacity
    always = memory.select_every_write

    def flush() -> None:
        nonlocal pending
        now = pending_time
        reinforced: set[str] = set()
        new_ids = []
        for chunk, index in pending:
            if chunk["event"][index] == CONFIRM:
                reinforced |= reinforced_ids(
                    chunk["fact_ids"][index], chunk["scopes"][index], chunk["reinforcement"][index]
                )
        if reinforced:
            memory.stamp(reinforced, now)
        for chunk, index in pending:
            if chunk["event"][index] == ADD:
                category = chunk["category"][index]
                memory.add(chunk["fact_id"][index], chunk["confidence"][index], category, now)
                new_ids.append(chunk["fact_id"][index])
                if category.strip().lower() == CORRECTION:
                    counts.corrections_added += 1
        counts.facts_added += len(new_ids)
        evicted: list[str] = []
        if capacity is not None and (memory.size > capacity or always):
            evicted = memory.select(now)
            counts.selections += 1
            counts.evictions += len(evicted)
        # Churn: facts that entered plus facts that left; one evicted in its own update did neither.
        evicted_new = sum(1 for fact_id in evicted if fact_id in new_ids)
        counts.churn += len(new_ids) + len(evicted) - 2 * evicted_new
        counts.events += len(pending)
        counts.occupancy_sum += memory.size * len(pending)
        if on_write is not None:
            on_write(counts.updates, memory)
        counts.updates += 1
        pending = []

    asks = answerable = supersede_asks = stale_kept = other_events = occupancy = 0
    contains = memory.contains
    for chunk in chunks:
        times, events = chunk["time"], chunk["event"]
        fact_id, supersedes, fact_ids = chunk["fact_id"], chunk["supersedes"], chunk["fact_ids"]
        for index in range(len(times)):
            moment, event = times[index], events[index]
            if event in (ADD, CONFIRM):
                if pending and moment != pending_time:
                    flush()
                pending_time = moment
                pending.append((chunk, index))
                continue
            if pending:
                flush()
            if event == SEARCH:
                memory.access(returned_ids(fact_ids[index]), moment)
            elif event == ASK:
                asks += 1
                needed = contains(fact_id[index])
                answerable += needed
                old = supersedes[index]
                if old is not None:
                    supersede_asks += 1
                    stale_kept += (not needed) and contains(old)
            other_events += 1
            occupancy += memory.size
    if pending:
        flush()
    counts.asks, counts.answerable = asks, answerable
    counts.supersede_asks, counts.stale_kept = supersede_asks, stale_kept
    counts.events += other_events
    counts.occupancy_sum += occupancy
    counts.final_size = memory.size
    counts.corrections_kept = memory.count_corrections()
    return counts


# --------------------------------------------------------------------------- memories


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


def check_policy_spec(policy: str) -> str:
    """A policy spec the replay can run (``oracle`` is refused); raises for unknown names."""
    base = policy.split("+")[0].strip()
    if base in UNSUPPORTED:
        raise ContractError(
            f"policy {policy!r} reads a pool's support facts, which a trace does not have;"
            " trace mode's upper bound is the exact offline optimum"
        )
    resolve_policy(policy)
    return policy


def check_capacity(capacity: int) -> int:
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
        raise ContractError(f"capacity must be an integer >= 1, got {capacity!r}")
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
        self.capacity = None if capacity is None or policy in UNCAPPED else check_capacity(capacity)
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
        params = self.params
        return select_facts_for_capacity(
            self.facts,
            max_facts=self.capacity,
            policy=policy,
            usage=self.usage,
            now=moment,
            confidence_weight=params.confidence_weight,
            confirmation_weight=params.confirmation_weight,
            access_weight=params.access_weight,
            confirmation_half_life_days=params.confirmation_half_life_days,
            access_half_life_days=params.access_half_life_days,
            correction_reserved_fraction=params.correction_reserved_fraction,
            correction_reserved_max=params.correction_reserved_max,
        )

    def count_corrections(self) -> int:
        return sum(str(fact.get("category", "")).strip().lower() == CORRECTION for fact in self.facts)


class FastMemory(Memory):
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
        self.capacity = None if capacity is None else check_capacity(capacity)
        self.params = params or PolicyParams()
        p = self.params
        self.reservation = (
            Reservation(CORRECTION, p.correction_reserved_fraction, p.correction_reserved_max)
            if self.hybrid
            else None
        )
        self._slots = (
            self.reservation.slots(self.capacity) if self.reservation is not None and self.capacity else 0
        )
        self._confirm_rate = 1.0 / (MICROSECONDS_PER_DAY * p.confirmation_half_life_days)
        self._access_rate = 1.0 / (MICROSECONDS_PER_DAY * p.access_half_life_days)
        # The confirmation weight rides in the exponent: w * 2**x == 2**(x + log2 w).
        self._log_confirm_weight = math.log2(p.confirmation_weight) if p.confirmation_weight > 0 else -math.inf
        self._access_factor = p.access_weight / LN_9
        self._shift = np.zeros((2, 1))
        self._correction_rows: set[int] = set()  # correction facts in memory
        self._origin = 0  # the time of the first fact added; keeps the exponents small
        self.index: dict[str, int] = {}  # fact id -> row
        self.names: list[str] = []
        self.order = np.zeros(0, dtype=np.int64)  # rows in memory, in stored order
        self.alive: set[int] = set()
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
        self._correction = np.zeros(1024, dtype=bool)

    @property
    def size(self) -> int:
        return len(self.order)

    def contains(self, fact_id: str) -> bool:
        row = self.index.get(fact_id)
        return row is not None and row in self.alive

    def kept_ids(self) -> list[str]:
        return [self.names[row] for row in self.order.tolist()]

    def _fresh_exponent(self, row: int) -> float:
        scale = 0.0 if self.confirmed[row] else -1.0  # log2 of 1.0 or 0.5
        return scale + self._log_confirm_weight + (self.reference[row] - self._origin) * self._confirm_rate

    def stamp(self, fact_ids: set[str], now: int) -> None:
        for fact_id in fact_ids:
            row = self.index.get(fact_id)
            if row is not None and row in self.alive:
                self.reference[row] = now
                self.confirmed[row] = True
                self._signals[1, row] = self._fresh_exponent(row)

    def add(self, fact_id: str, confidence: float, category: str, now: int) -> None:
        if not self.names:
            self._origin = now
        row = len(self.names)
        if row == self._signals.shape[1]:
            self._signals = np.concatenate((self._signals, np.zeros((3, row))), axis=1)
            self._signals[2, row:] = -np.inf
            self._correction = np.concatenate((self._correction, np.zeros(row, dtype=bool)))
        self.names.append(fact_id)
        self.index[fact_id] = row
        self.alive.add(row)
        bounded = read_confidence(confidence)
        self.confidence.append(bounded)
        self.reference.append(now)
        self.confirmed.append(False)
        self.heat.append(0.0)
        self.accessed.append(now)
        self._signals[0, row] = -(self.params.confidence_weight * bounded if self.hybrid else bounded)
        self._signals[1, row] = self._fresh_exponent(row)
        if str(category).strip().lower() == CORRECTION:
            self._correction[row] = True
            self._correction_rows.add(row)
        self.order = np.concatenate((self.order, (row,)))

    def access(self, fact_ids: list[str], now: int) -> None:
        half_life = self.params.access_half_life_days
        hot = self._signals[2]
        for fact_id in fact_ids:
            row = self.index.get(fact_id)
            if row is None or row not in self.alive:
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

    def select(self, now: int) -> list[str]:
        capacity = self.capacity
        assert capacity is not None  # only a capped memory selects
        rows = self.rank(now)
        size = len(rows)
        corrections = len(self._correction_rows) if self.reservation is not None else 0
        if size == capacity + 1 and (corrections == 0 or corrections > self._slots):
            last = size - 1  # one over, and the lowest-ranked fact holds no reserved slot
        elif size == capacity + 1:
            # One over, every correction reserved: evict the lowest-ranked other fact.
            reserved = self._correction_rows
            last = next(position for position in range(size - 1, -1, -1) if int(rows[position]) not in reserved)
        else:
            return self._select_many(rows, now)
        evicted = int(rows[last])
        self.order = rows[:last] if last == size - 1 else np.concatenate((rows[:last], rows[last + 1 :]))
        self._forget([evicted])
        return [self.names[evicted]]

    def _select_many(self, rows: np.ndarray, now: int) -> list[str]:
        """DeerMem's selection (spec 1.4 steps 4-7) over ``rows`` in rank order."""
        capacity = self.capacity
        assert capacity is not None  # only a capped memory selects
        selected = np.zeros(len(rows), dtype=bool)
        reserved = 0
        if self.reservation is not None:
            correction_positions = self._correction[rows].nonzero()[0]
            reserved = max(0, min(self._slots, len(correction_positions), capacity))
            selected[correction_positions[:reserved]] = True
        selected[(~selected).nonzero()[0][: capacity - reserved]] = True
        evicted = rows[~selected][::-1].tolist()  # lowest rank first
        self.order = rows[selected]
        self._forget(evicted)
        return [self.names[row] for row in evicted]

    def _forget(self, rows: list[int]) -> None:
        self.alive.difference_update(rows)
        self._correction_rows.difference_update(rows)

    def count_corrections(self) -> int:
        return len(self._correction_rows)


def _days(now: int, then: int) -> float:
    """Elapsed days as ``(now - then).total_seconds() / 86400`` computes them (exactly)."""
    return (now - then) / 1_000_000 / 86_400


def audit_trail(
    chunks: Iterable[Chunk], policy: str, capacity: int, params: PolicyParams | None = None
) -> list[dict[str, Any]]:
    """DeerMem's eviction audit events of one replay (spec 1.6), oldest first, none dropped.

    ``policy`` is ``confidence`` (each event then carries the ``hybrid-v1`` shadow decision) or
    ``hybrid-v1``; events hold ids, categories, scores and components, never content.
    """
    if policy not in DEERMEM_POLICIES:
        raise ContractError(f"audit events are DeerMem's: policy must be confidence or hybrid-v1, not {policy!r}")
    events: list[dict[str, Any]] = []
    replay(chunks, ReferenceMemory(policy, capacity, params, audit=events))
    return events


def make_memory(
    policy: str, capacity: int | None, params: PolicyParams | None = None, *, seed: int = 0, fast: bool = True
) -> Memory:
    """The fastest memory that decides exactly as the spec says for ``policy``."""
    if fast and policy in FAST_POLICIES:
        return FastMemory(policy, capacity, params)
    return ReferenceMemory(policy, capacity, params, seed=seed)


@dataclass(frozen=True)
class ReplayResult:
    policy: str
    capacity: int | None
    counts: ReplayCounts = field(repr=False)

    def row(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "capacity": self.capacity,
            **self.counts.as_dict(),
            **self.counts.metrics(self.capacity),
        }


def replay_policy(
    chunks: Iterable[Chunk],
    policy: str,
    capacity: int | None,
    params: PolicyParams | None = None,
    *,
    seed: int = 0,
    fast: bool = True,
) -> ReplayResult:
    """Replay one policy at one capacity (``keep-all`` always without a cap)."""
    memory = make_memory(policy, None if policy in UNCAPPED else capacity, params, seed=seed, fast=fast)
    return ReplayResult(policy, capacity, replay(chunks, memory))

