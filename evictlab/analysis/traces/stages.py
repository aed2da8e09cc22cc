"""DeerMem's lifecycle in a replay: :class:`Lifecycle`, one replay stage over every memory.

It runs the functions of :mod:`.lifecycle` at each write of :func:`.replay.replay`, for each
memory of the lockstep, in spec 1.12 C's order (docs/traces.md, "Lifecycle stages"): the
reinforcement signal before stamping; after the new facts are appended, staleness and the
admission gate with the duplicate skip (both only remove facts, so the selector's input order
stays DeerMem's: the stored facts sorted by id, then the new ones); the capacity selection; then contradiction
and storage's rewrite. At each ``ask`` it decides answerability and attributes every loss to
one stage (:data:`.lifecycle.LOSSES`). A policy whose ``stamps_confirmations`` is off
(``confidence``, under any modifier) does not stamp (spec 1.9); the staleness reviewer proposes
the candidates the trace has superseded, and each new fact's ``supersedes`` is a contradiction
entry paired with it.
"""

from __future__ import annotations

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
    admit_many,
    attribute,
    contradiction_removals,
    creation_valid_days,
    feed_signal,
    first_line_tokens,
    guaranteed_pool,
    injected_in_order,
    injection_value,
    line_tokens,
    parsed_category,
    protected_categories,
    refusal,
    review_proposals,
    stale_removals,
    staleness_candidates,
    written_category,
)
from .memory import Lockstep, root_policy

#: Per-row columns the stages keep on the replay's fact table: (name, dtype, fill).
_COLUMNS = (
    ("key", np.int64, -1),  # the content key's code
    ("ordinal", np.int64, -1),  # the fact's number among every fact added (its fate's column)
    ("tokens", np.int64, 0),  # the injection line as a later line ("\n" + line)
    ("first_tokens", np.int64, 0),  # the line counted alone, as the first of a pool
    ("valid_days", np.int64, 0),  # 0: absent
    ("guaranteed", bool, False),
    ("protected", bool, False),
    ("superseded", bool, False),
)
#: A fate's code in :attr:`Lifecycle.fates`: 0 none, else 1 + its place in LOSSES.
_FATE = {name: code for code, name in enumerate(LOSSES, start=1)}


@dataclass
class _Fact:
    """What the stages read of one ``add`` row."""

    key: str
    tokens: int
    first_tokens: int
    new: NewFact
    valid_days: int  # 0: absent
    supersedes: str | None


def _fact(row: Mapping[str, Any], config: LifecycleConfig) -> _Fact:
    key = row.get("content_key") or row["fact_id"]
    labels = [row.get(name) for name in ("scope", "durability", "authority")]
    # Labels the trace did not record pass the gate; a recorded "" is a missing label.
    scope, durability, authority = ("user", "durable", "descriptive") if labels == [None] * 3 else (
        label or "" for label in labels)
    new = NewFact(key, row["confidence"], scope, durability, authority, empty=row["content_length"] == 0)
    line = (row["category"], row["confidence"], row["content_length"])
    tokens = row.get("tokens")
    later = line_tokens(*line) if tokens is None else tokens
    return _Fact(key, later, first_line_tokens(*line, tokens), new,
                 creation_valid_days(row.get("expected_valid_days"), config) or 0, row.get("supersedes"))


class Lifecycle:
    """The stages named in ``stages`` (:func:`.lifecycle.parse_stages`) over ``memories``.

    Every stage runs for all memories at once, on the replay's fact table: the stages' own
    facts (content key, tokens, validity, pools, superseded) are its columns (``table.extra``;
    storage's id order is the table's own, ``table.id_order``), a memory's content keys are
    those of the rows it holds, and each
    fact's fate in each memory is a code in ``fates`` (M, facts added).
    """

    def __init__(self, stages: frozenset[str], memories: Lockstep, config: LifecycleConfig | None = None) -> None:
        self.stages, self.config, self.memories = stages, config or LifecycleConfig(), memories
        count = len(memories)
        for name, dtype, fill in _COLUMNS:
            memories.table.column(name, dtype, fill)
        self.ordinals: dict[str, int] = {}  # every fact id added: its ordinal
        self.codes: dict[str, int] = {}  # every content key: its code
        self.superseded: set[str] = set()
        self.fates = np.zeros((count, 1024), dtype=np.int8)
        self.losses = np.zeros((count, len(LOSSES)), dtype=np.int64)
        self.stamps = np.array([root_policy(resolve_policy(spec.policy)).stamps_confirmations
                                for spec in memories.specs])
        self.confirmed: dict[str, int] = {}  # each fact's last stamp before the write being applied
        self._replacement: dict[int, str] = {}
        self._keys_of_ordinals = np.zeros(1024, dtype=np.int64)
        self._key_names: list[str] = []  # by code
        self._groups = memories.size_groups()  # memories of about one size, decided together
        self._shown: np.ndarray | None = None  # (M, table rows): the rows each memory injects

    # ----------------------------------------------------------------------- the hooks

    def signal(self, messages: Sequence[tuple[str, str]]) -> bool | None:
        """The 1.9 gate's signal from an update's feed (``None``: the rows' own ``reinforcement``)."""
        if "reinforcement" in self.stages and messages:
            return feed_signal(messages)
        return None

    def before_selection(self, write: Any) -> None:
        """Staleness, then admission and the duplicate skip, after the update's facts are appended."""
        table = self.memories.table
        rows = list(write.rows)
        facts = [_fact(row, self.config) for row in rows]
        extra = table.extra
        for row, fact in zip(rows, facts):
            fact_id = row["fact_id"]
            at = table.index[fact_id]
            ordinal, code = self._number(fact_id, fact.key)
            extra["key"][at], extra["ordinal"][at], extra["tokens"][at] = code, ordinal, fact.tokens
            extra["first_tokens"][at] = fact.first_tokens
            extra["valid_days"][at], extra["superseded"][at] = fact.valid_days, fact_id in self.superseded
            self._categorise(at, parsed_category(row["category"]))
            if fact.supersedes is not None:
                self.superseded.add(fact.supersedes)
                old = table.index.get(fact.supersedes)
                if old is not None:
                    extra["superseded"][old] = True
        if "staleness" in self.stages:
            for group in self._groups:
                self._staleness(group, write, len(rows))
        self._admit(rows, facts)
        self._shown = None

    def refuses(self, rows: Sequence[Mapping[str, Any]]) -> bool:
        """Whether DeerMem refuses the update of these ``add`` rows whole (:func:`.lifecycle.refusal`)."""
        removals = any(row.get("supersedes") for row in rows)
        return refusal([_fact(row, self.config).new for row in rows], removals, self.stages, self.config) is not None

    def refuse(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """An update refused whole: its facts never enter memory, their fate ``refused`` in every memory."""
        for row in rows:
            ordinal, _ = self._number(row["fact_id"], _fact(row, self.config).key)
            self.fates[:, ordinal] = _FATE["refused"]

    def _number(self, fact_id: str, key: str) -> tuple[int, int]:
        """A fact's ordinal and its content key's code, assigned when first seen."""
        ordinal = self.ordinals.setdefault(fact_id, len(self.ordinals))
        code = self.codes.setdefault(key, len(self.codes))
        if code == len(self._key_names):
            self._key_names.append(key)
        if ordinal >= len(self._keys_of_ordinals):
            self._keys_of_ordinals = np.concatenate((self._keys_of_ordinals, self._keys_of_ordinals))
        self._keys_of_ordinals[ordinal] = code
        if ordinal >= self.fates.shape[1]:
            self.fates = np.concatenate((self.fates, np.zeros_like(self.fates)), axis=1)
        return ordinal, code

    def after_selection(self, write: Any, evicted: list[list[str]]) -> None:
        """The evicted facts' fate, the contradiction removals and storage's category rewrite."""
        table = self.memories.table
        gone = [(memory, table.index[fact_id]) for memory, ids in enumerate(evicted) for fact_id in ids]
        if gone:
            which, rows = np.array(gone).T
            self.fates[which, table.extra["ordinal"][rows]] = _FATE["evicted"]
        entries = [(row["supersedes"], index) for index, row in enumerate(write.rows) if row.get("supersedes")]
        if "contradiction" in self.stages and entries:
            self._contradiction(entries)
        if "storage" in self.stages:
            for row in write.rows:
                category = written_category(row["category"])
                if category != row["category"]:
                    table.recategorise(row["fact_id"], category)
                    self._categorise(table.index[row["fact_id"]], category)
        self.confirmed.update(dict.fromkeys(write.reinforced, write.now))
        self._shown = None

    def answerable(self, fact_id: str) -> np.ndarray:
        """Which memories can answer a question needing ``fact_id``; counts each loss by stage."""
        memories = self.memories
        ordinal = self.ordinals.get(fact_id)
        code = self.codes.get(fact_id) if ordinal is None else int(self._keys_of_ordinals[ordinal])
        holders = self._rows_of_key(code)
        stored = np.asarray(memories.present[:, holders].any(axis=1))
        found = stored
        if "injection" in self.stages:
            found = stored & self._injected()[:, holders].any(axis=1)
        fates = np.zeros(len(memories), dtype=np.int8) if ordinal is None else self.fates[:, ordinal]
        lost = np.flatnonzero(~found)
        for (fate, held), where in _by_value(fates[lost], stored[lost], lost):
            loss = attribute(False, None if fate == 0 else LOSSES[fate - 1], held)
            self.losses[where, LOSSES.index(loss or "rejected")] += 1
        return found

    def content_key(self, fact_id: str) -> str:
        """The content key of a fact added to the replay (KeyError for an id never added)."""
        return self._key_names[self._keys_of_ordinals[self.ordinals[fact_id]]]

    # ----------------------------------------------------------------------- for all memories

    def _rows_of_key(self, code: int | None) -> np.ndarray:
        """The table rows whose content key has ``code`` (none for ``None``)."""
        table = self.memories.table
        if code is None:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(table.extra["key"][: table.size] == code)

    def _categorise(self, row: int, category: str) -> None:
        extra = self.memories.table.extra
        extra["guaranteed"][row] = guaranteed_pool([category], self.config)[0]
        extra["protected"][row] = protected_categories([category], self.config)[0]

    def _forget(self, members: np.ndarray, rows: np.ndarray, gone: np.ndarray, fate: str) -> None:
        """Memories ``members`` lose the ``gone`` positions of their ``rows`` (from ``stored``)."""
        which = np.nonzero(gone)
        self.fates[members[which[0]], self.memories.table.extra["ordinal"][rows[which]]] = _FATE[fate]
        self.memories.discard(members, gone)

    def _staleness(self, members: np.ndarray, write: Any, new: int) -> None:
        """Spec 1.12 C3 on the facts stored before this update (the last ``new`` are its own)."""
        memories, table, config = self.memories, self.memories.table, self.config
        members = members[memories.sizes[members] - new >= config.staleness_min_candidates]
        if not len(members):
            return
        rows, valid = memories.stored(members, memories.sizes[members] - new)
        superseded = table.extra["superseded"][rows] & valid
        shown = superseded.any(axis=1)  # the reviewer proposes superseded candidates only
        if not shown.any():
            return
        members, rows, valid, superseded = members[shown], rows[shown], valid[shown], superseded[shown]
        created = table.times["created"][rows]
        stamps = self.stamps[members][:, None]
        confirmed = table.times["confirmed"][rows]
        at_apply = np.where(stamps & (confirmed != NO_TIME), confirmed, created)
        in_prompt = at_apply
        reinforced = sorted(table.index[fact_id] for fact_id in write.reinforced if fact_id in table.index)
        if reinforced:
            # The prompt was built before this update's stamps (1.11a C7).
            before = np.array([self.confirmed.get(table.ids[row], NO_TIME) for row in reinforced], dtype=np.int64)
            at = np.minimum(np.searchsorted(reinforced, rows), len(reinforced) - 1)
            previous = before[at]
            previous = np.where(previous != NO_TIME, previous, created)
            in_prompt = np.where(stamps & (np.asarray(reinforced)[at] == rows), previous, at_apply)
        days, protected = table.extra["valid_days"][rows], table.extra["protected"][rows]
        candidates = staleness_candidates(in_prompt, days, None, write.now, config, protected=protected) & valid
        proposed = review_proposals(candidates, superseded, config)
        chosen = np.flatnonzero(proposed.any(axis=1))
        if not len(chosen):
            return
        members, rows, valid, proposed = members[chosen], rows[chosen], valid[chosen], proposed[chosen]
        at_apply, days, protected = at_apply[chosen], days[chosen], protected[chosen]
        candidates = staleness_candidates(at_apply, days, None, write.now, config, protected=protected) & valid
        order = table.id_order
        removed = np.array([stale_removals(mine, theirs, table.confidence[row], config, storage_order=order[row])
                            for mine, theirs, row in zip(proposed, candidates, rows)])
        self._forget(members, rows, removed, "stale")

    def _admit(self, rows: list[Mapping[str, Any]], facts: list[_Fact]) -> None:
        """Spec 1.12 C5: the scope gate, the threshold and the duplicate skip for this update's facts."""
        memories, table = self.memories, self.memories.table
        if not rows:
            self._replacement = {}
            return
        new = [table.index[row["fact_id"]] for row in rows]
        existing = np.zeros((len(memories), len(rows)), dtype=bool)
        if "dedup" in self.stages:
            for index, fact in enumerate(facts):
                holders = np.setdiff1d(self._rows_of_key(self.codes[fact.key]), new, assume_unique=True)
                existing[:, index] = memories.present[:, holders].any(axis=1)
        outcomes, self._replacement = admit_many([fact.new for fact in facts], existing,
                                                 gate="admission" in self.stages, dedup="dedup" in self.stages,
                                                 config=self.config)
        refused = outcomes != "stored"
        if not refused.any():
            return
        members = np.flatnonzero(refused.any(axis=1))
        stored, valid = memories.stored(members)
        gone = np.zeros(stored.shape, dtype=bool)
        for index, row in enumerate(new):
            gone |= (stored == row) & valid & refused[members, index][:, None]
        duplicate = (outcomes[members] == "duplicate")
        which = np.nonzero(gone)
        positions = np.searchsorted(np.sort(new), stored[which])
        columns = np.argsort(new)[positions]
        fates = np.where(duplicate[which[0], columns], _FATE["duplicate"], _FATE["rejected"])
        self.fates[members[which[0]], table.extra["ordinal"][stored[which]]] = fates
        memories.discard(members, gone)

    def _contradiction(self, entries: list[tuple[str, int]]) -> None:
        """Spec 1.12 C7 for every memory holding a target at once (:func:`~.lifecycle.contradiction_removals`)."""
        memories, table = self.memories, self.memories.table
        targets = [table.index.get(target) for target, _ in entries]
        members = np.flatnonzero(memories.present[:, [row for row in targets if row is not None]].any(axis=1))
        if not len(members):
            return
        replacements = [self._replacement.get(index) for _, index in entries]  # every entry here is paired
        keys = [-1 if key is None else self.codes[key] for key in replacements]
        removed, _ = contradiction_removals(list(zip(targets, keys)), table.extra["key"][: table.size],
                                            memories.present[members, : table.size])
        stored, valid = memories.stored(members)
        self._forget(members, stored, removed[np.arange(len(members))[:, None], stored] & valid, "contradicted")

    def _injected(self) -> np.ndarray:
        """(M, table rows): the rows each memory shows (spec 1.13), cached until the next write."""
        if self._shown is None:
            memories, table = self.memories, self.memories.table
            shown = np.zeros((len(memories), table.size), dtype=bool)
            value = injection_value(table.confidence)
            for members in self._groups:
                if not len(members):
                    continue
                rows, valid = memories.stored(members)
                # get_context's order: confidence descending, then storage's (id ascending); padding last
                ranked = np.lexsort((table.id_order[rows], np.where(valid, -value[rows], np.inf), ~valid))
                rows, valid = np.take_along_axis(rows, ranked, 1), np.take_along_axis(valid, ranked, 1)
                first, later = table.extra["first_tokens"][rows], table.extra["tokens"][rows]
                taken = injected_in_order(valid, table.extra["guaranteed"][rows], first, later, self.config)
                which = np.nonzero(taken)
                shown[members[which[0]], rows[which]] = True
            self._shown = shown
        return self._shown


def _by_value(first: np.ndarray, second: np.ndarray, where: np.ndarray) -> list[tuple[tuple[int, bool], np.ndarray]]:
    """``where`` grouped by the pairs ``(first, second)`` at the same places."""
    groups: dict[tuple[int, bool], list[int]] = {}
    for a, b, at in zip(first.tolist(), second.tolist(), where.tolist()):
        groups.setdefault((a, b), []).append(at)
    return [(pair, np.array(ats)) for pair, ats in groups.items()]


def stage_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, capacity), over the traces of ``rows`` (replay rows with ``lost_*`` columns):
    the share of questions answered and the share lost to each stage; each row sums to 1."""
    lost = [f"lost_{name}" for name in LOSSES]
    totals = rows.groupby(["policy", "capacity"], sort=False)[["asks", "answerable", *lost]].sum()
    shares = totals[["answerable", *lost]].div(totals["asks"], axis=0)
    shares.columns = ["answered", *(LOSS_NAMES[name] for name in LOSSES)]
    return shares.reset_index()
