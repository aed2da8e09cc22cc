"""The one selector: DeerMem's selection (spec 1.4) over any policy's rank keys, in batches.

A policy ranks facts by its :meth:`~evictlab.policies.base.Policy.rank_keys` (ascending), then
by input position; everything after that is decided here, once, for every policy:

* the stable ordering of the keys (:func:`ranked_keys`; keys of several arrays are reduced to
  one code per distinct tuple, so facts are tied exactly when all their keys are equal);
* the reservation: ``min(maximum, ceil(capacity * fraction))`` slots for the policy's
  reservation category (DeerMem's corrections under ``hybrid-v1``, a ``reserve`` modifier's
  category), ``min(slots, facts of the category, capacity)`` of them taken by the
  top-ranked facts of the category, only over the cap and at a capacity above 0;
* what is kept: at or under the cap every fact; otherwise the reserved facts and then the best
  of the others until the capacity is filled (:func:`kept_rule`, one rule for a kept mask and
  for a single fact's fate);
* for the one support fact of each pool: its rank, its margin to the cut line, the
  expectation over random orders of the facts tied with it and its near tie (the outputs of
  :data:`OUTPUTS`, defined in :mod:`evictlab.selection.decisions`).

Shapes: keys are ``(settings, rows, facts)``, a row being a pool or a trace memory; padding (not
``valid``) never ranks or counts; capacities are ``(rows, capacities)``. A pool's support outputs
are computed without sorting whole rows (counts against the support's key, and the margin's
fact found as an order statistic of two sorted lists), so a sweep's grid costs a few passes
over its keys; kept masks and rankings (:func:`select_rows`, details) sort, and a trace
memory's kept and evicted lists are read off its ranking, flat (:meth:`RowDecisions.entries`).

Exactness: keys are compared, never rounded, and a rank key holds the very doubles the policy's
``score`` computes (see :mod:`evictlab.policies.arrays`), so every decision is the scalar
selector's, ties included (``tests/test_golden_decisions.py``, ``tests/test_rank_keys.py``).
A policy whose order is not a sort on keys (``mmr``: ``Policy.vectorised`` is False) is
decided by the scalar selector (:mod:`evictlab.selection.engine`'s ``reference_outcome``).
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ..errors import ContractError
from ..policies import Policy, PolicyParams, Reservation, SelectionContext
from ..policies.arrays import Params, Signals
from ..policies.signals import UTC
from ..policies.ties import NEAR_TIE_RELATIVE, keep_probability

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=UTC)


class RankedKeys:
    """One batch's keys reduced to one sortable array, each part computed when first read.

    ``key`` (S, R, F): the policy's key when it has one, else the code of each fact's key tuple
    (its rank among the row's distinct tuples); equal ⇔ tied; padding NaN. ``value`` (S, R, F):
    each fact's score (``-keys[value_key]``); padding NaN. ``order``: the stable ranking, when
    the keys are several (reducing them computes it). ``by_code``: for codes, the score of each
    code (S, R, F), else None. A trace replay reads the ranking alone.
    """

    def __init__(self, policy: Policy, signals: Signals, params: Params) -> None:
        raw = policy.rank_keys(signals, params)
        shape = np.broadcast_shapes(signals.shape, *(np.shape(key) for key in raw))
        self.shape = (1, *shape) if len(shape) == 2 else shape
        self.valid = np.broadcast_to(signals.valid, self.shape)
        self._raw = [np.broadcast_to(np.asarray(key, dtype=np.float64), self.shape) for key in raw]
        self._value_key = policy.value_key

    @functools.cached_property
    def value(self) -> np.ndarray:
        return np.where(self.valid, -self._raw[self._value_key], np.nan)

    @functools.cached_property
    def order(self) -> np.ndarray | None:
        return None if len(self._raw) == 1 else np.lexsort((*reversed(self._raw), ~self.valid), axis=-1)

    @functools.cached_property
    def _codes(self) -> np.ndarray:
        """Each fact's code (its rank among the row's distinct key tuples); padding's is arbitrary."""
        order = cast(np.ndarray, self.order)
        new = np.zeros(self.shape, dtype=bool)
        for key in (np.take_along_axis(key, order, axis=-1) for key in self._raw):
            new[..., 1:] |= key[..., 1:] != key[..., :-1]
        codes = np.empty(self.shape)
        np.put_along_axis(codes, order, np.cumsum(new, axis=-1, dtype=np.float64), axis=-1)
        return codes

    @functools.cached_property
    def key(self) -> np.ndarray:
        return np.where(self.valid, self._raw[0] if self.order is None else self._codes, np.nan)

    @functools.cached_property
    def by_code(self) -> np.ndarray | None:
        if self.order is None:
            return None
        by_code = np.zeros(self.shape)
        # Padding writes into the last slot, which no code reaches when a row has padding.
        slots = np.where(self.valid, self._codes, self.shape[-1] - 1).astype(np.int64)
        np.put_along_axis(by_code, slots, np.where(self.valid, self.value, 0.0), axis=-1)
        return by_code

    def ranking(self) -> np.ndarray:
        """Input positions best first, padding last (S, R, F): a stable sort of the keys."""
        return self.order if self.order is not None else np.argsort(self.key, axis=-1, kind="stable")

    def values_of(self, key: np.ndarray) -> np.ndarray:
        """The score of facts found by their key (shape of ``key``, (S, R, ...)); NaN where NaN."""
        if self.by_code is None:
            return -key
        found = ~np.isnan(key)
        codes = np.where(found, key, 0).astype(np.int64).reshape(*key.shape[:2], -1)
        values = np.take_along_axis(self.by_code, codes, axis=-1).reshape(key.shape)
        return np.where(found, values, np.nan)


#: The policy's keys for ``signals`` (shape (R, F)) as :class:`RankedKeys`.
ranked_keys = RankedKeys


def reservation_of(policy: Policy, params: Params) -> Reservation | None:
    """The policy's reservation; its fraction and maximum may be (S, 1, 1) arrays (hybrid-v1's)."""
    # Params has PolicyParams' fields, as numbers or arrays: what reservation() reads of them.
    return policy.reservation(SelectionContext(now=_EPOCH, params=cast(PolicyParams, params)))


def reserved_counts(
    reservation: Reservation | None, sizes: np.ndarray, members: np.ndarray, caps: np.ndarray
) -> np.ndarray:
    """Reserved slots taken, (S, R, K): ``min(slots, members, capacity)`` over the cap, else 0.

    ``sizes`` and ``members`` (facts of the category) are per row (R,), ``caps`` (R, K).
    """
    if reservation is None:
        return np.zeros((1, *caps.shape), dtype=np.int64)
    fraction = np.asarray(reservation.fraction, dtype=np.float64)
    maximum = np.asarray(reservation.maximum, dtype=np.int64)
    # Python's min(maximum, ceil(capacity * fraction)): the same IEEE product and ceiling.
    slots = np.minimum(maximum, np.ceil(caps * fraction).astype(np.int64))
    taken = np.minimum(np.minimum(slots, members[:, None]), caps)
    reserved = np.where((sizes[:, None] > caps) & (caps > 0), taken, 0)
    return reserved if reserved.ndim == 3 else reserved[None]


def kept_rule(
    rank: Any, above_in_category: Any, in_category: Any, reserved: Any, caps: Any, over: Any
) -> np.ndarray:
    """Whether a fact is kept (spec 1.4 steps 4-6), from counts; every argument broadcasts.

    ``rank``: facts ranked above it; ``above_in_category``: those of the reservation category.
    Kept when the pool is at or under the cap, when it takes a reserved slot (of the category,
    fewer than ``reserved`` of it above), or when fewer than ``capacity - reserved`` facts
    that hold no reserved slot rank above it.
    """
    open_above = rank - np.minimum(reserved, above_in_category)
    return ~over | (in_category & (above_in_category < reserved)) | (open_above < caps - reserved)


@dataclass(frozen=True)
class RowDecisions:
    """Decisions for R rows (trace memories) at one capacity each.

    ``ranking`` (R, F): input positions best first, padding last; ``kept`` (R, F): whether the
    fact at each rank is kept; ``reserved`` (R,): reserved slots taken; ``sizes`` (R,): facts
    per row; ``capacities`` (R,): each row's cap (an ``unlimited`` policy's raised to its size).
    """

    ranking: np.ndarray
    kept: np.ndarray
    reserved: np.ndarray
    sizes: np.ndarray
    capacities: np.ndarray

    def entries(self, rows: np.ndarray) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """The kept and the evicted entries of ``rows`` (R, F, by input position), each flat, row
        after row, as ``(row of each entry, entry)``: the kept as DeerMem stores them (input order
        at or under the cap, else rank order), the evicted lowest rank first (spec 1.4 step 7)."""
        ranked = np.take_along_axis(rows, self.ranking, axis=-1)
        inside = np.arange(rows.shape[-1]) < self.sizes[:, None]
        under = (self.sizes <= self.capacities)[:, None]
        kept = np.nonzero(np.where(under, inside, self.kept))
        gone = np.nonzero((~self.kept & inside)[:, ::-1])
        return (kept[0], np.where(under, rows, ranked)[kept]), (gone[0], ranked[:, ::-1][gone])


def select_rows(
    policy: Policy | Sequence[tuple[Policy, Any]],
    signals: Signals,
    capacities: Sequence[int] | np.ndarray,
    params: PolicyParams | None = None,
    seeds: Sequence[int] | np.ndarray | int = 0,
) -> RowDecisions:
    """Decide R rows at once: the batched entry for trace replay (every memory of a trace in lockstep).

    ``signals`` (R, F): one memory per row, padding not ``valid``, positions in stored order;
    ``policy``: the policy of every row, or ``(policy, rows)`` pairs (rows a slice or an index
    array) that cover the rows once, so that one call decides the memories of many policies;
    ``capacities`` (R,): each row's cap (an ``unlimited`` policy keeps everything); ``seeds``
    (one, or (R,)) reach seeded policies, one draw per row. Every policy must be vectorised.
    """
    groups = [(policy, slice(None))] if isinstance(policy, Policy) else list(policy)
    if signals.valid.ndim != 2:
        raise ContractError(f"select_rows needs signals shaped (rows, facts), got {signals.shape}")
    sizes = signals.sizes
    caps = np.array(capacities, dtype=np.int64).reshape(-1)
    seeds = np.broadcast_to(np.asarray(seeds).reshape(-1), sizes.shape)
    ranking = np.empty(signals.shape, dtype=np.int64)
    members = np.zeros(signals.shape, dtype=bool)
    reserved = np.zeros(sizes.shape, dtype=np.int64)
    for selector, rows in groups:
        if not selector.vectorised:
            raise ContractError(f"policy {selector.name!r} has no rank keys; decide it with its select()")
        part = signals if isinstance(rows, slice) and rows == slice(None) else signals.take(rows)
        setting = Params.of(params, seeds[rows])
        if selector.unlimited:
            caps[rows] = np.maximum(caps[rows], sizes[rows])
        ranking[rows] = ranked_keys(selector, part, setting).ranking()[0]
        reservation = reservation_of(selector, setting)
        mine = in_category(part, reservation)
        members[rows] = mine
        reserved[rows] = reserved_counts(reservation, sizes[rows], mine.sum(axis=-1), caps[rows][:, None])[0, :, 0]
    kept = kept_ranked(ranking[None], signals.valid, members, reserved[None, :, None], sizes, caps[:, None])
    return RowDecisions(ranking, kept[0, :, 0], reserved, sizes, caps)


def kept_masks(
    keys: RankedKeys, signals: Signals, reservation: Reservation | None, caps: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ranking (S, R, F), the kept masks by input position (S, R, K, F) and the reserved counts (S, R, K)."""
    ranking = keys.ranking()
    members = in_category(signals, reservation)
    reserved = reserved_counts(reservation, signals.sizes, members.sum(axis=-1), caps)
    kept = kept_ranked(ranking, signals.valid, members, reserved, signals.sizes, caps)
    full = kept.shape
    by_position = np.empty(full, dtype=bool)
    np.put_along_axis(by_position, np.broadcast_to(ranking[:, :, None], full), kept, axis=-1)
    return ranking, by_position, np.broadcast_to(reserved, full[:-1])


def kept_ranked(
    ranking: np.ndarray, valid: np.ndarray, members: np.ndarray, reserved: np.ndarray, sizes: np.ndarray,
    caps: np.ndarray,
) -> np.ndarray:
    """Whether the fact at each rank is kept (S, R, K, F): :func:`kept_rule` on the counts above it.

    ``ranking`` (S, R, F); ``valid`` and ``members`` (the reservation's category) (R, F);
    ``reserved`` (S, R, K) slots taken; ``sizes`` (R,); ``caps`` (R, K).
    """
    member_ranked = np.take_along_axis(np.broadcast_to(members, ranking.shape), ranking, axis=-1)
    valid_ranked = np.take_along_axis(np.broadcast_to(valid, ranking.shape), ranking, axis=-1)
    above = np.cumsum(member_ranked, axis=-1) - member_ranked
    position = np.arange(ranking.shape[-1])
    kept = valid_ranked[:, :, None] & kept_rule(
        position,
        above[:, :, None],
        member_ranked[:, :, None],
        reserved[..., None],
        caps[None, :, :, None],
        (sizes[:, None] > caps)[None, :, :, None],
    )
    return np.broadcast_to(kept, (max(ranking.shape[0], reserved.shape[0]), *caps.shape, ranking.shape[-1]))


def in_category(signals: Signals, reservation: Reservation | None) -> np.ndarray:
    """Which facts belong to the reservation's category (none without one), (R, F)."""
    if reservation is None:
        return np.zeros(signals.shape, dtype=bool)
    return signals.in_category(reservation.category) & signals.valid


def support_outputs(
    keys: RankedKeys,
    signals: Signals,
    support: np.ndarray,
    reservation: Reservation | None,
    caps: np.ndarray,
    *,
    uniform: bool = False,
) -> dict[str, np.ndarray]:
    """The outputs for one support fact per row (positions ``support``, (R,)), each (S, R, K).

    ``uniform``: the expectation treats every fact as tied (a policy ranking by a random draw);
    ``support_tied`` is still read from the keys.
    """
    key = keys.key
    n_settings, n_rows, width = key.shape
    rows = np.arange(n_rows)
    members = in_category(signals, reservation)
    sizes, member_counts = signals.sizes, members.sum(axis=-1)
    own = key[:, rows, support][..., None]
    before = np.arange(width) < support[:, None]
    better, tied = key < own, key == own
    counts = [
        np.count_nonzero(mask, axis=-1)
        for mask in (better, better & members, tied, tied & members, tied & before, tied & before & members)
    ]
    better_all, better_members, tied_all, tied_members, tied_before, tied_before_members = (
        count[..., None] for count in counts
    )
    rank = better_all + tied_before
    above_members = better_members + tied_before_members
    member = members[rows, support][:, None]
    over = sizes[:, None] > caps
    reserved = reserved_counts(reservation, sizes, member_counts, caps)
    retained = kept_rule(rank, above_members, member, reserved, caps, over)
    fill = caps - reserved

    # The fact the margin is measured against: the best evicted fact for a kept support; for an
    # evicted one the kept fact it would displace: the lowest-ranked kept fact holding no reserved
    # slot or, for a fact of the reservation's category, the lowest-ranked kept fact of all.
    open_facts = _OpenFacts(key, signals.valid & ~members, members)
    other = open_facts.at(np.where(retained, fill, fill - 1), reserved)
    if reservation is not None:
        lowest_reserved = open_facts.member_at(reserved - 1)
        takes = ~retained & member
        other = np.where(takes, np.fmax(other, lowest_reserved), other)
    other = np.where(over, other, np.nan)
    own_value = keys.value[:, rows, support][..., None]
    other_value = keys.values_of(other)
    larger = np.fmax(np.abs(own_value), np.abs(other_value))
    with np.errstate(invalid="ignore"):  # inf - inf is NaN, as in Python
        margin = own_value - other_value
        near = np.isfinite(margin) & (margin != 0) & (np.abs(margin) <= NEAR_TIE_RELATIVE * larger)
    by_keys = expected_retention(
        caps, reserved, over, retained, tied_all, tied_members, better_members, better_all - better_members, member
    )
    expected = by_keys
    if uniform:
        zero = np.zeros_like(better_all)
        expected = expected_retention(
            caps, reserved, over, retained, sizes[:, None], member_counts[:, None], zero, zero, member
        )
    shape = (n_settings, n_rows, caps.shape[-1])
    return {
        "support_retained": np.broadcast_to(retained, shape),
        "support_rank": np.broadcast_to(rank + 1, shape),
        "reserved_correction_slots": np.broadcast_to(reserved, shape),
        "support_margin": np.broadcast_to(margin, shape),
        "support_expected": np.broadcast_to(expected, shape),
        "support_tied": np.broadcast_to((by_keys > 0) & (by_keys < 1), shape),
        "support_near_tie": np.broadcast_to(near, shape),
    }


class _OpenFacts:
    """Order statistics of a batch's keys: the ``j``-th best fact that holds no reserved slot.

    The facts outside the reservation's category and those of it after the ``reserved`` best
    are the open facts; each kind is sorted once (padding and the other kind NaN, last), and the
    ``j``-th best of their union is found by a binary search on how many of the first ``j + 1``
    come from the category (which of several tied facts is taken does not change the key).
    """

    def __init__(self, key: np.ndarray, others: np.ndarray, members: np.ndarray) -> None:
        self.others = np.sort(np.where(others, key, np.nan), axis=-1)
        self.members = np.sort(np.where(members, key, np.nan), axis=-1) if members.any() else None
        self.n_others = others.sum(axis=-1)[None, :, None]
        self.n_members = members.sum(axis=-1)[None, :, None]

    def _get(self, array: np.ndarray, index: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """``array[s, r, index]`` for (S, R, K) indices, or for flat ``index`` of the rows
        ``rows`` (flat offsets of (s, r)); NaN outside [0, width)."""
        width = array.shape[-1]
        if rows is None:
            index = np.broadcast_to(index, (*array.shape[:2], index.shape[-1]))
            rows = np.arange(0, array.size, width).reshape(*array.shape[:2], 1)  # each row's first element
        inside = (index >= 0) & (index < width)
        found = array.reshape(-1).take(rows + np.where(inside, index, 0))
        return np.where(inside, found, np.nan)

    def member_at(self, rank: np.ndarray) -> np.ndarray:
        """Key of the ``rank``-th best fact of the category (NaN where there is none)."""
        if self.members is None:
            return np.full(rank.shape, np.nan)
        return np.where(rank < self.n_members, self._get(self.members, rank), np.nan)

    def at(self, rank: np.ndarray, reserved: np.ndarray) -> np.ndarray:
        """Key of the ``rank``-th best open fact (0-based), shape (S, R, K); NaN where there is none."""
        shape = np.broadcast_shapes(rank.shape, reserved.shape, (self.others.shape[0], *rank.shape[1:]))
        rank = np.broadcast_to(rank, shape)
        reserved = np.broadcast_to(reserved, shape)
        n_others = np.broadcast_to(self.n_others, shape)
        rest = np.broadcast_to(self.n_members, shape) - reserved
        exists = (rank >= 0) & (rank < n_others + rest)
        if self.members is None:
            return np.where(exists, self._get(self.others, rank), np.nan)
        # t = members among the first rank + 1 open facts: the largest t in [low, high] whose
        # last member does not come after the other fact it would displace; searched only
        # where low < high, on those elements alone.
        low = np.maximum(0, rank + 1 - n_others)
        high = np.minimum(rank + 1, rest)
        width = self.others.shape[-1]
        rows = np.broadcast_to(np.arange(0, self.others.size, width).reshape(*shape[:2], 1), shape)
        open_ = np.flatnonzero(low < high)
        found, top = low.reshape(-1)[open_], high.reshape(-1)[open_]
        at_row, at_rank, at_reserved = (array.reshape(-1)[open_] for array in (rows, rank, reserved))
        while len(open_):
            middle = (found + top + 1) // 2
            member = self._get(self.members, at_reserved + middle - 1, at_row)
            other = self._get(self.others, at_rank + 1 - middle, at_row)
            fits = ~(member > other)
            found, top = np.where(fits, middle, found), np.where(fits, top, middle - 1)
            left = found < top
            low.reshape(-1)[open_[~left]] = found[~left]
            open_, found, top, at_row, at_rank, at_reserved = (
                array[left] for array in (open_, found, top, at_row, at_rank, at_reserved)
            )
        last_member = np.where(low > 0, self._get(self.members, reserved + low - 1), -np.inf)
        last_other = np.where(rank - low >= 0, self._get(self.others, rank - low), -np.inf)
        return np.where(exists, np.fmax(last_member, last_other), np.nan)


_COUNT_NAMES = ("capacity", "reserved_slots", "better_reserved", "better_other", "tied_reserved", "tied_other")
# The closed form's exact sum is slow, and the same counts recur across chunks and calls.
_keep_probability = functools.lru_cache(maxsize=1 << 14)(keep_probability)


def expected_retention(
    caps: np.ndarray,
    reserved: np.ndarray,
    over: np.ndarray,
    retained: np.ndarray,
    size: np.ndarray,
    tied_reserved: np.ndarray,
    better_reserved: np.ndarray,
    better_other: np.ndarray,
    reserved_member: np.ndarray,
) -> np.ndarray:
    """P(support kept) over random orders of the facts tied with it (:func:`~evictlab.policies.ties.keep_probability`).

    Every argument broadcasts to ``retained``'s shape. Where no tie group straddles the cut line
    the decision is certain; a straddling group without reserved members keeps ``filled / size``
    of them, and only the rest evaluates the closed form, once per distinct set of counts.
    """
    shape = retained.shape
    expected = retained.astype(np.float64)
    where = np.nonzero(np.broadcast_to(size > 1, shape) & np.broadcast_to(over, shape))
    if not len(where[0]):
        return expected
    columns = [
        np.broadcast_to(array, shape)[where]
        for array in (caps, reserved, better_reserved, better_other, tied_reserved, size, reserved_member)
    ]
    capacity, slots, better_res, better_oth, tied_res, size_, member = columns
    taken = np.minimum(tied_res, np.maximum(0, slots - better_res))
    open_above = better_oth + np.maximum(0, better_res - slots)
    filled = np.clip(capacity - slots - open_above, 0, size_ - taken)
    straddles = (taken + filled > 0) & (taken + filled < size_)
    expected[tuple(index[straddles] for index in where)] = filled[straddles] / size_[straddles]
    closed = np.flatnonzero(straddles & (taken > 0))
    if len(closed):
        counts = np.stack([capacity, slots, better_res, better_oth, tied_res, size_ - tied_res, member], axis=1)
        distinct, which = np.unique(counts[closed].astype(np.int64), axis=0, return_inverse=True)
        probabilities = np.array(
            [
                float(_keep_probability(**dict(zip(_COUNT_NAMES, row[:6])), reserved_member=bool(row[6])))
                for row in distinct.tolist()
            ]
        )
        expected[tuple(index[closed] for index in where)] = probabilities[which.reshape(-1)]
    return expected
