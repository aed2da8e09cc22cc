"""DeerMem-compatible entry point: the same decision as DeerMem's own function for every input.

It exists so that production inputs can be replayed, so it mirrors production where
production is odd (spec 0.5, 1.2 to 1.4), unlike :func:`evictlab.policies.select`, which
validates its input:

* no argument is validated. Capacity 0 or less evicts everything; a negative
  ``correction_reserved_max`` makes the reserved count negative, and the pre-selection then
  takes every correction but the last ``|count|`` (Python slice semantics);
* a naive ``now`` is the host's local time (production converts it with ``astimezone``);
  facts' own naive timestamps are UTC;
* duplicate ids share one score slot; facts without ids are scored as ``__missing_{index}``;
* an unknown policy raises while scoring, so under the cap too, but an empty snapshot
  scores nothing and gets an empty decision;
* a usage entry is read only when it is a ``dict`` (any other mapping scores no heat);
* production's exceptions, where production raises them, fact by fact in input order:
  ``AttributeError`` for a fact that is not a mapping and for a non-empty ``usage`` that is
  not one (under both policies); ``OverflowError`` for an integer confidence beyond the
  double range (under any policy name: the confidence is read before the name is checked)
  and, under ``hybrid-v1``, for a timestamp it reads whose conversion to UTC leaves the
  representable range and for an integer ``accessHeat`` beyond the double range in an entry
  whose ``lastAccessedAt`` parses.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import UnknownPolicyError
from ..policies.base import Decision, Reservation, select_by_rank
from ..policies.confidence import confidence_score
from ..policies.hybrid import CORRECTION, hybrid_score
from ..policies.signals import UTC, as_utc, read_iso, to_float


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
    moment = _dt.datetime.now(UTC) if now is None else now.astimezone(UTC)
    entries = usage or {}
    weights = (confidence_weight, confirmation_weight, access_weight)
    scores = []
    for index, fact in enumerate(facts):
        # Both look-ups use .get, as production does: AttributeError for a fact or a usage
        # that is not a mapping, whatever the policy. Production reads only a dict entry.
        entry = entries.get(_production_key(fact, index))
        entry = entry if isinstance(entry, dict) else None
        # Production converts confidence with float() before it looks at the policy name:
        # OverflowError for an integer such as 10**400, under an unknown policy too.
        to_float(fact.get("confidence"))
        if policy == "confidence":
            scores.append(confidence_score(fact))
        elif policy == "hybrid-v1":
            _read_usage_as_production(fact, entry)
            scores.append(
                hybrid_score(fact, entry, moment, weights, confirmation_half_life_days, access_half_life_days)
            )
        else:
            raise UnknownPolicyError(
                f"Unknown fact eviction policy: {policy!r}; known policies: confidence, hybrid-v1"
            )
    reservation = None
    if policy == "hybrid-v1":
        reservation = Reservation(CORRECTION, correction_reserved_fraction, correction_reserved_max)
    return select_by_rank(facts, scores, max_facts, reservation, policy)


def _production_key(fact: Any, index: int) -> str:
    raw = fact.get("id")
    return str(raw) if raw else f"__missing_{index}"


def _read_usage_as_production(fact: Mapping[str, Any], entry: dict[str, Any] | None) -> None:
    """Convert what production converts unguarded, letting OverflowError through.

    Every timestamp it reads goes to UTC: ``createdAt`` only when ``lastConfirmedAt`` does not
    parse, ``lastAccessedAt`` only from a usage entry that is a ``dict`` (spec 1.3, 1.4); when
    that parses, ``accessHeat`` goes through ``float()`` (an integer such as 10**400 overflows).
    """
    if _to_utc(fact.get("lastConfirmedAt")) is None:
        _to_utc(fact.get("createdAt"))
    if entry is not None and _to_utc(entry.get("lastAccessedAt")) is not None:
        to_float(entry.get("accessHeat"))


def _to_utc(value: Any) -> _dt.datetime | None:
    moment = read_iso(value)
    return None if moment is None else as_utc(moment)  # OverflowError when UTC leaves years 1..9999
