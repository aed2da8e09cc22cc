"""Held-out validation and stability of tuned weights (evictlab.analysis.validation) on the demo pools."""

from __future__ import annotations

import statistics

import pytest

from evictlab.analysis import validation
from evictlab.analysis.sweep import make_grid, run_sweep
from evictlab.errors import ContractError
from evictlab.workbench import loaders, plots


@pytest.fixture(scope="module")
def pool_set():
    return loaders.load_pool_set()


@pytest.fixture(scope="module")
def rows(pool_set):
    grid = make_grid(weights_step=0.05, capacities=(5, 7, 9), policies=("hybrid-v1",))
    return run_sweep({"pr4810-final": pool_set}, grid, progress=False).rows


def test_leave_one_scenario_out_against_a_plain_recount(rows, pool_set):
    groups = validation.case_groups(pool_set, "scenario")
    table = validation.held_out_selection(rows, groups, grouping="scenario")
    assert list(table.columns) == list(validation.HELD_OUT_COLUMNS)
    assert sorted(table["held_out"]) == sorted(set(groups.values()))
    # The same selection written out with dictionaries.
    kept: dict[int, dict[str, int]] = {}
    for setting, case_id, retained in zip(rows["setting"], rows["case_id"], rows["support_retained"]):
        scenario = groups[case_id]
        kept.setdefault(int(setting), {}).setdefault(scenario, 0)
        kept[int(setting)][scenario] += int(retained)
    for row in table.itertuples():
        train = {s: sum(v for g, v in by.items() if g != row.held_out) for s, by in kept.items()}
        best = max(train.values())
        optimal = sorted(s for s, value in train.items() if value == best)
        held = [kept[s][row.held_out] / row.held_out_decisions for s in optimal]
        assert row.optimal_settings == len(optimal) and row.setting == optimal[0]
        assert row.in_sample_rate == best / row.train_decisions
        assert row.held_out_rate == held[0] and row.held_out_median == statistics.median(held)
        assert (row.held_out_min, row.held_out_max) == (min(held), max(held))
    # The audit's finding: weights tuned without the noisy control lose most of it.
    noisy = table.set_index("held_out").loc["noisy_signal_control"]
    assert noisy["in_sample_rate"] == 1.0 and noisy["held_out_median"] == pytest.approx(9 / 30)
    assert noisy["default_held_out_rate"] == 1.0


def test_leave_one_loss_rank_out(rows, pool_set):
    table = validation.held_out_selection(rows, validation.case_groups(pool_set, "loss_rank"), grouping="loss_rank")
    assert list(table["held_out"]) == ["6", "8", "10"]
    assert (table["train_decisions"] + table["held_out_decisions"] == 135).all()
    with pytest.raises(ContractError, match="unknown grouping"):
        validation.case_groups(pool_set, "colour")
    with pytest.raises(ContractError, match="no group"):
        validation.held_out_selection(rows, {}, grouping="scenario")


def test_stability_finds_the_knife_edge_at_deermems_default(rows):
    stable = validation.stability(rows)
    default = stable[(stable["confidence_weight"] == 0.65) & (stable["confirmation_weight"] == 0.25)]
    at7 = default.set_index("capacity").loc[7]
    assert at7["retained"] == 45 and at7["neighbourhood_min"] == 38 and at7["range"] == 7
    assert at7["neighbours"] == 6
    corner = stable[(stable["confidence_weight"] == 1.0) & (stable["capacity"] == 7)].iloc[0]
    assert corner["neighbours"] == 2
    figure = plots.stability_maps(stable)
    assert len(figure.axes) == 4 and "Stability" in plots.figure_title(figure)
