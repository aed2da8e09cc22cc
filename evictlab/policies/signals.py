"""Reading the signals a fact carries, with DeerMem's fallbacks (spec 1.2 and 1.3).

These functions never raise on malformed fact fields: a value that cannot be read falls back
as the specification says. Every arithmetic step is written in the order DeerMem evaluates it,
because ties between scores are decided by exact double equality.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ContractError
from ..times import as_utc, read_iso

UTC = _dt.UTC
SECONDS_PER_DAY = 86400
LN_9 = math.log(9)
DEFAULT_CONFIDENCE = 0.5


def to_float(value: Any) -> float | None:
    """``float(value)``, or ``None`` for missing, boolean or unreadable values.

    An ``OverflowError`` (an integer beyond the double range) propagates: DeerMem raises it,
    and the DeerMem-compatible entry point must too.
    """
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def read_number(value: Any) -> float | None:
    """``float(value)`` as Python reads it, or ``None`` for missing, boolean, unreadable or non-finite."""
    try:
        number = to_float(value)
    except OverflowError:
        return None
    if number is None or not math.isfinite(number):
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

    Read by :func:`read_iso`; a naive value is taken as UTC.
    """
    moment = read_iso(value)
    if moment is None:
        return None
    try:
        return as_utc(moment)
    except OverflowError:
        # An offset that moves a year-1 or year-9999 value out of range in UTC. Such a value
        # cannot be compared with the clock, so it reads as absent.
        return None


def resolve_now(now: _dt.datetime | None) -> _dt.datetime:
    """evictlab's clock: an aware ``now`` in UTC, or the current UTC time.

    A naive ``now`` is refused: DeerMem reads it as the host's local time (only
    :mod:`evictlab.selection.deermem` mirrors that), so evictlab's own API asks for an explicit zone.
    """
    if now is None:
        return _dt.datetime.now(UTC)
    if not isinstance(now, _dt.datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise ContractError(f"now must be a timezone-aware datetime, got {now!r}")
    return now.astimezone(UTC)


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


def days_since(value: Any, now: _dt.datetime) -> float | None:
    """Elapsed days from a timestamp field's value to ``now``; ``None`` when it does not parse."""
    moment = parse_timestamp(value)
    return None if moment is None else elapsed_days(now, moment)


def usable_heat(
    entry: Any, now: _dt.datetime, *, read_days: Callable[[Any], float | None] | None = None
) -> tuple[float, float] | None:
    """``(heat, days since lastAccessedAt)`` of a usage entry, or ``None`` when it scores no heat.

    Unusable: not a mapping, no parseable ``lastAccessedAt``, a heat that is missing, boolean,
    unreadable, non-finite or <= 0. ``read_days`` replaces :func:`days_since` (a caller that
    reads many entries may remember the timestamps it has parsed).
    """
    if not isinstance(entry, Mapping):
        return None
    accessed = entry.get("lastAccessedAt")
    days = days_since(accessed, now) if read_days is None else read_days(accessed)
    if days is None:
        return None
    heat = read_number(entry.get("accessHeat"))
    if heat is None or heat <= 0:
        return None
    return heat, days


def heat_component(heat: float, days: float, half_life_days: float) -> float:
    """``min(1, log1p(heat * decay) / ln 9)``: a decayed heat of 8 saturates at exactly 1.0.

    ``math.log1p``, as DeerMem computes it, not ``log(1 + x)``: the two differ in the last bits
    (and for a tiny decayed heat by far more), which can flip a near tie. numpy's ``log1p``
    is not used either: on some inputs (2.0) it differs from ``math.log1p`` in the last bit.
    """
    decayed = heat * decay(days, half_life_days)
    return min(1.0, math.log1p(decayed) / LN_9)


def access_heat(entry: Any, now: _dt.datetime, half_life_days: float) -> float:
    """The access-heat component of a usage entry; 0.0 for anything unusable."""
    usable = usable_heat(entry, now)
    return 0.0 if usable is None else heat_component(*usable, half_life_days)


def read_count(value: Any) -> int:
    """A counter as DeerMem reads one (spec 1.7, 1.9): a non-negative non-boolean int, else 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value


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
