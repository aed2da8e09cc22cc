"""Reading the setting-independent signals of many cases at once, for the engine.

Every fact's signals are read by the scalar helpers of :mod:`evictlab.policies.signals`, so
each fallback of spec 1.2 holds exactly; what is vectorised is the bookkeeping around them.
The fields are gathered column by column over all facts of all cases; a value seen before
(a timestamp string, a category) is read once; the results are laid out as (cases, width)
arrays with numpy. Decay and access heat are not computed here: they depend on a half-life,
so the engine computes them once per distinct (elapsed days, half-life) or (heat, days,
half-life), by the scalar functions (:class:`evictlab.selection.engine.PreparedCases`).
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ContractError
from ..policies.hybrid import CORRECTION
from ..policies.signals import days_since, fact_fields, fact_key, read_confidence, usable_heat

# Hashable raw values whose equality implies equal readings (with their type).
_PLAIN = (type(None), bool, int, float, str)
# How a fact's confirmation freshness is computed (spec 1.3).
NO_TIMESTAMP, CONFIRMED, CREATED = 0, 1, 2


@dataclass(frozen=True)
class CaseSignals:
    """The signals of a list of cases as (cases, width) arrays, padded to the largest pool.

    ``fresh_index`` points into ``fresh_days`` and ``heat_index`` into ``heat_pairs``
    (index 0 of both is a placeholder for facts, and padding, without the signal).
    """

    fact_ids: tuple[tuple[str, ...], ...]
    sizes: np.ndarray
    support_positions: np.ndarray
    confidence: np.ndarray
    correction: np.ndarray
    fresh_kind: np.ndarray
    fresh_index: np.ndarray
    fresh_days: np.ndarray
    heat_index: np.ndarray
    heat_pairs: tuple[tuple[float, float], ...]


def read_cases(cases: Sequence[Any], now: _dt.datetime) -> CaseSignals:
    """Read every fact of ``cases`` at ``now`` (an aware UTC datetime)."""
    fact_lists = [list(case.facts) for case in cases]
    fact_ids = tuple(unique_keys(case, facts) for case, facts in zip(cases, fact_lists))
    support_positions = np.array(
        [single_support(case, keys) for case, keys in zip(cases, fact_ids)], dtype=np.intp
    )
    facts = [fact for facts in fact_lists for fact in facts]
    fields = [fact if type(fact) is dict else fact_fields(fact) for fact in facts]

    confidence = np.array(
        [value if type(value) is float else read_confidence(value) for value in _column(fields, "confidence")]
    )
    # read_confidence's bounds, again for the floats taken as they are (idempotent for the
    # others): unreadable -> 0.5, otherwise clamped into [0, 1]; -0.0 becomes 0.0 as in
    # max(0.0, -0.0), so no score is ever -0.0.
    confidence = np.where(np.isfinite(confidence), np.where(confidence > 0, np.minimum(confidence, 1.0), 0.0), 0.5)
    correction = np.array(_read_each(_column(fields, "category", ""), _is_correction), dtype=bool)

    # Elapsed days, NaN where the field does not parse; a malformed lastConfirmedAt falls
    # through to createdAt (spec 1.3).
    def days_or_nan(value: Any) -> float:
        days = days_since(value, now)
        return math.nan if days is None else days

    confirmed = np.array(_read_each(_column(fields, "lastConfirmedAt"), days_or_nan), dtype=np.float64)
    created = np.array(_read_each(_column(fields, "createdAt"), days_or_nan), dtype=np.float64)
    kind = np.where(~np.isnan(confirmed), CONFIRMED, np.where(~np.isnan(created), CREATED, NO_TIMESTAMP))
    days = np.where(kind == CONFIRMED, confirmed, created)[kind != NO_TIMESTAMP]
    # Distinct elapsed days (0.0 and -0.0 decay alike: decay reads max(0, days)).
    fresh_days, fresh_index = np.unique(days, return_inverse=True)
    fresh_index_all = np.zeros(len(facts), dtype=np.intp)
    fresh_index_all[kind != NO_TIMESTAMP] = fresh_index.reshape(-1) + 1

    heat_index, heat_pairs = _heat(cases, fact_ids, now)
    sizes = np.array([len(facts) for facts in fact_lists], dtype=np.int64)
    return CaseSignals(
        fact_ids=fact_ids,
        sizes=sizes,
        support_positions=support_positions,
        confidence=_padded(confidence, sizes, 0.0),
        correction=_padded(correction, sizes, False),
        fresh_kind=_padded(kind.astype(np.int8), sizes, NO_TIMESTAMP),
        fresh_index=_padded(fresh_index_all, sizes, 0),
        fresh_days=np.concatenate([[0.0], fresh_days]),
        heat_index=_padded(heat_index, sizes, 0),
        heat_pairs=heat_pairs,
    )


def _column(fields: list[Mapping[str, Any]], name: str, default: Any = None) -> list[Any]:
    return [field.get(name, default) for field in fields]


def _read_each(values: list[Any], read: Callable[[Any], Any]) -> list[Any]:
    """``read(value)`` for each value, each distinct string (and ``None``) read once."""
    memo: dict[str | None, Any] = {value: read(value) for value in {value for value in values if type(value) is str}}
    memo[None] = read(None)  # a missing field
    return [memo[value] if value is None or type(value) is str else read(value) for value in values]


def _is_correction(value: Any) -> bool:
    # Category comparison as DeerMem does it: stringified, stripped, lower-cased.
    return str(value).strip().lower() == CORRECTION


def _heat(
    cases: Sequence[Any], fact_ids: tuple[tuple[str, ...], ...], now: _dt.datetime
) -> tuple[np.ndarray, tuple[tuple[float, float], ...]]:
    """Per fact, an index into the distinct usable (heat, days since access) pairs (0: none)."""
    parsed: dict[str, float | None] = {}

    def read_days(value: Any) -> float | None:
        # days_since, each distinct timestamp string parsed once.
        if type(value) is not str:
            return days_since(value, now)
        if value not in parsed:
            parsed[value] = days_since(value, now)
        return parsed[value]

    index = np.zeros(sum(len(keys) for keys in fact_ids), dtype=np.intp)
    slots: dict[tuple[float, float], int] = {}
    pairs: list[tuple[float, float]] = [(0.0, 0.0)]
    # A dict entry's pair depends only on its typed raw heat and its lastAccessedAt.
    known: dict[tuple[type, Any, Any], int] = {}
    offset = 0
    for case, keys in zip(cases, fact_ids):
        usage = case.usage if isinstance(case.usage, Mapping) else {}
        if not usage:
            offset += len(keys)
            continue
        # Walk the usage map, not the facts: usually only some facts have an entry.
        positions = dict(zip(keys, range(offset, offset + len(keys))))
        for key, entry in usage.items():
            position = positions.get(key) if isinstance(key, str) else None
            if position is None:
                continue
            raw = None
            if type(entry) is dict:
                heat, accessed = entry.get("accessHeat"), entry.get("lastAccessedAt")
                if type(heat) in _PLAIN and type(accessed) in _PLAIN:
                    raw = (type(heat), heat, accessed)
            slot = known.get(raw) if raw is not None else None
            if slot is None:
                pair = usable_heat(entry, now, read_days=read_days)
                slot = 0 if pair is None else slots.setdefault(pair, len(pairs))
                if pair is not None and slot == len(pairs):
                    pairs.append(pair)
                if raw is not None:
                    known[raw] = slot
            index[position] = slot
        offset += len(keys)
    return index, tuple(pairs)


def _padded(flat: np.ndarray, sizes: np.ndarray, fill: Any) -> np.ndarray:
    """Per-case runs of ``flat`` laid out as (cases, max size) rows, padded with ``fill``."""
    width = int(sizes.max())
    out = np.full((len(sizes), width), fill, dtype=flat.dtype)
    out[np.arange(width) < sizes[:, None]] = flat
    return out


def unique_keys(case: Any, facts: Sequence[Any]) -> tuple[str, ...]:
    keys = [
        str(fact["id"]) if type(fact) is dict and fact.get("id") else fact_key(fact, index)
        for index, fact in enumerate(facts)
    ]
    if len(set(keys)) != len(keys):
        seen: dict[str, int] = {}
        for index, key in enumerate(keys):
            if key in seen:
                raise ContractError(
                    f"case {case.case_id!r}: duplicate fact id {key!r} at positions {seen[key]} and {index}"
                )
            seen[key] = index
    return tuple(keys)


def single_support(case: Any, keys: Sequence[str]) -> int:
    """Position of the case's one support fact, by the key the selector scores it under."""
    support = tuple(case.support_fact_ids)
    if len(support) != 1:
        raise ContractError(f"case {case.case_id!r}: expected exactly one support fact id, got {list(support)}")
    try:
        return keys.index(str(support[0]))
    except ValueError:
        raise ContractError(f"case {case.case_id!r}: support fact {support[0]!r} is not among its facts") from None
