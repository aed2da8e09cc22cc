"""Spec 1.5 to 1.7: audit events, the audit file, usage heat and metadata cleanup."""

from __future__ import annotations

import copy
import datetime as _dt
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import moments, usage_entries

from evictlab.errors import ContractError
from evictlab.policies.signals import access_heat
from evictlab.selection.audit import (
    append_audit_event,
    audit_event,
    audit_path,
    clear_audit_metadata,
    clear_usage_metadata,
    read_audit_events,
    read_usage,
    shadow_comparison,
    update_usage,
    usage_path,
    write_usage,
)
from evictlab.selection.deermem import select_facts_for_capacity
from evictlab.times import iso_z

UTC = _dt.UTC
CLOCK = _dt.datetime(2026, 8, 13, tzinfo=UTC)
SECRET = "Der Nutzer wohnt in Zürich — 秘密の住所"


def fact(fact_id, confidence, **fields):
    return {"id": fact_id, "content": f"{SECRET} ({fact_id})", "confidence": confidence, **fields}


def decision_for(policy, facts, max_facts, usage=None):
    return select_facts_for_capacity(
        facts, max_facts=max_facts, policy=policy, usage=usage, now=CLOCK
    )


def sample_decision(policy="hybrid-v1"):
    facts = [
        fact("keep", 0.9),
        fact("drop_low", 0.2, category="Preference"),
        fact("fix", 0.1, category="correction"),
        fact("drop_mid", 0.4),
    ]
    return decision_for(policy, facts, 2)


# --- timestamps -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (CLOCK, "2026-08-13T00:00:00Z"),
        (
            _dt.datetime(2026, 8, 13, 8, tzinfo=_dt.timezone(_dt.timedelta(hours=8))),
            "2026-08-13T00:00:00Z",
        ),
        (_dt.datetime(2026, 8, 13), "2026-08-13T00:00:00Z"),  # naive = UTC
        (_dt.datetime(2026, 8, 13, 1, 2, 3, 4500, tzinfo=UTC), "2026-08-13T01:02:03.004500Z"),
    ],
)
def test_audit_timestamp(moment, text):
    assert iso_z(moment) == text


# --- events ---------------------------------------------------------------------------------


def test_event_fields_and_order():
    decision = sample_decision()
    event = audit_event(
        decision, max_facts=2, occurred_at=_dt.datetime(2026, 8, 13, 0, 0, 0, 120, tzinfo=UTC)
    )
    assert list(event) == [
        "occurredAt",
        "reason",
        "policyVersion",
        "maxFacts",
        "reservedCorrectionSlots",
        "evicted",
    ]
    assert event["occurredAt"] == "2026-08-13T00:00:00.000120Z"
    assert (event["reason"], event["policyVersion"], event["maxFacts"]) == (
        "capacity",
        "hybrid-v1",
        2,
    )
    assert event["reservedCorrectionSlots"] == 1
    assert [item["factId"] for item in event["evicted"]] == ["drop_low", "drop_mid"]
    first = event["evicted"][0]
    assert list(first) == ["factId", "category", "score", "components"]
    assert first["category"] == "Preference"
    assert first["score"] == decision.scores["drop_low"].value
    assert first["components"] == decision.scores["drop_low"].components
    first["components"]["confidence"] = 5.0
    assert decision.scores["drop_low"].components["confidence"] == 0.2


def test_no_event_when_nothing_was_evicted():
    decision = decision_for("confidence", [fact("a", 0.5)], 10)
    assert audit_event(decision, max_facts=10, occurred_at=CLOCK) is None


def test_occurred_at_defaults_to_now():
    event = audit_event(sample_decision(), max_facts=2)
    stamp = _dt.datetime.fromisoformat(event["occurredAt"].replace("Z", "+00:00"))
    assert event["occurredAt"].endswith("Z")
    assert abs((_dt.datetime.now(UTC) - stamp).total_seconds()) < 3600


def test_shadow_comparison_sorts_and_compares_as_sets():
    facts = [
        fact("b", 0.1, lastConfirmedAt="2026-08-13T00:00:00Z"),
        fact("z", 0.2),
        fact("c", 0.9),
        fact("d", 0.8),
    ]
    actual = decision_for("confidence", facts, 2)
    same_set = decision_for("hybrid-v1", facts, 2)
    # The same two facts, evicted in a different order: no disagreement.
    assert [item.fact_id for item in actual.evicted] == ["b", "z"]
    assert [item.fact_id for item in same_set.evicted] == ["z", "b"]
    assert shadow_comparison(actual, same_set) == {
        "policyVersion": "hybrid-v1",
        "wouldEvict": ["b", "z"],
        "disagrees": False,
    }
    other = decision_for("hybrid-v1", facts, 3)
    assert shadow_comparison(actual, other) == {
        "policyVersion": "hybrid-v1",
        "wouldEvict": ["z"],
        "disagrees": True,
    }
    event = audit_event(actual, max_facts=2, occurred_at=CLOCK, shadow=other)
    assert event["shadow"]["disagrees"] is True
    assert list(event)[-1] == "shadow"


# --- the audit file -------------------------------------------------------------------------


def event_with(fact_id, stamp=CLOCK):
    decision = decision_for("confidence", [fact("keep", 0.9), fact(fact_id, 0.1)], 1)
    return audit_event(decision, max_facts=1, occurred_at=stamp)


def test_sidecar_paths():
    assert audit_path("/m", "Coder") == Path("/m/agents/coder/.metadata/eviction-audit.json")
    assert usage_path("/m", "Coder") == Path("/m/agents/coder/.metadata/fact-usage.json")


def test_append_writes_a_json_array_without_content(tmp_path):
    path = audit_path(tmp_path, "Agent")
    facts = [fact("keep", 0.9), fact("zürich_fact", 0.1, category="Ortsangabe—ü")]
    event = audit_event(decision_for("confidence", facts, 1), max_facts=1, occurred_at=CLOCK)
    stored = append_audit_event(path, event)
    assert stored == [event]
    text = path.read_text(encoding="utf-8")
    assert json.loads(text) == [event]
    assert text == json.dumps([event], indent=2, ensure_ascii=False) + "\n"
    assert "zürich_fact" in text and "Ortsangabe—ü" in text  # non-ASCII kept raw
    assert '\n  {\n    "occurredAt"' in text  # 2-space indent
    assert SECRET not in text and "Zürich" not in text and "秘密" not in text


def test_append_keeps_the_last_entries(tmp_path):
    path = tmp_path / "audit.json"
    for index in range(5):
        append_audit_event(path, event_with(f"f{index}"), max_entries=3)
    ids = [event["evicted"][0]["factId"] for event in read_audit_events(path)]
    assert ids == ["f2", "f3", "f4"]
    append_audit_event(path, event_with("f5"), max_entries=1)
    assert [event["evicted"][0]["factId"] for event in read_audit_events(path)] == ["f5"]


def test_default_retention_is_200(tmp_path):
    path = tmp_path / "audit.json"
    path.write_text(json.dumps([{"n": index} for index in range(200)]), encoding="utf-8")
    stored = append_audit_event(path, event_with("new"))
    assert len(stored) == 200
    assert stored[0] == {"n": 1}
    assert stored[-1]["evicted"][0]["factId"] == "new"


def test_zero_retention_or_no_event_writes_nothing(tmp_path):
    path = tmp_path / "audit.json"
    assert append_audit_event(path, event_with("a"), max_entries=0) is None
    assert append_audit_event(path, None) is None
    assert append_audit_event(path, {"evicted": []}) is None
    assert not path.exists()
    path.write_text("[]", encoding="utf-8")
    append_audit_event(path, event_with("a"), max_entries=0)
    assert path.read_text(encoding="utf-8") == "[]"


@pytest.mark.parametrize("bad", [-1, 2.5, True, "200"])
def test_retention_must_be_a_count(tmp_path, bad):
    with pytest.raises(ContractError, match="max_entries"):
        append_audit_event(tmp_path / "audit.json", event_with("a"), max_entries=bad)


@pytest.mark.parametrize(
    "existing",
    ['{"events": []}', "not json", "", '"text"', "42", b"\xff\xfe\x00garbage"],
)
def test_an_unreadable_or_non_array_file_is_treated_as_empty(tmp_path, existing):
    path = tmp_path / "audit.json"
    if isinstance(existing, bytes):
        path.write_bytes(existing)
    else:
        path.write_text(existing, encoding="utf-8")
    assert read_audit_events(path) == []
    event = event_with("a")
    assert append_audit_event(path, event) == [event]
    assert json.loads(path.read_text(encoding="utf-8")) == [event]


def test_append_does_not_change_the_event(tmp_path):
    event = event_with("a")
    before = copy.deepcopy(event)
    stored = append_audit_event(tmp_path / "audit.json", event)
    stored[0]["evicted"].clear()
    assert event == before


# --- usage heat -----------------------------------------------------------------------------


def test_usage_vector_of_the_spec():
    first = update_usage({}, ["f"], accessed_at=_dt.datetime(2026, 8, 1, tzinfo=UTC))
    assert first == {
        "f": {"accessHeat": 1.0, "accessCount": 1, "lastAccessedAt": "2026-08-01T00:00:00Z"}
    }
    second = update_usage(
        first, ["f"], accessed_at=_dt.datetime(2026, 8, 31, tzinfo=UTC), access_half_life_days=30
    )
    assert second == {
        "f": {"accessHeat": 1.5, "accessCount": 2, "lastAccessedAt": "2026-08-31T00:00:00Z"}
    }
    assert list(second["f"]) == ["accessHeat", "accessCount", "lastAccessedAt"]
    assert first["f"]["accessHeat"] == 1.0  # the input map is untouched


def test_scoring_decays_again_from_the_last_access():
    usage = update_usage({}, ["f"], accessed_at=_dt.datetime(2026, 8, 1, tzinfo=UTC))
    usage = update_usage(usage, ["f"], accessed_at=_dt.datetime(2026, 8, 31, tzinfo=UTC))
    # 1.5 at the last access, halved by 30 more days: log1p(0.75) / ln(9).
    heat = access_heat(usage["f"], _dt.datetime(2026, 9, 30, tzinfo=UTC), 30)
    assert heat == math.log1p(1.5 * 0.5) / math.log(9)


def test_returned_ids_are_deduplicated_filtered_and_stringified():
    usage = update_usage(
        {}, ["a", "", "b", "a", None, 7, 0, "gone"], accessed_at=CLOCK, existing_ids=["a", "b", "7"]
    )
    assert list(usage) == ["a", "b", "7"]
    assert all(entry["accessCount"] == 1 and entry["accessHeat"] == 1.0 for entry in usage.values())


def test_other_entries_are_carried_over_unchanged():
    previous = {
        "other": {"accessHeat": 3.0, "accessCount": 3, "lastAccessedAt": "2026-01-01T00:00:00Z"},
        "odd": "x",
    }
    usage = update_usage(previous, ["new"], accessed_at=CLOCK)
    assert usage["other"] == previous["other"] and usage["odd"] == "x"
    assert usage["other"] is not previous["other"]


@pytest.mark.parametrize(
    ("previous", "heat", "count"),
    [
        ({"accessHeat": 4.0, "accessCount": 5, "lastAccessedAt": "2026-07-14T00:00:00Z"}, 3.0, 6),
        (
            {"accessHeat": 4.0, "accessCount": 5, "lastAccessedAt": "2026-07-14T08:00:00+08:00"},
            3.0,
            6,
        ),
        (
            {"accessHeat": 4.0, "accessCount": 5, "lastAccessedAt": "2027-01-01T00:00:00Z"},
            5.0,
            6,
        ),  # clamped
        ({"accessHeat": 4.0, "accessCount": 5}, 1.0, 6),  # no timestamp: heat reset
        ({"accessHeat": 4.0, "accessCount": 5, "lastAccessedAt": "garbage"}, 1.0, 6),
        ({"accessHeat": "x", "accessCount": 0, "lastAccessedAt": "2026-08-13T00:00:00Z"}, 1.0, 1),
        (
            {"accessHeat": math.nan, "accessCount": -1, "lastAccessedAt": "2026-08-13T00:00:00Z"},
            1.0,
            1,
        ),
        (
            {"accessHeat": math.inf, "accessCount": True, "lastAccessedAt": "2026-08-13T00:00:00Z"},
            1.0,
            1,
        ),
        (
            {"accessHeat": -3.0, "accessCount": "3", "lastAccessedAt": "2026-08-13T00:00:00Z"},
            1.0,
            1,
        ),
        (
            {"accessHeat": True, "accessCount": 2.0, "lastAccessedAt": "2026-08-13T00:00:00Z"},
            1.0,
            1,
        ),
        ({"accessHeat": 2, "accessCount": 2, "lastAccessedAt": "2026-08-13T00:00:00Z"}, 3.0, 3),
        ("not an entry", 1.0, 1),
        (None, 1.0, 1),
    ],
)
def test_previous_entry_rules(previous, heat, count):
    usage = update_usage({"f": previous}, ["f"], accessed_at=CLOCK, access_half_life_days=30)
    assert usage["f"] == {
        "accessHeat": heat,
        "accessCount": count,
        "lastAccessedAt": "2026-08-13T00:00:00Z",
    }


def test_a_non_mapping_usage_root_reads_as_empty():
    assert update_usage(["junk"], ["f"], accessed_at=CLOCK) == {
        "f": {"accessHeat": 1.0, "accessCount": 1, "lastAccessedAt": "2026-08-13T00:00:00Z"}
    }


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), usage_entries(), max_size=3),
    st.lists(st.sampled_from(["a", "b", "c", "", "d"]), max_size=6),
    moments(),
)
def test_update_usage_properties(usage, returned, accessed_at):
    before = repr(usage)
    updated = update_usage(usage, returned, accessed_at=accessed_at)
    assert repr(usage) == before
    touched = {fact_id for fact_id in returned if fact_id}
    assert set(updated) == set(usage) | touched
    for fact_id in touched:
        entry = updated[fact_id]
        assert entry["accessHeat"] >= 1.0 and math.isfinite(entry["accessHeat"])
        assert type(entry["accessCount"]) is int and entry["accessCount"] >= 1
        assert entry["lastAccessedAt"] == iso_z(accessed_at)


def test_usage_file_round_trip(tmp_path):
    path = usage_path(tmp_path, "A")
    usage = update_usage({}, ["事实"], accessed_at=CLOCK)
    write_usage(path, usage)
    assert read_usage(path) == usage
    assert "事实" in path.read_text(encoding="utf-8")
    path.write_text("[1, 2]", encoding="utf-8")
    assert read_usage(path) == {}
    assert read_usage(tmp_path / "missing.json") == {}


# --- cleanup for deleted facts --------------------------------------------------------------


def test_clear_usage_metadata():
    usage = {"a": {"accessHeat": 1.0}, "b": {"accessHeat": 2.0}}
    assert clear_usage_metadata(usage, ["a", "zzz"]) == {"b": {"accessHeat": 2.0}}
    assert clear_usage_metadata(usage, ["a", "b"]) == {}
    assert set(usage) == {"a", "b"}


def test_clear_audit_metadata():
    events = [
        {
            "occurredAt": "2026-08-13T00:00:00Z",
            "reason": "capacity",
            "evicted": [{"factId": "a"}, {"factId": "b"}, "junk", {"factId": 3}],
            "shadow": {"policyVersion": "hybrid-v1", "wouldEvict": ["b", "c"], "disagrees": True},
        },
        {"evicted": [{"factId": "a"}], "shadow": {"wouldEvict": []}},  # left empty: dropped
        {
            "evicted": [{"factId": "c"}],
            "shadow": {"policyVersion": "hybrid-v1", "wouldEvict": ["a", "c"], "disagrees": True},
        },
        {"evicted": [{"factId": "d"}], "shadow": "broken"},
        {"evicted": [{"factId": "e"}], "shadow": {"wouldEvict": "e"}},
        "not an event",
        {"evicted": "nothing"},
    ]
    before = copy.deepcopy(events)
    cleared = clear_audit_metadata(events, ["a"])
    assert cleared == [
        {
            "occurredAt": "2026-08-13T00:00:00Z",
            "reason": "capacity",
            "evicted": [{"factId": "b"}],
            "shadow": {"policyVersion": "hybrid-v1", "wouldEvict": ["b", "c"], "disagrees": True},
        },
        {
            "evicted": [{"factId": "c"}],
            "shadow": {"policyVersion": "hybrid-v1", "wouldEvict": ["c"], "disagrees": False},
        },
        {"evicted": [{"factId": "d"}]},
        {"evicted": [{"factId": "e"}]},
    ]
    assert events == before
    assert clear_audit_metadata(events, ["a", "b", "c", "d", "e"]) == []
