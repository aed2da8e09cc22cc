"""The signals of many facts as arrays, for :meth:`~evictlab.policies.base.Policy.rank_keys`.

:class:`Signals` holds what every policy reads from DeerMem-shaped facts and usage entries, one
array per signal, shape ``(facts,)`` or ``(rows, facts)``: a snapshot, the 45 pools of a pool set
(padded to the widest) or the M memories of a trace replay. It is built once, by
:meth:`Signals.of_facts`, :meth:`Signals.of_cases` or :meth:`Signals.of_columns`, and every
signal is read exactly as the scalar readers of :mod:`.signals` and :mod:`._zoo` read it (the
same functions, once per distinct value), so a rank key computed from it holds the very doubles
the policy's ``score`` computes:

* elapsed days are ``(now - then).total_seconds() / 86400`` (NaN where the field does not read;
  negative for a future time; a policy clamps them as its scalar form does); from integer
  microseconds, ``((now - then) / 1e6) / 86400`` is the same double for any time a trace holds;
* the transcendental steps (decay, access heat, ``exp``, ``log``, ``**``) go through
  :class:`Numerics`: numpy's ``exp``/``log``/``log1p``/``power`` where they are the C library's
  functions that Python's ``math`` and ``**`` call (:func:`~evictlab.numerics.vector_maths`), else the scalar
  function once per distinct argument (numpy's own SIMD kernels differ in the last bit for a
  few percent of inputs, and a last bit decides a tie).

:class:`Params` is the setting a ``rank_keys`` call reads: :class:`~.base.PolicyParams`'
seven fields as numbers, or as arrays shaped ``(settings, 1, 1)`` so that keys come out
``(settings, rows, facts)``, and the seeds of seeded policies (one, or one per row).
"""

from __future__ import annotations

import datetime as _dt
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ..numerics import COMPLEX_EXP_IS_EXACT, POWER_IS_EXACT, VECTOR_MATHS, complex_exp, route_name
from ._zoo import draws_for_keys
from .base import PolicyParams
from .signals import (
    LN_9,
    decay,
    elapsed_days,
    fact_fields,
    fact_key,
    heat_component,
    parse_timestamp,
    read_confidence,
    read_count,
    usable_heat,
)

#: A time column's value for "no such timestamp" (:meth:`Signals.of_columns`).
NO_TIME = np.iinfo(np.int64).min
#: Counts are int64; a count beyond this (no store holds one) reads as this.
MAX_COUNT = 1 << 53


def category_name(value: Any) -> str:
    """A category as DeerMem compares it: stringified, stripped, lower-cased."""
    return str(value).strip().lower()


@dataclass(frozen=True, eq=False)
class Signals:
    """Every fact's signals, shape ``(facts,)`` or ``(rows, facts)``; padding is not ``valid``.

    Days are elapsed days since the timestamp (NaN where it does not read): ``created_days``
    (``createdAt``), ``confirmed_days`` (``lastConfirmedAt``), ``accessed_days`` (the usage
    entry's ``lastAccessedAt``, for any entry that is a mapping). ``heat`` is the usable
    ``accessHeat`` (:func:`~.signals.usable_heat`; 0.0 when the entry scores no heat), counts
    are :func:`~.signals.read_count` readings, ``category`` codes index ``category_names``
    (categories as :func:`category_name` spells them), ``fact_ids`` the ids as scored
    (``__missing_{index}`` for a fact without one; ``""`` for padding) and ``support`` the
    facts a bound may read as needed.
    """

    confidence: np.ndarray
    created_days: np.ndarray
    confirmed_days: np.ndarray
    accessed_days: np.ndarray
    heat: np.ndarray
    access_count: np.ndarray
    confirmation_count: np.ndarray
    category: np.ndarray
    category_names: tuple[str, ...]
    fact_ids: np.ndarray
    valid: np.ndarray
    support: np.ndarray
    _memo: dict[Any, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.valid.shape

    @property
    def sizes(self) -> np.ndarray:
        """Facts per row (the number of valid entries)."""
        return self.valid.sum(axis=-1)

    def in_category(self, name: str) -> np.ndarray:
        """Which facts belong to the category ``name`` (compared as DeerMem compares it)."""
        if name not in self.category_names:
            return np.zeros(self.shape, dtype=bool)
        return self.category == self.category_names.index(name)

    def draws(self, namespace: str, seeds: Any) -> np.ndarray:
        """The seeded draws of :func:`~._zoo.seeded_draws` for each row (``seeds``: one, or one per row)."""
        if not self.valid.size:
            return np.zeros(self.shape)
        rows = self.fact_ids.reshape(-1, self.shape[-1])
        valid = self.valid.reshape(rows.shape)
        seeds = np.broadcast_to(np.asarray(seeds).reshape(-1), (len(rows),))
        out = np.zeros(rows.shape)
        for row, (ids, mask, seed) in enumerate(zip(rows, valid, seeds.tolist())):
            key = ("draws", namespace, int(seed), tuple(ids[mask].tolist()))
            if key not in self._memo:
                self._memo[key] = draws_for_keys(namespace, key[3], int(seed))
            out[row, mask] = self._memo[key]
        return out.reshape(self.shape)

    def take(self, rows: Any) -> Signals:
        """The signals of some rows (an index or mask on the first axis)."""
        values = [getattr(self, name) for name in _FIELDS]
        return Signals(*(value[rows] if isinstance(value, np.ndarray) else value for value in values))

    # --- builders ---------------------------------------------------------------------

    @classmethod
    def of_facts(
        cls,
        facts: Sequence[Any],
        now: _dt.datetime,
        usage: Mapping[str, Any] | None = None,
        support_fact_ids: Iterable[str] = (),
    ) -> Signals:
        """The signals of one snapshot, shape ``(facts,)``; ``now`` an aware datetime."""
        return cls._read([list(facts)], [usage], [frozenset(support_fact_ids)], now).take(0)

    @classmethod
    def of_cases(cls, cases: Sequence[Any], now: _dt.datetime) -> Signals:
        """The signals of cases (anything with ``facts``, ``usage`` and ``support_fact_ids``),
        shape ``(cases, widest pool)``."""
        return cls._read(
            [list(case.facts) for case in cases],
            [case.usage for case in cases],
            [frozenset(case.support_fact_ids) for case in cases],
            now,
        )

    @classmethod
    def _read(
        cls,
        fact_lists: list[list[Any]],
        usages: list[Any],
        supports: list[frozenset[str]],
        now: _dt.datetime,
    ) -> Signals:
        days_of: dict[str, float] = {}

        def days(value: Any) -> float:
            # Elapsed days since a timestamp, each distinct string parsed once; NaN if it does not read.
            if type(value) is str and value in days_of:
                return days_of[value]
            moment = parse_timestamp(value)
            result = math.nan if moment is None else elapsed_days(now, moment)
            if type(value) is str:
                days_of[value] = result
            return result

        names: dict[str, int] = {}
        columns: dict[str, list[Any]] = {name: [] for name in _READ_COLUMNS}
        for facts, usage, support in zip(fact_lists, usages, supports):
            entries = usage if isinstance(usage, Mapping) else {}
            for index, fact in enumerate(facts):
                fields_ = fact_fields(fact)
                key = fact_key(fact, index)
                entry = entries.get(key)
                mapping = entry if isinstance(entry, Mapping) else {}
                heat = usable_heat(entry, now)
                category = category_name(fields_.get("category", ""))
                for name, value in (
                    ("confidence", read_confidence(fields_.get("confidence"))),
                    ("created_days", days(fields_.get("createdAt"))),
                    ("confirmed_days", days(fields_.get("lastConfirmedAt"))),
                    ("accessed_days", days(mapping.get("lastAccessedAt"))),
                    ("heat", 0.0 if heat is None else heat[0]),
                    ("access_count", min(MAX_COUNT, read_count(mapping.get("accessCount")))),
                    ("confirmation_count", min(MAX_COUNT, read_count(fields_.get("confirmationCount")))),
                    ("category", names.setdefault(category, len(names))),
                    ("fact_ids", key),
                    ("support", key in support),
                ):
                    columns[name].append(value)
        sizes = [len(facts) for facts in fact_lists]
        width = max(sizes, default=0)
        valid = np.arange(width) < np.array(sizes, dtype=np.int64)[:, None]
        arrays: dict[str, Any] = {}
        for name, values in columns.items():
            dtype = _DTYPES.get(name, np.float64)
            padded = np.full(valid.shape, _PADDING.get(name, math.nan), dtype=dtype)
            padded[valid] = np.array(values, dtype=dtype)
            arrays[name] = padded
        return cls(**arrays, category_names=tuple(names), valid=valid)

    @classmethod
    def of_columns(
        cls,
        now: int,
        *,
        confidence: np.ndarray,
        created: np.ndarray,
        confirmed: np.ndarray,
        accessed: np.ndarray,
        heat: np.ndarray,
        access_count: np.ndarray,
        confirmation_count: np.ndarray,
        category: np.ndarray,
        category_names: Sequence[str],
        fact_ids: np.ndarray,
        valid: np.ndarray,
        support: np.ndarray | None = None,
    ) -> Signals:
        """The signals of a trace memory's columns, shape ``(rows, facts)`` (or ``(facts,)``).

        Times are integer microseconds since the epoch (``now`` too), :data:`NO_TIME` where a
        fact has no such timestamp; ``confidence`` is read by
        :func:`~.signals.read_confidence`'s bounds; ``heat`` is the usage entry's
        ``accessHeat`` (scored only where positive, finite and ``accessed`` is a time);
        ``category`` codes index ``category_names`` (names as :func:`category_name` spells
        them); ``fact_ids`` are strings. Padding (not ``valid``) may hold anything.
        """
        confidence = np.asarray(confidence, dtype=np.float64)
        bounded = np.where(np.isfinite(confidence), np.where(confidence > 0, np.minimum(confidence, 1.0), 0.0), 0.5)
        accessed_days = _column_days(now, accessed)
        heat = np.asarray(heat, dtype=np.float64)
        usable = np.isfinite(heat) & (heat > 0) & ~np.isnan(accessed_days)
        return cls(
            confidence=bounded,
            created_days=_column_days(now, created),
            confirmed_days=_column_days(now, confirmed),
            accessed_days=accessed_days,
            heat=np.where(usable, heat, 0.0),
            access_count=np.minimum(np.asarray(access_count, dtype=np.int64), MAX_COUNT),
            confirmation_count=np.minimum(np.asarray(confirmation_count, dtype=np.int64), MAX_COUNT),
            category=np.asarray(category, dtype=np.int64),
            category_names=tuple(category_names),
            fact_ids=np.asarray(fact_ids, dtype=object),
            valid=np.asarray(valid, dtype=bool),
            support=np.zeros(np.shape(valid), dtype=bool) if support is None else np.asarray(support, dtype=bool),
        )


_READ_COLUMNS = (
    "confidence", "created_days", "confirmed_days", "accessed_days", "heat", "access_count",
    "confirmation_count", "category", "fact_ids", "support",
)  # fmt: skip
_DTYPES: dict[str, Any] = {
    "access_count": np.int64, "confirmation_count": np.int64, "category": np.int64, "fact_ids": object, "support": bool,
}  # fmt: skip
_PADDING: dict[str, Any] = {
    "confidence": 0.0, "heat": 0.0, "access_count": 0, "confirmation_count": 0, "category": -1, "fact_ids": "",
    "support": False,
}  # fmt: skip


#: The fields of :class:`Signals` in order, but its memo (a taken part starts its own).
_FIELDS = tuple(item.name for item in fields(Signals) if item.name != "_memo")


def _column_days(now: int, times: np.ndarray) -> np.ndarray:
    """Elapsed days from microsecond times to ``now``: ``((now - then) / 1e6) / 86400``, NaN for NO_TIME.

    Both divisions are IEEE operations on exact operands (differences below 2**53), so this is
    the double ``timedelta.total_seconds() / 86400`` gives.
    """
    times = np.asarray(times, dtype=np.int64)
    elapsed = (np.int64(now) - times).astype(np.float64) / 1e6 / 86400
    return np.where(times == NO_TIME, math.nan, elapsed)


def age_days(*days: np.ndarray) -> np.ndarray:
    """Days since the first readable of a fallback chain of timestamps, as :func:`._zoo.days_since`:
    ``max(0.0, elapsed)`` (a future time counts as now), ``inf`` where none reads."""
    first = days[0]
    for other in days[1:]:
        first = np.where(np.isnan(first), other, first)
    # Python's max(0.0, x): x when x > 0.0, else 0.0 (np.maximum would keep a -0.0).
    return np.where(np.isnan(first), math.inf, np.where(first > 0, first, 0.0))


class Params:
    """The setting a ``rank_keys`` call reads: :class:`PolicyParams`' fields and the seeds.

    Each field is a number (one setting) or an array shaped ``(settings, 1, 1)`` (then keys
    that depend on it come out ``(settings, rows, facts)``); ``seeds`` is one seed or one per
    row, shaped ``(rows,)``. ``settings`` counts the settings (1 for numbers); ``numerics``
    computes the transcendental steps (:data:`EXACT`).
    """

    confidence_weight: Any
    confirmation_weight: Any
    access_weight: Any
    confirmation_half_life_days: Any
    access_half_life_days: Any
    correction_reserved_fraction: Any
    correction_reserved_max: Any

    def __init__(
        self, values: Mapping[str, Any], seeds: Any = 0, settings: int = 1, numerics: Numerics | None = None
    ) -> None:
        for name in PolicyParams.__dataclass_fields__:
            setattr(self, name, values[name])
        self.seeds = seeds
        self.settings = settings
        #: How the transcendental steps are computed (:data:`EXACT`).
        self.numerics = EXACT if numerics is None else numerics

    @classmethod
    def of(cls, setting: PolicyParams | None = None, seeds: Any = 0) -> Params:
        """One setting (DeerMem's defaults when None), fields as numbers."""
        return cls((setting or PolicyParams()).as_dict(), seeds)

    @classmethod
    def columns(cls, columns: Mapping[str, np.ndarray], seeds: Any = 0) -> Params:
        """Settings as columns (one array per field, equal lengths), fields shaped ``(settings, 1, 1)``."""
        values = {name: np.asarray(columns[name])[:, None, None] for name in PolicyParams.__dataclass_fields__}
        return cls(values, seeds, len(values["confidence_weight"]))

    @property
    def weights(self) -> tuple[Any, Any, Any]:
        return (self.confidence_weight, self.confirmation_weight, self.access_weight)


def _vector_decay(days: np.ndarray, half_life_days: np.ndarray) -> np.ndarray:
    # decay's rules: max(0, days) (NaN days count as 0), a half-life <= 0 gives 0.0.
    return np.where(half_life_days <= 0, 0.0, np.float_power(2.0, -np.where(days > 0, days, 0.0) / half_life_days))


class Numerics:
    """The transcendental steps of a rank key, each exactly as the scalar policy computes it.

    Every method takes numbers or arrays that broadcast together. The scalar route (``vector``
    False) applies the scalar function to each distinct combination of arguments (by bit
    pattern, so ``-0.0`` and ``0.0`` stay apart) and gathers the results. The vector route
    computes with numpy's functions (only where :func:`~evictlab.numerics.vector_maths` holds).
    Powers (``decay``, ``power``) and ``exp`` take an exact array form on both routes where this
    machine confirmed it at import (:data:`~evictlab.numerics.POWER_IS_EXACT`: ``float_power``;
    :data:`~evictlab.numerics.COMPLEX_EXP_IS_EXACT`: complex ``exp``). Any element whose array
    result is not finite goes to the scalar function, which gives Python's value or raises
    Python's error (an overflow, a log of a negative number).
    """

    def __init__(self, vector: bool = False) -> None:
        self.vector = vector

    @property
    def route(self) -> str:
        return route_name(self.vector)

    def decay(self, days: Any, half_life_days: Any) -> np.ndarray:
        """:func:`~.signals.decay`: ``2 ** (-max(0, days) / half_life)``, 0.0 for a half-life <= 0."""
        return self._route(decay, _vector_decay if self.vector or POWER_IS_EXACT else None, days, half_life_days)

    def heat(self, heat: Any, days: Any, half_life_days: Any) -> np.ndarray:
        """:func:`~.signals.heat_component`: ``min(1, log1p(heat * decay) / ln 9)``."""
        if not self.vector:  # the decay as an array (exact), log1p once per distinct product
            heat = np.asarray(heat, dtype=np.float64)
            with np.errstate(all="ignore"):
                decayed = heat * self.decay(days, half_life_days)
                out = np.minimum(1.0, self.apply(math.log1p, decayed) / LN_9)
            return self._finite(out, heat_component, heat, days, half_life_days)
        return self._route(heat_component, lambda x, d, h: np.minimum(1.0, np.log1p(x * _vector_decay(d, h)) / LN_9),
                           heat, days, half_life_days)

    def exp(self, x: Any) -> np.ndarray:
        return self._route(math.exp, np.exp if self.vector else complex_exp if COMPLEX_EXP_IS_EXACT else None, x)

    def log(self, x: Any) -> np.ndarray:
        return self._route(math.log, np.log if self.vector else None, x)

    def power(self, base: Any, exponent: Any) -> np.ndarray:
        """``base ** exponent`` as Python's float power computes it."""
        return self._route(pow, np.float_power if self.vector or POWER_IS_EXACT else None, base, exponent)

    def _route(
        self, function: Callable[..., float], vector: Callable[..., np.ndarray] | None, *args: Any
    ) -> np.ndarray:
        """``vector`` on the arguments, the non-finite results by ``function``; ``function``
        alone when there is no exact array form (``vector`` None)."""
        if vector is None:
            return self.apply(function, *args)
        arrays = [np.asarray(arg, dtype=np.float64) for arg in args]
        with np.errstate(all="ignore"):
            out = np.array(vector(*arrays), dtype=np.float64)
        return self._finite(out, function, *arrays)

    def _finite(self, out: np.ndarray, function: Callable[..., float], *args: Any) -> np.ndarray:
        """``out`` with each element that is not finite recomputed by ``function``."""
        odd = ~np.isfinite(out)
        if odd.any():
            arrays = [np.asarray(arg, dtype=np.float64) for arg in args]
            out[odd] = self.apply(function, *(np.broadcast_to(array, out.shape)[odd] for array in arrays))
        return out

    @staticmethod
    def apply(function: Callable[..., float], *args: Any) -> np.ndarray:
        """``function`` on every element of the broadcast arguments, called on Python floats once
        per distinct combination of arguments present (each argument's values found on its own
        unbroadcast array)."""
        arrays = [np.asarray(arg, dtype=np.float64) for arg in args]
        shape = np.broadcast_shapes(*(array.shape for array in arrays))
        distinct, inverses = zip(*(_distinct(array) for array in arrays))
        varying = [index for index, values in enumerate(distinct) if len(values) != 1]
        if len(varying) <= 1:  # at most one argument varies: its distinct values are the combinations
            index = varying[0] if varying else 0
            columns = [values.tolist() if at == index else itertools.repeat(values[0].item())
                       for at, values in enumerate(distinct)]
            results = np.fromiter(map(function, *columns), dtype=np.float64, count=len(distinct[index]))
            return np.broadcast_to(results[inverses[index]], shape).copy()
        codes = np.ravel_multi_index(np.broadcast_arrays(*inverses), [len(values) for values in distinct])
        present, which = _distinct_codes(codes.reshape(-1))
        indices = np.unravel_index(present, [len(values) for values in distinct])
        columns = [values[index].tolist() for values, index in zip(distinct, indices)]
        results = np.fromiter(map(function, *columns), dtype=np.float64, count=len(present))
        return results[which].reshape(shape)


def _distinct(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of an array by bit pattern, and each element's index among them."""
    if array.size == 1:
        return array.reshape(1), np.zeros(array.shape, dtype=np.int64)
    bits, which = _distinct_codes(np.ascontiguousarray(array).reshape(-1).view(np.int64))
    return bits.view(np.float64), which.reshape(array.shape)


def _distinct_codes(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(codes, return_inverse=True)`` for flat int64 codes, by a stable sort.

    Why not ``np.unique``: its sort is numpy's default one, which on AVX512 machines is a SIMD
    sort several times slower than the stable (radix) sort on arrays with many repeated values
    (the padding of a batch), and this runs at every write of a trace replay.
    """
    order = np.argsort(codes, kind="stable")
    ranked = codes[order]
    new = np.empty(len(codes), dtype=bool)
    new[:1] = True
    np.not_equal(ranked[1:], ranked[:-1], out=new[1:])
    which = np.empty(len(codes), dtype=np.int64)
    which[order] = np.cumsum(new) - 1
    return ranked[new], which


EXACT = Numerics(VECTOR_MATHS)


