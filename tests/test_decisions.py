"""decide_grid: one tidy decisions frame, engine and scalar paths alike, and its retention views."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from evictlab.errors import ContractError
from evictlab.policies import PolicyParams
from evictlab.selection.decisions import (
    DECISION_COLUMNS,
    decide_grid,
    retention_cell,
    retention_counts,
    retention_table,
)
from evictlab.selection.engine import reference_outcome
from evictlab.workbench.loaders import PUBLISHED_RETENTION, load_pool_set


@pytest.fixture(scope="module")
def demo_pools():
    return load_pool_set()


@pytest.fixture(scope="module")
def decisions(demo_pools):
    return decide_grid(demo_pools, ["confidence", "hybrid-v1", "lru"], capacities=[5, 7, 9], details=True)


def test_schema_order_and_dtypes(decisions, demo_pools):
    assert list(decisions.columns) == [*DECISION_COLUMNS, "kept_fact_ids"]
    assert len(decisions) == 3 * len(demo_pools.cases) * 3
    assert set(decisions["preset"]) == {"pr4810-final"}
    assert decisions["support_retained"].dtype == bool
    assert decisions["support_rank"].dtype == np.int64
    assert decisions["support_margin"].dtype == np.float64
    # Nesting: policy, then case in build order, then capacity.
    first = decisions[decisions["policy"] == "confidence"]
    assert list(first["case_id"].iloc[:3]) == [demo_pools.cases[0].case_id] * 3
    assert list(first["capacity"].iloc[:4]) == [5, 7, 9, 5]


@pytest.mark.parametrize("policy", ["confidence", "hybrid-v1", "lru"])
def test_every_row_is_the_scalar_decision(decisions, demo_pools, policy):
    """The engine rows (confidence, hybrid-v1) and the scalar rows (lru) equal reference_outcome."""
    params = demo_pools.protocol.config.hybrid
    now = demo_pools.protocol.evaluation_time
    rows = decisions[decisions["policy"] == policy].itertuples(index=False)
    for case in demo_pools.cases:
        for capacity in (5, 7, 9):
            row = next(rows)
            outcome = reference_outcome(case, policy, params, capacity, now)
            assert (row.case_id, row.capacity) == (case.case_id, capacity)
            assert row.kept_fact_ids == outcome.kept_fact_ids
            assert (row.support_retained, row.support_rank) == (outcome.support_retained, outcome.support_rank)
            assert row.reserved_correction_slots == outcome.reserved_correction_slots
            assert row.support_margin == outcome.support_margin or (
                math.isnan(row.support_margin) and math.isnan(outcome.support_margin)
            )


def test_published_retention_totals(decisions):
    counts = retention_counts(decisions, ["capacity", "policy"])
    for row in counts.itertuples(index=False):
        if (row.capacity, row.policy) in PUBLISHED_RETENTION:
            assert row.retained == PUBLISHED_RETENTION[(row.capacity, row.policy)]
            assert row.cases == 45


def test_settings_and_seeds_are_dimensions(demo_pools):
    settings = [PolicyParams(), PolicyParams(1.0, 0.0, 0.0, correction_reserved_fraction=0.0)]
    frame = decide_grid(demo_pools, ["hybrid-v1", "random"], settings, [7], seeds=[0, 1, 2])
    assert len(frame) == 2 * 3 * 2 * 45
    assert list(frame["setting"].unique()) == [0, 1]
    assert frame.loc[frame["setting"] == 1, "confidence_weight"].eq(1.0).all()
    hybrid = frame[frame["policy"] == "hybrid-v1"]
    # Weights 1/0/0 without a reservation rank by confidence: what confidence keeps (27/45).
    by_setting = hybrid[hybrid["seed"] == 0].groupby("setting")["support_retained"].sum()
    assert list(by_setting) == [45, 27]
    random = frame[(frame["policy"] == "random") & (frame["setting"] == 0)]
    kept_by_seed = random.groupby("seed")["support_retained"].apply(tuple)
    assert kept_by_seed.nunique() > 1  # the seed reaches the seeded policy


def test_seeded_counts_are_means_over_seeds(demo_pools):
    # The draws as made (input order); under its default tie-break random counts k / n exactly.
    exact = retention_counts(decide_grid(demo_pools, ["random"], capacities=[5], seeds=range(4)), ["policy"])
    assert exact["retained"].iloc[0] == pytest.approx(22.5)
    frame = decide_grid(demo_pools, ["random"], capacities=[5], seeds=range(4), tie_break="input-order")
    counts = retention_counts(frame, ["policy", "capacity"])
    expected = frame.groupby("case_id", observed=True)["support_retained"].mean().sum()
    assert counts["retained"].iloc[0] == pytest.approx(expected)
    assert counts["seeds"].iloc[0] == 4
    assert retention_cell(counts["retained"].iloc[0], 45, 4) == f"{expected:.1f}/45"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"capacities": [5, 5]}, "capacities: 5 listed more than once"),
        ({"policies": []}, "empty grid: no policies"),
        ({"policies": ["nope"]}, "nope"),
        ({"seeds": []}, "empty grid: no seeds"),
        ({"settings": []}, "empty grid: no settings"),
    ],
)
def test_bad_grids_are_refused(demo_pools, change, message):
    arguments = {"policies": ["confidence"], "capacities": [5], **change}
    with pytest.raises(Exception, match=message) as caught:
        decide_grid(demo_pools, **arguments)
    assert isinstance(caught.value, ContractError) or "nope" in message


def test_retention_table_is_one_builder(decisions):
    counts = retention_counts(decisions, ["scenario", "policy", "capacity"])
    table = retention_table(counts, "scenario", ["policy", "capacity"], total="total")
    assert table.loc["total", ("confidence", 7)] == "27/45"
    assert table.loc["total", ("hybrid-v1", 7)] == "45/45"
    assert list(table.columns.get_level_values("policy").unique()) == ["confidence", "hybrid-v1", "lru"]
    assert table.index[-1] == "total"
    totals = retention_counts(decisions, ["policy", "capacity", "scenario"], total="all cases")
    assert set(totals["scenario"]) > {"all cases"}
    all_cases = totals[totals["scenario"] == "all cases"].set_index(["policy", "capacity"])["retained"]
    assert all_cases[("confidence", 5)] == 20 and all_cases[("hybrid-v1", 9)] == 45
    assert isinstance(table, pd.DataFrame)
