"""The engine kernel's look-ups for pools of at most DENSE_WIDTH facts: no search, few gathers.

:func:`evictlab.selection.engine_kernel.decide` takes the support's counts and each margin's
fact from here for narrow pools (DeerMem's, a dozen facts or so): counts as popcounts of bit
masks (one bit per fact), and the rows sorted once with the corrections flagged in the keys'
lowest bit. At these widths the binary searches of the searched path cost more than they save:
each of their steps is a gather over every row, and a gather costs about as much as a pass
over a whole short row.
"""

from __future__ import annotations

import functools

import numpy as np

#: The widest pools decided by the dense path (the support's counts and the corrections'
#: places as bit masks, one bit per fact from a float64 product, exact up to 2**53; one sort
#: and no search). Measured faster than the searches at every width up to it.
DENSE_WIDTH = 53


class DenseRows:
    """The look-ups of the searched path (``_Lookups`` in engine_kernel) without its searches.

    One sort per (setting, case) of keys that carry the correction flag in their lowest bit
    (the score's bits doubled: scores below 2.0 keep them below 2**63), so each row lists all
    its facts best last, and a bit mask per row marks where its corrections stand (bit ``q``:
    ``q`` places below the best). The reserved corrections are the first ``reserved`` marked
    places; the open fact of a given rank is found by walking down past them, one step per
    reserved slot (a few: the reservation is small), and read with one gather. Ties between
    a correction and another fact sort the correction first, a valid ranking; only scores
    are read, so which of tied facts is reserved does not matter.

    A query past its row reads a key of another row (indices are clipped to the whole
    array only): that happens only where the answer is not used (see engine_kernel.decide).
    """

    def __init__(self, values: np.ndarray, correction: np.ndarray, *, in_place: bool) -> None:
        n_settings, n_cases, width = values.shape
        keys = values.view(np.int64) if in_place else values.view(np.int64).copy()
        np.left_shift(keys, 1, out=keys)  # padding's -inf stays negative, below every fact
        np.bitwise_or(keys, correction, out=keys)
        keys.sort(axis=-1)
        self.keys = keys.reshape(-1)
        self.last = np.arange(width - 1, n_settings * n_cases * width, width).reshape(n_settings, n_cases)

    @functools.cached_property
    def places(self) -> np.ndarray:
        """The corrections' places per row, shape (S, C): bit q for q places below the best.

        Computed only when a slot is reserved somewhere in the chunk.
        """
        rows = self.keys.reshape(*self.last.shape, -1)
        powers = _powers(rows.shape[-1])[::-1]  # the last column (the best) weighs 1
        flags = np.empty(rows.shape, dtype=powers.dtype)
        np.bitwise_and(rows, 1, out=flags, casting="unsafe")
        return np.matmul(flags, powers).astype(np.uint64)

    def _key(self, index: np.ndarray) -> np.ndarray:
        key = np.take(self.keys, index, mode="clip")
        key >>= 1  # the flag dropped
        return key

    def margin_keys(self, caps: np.ndarray, retained: np.ndarray, reserved: np.ndarray) -> np.ndarray:
        """Key of the open fact each margin is measured against, where it is used: the best
        evicted one for a kept support (open rank ``fill = capacity - reserved``), else the
        lowest kept one (open rank ``fill - 1``; see engine_kernel.decide)."""
        place = caps - 1 + retained - reserved  # the open rank; then one step per reserved place at or above
        slots = int(reserved.max(initial=0))
        if slots:
            left = self.places.copy()
            for slot in range(1, slots + 1):
                lowest = left & (~left + np.uint64(1))
                left ^= lowest
                # The slot-th reserved correction's place (64 where the row has no more of them).
                reserved_place = np.bitwise_count(lowest - np.uint64(1)).astype(place.dtype)
                place += (reserved >= slot) & (reserved_place <= place)
        return self._key(self.last - place)

    def reserved_at(self, index: np.ndarray, shape: tuple[int, int, int], reserved: np.ndarray) -> np.ndarray:
        """Key of the last of the ``reserved`` (>= 1) best corrections, for the queries at flat ``index``."""
        row = index % (shape[1] * shape[2])
        left = self.places.reshape(-1)[row]
        for _ in range(int(reserved.max()) - 1):
            # Drop the lowest place where more remain to skip.
            left = np.where(reserved > 1, left & (left - np.uint64(1)), left)
            reserved = reserved - 1
        place = np.bitwise_count((left & (~left + np.uint64(1))) - np.uint64(1)).astype(np.int64)
        return self._key(self.last.reshape(-1)[row] - place)


def _powers(width: int) -> np.ndarray:
    """2**p for each position p < width, exact in the type returned (float32 up to 2**24, else float64)."""
    dtype = np.float32 if width <= 24 else np.float64
    return (np.int64(1) << np.arange(width, dtype=np.int64)).astype(dtype)


def dense_counts(
    values: np.ndarray,
    support_value: np.ndarray,
    correction: np.ndarray,
    support_positions: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """The support's counts per (setting, case), shape (S, C), for pools of at most DENSE_WIDTH facts:
    the other facts and the corrections above it, the facts tied with it (itself included) and
    the corrections among them, the tied facts before it in input order and the corrections
    among those.

    Each (setting, case)'s facts above the support and those tied with it become two bit
    masks (bit ``p`` for the fact at position ``p``), each from one comparison and one
    matrix product with the powers of two (exact: the sums stay below 2**24 in float32, 2**53
    in float64); every count is then a popcount of a mask, or of a mask and the case's
    correction or earlier-than-the-support mask, over (S, C) integers. At these widths that
    is cheaper than binary searches, whose every step is a gather over all rows.
    """
    powers = _powers(values.shape[-1])
    compared = np.empty(values.shape, dtype=powers.dtype)  # one buffer for both comparisons' 0/1

    def bits(compare: np.ufunc) -> np.ndarray:
        compare(values, support_value[..., None], out=compared, casting="unsafe")
        return np.matmul(compared, powers).astype(np.uint64)

    above, same = bits(np.greater), bits(np.equal)
    corrections = np.matmul(correction.astype(powers.dtype), powers).astype(np.uint64)  # (C,)
    before = (np.uint64(1) << support_positions.astype(np.uint64)) - np.uint64(1)

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bitwise_count(mask).astype(np.int32)

    corrections_above = count(above & corrections)
    same_before = same & before
    return (
        count(above) - corrections_above,
        corrections_above,
        count(same),
        count(same & corrections),
        count(same_before),
        count(same_before & corrections),
    )
