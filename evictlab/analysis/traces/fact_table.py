"""The fact table of a replay: every fact some memory holds, its signals as columns by row.

A fact's signals depend on the trace's events only, never on the memory holding it (an evicted
fact never returns), so :class:`.memory.Lockstep` keeps them once, here, for all its memories;
each row also has its place in fact-id order (:class:`IdOrder`), storage's order (spec 1.14).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...policies.arrays import NO_TIME, Signals, category_name
from ...policies.signals import decay
from .schema import iso


def grown(array: np.ndarray, size: int, fill: Any) -> np.ndarray:
    """``array`` with room for at least ``size`` entries on its last axis (doubling), new ones ``fill``."""
    width = array.shape[-1]
    if size <= width:
        return array
    extra = np.full((*array.shape[:-1], max(size, 2 * width) - width), fill, dtype=array.dtype)
    return np.concatenate((array, extra), axis=-1)


_TIMES, _COUNTS = ("created", "accessed", "confirmed"), ("access_count", "confirmation_count")


class IdOrder:
    """Numbers in the order of fact ids (Python's string order, as storage sorts them), assigned
    as ids arrive: the midpoint of the neighbours' (the next integer at either end), every id
    renumbered when two neighbours run out of room between them."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.numbers: list[float] = []

    def add(self, fact_id: str) -> bool:
        """Place ``fact_id``; whether every number changed (then read them again by :meth:`of`)."""
        at = bisect.bisect_left(self.ids, fact_id)
        low = self.numbers[at - 1] if at else -math.inf
        high = self.numbers[at] if at < len(self.numbers) else math.inf
        number = (low + high) / 2 if math.isfinite(low + high) else low + 1 if math.isfinite(low) else (
            high - 1 if math.isfinite(high) else 0.0)
        self.ids.insert(at, fact_id)
        self.numbers.insert(at, number)
        if not low < number < high:
            self.numbers = [float(position) for position in range(len(self.ids))]
            return True
        return False

    def number(self, fact_id: str) -> float:
        return self.numbers[bisect.bisect_left(self.ids, fact_id)]

    def of(self, fact_ids: Sequence[str]) -> np.ndarray:
        found = dict(zip(self.ids, self.numbers))
        return np.array([found[fact_id] for fact_id in fact_ids], dtype=np.float64)

    def retain(self, fact_ids: set[str]) -> None:
        """Forget every id but ``fact_ids`` (the others keep their numbers)."""
        kept = [(fact_id, number) for fact_id, number in zip(self.ids, self.numbers) if fact_id in fact_ids]
        self.ids, self.numbers = [fact_id for fact_id, _ in kept], [number for _, number in kept]


class FactTable:
    """Every fact some memory of a replay holds: signals as columns by row, rows by fact id.

    Times are integer microseconds (``accessed`` and ``confirmed`` :data:`NO_TIME` until the
    first search or confirmation), ``heat`` the usage entry's ``accessHeat`` as spec 1.7's
    update computes it (under ``access_half_life_days``), counts int64, ``category`` codes
    into :attr:`category_names` (DeerMem's comparison form), ``stored`` the category as added,
    ``id_order`` the row's place in fact-id order (:class:`IdOrder`; storage's order, spec 1.14).
    """

    def __init__(self, access_half_life_days: float) -> None:
        self.half_life = access_half_life_days
        self.index: dict[str, int] = {}
        self.size = 0
        self.ids = np.empty(1024, dtype=object)
        self.stored = np.empty(1024, dtype=object)
        self.confidence = np.zeros(1024)
        self.heat = np.zeros(1024)
        self.category = np.zeros(1024, dtype=np.int64)
        self.id_order = np.zeros(1024)
        self._id_numbers = IdOrder()
        self.times = {name: np.full(1024, NO_TIME, dtype=np.int64) for name in _TIMES}
        self.counts = {name: np.zeros(1024, dtype=np.int64) for name in _COUNTS}
        self.category_names: list[str] = []
        self._codes: dict[str, int] = {}
        #: Columns a replay stage keeps by row (:meth:`column`), grown and compacted with the rest.
        self.extra: dict[str, np.ndarray] = {}
        self._fills: dict[str, Any] = {}

    def column(self, name: str, dtype: Any, fill: Any) -> None:
        """Keep one more column by row (``self.extra[name]``), every row ``fill`` until set."""
        self.extra[name] = np.full(len(self.ids), fill, dtype=dtype)
        self._fills[name] = fill

    def add(self, fact_id: str, confidence: float, category: str, now: int) -> int:
        """A new row for a fact added at ``now``; its number."""
        row = self.size
        if row == len(self.ids):
            for name in ("ids", "stored", "confidence", "heat", "category", "id_order"):
                setattr(self, name, grown(getattr(self, name), row + 1, None if name in ("ids", "stored") else 0))
            self.times = {name: grown(column, row + 1, NO_TIME) for name, column in self.times.items()}
            self.counts = {name: grown(column, row + 1, 0) for name, column in self.counts.items()}
            self.extra = {name: grown(column, row + 1, self._fills[name]) for name, column in self.extra.items()}
        self.ids[row], self.confidence[row] = fact_id, confidence
        self._categorise(row, category)
        self.times["created"][row] = now
        self.index[fact_id] = row
        self.size += 1
        if self._id_numbers.add(fact_id):
            self.id_order[: self.size] = self._id_numbers.of(self.ids[: self.size].tolist())
        else:
            self.id_order[row] = self._id_numbers.number(fact_id)
        return row

    def _categorise(self, row: int, category: str) -> None:
        name = category_name(category)
        self.stored[row] = category
        self.category[row] = self._codes.setdefault(name, len(self._codes))
        if len(self._codes) > len(self.category_names):
            self.category_names.append(name)

    def recategorise(self, fact_id: str, category: str) -> None:
        """Store ``fact_id`` under ``category`` from now on (storage's rewrite, spec 1.14)."""
        row = self.index.get(fact_id)
        if row is not None:
            self._categorise(row, category)

    def stamp(self, fact_ids: set[str], now: int) -> None:
        """Spec 1.9's reinforcement: ``lastConfirmedAt`` = now, ``confirmationCount`` + 1."""
        for fact_id in fact_ids:
            row = self.index.get(fact_id)
            if row is not None:
                self.times["confirmed"][row] = now
                self.counts["confirmation_count"][row] += 1

    def access(self, fact_ids: list[str], now: int) -> None:
        """Spec 1.7's usage update for the ids a search returned (already de-duplicated)."""
        accessed, heat = self.times["accessed"], self.heat
        for fact_id in fact_ids:
            row = self.index.get(fact_id)
            if row is None:
                continue
            previous = int(accessed[row])
            # As audit.update_usage: decayed from the previous access, reset without one.
            days = (now - previous) / 1e6 / 86_400
            heat[row] = (0.0 if previous == NO_TIME else float(heat[row]) * decay(days, self.half_life)) + 1.0
            accessed[row] = now
            self.counts["access_count"][row] += 1

    def signals(self, now: int, rows: np.ndarray, valid: np.ndarray) -> Signals:
        """The signals of ``rows`` (any shape; padding where not ``valid``) at ``now``: each row named
        read once (:meth:`Signals.of_columns`), not the whole table, then gathered."""
        read = np.flatnonzero(np.bincount(rows.ravel(), minlength=self.size))  # padding names a row too
        at = np.zeros(self.size, dtype=np.int64)
        at[read] = np.arange(len(read))
        every = Signals.of_columns(
            now,
            confidence=self.confidence[read],
            created=self.times["created"][read],
            confirmed=self.times["confirmed"][read],
            accessed=self.times["accessed"][read],
            heat=self.heat[read],
            access_count=self.counts["access_count"][read],
            confirmation_count=self.counts["confirmation_count"][read],
            category=self.category[read],
            category_names=self.category_names,
            fact_ids=self.ids[read],
            valid=np.ones(len(read), dtype=bool),
        )
        return dataclasses.replace(every.take(at[rows]), valid=valid)

    def facts(self, rows: np.ndarray) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """DeerMem-shaped fact dicts and usage map of ``rows`` (for a scalar ``select``)."""
        facts, usage = [], {}
        for row in rows.tolist():
            fact: dict[str, Any] = {"id": self.ids[row], "confidence": self.confidence[row],
                                    "category": self.stored[row], "createdAt": iso(int(self.times["created"][row]))}
            if self.times["confirmed"][row] != NO_TIME:
                fact["lastConfirmedAt"] = iso(int(self.times["confirmed"][row]))
                fact["confirmationCount"] = int(self.counts["confirmation_count"][row])
            if self.times["accessed"][row] != NO_TIME:
                usage[fact["id"]] = {"accessHeat": float(self.heat[row]),
                                     "accessCount": int(self.counts["access_count"][row]),
                                     "lastAccessedAt": iso(int(self.times["accessed"][row]))}
            facts.append(fact)
        return facts, usage

    def compact(self, live: np.ndarray) -> np.ndarray:
        """Keep only the ``live`` rows (a mask over the table), renumbered in order; the old-to-new map."""
        keep = np.flatnonzero(live[: self.size])
        remap = np.full(self.size, -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        fills = {"ids": None, "stored": None, "confidence": 0, "heat": 0, "category": 0, "id_order": 0}
        columns = [(getattr(self, name), fill) for name, fill in fills.items()]
        columns += [(column, NO_TIME) for column in self.times.values()]
        columns += [(column, 0) for column in self.counts.values()]
        columns += [(column, self._fills[name]) for name, column in self.extra.items()]
        for column, fill in columns:
            column[: len(keep)] = column[keep]
            column[len(keep) :] = fill  # a row reused by a later add starts as a new one
        self.size = len(keep)
        self.index = {fact_id: row for row, fact_id in enumerate(self.ids[: self.size].tolist())}
        self._id_numbers.retain(set(self.index))
        return remap

    def by_id(self, rows: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """``rows`` (K, width) with each row's ``valid`` entries sorted by fact id, the others after
        them in their order (a stable sort, of only the rows not in that order already)."""
        keys = np.where(valid, self.id_order[rows], np.inf)
        unsorted = np.flatnonzero((keys[:, 1:] < keys[:, :-1]).any(axis=1))
        if not len(unsorted):
            return rows
        rows = rows.copy()
        moved = np.argsort(keys[unsorted], axis=1, kind="stable")
        rows[unsorted] = np.take_along_axis(rows[unsorted], moved, axis=1)
        return rows
