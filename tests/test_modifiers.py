"""Composable modifiers and policy specs (docs/policies.md section 1, "modifiers")."""

from __future__ import annotations

import datetime as _dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import capacities, snapshots
from test_zoo import CLOCK, days_before, pools

from evictlab.errors import ContractError, UnknownPolicyError
from evictlab.policies import (
    Reservation,
    SelectionContext,
    get_policy,
    known_policies,
    select_by_rank,
)
from evictlab.policies.modifiers import (
    content_tokens,
    jaccard,
    resolve_policy,
    with_category_reservation,
    with_redundancy_penalty,
)


def decide(policy, facts, capacity, usage=None, seed=0):
    context = SelectionContext(now=CLOCK, usage=usage or {}, seed=seed)
    return policy.select(facts, capacity, context)


def summary(decision):
    evicted = [item.fact_id for item in decision.evicted]
    return decision.kept_ids, evicted, decision.reserved_correction_slots, decision.ranking


# --- category reservation ----------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(snapshot=snapshots(unique_ids=True), capacity=capacities(14))
def test_reservation_on_confidence_matches_deermem_reservation_logic(snapshot, capacity):
    facts, usage = snapshot
    base = get_policy("confidence")
    modified = with_category_reservation(base, "correction", 0.1, 10)
    context = SelectionContext(now=CLOCK, usage=usage)
    expected = select_by_rank(
        facts,
        base.score(facts, context),
        capacity,
        Reservation("correction", 0.1, 10),
        modified.name,
    )
    decision = modified.select(facts, capacity, context)
    assert summary(decision) == summary(expected)
    assert decision.evicted == expected.evicted


@settings(max_examples=40, deadline=None)
@given(pool=pools(), capacity=capacities(12))
def test_reserving_corrections_on_hybrid_changes_nothing(pool, capacity):
    facts, usage, _ = pool
    modified = resolve_policy("hybrid-v1+reserve(correction,0.1,10)")
    plain = decide(get_policy("hybrid-v1"), facts, capacity, usage)
    assert summary(decide(modified, facts, capacity, usage))[:3] == summary(plain)[:3]


def test_reservation_holds_slots_for_any_category_on_any_base():
    facts = [
        {"id": "new_a", "category": "context", "createdAt": days_before(1)},
        {"id": "new_b", "category": "context", "createdAt": days_before(2)},
        {"id": "old_pref", "category": "Preference ", "createdAt": days_before(300)},
        {"id": "older_pref", "category": "preference", "createdAt": days_before(400)},
        {"id": "new_c", "category": "context", "createdAt": days_before(3)},
    ]
    plain = decide(get_policy("fifo"), facts, 3)
    assert plain.kept_ids == ["new_a", "new_b", "new_c"]
    modified = resolve_policy("fifo+reserve(preference,0.5,1)")  # min(1, ceil(1.5)) = 1 slot
    decision = decide(modified, facts, 3)
    assert decision.kept_ids == ["new_a", "new_b", "old_pref"]
    assert decision.reserved_correction_slots == 1
    assert decision.policy == "fifo+reserve(preference,0.5,1)"
    assert decision.scores["old_pref"].value == -300.0


def test_a_second_reserved_category_is_refused():
    modified = resolve_policy("hybrid-v1+reserve(preference,0.1,10)")
    with pytest.raises(ContractError, match="only one category"):
        decide(modified, [{"id": "a"}, {"id": "b"}], 1)


@pytest.mark.parametrize(
    ("category", "fraction", "maximum"),
    [
        ("", 0.1, 10),
        ("correction", 1.5, 10),
        ("correction", float("nan"), 10),
        ("correction", 0.1, -1),
        ("correction", 0.1, True),
    ],
)
def test_reservation_arguments_are_validated(category, fraction, maximum):
    with pytest.raises(ContractError):
        with_category_reservation(get_policy("lru"), category, fraction, maximum)


# --- redundancy penalty --------------------------------------------------------------------------


def test_redundancy_penalty_demotes_a_near_duplicate():
    facts = [
        {"id": "tea", "confidence": 0.9, "content": "The user drinks green tea every morning"},
        {
            "id": "tea_again",
            "confidence": 0.85,
            "content": "the user drinks green tea every morning.",
        },
        {"id": "city", "confidence": 0.8, "content": "They moved to Shanghai last spring"},
    ]
    assert decide(get_policy("confidence"), facts, 2).kept_ids == ["tea", "tea_again"]
    decision = decide(resolve_policy("confidence+mmr(0.5)"), facts, 2)
    assert decision.kept_ids == ["tea", "city"]
    assert decision.scores["tea_again"].value == pytest.approx(0.85 - 0.5 * 1.0)
    assert decision.scores["tea_again"].components == {"confidence": 0.85, "redundancy": 1.0}
    assert decision.scores["city"].components["redundancy"] == 0.0


def test_jaccard_of_tokens():
    first = content_tokens({"content": "Green tea, green TEA!"})
    second = content_tokens({"content": "green coffee"})
    assert first == {"green", "tea"}
    assert jaccard(first, second) == 1 / 3
    assert jaccard(frozenset(), frozenset()) == 0.0
    assert content_tokens({"content": None}) == frozenset()


@pytest.mark.parametrize("name", known_policies())
@settings(max_examples=15, deadline=None)
@given(pool=pools(), capacity=capacities(12), seed=st.integers(0, 2))
def test_zero_penalty_leaves_every_policy_unchanged(name, pool, capacity, seed):
    facts, usage, _ = pool
    base = decide(get_policy(name), facts, capacity, usage, seed)
    modified = decide(with_redundancy_penalty(get_policy(name), 0.0), facts, capacity, usage, seed)
    assert summary(modified) == summary(base)


@settings(max_examples=40, deadline=None)
@given(pool=pools(), capacity=capacities(12))
def test_penalty_keeps_the_base_reservation_and_tiers(pool, capacity):
    facts, usage, support = pool
    context = SelectionContext(now=CLOCK, usage=usage, support_fact_ids=frozenset(support))
    hybrid = resolve_policy("hybrid-v1+mmr(0.5)").select(facts, capacity, context)
    plain = get_policy("hybrid-v1").select(facts, capacity, context)
    assert hybrid.reserved_correction_slots == plain.reserved_correction_slots
    oracle = resolve_policy("oracle+mmr(0.9)").select(facts, capacity, context)
    assert len(set(support) & set(oracle.kept_ids)) == min(capacity, len(support))


def test_penalised_scores_never_increase_along_the_greedy_order():
    facts = [
        {
            "id": f"f{index}",
            "confidence": 0.9 - index / 20,
            "content": " ".join(["tea"] * (index % 3 + 1) + [str(index % 2)]),
        }
        for index in range(8)
    ]
    decision = decide(resolve_policy("confidence+mmr(0.3)"), facts, 4)
    values = [decision.scores[facts[index]["id"]].value for index in decision.ranking]
    assert values == sorted(values, reverse=True)


# --- specs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("lru", "lru"),
        ("lru+reserve(correction,0.1,10)", "lru+reserve(correction,0.1,10)"),
        (" lru + reserve( Correction , 0.10 , 10 ) ", "lru+reserve(correction,0.1,10)"),
        ("lru+reserve(correction)", "lru+reserve(correction,0.1,10)"),
        ("confidence+mmr(0.5)", "confidence+mmr(0.5)"),
        ("confidence+mmr()", "confidence+mmr(0.5)"),
        (
            "hybrid-v1+mmr(1)+reserve(correction,0.2,3)",
            "hybrid-v1+mmr(1.0)+reserve(correction,0.2,3)",
        ),
    ],
)
def test_specs_resolve_to_canonical_names_that_read_back(spec, name):
    policy = resolve_policy(spec)
    assert policy.name == name
    assert resolve_policy(policy.name).name == name


def test_stacked_modifiers_apply_left_to_right():
    policy = resolve_policy("confidence+mmr(0.5)+reserve(correction,0.5,1)")
    assert policy.base.name == "confidence+mmr(0.5)"
    assert policy.base.base.name == "confidence"


@pytest.mark.parametrize(
    "spec",
    [
        "lru+foo(1)",
        "lru+mmr(a)",
        "lru+mmr(0.1,0.2)",
        "lru+mmr(-1)",
        "lru+mmr(nan)",
        "lru+reserve(correction,0.1)",
        "lru+reserve(correction,1.5,3)",
        "lru+reserve(correction,0.1,2.5)",
        "lru+reserve",
        "lru+",
    ],
)
def test_unreadable_specs_are_refused_naming_the_spec(spec):
    with pytest.raises(ContractError):
        resolve_policy(spec)


def test_unknown_base_names_are_refused():
    with pytest.raises(UnknownPolicyError):
        resolve_policy("nope+mmr(0.5)")


def test_modified_policy_reports_its_base_components():
    policy = resolve_policy("hybrid-v1+mmr(0.5)")
    assert policy.component_names == (
        "confidence",
        "confirmationFreshness",
        "accessHeat",
        "redundancy",
    )
    scores = policy.score(
        [{"id": "a", "content": "x"}], SelectionContext(now=_dt.datetime(2026, 8, 13))
    )
    assert tuple(scores[0].components) == policy.component_names
