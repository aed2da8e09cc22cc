"""``keep-all``: the no-eviction bound (infinite capacity), a reference point.

It is meant for capacity >= the pool size, where it keeps every fact, in input order. Under a
smaller capacity it keeps the first k facts in input order (every score is 0, so the input
position decides), which is a well-defined but arbitrary choice, not a bound; so the tables
(``run-policy``, ``sweep``, the zoo) evaluate it at the pool size (``unlimited``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..palette import OKABE_ITO
from .arrays import Params, Signals
from .base import BOUND, Policy, Score, SelectionContext
from .registry import register


@register
class KeepAllPolicy(Policy):
    name = "keep-all"
    summary = "Bound: keep everything (meant for capacity >= pool size; otherwise the first k)."
    role = BOUND
    unlimited = True
    color = OKABE_ITO["grey"]
    component_names = ()

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        return [Score(0.0, {}) for _ in facts]

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        return (np.full(signals.shape, -0.0),)  # minus every score, 0.0: the input position decides
