"""The DeerMem-compatible entry point where production is odd (spec 0.5, 1.2 to 1.4).

``evictlab.selection.deermem.select_facts_for_capacity`` must behave as production does for every
input: a naive ``now`` is local time, an unknown policy with nothing to score decides
nothing, a negative reservation follows Python's slice semantics, and ``OverflowError`` /
``AttributeError`` are raised exactly where production raises them. The property at the end
compares it with a plain restatement of the spec written in this file. evictlab's own API
keeps refusing such input with its own errors.
"""

from __future__ import annotations

import datetime as _dt
import math
import time
from collections import OrderedDict, defaultdict
from types import MappingProxyType, SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import clocks, naive_clocks, policy_params, snapshots

from evictlab.errors import ContractError, UnknownPolicyError
from evictlab.policies import PolicyParams, select
from evictlab.selection.deermem import select_facts_for_capacity
from evictlab.selection.engine import PreparedCases

UTC = _dt.UTC
CLOCK = _dt.datetime(2026, 8, 13, tzinfo=UTC)
OUT_OF_RANGE = "0001-01-01T00:00:00+05:00"  # parses, but lies before year 1 in UTC


def plain(fact_id, confidence, **fields):
    return {"id": fact_id, "content": f"text of {fact_id}", "confidence": confidence, **fields}


def run(facts, max_facts, policy="hybrid-v1", **options):
    options.setdefault("now", CLOCK)
    return select_facts_for_capacity(facts, max_facts=max_facts, policy=policy, **options)


def ids(facts):
    return [item["id"] for item in facts]


# --- a naive now is the host's local time -------------------------------------------------------


@pytest.fixture
def host_zone(monkeypatch):
    """Set the process's local zone (POSIX TZ) for one test; restored afterwards."""

    def set_zone(name):
        monkeypatch.setenv("TZ", name)
        time.tzset()

    yield set_zone
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(
    ("zone", "offset_hours"),
    [("CST-8", 8), ("EST+5", -5)],  # POSIX signs: CST-8 is UTC+8, EST+5 is UTC-5
)
def test_a_naive_now_is_read_as_local_time(host_zone, zone, offset_hours):
    host_zone(zone)
    facts = [plain("a", 0.7, lastConfirmedAt="2026-08-13T00:00:00Z"), plain("b", 0.7, createdAt="2026-08-12T20:00:00Z")]
    naive = run(facts, 1, now=_dt.datetime(2026, 8, 13))
    local = run(facts, 1, now=_dt.datetime(2026, 8, 13, tzinfo=_dt.timezone(_dt.timedelta(hours=offset_hours))))
    as_utc = run(facts, 1, now=CLOCK)
    assert naive == local
    assert naive.scores != as_utc.scores
    # Local midnight at UTC+8 is 16:00 UTC the day before: the confirmation lies in the future.
    freshness = naive.scores["a"].components["confirmationFreshness"]
    assert (freshness == 1.0) is (offset_hours > 0)


def test_evictlab_api_refuses_a_naive_now():
    facts = [plain("a", 0.7), plain("b", 0.6)]
    with pytest.raises(ContractError, match="now must be a timezone-aware datetime"):
        select("hybrid-v1", facts, 1, now=_dt.datetime(2026, 8, 13))
    with pytest.raises(ContractError, match="now must be a timezone-aware datetime"):
        PreparedCases([SimpleNamespace(case_id="x", facts=facts, usage={}, support_fact_ids=("a",))],
                      _dt.datetime(2026, 8, 13))


# --- unknown policies -------------------------------------------------------------------------


def test_an_unknown_policy_with_an_empty_snapshot_decides_nothing():
    decision = run([], 10, "hybrid-v2")
    assert (decision.kept, decision.evicted, decision.scores) == ([], [], {})
    assert (decision.policy, decision.reserved_correction_slots) == ("hybrid-v2", 0)
    assert run([], -3, "anything").kept == []
    with pytest.raises(UnknownPolicyError, match="unknown policy 'hybrid-v2'"):
        select("hybrid-v2", [], 10, now=CLOCK)  # evictlab's own API knows no such policy


@pytest.mark.parametrize("max_facts", [0, 1, 10])
def test_an_unknown_policy_raises_while_scoring_even_under_the_cap(max_facts):
    with pytest.raises(UnknownPolicyError, match="Unknown fact eviction policy: 'hybrid-v2'") as raised:
        run([plain("a", 0.5)], max_facts, "hybrid-v2")
    assert isinstance(raised.value, ValueError)
    assert "confidence" in str(raised.value) and "hybrid-v1" in str(raised.value)


# --- negative reservation arguments -----------------------------------------------------------


def spec_example():
    return [
        plain("p", 0.95),
        plain("c1", 0.2, category="correction"),
        plain("c2", 0.1, category="correction"),
        plain("c3", 0.05, category="correction"),
    ]


def test_a_negative_reservation_maximum_follows_python_slices():
    # Spec 1.4: slots -1, reserved min(-1, 3, 2) = -1, so the pre-selection takes every
    # correction but the last; the cap of 2 is then already reached.
    decision = run(spec_example(), 2, "hybrid-v1", correction_reserved_max=-1)
    assert ids(decision.kept) == ["c1", "c2"]
    assert decision.reserved_correction_slots == -1
    assert [item.fact_id for item in decision.evicted] == ["c3", "p"]
    # With more room the walk adds the best remaining facts after the pre-selection.
    assert ids(run(spec_example(), 3, "hybrid-v1", correction_reserved_max=-1).kept) == ["p", "c1", "c2"]
    # A pre-selection larger than the cap is kept whole, as production keeps it.
    assert ids(run(spec_example(), 1, "hybrid-v1", correction_reserved_max=-1).kept) == ["c1", "c2"]


def test_a_negative_fraction_gives_a_negative_count_too():
    decision = run(spec_example(), 2, "hybrid-v1", correction_reserved_fraction=-1.0)
    assert decision.reserved_correction_slots == -2  # min(10, ceil(-2.0), 3, 2)
    assert ids(decision.kept) == ["p", "c1"]


def test_evictlab_api_refuses_negative_reservation_parameters():
    with pytest.raises(ContractError, match="correction_reserved_max must be an integer >= 0"):
        select("hybrid-v1", spec_example(), 2, now=CLOCK, params=PolicyParams(correction_reserved_max=-1))
    with pytest.raises(ContractError, match=r"correction_reserved_fraction must be in \[0, 1\]"):
        PolicyParams(correction_reserved_fraction=-1.0)


# --- production's exceptions ------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["confidence", "hybrid-v1"])
@pytest.mark.parametrize("max_facts", [0, 5])  # scores are computed under the cap too
def test_an_integer_confidence_beyond_doubles_overflows(policy, max_facts):
    with pytest.raises(OverflowError):
        run([plain("a", 0.5), plain("b", 10**400)], max_facts, policy)
    # evictlab's own API reads it by the fallback instead.
    assert select(policy, [plain("b", 10**400)], 1, now=CLOCK).scores["b"].components["confidence"] == 0.5
    # A string that overflows reads as infinity, so 0.5 (spec 0.6).
    assert run([plain("b", "1e400")], 1, policy).scores["b"].value == (0.5 if policy == "confidence" else 0.65 * 0.5)


@pytest.mark.parametrize(
    ("fields", "usage_entry"),
    [
        ({"createdAt": OUT_OF_RANGE}, None),
        ({"lastConfirmedAt": "9999-12-31T23:00:00-05:00"}, None),
        ({}, {"accessHeat": 0, "lastAccessedAt": OUT_OF_RANGE}),  # read before the heat is checked
    ],
)
def test_a_timestamp_outside_the_utc_range_overflows_under_hybrid(fields, usage_entry):
    facts = [plain("a", 0.5, **fields)]
    usage = {"a": usage_entry} if usage_entry else {}
    with pytest.raises(OverflowError):
        run(facts, 1, "hybrid-v1", usage=usage)
    assert run(facts, 1, "confidence", usage=usage).kept == facts  # the confidence policy reads no time
    assert select("hybrid-v1", facts, 1, usage=usage, now=CLOCK).scores["a"].components["accessHeat"] == 0.0


def test_a_timestamp_production_does_not_read_does_not_overflow():
    confirmed = plain("a", 0.5, lastConfirmedAt="2026-08-06T00:00:00Z", createdAt=OUT_OF_RANGE)
    assert run([confirmed], 1).scores["a"].components["confirmationFreshness"] == 2 ** (-7 / 90)
    unused_entry = {"a": ["not", "a", "mapping"], "orphan": {"accessHeat": 1, "lastAccessedAt": OUT_OF_RANGE}}
    assert run([plain("a", 0.5)], 1, usage=unused_entry).scores["a"].components["accessHeat"] == 0.0


@pytest.mark.parametrize("policy", ["confidence", "hybrid-v1"])
@pytest.mark.parametrize("odd", [None, ["id", "a"], "a fact", 7])
def test_a_fact_that_is_not_a_mapping_raises_attribute_error(policy, odd):
    with pytest.raises(AttributeError):
        run([plain("a", 0.5), odd], 10, policy)


@pytest.mark.parametrize("policy", ["confidence", "hybrid-v1"])
def test_a_usage_that_is_not_a_mapping_raises_attribute_error(policy):
    with pytest.raises(AttributeError):
        run([plain("a", 0.5)], 10, policy, usage=[{"a": {"accessHeat": 1}}])
    # An empty one reads as no usage, and nothing is looked up in an empty snapshot.
    assert run([plain("a", 0.5)], 10, policy, usage=[]).kept == [plain("a", 0.5)]
    assert run([], 10, policy, usage=["x"]).kept == []


# --- the edges of 2026-12-02 (spec 1.4, end of the section) --------------------------------------


@pytest.mark.parametrize("max_facts", [0, 1, 5])
def test_an_unknown_policy_reads_the_first_confidence_before_the_name(max_facts):
    with pytest.raises(OverflowError):
        run([plain("a", 10**400), plain("b", 0.5)], max_facts, "hybrid-v2")
    # A later fact is never scored: the name is refused at the first one.
    with pytest.raises(UnknownPolicyError, match="Unknown fact eviction policy: 'hybrid-v2'"):
        run([plain("a", 0.5), plain("b", 10**400)], max_facts, "hybrid-v2")
    # Only the confidence is converted before the name: a timestamp out of the UTC range is not.
    with pytest.raises(UnknownPolicyError):
        run([plain("a", 0.5, createdAt=OUT_OF_RANGE)], max_facts, "hybrid-v2")


def test_an_integer_access_heat_beyond_doubles_overflows_under_hybrid():
    facts = [plain("a", 0.5)]
    entry = {"accessHeat": 10**400, "lastAccessedAt": "2026-08-12T00:00:00Z"}
    with pytest.raises(OverflowError):
        run(facts, 1, usage={"a": entry})
    # Not read without a parseable lastAccessedAt, nor under confidence, nor by evictlab's own API.
    assert run(facts, 1, usage={"a": {**entry, "lastAccessedAt": "never"}}).scores["a"].components["accessHeat"] == 0.0
    assert run(facts, 0, "confidence", usage={"a": entry}).evicted[0].fact_id == "a"
    assert select("hybrid-v1", facts, 1, usage={"a": entry}, now=CLOCK).scores["a"].components["accessHeat"] == 0.0


def test_a_usage_entry_is_read_only_when_it_is_a_dict():
    entry = {"accessHeat": 8.0, "lastAccessedAt": "2026-08-13T00:00:00Z"}
    heat = [
        run([plain("a", 0.5)], 1, usage={"a": wrapped}).scores["a"].components["accessHeat"]
        for wrapped in (entry, OrderedDict(entry), defaultdict(int, entry), MappingProxyType(entry))
    ]
    assert heat == [1.0, 1.0, 1.0, 0.0]
    # Nothing of a non-dict entry is read: not its out-of-range time, not its huge heat.
    odd = MappingProxyType({"accessHeat": 10**400, "lastAccessedAt": OUT_OF_RANGE})
    assert run([plain("a", 0.5)], 1, usage={"a": odd}).scores["a"].components["accessHeat"] == 0.0
    # A usage that is itself a read-only mapping is looked up as usual, and a fact may be one.
    fact = MappingProxyType(plain("a", 0.5))
    assert run([fact], 1, usage=MappingProxyType({"a": entry})).scores["a"].components["accessHeat"] == 1.0


# --- the property: production's rules restated, compared on random malformed input ---------------


def spec_time(value):
    """Spec 1.2: a non-empty string, stripped, Z -> +00:00, fromisoformat; naive is UTC."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def spec_float(value):
    """Python's float(), None when unreadable; OverflowError (10**400) is not caught."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def spec_decay(since, now, half_life):
    if half_life <= 0:
        return 0.0
    return 2 ** (-max(0, (now - since).total_seconds() / 86400) / half_life)


def spec_heat(entry, now, half_life):
    if not isinstance(entry, dict):  # spec 1.4's edges: exactly a dict
        return 0.0
    accessed = spec_time(entry.get("lastAccessedAt"))
    if accessed is None:
        return 0.0
    heat = spec_float(entry.get("accessHeat"))  # OverflowError for 10**400 (spec 1.4's edges)
    if heat is None or heat <= 0:
        return 0.0
    return min(1.0, math.log1p(heat * spec_decay(accessed, now, half_life)) / math.log(9))


def spec_score(policy, fact, entry, now, args):
    confidence = spec_float(fact.get("confidence"))
    confidence = 0.5 if confidence is None else min(1.0, max(0.0, confidence))
    if policy == "confidence":
        return confidence, {"confidence": confidence}
    confirmed = spec_time(fact.get("lastConfirmedAt"))
    if confirmed is not None:
        freshness = spec_decay(confirmed, now, args["confirmation_half_life_days"])
    else:
        created = spec_time(fact.get("createdAt"))
        freshness = 0.0 if created is None else 0.5 * spec_decay(created, now, args["confirmation_half_life_days"])
    heat = spec_heat(entry, now, args["access_half_life_days"])
    weights = (args["confidence_weight"], args["confirmation_weight"], args["access_weight"])
    value = weights[0] * confidence + weights[1] * freshness + weights[2] * heat  # left to right
    return value, {"confidence": confidence, "confirmationFreshness": freshness, "accessHeat": heat}


def spec_decide(facts, max_facts, policy, usage, now, args):
    """Spec 1.2 to 1.4, step by step: (kept positions, evicted records, scores, reserved)."""
    now = now.astimezone(UTC)
    usage = usage or {}
    keys, scores = [], {}
    for index, fact in enumerate(facts):
        raw = fact.get("id")
        keys.append(str(raw) if raw else f"__missing_{index}")
        entry = usage.get(keys[-1])
        spec_float(fact.get("confidence"))  # converted before the name is checked
        if policy not in ("confidence", "hybrid-v1"):
            raise ValueError("Unknown fact eviction policy")
        scores[keys[-1]] = spec_score(policy, fact, entry, now, args)
    if len(facts) <= max_facts:
        return list(range(len(facts))), [], scores, 0
    ranked = sorted(range(len(facts)), key=lambda index: (-scores[keys[index]][0], index))
    chosen, reserved = [], 0
    if policy == "hybrid-v1" and max_facts > 0:
        slots = min(args["correction_reserved_max"], math.ceil(max_facts * args["correction_reserved_fraction"]))
        corrections = [i for i in ranked if str(facts[i].get("category", "")).strip().lower() == "correction"]
        reserved = min(slots, len(corrections), max_facts)
        chosen = corrections[:reserved]
    for index in ranked:
        if len(chosen) >= max(0, max_facts):
            break
        if index not in chosen:
            chosen.append(index)
    kept = [index for index in ranked if index in chosen]
    evicted = [
        (keys[i], str(facts[i].get("category") or "context"), scores[keys[i]][0], scores[keys[i]][1])
        for i in reversed(ranked)
        if i not in chosen
    ]
    return kept, evicted, scores, reserved


@st.composite
def production_inputs(draw):
    """Snapshots with malformed fields and ties, some facts or usages not mappings at all,
    unknown policies, any cap and reservation arguments, aware or naive clocks."""
    facts, usage = draw(snapshots())
    facts = list(facts)
    if facts and draw(st.integers(0, 9)) == 0:
        facts.insert(draw(st.integers(0, len(facts))), draw(st.sampled_from([None, "fact", ["id"], 3])))
    usage = draw(st.one_of(st.just(usage), st.just(usage), st.sampled_from([None, [], [usage], "usage", {}])))
    if isinstance(usage, dict) and usage and draw(st.integers(0, 3)) == 0:
        key = draw(st.sampled_from(sorted(usage, key=str)))
        entry = usage[key] if isinstance(usage[key], dict) else {}
        odd = draw(st.sampled_from(["heat", "proxy"]))
        usage = {**usage, key: {**entry, "accessHeat": 10**400} if odd == "heat" else MappingProxyType(entry)}
    if draw(st.integers(0, 4)) == 0:
        position = draw(st.integers(0, max(0, len(facts) - 1)))
        field = draw(st.sampled_from(["confidence", "createdAt", "lastConfirmedAt"]))
        value = draw(st.sampled_from([10**400, OUT_OF_RANGE, "9999-12-31T23:59:59-01:00"]))
        if position < len(facts) and isinstance(facts[position], dict):
            facts[position] = {**facts[position], field: value}
    params = draw(policy_params()).as_dict()
    params["correction_reserved_max"] = draw(st.integers(-3, 12))
    params["correction_reserved_fraction"] = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0, -0.25, 2.0]))
    params["access_half_life_days"] = draw(st.sampled_from([30, 1, 0, -5]))
    return {
        "facts": facts,
        "usage": usage,
        "max_facts": draw(st.integers(-2, 16)),
        "policy": draw(st.sampled_from(["confidence", "hybrid-v1", "hybrid-v1", "lfu"])),
        "now": draw(st.one_of(clocks(), naive_clocks())),
        "args": params,
    }


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(production_inputs())
def test_the_entry_point_follows_the_spec_on_random_malformed_input(case):
    facts, usage, max_facts, policy, now, args = (
        case["facts"], case["usage"], case["max_facts"], case["policy"], case["now"], case["args"],
    )
    try:
        expected = spec_decide(facts, max_facts, policy, usage, now, args)
    except (AttributeError, OverflowError, ValueError) as error:
        with pytest.raises(type(error)):
            select_facts_for_capacity(facts, max_facts=max_facts, policy=policy, usage=usage, now=now, **args)
        return
    decision = select_facts_for_capacity(facts, max_facts=max_facts, policy=policy, usage=usage, now=now, **args)
    kept, evicted, scores, reserved = expected
    positions = {id(fact): index for index, fact in enumerate(facts)}
    assert [positions[id(fact)] for fact in decision.kept] == kept
    assert [(item.fact_id, item.category, item.score, item.components) for item in decision.evicted] == evicted
    assert {key: (score.value, score.components) for key, score in decision.scores.items()} == scores
    assert list(decision.scores) == list(scores)
    assert (decision.policy, decision.reserved_correction_slots) == (policy, reserved)
