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
  corrections after the ``R`` best, so that score is the ``(j+1)``-th largest of two sorted
  lists, found by a binary search. Which of several tied corrections is reserved does not
  change these scores.

One sort per (setting, case) provides both lists: scores are non-negative doubles, whose bit
patterns read as int64 order exactly as the scores do (``+0.0`` is the smallest; the engine
never produces ``-0.0``), and bit 62 added to the corrections' keys sorts them above every
other fact (a score's bits stay below 2**62 while it is below 2.0). Ascending, each row is
then: padding (``-inf`` reads as a negative int64), the other facts, the corrections. Counts
against a score are binary searches in that row; only the ties before the support need a
pass over the positions. The scores themselves are compared exactly as the selector compares
them: nothing here rounds.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ContractError
from ..policies.ties import NEAR_TIE_RELATIVE, keep_probability

#: The largest pool the kernel decides: two counts are packed into each float64 sum.
_FIELD_BITS = 26
_FIELD_INT = 1 << _FIELD_BITS
_FIELD = float(_FIELD_INT)
MAX_WIDTH = _FIELD_INT - 1

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

    def lookups(self, shape: tuple[int, ...]) -> _Lookups:
        """Look-ups for queries of ``shape`` (S, C, K)."""
        last = np.broadcast_to((self.starts + self.width)[..., None], shape)
        corrections = np.broadcast_to(self.corrections[None, :, None], shape)
        return _Lookups(self.flat, self.starts[..., None], last, corrections)


@dataclass(frozen=True)
class _Lookups:
    """Rank look-ups for a set of queries; each query carries its row's position and counts."""

    flat: np.ndarray
    first: np.ndarray  # index of the row's sentinel
    last: np.ndarray  # index of the row's best key
    corrections: np.ndarray

    def subset(self, mask: np.ndarray) -> _Lookups:
        return _Lookups(
            self.flat,
            np.broadcast_to(self.first, mask.shape)[mask],
            self.last[mask],
            self.corrections[mask],
        )

    def correction_at(self, rank: np.ndarray) -> np.ndarray:
        """Key (flag removed) of the ``rank``-th best correction (0-based; the caller keeps it in range)."""
        return self.flat[self.last - rank] - _CORRECTION_BIT

    def other_at(self, rank: np.ndarray) -> np.ndarray:
        """Key of the ``rank``-th best fact that is not a correction; negative past the last."""
        return self.flat[np.maximum(self.last - self.corrections - rank, self.first)]

    def open_pair(self, rank: np.ndarray, reserved: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Keys of the ``rank``-th and ``(rank-1)``-th best open facts; negative where there is none.

        The open facts are the other facts and the corrections after the ``reserved`` best.
        ``taken`` of the top ``rank + 1`` come from those corrections: the largest count whose
        last correction still beats the other fact it displaces (a monotone test, so a binary
        search). The ``rank``-th open fact is the lower of the last ones taken from each list;
        the one before it is the lower of what remains once that one is removed. Only queries
        with unreserved corrections to consider run the search.
        """
        limit = np.minimum(rank + 1, self.corrections - reserved)
        nth, previous = self.other_at(rank), np.where(rank >= 1, self.other_at(np.maximum(rank - 1, 0)), _NONE)
        search = limit > 0
        if not search.any():
            return nth, previous
        part = self.subset(search)
        rank, reserved, limit = rank[search], reserved[search], limit[search]
        taken = np.zeros(rank.shape, dtype=np.int64)
        step = 1 << (int(limit.max()).bit_length() - 1)
        while step:
            candidate = np.minimum(taken + step, limit)
            beats = part.correction_at(reserved + candidate - 1) > part.other_at(rank - candidate + 1)
            taken = np.where(beats, candidate, taken)
            step >>= 1
        # The last correction and the last other fact taken, and the ones just before them.
        last_correction = np.where(taken >= 1, part.correction_at(reserved + np.maximum(taken, 1) - 1), _ANY)
        before_correction = np.where(taken >= 2, part.correction_at(reserved + np.maximum(taken, 2) - 2), _ANY)
        last_other = np.where(rank >= taken, part.other_at(np.maximum(rank - taken, 0)), _ANY)
        before_other = np.where(rank - 1 >= taken, part.other_at(np.maximum(rank - taken - 1, 0)), _ANY)
        correction_last = last_correction <= last_other
        nth[search] = np.minimum(last_correction, last_other)
        previous[search] = np.where(
            correction_last,
            np.minimum(before_correction, last_other),
            np.minimum(last_correction, before_other),
        )
        return nth, previous


def decide(
    values: np.ndarray,
    *,
    correction: np.ndarray,
    sizes: np.ndarray,
    support_positions: np.ndarray,
    capacities: Sequence[int],
    slots: np.ndarray | None,
) -> dict[str, np.ndarray]:
    """The outputs for one chunk of scores (S, C, P); ``slots`` (S, K) or ``None`` (no reservation)."""
    n_settings, n_cases, width = values.shape
    if width > MAX_WIDTH:
        raise ContractError(f"the engine decides pools of at most {MAX_WIDTH:,} facts, got {width:,}")
    cases = np.arange(n_cases)
    caps = np.asarray(capacities, dtype=np.int64)
    corrections = correction.sum(axis=1)
    support_value = values[:, cases, support_positions]  # (S, C)

    # Counts over the facts scoring above / the same as the support: all of them, the
    # corrections, and (for ties) those before the support in input order, which outrank it.
    counted = np.empty_like(values)
    weights = _count_weights(correction, support_positions)
    greater = _counts(np.greater(values, support_value[..., None], out=counted, casting="unsafe"), weights)
    equal = _counts(np.equal(values, support_value[..., None], out=counted, casting="unsafe"), weights)
    above, corrections_above = greater[0], greater[1]
    tied, tied_corrections = equal[0], equal[1]
    rank = above + equal[2]  # 0-based
    outranking_corrections = (corrections_above + equal[3])[..., None]

    over = (sizes[:, None] > caps)[None]  # (1, C, K): only then does anything go
    support_is_correction = correction[cases, support_positions][None, :, None]
    if slots is None:
        reserved = np.zeros((n_settings, n_cases, len(caps)), dtype=np.int64)
    else:
        # min(slots, corrections, capacity), so capacity 0 reserves nothing (spec 1.4).
        reserved = np.minimum(np.minimum(slots[:, None, :], corrections[None, :, None]), caps)
        reserved = np.where(over, reserved, 0)
    fill = caps - reserved  # open facts kept
    open_above = rank[..., None] - np.minimum(reserved, outranking_corrections)
    retained = ~over | (open_above < fill)
    if slots is not None:
        retained |= support_is_correction & (outranking_corrections < reserved)

    # The fact the margin is measured against, as a key (negative: none): the best evicted
    # one for a kept support, else its displacer (see the module docstring of evictlab.selection.engine).
    lookups = _SortedRows(values, correction, corrections).lookups(reserved.shape)
    best_evicted, lowest_filled = lookups.open_pair(fill, reserved)
    other = np.where(over, best_evicted, _NONE)
    displacer = np.where(fill >= 1, lowest_filled, _NONE)
    if slots is not None:
        # An evicted correction could have taken a reserved slot: its displacer is the
        # lowest-ranked kept fact of all, the lower of the last filled and the last reserved.
        lowest_reserved = np.where(reserved >= 1, lookups.correction_at(np.maximum(reserved - 1, 0)), _ANY)
        lowest_kept = np.minimum(np.where(fill >= 1, displacer, _ANY), lowest_reserved)
        displacer = np.where(support_is_correction & (lowest_kept != _ANY), lowest_kept, displacer)
    np.copyto(other, displacer, where=~retained)
    support = support_value[..., None]
    other_value = other.view(np.float64)
    margin = np.where(other >= 0, support - other_value, np.nan)
    # Scores are >= 0, so max(|support|, |other|) is the larger score; NaN compares false.
    near = (margin != 0) & (np.abs(margin) <= NEAR_TIE_RELATIVE * np.maximum(support, other_value))
    expected = _expected(
        caps,
        reserved,
        over,
        retained,
        size=tied[..., None],
        tied_reserved=tied_corrections[..., None],
        better_reserved=corrections_above[..., None],
        better_other=(above - corrections_above)[..., None],
        reserved_member=support_is_correction[0, :, 0],
    )
    return {
        "support_retained": retained,
        "support_rank": np.broadcast_to(rank[..., None] + 1, reserved.shape).copy(),
        "reserved_correction_slots": reserved,
        "support_margin": margin,
        "support_expected": expected,
        "support_tied": (expected > 0) & (expected < 1),
        "support_near_tie": near,
    }


def _count_weights(correction: np.ndarray, support_positions: np.ndarray) -> np.ndarray:
    """Per case, two columns of packed weights (C, P, 2): ``1 + before * 2**26`` and
    ``correction + (before and correction) * 2**26``, ``before`` meaning before the support."""
    before = np.arange(correction.shape[1]) < support_positions[:, None]
    return np.stack([1.0 + before * _FIELD, correction + (before & correction) * _FIELD], axis=-1)


def _counts(mask: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, ...]:
    """Four (S, C) counts over a 0/1 mask (S, C, P): all, corrections, before the support, both.

    One matrix product per case; the sums are integers below 2**53, so exact in float64.
    """
    sums = np.matmul(mask.transpose(1, 0, 2), weights).transpose(1, 0, 2).astype(np.int64)  # (S, C, 2)
    low, high = sums & (_FIELD_INT - 1), sums >> _FIELD_BITS
    return low[..., 0], low[..., 1], high[..., 0], high[..., 1]


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
    """P(support kept) over random orders of the facts tied with it, shape (S, C, K).

    The counts of :func:`~evictlab.policies.ties.keep_probability`, vectorised over the
    decisions whose support shares its score with another fact (elsewhere it is kept or
    not); the closed form's sum is evaluated only where a tie group straddles the cut line
    and holds reserved corrections (without them, the group keeps ``filled / size``).
    """
    expected = retained.astype(np.float64)
    tied = np.broadcast_to(size > 1, reserved.shape) & over
    if not tied.any():
        return expected
    s, c, k = np.nonzero(tied)
    size, tied_reserved = size[s, c, 0], tied_reserved[s, c, 0]
    better_reserved, better_other = better_reserved[s, c, 0], better_other[s, c, 0]
    reserved, capacity = reserved[s, c, k], caps[k]
    taken = np.minimum(tied_reserved, np.maximum(0, reserved - better_reserved))
    open_above = better_other + np.maximum(0, better_reserved - reserved)
    filled = np.clip(capacity - reserved - open_above, 0, size - taken)
    straddles = (taken + filled > 0) & (taken + filled < size)
    expected[s[straddles], c[straddles], k[straddles]] = filled[straddles] / size[straddles]
    for i in np.flatnonzero(straddles & (taken > 0)):
        expected[s[i], c[i], k[i]] = _keep_probability(
            capacity=int(capacity[i]),
            reserved_slots=int(reserved[i]),
            better_reserved=int(better_reserved[i]),
            better_other=int(better_other[i]),
            tied_reserved=int(tied_reserved[i]),
            tied_other=int(size[i] - tied_reserved[i]),
            reserved_member=bool(reserved_member[c[i]]),
        )
    return expected


# The closed form's exact sum is slow, and the same counts recur across settings.
_keep_probability = functools.lru_cache(maxsize=1 << 14)(keep_probability)


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
