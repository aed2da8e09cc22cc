"""Ties at the cut line in a replay, and the exact expectation over the order of tied facts.

:class:`TieNeutral` is the replay's :class:`.stages.Lifecycle` plus, for the memories of a
policy whose rank key is the fact's own (:func:`static_key`: ``confidence``; ``random``, all
tied), the columns docs/traces.md ("Ties") defines. Why the expectation is exact: with a static
key the keys a memory holds do not depend on the tie orders (under :data:`EXACT_STAGES`), so
at each selection the ``g`` facts tied at the cut keep ``s`` members whichever they are, and a
member survives with probability ``s / g`` whatever its past; a fact's chance is the product
over the selections it tied at (``random``: ``k / n`` at each). Chances below 1e-30 are dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...policies.arrays import category_name
from ...policies.hybrid import CORRECTION
from ...policies.modifiers import resolve_policy
from ...policies.signals import read_confidence
from .memory import Lockstep
from .stages import Lifecycle

#: Stages whose outcome does not depend on which of several tied facts a memory holds.
EXACT_STAGES = frozenset({"reinforcement", "admission", "storage"})
TIE_COLUMNS = ("tied_selection_rate", "answerable_expected", "correction_survival_expected")
NEGLIGIBLE = 1e-30


def static_key(policy: str) -> Callable[[dict[str, Any]], float] | None:
    """The rank key of ``policy`` as a function of one ``add`` row (higher is kept), or None
    when its rank depends on more than the fact (recency, usage, modifiers)."""
    selector = resolve_policy(policy)
    if getattr(selector, "uniform_order", False) and policy == selector.name:
        return lambda row: 0.0
    if policy == "confidence":
        return lambda row: read_confidence(row["confidence"])
    return None


class TieNeutral(Lifecycle):
    """The lifecycle of a replay, counting ties at the cut and the tie-neutral chances (above)."""

    def __init__(self, stages: frozenset[str], memories: Lockstep) -> None:
        super().__init__(stages, memories)
        self.policy = [spec.policy for spec in memories.specs]
        self.rank = [static_key(policy) for policy in self.policy]
        self.keys_of: dict[str, dict[str, float]] = {policy: {} for policy, rank in zip(self.policy, self.rank) if rank}
        self.exact = stages <= EXACT_STAGES
        self.chance: list[dict[str, float]] = [{} for _ in self.rank]
        self.corrections: list[str] = []
        self.content: dict[str, list[str]] = {}  # content key -> fact ids
        count = len(self.rank)
        self.cuts, self.tied, self.expected = (np.zeros(count) for _ in range(3))

    def before_selection(self, write: Any) -> None:
        super().before_selection(write)
        for row in write.rows:
            fact_id = row["fact_id"]
            self.content.setdefault(self.content_key(fact_id), []).append(fact_id)
            if category_name(row["category"]) == CORRECTION:
                self.corrections.append(fact_id)
        for memory, rank in enumerate(self.rank):
            if rank is None:
                continue
            held, keys = self.memories.contains, self.keys_of[self.policy[memory]]
            for row in write.rows:
                keys[row["fact_id"]] = rank(row)
                if held(row["fact_id"])[memory]:
                    self.chance[memory][row["fact_id"]] = 1.0

    def after_selection(self, write: Any, evicted: list[list[str]]) -> None:
        for memory, gone in enumerate(evicted):
            if gone and self.rank[memory] is not None:
                self._cut(memory, self.memories.kept_ids(memory), gone)
        super().after_selection(write, evicted)

    def _cut(self, memory: int, kept: Sequence[str], gone: Sequence[str]) -> None:
        keys = self.keys_of[self.policy[memory]]
        line = min(keys[fact_id] for fact_id in kept) if kept else np.inf
        tied_kept = sum(keys[fact_id] == line for fact_id in kept)
        tied = tied_kept + sum(keys[fact_id] == line for fact_id in gone)
        self.cuts[memory] += 1
        self.tied[memory] += tied > tied_kept
        share = tied_kept / tied if tied else 0.0
        chance = self.chance[memory]
        for fact_id in list(chance):
            if keys[fact_id] < line:
                del chance[fact_id]
            elif keys[fact_id] == line:
                chance[fact_id] *= share
                if chance[fact_id] < NEGLIGIBLE:
                    del chance[fact_id]

    def answerable(self, fact_id: str) -> np.ndarray:
        found = super().answerable(fact_id)
        unique = fact_id in self.ordinals and len(self.content[self.content_key(fact_id)]) == 1
        for memory, chance in enumerate(self.chance):
            self.expected[memory] += chance.get(fact_id, 0.0) if unique else np.nan
        return found

    def columns(self, memory: int, asks: int) -> dict[str, float]:
        """The memory's :data:`TIE_COLUMNS` (NaN where undefined, above)."""
        if self.rank[memory] is None:
            return dict.fromkeys(TIE_COLUMNS, np.nan)
        exact = self.exact and asks > 0
        chance = self.chance[memory]
        survival = sum(chance.get(fact_id, 0.0) for fact_id in self.corrections)
        return {
            "tied_selection_rate": self.tied[memory] / self.cuts[memory] if self.cuts[memory] else np.nan,
            "answerable_expected": self.expected[memory] / asks if exact else np.nan,
            "correction_survival_expected": (survival / len(self.corrections)
                                             if self.exact and self.corrections else np.nan),
        }
