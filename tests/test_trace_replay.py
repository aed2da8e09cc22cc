"""Trace replay: the lockstep memories decide as the scalar reference at every write, ties
included, and the spec's usage (1.7) and reinforcement (1.9) rules hold through the replayer."""

from __future__ import annotations

import datetime as _dt
import random

import pytest

from evictlab.analysis.traces.generate import WorkloadParams, generate
from evictlab.analysis.traces.memory import Lockstep, MemorySpec, replayable, uncapped
from evictlab.analysis.traces.metrics import _shares, default_policies, role_of, uncapped_bounds
from evictlab.analysis.traces.reference import ReferenceMemory
from evictlab.analysis.traces.replay import (
    audit_trail,
    make_memory,
    reinforced_ids,
    replay,
    replay_policy,
)
from evictlab.analysis.traces.schema import chunk_from_rows, rows, time_us
from evictlab.analysis.traces.stages import Lifecycle
from evictlab.errors import ContractError
from evictlab.policies import BOUND, PolicyParams, known_policies, policy_class, register, registry, resolve_policy
from evictlab.policies.fifo import FifoPolicy
from evictlab.policies.keep_all import KeepAllPolicy

UTC = _dt.UTC
START = 1_780_000_000_000_000
SECOND = 1_000_000
#: Every registered policy a trace replays under a cap, modified specs and a scalar-only one (mmr).
POLICIES = [name for name in known_policies() if replayable(name) and not uncapped(name)]
VARIANTS = [
    "confidence+reserve(correction,0.5,2)",
    "lru+reserve(context,0.4,1)",
    "hybrid-v1+reserve(correction,0.2,3)",
    "lfu-aging(half_life_days=0.5)",
    "memoryos-heat(time_constant_hours=2)",
    "memorybank(expiry_days=1)",
    "memorybank-seeded(expiry_days=2)",
    "dory(archive_threshold=0.6,salience_half_life_days=1)",
    "generative-agents(decay_per_hour=0.9)",
    "lru+mmr(0.5)",
]


def at(text: str) -> int:
    return time_us(_dt.datetime.fromisoformat(text).replace(tzinfo=UTC))


def add(moment: str, fact_id: str, confidence: float = 0.8, category: str = "context") -> dict:
    return {"time": at(moment), "event": "add", "fact_id": fact_id, "content_length": 5,
            "confidence": confidence, "category": category}


def steps(memory, chunk) -> list[tuple[str, ...]]:
    kept: list[tuple[str, ...]] = []
    replay([chunk], memory, on_write=lambda index, state: kept.append(tuple(state.kept_ids())))
    return kept


def all_steps(memories, chunk) -> list[list[tuple[str, ...]]]:
    """The kept list of every memory of a lockstep after every write, by memory."""
    kept: list[list[tuple[str, ...]]] = [[] for _ in range(len(memories))]

    def record(index, state):
        for memory in range(len(state)):
            kept[memory].append(tuple(state.kept_ids(memory)))

    replay([chunk], memories, on_write=record)
    return kept


def reference_steps(policy: str, capacity: int, chunk, seed: int = 0, params=None) -> list[tuple[str, ...]]:
    memory = ReferenceMemory(policy, capacity, params, seed=seed)
    memory.select_every_write = True  # the straightforward loop: the selector on every write
    return steps(memory, chunk)


def tied_trace(rng: random.Random, length: int = 60, *, hex_ids: bool = False) -> dict:
    """A random trace full of ties: few distinct times, confidences and categories (``hex_ids``:
    ids ``fact_`` + 32 random hex digits, as an import gives a fact without one, spec 1.14)."""
    records, added, moment = [], [], START
    for _ in range(length):
        moment += rng.choice([0, 0, 0, SECOND, 3600 * SECOND, 86_400 * SECOND, 40 * 86_400 * SECOND])
        kind = rng.choice(["add", "add", "add", "search", "search", "confirm", "ask", "tick"])
        if kind == "add" or not added:
            fact_id = f"fact_{rng.getrandbits(128):032x}" if hex_ids else f"f{len(added)}"
            added.append(fact_id)
            records.append({"time": moment, "event": "add", "fact_id": fact_id, "content_length": 3,
                            "confidence": rng.choice([0.7, 0.8, 0.8, 1.0]),
                            "category": rng.choice(["context", "correction", " Correction", "knowledge"])})
        elif kind == "search":
            records.append({"time": moment, "event": "search",
                            "fact_ids": [rng.choice(added) for _ in range(rng.randint(0, 4))] + ["", "nowhere"]})
        elif kind == "confirm":
            ids = rng.sample(added, min(len(added), rng.randint(1, 3)))
            records.append({"time": moment, "event": "confirm", "fact_ids": ids,
                            "scopes": [rng.choice(["user", " User ", "agent"]) for _ in ids],
                            "reinforcement": rng.random() < 0.8})
        elif kind == "ask":
            records.append({"time": moment, "event": "ask", "fact_id": rng.choice(added)})
        else:
            records.append({"time": moment, "event": "tick"})
    return chunk_from_rows(records)


@pytest.mark.parametrize("policy", [*POLICIES, *VARIANTS])
def test_lockstep_matches_the_scalar_reference_at_every_write(policy):
    # Every memory of one lockstep (capacities 1-8, seeds 0-2) against its own scalar loop.
    rng = random.Random(policy)
    compared = evicting = 0
    for trial in range(6):
        chunk = tied_trace(rng)
        specs = [MemorySpec.of(policy, capacity, seed) for capacity in (1, 2, 3, 5, 8) for seed in (0, 2)]
        params = PolicyParams(correction_reserved_fraction=0.5, correction_reserved_max=2) if trial % 2 else None
        found = all_steps(Lockstep(specs, params), chunk)
        for spec, kept in zip(specs, found):
            assert kept == reference_steps(policy, spec.capacity, chunk, spec.seed, params), (policy, trial, spec)
            compared += len(kept)
            evicting += sum(len(state) == spec.capacity for state in kept)
    assert compared > 1000 and evicting > 500


def test_a_lockstep_of_scalar_and_vectorised_policies_matches_the_reference_at_every_write():
    # mmr has no rank keys, so its memories are decided by their own select beside the one
    # selector's rows in the same write: the kept and evicted pieces are merged by position.
    rng = random.Random("mixed")
    policies = ["lru+mmr(0.5)", "hybrid-v1", "confidence+mmr(0.5)", "fifo", "lfu-aging"]
    specs = [MemorySpec.of(policy, capacity, seed) for policy in policies for capacity in (1, 3, 5) for seed in (0, 2)]
    assert {resolve_policy(policy).vectorised for policy in policies} == {True, False}
    evicting = 0
    for _ in range(4):
        chunk = tied_trace(rng, 80)
        for spec, kept in zip(specs, all_steps(Lockstep(specs), chunk)):
            assert kept == reference_steps(spec.policy, spec.capacity, chunk, spec.seed), spec
            evicting += sum(len(state) == spec.capacity for state in kept)
    assert evicting > 500


@pytest.mark.parametrize("policy", ["hybrid-v1", "confidence", "fifo", "lfu-aging", "memorybank-seeded", "dory"])
def test_lockstep_matches_the_reference_on_generated_workloads(policy):
    small = WorkloadParams(horizon_days=20, facts_per_day=6, search_rate=15, confirmation_rate=3, correction_rate=1.5)
    rng = random.Random(policy)
    for seed in range(2):
        chunk = generate(small.replace(confidence_noise=rng.choice([0.0, 0.3])), seed)
        params = PolicyParams(correction_reserved_fraction=0.5, correction_reserved_max=2) if seed % 2 else None
        specs = [MemorySpec.of(policy, capacity, 1) for capacity in (1, 3, 10)]
        for spec, kept in zip(specs, all_steps(Lockstep(specs, params), chunk)):
            assert kept == reference_steps(policy, spec.capacity, chunk, 1, params)
            assert any(len(state) == spec.capacity for state in kept)


def test_seeded_policies_depend_on_the_seed():
    chunk = tied_trace(random.Random(3), 120)
    assert policy_class("random").seeded
    runs = all_steps(Lockstep([MemorySpec.of("random", 4, seed) for seed in range(3)]), chunk)
    assert runs[0] != runs[1] or runs[1] != runs[2]


def test_state_is_bounded_by_the_caps_and_keep_all_grows_linearly():
    chunk = generate(WorkloadParams(horizon_days=45, facts_per_day=30, search_rate=3), seed=2)
    added = chunk["event"].count("add")
    specs = [MemorySpec.of("lru", 5), MemorySpec.of("lfu-aging", 20), MemorySpec.of("hybrid-v1", 3)]
    capped = Lockstep(specs)
    found = all_steps(capped, chunk)  # the table is compacted (rows reused) along the way
    for spec, kept in zip(specs, found):
        assert kept == reference_steps(spec.policy, spec.capacity, chunk)
    assert added > 1200 and capped.table.size <= 1024 and len(capped.table.index) == capped.table.size
    assert capped.present.shape[1] <= 2 * 1024
    everything = make_memory("keep-all", 5)
    (counts,) = replay([chunk], everything)
    assert counts.final_size == added == everything.table.size and counts.evictions == 0


def test_size_groups_hold_every_memory_once_by_capacity():
    specs = [MemorySpec.of("keep-all", None)]
    specs += [MemorySpec.of(policy, capacity) for capacity in (500, 10, 100, 20, 200, 50) for policy in ("lru", "fifo")]
    groups = Lockstep(specs).size_groups()
    assert sorted(memory for group in groups for memory in group.tolist()) == list(range(len(specs)))
    caps = [sorted({specs[memory].capacity for memory in group.tolist()}) for group in groups]
    assert caps == [[10, 20, 50, 100], [200, 500], [None]]
    assert all(group.tolist() == sorted(group.tolist()) for group in groups)
    assert [len(group) for group in Lockstep(specs).size_groups(spread=1000)] == [12, 1]


def test_exact_ties_break_by_stored_order():
    # Same confidence, same update: exact ties, broken by input position (spec 1.4); the kept
    # facts are stored, and listed, sorted by id (1.14).
    rows = [add("2026-01-01T00:00:00", name, 0.8) for name in "abcd"]
    rows.append(add("2026-01-02T00:00:00", "e", 0.8))
    chunk = chunk_from_rows(rows)
    for policy in ("hybrid-v1", "confidence"):
        assert steps(make_memory(policy, 3), chunk) == steps(ReferenceMemory(policy, 3), chunk)
    assert steps(make_memory("confidence", 3), chunk)[-1] == ("a", "b", "c")
    # hybrid-v1: the newest fact is the freshest; among the tied older ones input order wins.
    assert steps(make_memory("hybrid-v1", 3), chunk)[-1] == ("a", "b", "e")


def search(moment: str, *fact_ids: str) -> dict:
    return {"time": at(moment), "event": "search", "fact_ids": list(fact_ids)}


def kept_after(policy: str, capacity: int, chunk) -> list[tuple[str, ...]]:
    """The kept set after the last write, from the lockstep and from the scalar reference (equal)."""
    found = [set(steps(memory, chunk)[-1]) for memory in (make_memory(policy, capacity),
                                                          ReferenceMemory(policy, capacity))]
    assert found[0] == found[1], policy
    return sorted(found[0])


def test_the_selector_sees_the_snapshot_sorted_by_id_then_the_new_facts():
    # Spec 1.12 C6: the input order is the snapshot facts, which storage returns sorted by id
    # (1.14), then the update's new facts; 1.4 breaks ties by input position. Ids not in
    # insertion order, cap 2, confidence: z (0.8), then a (0.8), under the cap; then m (0.9).
    # DeerMem's input is [a, z, m]: m first, then the tie a/z by input position, a before z:
    # kept {a, m}, z evicted. (In insertion order, [z, a, m], z would win the tie.)
    records = [add("2026-01-01T00:00:00", "z", 0.8), add("2026-01-02T00:00:00", "a", 0.8),
               add("2026-01-03T00:00:00", "m", 0.9)]
    assert kept_after("confidence", 2, chunk_from_rows(records)) == ["a", "m"]
    asks = [{"time": at("2026-01-04T00:00:00"), "event": "ask", "fact_id": name} for name in ("a", "z")]
    result = replay_policy([chunk_from_rows(records + asks)], "confidence", 2)
    assert (result.counts.asks, result.counts.answerable) == (2, 1)


def test_facts_that_pass_each_other_tie_in_id_order_not_rank_order():
    # lru (a cache: the update's new facts are admitted, the residents trimmed to the room left)
    # at cap 3, ids in insertion order. f1-f3 arrive together; f3 is searched, so at f4's write
    # the residents rank f3 (searched at t2), then f1 and f2 (created t1, tied: f1 by input
    # position): room 2 keeps f3 and f1, f2 goes. DeerMem stores {f1, f3, f4}; its next snapshot
    # is [f1, f3, f4] (by id), the rank order was [f3, f1]. A search returns f1 and f3 at t4, so
    # they tie again; f5 and f6 arrive together, leaving room 1: the residents [f1, f3, f4] rank
    # f1 and f3 (t4, tied: f1 first by input position), then f4 (created t3): kept {f1, f5, f6}.
    # (Kept in rank order, [f3, f1, f4], f3 would win.)
    chunk = chunk_from_rows([
        *(add("2026-01-01T00:00:00", name) for name in ("f1", "f2", "f3")),
        search("2026-01-02T00:00:00", "f3"),
        add("2026-01-03T00:00:00", "f4"),
        search("2026-01-04T00:00:00", "f1", "f3"),
        add("2026-01-05T00:00:00", "f5"), add("2026-01-05T00:00:00", "f6"),
    ])
    assert kept_after("lru", 3, chunk) == ["f1", "f5", "f6"]


def test_lockstep_matches_the_reference_with_random_hex_ids():
    # Imported stores: ids are random hex, so id order is not insertion order and every write's
    # snapshot is reordered before the selector sees it.
    rng = random.Random("hex")
    for trial in range(3):
        chunk = tied_trace(rng, 80, hex_ids=True)
        for policy in ("confidence", "hybrid-v1", "lru", "lfu-aging", "sieve", "random", "lru+mmr(0.5)"):
            specs = [MemorySpec.of(policy, capacity, seed) for capacity in (1, 2, 3, 5, 8) for seed in (0, 2)]
            for spec, kept in zip(specs, all_steps(Lockstep(specs), chunk)):
                assert kept == reference_steps(policy, spec.capacity, chunk, spec.seed), (policy, trial, spec)
                assert all(list(state) == sorted(state) for state in kept)  # as storage returns them


def test_usage_vector_through_the_replayer():
    # Spec 1.7: accesses at 2026-08-01 and 2026-08-31 (30-day half-life) give heat 1.5, count 2.
    chunk = chunk_from_rows([
        add("2026-07-01T00:00:00", "f"),
        {"time": at("2026-08-01T00:00:00"), "event": "search", "fact_ids": ["f", "", "f", "gone"]},
        {"time": at("2026-08-31T00:00:00"), "event": "search", "fact_ids": ["f"]},
    ])
    reference = ReferenceMemory("hybrid-v1", 5)
    replay([chunk], reference)
    assert reference.usage == {"f": {"accessHeat": 1.5, "accessCount": 2, "lastAccessedAt": "2026-08-31T00:00:00Z"}}
    lockstep = Lockstep([MemorySpec.of("hybrid-v1", 5), MemorySpec.of("lfu-aging", 5)])
    replay([chunk], lockstep)
    table, row = lockstep.table, lockstep.table.index["f"]
    assert table.heat[row] == 1.5 and table.counts["access_count"][row] == 2
    assert table.times["accessed"][row] == at("2026-08-31T00:00:00")


def test_reinforcement_gate_and_stamping_order():
    # Spec 1.9: scope stripped and lower-cased, id stripped, batch gate on the signal.
    assert reinforced_ids([" fact_a ", "b", "c", " "], ["USER", "thread", " user ", "user"], True) == {"fact_a", "c"}
    assert reinforced_ids(["fact_a"], None, False) == set()
    chunk = chunk_from_rows([
        add("2026-01-01T00:00:00", "old", 0.9),
        add("2026-01-01T00:00:00", "other", 0.9),
        # One update: the confirmation stamps facts already in memory, before "new" is added.
        {"time": at("2026-03-01T00:00:00"), "event": "confirm", "fact_ids": ["other", "new"], "reinforcement": True},
        add("2026-03-01T00:00:00", "new", 0.7),
        {"time": at("2026-03-02T00:00:00"), "event": "confirm", "fact_ids": ["old"], "reinforcement": False},
    ])
    reference = ReferenceMemory("hybrid-v1", 10)
    replay([chunk], reference)
    facts = {fact["id"]: fact for fact in reference.facts}
    assert facts["other"]["lastConfirmedAt"] == "2026-03-01T00:00:00Z"
    assert facts["other"]["confirmationCount"] == 1
    assert "lastConfirmedAt" not in facts["new"] and "lastConfirmedAt" not in facts["old"]
    # confirmationCount vectors 0 -> 1 and 3 -> 4: three more confirmations of "other".
    again = [{"time": at(f"2026-04-0{day}T00:00:00"), "event": "confirm", "fact_ids": ["other"], "reinforcement": True}
             for day in (1, 2, 3)]
    longer = chunk_from_rows([*rows(chunk), *again])
    counts = []
    replay([longer], ReferenceMemory("hybrid-v1", 10), on_write=lambda index, memory: counts.append(
        next(fact.get("confirmationCount") for fact in memory.facts if fact["id"] == "other")))
    assert counts[:2] == [None, 1] and counts[-2:] == [3, 4]
    lockstep = make_memory("memoryos-heat", 10)
    replay([longer], lockstep)
    table, row = lockstep.table, lockstep.table.index["other"]
    assert table.counts["confirmation_count"][row] == 4
    assert table.times["confirmed"][row] == at("2026-04-03T00:00:00")


def test_confirmed_fact_survives_hybrid_but_not_confidence_and_the_shadow_disagrees():
    # Spec 1.11's updater vector, as a trace: cap 10, eight fresh 0.99 facts, stale_high,
    # confirmed_recently, then one new 0.8 fact.
    rows = [add("2025-01-01T00:00:00", "stale_high", 0.9), add("2025-01-01T00:00:00", "confirmed_recently", 0.7)]
    rows.append({"time": at("2026-08-12T00:00:00"), "event": "confirm", "fact_ids": ["confirmed_recently"],
                 "reinforcement": True})
    rows += [add("2026-08-12T00:00:00", f"p{index}", 0.99) for index in range(8)]
    rows.append(add("2026-08-13T00:00:00", "new", 0.8))
    chunk = chunk_from_rows(rows)
    hybrid = steps(make_memory("hybrid-v1", 10), chunk)[-1]
    confidence = steps(make_memory("confidence", 10), chunk)[-1]
    assert "confirmed_recently" in hybrid and "stale_high" not in hybrid
    assert "stale_high" in confidence and "confirmed_recently" not in confidence
    (event,) = audit_trail([chunk], "confidence", 10)
    assert event["occurredAt"] == "2026-08-13T00:00:00Z" and event["maxFacts"] == 10
    assert [item["factId"] for item in event["evicted"]] == ["confirmed_recently"]
    assert event["shadow"] == {"policyVersion": "hybrid-v1", "wouldEvict": ["stale_high"], "disagrees": True}
    (own,) = audit_trail([chunk], "hybrid-v1", 10)
    assert "shadow" not in own and [item["factId"] for item in own["evicted"]] == ["stale_high"]


def test_metrics_count_answers_staleness_and_churn():
    chunk = chunk_from_rows([
        add("2026-01-01T00:00:00", "v1", 0.9),
        add("2026-01-02T00:00:00", "v2", 0.7) | {"supersedes": "v1"},
        {"time": at("2026-01-03T00:00:00"), "event": "ask", "fact_id": "v2", "supersedes": "v1"},
        {"time": at("2026-01-03T00:00:00"), "event": "ask", "fact_id": "never"},
        {"time": at("2026-01-04T00:00:00"), "event": "tick"},
    ])
    counts = replay_policy([chunk], "confidence", 1).counts
    metrics = counts.metrics(1)
    assert (counts.asks, counts.answerable, counts.supersede_asks, counts.stale_kept) == (2, 0, 1, 1)
    assert metrics["stale_kept_rate"] == 1.0 and metrics["answerable_rate"] == 0.0
    # v1 enters (churn 1); v2 is evicted at once (no churn); every event sees one fact in memory.
    assert (counts.evictions, counts.churn, counts.occupancy_sum) == (1, 1, 5)
    kept_new = replay_policy([chunk], "fifo", 1).counts
    assert (kept_new.answerable, kept_new.stale_kept, kept_new.churn) == (1, 0, 3)


def test_unsupported_and_unknown_policies_are_refused():
    with pytest.raises(ContractError, match="offline optimum"):
        ReferenceMemory("oracle", 5)
    with pytest.raises(Exception, match="unknown policy"):
        ReferenceMemory("nope", 5)
    with pytest.raises(ContractError, match="capacity"):
        make_memory("hybrid-v1", 0)


def test_bounds_are_known_by_their_traits(monkeypatch):
    monkeypatch.setattr(registry, "_POLICIES", dict(registry._POLICIES))

    @register
    class Clairvoyant(KeepAllPolicy):  # a bound that reads support facts: no unlimited trait
        name = "test-clairvoyant"
        role = BOUND
        unlimited = False

    @register
    class Infinite(FifoPolicy):  # any policy declared unlimited runs without a cap
        name = "test-infinite"
        unlimited = True

    assert not replayable("test-clairvoyant") and not replayable("test-clairvoyant+reserve(correction)")
    with pytest.raises(ContractError, match="offline optimum"):
        replay_policy([chunk_from_rows([add("2026-01-01T00:00:00", "a")])], "test-clairvoyant", 1)
    assert replayable("test-infinite") and uncapped("test-infinite") and not uncapped("fifo")
    chunk = chunk_from_rows([add(f"2026-01-0{day}T00:00:00", f"f{day}") for day in range(1, 5)])
    assert replay_policy([chunk], "test-infinite", 1).counts.final_size == 4
    assert replay_policy([chunk], "fifo", 1).counts.final_size == 1
    assert "test-infinite" in uncapped_bounds() and "test-infinite" not in default_policies()
    assert role_of("test-clairvoyant") == BOUND and role_of("random+reserve(correction)") == "baseline"


def test_message_rows_are_the_next_updates_feed_not_events():
    chunk = chunk_from_rows([
        add("2026-01-01T00:00:00", "a"),
        {"time": at("2026-01-02T00:00:00"), "event": "message", "role": "human", "text": "yes, exactly"},
        {"time": at("2026-01-02T00:00:00"), "event": "confirm", "fact_ids": ["a"], "reinforcement": True},
        add("2026-01-02T00:00:00", "b"),
        {"time": at("2026-01-03T00:00:00"), "event": "tick"},
    ])
    writes = []
    memories = make_memory("fifo", 5)
    lifecycle = Lifecycle(frozenset(), memories)  # no stage: watch the writes
    apply = lifecycle.before_selection
    lifecycle.before_selection = lambda write: (writes.append(write), apply(write))  # type: ignore[method-assign]
    (counts,) = replay([chunk], memories, lifecycle=lifecycle)
    assert counts.events == 4 and counts.updates == 2  # the message row is no event and ends no update
    assert [write.messages for write in writes] == [(), (("human", "yes, exactly"),)]
    assert writes[1].reinforced == {"a"} and [row["fact_id"] for row in writes[1].rows] == ["b"]


def test_admission_rule_per_policy():
    # A searched resident and a newcomer at capacity 1: a cache admits the newcomer (lfu-aging
    # would otherwise keep the resident forever); DeerMem's rule lets the newcomer compete.
    chunk = chunk_from_rows([
        add("2026-01-01T00:00:00", "old", 0.9),
        {"time": at("2026-01-02T00:00:00"), "event": "search", "fact_ids": ["old"]},
        add("2026-01-03T00:00:00", "new", 0.5),
        add("2026-01-04T00:00:00", "a", 0.5),
        add("2026-01-04T00:00:00", "b", 0.5),
    ])
    assert policy_class("lfu-aging").admission == "admit" and policy_class("confidence").admission == "compete"
    assert resolve_policy("lru+reserve(correction)").admission == "admit"
    for policy, expected in (("lfu-aging", [("old",), ("new",), ("a",)]), ("confidence", [("old",)] * 3)):
        assert steps(make_memory(policy, 1), chunk) == expected
        assert steps(ReferenceMemory(policy, 1), chunk) == expected
    (cache,) = replay([chunk], make_memory("lfu-aging", 1))
    (deermem,) = replay([chunk], make_memory("confidence", 1))
    # Two facts arrive at once over a cap of 1: one of them is evicted on arrival even when admitted.
    assert cache.evicted_on_arrival == 1 and cache.metrics(1)["arrival_eviction_rate"] == 1 / 4
    assert deermem.evicted_on_arrival == 3


@pytest.mark.parametrize("count", [1, 2, 3, 20])
def test_a_traces_policies_are_shared_out_in_order_with_the_bounds_first(count):
    policies = default_policies()
    shares = _shares(policies, count)
    assert [policy for share in shares for policy in share] == policies  # contiguous runs, in order
    assert len(shares) <= count and all(shares[1:])  # only the first (the bounds' task) may hold no policy
    if count == 2:  # the bounds count as two policies in the first share
        assert len(shares[1]) - len(shares[0]) == 2
    assert _shares(["lru", "fifo"], 2) == [[], ["lru", "fifo"]]  # the first task replays the bounds alone
