"""The engine's batch kernel: every output of a chunk of settings x cases x capacities from its scores.

Input: the scores of every fact, shape (S, C, P) (settings, cases, padded pool width; padding
``-inf``), the correction flags and sizes of the cases, their support positions, the
capacities, and the reserved-slot budgets ``min(maximum, ceil(capacity * fraction))`` of each
setting and capacity (``None``: no reservation, the ``confidence`` policy). Output: the
arrays of :data:`evictlab.selection.engine.OUTPUTS`, shape (S, C, K).

No full ranking is built. The selector keeps the ``R`` best-ranked corrections (``R`` the
reserved count) and then the best ``m = capacity - R`` of the other facts, the *open* facts,
so every output follows from a few counts per (setting, case) and the scores at a few ranks:

* The support's rank is the number of facts that outrank it: a higher score, or the same
  score and an earlier position (the selector's only tie-break). It is kept when the pool is
  at or under the cap, when it is a correction with fewer than ``R`` corrections above it
  (a reserved slot), or when fewer than ``m`` open facts outrank it.
* A margin needs the score of the ``j``-th best open fact (``j = m`` for the best evicted
  one, ``m - 1`` for the lowest kept one). The open facts are the other facts plus the
  corrections after the ``R`` best. Which of several tied corrections is reserved does not
  change these scores.

Scores are non-negative doubles below 2.0 (weights on the simplex, components in [0, 1]),
whose bit patterns read as int64 order exactly as the scores do (``+0.0`` is the smallest; the
engine never produces ``-0.0``; padding's ``-inf`` reads as a negative int64). Each
(setting, case) is sorted once, in one of two ways:

* Pools of more than DENSE_WIDTH facts (the searched path): bit 62 added to the corrections'
  keys sorts them above every other fact (a score's bits stay below 2**62), so a row reads,
  ascending: padding, the other facts, the corrections. Counts against the support's score
  are binary searches in that row, the ties before the support a pass over the rows that
  have ties, and a margin's score the ``(j+1)``-th largest of the two sorted lists, found by
  a binary search.
* Pools of at most DENSE_WIDTH facts (the dense path, where a search's every step, a gather
  over all rows, costs more than the arithmetic it saves): the support's counts come from
  bit masks of the facts above it and tied with it (one comparison and one matrix product
  each, then popcounts), and the keys, doubled and flagged in their lowest bit when they are
  corrections, are sorted as one list, where a margin's fact is found by walking past the
  reserved corrections' places (:mod:`evictlab.selection.engine_dense`).

The scores are compared exactly as the selector compares them: nothing here rounds, and
counts summed as floats are exact integers (float32 below 2**24, float64 below 2**53).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ContractError
from ..policies.ties import NEAR_TIE_RELATIVE, keep_probability
from .engine_dense import DENSE_WIDTH, DenseRows, dense_counts

#: The largest pool the kernel decides: a bound on one case's memory, far beyond DeerMem's cap
#: of 500 facts (a chunk holds at least one setting's scores and keys for every case).
MAX_WIDTH = (1 << 26) - 1

#: Added to a correction's key so that corrections sort above every other fact.
_CORRECTION_BIT = np.int64(1 << 62)
# Sentinels below and above every key: "no such fact" and "no bound from this side".
_NONE = np.iinfo(np.int64).min
_ANY = np.iinfo(np.int64).max


class _SortedRows:
    """Each (setting, case)'s keys in ascending order after a sentinel, with look-ups by rank.

    Row layout: ``_NONE``, padding, the other facts, the corrections. A look-up past the
    last fact of its kind lands on a negative key (padding or the sentinel), which reads as
    "no such fact" and loses every comparison with a real key.
    """

    def __init__(self, values: np.ndarray, correction: np.ndarray, corrections: np.ndarray) -> None:
        n_settings, n_cases, width = values.shape
        keys = np.empty((n_settings, n_cases, width + 1), dtype=np.int64)
        keys[..., 0] = _NONE
        np.add(values.view(np.int64), np.where(correction, _CORRECTION_BIT, np.int64(0)), out=keys[..., 1:])
        keys.sort(axis=-1)
        self.width = width
        self.flat = keys.reshape(-1)
        self.starts = (np.arange(n_settings * n_cases, dtype=np.int64) * (width + 1)).reshape(n_settings, n_cases)
        self.corrections = corrections

    def count_above(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """How many keys of each row exceed ``key`` (shape (S, C)), and how many are at least it.

        The first count is a binary search; the keys equal to ``key`` end where it stops,
        and unless two of them are there (a tie) the second count follows from one look-up.
        Rows with such ties search again for ``key - 1``.
        """
        last = self._last_at_most(key, self.starts)
        above = self.width - (last - self.starts)
        at_least = above + (self.flat[last] == key)  # the sentinel equals no real key
        ties = np.flatnonzero((self.flat[last] == key) & (self.flat[last - 1] == key))
        if len(ties):
            starts = self.starts.reshape(-1)[ties]
            at_least.reshape(-1)[ties] = self.width - (self._last_at_most(key.reshape(-1)[ties] - 1, starts) - starts)
        return above, at_least

    def _last_at_most(self, key: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Flat index of the last key at most ``key`` in the rows at ``starts`` (the sentinel if none).

        A binary search over flat indices. Its first step, at the ``k``-th key (``k`` the
        largest power of two up to the width), leaves at most ``k - 1`` keys to place on
        either side (past it, at least ``width - k + 1`` keys are at most ``key``), so the
        later steps of ``k / 2``, ``k / 4``, ..., 1 never pass the row's end.
        """
        first = 1 << (self.width.bit_length() - 1)
        last = np.where(self.flat[starts + first] <= key, starts + (self.width - first + 1), starts)
        step = first >> 1
        while step:
            candidate = last + step
            np.copyto(last, candidate, where=self.flat[candidate] <= key)
            step >>= 1
        return last

    def lookups(self) -> _Lookups:
        """Look-ups for queries shaped (K, S, C): capacities outermost."""
        return _Lookups(self.flat, self.starts[None], (self.starts + self.width)[None], self.corrections[None, None])


@dataclass(frozen=True)
class _Lookups:
    """Rank look-ups for a set of queries; each query carries its row's position and counts."""

    flat: np.ndarray
    first: np.ndarray  # index of the row's sentinel
    last: np.ndarray  # index of the row's best key
    corrections: np.ndarray

    def subset(self, index: np.ndarray, shape: tuple[int, int, int]) -> _Lookups:
        """The look-ups of the queries at flat ``index`` into queries shaped ``shape`` (K, S, C)."""
        row = index % (shape[1] * shape[2])  # setting * cases + case
        first, width = self.first.reshape(-1)[row], (self.last - self.first).flat[0]
        return _Lookups(self.flat, first, first + width, self.corrections.reshape(-1)[row % shape[2]])

    def reserved_at(self, index: np.ndarray, shape: tuple[int, int, int], reserved: np.ndarray) -> np.ndarray:
        """Key of the last of the ``reserved`` (>= 1) best corrections, for the queries at flat ``index``."""
        return self.subset(index, shape).correction_at(reserved - 1)

    def margin_keys(self, caps: np.ndarray, retained: np.ndarray, reserved: np.ndarray) -> np.ndarray:
        """Key of the open fact each margin is measured against (see decide)."""
        return self.open_at(np.maximum(caps - reserved - 1 + retained, 0), reserved)

    def correction_at(self, rank: np.ndarray) -> np.ndarray:
        """Key (flag removed) of the ``rank``-th best correction (0-based; the caller keeps it in range)."""
        return self.flat[self.last - rank] - _CORRECTION_BIT

    def other_at(self, rank: np.ndarray) -> np.ndarray:
        """Key of the ``rank``-th best fact that is not a correction; negative past the last."""
        return self.flat[np.maximum(self.last - self.corrections - rank, self.first)]

    def open_at(self, rank: np.ndarray, reserved: np.ndarray) -> np.ndarray:
        """Key of the ``rank``-th best open fact (0-based); negative where there is none.

        The open facts are the other facts and the corrections after the ``reserved`` best.
        ``taken`` of the top ``rank + 1`` come from those corrections: the largest count whose
        last correction still beats the other fact it displaces (a monotone test, so a binary
        search), and the ``rank``-th is the lower of the last ones taken from each list. Only
        queries with unreserved corrections to consider run the search.
        """
        limit = np.minimum(rank + 1, self.corrections - reserved)
        found = np.ascontiguousarray(self.other_at(rank))  # written through a flat view below
        index = np.flatnonzero(limit > 0)
        if not len(index):
            return found
        part = self.subset(index, found.shape)
        rank, reserved, limit = rank.reshape(-1)[index], reserved.reshape(-1)[index], limit.reshape(-1)[index]
        taken = np.zeros(rank.shape, dtype=np.int64)
        step = 1 << (int(limit.max()).bit_length() - 1)
        while step:
            candidate = np.minimum(taken + step, limit)
            beats = part.correction_at(reserved + candidate - 1) > part.other_at(rank - candidate + 1)
            np.copyto(taken, candidate, where=beats)
            step >>= 1
        last_correction = part.correction_at(reserved + np.maximum(taken, 1) - 1)
        last_correction[taken == 0] = _ANY
        last_other = part.other_at(np.maximum(rank - taken, 0))
        last_other[rank < taken] = _ANY
        found.reshape(-1)[index] = np.minimum(last_correction, last_other)
        return found


def decide(
    values: np.ndarray,
    *,
    correction: np.ndarray,
    sizes: np.ndarray,
    support_positions: np.ndarray,
    capacities: Sequence[int],
    slots: np.ndarray | None,
    dense: bool | None = None,
    scratch: bool = False,
) -> dict[str, np.ndarray]:
    """The outputs for one chunk of scores (S, C, P); ``slots`` (S, K) or ``None`` (no reservation).

    ``dense`` picks the path (default: the dense one for pools of at most DENSE_WIDTH facts);
    with ``scratch`` the dense path may reorder ``values`` in place.

    Inside, arrays per decision are shaped (K, S, C), capacities outermost, so that numpy's
    loops run over settings x cases; the outputs are (S, C, K) views of them. Their integers
    are int32 (counts below MAX_WIDTH, capacities above the width clipped to it, which
    changes no decision): half the memory of int64, and so fewer page faults and passes
    that stay in the caches.
    """
    n_settings, n_cases, width = values.shape
    if width > MAX_WIDTH:
        raise ContractError(f"the engine decides pools of at most {MAX_WIDTH:,} facts, got {width:,}")
    if dense is None:
        dense = width <= DENSE_WIDTH
    elif dense and width > DENSE_WIDTH:
        raise ContractError(f"the dense path decides pools of at most {DENSE_WIDTH} facts, got {width:,}")
    cases = np.arange(n_cases)
    # A capacity of the width or more keeps every pool whole, as any larger one does.
    caps = np.minimum(np.asarray(capacities, dtype=np.int64), width).astype(np.int32)[:, None, None]
    corrections = correction.sum(axis=1, dtype=np.int32)
    support_value = values[:, cases, support_positions]  # (S, C)

    lookups: _Lookups | DenseRows
    if dense:
        counts = dense_counts(values, support_value, correction, support_positions)
        lookups = DenseRows(values, correction, in_place=scratch)
    else:
        lookups, counts = _searched_counts(values, support_value, correction, support_positions, corrections)
    others_above, corrections_above, tied, tied_corrections, tied_before, corrections_before = counts
    rank = others_above + corrections_above + tied_before  # 0-based
    outranking_corrections = corrections_above + corrections_before

    over = sizes > caps  # (K, 1, C): only then does anything go
    support_is_correction = correction[cases, support_positions]
    if slots is None:
        reserved = np.zeros((len(caps), n_settings, n_cases), dtype=np.int32)
    else:
        # min(slots, corrections, capacity), so capacity 0 reserves nothing (spec 1.4).
        budget = np.minimum(slots.T, width).astype(np.int32)[:, :, None]
        reserved = np.minimum(np.minimum(budget, corrections), caps) * over
    fill = caps - reserved  # open facts kept
    retained = (rank - np.minimum(reserved, outranking_corrections) < fill) | ~over
    if slots is not None:
        retained |= support_is_correction & (outranking_corrections < reserved)

    # The fact the margin is measured against, as a key: the best evicted fact for a kept
    # support, else its displacer (see the module docstring of evictlab.selection.engine).
    other = lookups.margin_keys(caps, retained, reserved)
    exists = over & (retained | (fill >= 1))
    if slots is not None:
        # An evicted correction could have taken a reserved slot: its displacer is the
        # lowest-ranked kept fact of all, the lower of the last filled and the last reserved.
        index = np.flatnonzero(~retained & support_is_correction & (reserved >= 1))
        if len(index):
            lowest_reserved = lookups.reserved_at(index, reserved.shape, reserved.reshape(-1)[index])
            flat_other = other.reshape(-1)  # a view: margin_keys returns a contiguous array
            filled = fill.reshape(-1)[index] >= 1
            flat_other[index] = np.where(filled, np.minimum(flat_other[index], lowest_reserved), lowest_reserved)
            exists[np.unravel_index(index, exists.shape)] = True  # numpy may lay exists out in any order
    other_value = other.view(np.float64)
    margin = np.full(other.shape, np.nan)
    np.subtract(support_value, other_value, out=margin, where=exists)
    near = _near_ties(margin, support_value, other_value)
    expected = _expected(
        caps,
        reserved,
        over,
        retained,
        size=tied,
        tied_reserved=tied_corrections,
        better_reserved=corrections_above,
        better_other=others_above,
        reserved_member=support_is_correction,
    )
    by_decision = {
        "support_retained": retained,
        "support_rank": np.broadcast_to(rank + 1, reserved.shape),
        "reserved_correction_slots": reserved,
        "support_margin": margin,
        "support_expected": expected,
        "support_tied": (expected > 0) & (expected < 1),
        "support_near_tie": near,
    }
    return {name: array.transpose(1, 2, 0) for name, array in by_decision.items()}


def _near_ties(margin: np.ndarray, support_value: np.ndarray, other_value: np.ndarray) -> np.ndarray:
    """Margins that are not zero and at most NEAR_TIE_RELATIVE of the larger of the two scores.

    Scores are >= 0, so max(|support|, |other|) is the larger score, and below 2.0, so only a
    margin of at most twice the tolerance can qualify: the exact test runs on those alone.
    NaN compares false.
    """
    near = (np.abs(margin) <= 2.0 * NEAR_TIE_RELATIVE) & (margin != 0)
    index = np.flatnonzero(near)
    if len(index):
        k, s, c = np.unravel_index(index, margin.shape)
        larger = np.maximum(support_value[s, c], other_value[k, s, c])
        near[k, s, c] = np.abs(margin[k, s, c]) <= NEAR_TIE_RELATIVE * larger
    return near


def _searched_counts(
    values: np.ndarray,
    support_value: np.ndarray,
    correction: np.ndarray,
    support_positions: np.ndarray,
    corrections: np.ndarray,
) -> tuple[_Lookups, tuple[np.ndarray, ...]]:
    """The sorted rows' look-ups, and the support's counts (as engine_dense.dense_counts) by binary searches in them."""
    rows = _SortedRows(values, correction, corrections)
    # Facts scoring above / the same as the support, split into corrections and the others
    # (a correction's key exceeds every unflagged key); the ties before the support in input
    # order (which outrank it) counted only where there are ties.
    support_key = support_value.view(np.int64)
    corrections_above, at_least_correction = rows.count_above(support_key + _CORRECTION_BIT)
    tied_corrections = at_least_correction - corrections_above
    above, at_least = rows.count_above(support_key)
    tied = at_least - above + tied_corrections
    tied_before, corrections_before = _ties_before(values, support_value, tied > 1, correction, support_positions)
    counts = (above - corrections, corrections_above, tied, tied_corrections, tied_before, corrections_before)
    return rows.lookups(), tuple(count.astype(np.int32) for count in counts)


# The share of marked rows from which _ties_before counts over all rows in one product: a
# chosen threshold between two measurements (per case was faster with a third of the rows
# marked at 1,000 facts; batched, with most rows marked at 10 to 1,000 facts).
_BATCHED_SHARE = 0.5


def _ties_before(
    values: np.ndarray,
    support_value: np.ndarray,
    rows: np.ndarray,
    correction: np.ndarray,
    support_positions: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Facts tied with the support and before it in input order, and the corrections among
    them, shape (S, C); counted only in the (setting, case) ``rows`` marked, 0 elsewhere.

    Matrix products of the 0/1 tie masks with two weight columns per case (facts before the
    support; corrections among them), whose sums are exact integers in float32 below 2**24
    facts. When many rows are marked (exact ties are common), one batched product over all
    rows is cheapest; otherwise a product per case over its marked rows and the facts before
    its support only.
    """
    before = np.zeros(rows.shape, dtype=np.int64), np.zeros(rows.shape, dtype=np.int64)
    marked = int(np.count_nonzero(rows))
    if not marked:
        return before
    width = correction.shape[1]
    dtype = np.float32 if width < 1 << 24 else np.float64
    if marked >= _BATCHED_SHARE * rows.size:
        earlier = np.arange(width) < support_positions[:, None]
        weights = np.stack([earlier, earlier & correction], axis=-1).astype(dtype)  # (C, P, 2)
        tied = (values == support_value[..., None]).astype(dtype).transpose(1, 0, 2)  # (C, S, P)
        counts = np.matmul(tied, weights).astype(np.int64).transpose(2, 1, 0) * rows  # (2, S, C)
        return counts[0], counts[1]
    weights = np.stack([np.ones(correction.shape, dtype=dtype), correction.astype(dtype)], axis=-1)
    for c in np.flatnonzero(rows.any(axis=0)):
        s, position = np.flatnonzero(rows[:, c]), support_positions[c]
        tied = values[s, c, :position] == support_value[s, c, None]
        counts = tied.astype(dtype) @ weights[c, :position]
        before[0][s, c], before[1][s, c] = counts[:, 0], counts[:, 1]
    return before


_COUNT_NAMES = ("capacity", "reserved_slots", "better_reserved", "better_other", "tied_reserved", "tied_other")
# The closed form's exact sum is slow, and the same counts recur across chunks and calls.
_keep_probability = functools.lru_cache(maxsize=1 << 14)(keep_probability)


def _expected(
    caps: np.ndarray,
    reserved: np.ndarray,
    over: np.ndarray,
    retained: np.ndarray,
    *,
    size: np.ndarray,
    tied_reserved: np.ndarray,
    better_reserved: np.ndarray,
    better_other: np.ndarray,
    reserved_member: np.ndarray,
) -> np.ndarray:
    """P(support kept) over random orders of the facts tied with it, shape (K, S, C).

    The counts of :func:`~evictlab.policies.ties.keep_probability`, vectorised over the
    decisions whose support shares its score with another fact (elsewhere it is kept or
    not); the closed form's sum is evaluated only where a tie group straddles the cut line
    and holds reserved corrections (without them, the group keeps ``filled / size``).
    """
    expected = retained.astype(np.float64)
    tied = (size > 1) & over
    if not tied.any():
        return expected
    k, s, c = np.nonzero(tied)
    size, tied_reserved = size[s, c], tied_reserved[s, c]
    better_reserved, better_other = better_reserved[s, c], better_other[s, c]
    reserved, capacity = reserved[k, s, c], caps[k, 0, 0]
    taken = np.minimum(tied_reserved, np.maximum(0, reserved - better_reserved))
    open_above = better_other + np.maximum(0, better_reserved - reserved)
    filled = np.clip(capacity - reserved - open_above, 0, size - taken)
    straddles = (taken + filled > 0) & (taken + filled < size)
    expected[k[straddles], s[straddles], c[straddles]] = filled[straddles] / size[straddles]
    closed_form = np.flatnonzero(straddles & (taken > 0))
    if len(closed_form):
        # The exact sum once per distinct set of counts.
        columns = (capacity, reserved, better_reserved, better_other, tied_reserved, size - tied_reserved)
        counts = np.stack([*columns, reserved_member[c]], axis=1)[closed_form].astype(np.int64)
        distinct, which = _distinct_rows(counts)
        probabilities = np.array(
            [
                float(_keep_probability(**dict(zip(_COUNT_NAMES, row[:6])), reserved_member=bool(row[6])))
                for row in distinct.tolist()
            ]
        )
        where = k[closed_form], s[closed_form], c[closed_form]
        expected[where] = probabilities[which]
    return expected


def _distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a non-negative integer matrix and each row's index among them
    (as ``np.unique(rows, axis=0, return_inverse=True)``).

    Rows whose digits fit one int64 in a mixed radix are deduplicated by that number: a
    sort of integers, several times faster than numpy's comparison of whole rows.
    """
    radix = int(rows.max(initial=0)) + 1
    if radix ** rows.shape[1] >= 1 << 63:
        distinct, which = np.unique(rows, axis=0, return_inverse=True)
        return distinct, which.reshape(-1)
    number = np.zeros(len(rows), dtype=np.int64)
    for column in rows.T:
        number = number * radix + column
    _, first, which = np.unique(number, return_index=True, return_inverse=True)
    return rows[first], which.reshape(-1)


def kept_in_rank_order(
    values: np.ndarray,
    *,
    valid: np.ndarray,
    correction: np.ndarray,
    capacities: Sequence[int],
    reserved: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The ranking (S, C, P: input positions, best first, padding last) and the kept mask
    in input position order (S, C, K, P), for results selected with details."""
    caps = np.asarray(capacities, dtype=np.int64)
    full = (*reserved.shape, values.shape[-1])
    # Score descending, then input position: a stable sort of the negated scores.
    order = np.argsort(-values, axis=-1, kind="stable")
    valid_ranked = np.take_along_axis(np.broadcast_to(valid, order.shape), order, axis=-1)[:, :, None, :]
    correction_ranked = np.take_along_axis(np.broadcast_to(correction, order.shape), order, axis=-1)[:, :, None, :]
    # The top-ranked `reserved` corrections first, then the ranking fills the rest.
    reserved_ranked = correction_ranked & (np.cumsum(correction_ranked, axis=-1) <= reserved[..., None])
    open_ranked = valid_ranked & ~reserved_ranked
    filled = open_ranked & (np.cumsum(open_ranked, axis=-1) <= (caps - reserved)[..., None])
    over = (valid.sum(axis=-1)[:, None] > caps)[None, :, :, None]
    kept_ranked = np.where(over, reserved_ranked | filled, valid_ranked)
    kept = np.empty(full, dtype=bool)
    np.put_along_axis(kept, np.broadcast_to(order[:, :, None, :], full), kept_ranked, axis=-1)
    return order, kept
