"""Counterfactual explanations (docs/policies.md section 2 item 1)."""

from __future__ import annotations

import datetime as _dt
import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import clocks, policy_params, snapshots
from test_zoo import CLOCK, days_before, pools

from evictlab.errors import ContractError
from evictlab.policies import select
from evictlab.selection.explain import confirmation_limit, explain


def kept_after(
    policy, facts, capacity, usage, now, params, fact_id, *, fact_change=None, usage_entry=None
):
    """Re-run the real selector with one fact's fields changed or its usage entry replaced."""
    if fact_change:
        facts = [{**fact, **fact_change} if fact["id"] == fact_id else fact for fact in facts]
    if usage_entry is not None:
        usage = {**usage, fact_id: usage_entry}
    decision = select(policy, facts, capacity, usage=usage, now=now, params=params)
    return fact_id in decision.kept_ids


def at_clock(now: _dt.datetime, days: int = 0) -> str:
    moment = now.astimezone(_dt.UTC) - _dt.timedelta(days=days)
    return moment.isoformat().replace("+00:00", "Z")


def assert_counterfactuals_are_minimal(policy, facts, capacity, usage, now=CLOCK, params=None):
    explanation = explain(facts, capacity, policy=policy, usage=usage, now=now, params=params)
    for item in explanation.facts:
        rerun = functools.partial(
            kept_after, policy, facts, capacity, usage, now, params, item.fact_id
        )
        if item.kept:
            assert item.min_confidence is None
            assert item.confirm_within_days is None and item.min_access_heat is None
        else:
            assert_minimal_changes(item, rerun, now, hybrid=policy == "hybrid-v1", fact=facts[item.position])
    return explanation


def assert_minimal_changes(item, rerun, now, *, hybrid, fact=None):
    """The change keeps the fact; one step less (or the largest change, for None) does not."""
    if item.min_confidence is None:
        assert not rerun(fact_change={"confidence": 1.0})
    else:
        assert rerun(fact_change={"confidence": item.min_confidence})
        assert not rerun(fact_change={"confidence": item.min_confidence - 1e-9})
    if not hybrid:
        assert item.confirm_within_days is None and item.min_access_heat is None
        return
    days = item.confirm_within_days
    limit = confirmation_limit(fact or {}, now)
    if limit is None:
        assert days is None  # created after the clock: no confirmation can be dated
    elif days is None:
        assert not rerun(fact_change={"lastConfirmedAt": at_clock(now)})
    else:
        assert rerun(fact_change={"lastConfirmedAt": at_clock(now, days)})
        if days < limit:  # one day earlier is still a date the fact existed at
            assert not rerun(fact_change={"lastConfirmedAt": at_clock(now, days + 1)})
    heat = item.min_access_heat
    if heat is None:
        assert not rerun(usage_entry={"accessHeat": 8, "lastAccessedAt": at_clock(now)})
    else:
        assert rerun(usage_entry={"accessHeat": heat, "lastAccessedAt": at_clock(now)})
        assert not rerun(usage_entry={"accessHeat": heat - 1, "lastAccessedAt": at_clock(now)})


def assert_cut_line(explanation):
    facts = explanation.facts
    assert [item.rank for item in facts] == list(range(1, len(facts) + 1))
    kept = {item.fact_id for item in facts if item.kept}
    assert sum(item.reserved for item in facts) == explanation.reserved_slots
    assert all(item.kept for item in facts if item.reserved)
    for item in facts:
        if item.kept:
            assert item.displaced_by is None
            if not item.reserved and item.margin is not None:
                assert item.margin >= 0
        elif item.displaced_by is not None:
            assert item.displaced_by in kept and item.margin <= 0


# --- acceptance: the suggested minimal change keeps the fact, one step less does not -----------


@pytest.mark.parametrize("policy", ["confidence", "hybrid-v1"])
@settings(max_examples=40, deadline=None)
@given(pool=pools(), capacity=st.integers(0, 11))
def test_minimal_changes_on_deermem_shaped_pools(policy, pool, capacity):
    facts, usage, _ = pool
    assert_cut_line(assert_counterfactuals_are_minimal(policy, facts, capacity, usage))


@settings(max_examples=40, deadline=None)
@given(
    snapshot=snapshots(unique_ids=True, min_size=1),
    capacity=st.integers(0, 14),
    now=clocks(),
    params=policy_params(),
)
def test_minimal_changes_survive_malformed_fields_and_any_parameters(
    snapshot, capacity, now, params
):
    facts, usage = snapshot
    assert_cut_line(
        assert_counterfactuals_are_minimal("hybrid-v1", facts, capacity, usage, now, params)
    )


# --- the spec 1.11 vectors ---------------------------------------------------------------------


def test_confidence_vector_and_the_position_tie_break():
    facts = [
        {"id": "low", "confidence": 0.6},
        {"id": "high", "confidence": 0.9},
        {"id": "mid", "confidence": 0.7},
    ]
    explanation = assert_counterfactuals_are_minimal("confidence", facts, 2, {})
    low = explanation.fact("low")
    assert (low.rank, low.kept, low.displaced_by) == (3, False, "mid")
    assert low.margin == pytest.approx(-0.1)
    # low sits before mid in the input, so equal confidence 0.7 already wins the tie.
    assert low.min_confidence == 0.7
    assert explanation.fact("mid").margin == pytest.approx(0.1)
    assert explanation.counterfactual_signals == ("confidence",)
    swapped = explain([facts[2], facts[1], facts[0]], 2, policy="confidence")
    assert swapped.fact("low").min_confidence == 0.7000000000000001  # now it must beat mid


def test_hybrid_stale_high_vector():
    facts = [
        {"id": "stale_high", "confidence": 0.9, "createdAt": "2026-02-14T00:00:00Z"},
        {
            "id": "recent_confirmed",
            "confidence": 0.7,
            "createdAt": "2026-01-01T00:00:00Z",
            "lastConfirmedAt": "2026-08-06T00:00:00Z",
        },
    ]
    explanation = assert_counterfactuals_are_minimal("hybrid-v1", facts, 1, {})
    stale = explanation.fact("stale_high")
    assert stale.displaced_by == "recent_confirmed"
    assert stale.components["confirmationFreshness"] == 0.125
    # 0.65c + 0.25 * 0.125 > 0.455 + 0.25 * 2^(-7/90) needs c > 1.016: impossible.
    assert stale.min_confidence is None
    # 0.585 + 0.25 * 2^(-d/90) > 0.69188 holds up to d = 110.
    assert stale.confirm_within_days == 110
    # 0.61625 + 0.1 * log1p(h) / ln 9 > 0.69188 needs h >= 5.
    assert stale.min_access_heat == 5
    text = explanation.render()
    assert "displaced by recent_confirmed" in text
    assert "no confidence keeps it" in text
    assert "kept if confirmed within 110 days" in text
    assert "kept if access heat >= 5" in text


def test_hybrid_recalled_vector():
    facts = [
        {"id": "recalled", "confidence": 0.7},
        {"id": "unused", "confidence": 0.75},
    ]
    usage = {"recalled": {"accessHeat": 100000, "accessCount": 1, "lastAccessedAt": days_before(0)}}
    explanation = assert_counterfactuals_are_minimal("hybrid-v1", facts, 1, usage)
    unused = explanation.fact("unused")
    assert explanation.fact("recalled").components["accessHeat"] == 1.0
    # 0.4875 + 0.1 * log1p(h) / ln 9 > 0.555 from h = 4;
    # 0.4875 + 0.25 * 2^(-d/90) > 0.555 up to d = 170.
    assert (unused.min_access_heat, unused.confirm_within_days) == (4, 170)
    assert unused.min_confidence is not None and 0.85 < unused.min_confidence < 0.86  # 0.555 / 0.65


def test_hybrid_reserved_correction_vector():
    facts = [
        {"id": f"pref_{index}", "category": "preference", "confidence": 0.99 - index / 100}
        for index in range(10)
    ]
    facts.append({"id": "fix", "category": "correction", "confidence": 0.1})
    explanation = assert_counterfactuals_are_minimal("hybrid-v1", facts, 10, {})
    assert explanation.reserved_slots == 1
    fix = explanation.fact("fix")
    assert (fix.kept, fix.reserved, fix.rank) == (True, True, 11)
    evicted = explanation.fact("pref_9")
    assert evicted.displaced_by == "pref_8"  # the lowest kept fact holding no reserved slot
    assert evicted.margin == pytest.approx(-0.65 * 0.01)
    assert_cut_line(explanation)


def test_a_correction_may_take_the_place_of_a_reserved_correction():
    facts = [
        {"id": "fix_high", "category": "correction", "confidence": 0.5},
        {"id": "other", "category": "context", "confidence": 0.9},
        {"id": "fix_low", "category": "correction", "confidence": 0.2},
    ]
    explanation = assert_counterfactuals_are_minimal("hybrid-v1", facts, 1, {})
    assert explanation.fact("fix_high").reserved
    assert explanation.fact("fix_low").displaced_by == "fix_high"
    assert explanation.fact("other").displaced_by is None  # only the reserved slot exists
    assert explanation.fact("other").min_confidence is None


# --- other policies, frames, errors --------------------------------------------------------


def test_other_policies_get_rank_margin_and_displacer_but_no_counterfactual():
    facts = [
        {"id": "a", "createdAt": days_before(1), "content": "green tea"},
        {"id": "b", "createdAt": days_before(2), "content": "green tea"},
        {"id": "c", "createdAt": days_before(3), "content": "shanghai"},
    ]
    explanation = explain(facts, 2, policy="fifo", now=CLOCK)
    assert explanation.counterfactual_signals == ()
    c = explanation.fact("c")
    assert (c.rank, c.kept, c.displaced_by, c.margin) == (3, False, "b", -1.0)
    assert c.min_confidence is None
    modified = explain(facts, 2, policy="fifo+mmr(5)", now=CLOCK)
    assert modified.policy == "fifo+mmr(5.0)"
    assert modified.fact("b").kept is False and modified.fact("b").displaced_by == "c"


def test_to_frame_has_one_row_per_fact_with_components():
    facts = [
        {"id": f"f{index}", "confidence": 0.5 + index / 20, "createdAt": days_before(index)}
        for index in range(5)
    ]
    frame = explain(facts, 3, now=CLOCK).to_frame()
    assert list(frame["fact_id"]) == ["f4", "f3", "f2", "f1", "f0"]
    assert list(frame["rank"]) == [1, 2, 3, 4, 5]
    assert list(frame["status"]) == ["kept", "kept", "kept", "evicted", "evicted"]
    assert list(frame.columns[:12]) == [
        "fact_id", "position", "rank", "kept", "reserved", "status", "score", "margin", "displaced_by",
        "min_confidence", "confirm_within_days", "min_access_heat",
    ]  # fmt: skip
    assert {"confidence", "confirmationFreshness", "accessHeat"} <= set(frame.columns)
    assert str(frame["confirm_within_days"].dtype) == "Int64"
    assert frame["confirm_within_days"].isna().tolist() == [True, True, True, False, False]


def test_under_capacity_nothing_is_evicted_and_margins_are_none():
    facts = [{"id": "a"}, {"id": "b"}]
    explanation = explain(facts, 2, now=CLOCK)
    assert all(item.kept and item.margin is None for item in explanation.facts)
    assert "why evicted" not in explanation.render()


def test_duplicate_ids_and_bad_capacity_are_refused():
    with pytest.raises(ContractError):
        explain([{"id": "a"}, {"id": "a"}], 1)
    with pytest.raises(ContractError):
        explain([{"id": "a"}], -1)


def test_a_confirmation_is_never_dated_before_the_fact_existed():
    from evictlab.workbench import loaders

    pool_set = loaders.load_pool_set()
    now = pool_set.protocol.evaluation_time
    checked = capped = 0
    for case in pool_set.cases[::3]:
        for capacity in (5, 7):
            explanation = explain(case.facts, capacity, policy="hybrid-v1", usage=case.usage, now=now)
            for item in explanation.facts:
                if item.confirm_within_days is None:
                    continue
                created = _dt.datetime.fromisoformat(case.facts[item.position]["createdAt"].replace("Z", "+00:00"))
                age = (now - created) // _dt.timedelta(days=1)
                assert item.confirm_within_days <= age, (case.case_id, item.fact_id)
                checked += 1
                capped += item.confirm_within_days == age
    assert checked and capped  # some facts would be kept by any confirmation since their creation
    future = {"id": "late", "confidence": 0.1, "createdAt": at_clock(CLOCK, -3)}
    assert confirmation_limit(future, CLOCK) is None and confirmation_limit({}, CLOCK) > 700_000
    assert confirmation_limit({"createdAt": at_clock(CLOCK, 10)}, CLOCK) == 10
