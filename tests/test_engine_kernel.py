"""The engine kernel's parts checked on their own against plain loops."""

from __future__ import annotations

import numpy as np
import pytest

from evictlab.selection import engine_kernel


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
