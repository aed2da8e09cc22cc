"""Replaying a trace through capacity policies, in DeerMem's update order.

The event loop (:func:`replay`) drives a collection of memories (:mod:`.memory`: every
(policy, capacity, seed) memory of a run in lockstep, or the scalar reference) through a
trace's events once and counts what happened in each. DeerMem's lifecycle stages
(:class:`.stages.Lifecycle`) run at each write before and after the capacity selection.

Rules, from the spec:

* An *update* is a run of consecutive ``confirm`` and ``add`` rows with the same time (one
  ``_apply_updates`` call, spec 1.5; :class:`.schema.Updates` groups the rows, and a
  ``message`` row is the next update's feed): first reinforcement stamping on the facts
  already in memory (spec 1.9: an id passes the gate when its scope, stripped and lower-cased, is
  ``user``, the id is non-empty after stripping and the row's signal was detected; each
  reinforced fact gets ``lastConfirmedAt`` = the update's time and ``confirmationCount`` + 1),
  then the new facts are appended in row order, then, only when memory holds more than the
  capacity, one capacity selection on DeerMem's input order (spec 1.12 C6): the stored facts
  sorted by id, as storage returns them (1.14), then the new facts, so ties favour the
  existing fact with the smaller id. Memory becomes the kept facts, stored sorted by id.
  Under a policy whose ``admission`` is ``admit`` (the cache-derived ones) the new facts are
  kept and the residents trimmed to the room left (:func:`.memory.admission_split`); DeerMem's ``compete`` ranks all.
* ``search`` updates usage heat for the returned ids (spec 1.7: de-duplicated in order, empty
  ids dropped, ids not in memory skipped; heat decayed since the last access, plus 1).
  DeerMem writes usage and stamps confirmations only under ``hybrid-v1`` or shadow mode; the
  replay always records both, which changes nothing for ``confidence`` (it reads neither) and
  gives the other policies the signals they read.
* An evicted fact never returns: there is no re-admission.
* ``ask`` is answerable when the fact it needs is in memory (under a lifecycle: a fact with its
  content key, and with the ``injection`` stage one that is also injected into the prompt;
  :meth:`.stages.Lifecycle.answerable`); it is *stale-kept* when it names a superseded fact that
  is in memory while the needed fact is not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ...errors import ContractError
from ...policies import DEERMEM_POLICIES, PolicyParams, resolve_policy
from ...policies.arrays import category_name
from ...policies.hybrid import CORRECTION
from .expectation import TieNeutral
from .lifecycle import DEFAULT_STAGES, LOSSES
from .memory import Lockstep, MemorySpec
from .reference import ReferenceMemory
from .schema import ADD, ASK, CONFIRM, MESSAGE, OPTIONAL, REQUIRED, SEARCH, Chunk, Updates
from .stages import Lifecycle

Memories = Lockstep | ReferenceMemory
#: The fields an ``add`` row may carry (the others are empty): what a :class:`Write`'s rows hold.
_ADD_FIELDS = ("time", "event", *REQUIRED[ADD], *OPTIONAL[ADD])
#: Events between two calls of a replay's ``on_events`` (progress).
PROGRESS_EVERY = 4096

# --------------------------------------------------------------------------- counts


@dataclass
class ReplayCounts:
    """What one replay of one memory counted; :meth:`metrics` turns it into rates."""

    events: int = 0
    updates: int = 0
    selections: int = 0
    facts_added: int = 0
    asks: int = 0
    answerable: int = 0
    supersede_asks: int = 0
    stale_kept: int = 0
    evictions: int = 0
    evicted_on_arrival: int = 0  # new facts evicted in the update that added them
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
            "arrival_eviction_rate": _ratio(self.evicted_on_arrival, self.facts_added),
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


@dataclass(frozen=True)
class Write:
    """One update of a trace (spec 1.5): its time, the ids reinforced, its ``add`` rows (the fields
    an add carries, in row order) and its feed (the ``message`` rows since the previous update)."""

    now: int
    reinforced: frozenset[str]
    rows: tuple[dict[str, Any], ...]
    messages: tuple[tuple[str, str], ...]


def replay(
    chunks: Iterable[Chunk],
    memories: Memories,
    *,
    on_write: Callable[[int, Memories], None] | None = None,
    on_events: Callable[[int], None] | None = None,
    lifecycle: Lifecycle | None = None,
) -> list[ReplayCounts]:
    """Run every event of ``chunks`` (in order) through every memory of ``memories``; their counts.

    ``on_write(update_index, memories)`` is called after every update (a write), for checks;
    ``on_events(n)`` every :data:`PROGRESS_EVERY` events and at the end, with the events done.
    ``lifecycle`` runs DeerMem's stages around each capacity selection and decides each ask
    (:mod:`.stages`); without it, a question is answerable when memory holds the fact.
    ``message`` rows are not events: they are the next update's feed.
    """
    count = len(memories)
    answerable, stale_kept, evictions, on_arrival, churn, occupancy, selections = (
        np.zeros(count, dtype=np.int64) for _ in range(7)
    )
    shared = ReplayCounts()
    updates = Updates()
    pending: list[tuple[Chunk, int]] = []  # the rows of the update being gathered
    pending_time = pending_update = 0  # the pending rows' time and update number (read only while there are some)
    feed: list[tuple[str, str]] = []  # the message rows since the last update
    idle = 0  # events since the sizes last changed, not yet counted in ``occupancy``

    def flush() -> None:
        nonlocal pending, idle
        occupancy[:] += memories.sizes * idle
        idle = 0
        added = [{name: chunk[name][index] for name in _ADD_FIELDS} for chunk, index in pending
                 if chunk["event"][index] != CONFIRM]
        shared.corrections_added += sum(category_name(row["category"]) == CORRECTION for row in added)
        shared.facts_added += len(added)
        if lifecycle is not None and added and lifecycle.refuses(added):
            # Refused whole (spec 1.12 B8, C5): nothing applied, and the watermark stays, so the
            # feed is kept for the next update (D6).
            lifecycle.refuse(added)
        else:
            apply(added)
        shared.events += len(pending)
        occupancy[:] += memories.sizes * len(pending)
        if on_write is not None:
            on_write(shared.updates, memories)
        shared.updates += 1
        pending = []

    def apply(added: list[dict[str, Any]]) -> None:
        """Apply the pending update, its ``add`` rows ``added``, to every memory."""
        messages = tuple(feed)
        feed.clear()
        signal = None if lifecycle is None else lifecycle.signal(messages)
        reinforced: set[str] = set()
        for chunk, index in pending:
            if chunk["event"][index] == CONFIRM:
                reinforced |= reinforced_ids(
                    chunk["fact_ids"][index], chunk["scopes"][index],
                    chunk["reinforcement"][index] if signal is None else signal,
                )
        write = Write(pending_time, frozenset(reinforced), tuple(added), messages)
        held_before = memories.sizes.copy()
        if reinforced:
            memories.stamp(reinforced, pending_time)
        for row in added:
            memories.add(row["fact_id"], row["confidence"], row["category"], pending_time)
        if lifecycle is not None:
            lifecycle.before_selection(write)
        evicted = memories.select(pending_time)
        selections[:] += memories.selected
        if lifecycle is not None:
            lifecycle.after_selection(write, evicted)
        new_ids = {row["fact_id"] for row in added}
        for memory, gone in enumerate(evicted):
            if gone:
                evictions[memory] += len(gone)
                on_arrival[memory] += sum(fact_id in new_ids for fact_id in gone)
        # Churn: the facts that entered each memory plus those that left it, by any stage or the cap.
        # Only the update's own facts can enter (a fact never returns), so what a memory holds after
        # is what stayed plus what entered: left = held before + entered - held after. A new fact
        # gone by the end of its own update (rejected, skipped, evicted) neither entered nor left.
        churn[:] += 2 * memories.count_held(new_ids) + held_before - memories.sizes

    asks = supersede_asks = other_events = done = 0
    contains = memories.contains
    knows = contains if lifecycle is None else lifecycle.answerable
    for chunk in chunks:
        times, events, numbers = chunk["time"], chunk["event"], updates.numbers(chunk).tolist()
        fact_id, supersedes, fact_ids = chunk["fact_id"], chunk["supersedes"], chunk["fact_ids"]
        for index in range(len(times)):
            done += 1
            if on_events is not None and done % PROGRESS_EVERY == 0:
                on_events(done)
            moment, event = times[index], events[index]
            if pending and numbers[index] != pending_update:  # the row ends the pending update
                flush()
            if event == MESSAGE:  # no event: the next update's feed
                feed.append((chunk["role"][index], chunk["text"][index]))
                continue
            if event in (ADD, CONFIRM):
                pending_time, pending_update = moment, numbers[index]
                pending.append((chunk, index))
                continue
            if event == SEARCH:
                memories.access(returned_ids(fact_ids[index]), moment)
            elif event == ASK:
                asks += 1
                needed = knows(fact_id[index])
                answerable += needed
                old = supersedes[index]
                if old is not None:
                    supersede_asks += 1
                    stale_kept += ~needed & contains(old)
            other_events += 1
            idle += 1
    if pending:
        flush()
    if on_events is not None:
        on_events(done)
    occupancy += memories.sizes * idle
    sizes, corrections = memories.sizes, memories.count_corrections()
    return [
        ReplayCounts(
            events=shared.events + other_events, updates=shared.updates, selections=int(selections[memory]),
            facts_added=shared.facts_added, asks=asks, answerable=int(answerable[memory]),
            supersede_asks=supersede_asks, stale_kept=int(stale_kept[memory]), evictions=int(evictions[memory]),
            evicted_on_arrival=int(on_arrival[memory]),
            churn=int(churn[memory]), occupancy_sum=int(occupancy[memory]),
            corrections_added=shared.corrections_added, corrections_kept=int(corrections[memory]),
            final_size=int(sizes[memory]),
        )
        for memory in range(count)
    ]


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


def make_memory(policy: str, capacity: int | None, params: PolicyParams | None = None, *, seed: int = 0) -> Lockstep:
    """One memory (a lockstep of one) for ``policy`` at ``capacity`` (an ``unlimited`` policy has no cap)."""
    return Lockstep([MemorySpec.of(policy, capacity, seed)], params)


@dataclass(frozen=True)
class ReplayResult:
    policy: str
    capacity: int | None
    counts: ReplayCounts = field(repr=False)
    #: Unanswered questions by the stage that lost them (:data:`.lifecycle.LOSSES`), with a lifecycle.
    losses: tuple[int, ...] | None = None
    #: Ties at the cut and the tie-neutral expectations (:data:`.expectation.TIE_COLUMNS`).
    ties: dict[str, float] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        lost = {} if self.losses is None else {f"lost_{name}": value for name, value in zip(LOSSES, self.losses)}
        metrics = self.counts.metrics(self.capacity)
        if resolve_policy(self.policy).uniform_order and not math.isnan(self.ties.get("answerable_expected", math.nan)):
            # ``random`` is reported as its exact expectation; the seeded draw stays beside it.
            metrics["answerable_draw"] = metrics["answerable_rate"]
            metrics["answerable_rate"] = self.ties["answerable_expected"]
            metrics["correction_survival"] = self.ties["correction_survival_expected"]
        return {"policy": self.policy, "capacity": self.capacity, **self.counts.as_dict(), **metrics, **lost,
                **self.ties}


def replay_specs(
    chunks: Iterable[Chunk],
    specs: Sequence[MemorySpec],
    params: PolicyParams | None = None,
    *,
    on_events: Callable[[int], None] | None = None,
    lifecycle: frozenset[str] = DEFAULT_STAGES,
) -> list[ReplayResult]:
    """Replay every memory of ``specs`` through one pass over ``chunks``, in lockstep.

    ``lifecycle`` names DeerMem's stages to run (:func:`.lifecycle.parse_stages`; DeerMem's
    middleware mode by default, ``frozenset()`` the cap alone); each row says which stage lost
    each unanswered question.
    """
    memories = Lockstep(specs, params)
    stages = TieNeutral(lifecycle, memories)
    counts = replay(chunks, memories, on_events=on_events, lifecycle=stages)
    return [ReplayResult(spec.policy, spec.capacity, found, tuple(lost), stages.columns(memory, found.asks))
            for memory, (spec, found, lost) in enumerate(zip(specs, counts, stages.losses.tolist()))]


def replay_policy(
    chunks: Iterable[Chunk],
    policy: str,
    capacity: int | None,
    params: PolicyParams | None = None,
    *,
    seed: int = 0,
    lifecycle: frozenset[str] = DEFAULT_STAGES,
) -> ReplayResult:
    """Replay one policy at one capacity (an ``unlimited`` policy, ``keep-all``, without a cap)."""
    (result,) = replay_specs(chunks, [MemorySpec.of(policy, capacity, seed)], params, lifecycle=lifecycle)
    return result
