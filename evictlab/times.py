"""Times as text: the one reader and the one writer of ISO-8601 in evictlab.

:func:`read_iso` reads every ISO-8601 value evictlab is given (protocol clocks, run specs,
fact timestamps, trace rows, workload starts); :func:`iso_z` writes every UTC time evictlab
writes itself (run records, audit entries, trace rows, explanations). The file formats that
DeerFlow defines with an explicit ``+00:00`` offset write ``datetime.isoformat()`` unchanged.
"""

from __future__ import annotations

import datetime as _dt

UTC = _dt.UTC


def read_iso(value: object) -> _dt.datetime | None:
    """The datetime an ISO-8601 string names (naive when it has no offset), or ``None``.

    Surrounding whitespace is stripped, a literal ``Z`` becomes ``+00:00`` and the rest is
    read by ``datetime.fromisoformat``; anything else (not a string, blank, not ISO-8601) is None.
    """
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None


def as_utc(moment: _dt.datetime) -> _dt.datetime:
    """Attach UTC to a naive datetime, convert an aware one to UTC (OverflowError when UTC
    leaves the years 1-9999)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def iso_z(moment: _dt.datetime, *, seconds: bool = False) -> str:
    """UTC ISO-8601 with a trailing ``Z``: ``2026-08-13T00:00:00Z``, the year in four digits,
    microseconds only when non-zero (never with ``seconds``). A naive ``moment`` is taken as UTC."""
    plain = as_utc(moment).replace(tzinfo=None)
    return (plain.replace(microsecond=0) if seconds else plain).isoformat() + "Z"


def utc_now_iso() -> str:
    """The current UTC time as :func:`iso_z` writes it."""
    return iso_z(_dt.datetime.now(UTC))
