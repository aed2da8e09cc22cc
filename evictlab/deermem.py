"""DeerMem-compatible entry point: the same decision as DeerMem's own function for every input.

Unlike :func:`evictlab.policies.select`, this mirrors production exactly, fallbacks included:
no parameter validation, duplicate ids share one score slot, facts without ids are scored as
``__missing_{index}``, and capacity 0 (or less) evicts everything.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import UnknownPolicyError
from .policies.base import Decision, Reservation, select_by_rank
from .policies.confidence import confidence_score
from .policies.hybrid import CORRECTION, score_all
from .policies.signals import resolve_now


def select_facts_for_capacity(
    facts: Sequence[Mapping[str, Any]],
    *,
    max_facts: int,
    policy: str,
    usage: Mapping[str, Any] | None = None,
    now: _dt.datetime | None = None,
    confidence_weight: float = 0.65,
    confirmation_weight: float = 0.25,
    access_weight: float = 0.10,
    confirmation_half_life_days: float = 90,
    access_half_life_days: float = 30,
    correction_reserved_fraction: float = 0.10,
    correction_reserved_max: int = 10,
) -> Decision:
    """Choose which facts survive a cap of ``max_facts`` (spec 1.4); inputs are never mutated."""
    moment = resolve_now(now)
    if policy == "confidence":
        scores = [confidence_score(fact) for fact in facts]
        reservation = None
    elif policy == "hybrid-v1":
        scores = score_all(
            facts,
            usage or {},
            moment,
            (confidence_weight, confirmation_weight, access_weight),
            confirmation_half_life_days,
            access_half_life_days,
        )
        reservation = Reservation(CORRECTION, correction_reserved_fraction, correction_reserved_max)
    else:
        # Raised while scoring, so also when the snapshot is under the cap.
        raise UnknownPolicyError(
            f"Unknown fact eviction policy: {policy!r}; known policies: confidence, hybrid-v1"
        )
    return select_by_rank(facts, scores, max_facts, reservation, policy)
