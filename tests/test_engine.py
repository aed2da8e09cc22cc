"""The vectorised engine against the scalar selector: identical decisions, bit for bit.

The pools are the demo dataset's 45 cases under every preset, and pools built here from the
scenario rules of spec 2.9 (through evictlab.core.pools' own metadata helpers, with made-up ids
and no dataset) in both fact-id schemes, so every scenario shape, its exact score ties and
the correction reservation are exercised; arbitrary snapshots add every fallback of spec
1.2. The properties compare every (setting, case, capacity) with
:func:`evictlab.selection.engine.reference_outcome`, which reads DeerMem's own entry point.
"""

from __future__ import annotations

import copy
import datetime as _dt
import functools
import hashlib
import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import clocks, policy_params, snapshots

from evictlab.analysis.sweep import make_grid, simplex_weights
from evictlab.core import demo
from evictlab.core.pools import Case, build_fact, build_pools, distractor_spec, support_spec, usage_entry
from evictlab.core.protocol import PRESETS, load_protocol
from evictlab.errors import ContractError, UnknownPolicyError
from evictlab.policies import PolicyParams, known_policies
from evictlab.policies.base import Reservation
from evictlab.selection import engine
from evictlab.selection.deermem import select_facts_for_capacity
from evictlab.selection.engine import PreparedCases, reference_outcome
from evictlab.selection.engine_settings import SettingColumns
from evictlab.selection.explain import explain

UTC = _dt.UTC
CLOCK = _dt.datetime(2026, 8, 13, tzinfo=UTC)
OFFICIAL_SCENARIOS = ("confirmation_help", "access_help", "confidence_control", "noisy_signal_control")
LOSS_RANKS = (6, 6, 6, 8, 8, 8, 10, 10, 10, 10)
SYNTHETIC_LOSS_RANKS = (6, 8, 8, 10, 10)
POLICIES = ("confidence", "hybrid-v1")
#: Every registered policy and modified specs over them (mmr: the scalar path inside select).
EVERY_POLICY = (
    *known_policies(), "lru+reserve(correction,0.1,10)", "hybrid-v1+reserve(correction,0.3,2)",
    "random+reserve(correction)", "oracle+reserve(correction,0.3,2)", "confidence+mmr(0.5)",
)  # fmt: skip


def _hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def scenario_case(case_id: str, scenario: str, loss_rank: int, fact_ids: str = "protocol") -> Case:
    """One pool of spec 2.9: a support and 9 distractors, sorted by id.

    ``protocol`` ids (``gold_``/``d_``) put the support last; ``raw`` ids are hex strings,
    so the support lands anywhere in the id order and ties break differently.
    """
    synthetic = scenario == "correction_reserve"
    support = support_spec(scenario)
    support_id = f"gold_{case_id}" if fact_ids == "protocol" else case_id
    category = "correction" if synthetic else "context"
    facts = [build_fact(support_id, "support text", category, support, case_id, CLOCK)]
    usage = {support_id: usage_entry(CLOCK)} if support.heated else {}
    for i in range(9):
        source = _hex(f"{case_id}:{i}")
        spec = distractor_spec(scenario, i, loss_rank - 1)
        fact_id = f"d_{case_id}_{i}_{source}" if fact_ids == "protocol" else source
        facts.append(build_fact(fact_id, "distractor text", "preference", spec, source, CLOCK))
        if spec.heated:
            usage[fact_id] = usage_entry(CLOCK)
    facts.sort(key=lambda fact: fact["id"])
    return Case(
        case_id=case_id,
        source="synthetic" if synthetic else "longmemeval",
        scenario=scenario,
        question_type="synthetic-correction" if synthetic else "knowledge-update",
        question="?",
        answer="!",
        question_date=None,
        loss_rank=loss_rank,
        offset=0,
        facts=tuple(facts),
        usage=usage,
        support_fact_ids=(support_id,),
        distractor_sources=(),
    )


def scenario_cases(fact_ids: str = "protocol") -> list[Case]:
    """45 cases in build order: four official scenarios of 10, then 5 corrections."""
    cases = [
        scenario_case(_hex(f"{scenario}{j}"), scenario, loss_rank, fact_ids)
        for scenario in OFFICIAL_SCENARIOS
        for j, loss_rank in enumerate(LOSS_RANKS)
    ]
    cases += [
        scenario_case(f"correction_{j}", "correction_reserve", loss_rank, fact_ids)
        for j, loss_rank in enumerate(SYNTHETIC_LOSS_RANKS)
    ]
    return cases


PROTOCOL_CASES = scenario_cases("protocol")
RAW_CASES = scenario_cases("raw")
PREPARED = {"protocol": PreparedCases(PROTOCOL_CASES, CLOCK), "raw": PreparedCases(RAW_CASES, CLOCK)}
CASES = {"protocol": PROTOCOL_CASES, "raw": RAW_CASES}


def same_outcome(left: engine.Outcome, right: engine.Outcome) -> bool:
    """Equal in every field; two NaN margins are equal."""
    margins = left.support_margin == right.support_margin or (
        math.isnan(left.support_margin) and math.isnan(right.support_margin)
    )
    return margins and (left.kept_fact_ids, left.support_retained, left.support_rank,
                        left.reserved_correction_slots, left.support_expected, left.support_tied,
                        left.support_near_tie) == (
        right.kept_fact_ids, right.support_retained, right.support_rank, right.reserved_correction_slots,
        right.support_expected, right.support_tied, right.support_near_tie,
    )


def assert_matches_scalar(prepared, cases, policy, setting_list, capacities, now=CLOCK, seed=0):
    result = prepared.select(policy, setting_list, capacities, details=True, seed=seed)
    assert result.shape == (len(setting_list), len(cases), len(capacities))
    for s, setting in enumerate(setting_list):
        for c, case in enumerate(cases):
            for k, capacity in enumerate(capacities):
                expected = reference_outcome(case, policy, setting, capacity, now, seed=seed)
                actual = result.outcome(s, c, k)
                assert same_outcome(actual, expected), (policy, setting, case.case_id, capacity, actual, expected)


# --- golden figures of spec 2.9 and 2.10 -------------------------------------------------------


def test_default_setting_reproduces_the_retention_totals_of_spec_2_10():
    prepared = PREPARED["protocol"]
    totals = {
        policy: prepared.select(policy, [PolicyParams()], [5, 7, 9]).support_retained[0].sum(axis=0).tolist()
        for policy in POLICIES
    }
    assert totals == {"confidence": [20, 27, 35], "hybrid-v1": [35, 45, 45]}


def test_default_setting_reproduces_the_support_ranks_and_reservations_of_spec_2_9():
    prepared = PREPARED["protocol"]
    confidence = prepared.select("confidence", [PolicyParams()], [7])
    hybrid = prepared.select("hybrid-v1", [PolicyParams()], [7])
    for c, case in enumerate(PROTOCOL_CASES):
        help_or_correction = case.scenario in ("confirmation_help", "access_help", "correction_reserve")
        assert confidence.support_rank[0, c, 0] == (case.loss_rank if help_or_correction else 1)
        expected_hybrid_rank = {
            "confirmation_help": 1,
            "access_help": 6,
            "confidence_control": 1,
            "noisy_signal_control": {6: 3, 8: 4, 10: 5}[case.loss_rank],
            "correction_reserve": case.loss_rank,
        }[case.scenario]
        assert hybrid.support_rank[0, c, 0] == expected_hybrid_rank, case.case_id
        assert hybrid.reserved_correction_slots[0, c, 0] == (case.scenario == "correction_reserve")
        assert confidence.reserved_correction_slots[0, c, 0] == 0


def test_margins_on_known_pools():
    prepared = PREPARED["protocol"]
    result = prepared.select("confidence", [PolicyParams()], [5, 9])
    first = PROTOCOL_CASES[0]  # confirmation_help, loss rank 6: outrankers 0.94 .. 0.86
    assert first.loss_rank == 6
    # Evicted at 5: beaten by the fifth outranker (0.86); kept at 9: ahead of the next (0.62).
    assert result.support_margin[0, 0, 0] == 0.70 - (0.94 - 0.02 * 4)
    assert result.support_margin[0, 0, 1] == 0.70 - (0.68 - 0.02 * 3)


# --- equivalence with the scalar selector -------------------------------------------------------


GRID_WEIGHTS = simplex_weights(0.05)


@st.composite
def weight_triples(draw):
    """On the 0.05 simplex grid, or anywhere on the simplex (summing to 1 within 1e-9)."""
    if draw(st.booleans()):
        return draw(st.sampled_from(GRID_WEIGHTS))
    first = draw(st.floats(0, 1))
    second = draw(st.floats(0, 1)) * (1 - first)
    third = max(0.0, 1 - first - second)
    nudge = draw(st.sampled_from([0.0, 0.0, 4e-10, -4e-10]))
    return first, second, min(1.0, max(0.0, third + nudge))


half_lives = st.one_of(st.integers(1, 3650), st.floats(1, 3650))


@st.composite
def sweep_settings(draw):
    w_conf, w_confirm, w_access = draw(weight_triples())
    return PolicyParams(
        confidence_weight=w_conf,
        confirmation_weight=w_confirm,
        access_weight=w_access,
        confirmation_half_life_days=draw(half_lives),
        access_half_life_days=draw(half_lives),
        correction_reserved_fraction=draw(st.one_of(st.sampled_from([0.0, 0.1, 0.25, 1.0]), st.floats(0, 1))),
        correction_reserved_max=draw(st.integers(0, 10)),
    )


@settings(max_examples=60, deadline=None)
@given(
    scheme=st.sampled_from(["protocol", "raw"]),
    policy=st.sampled_from(EVERY_POLICY),
    seed=st.integers(0, 3),
    setting_list=st.lists(sweep_settings(), min_size=1, max_size=3),
    capacities=st.lists(st.integers(1, 9), min_size=1, max_size=3, unique=True),
)
def test_engine_matches_the_scalar_selector_on_scenario_pools(scheme, policy, setting_list, capacities, seed):
    assert_matches_scalar(PREPARED[scheme], CASES[scheme], policy, setting_list, capacities, seed=seed)


@functools.cache
def demo_pools(preset):
    """The demo dataset's 45 cases under a preset, prepared, with the cases themselves."""
    protocol = demo.demo_protocol(load_protocol())
    pool_set = build_pools(protocol, demo.load_demo(protocol), PRESETS[preset])
    return PreparedCases.from_pool_set(pool_set), pool_set.cases


def test_demo_pools_reproduce_the_retention_totals_of_spec_2_10():
    prepared, _ = demo_pools("pr4810-final")
    totals = {
        policy: prepared.select(policy, [PolicyParams()], [5, 7, 9]).support_retained[0].sum(axis=0).tolist()
        for policy in POLICIES
    }
    assert totals == {"confidence": [20, 27, 35], "hybrid-v1": [35, 45, 45]}


@settings(max_examples=30, deadline=None)
@given(
    preset=st.sampled_from(sorted(PRESETS)),
    policy=st.sampled_from(EVERY_POLICY),
    seed=st.integers(0, 3),
    setting_list=st.lists(sweep_settings(), min_size=1, max_size=2),
    capacities=st.lists(st.integers(1, 9), min_size=1, max_size=3, unique=True),
)
def test_engine_matches_the_scalar_selector_on_the_demo_pools(preset, policy, setting_list, capacities, seed):
    prepared, cases = demo_pools(preset)
    assert_matches_scalar(prepared, cases, policy, setting_list, capacities, seed=seed)


def snapshot_case(index, snapshot, support_index):
    facts, usage = snapshot
    return SimpleNamespace(
        case_id=f"case-{index}",
        scenario="arbitrary",
        source="hypothesis",
        facts=facts,
        usage=usage,
        support_fact_ids=(facts[support_index % len(facts)]["id"],),
    )


@st.composite
def arbitrary_cases(draw, max_cases=4):
    """1..max_cases snapshots of DeerMem's odd values (malformed fields, ties, corrections)."""
    count = draw(st.integers(1, max_cases))
    return [
        snapshot_case(index, draw(snapshots(unique_ids=True, min_size=1)), draw(st.integers(0, 20)))
        for index in range(count)
    ]


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cases=arbitrary_cases(),
    now=clocks(),
    policy=st.sampled_from(EVERY_POLICY),
    seed=st.integers(0, 3),
    setting_list=st.lists(policy_params(), min_size=1, max_size=3),
    capacities=st.lists(st.integers(0, 16), min_size=1, max_size=4),
)
def test_engine_matches_the_scalar_selector_on_arbitrary_snapshots(cases, now, policy, setting_list, capacities, seed):
    # Pools of different sizes (padding), every fallback of spec 1.2, caps over and under.
    before = copy.deepcopy([(case.facts, case.usage) for case in cases])
    prepared = PreparedCases(cases, now)
    assert_matches_scalar(prepared, cases, policy, setting_list, capacities, now, seed=seed)
    assert [(case.facts, case.usage) for case in cases] == before


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cases=arbitrary_cases(max_cases=2),
    policy=st.sampled_from(POLICIES),
    setting=policy_params(),
    capacity=st.integers(1, 12),
)
def test_margin_is_the_margin_of_explain(cases, policy, setting, capacity):
    result = PreparedCases(cases, CLOCK).select(policy, [setting], [capacity])
    for c, case in enumerate(cases):
        support = case.support_fact_ids[0]
        explained = explain(
            list(case.facts), capacity, policy=policy, usage=case.usage, now=CLOCK, params=setting
        ).fact(support)
        margin = result.support_margin[0, c, 0]
        assert (math.isnan(margin) and explained.margin is None) or margin == explained.margin
        assert bool(result.support_retained[0, c, 0]) == explained.kept
        assert result.support_rank[0, c, 0] == explained.rank


def _stamp(days: int) -> str:
    return (CLOCK - _dt.timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def large_case(index, n_facts, seed, levels, correction_share, day_span):
    """A pool of ``n_facts`` facts whose signals come from a few values each, so exact score
    ties are everywhere: confidences on a 1/levels grid, whole days within ``day_span``,
    heats 1-3. Shares of confirmed, created-only, undated, heated and correction facts vary."""
    rng = np.random.default_rng(seed)
    kinds = rng.choice(3, n_facts, p=rng.dirichlet([1, 1, 1]))  # confirmed, created, neither
    heated = rng.random(n_facts) < rng.random()
    facts, usage = [], {}
    for p in range(n_facts):
        fact = {"id": f"f{index}-{p}", "confidence": int(rng.integers(0, levels + 1)) / levels}
        if rng.random() < correction_share:
            fact["category"] = "correction"
        if kinds[p] < 2:
            fact["lastConfirmedAt" if kinds[p] == 0 else "createdAt"] = _stamp(int(rng.integers(0, day_span + 1)))
        facts.append(fact)
        if heated[p]:
            accessed = _stamp(int(rng.integers(0, day_span + 1)))
            usage[fact["id"]] = {"accessHeat": int(rng.integers(1, 4)), "lastAccessedAt": accessed}
    support = (facts[int(rng.integers(0, n_facts))]["id"],)
    return SimpleNamespace(case_id=f"large-{index}", scenario="large", source="hypothesis", facts=facts, usage=usage,
                           support_fact_ids=support)


@st.composite
def large_pools(draw, min_facts, max_facts, max_cases=2):
    """1..max_cases pools of ``min_facts``..``max_facts`` facts (sizes differ: padding)
    and many capacities: around the cut lines of every pool, 0, and above every pool."""
    levels = draw(st.sampled_from([1, 2, 4, 20]))
    correction_share = draw(st.sampled_from([0.0, 0.05, 0.3, 1.0]))
    day_span = draw(st.sampled_from([0, 3, 400]))
    cases = [
        large_case(index, draw(st.integers(min_facts, max_facts)), draw(st.integers(0, 2**32 - 1)), levels,
                   correction_share, day_span)
        for index in range(draw(st.integers(1, max_cases)))
    ]
    largest = max(len(case.facts) for case in cases)
    capacities = draw(st.lists(st.integers(0, largest + 1), min_size=min(4, largest + 2), max_size=12, unique=True))
    return cases, capacities


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pools=large_pools(1, 150),
    policy=st.sampled_from(EVERY_POLICY),
    seed=st.integers(0, 3),
    setting_list=st.lists(sweep_settings(), min_size=1, max_size=2),
)
def test_engine_matches_the_scalar_selector_on_large_tied_pools(pools, policy, setting_list, seed):
    cases, capacities = pools
    assert_matches_scalar(PreparedCases(cases, CLOCK), cases, policy, setting_list, capacities, seed=seed)


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pools=large_pools(600, 1000, max_cases=1),
    policy=st.sampled_from(EVERY_POLICY),
    seed=st.integers(0, 3),
    setting_list=st.lists(sweep_settings(), min_size=1, max_size=2),
)
def test_engine_matches_the_scalar_selector_on_pools_of_up_to_1000_facts(pools, policy, setting_list, seed):
    cases, capacities = pools
    assert_matches_scalar(PreparedCases(cases, CLOCK), cases, policy, setting_list, capacities, seed=seed)


def test_the_same_fact_object_twice_without_ids_is_two_facts():
    twin = {"confidence": 0.4}
    facts = [twin, {"id": "s", "confidence": 0.6}, twin, {"id": "t", "confidence": 0.9}]
    case = SimpleNamespace(case_id="x", scenario="s", source="t", facts=facts, usage={}, support_fact_ids=("s",))
    result = PreparedCases([case], CLOCK).select("confidence", [PolicyParams()], [2, 3], details=True)
    assert result.kept_fact_ids(0, 0, 0) == ("t", "s")
    assert result.kept_fact_ids(0, 0, 1) == ("t", "s", "__missing_0")
    for k, capacity in enumerate((2, 3)):
        expected = reference_outcome(case, "confidence", PolicyParams(), capacity, CLOCK)
        assert same_outcome(result.outcome(0, 0, k), expected)


def test_a_heat_decayed_for_years_breaks_a_tie_as_the_scalar_selector_does():
    # log1p keeps the heated fact's score above 0 (spec 1.3); log(1 + x) would tie it with `cold`.
    usage = {"heated": {"accessHeat": 1, "lastAccessedAt": "2020-01-01T00:00:00Z"}}
    facts = [{"id": "cold", "confidence": 0}, {"id": "heated", "confidence": 0}]
    case = SimpleNamespace(case_id="x", scenario="s", source="t", facts=facts, usage=usage,
                           support_fact_ids=("heated",))
    result = PreparedCases([case], CLOCK).select("hybrid-v1", [PolicyParams()], [1], details=True)
    assert result.kept_fact_ids(0, 0, 0) == ("heated",)
    assert same_outcome(result.outcome(0, 0, 0), reference_outcome(case, "hybrid-v1", PolicyParams(), 1, CLOCK))


def test_margin_of_an_evicted_correction_is_measured_against_the_lowest_kept_fact():
    # Two corrections outrank the support correction; one slot is reserved. The support
    # could take that slot, so its displacer is the reserved correction at the bottom.
    facts = [
        {"id": "a", "confidence": 0.9},
        {"id": "b", "confidence": 0.8},
        {"id": "c", "confidence": 0.3, "category": "correction"},
        {"id": "d", "confidence": 0.2, "category": "correction"},
    ]
    case = SimpleNamespace(case_id="x", scenario="s", source="t", facts=facts, usage={}, support_fact_ids=("d",))
    setting = PolicyParams(1.0, 0.0, 0.0, correction_reserved_fraction=0.5, correction_reserved_max=1)
    result = PreparedCases([case], CLOCK).select("hybrid-v1", [setting], [2], details=True)
    assert result.kept_fact_ids(0, 0, 0) == ("a", "c")
    assert result.reserved_correction_slots[0, 0, 0] == 1
    assert result.support_margin[0, 0, 0] == 0.2 - 0.3
    assert same_outcome(result.outcome(0, 0, 0), reference_outcome(case, "hybrid-v1", setting, 2, CLOCK))


# --- settings as columns ---------------------------------------------------------------------------


def test_setting_columns_list_a_sweep_grid_in_its_order():
    axes = {
        "confirmation_half_lives": (90, 7.5),
        "access_half_lives": (30, 1, 400),
        "reserved_fractions": (0.1, 0.0),
        "reserved_maxima": (10, 0),
    }
    grid = make_grid(weights_step=0.25, **axes)
    columns = SettingColumns.product(grid.weights, *axes.values())
    assert len(columns) == len(grid.settings) == 15 * 2 * 3 * 2 * 2
    assert columns == grid.settings
    assert list(columns[7:9]) == list(grid.settings[7:9]) and columns[-1] == grid.settings[-1]
    assert SettingColumns.of(grid.settings) == columns


def test_select_reads_setting_columns_as_it_reads_policy_params():
    columns = SettingColumns.product(simplex_weights(0.25), (90, 30), (30, 7), (0.1, 0.5), (10, 1))
    prepared = PREPARED["raw"]
    from_columns = prepared.select("hybrid-v1", columns, [3, 5, 9])
    from_params = prepared.select("hybrid-v1", list(columns), [3, 5, 9])
    for name in engine.OUTPUTS:
        assert np.array_equal(getattr(from_columns, name), getattr(from_params, name), equal_nan=True), name


@pytest.mark.parametrize(
    ("weights", "lists", "message"),
    [
        ([(0.5, 0.5, 0.5)], {}, "weights must sum to 1.0"),
        ([(1.2, -0.2, 0.0)], {}, "confidence_weight must be in"),
        ([(0.5, 0.5, "x")], {}, "access_weight must be a finite number"),
        ([(0.5, 0.5)], {}, "three numbers"),
        ([], {}, "no weight triples"),
        ([(1, 0, 0)], {"confirmation_half_lives": (0,)}, "confirmation_half_life_days must be > 0"),
        ([(1, 0, 0)], {"access_half_lives": ()}, "no values for access_half_life_days"),
        ([(1, 0, 0)], {"reserved_maxima": (True,)}, "correction_reserved_max must be an integer"),
        ([(1, 0, 0)], {"reserved_fractions": (1.5,)}, "correction_reserved_fraction must be in"),
    ],
)
def test_setting_columns_refuse_what_policy_params_refuses(weights, lists, message):
    axes = {"confirmation_half_lives": (90,), "access_half_lives": (30,), "reserved_fractions": (0.1,),
            "reserved_maxima": (10,), **lists}
    with pytest.raises(ContractError, match=message):
        SettingColumns.product(weights, **axes)


@settings(deadline=None)
@given(fraction=st.floats(0, 1), maximum=st.integers(0, 20), capacities=st.lists(st.integers(0, 1000), min_size=1))
def test_reserved_slots_are_the_reservations_counts(fraction, maximum, capacities):
    columns = SettingColumns.of([PolicyParams(correction_reserved_fraction=fraction, correction_reserved_max=maximum)])
    reservation = Reservation("correction", fraction, maximum)
    assert columns.reserved_slots(capacities)[0].tolist() == [reservation.slots(k) for k in capacities]


@pytest.mark.parametrize("policy", POLICIES)
def test_negative_zeros_rank_as_zero(policy):
    # A confidence or a weight of -0.0 is valid; the score still ties with +0.0 and keeps input order.
    facts = [{"id": "a", "confidence": 0.0}, {"id": "b", "confidence": -0.0}, {"id": "c", "confidence": 0.3}]
    case = SimpleNamespace(case_id="x", scenario="s", source="t", facts=facts, usage={}, support_fact_ids=("b",))
    setting = PolicyParams(1.0, -0.0, 0.0)
    result = PreparedCases([case], CLOCK).select(policy, [setting], [1, 2], details=True)
    for k, capacity in enumerate((1, 2)):
        assert same_outcome(result.outcome(0, 0, k), reference_outcome(case, policy, setting, capacity, CLOCK))


# --- shapes, chunks, under the cap ----------------------------------------------------------------


def test_chunked_and_unchunked_batches_agree(monkeypatch):
    grid = [PolicyParams(*weights) for weights in simplex_weights(0.1)]
    prepared = PREPARED["raw"]
    whole = prepared.select("hybrid-v1", grid, [3, 5, 7, 9], details=True)
    monkeypatch.setattr(engine, "CHUNK_ELEMENTS", 1)  # one setting per chunk
    assert prepared.chunk_size(4) == 1
    chunked = prepared.select("hybrid-v1", grid, [3, 5, 7, 9], details=True)
    for name in (*engine.OUTPUTS, "kept", "ranking", "scores"):
        assert np.array_equal(getattr(whole, name), getattr(chunked, name), equal_nan=True), name


def test_one_setting_for_an_explorer_has_the_expected_shape_and_no_details():
    result = PREPARED["protocol"].select("hybrid-v1", [PolicyParams(0.5, 0.3, 0.2, 45, 12)], [5, 7, 9])
    assert result.shape == (1, 45, 3)
    assert result.kept is None and result.ranking is None and result.scores is None
    assert result.support_retained.dtype == bool
    assert result.support_rank.dtype == np.int64
    with pytest.raises(ContractError, match="details=True"):
        result.kept_fact_ids(0, 0, 0)


def test_confidence_ignores_the_setting():
    grid = [PolicyParams(*weights, 7, 400, 1.0, 3) for weights in simplex_weights(0.25)]
    result = PREPARED["raw"].select("confidence", grid, [5, 7])
    for name in engine.OUTPUTS:
        values = getattr(result, name)
        assert np.array_equal(values, np.broadcast_to(values[:1], values.shape), equal_nan=True)


def test_at_or_under_the_cap_everything_is_kept_in_input_order():
    result = PREPARED["protocol"].select("hybrid-v1", [PolicyParams()], [10, 12], details=True)
    assert result.support_retained.all()
    assert (result.reserved_correction_slots == 0).all()
    assert np.isnan(result.support_margin).all()  # nothing evicted: no cut line
    assert result.kept_fact_ids(0, 44, 1) == tuple(fact["id"] for fact in PROTOCOL_CASES[44].facts)
    # The rank is still reported.
    assert result.support_rank[0, 44, 0] == 10


def test_capacity_zero_keeps_nothing_as_the_scalar_selector_does():
    case = PROTOCOL_CASES[40]
    decision = select_facts_for_capacity(list(case.facts), max_facts=0, policy="hybrid-v1", usage=case.usage, now=CLOCK)
    result = PREPARED["protocol"].select("hybrid-v1", [PolicyParams()], [0], details=True)
    assert decision.kept == [] and result.kept_fact_ids(0, 40, 0) == ()
    assert result.reserved_correction_slots[0, 40, 0] == decision.reserved_correction_slots == 0


def test_from_pool_set_uses_the_protocol_clock():
    pool_set = SimpleNamespace(cases=PROTOCOL_CASES, protocol=SimpleNamespace(evaluation_time=CLOCK))
    prepared = PreparedCases.from_pool_set(pool_set)
    assert prepared.now == CLOCK and prepared.case_ids == tuple(case.case_id for case in PROTOCOL_CASES)


# --- bad input ---------------------------------------------------------------------------------------


def _case(case_id="x", facts=None, support=("a",)):
    facts = facts if facts is not None else [{"id": "a", "confidence": 0.5}, {"id": "b"}]
    return SimpleNamespace(case_id=case_id, scenario="s", source="t", facts=facts, usage={}, support_fact_ids=support)


@pytest.mark.parametrize(
    ("cases", "now", "message"),
    [
        ([], CLOCK, "no cases"),
        ([_case()], "2026-08-13", "now must be a datetime"),
        ([_case(), _case()], CLOCK, "duplicate case ids: x"),
        ([_case(facts=[{"id": "a"}, {"id": "a"}])], CLOCK, "case 'x': duplicate fact id 'a' at positions 0 and 1"),
        ([_case(facts=[{"id": 1}, {"id": "1"}], support=("1",))], CLOCK, "duplicate fact id '1'"),
        ([_case(support=("zzz",))], CLOCK, "support fact 'zzz' is not among its facts"),
        ([_case(support=("a", "b"))], CLOCK, "exactly one support fact id"),
        ([_case(support=())], CLOCK, "exactly one support fact id"),
    ],
)
def test_bad_cases_are_rejected(cases, now, message):
    with pytest.raises(ContractError, match=message):
        PreparedCases(cases, now)


@pytest.mark.parametrize(
    ("policy", "setting_list", "capacities", "message"),
    [
        ("nope", [PolicyParams()], [5], "unknown policy 'nope'"),
        ("hybrid-v1", [], [5], "no settings"),
        ("hybrid-v1", [{"confidence_weight": 1}], [5], "setting 0 must be a PolicyParams"),
        ("hybrid-v1", [PolicyParams()], [], "no capacities"),
        ("hybrid-v1", [PolicyParams()], [-1], "capacity must be an integer >= 0"),
        ("hybrid-v1", [PolicyParams()], [True], "capacity must be an integer >= 0"),
        ("hybrid-v1", [PolicyParams()], [7.0], "capacity must be an integer >= 0"),
    ],
)
def test_bad_selections_are_rejected(policy, setting_list, capacities, message):
    with pytest.raises((ContractError, UnknownPolicyError), match=message):
        PREPARED["protocol"].select(policy, setting_list, capacities)


def test_reference_outcome_accepts_registry_policies_and_rejects_rankless_ones(monkeypatch):
    from evictlab.policies import Decision, Policy, registry

    lru = reference_outcome(PROTOCOL_CASES[0], "lru", PolicyParams(), 7, CLOCK)
    assert lru.support_rank >= 1 and len(lru.kept_fact_ids) == 7

    class Rankless(Policy):
        name = "rankless"

        def select(self, facts, capacity, context):
            return Decision(list(facts)[:capacity], [], {}, self.name)

    monkeypatch.setitem(registry._POLICIES, "rankless", Rankless)
    with pytest.raises(ContractError, match="'rankless' reports no ranking"):
        reference_outcome(PROTOCOL_CASES[0], "rankless", PolicyParams(), 7, CLOCK)
