"""The engine kernel's parts checked on their own against plain loops."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evictlab.errors import ContractError
from evictlab.selection import engine_dense, engine_kernel


@pytest.mark.parametrize("width", [1, 7, 300])
@pytest.mark.parametrize("share", [0.05, 0.9])
def test_ties_before_the_support_counted_alike_for_few_and_many_tied_rows(width, share):
    """Both ways of counting (a product per case over few marked rows, one over all) count
    the tied facts before the support, and the corrections among them, as a plain loop does."""
    rng = np.random.default_rng(width)
    n_settings, n_cases = 40, 9
    values = rng.integers(0, 4, (n_settings, n_cases, width)) / 4
    correction = rng.random((n_cases, width)) < 0.3
    positions = rng.integers(0, width, n_cases)
    support = values[:, np.arange(n_cases), positions]
    rows = rng.random((n_settings, n_cases)) < share
    ties, corrections = engine_kernel._ties_before(values, support, rows, correction, positions)
    for s, c in np.ndindex(n_settings, n_cases):
        before = [p for p in range(positions[c]) if values[s, c, p] == support[s, c]] if rows[s, c] else []
        assert ties[s, c] == len(before)
        assert corrections[s, c] == sum(correction[c, p] for p in before)


@st.composite
def score_chunks(draw, max_width=engine_dense.DENSE_WIDTH):
    """Keyword arguments of ``decide``: scores (S, C, P) on a coarse grid (ties everywhere),
    pools of different sizes (padding ``-inf``), corrections, capacities from 0 to past the
    widest pool, and reserved-slot budgets (or none)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_settings, n_cases = draw(st.integers(1, 6)), draw(st.integers(1, 5))
    width = draw(st.integers(1, max_width))
    levels = draw(st.sampled_from([1, 2, 3, 10, 1000]))
    sizes = rng.integers(1, width + 1, n_cases)
    sizes[rng.integers(n_cases)] = width
    valid = np.arange(width) < sizes[:, None]
    values = np.where(valid, rng.integers(0, levels + 1, (n_settings, n_cases, width)) / levels, -np.inf)
    correction = valid & (rng.random((n_cases, width)) < draw(st.sampled_from([0.0, 0.1, 0.5, 1.0])))
    capacities = draw(st.lists(st.integers(0, width + 1), min_size=1, max_size=5, unique=True))
    slots = None
    if draw(st.booleans()):
        slots = rng.integers(0, draw(st.integers(1, width + 1)) + 1, (n_settings, len(capacities)))
    return {
        "values": values,
        "correction": correction,
        "sizes": sizes.astype(np.int64),
        "support_positions": (rng.random(n_cases) * sizes).astype(np.intp),
        "capacities": capacities,
        "slots": slots,
    }


@settings(max_examples=300, deadline=None)
@given(chunk=score_chunks())
def test_the_dense_path_decides_as_the_searched_path(chunk):
    """Small pools (bit-mask counts, a second sort instead of searches) get every output of
    the binary searches in the sorted rows, which the engine's tests hold to the scalar selector."""
    dense = engine_kernel.decide(**chunk, dense=True)
    searched = engine_kernel.decide(**chunk, dense=False)
    for name, array in searched.items():
        np.testing.assert_array_equal(dense[name], array, err_msg=name)


def test_the_dense_path_refuses_pools_wider_than_its_bit_masks():
    chunk = {
        "values": np.zeros((1, 1, engine_dense.DENSE_WIDTH + 1)),
        "correction": np.zeros((1, engine_dense.DENSE_WIDTH + 1), dtype=bool),
        "sizes": np.array([engine_dense.DENSE_WIDTH + 1]),
        "support_positions": np.array([0]),
        "capacities": [1],
        "slots": None,
    }
    with pytest.raises(ContractError, match="dense path"):
        engine_kernel.decide(**chunk, dense=True)
    assert engine_kernel.decide(**chunk)["support_rank"][0, 0, 0] == 1  # the searched path decides it
