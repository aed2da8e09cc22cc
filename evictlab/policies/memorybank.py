"""``memorybank`` and ``memorybank-seeded``: MemoryBank's Ebbinghaus forgetting curve.

Retention R = exp(-days since the last recall / S) with strength S = 1 + min(recalls, 2),
mapped onto the pools as:

* recalls = ``accessCount`` (searches that returned the fact) + ``confirmationCount``
  (explicit user confirmations): both are moments the memory was brought back;
* last recall = the latest of ``lastAccessedAt``, ``lastConfirmedAt`` and ``createdAt``
  (``inf`` days, so R = 0, when none is readable).

A fact not recalled for 30 days or more ("expired", at whatever strength it has) is dropped
before any other fact. ``memorybank`` then evicts the lowest R. ``memorybank-seeded`` is the
faithful, probabilistic form: each fact survives a seeded draw with probability R (draws as in
``random``, see :func:`._zoo.seeded_draws`); survivors rank before non-survivors, each group
in the deterministic order, so the k kept facts are the survivors trimmed by R, or all of
them refilled by R.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..palette import OKABE_ITO_SHADES
from ._zoo import (
    KeyedPolicy,
    RankKey,
    access_count,
    confirmation_count,
    days_since_latest,
    flag,
    seeded_draws,
    usage_entries,
)
from .arrays import Params, Signals, age_days
from .base import Parameter, Score, SelectionContext
from .registry import register
from .signals import fact_fields

MAX_STRENGTH_GAIN = 2
EXPIRY_DAYS = 30


def memorybank_score(
    fact: Any, entry: Mapping[str, Any], context: SelectionContext, expiry_days: float = EXPIRY_DAYS
) -> Score:
    fields = fact_fields(fact)
    recalls = access_count(entry) + confirmation_count(fact)
    strength = 1 + min(recalls, MAX_STRENGTH_GAIN)
    age = days_since_latest(
        context.now,
        entry.get("lastAccessedAt"),
        fields.get("lastConfirmedAt"),
        fields.get("createdAt"),
    )
    retention = math.exp(-age / strength)
    components = {
        "strength": float(strength),
        "recallAgeDays": age,
        "expired": flag(age >= expiry_days),
    }
    return Score(retention, components)


@register
class MemoryBankPolicy(KeyedPolicy):
    name = "memorybank"
    summary = (
        "MemoryBank forgetting curve: drop facts unrecalled for 30 days, then the lowest retention."
    )
    # The two memorybank variants share a hue, two lightnesses: related, yet apart.
    color = OKABE_ITO_SHADES["bluish_green_darker"]
    component_names: tuple[str, ...] = ("strength", "recallAgeDays", "expired")
    parameters = (Parameter("expiry_days", EXPIRY_DAYS, 0, 36500, doc="days unrecalled after which a fact expires"),)
    value_key = 1

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        entries = usage_entries(facts, context)
        expiry = self.values["expiry_days"]
        return [memorybank_score(fact, entry, context, expiry) for fact, entry in zip(facts, entries)]

    def rank_key(self, score: Score) -> RankKey:
        return (score.components["expired"], -score.value)

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        retention, expired = self.retention(signals, params)
        return (expired, -retention)

    def retention(self, signals: Signals, params: Params) -> tuple[np.ndarray, np.ndarray]:
        """:func:`memorybank_score`'s retention and expired flag (1.0 or 0.0) of every fact."""
        recalls = signals.access_count + signals.confirmation_count
        strength = 1 + np.minimum(recalls, MAX_STRENGTH_GAIN)
        ages = (age_days(days) for days in (signals.accessed_days, signals.confirmed_days, signals.created_days))
        age = np.minimum.reduce(list(ages))
        retention = params.numerics.exp(-age / strength)
        return retention, (age >= self.values["expiry_days"]).astype(np.float64)


@register
class MemoryBankSeededPolicy(MemoryBankPolicy):
    name = "memorybank-seeded"
    summary = "MemoryBank forgetting curve, faithful form: each fact survives with probability R."
    seeded = True
    color = OKABE_ITO_SHADES["bluish_green_light"]
    component_names = (*MemoryBankPolicy.component_names, "survived")
    value_key = 2

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        draws = seeded_draws(type(self).name, facts, context.seed)  # the same draws whatever the parameters
        return [
            Score(score.value, {**score.components, "survived": flag(draw < score.value)})
            for score, draw in zip(super().score(facts, context), draws)
        ]

    def rank_key(self, score: Score) -> RankKey:
        return (-score.components["survived"], *super().rank_key(score))

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        retention, expired = self.retention(signals, params)
        survived = signals.draws(type(self).name, params.seeds) < retention
        return (-survived.astype(np.float64), expired, -retention)
