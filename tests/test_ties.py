"""Ties at the cut line (evictlab.policies.ties): the closed-form expectation over random tie
orders against brute force, on hand-made pools with reservations and on the demo's 45 pools.

The brute force never uses the closed form: it rewrites the input order of the tied facts and
runs the real selector, which breaks ties by input position, once per order.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import re
from fractions import Fraction

import pytest

from evictlab.policies import SelectionContext, get_policy, selection_context
from evictlab.policies.modifiers import resolve_policy
from evictlab.policies.signals import is_category
from evictlab.policies.ties import keep_probabilities, keep_probability, near_tie, tie_outcome
from evictlab.selection.decisions import decide_grid, scenario_table
from evictlab.selection.engine import reference_outcome
from evictlab.workbench import loaders

UTC = _dt.UTC
CLOCK = _dt.datetime(2026, 8, 13, tzinfo=UTC)


def reordered(facts, members, arrangement):
    """``facts`` with the ``members`` (input positions) rewritten in the order ``arrangement``."""
    out = list(facts)
    for slot, member in zip(sorted(members), arrangement):
        out[slot] = facts[member]
    return out


def tie_group(policy, facts, context, position):
    decision = policy.select(facts, len(facts), context)
    key = decision.rank_keys[position]
    return [index for index, other in enumerate(decision.rank_keys) if other == key]


def brute_force_all_orders(policy, facts, capacity, context, position):
    """For every member of the tie group of ``position``: the share of all orders of the group
    in which the real selector keeps it."""
    members = tie_group(policy, facts, context, position)
    kept = dict.fromkeys(members, 0)
    orders = list(itertools.permutations(members))
    for arrangement in orders:
        chosen = set(policy.select(reordered(facts, members, arrangement), capacity, context).kept_ids)
        for member in members:
            kept[member] += facts[member]["id"] in chosen
    return {member: Fraction(count, len(orders)) for member, count in kept.items()}


def distinct_arrangements(labels):
    """Every distinct sequence of a multiset of labels (each once)."""
    if not labels:
        yield ()
        return
    for label in sorted(set(labels)):
        rest = list(labels)
        rest.remove(label)
        for tail in distinct_arrangements(rest):
            yield (label, *tail)


def brute_force_by_kind(policy, facts, capacity, context, position):
    """Like :func:`brute_force_all_orders`, with interchangeable members merged.

    Two tied facts the selector cannot tell apart (neither is the support, both in or both
    out of the reserved category) give the same decision in either order, so every distinct
    arrangement of kinds stands for the same number of orders.
    """
    members = tie_group(policy, facts, context, position)
    reservation = policy.reservation(context)

    def kind(index):
        reserved = reservation is not None and is_category(facts[index], reservation.category)
        return (index == position, reserved)

    pools = {}
    for index in members:
        pools.setdefault(kind(index), []).append(index)
    kept = total = 0
    for pattern in distinct_arrangements([kind(index) for index in members]):
        taken = {key: iter(indices) for key, indices in pools.items()}
        arrangement = [next(taken[key]) for key in pattern]
        decision = policy.select(reordered(facts, members, arrangement), capacity, context)
        kept += facts[position]["id"] in decision.kept_ids
        total += 1
    return Fraction(kept, total)


def fact(index, confidence, category="context"):
    return {"id": f"f{index:02d}", "content": "x", "category": category, "confidence": confidence,
            "createdAt": "2026-08-01T00:00:00Z"}


# --- the closed form against every order ------------------------------------------------------

HAND_POOLS = [
    # (confidences, categories): ties straddle the cut with and without corrections
    ([0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.2], ["context"] * 7),
    ([0.5, 0.5, 0.5, 0.5, 0.5, 0.9], ["correction", "context", "correction", "context", "context", "context"]),
    ([0.7, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], ["correction", "correction", "context", "correction", "context", "correction",
                                            "context"]),
    ([0.5] * 6, ["correction", "context", "context", "correction", "correction", "context"]),
    ([0.9, 0.9, 0.5, 0.5, 0.5, 0.5, 0.1, 0.1], ["correction", "correction", "correction", "context", "context",
                                                 "correction", "correction", "context"]),
]  # fmt: skip


@pytest.mark.parametrize("confidences, categories", HAND_POOLS)
@pytest.mark.parametrize(
    "spec", ["confidence", "confidence+reserve(correction,0.5,3)", "random+reserve(correction,0.3,2)"]
)
def test_expected_equals_the_mean_over_every_order_of_the_tied_facts(confidences, categories, spec):
    facts = [fact(i, c, k) for i, (c, k) in enumerate(zip(confidences, categories))]
    policy = resolve_policy(spec)
    context = selection_context(now=CLOCK)
    for capacity in range(1, len(facts)):
        decision = policy.select(facts, capacity, context)
        uniform = policy.uniform_order
        probabilities = keep_probabilities(facts, decision, capacity, policy.reservation(context), uniform=uniform)
        assert sum(probabilities) == pytest.approx(capacity)
        if uniform:
            continue  # random's orders are its draws, checked below
        expected = {}
        for position in range(len(facts)):
            if position not in expected:
                expected.update(brute_force_all_orders(policy, facts, capacity, context, position))
            assert probabilities[position] == pytest.approx(float(expected[position]), abs=1e-12), (capacity, position)


def test_random_expectation_is_k_over_n_and_the_seed_mean_approaches_it():
    facts = [fact(i, 0.5) for i in range(10)]
    policy = get_policy("random")
    decision = policy.select(facts, 3, selection_context(now=CLOCK))
    assert keep_probabilities(facts, decision, 3, None, uniform=True) == [0.3] * 10
    outcome = tie_outcome(facts, decision, 3, None, 9, uniform=True)
    assert outcome.expected == 0.3 and not outcome.tied  # the draws themselves never tie
    draws = [
        "f09" in policy.select(facts, 3, SelectionContext(now=CLOCK, seed=seed)).kept_ids for seed in range(2000)
    ]
    assert abs(sum(draws) / len(draws) - 0.3) < 0.04


def test_keep_probability_by_hand():
    # Five tied facts for two slots: 2/5 each.
    assert keep_probability(capacity=3, reserved_slots=0, better_reserved=0, better_other=1,
                            tied_reserved=0, tied_other=5, reserved_member=False) == Fraction(2, 5)
    # One reserved slot among {R, R, N}, one open slot after it: the N wins the open slot
    # when it comes before the second R (2 of 3 orders).
    assert keep_probability(capacity=2, reserved_slots=1, better_reserved=0, better_other=0,
                            tied_reserved=2, tied_other=1, reserved_member=False) == Fraction(2, 3)
    assert keep_probability(capacity=2, reserved_slots=1, better_reserved=0, better_other=0,
                            tied_reserved=2, tied_other=1, reserved_member=True) == Fraction(2, 3)
    with pytest.raises(Exception, match="must contain"):
        keep_probability(capacity=2, reserved_slots=0, better_reserved=0, better_other=0,
                         tied_reserved=0, tied_other=1, reserved_member=True)


def test_near_tie_is_relative():
    assert near_tie(1e-17, 0.5, 0.5 - 1e-17)
    assert not near_tie(0.0, 0.5, 0.5) and not near_tie(1e-6, 0.5, 0.499999)
    assert not near_tie(float("nan"), 0.5, 0.5)


# --- the demo pools ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pool_set():
    return loaders.load_pool_set()


@pytest.mark.parametrize("name", ["fifo", "lru", "lfu-aging"])
def test_zoo_rows_under_expected_equal_brute_force_on_the_demo_pools(pool_set, name):
    params = pool_set.protocol.config.hybrid
    now = pool_set.protocol.evaluation_time
    decisions = decide_grid(pool_set, [name], capacities=(5, 7, 9), tie_break="expected")
    policy = get_policy(name)
    by_case = {case.case_id: case for case in pool_set.cases}
    tied = 0
    for row in decisions.itertuples():
        case = by_case[str(row.case_id)]
        facts = list(case.facts)
        context = selection_context(now=now, usage=case.usage, params=params, support_fact_ids=case.support_fact_ids)
        position = [f["id"] for f in facts].index(case.support_fact_ids[0])
        expected = brute_force_by_kind(policy, facts, row.capacity, context, position)
        assert row.retention == pytest.approx(float(expected), abs=1e-12), (row.case_id, row.capacity)
        assert row.support_tied == (0 < expected < 1)
        tied += row.support_tied
    assert tied > 0  # the demo's zoo decisions do tie at the cut line


def test_fifo_ties_every_fact_of_case_5fadc924_and_input_order_loses_them(pool_set):
    case = next(case for case in pool_set.cases if case.case_id.startswith("5fadc924"))
    params = pool_set.protocol.config.hybrid
    now = pool_set.protocol.evaluation_time
    context = selection_context(now=now, usage=case.usage, params=params)
    decision = get_policy("fifo").select(case.facts, 7, context)
    support = [fact["id"] for fact in case.facts].index(case.support_fact_ids[0])
    ties = tie_outcome(case.facts, decision, 7, None, support)
    assert ties.tie_size == len(case.facts) and ties.tied and ties.expected == pytest.approx(0.7)
    outcome = reference_outcome(case, "fifo", params, 7, now)
    assert not outcome.support_retained and outcome.support_tied and outcome.support_expected == pytest.approx(0.7)
    as_made = decide_grid(pool_set, ["fifo"], capacities=[7], tie_break="input-order")
    expected = decide_grid(pool_set, ["fifo"], capacities=[7])
    assert as_made["retention"].sum() == 10 and expected["retention"].sum() == pytest.approx(34.5)
    assert set(expected["tie_break"]) == {"expected"}


def test_run_policy_bounds_print_as_bounds(pool_set):
    decisions = decide_grid(pool_set, ["keep-all", "oracle", "random", "confidence"], capacities=(5, 7, 9))
    totals = decisions.groupby(["policy", "capacity"], observed=True)["retention"].sum()
    for capacity, random_total in zip((5, 7, 9), (22.5, 31.5, 40.5)):
        assert totals["keep-all", capacity] == 45 and totals["oracle", capacity] == 45
        assert totals["random", capacity] == pytest.approx(random_total)
    table = scenario_table(decisions)
    assert list(table.loc["total", "random"]) == ["22.5/45", "31.5/45", "40.5/45"]
    assert list(table.loc["total", "keep-all"]) == ["45/45"] * 3
    confidence = decisions[decisions["policy"] == "confidence"]
    assert set(confidence["tie_break"]) == {"input-order"}
    assert (confidence["retention"] == confidence["support_retained"]).all()


def test_run_policy_command_prints_the_bounds(tmp_path, capsys):
    from evictlab import cli

    code = cli.main(["run-policy", "--policies", "keep-all,oracle,random", "--output-dir", str(tmp_path / "run")])
    assert code == 0
    printed = capsys.readouterr().out
    assert re.search(r"total\s+45/45\s+45/45\s+22\.5/45\s+45/45\s+45/45\s+31\.5/45\s+45/45\s+45/45\s+40\.5/45", printed)
    assert "decisions settled by a tie at the cut line: keep-all 0, oracle 0, random 0" in printed
