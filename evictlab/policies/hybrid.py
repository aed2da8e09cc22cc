"""``hybrid-v1``: DeerMem's opt-in policy (spec 1.3 and 1.4).

value = w_conf * confidence + w_confirm * confirmation freshness + w_access * access heat,
evaluated left to right in doubles, with slots reserved for user corrections.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..palette import OKABE_ITO
from .arrays import Params, Signals
from .base import Policy, Reservation, Score, SelectionContext
from .registry import register
from .signals import access_heat, confirmation_freshness, fact_fields, fact_key, read_confidence

CORRECTION = "correction"


def hybrid_value(weights: tuple[Any, Any, Any], confidence: Any, freshness: Any, heat: Any) -> Any:
    """The weighted sum of the three components (also what an audit's recorded score must equal);
    numbers or arrays (:func:`hybrid_values`)."""
    w_conf, w_confirm, w_access = weights
    # Left to right, exactly as written: exact ties between scores depend on it.
    return w_conf * confidence + w_confirm * freshness + w_access * heat


def hybrid_score(
    fact: Any,
    usage_entry: Any,
    now: _dt.datetime,
    weights: tuple[float, float, float],
    confirmation_half_life_days: float,
    access_half_life_days: float,
) -> Score:
    fields = fact_fields(fact)
    confidence = read_confidence(fields.get("confidence"))
    freshness = confirmation_freshness(fields, now, confirmation_half_life_days)
    heat = access_heat(usage_entry, now, access_half_life_days)
    value = hybrid_value(weights, confidence, freshness, heat)
    return Score(
        value,
        {"confidence": confidence, "confirmationFreshness": freshness, "accessHeat": heat},
    )


def score_all(
    facts: Sequence[Any],
    usage: Any,
    now: _dt.datetime,
    weights: tuple[float, float, float],
    confirmation_half_life_days: float,
    access_half_life_days: float,
) -> list[Score]:
    entries = usage if isinstance(usage, Mapping) else {}
    return [
        hybrid_score(
            fact,
            entries.get(fact_key(fact, index)),
            now,
            weights,
            confirmation_half_life_days,
            access_half_life_days,
        )
        for index, fact in enumerate(facts)
    ]


def hybrid_values(signals: Signals, params: Params) -> np.ndarray:
    """:func:`hybrid_score`'s value for every fact, in the same operations."""
    numerics = params.numerics
    confirmed = ~np.isnan(signals.confirmed_days)
    created = ~np.isnan(signals.created_days)
    days = np.where(confirmed, signals.confirmed_days, np.where(created, signals.created_days, 0.0))
    factor = numerics.decay(days, params.confirmation_half_life_days)
    freshness = np.where(confirmed, factor, np.where(created, 0.5 * factor, 0.0))
    usable = signals.heat > 0
    heat = numerics.heat(
        np.where(usable, signals.heat, 0.0),
        np.where(usable, signals.accessed_days, 0.0),
        params.access_half_life_days,
    )
    return hybrid_value(params.weights, signals.confidence, freshness, np.where(usable, heat, 0.0))


@register
class HybridV1Policy(Policy):
    name = "hybrid-v1"
    summary = (
        "DeerMem's opt-in policy: 0.65 confidence + 0.25 confirmation freshness + 0.10 access"
        " heat, with slots reserved for corrections."
    )
    color = OKABE_ITO["blue"]
    component_names = ("confidence", "confirmationFreshness", "accessHeat")
    reads_params = True
    default_tie_break = "input-order"

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        params = context.params
        return score_all(
            facts,
            context.usage,
            context.now,
            params.weights,
            params.confirmation_half_life_days,
            params.access_half_life_days,
        )

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        return (-hybrid_values(signals, params),)

    def reservation(self, context: SelectionContext) -> Reservation:
        params = context.params
        return Reservation(
            CORRECTION, params.correction_reserved_fraction, params.correction_reserved_max
        )
