"""The offline optimum is exact (brute force on 1,000 tiny traces) and no policy beats it."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import pytest

from evictlab.analysis.traces.memory import replayable
from evictlab.analysis.traces.optimum import (
    answer_flow,
    most_answers_integer,
    most_answers_linear,
    offline_optimum,
    outline,
)
from evictlab.analysis.traces.replay import replay_policy
from evictlab.analysis.traces.schema import chunk_from_rows
from evictlab.policies import known_policies

START = 1_780_000_000_000_000


def tiny_trace(rng: random.Random) -> dict:
    """A random trace of a few facts, searches, confirmations and questions."""
    rows, added, moment = [], [], START
    for _ in range(rng.randint(3, 14)):
        moment += rng.choice([0, 1, 3600]) * 1_000_000
        kind = rng.choice(["add", "add", "add", "ask", "ask", "search", "confirm"])
        if kind == "add" and len(added) < 7:
            fact_id = f"f{len(added)}"
            added.append(fact_id)
            category = rng.choice(["context", "preference", "correction"])
            rows.append({"time": moment, "event": "add", "fact_id": fact_id, "content_length": 10,
                         "confidence": rng.choice([0.7, 0.8, 0.9]), "category": category})
        elif kind == "ask" and added:
            # Sometimes a question about a fact not added yet (unanswerable for everyone).
            rows.append({"time": moment, "event": "ask", "fact_id": f"f{rng.randrange(len(added) + 1)}"})
        elif kind == "search" and added:
            rows.append({"time": moment, "event": "search", "fact_ids": rng.sample(added, min(2, len(added)))})
        elif kind == "confirm" and added:
            rows.append({"time": moment, "event": "confirm", "fact_ids": [rng.choice(added)], "reinforcement": True})
    return chunk_from_rows(rows)


def tiny_cases(seed: int, count: int) -> Iterator[tuple[dict, int]]:
    """``count`` seeded pairs of a tiny trace and a capacity of 1 to 3."""
    rng = random.Random(seed)
    for _ in range(count):
        yield tiny_trace(rng), rng.randint(1, 3)


def brute_force(chunk: dict, capacity: int) -> int:
    """The best answer count over every schedule that evicts exactly the excess at each write."""
    shape = outline([chunk])
    arrivals: dict[int, list[str]] = {}
    for fact_id, write in shape.fact_write.items():
        arrivals.setdefault(write, []).append(fact_id)
    asks_after: dict[int, list[str]] = {}
    for period, fact_id in shape.asks:
        asks_after.setdefault(period, []).append(fact_id)

    def best(write: int, memory: frozenset) -> int:
        answered = sum(fact_id in memory for fact_id in asks_after.get(write - 1, []))
        if write > shape.writes:
            return answered
        candidates = memory | set(arrivals.get(write, []))
        excess = len(candidates) - capacity
        if excess <= 0:
            return answered + best(write + 1, frozenset(candidates))
        return answered + max(
            best(write + 1, candidates - set(evicted))
            for evicted in itertools.combinations(sorted(candidates), excess)
        )

    return best(1, frozenset())


@pytest.mark.slow
def test_optimum_equals_brute_force_on_a_thousand_tiny_traces():
    binding = 0
    for chunk, capacity in tiny_cases(20261201, 1000):
        found = offline_optimum([chunk], capacity)
        assert found.answerable == brute_force(chunk, capacity), (chunk, capacity)
        assert found.answerable <= found.reachable <= found.asks
        binding += found.answerable < found.reachable
    assert binding >= 50  # the capacity binds often enough for the check to mean something


def test_integer_programme_equals_brute_force_and_the_linear_programme():
    # offline_optimum reaches the integer programme only when the linear programme's solution
    # is not integral, which never happens on a flow; so both are solved here on every trace.
    binding = 0
    for chunk, capacity in tiny_cases(4242, 150):
        flow = answer_flow(outline([chunk]), capacity)
        if flow.reachable == 0:
            continue
        exact = brute_force(chunk, capacity)
        assert most_answers_integer(flow) == exact, (chunk, capacity)
        assert most_answers_linear(flow) == exact, (chunk, capacity)
        binding += exact < flow.reachable
    assert binding >= 10  # the capacity binds often enough for the check to mean something


def test_no_policy_beats_the_optimum():
    policies = [name for name in known_policies() if replayable(name)]
    policies += ["confidence+reserve(correction,0.5,2)", "lru+mmr(0.5)"]
    below = 0
    for chunk, capacity in tiny_cases(7, 150):
        best = offline_optimum([chunk], capacity)
        for policy in policies:
            replayed = replay_policy([chunk], policy, capacity).counts
            bound = best.reachable if policy == "keep-all" else best.answerable
            assert replayed.answerable <= bound, (policy, capacity, chunk)
            assert replayed.asks == best.asks
            below += replayed.answerable < bound
    assert below > 0


def test_capacity_zero_and_unasked_traces():
    chunk = chunk_from_rows([
        {"time": START, "event": "add", "fact_id": "a", "content_length": 1, "confidence": 0.9, "category": "x"},
        {"time": START + 1, "event": "ask", "fact_id": "a"},
    ])
    nothing_kept = offline_optimum([chunk], 0)
    assert (nothing_kept.answerable, nothing_kept.asks, nothing_kept.reachable) == (0, 1, 1)
    assert offline_optimum([chunk], 1).answerable == 1
    with pytest.raises(ValueError, match="capacity"):
        offline_optimum([chunk], -1)
