"""``dory``: Dory's three-signal decay, in capacity form.

score = 0.4 * exp(-0.05 * days since last activation)
      + 0.35 * ln(n + 1) / ln(max n + 1)
      + 0.25 * salience,
salience = 0.3 * deg / max deg + 0.4 * reinf + 0.3 * 2^(-days since last activation / 14),
mapped onto the pools as:

* activations n = the usage entry's ``accessCount`` (searches that returned the fact); the
  frequency term is 0 for every fact when no fact was ever returned;
* last activation = ``lastAccessedAt``, falling back to ``createdAt``;
* reinf = ``min(1, confirmationCount)``: 1 once the user explicitly confirmed the fact;
* deg = 0 (the store is flat, there is no graph), so that term is 0.

Capacity adaptation of Dory's two exemptions from decay:

* core facts, the top 20 % by salience (``floor(0.2 * n)`` facts with salience > 0, ties by
  input position), rank by score / 0.3 (a capacity form of Dory's x0.3 core floors);
* a fact with fewer than 2 activations is protected: Dory never archives it for decay. In
  capacity form, the facts Dory's threshold form would archive now (not protected, not core,
  score below the 0.15 archive threshold) are evicted before every other fact; protection
  does not otherwise move a fact up, so a fact with many activations is never ranked below a
  never-used one merely for being used.

The score reported is the ranking value (divided by 0.3 for core facts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..palette import OKABE_ITO_SHADES
from ._zoo import (
    KeyedPolicy,
    RankKey,
    access_count,
    confirmation_count,
    flag,
    last_access_days,
    usage_entries,
)
from .arrays import Params, Signals, age_days
from .base import Parameter, Score, SelectionContext
from .registry import register
from .signals import decay

RECENCY_WEIGHT, FREQUENCY_WEIGHT, SALIENCE_WEIGHT = 0.4, 0.35, 0.25
RECENCY_RATE_PER_DAY = 0.05
REINFORCEMENT_WEIGHT, SALIENCE_RECENCY_WEIGHT = 0.4, 0.3
SALIENCE_HALF_LIFE_DAYS = 14
PROTECTED_BELOW_ACTIVATIONS = 2
CORE_SHARE = 0.2
CORE_FLOOR = 0.3
ARCHIVE_THRESHOLD = 0.15


def core_positions(salience: Sequence[float]) -> set[int]:
    """The top 20 % of the pool by salience (salience > 0 only), ties by input position."""
    count = math.floor(CORE_SHARE * len(salience))
    ranked = sorted(range(len(salience)), key=lambda index: (-salience[index], index))
    return {index for index in ranked[:count] if salience[index] > 0}


@register
class DoryPolicy(KeyedPolicy):
    name = "dory"
    summary = "Dory's recency + frequency + salience decay; core boosted, archivable first out."
    color = OKABE_ITO_SHADES["reddish_purple_dark"]
    component_names = ("recency", "frequency", "salience", "core", "archivable")
    value_key = 1
    parameters = (
        Parameter("recency_rate_per_day", RECENCY_RATE_PER_DAY, 0, 100, doc="recency's decay rate"),
        Parameter("salience_half_life_days", SALIENCE_HALF_LIFE_DAYS, 0.01, 36500, doc="salience recency half-life"),
        Parameter("archive_threshold", ARCHIVE_THRESHOLD, 0, 1, doc="score below which Dory archives a fact"),
    )

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        entries = usage_entries(facts, context)
        activations = [access_count(entry) for entry in entries]
        ages = [last_access_days(fact, entry, context.now) for fact, entry in zip(facts, entries)]
        most = max(activations, default=0)
        recency = [math.exp(-self.values["recency_rate_per_day"] * age) for age in ages]
        frequency = [math.log(n + 1) / math.log(most + 1) if most else 0.0 for n in activations]
        salience = [
            REINFORCEMENT_WEIGHT * min(1, confirmation_count(fact))
            + SALIENCE_RECENCY_WEIGHT * decay(age, self.values["salience_half_life_days"])
            for fact, age in zip(facts, ages)
        ]
        core = core_positions(salience)
        scores = []
        for index in range(len(facts)):
            raw = (
                RECENCY_WEIGHT * recency[index]
                + FREQUENCY_WEIGHT * frequency[index]
                + SALIENCE_WEIGHT * salience[index]
            )
            is_core = index in core
            protected = activations[index] < PROTECTED_BELOW_ACTIVATIONS
            archivable = not protected and not is_core and raw < self.values["archive_threshold"]
            components = {
                "recency": recency[index],
                "frequency": frequency[index],
                "salience": salience[index],
                "core": flag(is_core),
                "archivable": flag(archivable),
            }
            scores.append(Score(raw / CORE_FLOOR if is_core else raw, components))
        return scores

    def rank_key(self, score: Score) -> RankKey:
        return (score.components["archivable"], -score.value)

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        numerics, values, valid = params.numerics, self.values, signals.valid
        activations = signals.access_count
        age = age_days(signals.accessed_days, signals.created_days)
        most = np.where(valid, activations, 0).max(axis=-1, keepdims=True, initial=0)
        recency = numerics.exp(-values["recency_rate_per_day"] * age)
        logs = numerics.log(activations + 1) / numerics.log(np.maximum(most, 1) + 1)
        frequency = np.where(most > 0, logs, 0.0)
        salience = REINFORCEMENT_WEIGHT * np.minimum(1, signals.confirmation_count) + SALIENCE_RECENCY_WEIGHT * (
            numerics.decay(age, values["salience_half_life_days"])
        )
        # Core: the top 20 % of each pool by salience (salience > 0), ties by input position.
        by_salience = np.argsort(np.where(valid, -salience, np.inf), axis=-1, kind="stable")
        ranks = np.empty_like(by_salience)
        np.put_along_axis(ranks, by_salience, np.arange(signals.shape[-1]), axis=-1)
        count = np.floor(CORE_SHARE * valid.sum(axis=-1, keepdims=True))
        core = valid & (ranks < count) & (salience > 0)
        raw = RECENCY_WEIGHT * recency + FREQUENCY_WEIGHT * frequency + SALIENCE_WEIGHT * salience
        archivable = (activations >= PROTECTED_BELOW_ACTIVATIONS) & ~core & (raw < values["archive_threshold"])
        return (archivable.astype(np.float64), -np.where(core, raw / CORE_FLOOR, raw))
