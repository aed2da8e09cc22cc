"""The zoo's fast memory decides as the policies' own ``select`` at every write, ties included."""

from __future__ import annotations

import random

import pytest

from evictlab.analysis.traces.generate import WorkloadParams, generate
from evictlab.analysis.traces.memory import ReferenceMemory, replayable, uncapped
from evictlab.analysis.traces.replay import make_memory, replay
from evictlab.analysis.traces.schema import chunk_from_rows
from evictlab.analysis.traces.zoo_memory import ZooMemory, rank_rule
from evictlab.errors import ContractError
from evictlab.policies import DEERMEM_POLICIES, known_policies, policy_class, resolve_policy

START = 1_780_000_000_000_000
SECOND = 1_000_000
ZOO = [name for name in known_policies() if name not in DEERMEM_POLICIES and replayable(name) and not uncapped(name)]
VARIANTS = [
    "confidence+reserve(correction,0.5,2)",
    "lru+reserve(context,0.4,1)",
    "lfu-aging(half_life_days=0.5)",
    "memoryos-heat(time_constant_hours=2)",
    "memorybank(expiry_days=1)",
    "memorybank-seeded(expiry_days=2)",
    "dory(archive_threshold=0.6,salience_half_life_days=1)",
    "generative-agents(decay_per_hour=0.9)",
]


def tied_trace(rng: random.Random, length: int = 60) -> dict:
    """A random trace full of ties: few distinct times, confidences and categories."""
    rows, added, moment = [], [], START
    for _ in range(length):
        moment += rng.choice([0, 0, 0, SECOND, 3600 * SECOND, 86_400 * SECOND, 40 * 86_400 * SECOND])
        kind = rng.choice(["add", "add", "add", "search", "search", "confirm", "ask", "tick"])
        if kind == "add" or not added:
            fact_id = f"f{len(added)}"
            added.append(fact_id)
            rows.append({"time": moment, "event": "add", "fact_id": fact_id, "content_length": 3,
                         "confidence": rng.choice([0.7, 0.8, 0.8, 1.0]),
                         "category": rng.choice(["context", "correction", "knowledge"])})
        elif kind == "search":
            rows.append({"time": moment, "event": "search",
                         "fact_ids": [rng.choice(added) for _ in range(rng.randint(0, 4))] + ["", "nowhere"]})
        elif kind == "confirm":
            ids = rng.sample(added, min(len(added), rng.randint(1, 3)))
            rows.append({"time": moment, "event": "confirm", "fact_ids": ids,
                         "scopes": [rng.choice(["user", " User ", "agent"]) for _ in ids],
                         "reinforcement": rng.random() < 0.8})
        elif kind == "ask":
            rows.append({"time": moment, "event": "ask", "fact_id": rng.choice(added)})
        else:
            rows.append({"time": moment, "event": "tick"})
    return chunk_from_rows(rows)


def kept_lists(memory, chunk) -> list[tuple[str, ...]]:
    kept: list[tuple[str, ...]] = []
    replay([chunk], memory, on_write=lambda index, state: kept.append(tuple(state.kept_ids())))
    return kept


def reference(policy: str, capacity: int, seed: int) -> ReferenceMemory:
    memory = ReferenceMemory(policy, capacity, seed=seed)
    memory.select_every_write = True  # the straightforward loop: the selector on every write
    return memory


def test_every_zoo_policy_has_a_fast_path():
    assert ZOO and set(ZOO) >= {"fifo", "lru", "lfu-aging", "random", "dory", "memorybank-seeded"}
    for name in [*ZOO, *VARIANTS]:
        assert rank_rule(resolve_policy(name)) is not None, name
        assert isinstance(make_memory(name, 5), ZooMemory)
    assert make_memory("keep-all", 5).capacity is None  # unlimited: never capped
    # No rule for a modifier that re-ranks, nor for a reservation over hybrid-v1's score.
    for name in ("lru+mmr(0.5)", "hybrid-v1+reserve(correction,0.2,3)"):
        assert rank_rule(resolve_policy(name)) is None
        assert isinstance(make_memory(name, 5), ReferenceMemory)
        with pytest.raises(ContractError, match="no fast replay"):
            ZooMemory(name, 5)


@pytest.mark.parametrize("policy", [*ZOO, *VARIANTS])
def test_zoo_memory_matches_the_selector_at_every_write(policy):
    rng = random.Random(policy)
    compared = evicting = 0
    for trial in range(12):
        chunk = tied_trace(rng)
        capacity = rng.choice([1, 2, 3, 5, 8])
        seed = rng.randrange(3)
        fast = kept_lists(ZooMemory(policy, capacity, seed=seed), chunk)
        assert fast == kept_lists(reference(policy, capacity, seed), chunk), (policy, trial, capacity)
        compared += len(fast)
        evicting += sum(len(kept) == capacity for kept in fast)
    assert compared > 100 and evicting > 50


@pytest.mark.parametrize("policy", ["fifo", "lfu-aging", "memorybank-seeded", "dory", "generative-agents-code"])
def test_zoo_memory_matches_the_selector_on_a_generated_workload(policy):
    workload = WorkloadParams(horizon_days=25, facts_per_day=5, search_rate=12, confirmation_rate=3)
    chunk = generate(workload, seed=4)
    for capacity in (4, 15):
        expected = kept_lists(reference(policy, capacity, 1), chunk)
        assert kept_lists(ZooMemory(policy, capacity, seed=1), chunk) == expected


def test_seeded_policies_depend_on_the_seed():
    chunk = tied_trace(random.Random(3), 120)
    assert policy_class("random").seeded
    runs = {seed: kept_lists(ZooMemory("random", 4, seed=seed), chunk) for seed in range(3)}
    assert runs[0] != runs[1] or runs[1] != runs[2]
