"""The explorer (evictlab.workbench.widgets): its simplex rule, and that what it shows is what the engine,
the scalar selector and the explanations decide for the setting on its controls."""

from __future__ import annotations

import html
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.markers import MarkerStyle

from evictlab.errors import ContractError, EvictlabError
from evictlab.policies import PolicyParams, get_policy, known_policies, select
from evictlab.selection.engine import PreparedCases
from evictlab.selection.explain import at_least, explain
from evictlab.workbench import plots
from evictlab.workbench.explorer_tables import ALL_CASES, PoolCache, decisions_for
from evictlab.workbench.widgets import CONTROL_NAMES, Explorer, rescale_weights

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
UNIT = st.floats(0, 1, allow_nan=False)


# --------------------------------------------------------------------------- the simplex rule


@settings(deadline=None)
@given(weights=st.lists(UNIT, min_size=3, max_size=3), index=st.integers(0, 2), value=UNIT)
def test_rescaling_keeps_the_weights_on_the_simplex(weights, index, value):
    rescaled = rescale_weights(weights, index, value)
    assert rescaled[index] == value
    assert all(0 <= weight <= 1 for weight in rescaled)
    assert abs(sum(rescaled) - 1) <= 1e-12
    PolicyParams(*rescaled)  # DeerMem's own validator accepts them


@settings(deadline=None)
@given(weights=st.lists(st.floats(0.01, 1), min_size=3, max_size=3), index=st.integers(0, 2), value=st.floats(0, 0.99))
def test_rescaling_keeps_the_proportions_of_the_other_two(weights, index, value):
    first, second = (i for i in range(3) if i != index)
    rescaled = rescale_weights(weights, index, value)
    assert math.isclose(rescaled[first] * weights[second], rescaled[second] * weights[first],
                        rel_tol=1e-9, abs_tol=1e-12)


def test_rescaling_from_a_corner_splits_the_rest_equally():
    assert rescale_weights((1.0, 0.0, 0.0), 0, 0.4) == (0.4, 0.3, 0.3)
    assert rescale_weights((0.0, 0.0, 1.0), 2, 0.0) == (0.5, 0.5, 0.0)
    with pytest.raises(ContractError, match="in \\[0, 1\\]"):
        rescale_weights((0.5, 0.25, 0.25), 1, 1.5)


# --------------------------------------------------------------------------- the explorer


@pytest.fixture(scope="module")
def pools():
    return PoolCache()


@pytest.fixture
def explorer(pools):
    return Explorer(pools=pools, capacity=5)


def engine_view(pools, preset, policy, params, capacity):
    """(kept ids, retained, rank, reserved, margin) per case from PreparedCases, built anew."""
    pool_set = pools.get(preset).pool_set
    prepared = PreparedCases.from_pool_set(pool_set)
    batch = prepared.select(policy, [params], [capacity], details=True)
    return [batch.outcome(0, c, 0) for c in range(len(prepared))]


def assert_shows(explorer, pools):
    """The explorer's results, summary, explanation and figure are those of its current controls."""
    pool_set = pools.get(explorer.preset).pool_set
    now = pool_set.protocol.evaluation_time
    results = explorer.results.set_index("case_id")
    assert list(results.index) == [case.case_id for case in pool_set.cases]
    for case in pool_set.cases:
        decision = select(explorer.policy, case.facts, explorer.capacity, usage=case.usage, now=now,
                          params=explorer.params, support_fact_ids=case.support_fact_ids)
        row = results.loc[case.case_id]
        assert set(row["kept_fact_ids"]) == set(decision.kept_ids), case.case_id
        assert row["support_retained"] == (case.support_fact_ids[0] in decision.kept_ids)
        assert row["support_rank"] == decision.ranking.index(case.fact_ids.index(case.support_fact_ids[0])) + 1
        assert row["reserved_correction_slots"] == decision.reserved_correction_slots
        support = explain(case.facts, explorer.capacity, policy=explorer.policy, usage=case.usage, now=now,
                          params=explorer.params, support_fact_ids=case.support_fact_ids).fact(case.support_fact_ids[0])
        assert row["support_status"] == support.status, case.case_id
        assert row["kept_by_reservation"] == (support.status == "reserved")
    if explorer.policy in ("confidence", "hybrid-v1"):
        outcomes = engine_view(pools, explorer.preset, explorer.policy, explorer.params, explorer.capacity)
        assert [tuple(o.kept_fact_ids) for o in outcomes] == list(explorer.results["kept_fact_ids"])
        assert np.array_equal([o.support_margin for o in outcomes], explorer.results["support_margin"], equal_nan=True)
    summary = explorer.summary.set_index("scenario")
    assert summary.loc[ALL_CASES, "retained"] == explorer.results["support_retained"].sum()
    for scenario, group in explorer.results.groupby("scenario"):
        assert summary.loc[scenario, "retained"] == group["support_retained"].sum()
        assert summary.loc[scenario, "cases"] == len(group)
    case = pool_set.case(explorer.case_id)
    expected = explain(case.facts, explorer.capacity, policy=explorer.policy, usage=case.usage, now=now,
                       params=explorer.params, support_fact_ids=case.support_fact_ids)
    assert explorer.explanation == expected
    assert_figure_matches(explorer)


def assert_figure_matches(explorer):
    figure = explorer._figure
    summary = explorer.summary.set_index("scenario").reindex(figure.groups)
    widths = [bar.get_width() for bar in figure.bars]
    assert np.allclose(widths, 100 * summary["retained"] / summary["cases"])
    assert [label.get_text() for label in figure.bar_labels] == [
        f"{int(r)}/{int(c)}" for r, c in zip(summary["retained"], summary["cases"])
    ]
    assert np.array_equal(figure.points.get_offsets()[:, 0], explorer.results["support_rank"])
    style = MarkerStyle("s")
    square = style.get_path().transformed(style.get_transform()).vertices
    squares = [np.array_equal(path.vertices, square) for path in figure.points.get_paths()]
    assert squares == list(explorer.results["support_status"] == "reserved")
    assert figure.cut.get_xdata()[0] == explorer.capacity + 0.5
    title = plots.figure_title(explorer.figure)
    assert title.startswith(f"{explorer.policy} at capacity {explorer.capacity}, preset {explorer.preset}\n")
    assert f"({', '.join(f'{weight:.2f}' for weight in explorer.weights)})" in title
    assert bytes(explorer.image.value).startswith(b"\xff\xd8\xff")  # a JPEG frame
    # The live view shows the same state: the title as page text, the frame as drawn now.
    lines = [html.escape(line) for line in title.split("\n")]
    shown = f'<div style="line-height: 1.4"><b>{lines[0]}</b><br>' + "<br>".join(lines[1:]) + "</div>"
    assert explorer.title.value == shown
    assert bytes(explorer.image.value) == figure.frame_jpeg()


def test_starts_at_deermem_defaults_with_a_case_whose_support_is_evicted(explorer, pools):
    assert explorer.params == pools.get("pr4810-final").pool_set.protocol.config.hybrid
    assert explorer.weights == (0.65, 0.25, 0.10)
    assert explorer.policy == "hybrid-v1" and explorer.capacity == 5
    retained = explorer.results.set_index("case_id")["support_retained"]
    assert not retained[explorer.case_id]
    assert retained[: list(retained.index).index(explorer.case_id)].all()
    assert_shows(explorer, pools)


@pytest.mark.parametrize(
    "values",
    [
        {"confidence_weight": 0.5},
        {"confirmation_half_life_days": 3.0, "access_half_life_days": 700.0, "capacity": 7},
        {"confidence_weight": 0.2, "confirmation_weight": 0.2, "access_weight": 0.6, "capacity": 9},
        {"policy": "confidence", "capacity": 3},
        {"policy": "lru", "capacity": 4},
        {"policy": "random", "capacity": 6},
        {"policy": "oracle", "confirmation_weight": 0.7},
        {"policy": "hybrid-v1", "preset": "pr4810-run1", "case_id": "correction_language", "capacity": 1},
    ],
)
def test_shows_what_the_engine_and_the_selector_decide(explorer, pools, values):
    explorer.set(**values)
    for name, value in values.items():
        if name in ("policy", "preset", "capacity", "case_id"):
            assert getattr(explorer, name) == value
        else:  # one weight alone, all three weights, or a half-life: taken exactly as given
            assert getattr(explorer.params, name) == value
    assert_shows(explorer, pools)


def test_weights_given_one_two_or_three_at_a_time(explorer):
    explorer.set(confidence_weight=0.5)
    assert explorer.weights[0] == 0.5 and explorer.weights[1] / explorer.weights[2] == pytest.approx(2.5)
    explorer.set(confirmation_weight=0.1, access_weight=0.3)
    assert explorer.weights == pytest.approx((0.6, 0.1, 0.3), abs=1e-15)
    explorer.set(confidence_weight=0.2, confirmation_weight=0.3, access_weight=0.5)
    assert explorer.weights == (0.2, 0.3, 0.5)
    assert abs(sum(explorer.params.weights) - 1) <= 1e-12


def test_moving_a_slider_rescales_the_others_and_refreshes_once(explorer, pools):
    figure, image, title = explorer.figure, bytes(explorer.image.value), explorer.title.value
    before = explorer.updates
    explorer.controls["access_weight"].value = 0.5
    assert explorer.updates == before + 1
    assert explorer.weights == pytest.approx((0.65 / 0.9 * 0.5, 0.25 / 0.9 * 0.5, 0.5))
    assert bytes(explorer.image.value) != image and explorer.title.value != title
    explorer.controls["capacity"].value = 8
    explorer.controls["policy"].value = "memoryos-heat"
    assert explorer.updates == before + 3
    assert explorer.figure is figure and len(figure.axes) == 2  # one figure, updated in place
    assert_shows(explorer, pools)


def test_the_figure_layer_is_sent_before_the_explanation_is_computed(explorer, pools):
    """A move's figure does not wait for the selected case's explanation and tables."""
    seen = []
    explorer.image.observe(lambda change: seen.append(("figure", explorer.explanation)), names="value")
    explorer.details.observe(lambda change: seen.append(("tables", explorer.explanation)), names="value")
    before = explorer.explanation
    explorer.set(capacity=8)
    assert [name for name, _ in seen] == ["figure", "tables"]
    assert seen[0][1] is before and seen[1][1] is explorer.explanation is not before
    assert_shows(explorer, pools)


def test_a_weight_corner_is_left_by_splitting_the_rest(explorer):
    explorer.set(confidence_weight=1.0)
    assert explorer.weights == (1.0, 0.0, 0.0)
    explorer.controls["confidence_weight"].value = 0.4
    assert explorer.weights == (0.4, 0.3, 0.3)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"confidence_weight": 0.5, "confirmation_weight": 0.5, "access_weight": 0.5}, "sum to 1.5"),
        ({"confidence_weight": 0.8, "confirmation_weight": 0.4}, "exceeds 1"),
        ({"confidence_weight": -0.1}, "in \\[0, 1\\]"),
        ({"capacity": 10}, "capacity 10 is outside \\[1, 9\\]"),
        ({"capacity": True}, "capacity must be an integer"),
        ({"access_half_life_days": 0.5}, "in \\[1, 3650\\]"),
        ({"policy": "nope"}, "unknown policy 'nope'"),
        ({"preset": "nope"}, "unknown preset 'nope'"),
        ({"case_id": "nope"}, "no case 'nope'"),
        ({"capacity": 5, "colour": "red"}, "unknown explorer control\\(s\\) colour"),
    ],
)
def test_rejected_values_change_nothing(explorer, values, message):
    state = {name: control.value for name, control in explorer.controls.items()}
    updates, results = explorer.updates, explorer.results
    with pytest.raises(EvictlabError, match=message):  # ContractError, or DatasetError for a case id
        explorer.set(**values)
    assert {name: control.value for name, control in explorer.controls.items()} == state
    assert explorer.updates == updates and explorer.results is results


def test_pools_are_built_once_per_preset(pools):
    first = pools.get("pr4810-run2")
    assert pools.get("pr4810-run2") is first
    assert first.pool_set.variant.fact_ids == "raw"
    reference = first.reference.set_index(["policy", "capacity", "scenario"])["retained"]
    assert reference[("confidence", 7, ALL_CASES)] == 27 and reference[("hybrid-v1", 5, ALL_CASES)] == 35


def test_details_explain_the_selected_case(explorer):
    explorer.set(policy="hybrid-v1", capacity=5)
    support = explorer.explanation.fact(explorer.pool_set.case(explorer.case_id).support_fact_ids[0])
    assert not support.kept
    text = explorer.details.value
    assert f"case {explorer.case_id}</b>" in text
    assert f"displaced by {support.displaced_by}" in text
    assert f"confidence {html.escape(at_least(support.min_confidence))}" in text  # rounded, still enough
    assert repr(support.min_confidence) not in text
    assert text.count("<tr>") == len(explorer.explanation.facts) + 1
    assert "support evicted in" in text


def test_an_all_way_tie_reads_as_a_tie(explorer):
    explorer.set(policy="fifo", capacity=5, case_id="01adee5c")  # every fact of this pool was created together
    assert len({item.score for item in explorer.explanation.facts}) == 1
    text = explorer.details.value
    assert "support gold_01adee5c evicted at rank 10 by the tie-break: all 10 facts score" in text
    assert "(an all-way tie)" in text and "+0.0000" not in text
    assert text.count("<td>evicted (tie)</td>") == 5 and text.count("<td>kept (tie)</td>") == 5
    explorer.set(policy="hybrid-v1")
    assert "tie" not in explorer.details.value  # scores differ: margins, not ties


def test_parameter_sliders_respond_only_for_policies_that_read_them(explorer):
    parameters = ("confidence_weight", "confirmation_weight", "access_weight", "confirmation_half_life_days",
                  "access_half_life_days")
    for policy in known_policies():
        explorer.controls["policy"].value = policy
        disabled = {explorer.controls[name].disabled for name in parameters}
        assert disabled == {policy not in ("hybrid-v1", "oracle")}, policy
        assert not explorer.controls["capacity"].disabled


def test_policies_that_do_not_read_parameters_decide_the_same_under_any(pools):
    prepared = pools.get("pr4810-final").prepared
    default, other = PolicyParams(), PolicyParams(0.1, 0.2, 0.7, 2.0, 3000.0)
    for policy in known_policies():
        kept = [decisions_for(prepared, policy, params, 5)["kept_fact_ids"].tolist() for params in (default, other)]
        assert (kept[0] != kept[1]) == get_policy(policy).reads_params, policy


def test_controls_cover_the_documented_names(explorer):
    assert tuple(explorer.controls) == CONTROL_NAMES
    assert explorer.controls["policy"].options[0] == "confidence"
    assert explorer.controls["confirmation_half_life_days"].value == 90


def test_a_saved_figure_draws_every_artist(explorer, tmp_path):
    explorer.set(policy="lru", capacity=6)
    png, svg = plots.save(explorer.figure, tmp_path / "explorer")
    text = svg.read_text(encoding="utf-8")
    assert "lru at capacity 6, preset" in text  # the changing title is drawn, not only the background
    assert png.read_bytes().startswith(PNG_SIGNATURE)


@pytest.fixture(scope="module")
def shared_explorer(pools):
    """One explorer for every example Hypothesis draws (module scope: examples share it on purpose)."""
    return Explorer(pools=pools)


@settings(max_examples=15, deadline=None)
@given(
    weights=st.lists(st.integers(0, 20), min_size=3, max_size=3).filter(lambda w: sum(w) > 0),
    capacity=st.integers(1, 9),
    half_lives=st.tuples(st.sampled_from([1.0, 7.0, 30.0, 90.0, 365.0]), st.sampled_from([1.0, 30.0, 3650.0])),
)
def test_any_hybrid_setting_matches_the_engine(pools, shared_explorer, weights, capacity, half_lives):
    triple = [weight / sum(weights) for weight in weights]
    shared_explorer.set(**dict(zip(("confidence_weight", "confirmation_weight", "access_weight"), triple)),
                        confirmation_half_life_days=half_lives[0], access_half_life_days=half_lives[1],
                        capacity=capacity)
    outcomes = engine_view(pools, "pr4810-final", "hybrid-v1", shared_explorer.params, capacity)
    results = shared_explorer.results
    assert [o.support_retained for o in outcomes] == list(results["support_retained"])
    assert [o.support_rank for o in outcomes] == list(results["support_rank"])
    assert [o.reserved_correction_slots for o in outcomes] == list(results["reserved_correction_slots"])
    assert [tuple(o.kept_fact_ids) for o in outcomes] == list(results["kept_fact_ids"])


@pytest.mark.parametrize("policy", ["hybrid-v1", "random", "lru"])
def test_the_fast_summary_is_the_decisions_tables_count(explorer, policy):
    from evictlab.selection.decisions import retention_counts

    explorer.set(policy=policy, capacity=6)
    expected = retention_counts(explorer.results, ["scenario"], total=ALL_CASES)[["scenario", "retained", "cases"]]
    assert explorer.summary.equals(expected.reset_index(drop=True))
