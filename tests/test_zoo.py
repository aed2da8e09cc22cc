"""The policy zoo (docs/policies.md section 1): the selector contract for every registered policy,
and hand-computed decisions for each zoo policy."""

from __future__ import annotations

import copy
import datetime as _dt
import hashlib
import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import capacities, snapshots

from evictlab.errors import ContractError
from evictlab.policies import SelectionContext, get_policy, known_policies, select
from evictlab.policies.random_policy import random_retention_mean

UTC = _dt.UTC
CLOCK = _dt.datetime(2026, 8, 13, tzinfo=UTC)
WORDS = ["user", "likes", "green", "tea", "lives", "in", "shanghai", "prefers", "chinese", "review"]
CATEGORIES = ["context", "preference", "correction"]


def days_before(days: float) -> str:
    return (CLOCK - _dt.timedelta(days=days)).isoformat().replace("+00:00", "Z")


# --- a DeerMem-shaped snapshot strategy ---------------------------------------------------------
# Well-formed pools like the protocol's (spec 2.9) but with every signal varied: unique ids,
# confidences with frequent exact ties, timestamps within a year before the clock, optional
# confirmations and usage entries. tests/strategies.py covers the malformed values.

_CONFIDENCES = st.one_of(st.sampled_from([0.5, 0.65, 0.7, 0.9]), st.floats(0, 1))
_AGES = st.one_of(st.sampled_from([0, 7, 30, 180]), st.floats(0, 365))


@st.composite
def deermem_facts(draw, index: int) -> dict:
    fact = {
        "id": f"f{index:02d}",
        "content": " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))),
        "category": draw(st.sampled_from(CATEGORIES)),
        "confidence": draw(_CONFIDENCES),
        "createdAt": days_before(draw(_AGES)),
        "source": f"test:{index}",
    }
    if draw(st.booleans()):
        fact["lastConfirmedAt"] = days_before(draw(_AGES))
        fact["confirmationCount"] = draw(st.integers(1, 3))
    return fact


@st.composite
def usage_entry(draw) -> dict:
    return {
        "accessHeat": draw(st.one_of(st.just(8.0), st.floats(0.5, 20))),
        "accessCount": draw(st.integers(1, 10)),
        "lastAccessedAt": days_before(draw(_AGES)),
    }


@st.composite
def pools(draw, min_size: int = 1, max_size: int = 12):
    """``(facts, usage, support_ids)``: a pool in a drawn order, some facts heated, 1-2 supports."""
    size = draw(st.integers(min_size, max_size))
    facts = [draw(deermem_facts(index)) for index in range(size)]
    facts = draw(st.permutations(facts))
    usage = {fact["id"]: draw(usage_entry()) for fact in facts if draw(st.booleans())}
    support = draw(
        st.lists(st.sampled_from([f["id"] for f in facts]), min_size=1, max_size=2, unique=True)
    )
    return list(facts), usage, support


def run(policy: str, facts, capacity: int, usage=None, *, seed: int = 0, support=()):
    return select(
        policy, facts, capacity, usage=usage, now=CLOCK, seed=seed, support_fact_ids=support
    )


# --- the contract, for every registered policy -----------------------------------------------


def assert_contract(policy: str, facts, capacity: int, usage, seed: int) -> None:
    before = copy.deepcopy((facts, usage))
    decision = run(policy, facts, capacity, usage, seed=seed)
    assert (facts, usage) == before, "inputs must not be mutated"
    ids = [str(fact["id"]) for fact in facts]
    kept_ids = decision.kept_ids
    evicted_ids = [item.fact_id for item in decision.evicted]
    assert decision.policy == policy
    assert len(kept_ids) == min(capacity, len(facts))
    assert sorted(kept_ids + evicted_ids) == sorted(ids)
    assert sorted(decision.ranking) == list(range(len(facts)))
    ranked_ids = [ids[index] for index in decision.ranking]
    if len(facts) <= capacity:  # under the cap: the input itself, unchanged and in input order
        assert all(a is b for a, b in zip(decision.kept, facts, strict=True))
        assert evicted_ids == []
    else:  # kept in rank order, evicted from the lowest rank up
        assert kept_ids == [key for key in ranked_ids if key in set(kept_ids)]
        assert evicted_ids == [key for key in reversed(ranked_ids) if key in set(evicted_ids)]
    again = run(policy, facts, capacity, usage, seed=seed)
    assert again.kept_ids == kept_ids and again.evicted == decision.evicted


@pytest.mark.parametrize("policy", known_policies())
@settings(max_examples=25, deadline=None)
@given(pool=pools(), capacity=capacities(14), seed=st.integers(0, 3))
def test_every_policy_keeps_min_capacity_in_rank_order(policy, pool, capacity, seed):
    facts, usage, _ = pool
    assert_contract(policy, facts, capacity, usage, seed)


@pytest.mark.parametrize("policy", known_policies())
@settings(max_examples=15, deadline=None)
@given(snapshot=snapshots(unique_ids=True), capacity=capacities(14))
def test_every_policy_survives_malformed_fields(policy, snapshot, capacity):
    facts, usage = snapshot
    assert_contract(policy, facts, capacity, usage, seed=1)


@settings(max_examples=30, deadline=None)
@given(pool=pools())
def test_no_policy_retains_more_support_than_the_oracle(pool):
    facts, usage, support = pool
    for capacity in range(len(facts) + 1):
        best = len(
            set(support) & set(run("oracle", facts, capacity, usage, support=support).kept_ids)
        )
        assert best == min(capacity, len(support))
        for policy in known_policies():
            decision = run(policy, facts, capacity, usage, support=support)
            assert len(set(support) & set(decision.kept_ids)) <= best, policy


@settings(max_examples=20, deadline=None)
@given(pool=pools(), extra=st.integers(0, 3))
def test_keep_all_keeps_everything_at_or_above_the_pool_size(pool, extra):
    facts, usage, _ = pool
    decision = run("keep-all", facts, len(facts) + extra, usage)
    assert decision.kept == facts and decision.evicted == []
    below = run("keep-all", facts, len(facts) - 1, usage)
    assert below.kept == facts[:-1]


def test_unknown_policy_and_bad_capacity_are_refused():
    with pytest.raises(ContractError):
        run("fifo", [{"id": "a"}, {"id": "a"}], 1)
    with pytest.raises(ContractError):
        run("fifo", [{"id": "a"}], -1)


# --- random ------------------------------------------------------------------------------------


def ten_facts():
    return [
        {"id": f"d_{index}", "confidence": 0.5, "createdAt": days_before(30)} for index in range(10)
    ]


def test_random_draws_follow_the_documented_sha256_recipe():
    facts = ten_facts()
    ids = sorted(fact["id"] for fact in facts)
    material = json.dumps(["random", 7, ids], ensure_ascii=False).encode("utf-8")
    generator = random.Random(int.from_bytes(hashlib.sha256(material).digest()[:8], "big"))
    draws = {key: generator.random() for key in ids}
    expected = sorted(ids, key=lambda key: -draws[key])[:4]
    decision = run("random", facts, 4, seed=7)
    assert decision.kept_ids == expected
    assert decision.scores["d_3"].components == {"draw": draws["d_3"]}


def test_random_is_fixed_per_seed_and_case_not_per_input_order():
    facts = ten_facts()
    kept = run("random", facts, 5, seed=3).kept_ids
    assert run("random", list(reversed(facts)), 5, seed=3).kept_ids == kept
    subsets = {tuple(sorted(run("random", facts, 5, seed=seed).kept_ids)) for seed in range(20)}
    assert len(subsets) > 10


def test_random_keeps_each_fact_about_equally_often():
    facts = ten_facts()
    counts = dict.fromkeys((fact["id"] for fact in facts), 0)
    for seed in range(400):
        for key in run("random", facts, 3, seed=seed).kept_ids:
            counts[key] += 1
    assert all(80 <= count <= 160 for count in counts.values()), counts  # expected 120 each


def test_random_retention_mean_is_the_share_of_seeds_keeping_the_support():
    facts = ten_facts()
    mean = random_retention_mean(facts, 7, ["d_4"], now=CLOCK)
    kept = sum("d_4" in run("random", facts, 7, seed=seed).kept_ids for seed in range(100))
    assert mean == kept / 100
    assert 0.55 <= mean <= 0.85  # expectation 0.7
    assert random_retention_mean(facts, 10, ["d_4"]) == 1.0
    assert random_retention_mean(facts, 0, ["d_4", "d_5"], seeds=[1, 2]) == 0.0
    with pytest.raises(ContractError):
        random_retention_mean(facts, 7, [])


# --- fifo and lru ----------------------------------------------------------------------------


def test_fifo_evicts_the_oldest_and_undated_first():
    facts = [
        {"id": "young", "createdAt": days_before(10)},
        {"id": "old", "createdAt": days_before(200)},
        {"id": "middle", "createdAt": days_before(50)},
        {"id": "undated", "createdAt": "not a date"},
    ]
    decision = run("fifo", facts, 2)
    assert decision.kept_ids == ["young", "middle"]
    assert [item.fact_id for item in decision.evicted] == ["undated", "old"]
    assert decision.scores["old"].value == -200.0
    assert decision.scores["old"].components == {"createdAgeDays": 200.0}
    assert decision.scores["undated"].value == -math.inf


def test_lru_reads_last_access_and_falls_back_to_creation():
    facts = [
        {"id": "old_but_used", "createdAt": days_before(300)},
        {"id": "recent_unused", "createdAt": days_before(20)},
        {"id": "old_unused", "createdAt": days_before(100)},
    ]
    usage = {"old_but_used": {"accessHeat": 1, "accessCount": 1, "lastAccessedAt": days_before(5)}}
    decision = run("lru", facts, 2, usage)
    assert decision.kept_ids == ["old_but_used", "recent_unused"]
    assert decision.scores["old_but_used"].components == {"accessAgeDays": 5.0}


# --- lfu-aging -------------------------------------------------------------------------------


def test_lfu_ages_the_count_by_the_time_since_the_last_access():
    facts = [{"id": "a", "createdAt": days_before(90)}, {"id": "b", "createdAt": days_before(90)}]
    usage = {
        "a": {"accessCount": 8, "lastAccessedAt": days_before(30)},  # 8 * 2^-1 = 4
        "b": {"accessCount": 5, "lastAccessedAt": days_before(0)},  # 5
    }
    decision = run("lfu-aging", facts, 1, usage)
    assert decision.scores["a"].value == 4.0
    assert decision.scores["b"].value == 5.0
    assert decision.kept_ids == ["b"]


def test_lfu_tie_goes_to_the_more_recently_used():
    facts = [
        {"id": "a", "createdAt": days_before(200)},
        {"id": "b", "createdAt": days_before(200)},
        {"id": "never_a", "createdAt": days_before(100)},
        {"id": "never_b", "createdAt": days_before(40)},
    ]
    usage = {
        "a": {"accessCount": 4, "lastAccessedAt": days_before(30)},  # 4 * 2^-1 = 2
        "b": {"accessCount": 2, "lastAccessedAt": days_before(0)},  # 2
    }
    decision = run("lfu-aging", facts, 3, usage)
    assert decision.scores["a"].value == decision.scores["b"].value == 2.0
    # b before a despite its later position; never_b (created later) before never_a.
    assert decision.kept_ids == ["b", "a", "never_b"]
    assert [item.fact_id for item in decision.evicted] == ["never_a"]


# --- generative agents -------------------------------------------------------------------------


def test_generative_agents_normalises_each_term_over_the_pool():
    facts = [
        {"id": "hot_low", "confidence": 0.1, "createdAt": days_before(100)},
        {"id": "cold_high", "confidence": 0.9, "createdAt": days_before(2)},
        {"id": "mid", "confidence": 0.5, "createdAt": days_before(1)},
    ]
    usage = {"hot_low": {"accessCount": 1, "lastAccessedAt": days_before(0)}}
    recency = {"hot_low": 1.0, "cold_high": 0.995**48, "mid": 0.995**24}
    low, high = min(recency.values()), max(recency.values())
    importance = {"hot_low": 0.0, "cold_high": 1.0, "mid": 0.5}
    decision = run("generative-agents", facts, 2, usage)
    for key in recency:
        components = decision.scores[key].components
        assert components["recency"] == pytest.approx((recency[key] - low) / (high - low))
        assert components["importance"] == pytest.approx(importance[key])
        assert components["relevance"] == 0.0
        assert decision.scores[key].value == pytest.approx(
            components["recency"] + components["importance"]
        )
    # hot_low 1 + 0; cold_high 0 + 1; mid ~0.504 + 0.5: hot_low wins the tie at 1.0 by position.
    assert decision.kept_ids == ["hot_low", "cold_high"]
    code = run("generative-agents-code", facts, 2, usage)
    # code weights: recency 0.5, importance 2: hot_low 0.5, cold_high 2, mid ~1.25
    assert code.kept_ids == ["cold_high", "mid"]


def test_generative_agents_constant_terms_normalise_to_zero():
    facts = [{"id": key, "confidence": 0.7, "createdAt": days_before(3)} for key in ("a", "b")]
    decision = run("generative-agents", facts, 1)
    assert all(score.value == 0.0 for score in decision.scores.values())
    assert decision.kept_ids == ["a"]


# --- memorybank --------------------------------------------------------------------------------


def test_memorybank_strength_and_retention():
    facts = [
        {"id": "recalled", "createdAt": days_before(100)},
        {
            "id": "confirmed",
            "createdAt": days_before(100),
            "lastConfirmedAt": days_before(7),
            "confirmationCount": 1,
        },
        {"id": "plain", "createdAt": days_before(3)},
    ]
    usage = {
        "recalled": {"accessCount": 1, "lastAccessedAt": days_before(2)},
        "confirmed": {"accessCount": 8, "lastAccessedAt": days_before(20)},
    }
    decision = run("memorybank", facts, 2, usage)
    scores = decision.scores
    assert scores["recalled"].value == math.exp(-2 / 2)  # S = 1 + 1
    assert scores["confirmed"].value == math.exp(
        -7 / 3
    )  # S = 1 + min(9, 2), last recall = confirmation
    assert scores["plain"].value == math.exp(-3 / 1)
    assert scores["confirmed"].components == {"strength": 3.0, "recallAgeDays": 7.0, "expired": 0.0}
    assert decision.kept_ids == ["recalled", "confirmed"]


def test_memorybank_drops_expired_facts_first_whatever_their_retention():
    facts = [
        {"id": "strong_expired", "createdAt": days_before(30), "confirmationCount": 2},  # e^-10
        {"id": "weak_live", "createdAt": days_before(29)},  # e^-29, lower, but not expired
    ]
    decision = run("memorybank", facts, 1)
    assert decision.scores["strong_expired"].value > decision.scores["weak_live"].value
    assert decision.kept_ids == ["weak_live"]


def test_memorybank_seeded_ranks_survivors_first():
    facts = [{"id": f"f{days}", "createdAt": days_before(days)} for days in (0.2, 0.5, 1, 2, 3, 5)]
    deterministic = run("memorybank", facts, 3).kept_ids
    assert deterministic == ["f0.2", "f0.5", "f1"]
    differing = 0
    for seed in range(30):
        decision = run("memorybank-seeded", facts, 3, seed=seed)
        survived = [
            decision.scores[key].components["survived"]
            for key in (facts[i]["id"] for i in decision.ranking)
        ]
        assert survived == sorted(
            survived, reverse=True
        )  # every survivor before every non-survivor
        assert decision.kept_ids == run("memorybank-seeded", facts, 3, seed=seed).kept_ids
        differing += decision.kept_ids != deterministic
    assert differing > 0


def test_memorybank_seeded_equals_deterministic_when_every_fact_is_certain_to_survive():
    facts = [
        {"id": f"f{index}", "createdAt": days_before(0), "confidence": index / 10}
        for index in range(5)
    ]
    for seed in range(5):
        assert (
            run("memorybank-seeded", facts, 2, seed=seed).kept_ids
            == run("memorybank", facts, 2).kept_ids
        )


# --- memoryos ----------------------------------------------------------------------------------


def test_memoryos_heat_arithmetic():
    facts = [
        {"id": "heated", "createdAt": days_before(180)},
        {
            "id": "confirmed",
            "createdAt": days_before(180),
            "lastConfirmedAt": days_before(7),
            "confirmationCount": 1,
        },
        {"id": "recent", "createdAt": days_before(0.5)},
    ]
    usage = {"heated": {"accessHeat": 8, "accessCount": 8, "lastAccessedAt": days_before(0)}}
    decision = run("memoryos-heat", facts, 2, usage)
    assert decision.scores["heated"].value == 8 + 0 + 1.0
    assert decision.scores["confirmed"].value == 0 + 1 + math.exp(-180 * 24 / 24)
    assert decision.scores["recent"].value == math.exp(-12 / 24)
    assert decision.scores["confirmed"].components == {
        "visits": 0.0,
        "confirmations": 1.0,
        "recency": math.exp(-180.0),
    }
    assert decision.kept_ids == ["heated", "confirmed"]


# --- dory --------------------------------------------------------------------------------------


def test_dory_scores_by_recency_frequency_and_salience():
    facts = [
        {"id": "used", "createdAt": days_before(180)},
        {"id": "confirmed", "createdAt": days_before(14), "confirmationCount": 1},
        {"id": "plain", "createdAt": days_before(14)},
    ] + [{"id": f"filler{index}", "createdAt": days_before(200)} for index in range(2)]
    usage = {"used": {"accessCount": 3, "lastAccessedAt": days_before(0)}}
    decision = run("dory", facts, 3, usage)
    used = decision.scores["used"]
    # recency 1, frequency ln 4 / ln 4 = 1, salience 0.3 * 1; the top 20 % of 5 = 1 core fact.
    assert used.components["salience"] == pytest.approx(0.3)
    plain = decision.scores["plain"]
    assert plain.value == pytest.approx(0.4 * math.exp(-0.7) + 0.25 * 0.3 * 0.5)
    confirmed = decision.scores["confirmed"]
    assert confirmed.components["salience"] == pytest.approx(0.4 + 0.15)
    assert confirmed.components["core"] == 1.0 and used.components["core"] == 0.0
    assert confirmed.value == pytest.approx((0.4 * math.exp(-0.7) + 0.25 * 0.55) / 0.3)
    assert used.value == pytest.approx(0.4 + 0.35 + 0.25 * 0.3)
    assert decision.kept_ids == ["confirmed", "used", "plain"]


def test_dory_evicts_archivable_facts_before_protected_ones():
    facts = [
        {"id": "stale_used", "createdAt": days_before(300)},  # 2 activations long ago: archivable
        {"id": "never_used", "createdAt": days_before(300)},  # protected (< 2 activations)
        {"id": "popular", "createdAt": days_before(300)},
    ]
    usage = {
        "stale_used": {"accessCount": 2, "lastAccessedAt": days_before(120)},
        "popular": {"accessCount": 50, "lastAccessedAt": days_before(0)},
    }
    decision = run("dory", facts, 2, usage)
    stale, never = decision.scores["stale_used"], decision.scores["never_used"]
    assert stale.value > never.value and stale.value < 0.15
    assert stale.components["archivable"] == 1.0 and never.components["archivable"] == 0.0
    assert [item.fact_id for item in decision.evicted] == ["stale_used"]


# --- oracle and keep-all ----------------------------------------------------------------------


def test_oracle_keeps_support_first_then_hybrid_order():
    facts = [
        {"id": "d_1", "confidence": 0.9, "createdAt": days_before(30)},
        {"id": "d_2", "confidence": 0.8, "createdAt": days_before(30)},
        {"id": "d_3", "confidence": 0.7, "createdAt": days_before(30)},
        {"id": "gold", "confidence": 0.1, "createdAt": days_before(180)},
    ]
    decision = run("oracle", facts, 2, support=["gold"])
    assert decision.kept_ids == ["gold", "d_1"]
    hybrid = run("hybrid-v1", facts, 2)
    assert decision.scores["d_2"].value == hybrid.scores["d_2"].value
    assert decision.scores["gold"].components["support"] == 1.0


def test_keep_all_under_a_smaller_capacity_keeps_the_first_facts():
    facts = [
        {"id": key, "confidence": value} for key, value in (("a", 0.1), ("b", 0.9), ("c", 0.5))
    ]
    assert run("keep-all", facts, 2).kept_ids == ["a", "b"]


def test_every_policy_names_its_components():
    facts = ten_facts()
    context = SelectionContext(now=CLOCK)
    for name in known_policies():
        policy = get_policy(name)
        assert policy.summary and isinstance(policy.component_names, tuple)
        for score in policy.score(facts, context):
            assert tuple(score.components) == policy.component_names, name
