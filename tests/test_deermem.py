"""The DeerMem-compatible entry point: spec 1.11 vectors, 2.9 derived values, production edges."""

from __future__ import annotations

import datetime as _dt

import pytest

from evictlab.errors import ContractError
from evictlab.policies import select
from evictlab.selection.audit import audit_event, shadow_comparison
from evictlab.selection.deermem import select_facts_for_capacity

UTC = _dt.UTC
CLOCK = _dt.datetime(2026, 8, 13, tzinfo=UTC)
AT_CLOCK = "2026-08-13T00:00:00Z"
CONFIRMED_7_DAYS_AGO = "2026-08-06T00:00:00Z"
CREATED_180_DAYS_AGO = "2026-02-14T00:00:00Z"
CREATED_30_DAYS_AGO = "2026-07-14T00:00:00Z"
HEAT_8_AT_CLOCK = {"accessHeat": 8, "accessCount": 8, "lastAccessedAt": AT_CLOCK}


def fact(fact_id, confidence, **fields):
    return {"id": fact_id, "content": f"content of {fact_id}", "confidence": confidence, **fields}


def run(facts, max_facts, policy, **options):
    return select_facts_for_capacity(
        facts, max_facts=max_facts, policy=policy, now=CLOCK, **options
    )


def kept_ids(decision):
    return [item["id"] for item in decision.kept]


def evicted_ids(decision):
    return [item.fact_id for item in decision.evicted]


# --- spec 1.11 ------------------------------------------------------------------------------


def test_confidence_policy_keeps_the_most_confident():
    facts = [fact("low", 0.6), fact("high", 0.9), fact("mid", 0.7)]
    decision = run(facts, 2, "confidence")
    assert kept_ids(decision) == ["high", "mid"]
    assert evicted_ids(decision) == ["low"]
    assert decision.policy == "confidence"


def test_hybrid_keeps_a_recent_confirmation_over_a_stale_high_confidence():
    facts = [
        fact("stale_high", 0.9, createdAt="2026-02-14T00:00:00Z"),
        fact(
            "recent_confirmed",
            0.7,
            createdAt="2026-01-01T00:00:00Z",
            lastConfirmedAt="2026-08-06T00:00:00Z",
        ),
    ]
    decision = run(facts, 1, "hybrid-v1")
    assert kept_ids(decision) == ["recent_confirmed"]
    freshness = decision.scores["stale_high"].components["confirmationFreshness"]
    assert freshness < 0.13
    assert freshness == 0.5 * 2 ** (-180 / 90) == 0.125


def test_hybrid_keeps_a_recalled_fact_over_a_more_confident_unused_one():
    facts = [fact("recalled", 0.7), fact("unused", 0.75)]
    usage = {"recalled": {"accessHeat": 100000, "accessCount": 3, "lastAccessedAt": AT_CLOCK}}
    decision = run(facts, 1, "hybrid-v1", usage=usage)
    assert kept_ids(decision) == ["recalled"]
    assert decision.scores["recalled"].components["accessHeat"] == 1.0


def test_hybrid_reserves_a_slot_for_a_low_correction():
    preferences = [
        fact(f"pref_{index}", round(0.99 - 0.01 * index, 2), category="preference")
        for index in range(10)
    ]
    decision = run([*preferences, fact("correction", 0.1, category="correction")], 10, "hybrid-v1")
    assert "correction" in kept_ids(decision)
    assert len(decision.kept) == 10
    assert decision.reserved_correction_slots == 1
    assert evicted_ids(decision) == ["pref_9"]


def test_without_a_correction_nothing_is_reserved():
    preferences = [
        fact(f"pref_{index}", round(0.99 - 0.01 * index, 2), category="preference")
        for index in range(11)
    ]
    decision = run(preferences, 10, "hybrid-v1")
    assert decision.reserved_correction_slots == 0
    assert evicted_ids(decision) == ["pref_10"]


@pytest.mark.parametrize("policy", ["confidence", "hybrid-v1"])
@pytest.mark.parametrize("max_facts", [3, 4])
def test_at_or_below_the_cap_the_input_is_returned_in_order(policy, max_facts):
    facts = [fact("b", 0.2), fact("c", 0.9, category="correction"), fact("a", 0.5)]
    decision = run(facts, max_facts, policy)
    assert decision.kept == facts
    assert (decision.evicted, decision.reserved_correction_slots) == ([], 0)


def updater_snapshot():
    """Spec 1.11, updater level: eight fresh facts, two old ones, one new fact appended."""
    existing = [
        fact(f"fresh_{index}", 0.99, createdAt="2026-08-12T00:00:00Z") for index in range(8)
    ]
    existing += [
        fact("stale_high", 0.9, createdAt="2025-01-01T00:00:00Z"),
        fact(
            "confirmed_recently",
            0.7,
            createdAt="2025-01-01T00:00:00Z",
            lastConfirmedAt="2026-08-12T00:00:00Z",
        ),
    ]
    # The updater stamps a new fact's createdAt with the update time.
    return [*existing, fact("new_fact", 0.8, createdAt=AT_CLOCK)]


def test_updater_level_hybrid_evicts_the_stale_fact():
    decision = run(updater_snapshot(), 10, "hybrid-v1")
    assert "confirmed_recently" in kept_ids(decision)
    assert evicted_ids(decision) == ["stale_high"]


def test_updater_level_shadow_audit_disagrees():
    facts = updater_snapshot()
    actual = run(facts, 10, "confidence")
    shadow = run(facts, 10, "hybrid-v1")  # same parameters, never changes what is kept
    assert "stale_high" in kept_ids(actual)
    assert evicted_ids(actual) == ["confirmed_recently"]

    event = audit_event(actual, max_facts=10, occurred_at=CLOCK, shadow=shadow)
    assert event == {
        "occurredAt": "2026-08-13T00:00:00Z",
        "reason": "capacity",
        "policyVersion": "confidence",
        "maxFacts": 10,
        "reservedCorrectionSlots": 0,
        "evicted": [
            {
                "factId": "confirmed_recently",
                "category": "context",
                "score": 0.7,
                "components": {"confidence": 0.7},
            }
        ],
        "shadow": {"policyVersion": "hybrid-v1", "wouldEvict": ["stale_high"], "disagrees": True},
    }
    assert shadow_comparison(shadow, shadow)["disagrees"] is False


# --- spec 2.9 derived values ----------------------------------------------------------------

SUPPORT_FACTS = {
    "confirmation_help": (
        fact(
            "gold_x",
            0.70,
            createdAt=CREATED_180_DAYS_AGO,
            lastConfirmedAt=CONFIRMED_7_DAYS_AGO,
            confirmationCount=1,
        ),
        None,
        0.69188,
    ),
    "access_help": (fact("gold_x", 0.70, createdAt=CREATED_180_DAYS_AGO), HEAT_8_AT_CLOCK, 0.58625),
    "confidence_control": (fact("gold_x", 0.95, createdAt=CREATED_30_DAYS_AGO), None, 0.71671),
    "noisy_signal_control": (fact("gold_x", 0.90, createdAt=CREATED_180_DAYS_AGO), None, 0.61625),
    "correction_reserve": (
        fact("gold_x", 0.65, createdAt=CREATED_180_DAYS_AGO, category="correction"),
        None,
        0.45375,
    ),
}


@pytest.mark.parametrize("scenario", sorted(SUPPORT_FACTS))
def test_published_support_scores(scenario):
    support, usage_entry, published = SUPPORT_FACTS[scenario]
    usage = {"gold_x": usage_entry} if usage_entry else {}
    decision = run([support], 1, "hybrid-v1", usage=usage)
    assert round(decision.scores["gold_x"].value, 5) == published


@pytest.mark.parametrize(
    ("confidence", "extra", "usage_entry", "published"),
    [
        (0.94, {}, None, 0.64225),
        (0.94 - 0.02 * 8, {}, None, 0.53825),
        (0.68, {}, None, 0.47325),
        (0.70, {"lastConfirmedAt": CONFIRMED_7_DAYS_AGO}, None, 0.69188),
        (0.70, {}, HEAT_8_AT_CLOCK, 0.58625),
        (0.70, {}, None, 0.48625),
    ],
)
def test_published_distractor_scores(confidence, extra, usage_entry, published):
    distractor = fact("d_x_0_q", confidence, createdAt=CREATED_180_DAYS_AGO, **extra)
    decision = run(
        [distractor], 1, "hybrid-v1", usage={"d_x_0_q": usage_entry} if usage_entry else {}
    )
    value = decision.scores["d_x_0_q"].value
    assert round(value, 5) == published
    if not extra and usage_entry is None:
        assert value == 0.65 * confidence + 0.25 * 0.125 + 0.10 * 0.0


def help_pool(loss_rank, support, usage):
    """A confirmation_help or access_help pool: outrankers 0.94 - 0.02 i, then 0.68 - 0.02 (i - k)."""
    k = loss_rank - 1
    facts = [support]
    for i in range(9):
        confidence = 0.94 - 0.02 * i if i < k else 0.68 - 0.02 * (i - k)
        facts.append(fact(f"d_x_{i}_q{i}", confidence, createdAt=CREATED_180_DAYS_AGO))
    return sorted(facts, key=lambda item: item["id"]), usage


def noisy_pool(loss_rank):
    k = loss_rank - 1
    facts = [fact("gold_x", 0.90, createdAt=CREATED_180_DAYS_AGO)]
    usage = {}
    for i in range(9):
        extra = (
            {"lastConfirmedAt": CONFIRMED_7_DAYS_AGO, "confirmationCount": 1}
            if i < k and i % 2
            else {}
        )
        facts.append(fact(f"d_x_{i}_q{i}", 0.70, createdAt=CREATED_180_DAYS_AGO, **extra))
        if i < k and i % 2 == 0:
            usage[f"d_x_{i}_q{i}"] = HEAT_8_AT_CLOCK
    return sorted(facts, key=lambda item: item["id"]), usage


def support_rank(facts, usage, policy):
    decision = run(facts, 0, policy, usage=usage)
    return len(decision.evicted) - evicted_ids(decision).index("gold_x")


@pytest.mark.parametrize("loss_rank", [6, 8, 10])
def test_published_support_ranks(loss_rank):
    confirmed = fact(
        "gold_x", 0.70, createdAt=CREATED_180_DAYS_AGO, lastConfirmedAt=CONFIRMED_7_DAYS_AGO
    )
    accessed = fact("gold_x", 0.70, createdAt=CREATED_180_DAYS_AGO)
    confirmation_help = help_pool(loss_rank, confirmed, {})
    access_help = help_pool(loss_rank, accessed, {"gold_x": HEAT_8_AT_CLOCK})
    assert support_rank(*confirmation_help, "confidence") == loss_rank
    assert support_rank(*access_help, "confidence") == loss_rank
    assert support_rank(*confirmation_help, "hybrid-v1") == 1
    assert support_rank(*access_help, "hybrid-v1") == min(loss_rank, 6)
    noisy = noisy_pool(loss_rank)
    assert support_rank(*noisy, "confidence") == 1
    assert support_rank(*noisy, "hybrid-v1") == {6: 3, 8: 4, 10: 5}[loss_rank]


# --- production edges -----------------------------------------------------------------------


def test_facts_without_ids_are_scored_by_position():
    facts = [
        {"confidence": 0.9, "content": "no id"},
        {"id": "", "confidence": 0.1, "category": "note"},
        {"id": "b", "confidence": 0.5},
        {"id": None, "confidence": 0.05},
    ]
    usage = {"__missing_1": {"accessHeat": 8, "lastAccessedAt": AT_CLOCK}}
    decision = run(facts, 2, "hybrid-v1", usage=usage)
    assert list(decision.scores) == ["__missing_0", "__missing_1", "b", "__missing_3"]
    assert decision.scores["__missing_1"].components["accessHeat"] == 1.0
    assert decision.kept == [facts[0], facts[2]]
    assert [(item.fact_id, item.category) for item in decision.evicted] == [
        ("__missing_3", "context"),
        ("__missing_1", "note"),
    ]


def test_duplicate_ids_share_the_later_score():
    facts = [fact("a", 0.9), fact("b", 0.5), fact("a", 0.1), fact("c", 0.3)]
    decision = run(facts, 2, "confidence")
    assert decision.scores["a"].value == 0.1
    # Both copies of `a` rank with 0.1, the earlier copy first; `b` and `c` outrank them.
    assert decision.kept == [facts[1], facts[3]]
    assert evicted_ids(decision) == ["a", "a"]
    assert [item.score for item in decision.evicted] == [0.1, 0.1]


def test_duplicate_ids_keep_the_earlier_copy_on_a_shared_score():
    facts = [fact("a", 0.9), fact("b", 0.5), fact("a", 0.6)]
    decision = run(facts, 2, "confidence")
    assert decision.kept == [facts[0], facts[2]]
    assert evicted_ids(decision) == ["b"]


def test_evictlab_select_refuses_duplicate_ids():
    facts = [fact("a", 0.9), fact("b", 0.5), fact("a", 0.1)]
    with pytest.raises(ContractError, match="duplicate fact id 'a' at position 2"):
        select("confidence", facts, 2, now=CLOCK)
    with pytest.raises(ContractError, match="duplicate"):
        select("hybrid-v1", facts, 10, now=CLOCK)  # also under the cap
