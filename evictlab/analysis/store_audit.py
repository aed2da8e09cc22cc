"""What an imported store's eviction audit says: each event checked, and shadow mode read.

:func:`check_events` checks every recorded event (spec 1.6) against the policy it names: the
recorded scores (recomputed bit for bit from the components and the weights, lowest rank
first), the survivors (scored at the event's time, none below an evicted fact; scores within
:data:`TOO_CLOSE` not compared), the reservation and the ``shadow`` block (only under
``confidence``, policy ``hybrid-v1``, ``wouldEvict`` sorted and no longer than the evicted
list, ``disagrees`` equal to whether the two id sets differ); docs/store.md ("Audit") says each
rule. An event ``checks``, ``contradicts`` (every contradiction named) or ``cannot be checked``
(why). :func:`shadow_facts` and :func:`shadow_summary` read the ``shadow`` blocks. Only ids,
categories, scores and times are read: an audit holds no fact text.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from typing import Any

import pandas as pd

from ..core.stores.deermem import Bucket, Store
from ..intervals import wilson_interval
from ..policies import DEERMEM_POLICIES, PolicyParams, resolve_policy, selection_context
from ..policies.base import Reservation
from ..policies.hybrid import CORRECTION, hybrid_value
from ..policies.signals import is_category, parse_timestamp

CHECKS, CONTRADICTS, CANNOT = "checks", "contradicts", "cannot be checked"
VERDICTS = (CHECKS, CONTRADICTS, CANNOT)
#: Scores closer than this to an evicted one are too close to call (see the module docstring).
TOO_CLOSE = 1e-6
COMPONENTS = {"confidence": ("confidence",), "hybrid-v1": ("confidence", "confirmationFreshness", "accessHeat")}
SAVED, LOST = "saved", "lost"


def is_correction(fact: Mapping[str, Any]) -> bool:
    """A correction for the reservation: its category, or the one storage moved to ``categoryExtension``."""
    extension = str(fact.get("categoryExtension", "")).strip().lower()
    return is_category(fact, CORRECTION) or extension == CORRECTION


def check_events(store: Store, params: PolicyParams | None = None) -> pd.DataFrame:
    """One row per recorded event: ``case_id``, ``index``, ``occurred_at``, ``policy``,
    ``max_facts``, ``evicted``, ``verdict``, ``reserved`` (reproduced / consistent), ``compared``
    (survivors compared) and ``reason``."""
    params = params or PolicyParams()
    rows = []
    for bucket in store.buckets:
        for index, event in enumerate(bucket.audit):
            row = {"case_id": bucket.key, "index": index, "occurred_at": None, "policy": None, "max_facts": None,
                   "evicted": None, "reserved": None, "compared": 0}  # fmt: skip
            if isinstance(event, Mapping):
                row.update(occurred_at=event.get("occurredAt"), policy=event.get("policyVersion"),
                           max_facts=event.get("maxFacts"))  # fmt: skip
            verdict, reason = check_event(event, bucket, params, row)
            rows.append({**row, "verdict": verdict, "reason": reason})
    return pd.DataFrame(rows, columns=["case_id", "index", "occurred_at", "policy", "max_facts", "evicted",
                                       "verdict", "reserved", "compared", "reason"])  # fmt: skip


def _malformed(event: Any) -> str | None:
    if not isinstance(event, Mapping):
        return "not an audit event object"
    if event.get("reason") != "capacity":
        return f"reason {event.get('reason')!r} is not a capacity event"
    if event.get("policyVersion") not in DEERMEM_POLICIES:
        return f"policy {event.get('policyVersion')!r} is not one whose scores can be recomputed"
    if parse_timestamp(event.get("occurredAt")) is None:
        return "occurredAt is not a readable time"
    for name in ("maxFacts", "reservedCorrectionSlots"):
        if isinstance(event.get(name), bool) or not isinstance(event.get(name), int):
            return f"{name} is not an integer"
    items = event.get("evicted")
    if not isinstance(items, list) or not items:
        return "evicted is not a non-empty list"
    for item in items:
        if (not isinstance(item, Mapping) or not isinstance(item.get("factId"), str)
                or not isinstance(item.get("components"), Mapping) or not _number(item.get("score"))):  # fmt: skip
            return "an evicted entry lacks a string factId, a number score or a components object"
    return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_event(event: Any, bucket: Bucket, params: PolicyParams, row: dict[str, Any] | None = None) -> tuple[str, str]:
    """The verdict on one event of ``bucket`` and why (``row`` receives the counts of the table)."""
    row = {} if row is None else row
    why = _malformed(event)
    if why is not None:
        return CANNOT, why
    policy, moment = event["policyVersion"], parse_timestamp(event["occurredAt"])
    assert moment is not None  # checked by _malformed
    items, capacity, reserved = event["evicted"], event["maxFacts"], event["reservedCorrectionSlots"]
    row["evicted"] = len(items)
    found: list[str] = []
    for item in items:
        found += _score_problems(item, policy, params)
    scores = [item["score"] for item in items]
    if any(later < earlier for earlier, later in itertools.pairwise(scores)):
        found.append("the evicted list does not run lowest rank first (its scores are not ascending)")
    present = {fact["id"]: fact for fact in bucket.facts
               if (created := parse_timestamp(fact.get("createdAt"))) is not None and created <= moment}  # fmt: skip
    found += [f"{item['factId']} is recorded evicted but is still in the store" for item in items
              if item["factId"] in present]  # fmt: skip
    survivors = [fact for fact in present.values() if _unchanged(fact, bucket, policy, moment)]
    row["compared"] = len(survivors)
    found += _survivor_problems(survivors, items, policy, params, bucket, moment, reserved > 0)
    status, problems = _reservation(items, present.values(), policy, capacity, reserved, params)
    row["reserved"] = status
    found += problems
    found += _shadow_problems(event, policy, items, bucket, moment)
    if found:
        return CONTRADICTS, "; ".join(found)
    note = "" if survivors else "; no survivor present then and unchanged since to compare"
    return CHECKS, f"scores, order, reservation{', shadow' if 'shadow' in event else ''} and" \
                   f" {len(survivors)} survivor(s) agree with {policy}{note}"


def _score_problems(item: Mapping[str, Any], policy: str, params: PolicyParams) -> list[str]:
    components = item["components"]
    names = COMPONENTS[policy]
    if tuple(sorted(components)) != tuple(sorted(names)) or not all(
        _number(components[name]) and 0 <= components[name] <= 1 for name in names
    ):
        return [f"{item['factId']}: components {sorted(components)} are not {policy}'s, each in [0, 1]"]
    values = [components[name] for name in names]
    value = values[0] if policy == "confidence" else hybrid_value(params.weights, *values)
    if value != item["score"]:
        return [f"{item['factId']}: recorded score {item['score']!r}, recomputed {value!r} from its components"]
    return []


def _unchanged(fact: Mapping[str, Any], bucket: Bucket, policy: str, moment: Any) -> bool:
    updated = parse_timestamp(fact.get("updatedAt"))
    if updated is None or updated > moment:
        return False
    if policy == "confidence":
        return True
    entry = bucket.usage.get(fact["id"])
    accessed = parse_timestamp(entry.get("lastAccessedAt")) if isinstance(entry, Mapping) else None
    return not isinstance(entry, Mapping) or (accessed is not None and accessed <= moment)


def _survivor_problems(survivors: list[dict[str, Any]], items: list[Any], policy: str, params: PolicyParams,
                       bucket: Bucket, moment: Any, reserving: bool) -> list[str]:  # fmt: skip
    if not survivors:
        return []
    selector = resolve_policy(policy)
    context = selection_context(now=moment, usage=bucket.usage, params=params)
    scores = [score.value for score in selector.score(survivors, context)]
    best = max(items, key=lambda item: item["score"])
    corrections = [item for item in items if is_category({"category": item.get("category")}, CORRECTION)]
    best_correction = max(corrections, key=lambda item: item["score"], default=None)
    found = []
    for fact, value in zip(survivors, scores):
        beaten = best_correction if reserving and policy == "hybrid-v1" and is_correction(fact) else best
        if beaten is not None and value < beaten["score"] - TOO_CLOSE:
            found.append(f"survivor {fact['id']} (score {value:.6g} then) ranks below evicted"
                         f" {beaten['factId']} (score {beaten['score']:.6g})")
    return found


def _reservation(items: list[Any], present: Any, policy: str, capacity: int, reserved: int,
                 params: PolicyParams) -> tuple[str, list[str]]:  # fmt: skip
    if policy == "confidence":
        return ("reproduced", []) if reserved == 0 else ("contradicts", [f"{reserved} reserved slots under confidence"])
    slots = min(Reservation(CORRECTION, params.correction_reserved_fraction,
                            params.correction_reserved_max).slots(capacity), capacity) if capacity > 0 else 0
    evicted_corrections = sum(is_category({"category": item.get("category")}, CORRECTION) for item in items)
    known = evicted_corrections + sum(is_correction(fact) for fact in present)
    found = []
    if not 0 <= reserved <= slots:
        found.append(f"{reserved} reserved slots, outside [0, {slots}] for maxFacts {capacity}")
    elif reserved < min(slots, known):
        found.append(f"{reserved} reserved slots, but at least {known} corrections were present ({slots} slots)")
    elif reserved < slots and evicted_corrections:
        found.append(f"a correction was evicted while {slots - reserved} of {slots} reserved slots were free")
    if found:
        return "contradicts", found
    return ("reproduced" if reserved == min(slots, known) else "consistent"), []


def _shadow_problems(event: Mapping[str, Any], policy: str, items: list[Any], bucket: Bucket, moment: Any) -> list[str]:
    if "shadow" not in event:
        return []
    shadow = event["shadow"]
    if policy != "confidence":
        return [f"a shadow block under {policy} (DeerMem adds one only under confidence)"]
    would = shadow.get("wouldEvict") if isinstance(shadow, Mapping) else None
    if (not isinstance(shadow, Mapping) or shadow.get("policyVersion") != "hybrid-v1" or not isinstance(would, list)
            or not all(isinstance(fact_id, str) for fact_id in would)):  # fmt: skip
        return ["the shadow block is not {policyVersion: hybrid-v1, wouldEvict: [ids], disagrees}"]
    found = []
    if would != sorted(would) or len(would) > len(items):
        found.append("wouldEvict is not sorted, or names more facts than were evicted")
    if shadow.get("disagrees") is not ({item["factId"] for item in items} != set(would)):
        found.append(f"disagrees is {shadow.get('disagrees')!r}, which the two id sets do not say")
    created = {fact["id"]: parse_timestamp(fact.get("createdAt")) for fact in bucket.facts}
    found += [f"wouldEvict names {fact_id}, created after the event" for fact_id in would
              if created.get(fact_id) is not None and created[fact_id] > moment]
    return found


# --------------------------------------------------------------------------- shadow mode


def shadow_events(store: Store) -> Iterator[tuple[Bucket, int, Mapping[str, Any]]]:
    """``(bucket, index, event)`` of every readable ``confidence`` event with a shadow block."""
    for bucket in store.buckets:
        for index, event in enumerate(bucket.audit):
            shadow = isinstance(event, Mapping) and isinstance(event.get("shadow"), Mapping)
            if shadow and not _malformed(event) and event["policyVersion"] == "confidence":
                yield bucket, index, event


def shadow_facts(store: Store) -> pd.DataFrame:
    """One row per fact on which ``hybrid-v1`` (shadow) and ``confidence`` disagreed.

    ``direction``: ``saved`` (confidence evicted it, hybrid-v1 would have kept it) or ``lost``
    (hybrid-v1 would have evicted it, confidence kept it). ``margin``: the fact's confidence
    minus the highest evicted confidence of the event (the cut line), so saved facts sit at or
    below 0 and lost ones above. DeerMem drops a fact from ``wouldEvict`` once it is deleted,
    so ``lost`` holds only facts still in the store.
    """
    rows = []
    for bucket, index, event in shadow_events(store):
        facts = {fact["id"]: fact for fact in bucket.facts}
        items = {item["factId"]: item for item in event["evicted"]}
        cut = max(item["score"] for item in items.values())
        would = [fact_id for fact_id in event["shadow"].get("wouldEvict") or [] if isinstance(fact_id, str)]
        base = {"case_id": bucket.key, "index": index, "occurred_at": event["occurredAt"]}
        for fact_id, item in items.items():
            if fact_id not in would:
                rows.append({**base, "fact_id": fact_id, "direction": SAVED, "category": str(item.get("category")),
                             "margin": item["score"] - cut})  # fmt: skip
        for fact_id in would:
            if fact_id not in items:
                fact = facts.get(fact_id, {})
                rows.append({**base, "fact_id": fact_id, "direction": LOST,
                             "category": str(fact.get("category") or "context") if fact else "unknown",
                             "margin": fact["confidence"] - cut if fact else math.nan})  # fmt: skip
    return pd.DataFrame(rows, columns=["case_id", "index", "occurred_at", "fact_id", "direction", "category", "margin"])


def shadow_summary(store: Store, checks: pd.DataFrame, facts: pd.DataFrame) -> dict[str, Any]:
    """Over the checkable events with a shadow block: how often hybrid-v1 disagreed (with a
    Wilson 95 % interval), the categories it would have saved and lost (corrections first),
    the margin quantiles and the rate per month."""
    events = [{"case_id": bucket.key, "index": index, "month": event["occurredAt"][:7],
               "disagrees": bool(event["shadow"].get("disagrees"))}
              for bucket, index, event in shadow_events(store)]  # fmt: skip
    frame = pd.DataFrame(events, columns=["case_id", "index", "month", "disagrees"])
    total, disagreeing = len(frame), int(frame["disagrees"].sum())
    low, high = wilson_interval(disagreeing, total) if total else (math.nan, math.nan)
    counts = facts.groupby(["category", "direction"]).size().unstack(fill_value=0).reindex(
        columns=[SAVED, LOST], fill_value=0)  # fmt: skip
    order = sorted(counts.index, key=lambda name: (name != CORRECTION, -int(counts.loc[name].sum()), name))
    months = frame.groupby("month")["disagrees"].agg(["size", "sum"])
    return {
        "events": total, "disagreeing": disagreeing, "rate": disagreeing / total if total else math.nan,
        "rate_low": low, "rate_high": high,
        "checked_events": int((checks["verdict"] == CHECKS).sum()),
        "categories": [{"category": name, SAVED: int(counts.loc[name, SAVED]), LOST: int(counts.loc[name, LOST])}
                       for name in order],
        "margins": {direction: _quantiles(facts.loc[facts["direction"] == direction, "margin"]) for direction in
                    (SAVED, LOST)},
        "months": [{"month": month, "events": int(row["size"]), "disagreeing": int(row["sum"])}
                   for month, row in months.iterrows()],
    }  # fmt: skip


def _quantiles(values: pd.Series) -> dict[str, float | int]:
    values = values.dropna()
    found: dict[str, float | int] = {"count": len(values)}
    for name, q in (("min", 0.0), ("p10", 0.1), ("median", 0.5), ("p90", 0.9), ("max", 1.0)):
        found[name] = float(values.quantile(q)) if len(values) else math.nan
    return found
