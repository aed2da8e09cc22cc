"""``generative-agents``: the retrieval score of Generative Agents, used for eviction.

score = w_r * recency + w_i * importance + w_q * relevance, each term min-max normalised over
the pool (a term that is equal for every fact normalises to 0); the lowest score is evicted.

* recency = ``0.995 ** hours since the last access`` (true time decay, not the rank form),
  last access = the usage entry's ``lastAccessedAt``, falling back to ``createdAt``;
* importance = ``1 + 9 * confidence`` (the 1-10 poignancy scale, from the bounded confidence
  in place of an LLM rating);
* relevance = 0 for every fact: the pools carry no probe queries (the question is held out),
  so the term is constant and drops out.

Weights: the paper's (1, 1, 1) for ``generative-agents``; the released code's
(w_r, w_q, w_i) = (0.5, 3, 2) for ``generative-agents-code``. The components are the three
normalised terms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..palette import OKABE_ITO_SHADES
from ._zoo import last_access_days, min_max, usage_entries
from .arrays import Params, Signals, age_days
from .base import Parameter, Policy, Score, SelectionContext
from .registry import register
from .signals import fact_fields, read_confidence

RECENCY_DECAY_PER_HOUR = 0.995
HOURS_PER_DAY = 24


@register
class GenerativeAgentsPolicy(Policy):
    name = "generative-agents"
    summary = "Generative Agents retrieval score (recency + importance + relevance), paper weights."
    # The two generative-agents variants share a hue, two lightnesses: related, yet apart.
    color = OKABE_ITO_SHADES["vermillion_dark"]
    component_names = ("recency", "importance", "relevance")
    parameters = (
        Parameter("decay_per_hour", RECENCY_DECAY_PER_HOUR, 0.000001, 1, doc="recency factor per hour"),
    )
    recency_weight = 1.0
    importance_weight = 1.0
    relevance_weight = 1.0

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        recency = [
            self.values["decay_per_hour"] ** (HOURS_PER_DAY * last_access_days(fact, entry, context.now))
            for fact, entry in zip(facts, usage_entries(facts, context))
        ]
        importance = [
            1 + 9 * read_confidence(fact_fields(fact).get("confidence")) for fact in facts
        ]
        relevance = [0.0] * len(facts)
        scores = []
        for terms in zip(min_max(recency), min_max(importance), min_max(relevance)):
            recent, important, relevant = terms
            value = (
                self.recency_weight * recent
                + self.importance_weight * important
                + self.relevance_weight * relevant
            )
            scores.append(Score(value, dict(zip(self.component_names, terms))))
        return scores

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        hours = HOURS_PER_DAY * age_days(signals.accessed_days, signals.created_days)
        recency = params.numerics.power(self.values["decay_per_hour"], hours)
        importance = 1 + 9 * signals.confidence
        relevance = np.zeros(signals.shape)
        terms = [pool_min_max(term, signals.valid) for term in (recency, importance, relevance)]
        value = (
            self.recency_weight * terms[0] + self.importance_weight * terms[1] + self.relevance_weight * terms[2]
        )
        return (-value,)


def pool_min_max(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """:func:`._zoo.min_max` over each row's valid facts (a constant row normalises to 0)."""
    low = np.where(valid, values, np.inf).min(axis=-1, keepdims=True, initial=np.inf)
    high = np.where(valid, values, -np.inf).max(axis=-1, keepdims=True, initial=-np.inf)
    with np.errstate(invalid="ignore"):  # a row with no valid fact
        spread = np.where(high == low, 1.0, high - low)
        return np.where(high == low, 0.0, (values - low) / spread)


@register
class GenerativeAgentsCodePolicy(GenerativeAgentsPolicy):
    name = "generative-agents-code"
    summary = "Generative Agents retrieval score with the released code's weights (0.5, 3, 2)."
    color = OKABE_ITO_SHADES["vermillion_darker"]
    recency_weight = 0.5
    importance_weight = 2.0
    relevance_weight = 3.0
