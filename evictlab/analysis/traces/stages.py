"""DeerMem's lifecycle in a replay: :class:`Lifecycle`, one replay stage over every memory.

It runs the functions of :mod:`.lifecycle` at each write of :func:`.replay.replay`, for each
memory of the lockstep, in spec 1.12 C's order (docs/traces.md, "Lifecycle stages"): the
reinforcement signal before stamping; after the new facts are appended, staleness and the
admission gate with the duplicate skip (both only remove facts, so the selector's input order
stays DeerMem's: stored facts, then the new ones); the capacity selection; then contradiction
and storage's rewrite. At each ``ask`` it decides answerability and attributes every loss to
one stage (:data:`.lifecycle.LOSSES`). ``confidence`` (under any modifier) does not stamp
(spec 1.9); the staleness reviewer proposes the candidates the trace has superseded, and each
new fact's ``supersedes`` is a contradiction entry paired with it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...policies.arrays import NO_TIME
from ...policies.modifiers import resolve_policy
from .lifecycle import (
    LOSS_NAMES,
    LOSSES,
    LifecycleConfig,
    NewFact,
    admit,
    attribute,
    contradiction_removals,
    creation_valid_days,
    feed_signal,
    guaranteed_pool,
    injected,
    line_tokens,
    review_proposals,
    stale_removals,
    staleness_candidates,
    stored_category,
)
from .memory import Lockstep, root_policy


@dataclass
class _Fact:
    """What the stages read of one ``add`` row."""

    key: str
    tokens: int
    new: NewFact
    valid_days: int  # 0: absent
    supersedes: str | None
    guaranteed: bool


def _fact(row: Mapping[str, Any], config: LifecycleConfig) -> _Fact:
    key = row.get("content_key") or row["fact_id"]
    labels = [row.get(name) for name in ("scope", "durability", "authority")]
    # Labels the trace did not record pass the gate; a recorded "" is a missing label.
    new = NewFact(key, row["confidence"]) if labels == [None] * 3 else NewFact(key, row["confidence"],
                                                                                *(label or "" for label in labels))
    tokens = row.get("tokens")
    if tokens is None:
        tokens = line_tokens(row["category"], row["confidence"], row["content_length"])
    return _Fact(key, tokens, new, creation_valid_days(row.get("expected_valid_days"), config) or 0,
                 row.get("supersedes"), bool(guaranteed_pool([row["category"]], config)[0]))


class Lifecycle:
    """The stages named in ``stages`` (:func:`.lifecycle.parse_stages`) over ``memories``."""

    def __init__(self, stages: frozenset[str], memories: Lockstep, config: LifecycleConfig | None = None) -> None:
        self.stages, self.config, self.memories = stages, config or LifecycleConfig(), memories
        count = len(memories)
        self.facts: dict[str, _Fact] = {}
        self.superseded: set[str] = set()
        self.fates: list[dict[str, str]] = [{} for _ in range(count)]
        self.keys: list[Counter[str]] = [Counter() for _ in range(count)]  # content keys in each memory
        self.losses = np.zeros((count, len(LOSSES)), dtype=np.int64)
        self.stamps = [root_policy(resolve_policy(spec.policy)).name != "confidence" for spec in memories.specs]
        self.confirmed: dict[str, int] = {}  # each fact's last stamp before the write being applied
        self._replacement: list[dict[int, str]] = [{} for _ in range(count)]
        self._shown: list[set[str] | None] = [None] * count

    # ----------------------------------------------------------------------- the hooks

    def signal(self, messages: Sequence[tuple[str, str]]) -> bool | None:
        """The 1.9 gate's signal from an update's feed (``None``: the rows' own ``reinforcement``)."""
        if "reinforcement" in self.stages and messages:
            return feed_signal(messages)
        return None

    def before_selection(self, write: Any) -> None:
        """Staleness, then admission and the duplicate skip, after the update's facts are appended."""
        memories = self.memories
        rows = list(write.rows)
        for row in rows:
            fact = self.facts[row["fact_id"]] = _fact(row, self.config)
            if fact.supersedes is not None:
                self.superseded.add(fact.supersedes)
        for memory in range(len(memories)):
            if "staleness" in self.stages:
                self._staleness(memory, write, memories, len(rows))
            self._admit(memory, rows, memories)
        self._shown = [None] * len(memories)

    def after_selection(self, write: Any, evicted: list[list[str]]) -> None:
        """The evicted facts' fate, the contradiction removals and storage's category rewrite."""
        memories = self.memories
        for memory, gone in enumerate(evicted):
            self._forget(memory, gone, "evicted")
        entries = [(row["supersedes"], index) for index, row in enumerate(write.rows) if row.get("supersedes")]
        if "contradiction" in self.stages and entries:
            for memory in range(len(memories)):
                kept = [(fact_id, self.facts[fact_id].key) for fact_id in memories.kept_ids(memory)]
                removed, _ = contradiction_removals(entries, self._replacement[memory], kept)
                self._forget(memory, memories.remove(memory, removed), "contradicted")
        if "storage" in self.stages:
            for row in write.rows:
                category = stored_category(row["category"])
                if category != row["category"]:
                    memories.table.recategorise(row["fact_id"], category)
                    self.facts[row["fact_id"]].guaranteed = bool(guaranteed_pool([category], self.config)[0])
        self.confirmed.update(dict.fromkeys(write.reinforced, write.now))
        self._shown = [None] * len(memories)

    def answerable(self, fact_id: str) -> np.ndarray:
        """Which memories can answer a question needing ``fact_id``; counts each loss by stage."""
        memories = self.memories
        fact = self.facts.get(fact_id)
        key = fact_id if fact is None else fact.key
        found = np.zeros(len(memories), dtype=bool)
        for memory in range(len(memories)):
            stored = key in self.keys[memory]
            found[memory] = stored and ("injection" not in self.stages or key in self._injected(memory, memories))
            if not found[memory]:
                loss = attribute(False, self.fates[memory].get(fact_id), stored)
                self.losses[memory, LOSSES.index(loss or "rejected")] += 1
        return found

    # ----------------------------------------------------------------------- per memory

    def _forget(self, memory: int, fact_ids: Sequence[str], fate: str) -> None:
        for fact_id in fact_ids:
            self.fates[memory][fact_id] = fate
            keys, key = self.keys[memory], self.facts[fact_id].key
            keys[key] -= 1
            if not keys[key]:
                del keys[key]  # so that ``key in keys`` means "in memory"

    def _staleness(self, memory: int, write: Any, memories: Lockstep, new: int) -> None:
        """Spec 1.12 C3 on the facts stored before this update (the last ``new`` are its own)."""
        table = memories.table
        rows = memories.order[memory, : memories.sizes[memory] - new]
        if len(rows) < self.config.staleness_min_candidates:
            return
        ids = table.ids[rows].tolist()
        superseded = np.array([fact_id in self.superseded for fact_id in ids], dtype=bool)
        if not superseded.any():
            return  # the reviewer proposes superseded candidates only
        created = table.times["created"][rows]
        if self.stamps[memory]:
            confirmed = table.times["confirmed"][rows]
            at_apply = np.where(confirmed != NO_TIME, confirmed, created)
            # The prompt was built before this update's stamps (1.11a C7).
            in_prompt = np.array([self.confirmed.get(fact_id, NO_TIME) if fact_id in write.reinforced else at
                                  for fact_id, at in zip(ids, at_apply.tolist())], dtype=np.int64)
            in_prompt = np.where(in_prompt != NO_TIME, in_prompt, created)
        else:
            at_apply = in_prompt = created
        valid = np.array([self.facts[fact_id].valid_days for fact_id in ids], dtype=np.int64)
        categories = table.stored[rows].tolist()
        proposed = review_proposals(staleness_candidates(in_prompt, valid, categories, write.now, self.config),
                                    superseded, self.config)
        if proposed.any():
            candidates = staleness_candidates(at_apply, valid, categories, write.now, self.config)
            removed = stale_removals(proposed, candidates, table.confidence[rows], self.config)
            self._forget(memory, memories.remove(memory, [ids[i] for i in np.flatnonzero(removed)]), "stale")

    def _admit(self, memory: int, rows: list[Mapping[str, Any]], memories: Lockstep) -> None:
        """Spec 1.12 C5: the scope gate, the threshold and the duplicate skip for this update's facts."""
        new = [self.facts[row["fact_id"]].new for row in rows]
        keys = self.keys[memory]
        outcomes, self._replacement[memory] = admit(new, keys, gate="admission" in self.stages,
                                                    dedup="dedup" in self.stages, config=self.config)
        refused = []
        for row, fact, outcome in zip(rows, new, outcomes):
            if outcome == "stored":
                keys[fact.key] += 1
            else:
                refused.append(row["fact_id"])
                self.fates[memory][row["fact_id"]] = "duplicate" if outcome == "duplicate" else "rejected"
        if refused:
            memories.remove(memory, refused)

    def _injected(self, memory: int, memories: Lockstep) -> set[str]:
        """The content keys memory ``memory`` shows (spec 1.13), cached until its next write."""
        shown = self._shown[memory]
        if shown is None:
            table = memories.table
            rows = memories.order[memory, : memories.sizes[memory]]
            ids = table.ids[rows]
            order = np.argsort(ids.astype(str), kind="stable")  # storage returns facts sorted by id
            facts = [self.facts[fact_id] for fact_id in ids[order].tolist()]
            tokens = np.array([fact.tokens for fact in facts], dtype=np.int64)
            pool = np.array([fact.guaranteed for fact in facts], dtype=bool)
            positions = injected(pool, table.confidence[rows][order], tokens, tokens, config=self.config)
            shown = self._shown[memory] = {facts[position].key for position in positions.tolist()}
        return shown


def stage_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, capacity), over the traces of ``rows`` (replay rows with ``lost_*`` columns):
    the share of questions answered and the share lost to each stage; each row sums to 1."""
    lost = [f"lost_{name}" for name in LOSSES]
    totals = rows.groupby(["policy", "capacity"], sort=False)[["asks", "answerable", *lost]].sum()
    shares = totals[["answerable", *lost]].div(totals["asks"], axis=0)
    shares.columns = ["answered", *(LOSS_NAMES[name] for name in LOSSES)]
    return shares.reset_index()
