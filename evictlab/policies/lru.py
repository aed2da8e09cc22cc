"""``lru``: least recently used goes first.

Score = last access, represented as minus the days since it (so more recent is higher). Last
access is the usage entry's ``lastAccessedAt`` (the last search that returned the fact),
falling back to ``createdAt`` for a fact no search returned; neither readable -> score
``-inf``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..palette import OKABE_ITO
from ._zoo import last_access_days, usage_entries
from .arrays import Params, Signals, age_days
from .base import Policy, Score, SelectionContext
from .registry import register


@register
class LruPolicy(Policy):
    name = "lru"
    admission = "admit"  # a cache admits the newcomer and evicts a resident (trace replay)
    summary = "Least recently used: evict the facts whose last search hit is oldest."
    color = OKABE_ITO["bluish_green"]
    component_names = ("accessAgeDays",)

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        scores = []
        for fact, entry in zip(facts, usage_entries(facts, context)):
            age = last_access_days(fact, entry, context.now)
            scores.append(Score(-age, {"accessAgeDays": age}))
        return scores

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        return (age_days(signals.accessed_days, signals.created_days),)  # minus the score
