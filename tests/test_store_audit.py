"""``evictlab audit``: every event of replayed stores checks, and every tampered eviction is flagged."""

from __future__ import annotations

import copy
import json

import pytest
from store_fixtures import bucket_dir, replayed_store

from evictlab.analysis.store_audit import (
    CANNOT,
    CHECKS,
    CONTRADICTS,
    TOO_CLOSE,
    check_event,
    check_events,
    is_correction,
    shadow_facts,
    shadow_summary,
)
from evictlab.cli import main
from evictlab.core.stores.deermem import read_store
from evictlab.policies import PolicyParams, resolve_policy, selection_context
from evictlab.policies.hybrid import hybrid_value
from evictlab.policies.signals import parse_timestamp

# Both policies with and without shadow mode (under hybrid-v1 the shadow flag adds nothing, spec 1.5).
STORES = [(policy, shadow, seed) for policy in ("confidence", "hybrid-v1") for shadow in (True, False)
          for seed in range(3)]  # fmt: skip


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    found = {}
    for policy, shadow, seed in STORES:
        root = tmp_path_factory.mktemp("store")
        replayed_store(root, policy, shadow=shadow, seed=seed, updates=50)
        found[policy, shadow, seed] = read_store(root)
    return found


def test_every_event_of_a_replayed_store_checks(stores):
    for key, store in stores.items():
        checks = check_events(store)
        assert len(checks) > 30, key
        assert (checks["verdict"] == CHECKS).all(), (key, checks[checks["verdict"] != CHECKS]["reason"].tolist())
        assert checks["reserved"].isin(["reproduced", "consistent"]).all()
    compared = sum(int(check_events(store)["compared"].sum()) for store in stores.values())
    assert compared > 200  # the survivors take part, not only the recorded scores


def usable_survivor(event, bucket, policy):
    """A non-correction survivor the checker compares with, and its score at the event."""
    moment = parse_timestamp(event["occurredAt"])
    for fact in bucket.facts:
        entry = bucket.usage.get(fact["id"])
        if (parse_timestamp(fact["createdAt"]) <= moment and parse_timestamp(fact["updatedAt"]) <= moment
                and not is_correction(fact)
                and (policy == "confidence" or entry is None or parse_timestamp(entry["lastAccessedAt"]) <= moment)):
            context = selection_context(now=moment, usage=bucket.usage, params=PolicyParams())
            return fact, resolve_policy(policy).score([fact], context)[0].value
    return None, None


def tamperings(event, bucket):
    """Every tampering of the event's evictions this test applies: (name, tampered event)."""
    policy = event["policyVersion"]
    moment = parse_timestamp(event["occurredAt"])

    def changed(change):
        copied = copy.deepcopy(event)
        change(copied["evicted"])
        return copied

    def rescore(item):
        values = [item["components"][name] for name in ("confidence", "confirmationFreshness", "accessHeat")
                  if name in item["components"]]  # fmt: skip
        item["score"] = values[0] if policy == "confidence" else hybrid_value(PolicyParams().weights, *values)

    yield "score", changed(lambda items: items[0].update(score=items[0]["score"] + 0.01))
    yield "component", changed(lambda items: items[-1]["components"].update(confidence=items[-1]["components"]
                                                                           ["confidence"] / 2 + 0.001))
    if len({item["score"] for item in event["evicted"]}) > 1:
        yield "order", changed(lambda items: items.reverse())
    present = [fact for fact in bucket.facts if parse_timestamp(fact["createdAt"]) <= moment]
    if present:
        yield "swapped id", changed(lambda items: items[0].update(factId=present[0]["id"]))
    survivor, value = usable_survivor(event, bucket, policy)
    if survivor is not None:
        item = event["evicted"][-1]
        target = value + 10 * TOO_CLOSE
        if policy == "hybrid-v1":
            rest = hybrid_value(PolicyParams().weights, 0.0, item["components"]["confirmationFreshness"],
                                item["components"]["accessHeat"])  # fmt: skip
            target = (target - rest) / PolicyParams().confidence_weight + 1e-9
        if target <= 1:
            def raise_it(items):
                items[-1]["components"]["confidence"] = max(target, items[-1]["components"]["confidence"])
                rescore(items[-1])
                items.append(items.pop(-1))  # still last: the highest score
            yield "raised above a survivor", changed(raise_it)


def test_every_tampered_eviction_is_flagged(stores):
    tampered = 0
    kinds = set()
    for store in stores.values():
        (bucket,) = store.buckets
        for event in bucket.audit:
            for name, fake in tamperings(event, bucket):
                verdict, reason = check_event(fake, bucket, PolicyParams())
                assert verdict == CONTRADICTS, (name, reason)
                tampered += 1
                kinds.add(name)
    assert kinds == {"score", "component", "order", "swapped id", "raised above a survivor"}
    assert tampered > 1000


def test_events_that_cannot_be_checked_say_why(stores):
    (bucket,) = stores["hybrid-v1", False, 0].buckets
    event = bucket.audit[0]
    cases = {
        "not an audit event object": [],
        "is not a capacity event": {**event, "reason": "staleness"},
        "is not one whose scores can be recomputed": {**event, "policyVersion": "hybrid-v2"},
        "occurredAt is not a readable time": {**event, "occurredAt": "yesterday"},
        "evicted is not a non-empty list": {**event, "evicted": []},
    }
    for why, fake in cases.items():
        verdict, reason = check_event(fake, bucket, PolicyParams())
        assert verdict == CANNOT and why in reason
    # Other weights than the ones the store ran with contradict the recorded scores.
    other = PolicyParams(confidence_weight=0.5, confirmation_weight=0.4, access_weight=0.1)
    assert check_event(event, bucket, other)[0] == CONTRADICTS
    shadow = {**event, "shadow": {"policyVersion": "hybrid-v1", "wouldEvict": [], "disagrees": True}}
    assert "under hybrid-v1" in check_event(shadow, bucket, PolicyParams())[1]


def test_shadow_analysis_counts_what_the_events_say(stores):
    store = stores["confidence", True, 1]
    checks = check_events(store)
    facts = shadow_facts(store)
    summary = shadow_summary(store, checks, facts)
    events = store.buckets[0].audit
    assert summary["events"] == len(events)
    assert summary["disagreeing"] == sum(event["shadow"]["disagrees"] for event in events) > 0
    assert 0 <= summary["rate_low"] <= summary["rate"] <= summary["rate_high"] <= 1
    assert (facts.loc[facts["direction"] == "saved", "margin"] <= 0).all()
    assert (facts.loc[facts["direction"] == "lost", "margin"].dropna() >= 0).all()
    assert summary["categories"][0]["category"] == "correction"
    assert sum(month["events"] for month in summary["months"]) == len(events)
    assert shadow_summary(stores["hybrid-v1", False, 0], checks, shadow_facts(stores["hybrid-v1", False, 0]))[
        "events"] == 0  # fmt: skip


def test_the_command_flags_a_tampered_store_and_writes_the_figure(tmp_path, capsys):
    root = tmp_path / "store"
    replayed_store(root, "confidence", shadow=True, seed=4, updates=40)
    assert main(["import", "deermem", str(root), "--output-dir", str(tmp_path / "imported")]) == 0
    out = tmp_path / "audit"
    assert main(["audit", str(tmp_path / "imported"), "--output-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "0 contradicts" in printed and "shadow mode: hybrid-v1 would have evicted differently" in printed
    record = json.loads((out / "store-audit.run.json").read_text())
    assert record["status"] == "success" and {"figures/shadow.png", "figures/shadow.svg"} <= set(record["outputs"])
    assert (out / "audit.checks.csv").read_text().count("\n") == record["summary"]["checks"] + 1
    sidecar = bucket_dir(root, "demo-user", "__default__") / ".metadata" / "eviction-audit.json"
    events = json.loads(sidecar.read_text())
    events[3]["evicted"][0]["score"] += 0.05
    sidecar.write_text(json.dumps(events, indent=2))
    assert main(["import", "deermem", str(root), "--output-dir", str(tmp_path / "again")]) == 0
    capsys.readouterr()
    assert main(["audit", str(tmp_path / "again"), "--format", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert [event["index"] for event in document["events"] if event["verdict"] == CONTRADICTS] == [3]


def test_the_viewer_shows_an_audit_folder(tmp_path):
    from evictlab.workbench.viewer import load_run

    replayed_store(tmp_path / "store", "confidence", shadow=True, seed=5, updates=30)
    assert main(["import", "deermem", str(tmp_path / "store"), "--output-dir", str(tmp_path / "imported")]) == 0
    assert main(["audit", str(tmp_path / "imported"), "--output-dir", str(tmp_path / "audit")]) == 0
    run = load_run(tmp_path / "audit")
    assert run.kind == "store-audit" and run.summary and run.summary[0]["verdict"] == CHECKS
    assert run.notes[0].startswith("Shadow mode: hybrid-v1 would have evicted differently")
    assert main(["view", str(tmp_path / "audit"), "--output", str(tmp_path / "page.html")]) == 0
    assert "Shadow mode" in (tmp_path / "page.html").read_text()


def test_the_shadow_figure_labels_every_panel(stores):
    from evictlab.workbench import plots

    store = stores["confidence", True, 0]
    facts = shadow_facts(store)
    fig = plots.shadow_figure(shadow_summary(store, check_events(store), facts), facts, source="a fixture store")
    assert "a fixture store" in plots.figure_title(fig)
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_ylabel(), ax.get_title()
    (legend,) = fig.legends  # the two colours of the categories and margins panels
    assert [text.get_text() for text in legend.get_texts()] == ["saved by hybrid-v1 (confidence evicted)",
                                                                "lost by hybrid-v1 (confidence kept)"]
