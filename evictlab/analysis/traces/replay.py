"""Replaying a trace through a capacity policy, in DeerMem's update order.

The event loop (:func:`replay`) drives a memory (:mod:`.memory`) through a trace's events
and counts what happened.

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

from ...errors import ContractError
from ...policies import DEERMEM_POLICIES, PolicyParams, resolve_policy
from ...policies.hybrid import CORRECTION
from .memory import FAST_POLICIES, FastMemory, Memory, ReferenceMemory, replayable, uncapped
from .schema import ADD, ASK, CONFIRM, SEARCH, Chunk
from .zoo_memory import ZooMemory, rank_rule

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
    """The fastest memory that decides exactly as the spec says for ``policy``.

    DeerMem's two policies run on :class:`FastMemory`, the zoo (and ``reserve`` over it) on
    :class:`ZooMemory`, anything else (``mmr``, a reservation over ``hybrid-v1``) on the
    reference path; ``fast=False`` always takes the reference path.
    """
    if fast and policy in FAST_POLICIES:
        return FastMemory(policy, capacity, params)
    if fast and replayable(policy) and rank_rule(resolve_policy(policy)) is not None:
        return ZooMemory(policy, capacity, params, seed=seed)
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
    """Replay one policy at one capacity (an ``unlimited`` policy, ``keep-all``, without a cap)."""
    memory = make_memory(policy, None if uncapped(policy) else capacity, params, seed=seed, fast=fast)
    return ReplayResult(policy, capacity, replay(chunks, memory))
