"""Ties at the cut line in a replay, and the exact expectation over the order of tied facts.

:class:`TieNeutral` is the replay's :class:`.stages.Lifecycle` plus, for the memories of a
policy whose rank key is the fact's own (:func:`static_key`: ``Policy.trace_key``,
``confidence``'s; ``random``, all tied), the columns docs/traces.md ("Ties") defines. Why the
expectation is exact: with a static key the keys a memory holds do not depend on the tie
orders (under :data:`EXACT_STAGES`), so at each selection the ``g`` facts tied at the cut keep
``s`` members whichever they are, and a member survives with probability ``s / g`` whatever
its past; a fact's chance is the product over the selections it tied at (``random``: ``k / n``
at each). Chances below 1e-30 are dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...policies.arrays import category_name
from ...policies.hybrid import CORRECTION
from ...policies.modifiers import resolve_policy
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
    if policy != selector.name:  # not in the canonical spelling
        return None
    return (lambda row: 0.0) if selector.uniform_order else selector.trace_key()


class TieNeutral(Lifecycle):
    """The lifecycle of a replay, counting ties at the cut and the tie-neutral chances (above).

    Each policy with a :func:`static_key` keeps it as a column of the fact table
    (``static_key:POLICY``); the chances are arrays of (memory, fact ordinal, key, chance)
    entries, one per fact a memory may hold with a chance of at least :data:`NEGLIGIBLE`, kept
    only when the expectation is exact (``exact``: the stages are :data:`EXACT_STAGES`; under
    others its columns are NaN, and a fact's entry in a ``random`` memory at cap 500 outlives
    about 34,000 cuts, so they grew with the trace for nothing).
    """

    def __init__(self, stages: frozenset[str], memories: Lockstep) -> None:
        super().__init__(stages, memories)
        self.policy = [spec.policy for spec in memories.specs]
        self.rank = {policy: rank for policy in self.policy if (rank := static_key(policy)) is not None}
        self.static = np.array([policy in self.rank for policy in self.policy])
        for policy in self.rank:
            memories.table.column(f"static_key:{policy}", np.float64, np.nan)
        self.exact = stages <= EXACT_STAGES
        self._memory, self._ordinal = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        self._key, self._chance = np.zeros(0), np.zeros(0)
        self.corrections: list[int] = []  # ordinals, in the order added
        self.copies: Counter[str] = Counter()  # content key -> facts added under it
        count = len(self.policy)
        self.cuts, self.tied, self.expected = (np.zeros(count) for _ in range(3))

    def _keys(self, members: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The static keys of table ``rows`` ((K, ...), one row of them per member) under each member's policy."""
        keys = np.empty(rows.shape)
        of = np.array([self.policy[member] for member in members.tolist()])
        for policy in self.rank:
            mine = of == policy
            keys[mine] = self.memories.table.extra[f"static_key:{policy}"][rows[mine]]
        return keys

    def before_selection(self, write: Any) -> None:
        super().before_selection(write)
        table = self.memories.table
        if not write.rows:
            return
        ordinals = np.array(self._offered(write.rows))
        rows = np.array([table.index[row["fact_id"]] for row in write.rows])
        for policy, rank in self.rank.items():
            table.extra[f"static_key:{policy}"][rows] = [rank(row) for row in write.rows]
        if not self.exact:
            return
        static = np.flatnonzero(self.static)
        held = np.nonzero(self.memories.present[static[:, None], rows[None, :]])
        members = static[held[0]]
        self._memory, self._ordinal = np.r_[self._memory, members], np.r_[self._ordinal, ordinals[held[1]]]
        self._key = np.r_[self._key, self._keys(members, rows[held[1]])]
        self._chance = np.r_[self._chance, np.ones(len(members))]

    def refuse(self, rows: Sequence[Mapping[str, Any]]) -> None:
        super().refuse(rows)
        self._offered(rows)  # a refused fact is held with chance 0, its correction counted as added

    def _offered(self, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        """Count the update's facts under their content keys and its corrections; their ordinals."""
        ordinals = [self.ordinals[row["fact_id"]] for row in rows]
        for row, ordinal in zip(rows, ordinals):
            self.copies[self.content_key(row["fact_id"])] += 1
            if category_name(row["category"]) == CORRECTION:
                self.corrections.append(ordinal)
        return ordinals

    def after_selection(self, write: Any, evicted: list[list[str]]) -> None:
        cut = [memory for memory, gone in enumerate(evicted) if gone and self.static[memory]]
        if cut:
            self._cut(np.array(cut), evicted)
        super().after_selection(write, evicted)

    def _cut(self, members: np.ndarray, evicted: list[list[str]]) -> None:
        """Every member's cut line (its lowest kept key), ties at it, and the chances it changes."""
        memories = self.memories
        rows, valid = memories.stored(members)
        keys = self._keys(members, rows)
        line = np.where(valid, keys, np.inf).min(axis=1, initial=np.inf)
        tied_kept = (valid & (keys == line[:, None])).sum(axis=1)
        which = np.repeat(np.arange(len(members)), [len(evicted[member]) for member in members.tolist()])
        gone = np.array([memories.table.index[fact_id] for member in members.tolist() for fact_id in evicted[member]])
        tied_gone = self._keys(members[which], gone) == line[which]
        tied = tied_kept + np.bincount(which[tied_gone], minlength=len(members))
        self.cuts[members] += 1
        self.tied[members] += tied > tied_kept
        if not self.exact:
            return
        share = np.divide(tied_kept, tied, out=np.zeros(len(members)), where=tied > 0)
        position = np.full(len(self.policy), -1)
        position[members] = np.arange(len(members))
        entries = np.flatnonzero(position[self._memory] >= 0)
        at = position[self._memory[entries]]
        key, chance = self._key[entries], self._chance[entries]
        equal = key == line[at]
        chance = np.where(equal, chance * share[at], chance)
        self._chance[entries] = chance
        drop = entries[(key < line[at]) | (equal & (chance < NEGLIGIBLE))]
        if len(drop):
            keep = np.ones(len(self._memory), dtype=bool)
            keep[drop] = False
            self._memory, self._ordinal = self._memory[keep], self._ordinal[keep]
            self._key, self._chance = self._key[keep], self._chance[keep]

    def answerable(self, fact_id: str) -> np.ndarray:
        found = super().answerable(fact_id)
        if not self.exact:
            return found
        if fact_id in self.ordinals and self.copies[self.content_key(fact_id)] == 1:
            hit = self._ordinal == self.ordinals[fact_id]
            np.add.at(self.expected, self._memory[hit], self._chance[hit])
        else:
            self.expected[:] = np.nan
        return found

    def columns(self, memory: int, asks: int) -> dict[str, float]:
        """The memory's :data:`TIE_COLUMNS` (NaN where undefined, above)."""
        if not self.static[memory]:
            return dict.fromkeys(TIE_COLUMNS, np.nan)
        exact = self.exact and asks > 0
        mine = (self._memory == memory) & np.isin(self._ordinal, self.corrections)
        survival = sum(self._chance[mine][np.argsort(self._ordinal[mine])].tolist())  # in the order added
        return {
            "tied_selection_rate": self.tied[memory] / self.cuts[memory] if self.cuts[memory] else np.nan,
            "answerable_expected": self.expected[memory] / asks if exact else np.nan,
            "correction_survival_expected": (survival / len(self.corrections)
                                             if self.exact and self.corrections else np.nan),
        }
