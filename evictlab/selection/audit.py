"""DeerMem's metadata sidecars: eviction audit events and query access heat (spec 1.5 to 1.7).

Everything here is metadata only. An audit event names the evicted facts by id, category,
score and score components; it never carries fact content. The functions that build or prune
events and usage maps are pure: they return new structures and never change their inputs.
Only :func:`append_audit_event` touches the file system, through an atomic write.

The sidecar files keep DeerMem's layout (``agents/<agent>/.metadata/``) and format: a JSON
document with 2-space indent, raw non-ASCII and the keys in the order DeerMem writes them.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ContractError
from ..policies.base import Decision
from ..policies.signals import decay, elapsed_days, parse_timestamp, read_count, read_number
from ..results import atomic_write_text
from ..times import as_utc, iso_z

METADATA_DIR = ".metadata"
AUDIT_FILE = "eviction-audit.json"
USAGE_FILE = "fact-usage.json"
AUDIT_REASON = "capacity"
DEFAULT_AUDIT_MAX_ENTRIES = 200
DEFAULT_ACCESS_HALF_LIFE_DAYS = 30


def metadata_dir(user_memory_dir: str | os.PathLike, agent_name: str) -> Path:
    """``<user memory dir>/agents/<agent name lower-cased>/.metadata``."""
    return Path(user_memory_dir) / "agents" / agent_name.lower() / METADATA_DIR


def audit_path(user_memory_dir: str | os.PathLike, agent_name: str) -> Path:
    return metadata_dir(user_memory_dir, agent_name) / AUDIT_FILE


def usage_path(user_memory_dir: str | os.PathLike, agent_name: str) -> Path:
    return metadata_dir(user_memory_dir, agent_name) / USAGE_FILE


# --- audit events ---------------------------------------------------------------------------


def evicted_ids(decision: Decision) -> list[str]:
    """Ids of the facts ``decision`` evicted, lowest rank first."""
    return [item.fact_id for item in decision.evicted]


def shadow_comparison(actual: Decision, shadow: Decision) -> dict[str, Any]:
    """The ``shadow`` block of an audit event.

    ``wouldEvict`` lists the shadow decision's evicted ids sorted; ``disagrees`` is true iff
    that set differs from the set ``actual`` evicted (order never matters).
    """
    would_evict = evicted_ids(shadow)
    return {
        "policyVersion": shadow.policy,
        "wouldEvict": sorted(would_evict),
        "disagrees": set(evicted_ids(actual)) != set(would_evict),
    }


def audit_event(
    decision: Decision,
    *,
    max_facts: int,
    occurred_at: _dt.datetime | None = None,
    shadow: Decision | None = None,
) -> dict[str, Any] | None:
    """The audit event for one capacity decision, or ``None`` when nothing was evicted.

    ``occurred_at`` defaults to the current time. ``shadow`` is the second decision computed
    in shadow mode; it only adds the comparison block. The event holds ids, categories, scores
    and components, never fact content.
    """
    if not decision.evicted:
        return None
    moment = occurred_at if occurred_at is not None else _dt.datetime.now(_dt.UTC)
    event: dict[str, Any] = {
        "occurredAt": iso_z(moment),
        "reason": AUDIT_REASON,
        "policyVersion": decision.policy,
        "maxFacts": max_facts,
        "reservedCorrectionSlots": decision.reserved_correction_slots,
        "evicted": [
            {
                "factId": item.fact_id,
                "category": item.category,
                "score": item.score,
                "components": dict(item.components),
            }
            for item in decision.evicted
        ],
    }
    if shadow is not None:
        event["shadow"] = shadow_comparison(decision, shadow)
    return event


def read_audit_events(path: str | os.PathLike) -> list[Any]:
    """The events stored at ``path``; a missing, unreadable or non-array file reads as empty."""
    root = _read_json(path)
    return root if isinstance(root, list) else []


def append_audit_event(
    path: str | os.PathLike,
    event: Mapping[str, Any] | None,
    *,
    max_entries: int = DEFAULT_AUDIT_MAX_ENTRIES,
) -> list[Any] | None:
    """Append ``event`` to the audit file and keep only the last ``max_entries`` events.

    Nothing is written, and ``None`` returned, when ``event`` is ``None`` or evicted nothing,
    or when ``max_entries`` is 0 (auditing disabled). Otherwise the file is rewritten
    atomically and the events it now holds are returned.
    """
    if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 0:
        raise ContractError(f"max_entries must be an integer >= 0, got {max_entries!r}")
    if event is None or not event.get("evicted") or max_entries == 0:
        return None
    events = read_audit_events(path)
    events.append(copy.deepcopy(dict(event)))
    events = events[-max_entries:]
    _write_json(path, events)
    return events


# --- usage heat -----------------------------------------------------------------------------


def read_usage(path: str | os.PathLike) -> dict[str, Any]:
    """The usage map stored at ``path``; a missing, unreadable or non-object file reads as empty."""
    root = _read_json(path)
    return root if isinstance(root, dict) else {}


def write_usage(path: str | os.PathLike, usage: Mapping[str, Any]) -> Path:
    """Write a usage map atomically in the sidecar format."""
    return _write_json(path, dict(usage))


def update_usage(
    usage: Mapping[str, Any],
    returned_ids: Sequence[Any],
    *,
    accessed_at: _dt.datetime,
    access_half_life_days: float = DEFAULT_ACCESS_HALF_LIFE_DAYS,
    existing_ids: Iterable[str] | None = None,
) -> dict[str, Any]:
    """The usage map after one search returned ``returned_ids`` at ``accessed_at`` (spec 1.7).

    Returns a new map; ``usage`` is not changed. Falsy ids are dropped, the rest stringified
    and de-duplicated in order; when ``existing_ids`` is given, ids outside it (facts that no
    longer exist) are skipped. For each id the previous heat (0 unless a finite non-negative
    number) is decayed from the previous ``lastAccessedAt`` to ``accessed_at`` (elapsed time
    clamped at 0; no readable previous timestamp resets it to 0), then 1.0 is added; the count
    goes up by one from the previous non-negative integer count, or from 0.
    """
    updated = copy.deepcopy(dict(usage)) if isinstance(usage, Mapping) else {}
    allowed = None if existing_ids is None else {str(fact_id) for fact_id in existing_ids}
    stamp = iso_z(accessed_at)
    moment = as_utc(accessed_at)
    seen: set[str] = set()
    for raw_id in returned_ids:
        if not raw_id:
            continue
        fact_id = str(raw_id)
        if fact_id in seen or (allowed is not None and fact_id not in allowed):
            continue
        seen.add(fact_id)
        previous = updated.get(fact_id)
        if not isinstance(previous, Mapping):
            previous = {}
        heat = read_number(previous.get("accessHeat"))
        if heat is None or heat < 0:
            heat = 0.0
        last_accessed = parse_timestamp(previous.get("lastAccessedAt"))
        if last_accessed is None:
            heat = 0.0
        else:
            # Decayed at write time, so scoring later decays only from this access on.
            heat = heat * decay(elapsed_days(moment, last_accessed), access_half_life_days)
        updated[fact_id] = {
            "accessHeat": heat + 1.0,
            "accessCount": read_count(previous.get("accessCount")) + 1,
            "lastAccessedAt": stamp,
        }
    return updated


# --- cleanup for deleted facts (spec 1.6, ``clear_fact_metadata``) --------------------------


def clear_usage_metadata(usage: Mapping[str, Any], fact_ids: Iterable[Any]) -> dict[str, Any]:
    """``usage`` without the entries of the deleted ``fact_ids`` (a new map).

    An empty result means DeerMem deletes the usage file.
    """
    deleted = {str(fact_id) for fact_id in fact_ids}
    if not isinstance(usage, Mapping):
        return {}
    return {key: copy.deepcopy(value) for key, value in usage.items() if key not in deleted}


def clear_audit_metadata(events: Sequence[Any], fact_ids: Iterable[Any]) -> list[dict[str, Any]]:
    """The audit events with every trace of the deleted ``fact_ids`` removed (a new list).

    In each event the evicted items naming a deleted id are dropped, and so are malformed items
    (not an object, or without a string ``factId``); an event left with no evicted item is
    dropped, as is anything that is not an event object. ``shadow.wouldEvict`` loses the
    deleted ids (and non-string entries) and ``disagrees`` is recomputed against the remaining
    evicted ids; a malformed shadow (not an object, or ``wouldEvict`` not a list) is removed.
    An empty result means DeerMem deletes the audit file.
    """
    deleted = {str(fact_id) for fact_id in fact_ids}
    kept_events: list[dict[str, Any]] = []
    for event in events:
        if not isinstance(event, Mapping):
            continue
        items = event.get("evicted")
        kept_items = [
            copy.deepcopy(item)
            for item in (items if isinstance(items, list) else [])
            if isinstance(item, Mapping)
            and isinstance(item.get("factId"), str)
            and item["factId"] not in deleted
        ]
        if not kept_items:
            continue
        pruned = {key: copy.deepcopy(value) for key, value in event.items() if key != "shadow"}
        pruned["evicted"] = kept_items
        shadow = event.get("shadow")
        if shadow is not None:
            would_evict = shadow.get("wouldEvict") if isinstance(shadow, Mapping) else None
            if isinstance(would_evict, list):
                remaining = [
                    fact_id
                    for fact_id in would_evict
                    if isinstance(fact_id, str) and fact_id not in deleted
                ]
                pruned["shadow"] = {
                    **copy.deepcopy(dict(shadow)),
                    "wouldEvict": remaining,
                    "disagrees": {item["factId"] for item in kept_items} != set(remaining),
                }
        kept_events.append(pruned)
    return kept_events


# --- file helpers ---------------------------------------------------------------------------


def _read_json(path: str | os.PathLike) -> Any:
    """The parsed JSON at ``path``, or ``None`` when it is missing or cannot be read as JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None


def _write_json(path: str | os.PathLike, value: Any) -> Path:
    # Key order as built (DeerMem's order), not sorted; raw non-ASCII; 2-space indent.
    return atomic_write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")
