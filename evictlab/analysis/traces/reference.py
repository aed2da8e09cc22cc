"""The scalar reference memory: one memory as DeerMem stores it, for the tests and the audit.

Fact dicts with ISO timestamps and a usage map, decided by
:func:`evictlab.selection.deermem.select_facts_for_capacity` (DeerMem's two policies) or the
policy's own ``select``; it writes DeerMem's audit events. The tests compare the lockstep
(:class:`.memory.Lockstep`) with it write by write.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ...policies import DEERMEM_POLICIES, PolicyParams, SelectionContext
from ...policies.arrays import category_name
from ...policies.hybrid import CORRECTION
from ...policies.modifiers import resolve_policy
from ...policies.signals import read_count
from ...selection.audit import audit_event, update_usage
from ...selection.deermem import select_facts_for_capacity
from .memory import MAX_CAPACITY, MemorySpec, admission_split
from .schema import from_us, iso


class ReferenceMemory:
    """One memory as DeerMem stores it (fact dicts, a usage map), any policy: the scalar reference.

    Each selection's input is DeerMem's (spec 1.12 C6): the facts stored before the update,
    sorted by id as storage returns them (1.14), then the update's new facts in order; the
    facts left are stored sorted by id. It has the collection interface of :class:`Lockstep`
    for M = 1.
    """

    select_every_write: bool = False

    def __init__(
        self,
        policy: str,
        capacity: int | None,
        params: PolicyParams | None = None,
        *,
        seed: int = 0,
        audit: list[dict[str, Any]] | None = None,
    ) -> None:
        spec = MemorySpec.of(policy, capacity, seed)
        self.specs = [spec]
        self.policy, self.capacity = spec.policy, spec.capacity
        self.capacities = np.array([MAX_CAPACITY + 1 if self.capacity is None else self.capacity])
        self.capped = np.array([self.capacity is not None])
        self.params = params or PolicyParams()
        self.seed = seed
        self.audit = audit  # when a list: DeerMem's audit events are appended to it (spec 1.6)
        self.selector = None if policy in DEERMEM_POLICIES else resolve_policy(policy)
        self.facts: list[dict[str, Any]] = []
        self.ids: set[str] = set()
        self.usage: dict[str, Any] = {}
        self.arrivals = 0  # facts added since the last selection
        self.selected = np.array([False])  # whether the last select decided

    def __len__(self) -> int:
        return 1

    @property
    def sizes(self) -> np.ndarray:
        return np.array([len(self.facts)])

    def contains(self, fact_id: str) -> np.ndarray:
        return np.array([fact_id in self.ids])

    def kept_ids(self, memory: int = 0) -> list[str]:
        return sorted(fact["id"] for fact in self.facts)

    def count_held(self, fact_ids: Iterable[str]) -> np.ndarray:
        return np.array([sum(fact_id in self.ids for fact_id in fact_ids)])

    def count_corrections(self) -> np.ndarray:
        return np.array([sum(category_name(fact.get("category", "")) == CORRECTION for fact in self.facts)])

    def stamp(self, fact_ids: set[str], now: int) -> None:
        stamp = iso(now)
        for fact in self.facts:
            if fact["id"] in fact_ids:
                fact["lastConfirmedAt"] = stamp
                fact["confirmationCount"] = read_count(fact.get("confirmationCount")) + 1

    def add(self, fact_id: str, confidence: float, category: str, now: int) -> None:
        self.facts.append({"id": fact_id, "confidence": confidence, "category": category, "createdAt": iso(now)})
        self.ids.add(fact_id)
        self.arrivals += 1

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

    def select(self, now: int) -> list[list[str]]:
        self.selected = np.array([self.capacity is not None and (len(self.facts) > self.capacity
                                                                 or self.select_every_write)])
        if self.capacity is None or not self.selected[0]:
            self.arrivals = 0
            return [[]]
        moment = from_us(now)
        arrivals, self.arrivals = self.arrivals, 0
        snapshot = len(self.facts) - min(arrivals, len(self.facts))
        self.facts = [*sorted(self.facts[:snapshot], key=_fact_id), *self.facts[snapshot:]]
        held: list[dict[str, Any]] = []
        dropped: list[dict[str, Any]] = []
        if self.selector is None:
            decision = self._deermem_decision(self.policy, moment)
        else:
            pool, room, held, dropped = admission_split(self.selector, self.facts, arrivals, self.capacity)
            context = SelectionContext(now=moment, usage=self.usage, params=self.params, seed=self.seed)
            decision = self.selector.select(pool, room, context)
        if self.audit is not None:
            # Shadow mode (spec 1.5): under confidence, hybrid-v1's decision feeds the audit only.
            shadow = self._deermem_decision("hybrid-v1", moment) if self.policy == "confidence" else None
            event = audit_event(decision, max_facts=self.capacity, occurred_at=moment, shadow=shadow)
            if event is not None:
                self.audit.append(event)
        evicted = [item.fact_id for item in decision.evicted] + [fact["id"] for fact in dropped]
        self.facts = sorted([*decision.kept, *held], key=_fact_id)
        self._forget(evicted)
        return [evicted]

    def _forget(self, fact_ids: list[str]) -> None:
        self.ids.difference_update(fact_ids)
        for fact_id in fact_ids:
            self.usage.pop(fact_id, None)  # spec 1.6: metadata of deleted facts is cleared

    def _deermem_decision(self, policy: str, moment: Any) -> Any:
        assert self.capacity is not None  # only a capped memory selects
        return select_facts_for_capacity(
            self.facts, max_facts=self.capacity, policy=policy, usage=self.usage, now=moment, **self.params.as_dict()
        )


def _fact_id(fact: dict[str, Any]) -> str:
    return fact["id"]
