"""``lfu-aging``: least frequently used, with the count aged by time since the last access.

Score = ``accessCount * 2^(-days since last access / 30)``. ``accessCount`` is the usage
entry's count of searches that returned the fact (0 without an entry); last access is
``lastAccessedAt``, falling back to ``createdAt``. Equal scores (for example every fact no
search returned, all 0) fall back to LRU: the more recently accessed fact ranks first, then
the input position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..palette import OKABE_ITO
from ._zoo import KeyedPolicy, RankKey, access_count, last_access_days, usage_entries
from .arrays import Params, Signals, age_days
from .base import Parameter, Score, SelectionContext
from .registry import register
from .signals import decay

AGING_HALF_LIFE_DAYS = 30


@register
class LfuAgingPolicy(KeyedPolicy):
    name = "lfu-aging"
    admission = "admit"  # a cache admits the newcomer and evicts a resident (trace replay)
    summary = (
        "Least frequently used, counts halved every 30 days since the last access; ties by LRU."
    )
    color = OKABE_ITO["reddish_purple"]
    component_names = ("accessCount", "accessAgeDays")
    parameters = (
        Parameter("half_life_days", AGING_HALF_LIFE_DAYS, 0.01, 36500, doc="days for an access count to halve"),
    )

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        scores = []
        for fact, entry in zip(facts, usage_entries(facts, context)):
            count = access_count(entry)
            age = last_access_days(fact, entry, context.now)
            value = count * decay(age, self.values["half_life_days"])
            scores.append(Score(value, {"accessCount": float(count), "accessAgeDays": age}))
        return scores

    def rank_key(self, score: Score) -> RankKey:
        return (-score.value, score.components["accessAgeDays"])

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        age = age_days(signals.accessed_days, signals.created_days)
        value = signals.access_count * params.numerics.decay(age, self.values["half_life_days"])
        return (-value, age)
