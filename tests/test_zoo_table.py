"""The policy-zoo table (evictlab.analysis.zoo) on the demo's 45 pools, and the figures drawn from it."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from evictlab.analysis import zoo
from evictlab.analysis.evaluate import evaluate
from evictlab.errors import ContractError
from evictlab.policies import known_policies, select
from evictlab.policies.random_policy import random_retention_mean
from evictlab.workbench import loaders, plots

SEEDS = range(5)  # enough to exercise the averaging; the notebooks use 100
CAPACITIES = (5, 7, 9)
PUBLISHED = {(5, "confidence"): 20, (7, "confidence"): 27, (9, "confidence"): 35,
             (5, "hybrid-v1"): 35, (7, "hybrid-v1"): 45, (9, "hybrid-v1"): 45}  # spec 2.10


@pytest.fixture(scope="module")
def pool_set():
    return loaders.load_pool_set()


@pytest.fixture(scope="module")
def rows(pool_set):
    return zoo.zoo_rows(pool_set, capacities=CAPACITIES, seeds=SEEDS)


@pytest.fixture(scope="module")
def summary(rows):
    return zoo.zoo_summary(rows)


def retained(rows, policy, capacity):
    chosen = rows[(rows["policy"] == policy) & (rows["capacity"] == capacity)]
    return chosen.set_index("case_id")["support_retained"]


def test_every_registered_policy_case_and_capacity_once_in_table_order(rows, pool_set):
    assert list(rows.columns) == list(zoo.ROW_COLUMNS)
    policies = list(dict.fromkeys(rows["policy"]))
    assert sorted(policies) == known_policies()
    assert policies[:2] == ["confidence", "hybrid-v1"]
    assert policies[-3:] == ["random", "oracle", "keep-all"]
    assert len(rows) == len(policies) * len(pool_set.cases) * len(CAPACITIES)
    assert not rows.duplicated(["policy", "case_id", "capacity"]).any()
    roles = rows.drop_duplicates("policy").set_index("policy")["role"]
    assert roles["hybrid-v1"] == "deermem" and roles["random"] == "baseline"
    assert roles["oracle"] == roles["keep-all"] == "bound" and roles["lru"] == "zoo"


def test_deermem_totals_are_the_published_ones(summary):
    totals = summary[summary["scenario"] == zoo.ALL_CASES].set_index(["capacity", "policy"])["retained"]
    for key, expected in PUBLISHED.items():
        assert totals[key] == expected, key


def test_deterministic_policies_match_the_run_policy_evaluation(rows, pool_set):
    deterministic = [p for p in known_policies() if p not in zoo.SEEDED_POLICIES and p not in zoo.UNLIMITED_POLICIES]
    indexed = rows.set_index(["policy", "capacity", "case_id"])
    for row in evaluate(pool_set, deterministic, CAPACITIES):
        expected = 1.0 if row["support_all_retained"] else 0.0
        key = (row["policy"], row["capacity"], row["case_id"])
        shown, tied = indexed.loc[key, ["support_retained", "support_tied"]]
        if row["policy"] in ("confidence", "hybrid-v1"):
            assert shown == expected  # input order, DeerMem's rule
        else:  # the expectation over tie orders: the decision as made unless a tie settled it
            assert shown == expected if not tied else 0 < shown < 1
    assert set(rows.loc[rows["policy"].isin(deterministic), "seeds"]) == {1}
    assert set(rows.loc[rows["policy"] == "fifo", "tie_break"]) == {"expected"}
    assert set(rows.loc[rows["policy"] == "hybrid-v1", "tie_break"]) == {"input-order"}


def test_random_is_its_exact_expectation_and_its_seed_mean_is_close(rows, pool_set):
    for capacity in CAPACITIES:
        shares = retained(rows, "random", capacity)
        for case in pool_set.cases:
            assert shares[case.case_id] == capacity / len(case.facts)
            draws = random_retention_mean(case.facts, capacity, case.support_fact_ids, seeds=range(100))
            assert abs(draws - capacity / len(case.facts)) < 0.2
    assert set(rows.loc[rows["policy"] == "random", "seeds"]) == {1}


def test_the_seeded_list_is_exactly_the_policies_that_read_the_seed(pool_set):
    varies = {}
    for policy in known_policies():
        varies[policy] = any(
            select(policy, case.facts, capacity, usage=case.usage, now=pool_set.protocol.evaluation_time,
                   support_fact_ids=case.support_fact_ids, seed=0).kept_ids
            != select(policy, case.facts, capacity, usage=case.usage, now=pool_set.protocol.evaluation_time,
                      support_fact_ids=case.support_fact_ids, seed=seed).kept_ids
            for case in pool_set.cases
            for capacity in CAPACITIES
            for seed in (1, 2, 3)
        )
    assert sorted(policy for policy, changes in varies.items() if changes) == sorted(zoo.SEEDED_POLICIES)


def test_bounds_keep_every_support_and_keep_all_has_no_limit(rows, pool_set):
    bounds = rows[rows["policy"].isin(zoo.BOUND_POLICIES)]
    assert (bounds["support_retained"] == 1.0).all()
    keep_all = rows[rows["policy"] == "keep-all"]
    assert set(keep_all["evaluated_capacity"]) == {len(pool_set.cases[0].facts)}
    others = rows[rows["policy"] != "keep-all"]
    assert (others["evaluated_capacity"] == others["capacity"]).all()


def test_summary_sums_the_rows_per_scenario_and_over_all_cases(rows, summary):
    assert list(summary.columns) == list(zoo.SUMMARY_COLUMNS)
    for (policy, capacity), group in rows.groupby(["policy", "capacity"]):
        part = summary[(summary["policy"] == policy) & (summary["capacity"] == capacity)].set_index("scenario")
        assert part.loc[zoo.ALL_CASES, "retained"] == pytest.approx(group["support_retained"].sum())
        assert part.loc[zoo.ALL_CASES, "cases"] == len(group) == 45
        scenarios = part.drop(index=zoo.ALL_CASES)
        assert list(scenarios.index) == list(dict.fromkeys(group["scenario"]))
        assert scenarios["retained"].sum() == pytest.approx(part.loc[zoo.ALL_CASES, "retained"])
        assert (part["retained_rate"] == part["retained"] / part["cases"]).all()


def test_pivot_cells(summary):
    totals = zoo.zoo_pivot(summary, scenarios=False)
    assert list(totals.columns) == list(CAPACITIES)
    assert totals.loc["confidence", 7] == "27/45" and totals.loc["hybrid-v1", 5] == "35/45"
    assert totals.loc["random", 7] == "31.5/45"
    assert totals.loc["fifo", 7] == "34.5/45 (35 tied)"  # FIFO's ties, broken at random
    full = zoo.zoo_pivot(summary)
    assert full.loc["fifo", (7, zoo.TIES_COLUMN)] == "35" and full.loc["hybrid-v1", (7, zoo.TIES_COLUMN)] == "0"
    assert full.columns.names == ["capacity", "scenario"]
    assert list(full.index) == list(dict.fromkeys(summary["policy"]))
    assert full.loc["hybrid-v1", (5, "access_help")] == "0/10"
    assert full.loc["hybrid-v1", (5, "correction_reserve")] == "5/5"
    assert [capacity for capacity, _ in full.columns] == sorted(capacity for capacity, _ in full.columns)


def test_bad_arguments_are_rejected(pool_set):
    with pytest.raises(ContractError, match="unknown policy 'nope'"):
        zoo.zoo_rows(pool_set, ["nope"])
    with pytest.raises(ContractError, match="no seeds"):
        zoo.zoo_rows(pool_set, ["random"], seeds=[])
    with pytest.raises(ContractError, match="capacity must be an integer >= 1"):
        zoo.zoo_rows(pool_set, ["fifo"], [0])
    with pytest.raises(ContractError, match="more than once"):
        zoo.zoo_rows(pool_set, ["fifo"], [5, 5])


def test_first_evicted_case(pool_set):
    now = pool_set.protocol.evaluation_time
    case = zoo.first_evicted_case(pool_set, "hybrid-v1", 5)
    assert case is not None
    assert case.support_fact_ids[0] not in select("hybrid-v1", case.facts, 5, usage=case.usage, now=now).kept_ids
    earlier = pool_set.cases[: pool_set.cases.index(case)]
    assert all(c.support_fact_ids[0] in select("hybrid-v1", c.facts, 5, usage=c.usage, now=now).kept_ids
               for c in earlier)
    assert zoo.first_evicted_case(pool_set, "oracle", 1) is None


def test_zoo_heatmap_shows_every_cell_of_the_summary(summary):
    fig = plots.zoo_heatmap(summary)
    assert isinstance(fig, Figure)
    title = plots.figure_title(fig)
    assert "Every policy" in title and "memorybank-seeded: mean over 5 seeds" in title and "tie orders" in title
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert [ax.get_title() for ax in panels] == [f"capacity {capacity}" for capacity in CAPACITIES]
    assert any(ax.get_xlabel() for ax in panels) and panels[0].get_ylabel()
    labels = [label.get_text() for label in panels[0].get_yticklabels()]
    assert labels[0] == "confidence (deermem)" and "fifo (zoo, 105 tied)" in labels
    images = np.hstack([ax.get_images()[0].get_array() for ax in panels])
    assert images.shape == (summary["policy"].nunique(), len(CAPACITIES) * 6)
    assert np.nanmin(images) >= 0 and np.nanmax(images) == 100
    # The counts where they fit the cells (a few policies at one capacity): the pivot's, of the column's cases.
    few = summary[summary["policy"].isin(["confidence", "hybrid-v1", "oracle"]) & (summary["capacity"] == 5)]
    (panel,) = [ax for ax in plots.zoo_heatmap(few).axes if ax.get_images()]
    pivot = zoo.zoo_pivot(few)
    cells = pivot.drop(columns=[key for key in pivot.columns if key[1] == zoo.TIES_COLUMN]).to_numpy()
    assert [text.get_text() for text in panel.texts] == [cell.split("/")[0] for cell in cells.ravel()]
    cases = {cell.split("/")[1] for cell in cells[0]}
    assert all(tick.get_text().endswith(tuple(f"({n})" for n in cases)) for tick in panel.get_xticklabels())


def test_capacity_curves_draw_one_panel_per_scenario_and_one_line_per_policy(summary):
    fig = plots.capacity_curves(summary, source="demo dataset (synthetic)")
    assert plots.figure_title(fig).endswith("one line)\ndemo dataset (synthetic)")
    panels = [ax for ax in fig.axes if ax.get_visible()]
    scenarios = [*plots.scenario_order(s for s in summary["scenario"] if s != zoo.ALL_CASES), zoo.ALL_CASES]
    assert [ax.get_title().split(" (")[0] for ax in panels] == scenarios
    roles = summary.drop_duplicates("policy").set_index("policy")["role"]
    named = []
    for ax, scenario in zip(panels, scenarios):
        lines = {tuple(name.split(" (")[0] for name in line.get_label().split(" = ")): line for line in ax.get_lines()}
        named = [policy for same in lines for policy in same]
        assert sorted(named) == sorted(summary["policy"].unique())  # every policy once, on one line
        for same, line in lines.items():  # the values themselves, never nudged apart
            assert line.get_label() == " = ".join(f"{p} ({roles[p]})" for p in same)
            for policy in same:  # a merged line holds the values of every policy it names
                expected = summary[(summary["policy"] == policy) & (summary["scenario"] == scenario)]
                assert np.allclose(line.get_ydata(), 100 * expected.sort_values("capacity")["retained_rate"])
            assert list(line.get_xdata()) == list(CAPACITIES)
            assert line.get_color() == plots.policy_color(same[0])
    legend = [text.get_text() for text in fig.legends[0].get_texts()]
    assert legend == [line.get_label() for line in panels[0].get_lines()]
    assert any(" = " in label for label in legend)  # the demo has policies that coincide (lru and lfu-aging)
    # Lines are merged only where the values agree in every panel.
    for label in legend:
        same = [name.split(" (")[0] for name in label.split(" = ")]
        values = [summary[summary["policy"] == p].sort_values(["scenario", "capacity"])["retained"].to_numpy()
                  for p in same]
        assert all(np.array_equal(values[0], v) for v in values[1:]), label
    distinct = {p: summary[summary["policy"] == p].sort_values(["scenario", "capacity"])["retained"].tolist()
                for p in summary["policy"].unique()}
    firsts = [label.split(" = ")[0].split(" (")[0] for label in legend]
    assert len({tuple(distinct[p]) for p in firsts}) == len(firsts)  # no two lines with the same values
    for ax in panels:  # labels sit on the outer panels of the shared axes
        assert any(other.get_ylabel() for other in ax.get_shared_y_axes().get_siblings(ax))
        assert any(other.get_xlabel() for other in ax.get_shared_x_axes().get_siblings(ax))


def test_no_capacity_curve_value_lies_outside_0_to_100(summary):
    values = np.concatenate([line.get_ydata() for ax in plots.capacity_curves(summary).axes for line in ax.get_lines()])
    assert values.size and values.min() >= 0 and values.max() <= 100
    assert {0.0, 100.0} <= set(values.tolist())  # the extremes occur and are drawn exactly there
