"""``sieve``: SIEVE (Zhang et al., NSDI 2024), a FIFO queue with one visited bit per entry.

SIEVE keeps its entries in insertion order and sets an entry's visited bit when it is accessed.
To evict, a hand moves from the oldest entry toward newer ones: it clears every set bit it
passes and evicts the first entry whose bit is clear; at the newest entry it wraps back to the
oldest. Mapped onto facts:

* the queue is ``createdAt`` order, as ``fifo``'s (no readable ``createdAt``: the oldest; a
  future one counts as now); of two facts created at the same time the later in the input
  stands nearer the oldest end, since every policy breaks a tie by input position, earlier first;
* an access is a search that returned the fact or a user's confirmation, so the visited bit is
  set when the usage entry's ``accessCount`` or the fact's ``confirmationCount`` is above 0;
* the hand: a snapshot holds no hand and no record of bits a hand cleared, so every selection
  starts the hand at the oldest fact with the bits as the counts give them. One selection is
  then one sweep: it evicts the unvisited facts oldest first, and only when none is left (the
  hand has wrapped, every bit it passed now clear) the visited ones, oldest first. So the rank
  is visited facts before unvisited ones, newer before older within each.

The cleared bits are not written back (the policy reads facts, it does not change them): in a
trace replay the hand starts at the oldest fact at every write and an accessed fact stays
visited, where the paper's cache would have cleared its bit on the hand's first pass.
Score = minus the ``createdAt`` age in days, as ``fifo``'s; components ``visited`` (1 or 0) and
``createdAgeDays``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..palette import OKABE_ITO_SHADES
from ._zoo import KeyedPolicy, RankKey, access_count, confirmation_count, days_since, flag, usage_entries
from .arrays import Params, Signals, age_days
from .base import Score, SelectionContext
from .registry import register
from .signals import fact_fields


@register
class SievePolicy(KeyedPolicy):
    name = "sieve"
    summary = "SIEVE: a FIFO queue whose hand evicts the oldest fact no search or confirmation visited."
    color = OKABE_ITO_SHADES["yellow_sky_blue"]
    component_names = ("visited", "createdAgeDays")
    value_key = 1
    admission = "admit"  # a cache admits the newcomer and evicts a resident (trace replay)

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        scores = []
        for fact, entry in zip(facts, usage_entries(facts, context)):
            age = days_since(context.now, fact_fields(fact).get("createdAt"))
            visited = flag(access_count(entry) > 0 or confirmation_count(fact) > 0)
            scores.append(Score(-age, {"visited": visited, "createdAgeDays": age}))
        return scores

    def rank_key(self, score: Score) -> RankKey:
        return (1.0 - score.components["visited"], -score.value)

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        visited = (signals.access_count > 0) | (signals.confirmation_count > 0)
        return (np.where(visited, 0.0, 1.0), age_days(signals.created_days))
