"""Settings held as columns: a sequence of :class:`~evictlab.policies.PolicyParams` without the objects.

The engine reads a batch of settings as seven arrays (three weights, two half-lives, the
reservation fraction and maximum). :class:`SettingColumns` holds them directly, so a grid of
hundreds of thousands of settings is built and checked with numpy (:meth:`SettingColumns.product`)
instead of one validated object per setting; a setting becomes a ``PolicyParams`` only when
one is asked for by index. Any sequence of ``PolicyParams`` converts with :meth:`SettingColumns.of`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from ..errors import ContractError
from ..policies import PolicyParams
from ..policies.base import WEIGHT_TOLERANCE

#: The columns, in :class:`PolicyParams` field order.
FIELDS = (
    "confidence_weight", "confirmation_weight", "access_weight",
    "confirmation_half_life_days", "access_half_life_days",
    "correction_reserved_fraction", "correction_reserved_max",
)  # fmt: skip


class SettingColumns(Sequence[PolicyParams]):
    """Settings as seven equal-length arrays (float64, the reservation maximum int64).

    Every row obeys :class:`PolicyParams`' rules; the constructors check them. Indexing gives a
    ``PolicyParams`` (numbers as floats, except the maximum), slicing another
    ``SettingColumns``; equality is by value with any sequence of ``PolicyParams``.
    """

    __slots__ = ("_columns",)

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        # Internal: callers use of() or product(), which check the rows first.
        self._columns = columns

    @classmethod
    def of(cls, settings: Sequence[PolicyParams]) -> SettingColumns:
        """The columns of ``settings`` (a ``SettingColumns`` is returned as it is)."""
        if isinstance(settings, SettingColumns):
            return settings
        settings = tuple(settings)
        for index, setting in enumerate(settings):
            if not isinstance(setting, PolicyParams):
                raise ContractError(f"setting {index} must be a PolicyParams, got {type(setting).__name__}")
        columns = {
            name: np.array([getattr(setting, name) for setting in settings], dtype=np.float64)
            for name in FIELDS[:-1]
        }
        columns[FIELDS[-1]] = np.array([s.correction_reserved_max for s in settings], dtype=np.int64)
        return cls(_normalised(columns))

    @classmethod
    def product(
        cls,
        weights: Sequence[Sequence[float]],
        confirmation_half_lives: Sequence[float],
        access_half_lives: Sequence[float],
        reserved_fractions: Sequence[float],
        reserved_maxima: Sequence[int],
    ) -> SettingColumns:
        """Every combination, weights outermost and the reservation maximum innermost.

        The order of nested loops over the five lists (as ``SweepGrid.settings`` lists them).
        Each list is checked once, by the rules of :class:`PolicyParams`; a value that breaks
        one raises the error ``PolicyParams`` would raise for it.
        """
        triples = _weight_column(weights)
        axes = [
            triples,
            _checked("confirmation_half_life_days", confirmation_half_lives),
            _checked("access_half_life_days", access_half_lives),
            _checked("correction_reserved_fraction", reserved_fractions),
            _checked("correction_reserved_max", reserved_maxima),
        ]
        lengths = [len(axis) for axis in axes]
        # Row r of the product takes index (r // inner) % length along each axis.
        index = np.indices(lengths).reshape(len(axes), -1)
        columns = {name: triples[index[0], i] for i, name in enumerate(FIELDS[:3])}
        for axis, name in zip(axes[1:], FIELDS[3:]):
            columns[name] = axis[index[FIELDS.index(name) - 2]]
        return cls(_normalised(columns))

    # ------------------------------------------------------------------ sequence

    def __len__(self) -> int:
        return len(self._columns[FIELDS[0]])

    @overload
    def __getitem__(self, index: int) -> PolicyParams: ...

    @overload
    def __getitem__(self, index: slice) -> SettingColumns: ...

    def __getitem__(self, index: int | slice) -> PolicyParams | SettingColumns:
        if isinstance(index, slice):
            return self.take(index)
        row = range(len(self))[index]  # IndexError past the end, negative indices allowed
        values: dict[str, Any] = {name: float(self._columns[name][row]) for name in FIELDS[:-1]}
        return PolicyParams(**values, correction_reserved_max=int(self._columns[FIELDS[-1]][row]))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SettingColumns):
            return len(self) == len(other) and all(
                np.array_equal(self._columns[name], other._columns[name]) for name in FIELDS
            )
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable arrays inside

    def __repr__(self) -> str:
        return f"SettingColumns({len(self)} settings)"

    def take(self, rows: slice | np.ndarray) -> SettingColumns:
        """The settings at ``rows`` (a slice or an index array), in that order."""
        return SettingColumns({name: column[rows] for name, column in self._columns.items()})

    # ------------------------------------------------------------------ columns

    def column(self, name: str) -> np.ndarray:
        """One column by its :class:`PolicyParams` field name (read-only)."""
        return self._columns[name]

    def reserved_slots(self, capacities: Sequence[int]) -> np.ndarray:
        """``min(maximum, ceil(capacity * fraction))`` per setting and capacity, shape (S, K).

        The count :class:`~evictlab.policies.base.Reservation` gives: numpy's product and
        ceiling are Python's for these operands (capacities are small integers).
        """
        caps = np.asarray(capacities, dtype=np.int64)
        fractions = self._columns["correction_reserved_fraction"][:, None]
        budget = np.ceil(caps * fractions).astype(np.int64)
        return np.minimum(self._columns["correction_reserved_max"][:, None], budget)


def _normalised(columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    # A weight of -0.0 is a valid 0 (PolicyParams accepts it); adding 0.0 makes it +0.0, so
    # every weighted term is +0.0 or positive and no score is -0.0 (the kernel orders scores
    # by their bit patterns, where -0.0 would sort below +0.0).
    for name in FIELDS[:3]:
        columns[name] = columns[name] + 0.0
    for column in columns.values():
        column.flags.writeable = False
    return columns


def _checked(name: str, values: Sequence[Any]) -> np.ndarray:
    """One list of a parameter, each value checked by PolicyParams' rule for ``name``."""
    values = tuple(values)
    if not values:
        raise ContractError(f"no values for {name}")
    for value in values:
        PolicyParams(**{name: value})  # raises PolicyParams' own error for a bad value
    if name == "correction_reserved_max":
        return np.array([int(value) for value in values], dtype=np.int64)
    return np.array([float(value) for value in values], dtype=np.float64)


def _weight_column(weights: Sequence[Sequence[float]]) -> np.ndarray:
    """Weight triples as an (n, 3) array, checked by PolicyParams' rules without building one per triple."""
    triples = [tuple(triple) for triple in weights]
    if not triples:
        raise ContractError("no weight triples")
    plain = all(
        len(triple) == 3 and all(type(value) is float or type(value) is int for value in triple)
        for triple in triples
    )
    if not plain:
        for triple in triples:
            if len(triple) != 3:
                raise ContractError(f"a weight triple needs three numbers, got {triple!r}")
            PolicyParams(*triple)  # raises PolicyParams' own error for a bad triple
        return np.array(triples, dtype=np.float64)
    array = np.array(triples, dtype=np.float64)
    total = array[:, 0] + array[:, 1] + array[:, 2]  # left to right, as PolicyParams sums them
    good = np.isfinite(array).all(axis=1) & ((array >= 0) & (array <= 1)).all(axis=1)
    good &= np.abs(total - 1.0) <= WEIGHT_TOLERANCE
    if not good.all():
        bad = triples[int(np.argmin(good))]
        PolicyParams(*bad)  # type: ignore[arg-type]  # raises PolicyParams' own error
        raise ContractError(f"weights {bad!r} are not on the simplex")
    return array
