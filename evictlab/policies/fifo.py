"""``fifo``: oldest-first, the order a plain append-only store forgets in.

Score = ``createdAt``, represented as minus its age in days (so newer is higher); the oldest
fact is evicted first. A fact with no readable ``createdAt`` is the oldest (score ``-inf``);
a future ``createdAt`` counts as now.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..palette import OKABE_ITO
from ._zoo import days_since
from .arrays import Params, Signals, age_days
from .base import Policy, Score, SelectionContext
from .registry import register
from .signals import fact_fields


@register
class FifoPolicy(Policy):
    name = "fifo"
    admission = "admit"  # a cache admits the newcomer and evicts a resident (trace replay)
    summary = "Oldest-first: evict the facts created longest ago."
    color = OKABE_ITO["sky_blue"]
    component_names = ("createdAgeDays",)

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        scores = []
        for fact in facts:
            age = days_since(context.now, fact_fields(fact).get("createdAt"))
            scores.append(Score(-age, {"createdAgeDays": age}))
        return scores

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        return (age_days(signals.created_days),)  # minus the score
