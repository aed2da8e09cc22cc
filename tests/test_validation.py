"""Held-out validation and stability of tuned weights (evictlab.analysis.validation) on the demo pools."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection

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


def test_the_stability_map_draws_different_ranges_in_different_colours(rows):
    """Each distinct range gets its own colour, the same range the same one, on every panel
    (an 11-bin norm over the 256-colour map once drew every cell in one colour)."""
    stable = validation.stability(rows)
    figure = plots.stability_maps(stable)
    FigureCanvasAgg(figure).draw()  # the colours are computed when the cells are drawn
    panels = [ax for ax in figure.axes if ax.get_title().startswith("capacity")]
    assert len(panels) == 3
    for ax in panels:
        cells = next(c for c in ax.collections if isinstance(c, PolyCollection))
        values = np.asarray(cells.get_array())
        colours = [tuple(np.round(colour, 6)) for colour in cells.get_facecolors()]
        assert len(colours) == len(values)
        by_value: dict[float, set] = {}
        for value, colour in zip(values, colours):
            by_value.setdefault(float(value), set()).add(colour)
        assert all(len(drawn) == 1 for drawn in by_value.values()), ax.get_title()
        assert len(set(colours)) == len(by_value) > 1, ax.get_title()
        # and visibly so: the smallest and largest range on a panel lie far apart on the scale
        luminance = {value: np.dot(next(iter(drawn))[:3], (0.299, 0.587, 0.114)) for value, drawn in by_value.items()}
        top = max(values) / (100 * stable["range"].max() / 45)
        assert abs(luminance[max(luminance)] - luminance[min(luminance)]) > 0.5 * top, ax.get_title()
