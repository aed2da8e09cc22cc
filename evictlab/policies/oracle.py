"""``oracle``: the upper bound on support retention (a reference point, not deployable).

It reads ``SelectionContext.support_fact_ids``, the facts the case's question needs, which no
deployable policy may see. Support facts rank first (Belady's rule on a one-question pool:
evict what the future never asks for), then every fact by its ``hybrid-v1`` score under the
context's parameters (DeerMem's defaults unless given), then input position. No other policy
keeps more support facts at any capacity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..palette import OKABE_ITO
from ._zoo import KeyedPolicy, RankKey, flag
from .arrays import Params, Signals
from .base import BOUND, Score, SelectionContext
from .hybrid import HybridV1Policy, hybrid_values
from .registry import register
from .signals import fact_key


@register
class OraclePolicy(KeyedPolicy):
    name = "oracle"
    summary = "Upper bound: keep the facts the question needs, then the best by hybrid-v1 score."
    role = BOUND
    color = OKABE_ITO["black"]
    component_names = (*HybridV1Policy.component_names, "support")
    reads_params = True  # orders the facts after the supports by hybrid-v1's score
    value_key = 1

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        hybrid = HybridV1Policy().score(facts, context)
        scores = []
        for index, (fact, score) in enumerate(zip(facts, hybrid)):
            support = fact_key(fact, index) in context.support_fact_ids
            scores.append(Score(score.value, {**score.components, "support": flag(support)}))
        return scores

    def rank_key(self, score: Score) -> RankKey:
        return (-score.components["support"], -score.value)

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        return (-signals.support.astype(np.float64), -hybrid_values(signals, params))
