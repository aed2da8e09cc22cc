"""``memoryos-heat``: MemoryOS's segment heat, evict the coldest.

H = N_visit + L + exp(-hours since last access / 24) (alpha = beta = gamma = 1), mapped onto
the pools as:

* N_visit = the usage entry's ``accessCount`` (searches that returned the fact; 0 without one);
* L = ``confirmationCount`` (explicit user confirmations, the pools' supporting mentions);
* last access = ``lastAccessedAt``, falling back to ``createdAt`` (MemoryOS starts a segment's
  access time at its creation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..palette import OKABE_ITO
from ._zoo import access_count, confirmation_count, last_access_days, usage_entries
from .arrays import Params, Signals, age_days
from .base import Parameter, Policy, Score, SelectionContext
from .registry import register

HOURS_PER_DAY = 24
RECENCY_TIME_CONSTANT_HOURS = 24


@register
class MemoryOsHeatPolicy(Policy):
    name = "memoryos-heat"
    admission = "admit"  # a cache admits the newcomer and evicts a resident (trace replay)
    summary = "MemoryOS heat: visits + confirmations + exp(-hours since last access / 24)."
    color = OKABE_ITO["orange"]
    component_names = ("visits", "confirmations", "recency")
    parameters = (
        Parameter("time_constant_hours", RECENCY_TIME_CONSTANT_HOURS, 0.01, 876000, doc="recency's e-folding time"),
    )

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        scores = []
        for fact, entry in zip(facts, usage_entries(facts, context)):
            visits = access_count(entry)
            confirmations = confirmation_count(fact)
            hours = HOURS_PER_DAY * last_access_days(fact, entry, context.now)
            recency = math.exp(-hours / self.values["time_constant_hours"])
            value = visits + confirmations + recency
            components = {
                "visits": float(visits),
                "confirmations": float(confirmations),
                "recency": recency,
            }
            scores.append(Score(value, components))
        return scores

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        hours = HOURS_PER_DAY * age_days(signals.accessed_days, signals.created_days)
        recency = params.numerics.exp(-hours / self.values["time_constant_hours"])
        visits = signals.access_count + signals.confirmation_count  # integers first, as in score
        return (-(visits + recency),)
