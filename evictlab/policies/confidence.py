"""``confidence``: DeerMem's historical policy, rank by bounded confidence alone."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..palette import OKABE_ITO
from .arrays import Params, Signals
from .base import Policy, Score, SelectionContext
from .registry import register
from .signals import fact_fields, read_confidence


def confidence_score(fact: Any) -> Score:
    value = read_confidence(fact_fields(fact).get("confidence"))
    return Score(value, {"confidence": value})


@register
class ConfidencePolicy(Policy):
    name = "confidence"
    summary = "DeerMem's historical default: keep the facts with the highest confidence."
    color = OKABE_ITO["vermillion"]
    component_names = ("confidence",)
    default_tie_break = "input-order"
    stamps_confirmations = False

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        return [confidence_score(fact) for fact in facts]

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        return (-signals.confidence,)

    def trace_key(self) -> Callable[[Mapping[str, Any]], float]:
        return lambda row: read_confidence(row["confidence"])
