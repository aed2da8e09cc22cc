"""Every decision identical to the pinned golden decisions (see tests/golden_decisions.py)."""

from __future__ import annotations

import json

import pytest
from golden_decisions import FIXTURE, grids, groups, lines, summary

from evictlab.core.pools import open_pools
from evictlab.core.runspec import parse_spec

PINNED = json.loads(FIXTURE.read_text())


@pytest.fixture(scope="module")
def pool_sets():
    return {preset: open_pools(parse_spec(preset)) for preset, *_ in groups()}


GROUPS = list(groups())


@pytest.mark.parametrize(("preset", "policy", "grid", "seeds"), GROUPS, ids=[" ".join(group[:3]) for group in GROUPS])
def test_decisions_equal_the_golden_ones(pool_sets, preset, policy, grid, seeds):
    pools = pool_sets[preset]
    rendered = lines(pools, policy, grids(pools)[grid], seeds)
    assert summary(*rendered) == PINNED[f"{preset} {policy} {grid}"]


def test_the_fixture_pins_every_group():
    assert [f"{preset} {policy} {grid}" for preset, policy, grid, _ in groups()] == list(PINNED)
