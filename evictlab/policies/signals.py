"""Reading the signals a fact carries, with DeerMem's fallbacks (spec 1.2 and 1.3).

These functions never raise on malformed fact fields: a value that cannot be read falls back
as the specification says. Every arithmetic step is written in the order DeerMem evaluates it,
because ties between scores are decided by exact double equality.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from typing import Any

UTC = _dt.timezone.utc
SECONDS_PER_DAY = 86400
LN_9 = math.log(9)
DEFAULT_CONFIDENCE = 0.5


def read_number(value: Any) -> float | None:
    """``float(value)`` as Python reads it, or ``None`` for missing, boolean, unreadable or non-finite."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(number):
        return None
    return number


def read_confidence(value: Any) -> float:
    """Bounded confidence: 0.5 when unreadable, otherwise clamped into [0, 1]."""
    number = read_number(value)
    if number is None:
        return DEFAULT_CONFIDENCE
    return min(1.0, max(0.0, number))


def parse_timestamp(value: Any) -> _dt.datetime | None:
    """An aware UTC datetime, or ``None`` when the value is not a parseable ISO-8601 string.

    Surrounding whitespace is stripped, a literal ``Z`` becomes ``+00:00`` and the rest is
    read by ``datetime.fromisoformat``; a naive value is taken as UTC.
    """
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    try:
        return as_utc(_dt.datetime.fromisoformat(text.replace("Z", "+00:00")))
    except (ValueError, OverflowError):
        # OverflowError: an offset that moves a year-1 or year-9999 value out of range in
        # UTC. Such a value cannot be compared with the clock, so it reads as absent.
        return None


def as_utc(moment: _dt.datetime) -> _dt.datetime:
    """Attach UTC to a naive datetime, convert an aware one to UTC."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def resolve_now(now: _dt.datetime | None) -> _dt.datetime:
    return as_utc(now) if now is not None else _dt.datetime.now(UTC)


def elapsed_days(now: _dt.datetime, then: _dt.datetime) -> float:
    """Fractional days from ``then`` to ``now`` (negative for a future timestamp)."""
    return (now - then).total_seconds() / SECONDS_PER_DAY


def decay(days: float, half_life_days: float) -> float:
    """``2 ** (-max(0, days) / half_life)``; a half-life <= 0 gives 0.0."""
    if half_life_days <= 0:
        return 0.0
    return 2 ** (-max(0, days) / half_life_days)


def confirmation_freshness(fact: Mapping[str, Any], now: _dt.datetime, half_life_days: float) -> float:
    """Decay since ``lastConfirmedAt``; else half the decay since ``createdAt``; else 0.0."""
    confirmed = parse_timestamp(fact.get("lastConfirmedAt"))
    if confirmed is not None:
        return decay(elapsed_days(now, confirmed), half_life_days)
    created = parse_timestamp(fact.get("createdAt"))
    if created is not None:
        return 0.5 * decay(elapsed_days(now, created), half_life_days)
    return 0.0


def access_heat(entry: Any, now: _dt.datetime, half_life_days: float) -> float:
    """``min(1, ln(1 + decayed heat) / ln 9)`` from a usage entry; 0.0 for anything unusable."""
    if not isinstance(entry, Mapping):
        return 0.0
    accessed = parse_timestamp(entry.get("lastAccessedAt"))
    if accessed is None:
        return 0.0
    heat = read_number(entry.get("accessHeat"))
    if heat is None or heat <= 0:
        return 0.0
    decayed = heat * decay(elapsed_days(now, accessed), half_life_days)
    return min(1.0, math.log(1 + decayed) / LN_9)


def fact_key(fact: Any, index: int) -> str:
    """The id used for score and usage look-ups: ``str(id)``, or ``__missing_{index}`` when falsy."""
    raw = fact.get("id") if isinstance(fact, Mapping) else None
    return str(raw) if raw else f"__missing_{index}"


def fact_fields(fact: Any) -> Mapping[str, Any]:
    """A fact's fields; anything that is not a mapping reads as having none."""
    return fact if isinstance(fact, Mapping) else {}


def is_category(fact: Any, category: str) -> bool:
    """Category comparison as DeerMem does it: stringified, stripped, lower-cased."""
    return str(fact_fields(fact).get("category", "")).strip().lower() == category


def reported_category(fact: Any) -> str:
    """The category an eviction record carries: stringified, ``context`` when missing or empty."""
    return str(fact_fields(fact).get("category") or "context")
