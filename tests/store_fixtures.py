"""DeerMem stores written for the tests, in spec 1.14's layout (invented content, no DeerFlow data).

:func:`write_fact` renders one fact file as ``FileMemoryStorage`` writes it; :func:`replayed_store`
lives a store through seeded updates the way DeerMem's updater does (spec 1.5-1.7: existing facts
sorted by id, then the new ones; one capacity decision per update over the cap; the sidecars
cleaned for the evicted ids before the audit event is appended; usage heat from searches;
confirmations stamping ``lastConfirmedAt``), so its audit is what production would have written.
"""

from __future__ import annotations

import datetime as _dt
import json
import random
from pathlib import Path
from typing import Any

import yaml

from evictlab.core.stores.deermem import METADATA, shard, user_dir_name
from evictlab.policies import PolicyParams
from evictlab.selection.audit import (
    AUDIT_FILE,
    USAGE_FILE,
    audit_event,
    clear_audit_metadata,
    clear_usage_metadata,
    update_usage,
    write_usage,
)
from evictlab.selection.deermem import select_facts_for_capacity
from evictlab.times import iso_z

UTC = _dt.UTC
START = _dt.datetime(2026, 3, 1, tzinfo=UTC)
SECRET = "Invented secret: the user keeps a spare key under the blue flowerpot"
CATEGORIES = ("preference", "context", "goal", "behavior", "correction")


def bucket_dir(root: Path, user_id: str | None, agent: str) -> Path:
    base = root if user_id is None else root / "users" / user_dir_name(user_id)
    return base / "agents" / agent.lower()


def render_fact(fact: dict[str, Any], content: str, user_id: str | None, agent: str) -> str:
    """A fact file in schema v2: front matter without content, title and scope, then the scope."""
    front = {key: value for key, value in fact.items() if key not in ("content", "title", "scope")}
    front = {**front, "user_id": user_id, "agent_name": agent}
    title = (content.splitlines()[0] if content else "Memory fact").strip()[:160]
    text = yaml.safe_dump(front, allow_unicode=True, sort_keys=False)
    return f"---\n{text}---\n\n# {title}\n\n{content.rstrip()}\n"


def write_fact(root: Path, fact: dict[str, Any], content: str, user_id: str | None = "demo-user",
               agent: str = "__default__") -> Path:
    path = bucket_dir(root, user_id, agent) / "facts" / shard(fact["id"]) / f"{fact['id']}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_fact(fact, content, user_id, agent), encoding="utf-8")
    return path


def stored_fact(fact_id: str, confidence: float, created: _dt.datetime, **extra: Any) -> dict[str, Any]:
    """The keys in the order storage writes them (spec 1.14's example)."""
    stamp = iso_z(created)
    return {"id": fact_id, "category": extra.pop("category", "preference"), "confidence": confidence,
            "createdAt": stamp, "source": {"type": "conversation", "threadId": "thread-0001"}, **extra,
            "schemaVersion": 2, "status": "active", "topics": [], "consolidatedFrom": [],
            "updatedAt": extra.get("lastConfirmedAt", stamp), "revision": 1}  # fmt: skip


def replayed_store(root: Path, policy: str, *, shadow: bool = False, seed: int = 0, updates: int = 30,
                   max_facts: int = 12, params: PolicyParams | None = None,
                   user_id: str = "demo-user", agent: str = "__default__") -> dict[str, Any]:
    """Live a store through ``updates`` seeded updates under ``policy`` and write it to ``root``.

    Returns the surviving facts (with content) and the audit events written.
    """
    rng = random.Random(seed)
    params = params or PolicyParams()
    facts: dict[str, dict[str, Any]] = {}
    usage: dict[str, Any] = {}
    events: list[dict[str, Any]] = []
    folder = bucket_dir(root, user_id, agent)
    now = START
    for _ in range(updates):
        now += _dt.timedelta(hours=rng.randint(2, 72), seconds=rng.randint(0, 59))
        for fact_id in rng.sample(sorted(facts), min(len(facts), rng.randint(0, 3))):
            usage = update_usage(usage, [fact_id], accessed_at=now - _dt.timedelta(hours=1),
                                 access_half_life_days=params.access_half_life_days)  # fmt: skip
        if facts and rng.random() < 0.4:
            confirmed = facts[rng.choice(sorted(facts))]
            confirmed["lastConfirmedAt"] = confirmed["updatedAt"] = iso_z(now)
            confirmed["confirmationCount"] = confirmed.get("confirmationCount", 0) + 1
        new = []
        for _ in range(rng.randint(1, 4)):
            fact_id = f"fact_{rng.getrandbits(32):08x}"
            category = rng.choice(CATEGORIES)
            fact = stored_fact(fact_id, round(rng.uniform(0.7, 1.0), 2), now, category=category)
            fact["content"] = f"{SECRET} #{fact_id}"
            new.append(fact)
        candidates = [facts[key] for key in sorted(facts)] + new
        if len(candidates) <= max_facts:
            facts.update({fact["id"]: fact for fact in new})
            continue
        decision = select_facts_for_capacity(candidates, max_facts=max_facts, policy=policy, usage=usage, now=now,
                                             **params.as_dict())  # fmt: skip
        shadow_decision = None
        if shadow and policy == "confidence":
            shadow_decision = select_facts_for_capacity(candidates, max_facts=max_facts, policy="hybrid-v1",
                                                        usage=usage, now=now, **params.as_dict())  # fmt: skip
        gone = [item.fact_id for item in decision.evicted]
        facts = {fact["id"]: fact for fact in decision.kept}
        usage = clear_usage_metadata(usage, gone)
        events = clear_audit_metadata(events, gone)
        event = audit_event(decision, max_facts=max_facts, occurred_at=now, shadow=shadow_decision)
        events = [*events, event][-200:] if event else events
    for fact in facts.values():
        write_fact(root, {key: value for key, value in fact.items() if key != "content"}, fact["content"],
                   user_id, agent)  # fmt: skip
    if usage:
        write_usage(folder / METADATA / USAGE_FILE, usage)
    if events:
        (folder / METADATA / AUDIT_FILE).write_text(json.dumps(events, indent=2, ensure_ascii=False) + "\n")
    return {"facts": facts, "audit": events, "usage": usage, "clock": now}
