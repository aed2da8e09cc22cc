"""Ties at the cut line in a replay (analysis.traces.expectation): ``random`` as its exact
expectation and ``confidence``'s tie-neutral expectation equal a brute force over every tie
order on small traces, and the tie counts say how often the cut fell inside a tie."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import pytest

from evictlab.analysis.traces.memory import MemorySpec
from evictlab.analysis.traces.replay import replay_specs
from evictlab.analysis.traces.schema import chunk_from_rows

START, SECOND = 1_780_000_000_000_000, 1_000_000


def tiny_trace(rng: random.Random) -> tuple[list[dict], list[tuple[list[tuple[str, float]], list[str]]]]:
    """Rows of a small trace with many equal confidences, and its steps (new facts, questions)."""
    rows, steps, count = [], [], 0
    for step in range(rng.randint(3, 7)):
        new = []
        for _ in range(rng.randint(1, 3)):
            fact_id, confidence = f"f{count}", rng.choice([0.6, 0.8, 0.8, 0.9, 0.9])
            count += 1
            new.append((fact_id, confidence))
            rows.append({"time": START + step * 10 * SECOND, "event": "add", "fact_id": fact_id, "content_length": 10,
                         "confidence": confidence, "category": rng.choice(["context", "correction"])})
        asked = [f"f{rng.randrange(count)}" for _ in range(rng.randint(0, 2))]
        rows += [{"time": START + (step * 10 + 5) * SECOND, "event": "ask", "fact_id": fact_id} for fact_id in asked]
        steps.append((new, asked))
    return rows, steps


def brute_force(steps, capacity: int, key, gate: bool) -> tuple[Fraction, int]:
    """Expected answered questions over every order of tied facts at every selection, and asks."""
    states = {frozenset(): Fraction(1)}
    answered, asks, keys = Fraction(0), 0, {}
    for new, asked in steps:
        keys.update((fact_id, key(confidence)) for fact_id, confidence in new)
        admitted = {fact_id for fact_id, confidence in new if not gate or confidence >= 0.7}
        following: dict[frozenset, Fraction] = {}
        for state, chance in states.items():
            pool = state | admitted
            outcomes = [pool]
            if len(pool) > capacity:
                line = sorted((keys[fact_id] for fact_id in pool), reverse=True)[capacity - 1]
                above = {fact_id for fact_id in pool if keys[fact_id] > line}
                tied = sorted(fact_id for fact_id in pool if keys[fact_id] == line)
                outcomes = [above | set(kept) for kept in itertools.combinations(tied, capacity - len(above))]
            for outcome in outcomes:
                following[frozenset(outcome)] = following.get(frozenset(outcome), 0) + chance / len(outcomes)
        states = following
        for fact_id in asked:
            asks += 1
            answered += sum(chance for state, chance in states.items() if fact_id in state)
    return answered, asks


@pytest.mark.parametrize("policy, key", [("random", lambda c: 0), ("confidence", lambda c: c)])
@pytest.mark.parametrize("stages", [frozenset(), frozenset({"admission", "storage", "reinforcement"})])
def test_expectation_equals_every_tie_order(policy, key, stages):
    rng = random.Random(f"{policy}{sorted(stages)}")
    checked = 0
    for _ in range(60):
        rows, steps = tiny_trace(rng)
        capacity = rng.randint(1, 4)
        answered, asks = brute_force(steps, capacity, key, gate="admission" in stages)
        (result,) = replay_specs([chunk_from_rows(rows)], [MemorySpec.of(policy, capacity)], lifecycle=stages)
        row = result.row()
        if not asks:
            assert math.isnan(row["answerable_expected"])
            continue
        checked += 1
        assert row["answerable_expected"] == pytest.approx(float(answered / asks), abs=1e-12)
        if policy == "random":  # reported as its expectation, the seeded draw beside it
            assert row["answerable_rate"] == row["answerable_expected"]
            assert row["answerable_draw"] == row["answerable"] / asks
        else:  # DeerMem's input order, with the tie-neutral expectation beside it
            assert row["answerable_rate"] == row["answerable"] / asks
    assert checked > 30


def test_ties_are_counted_and_undefined_expectations_say_so():
    rows = [{"time": START, "event": "add", "fact_id": f"f{i}", "content_length": 10, "confidence": 0.8,
             "category": "context"} for i in range(3)]
    rows += [{"time": START + SECOND, "event": "add", "fact_id": "f3", "content_length": 10, "confidence": 0.9,
              "category": "context"}, {"time": START + 2 * SECOND, "event": "ask", "fact_id": "f0"}]
    specs = [MemorySpec.of(policy, 2) for policy in ("confidence", "random", "lru")]
    confidence, uniform, lru = (result.row() for result in replay_specs([chunk_from_rows(rows)], specs,
                                                                          lifecycle=frozenset()))
    # write 1: 0.8 x3 for 2 slots (inside a tie); write 2: 0.9 and two 0.8 for 2 slots (inside a tie)
    assert confidence["tied_selection_rate"] == 1.0 and uniform["tied_selection_rate"] == 1.0
    assert confidence["answerable_expected"] == pytest.approx(2 / 3 * 1 / 2)
    assert uniform["answerable_expected"] == pytest.approx(2 / 3 * 2 / 3)
    assert math.isnan(lru["tied_selection_rate"]) and math.isnan(lru["answerable_expected"])
    # a stage that depends on which tied fact is held: counts only, no expectation
    (middleware,) = replay_specs([chunk_from_rows(rows)], specs[:1])
    assert middleware.row()["tied_selection_rate"] == 1.0 and math.isnan(middleware.row()["answerable_expected"])


def test_the_paired_table_sets_the_tie_neutral_expectation_beside_input_order():
    from evictlab.analysis.traces.generate import WorkloadParams, generate
    from evictlab.analysis.traces.inference import finding_sentences, paired_table
    from evictlab.analysis.traces.metrics import curve_rows

    chunks = [generate(WorkloadParams(horizon_days=6), seed) for seed in range(3)]
    traces = [(f"seed-{seed}", lambda chunk=chunk: [chunk]) for seed, chunk in enumerate(chunks)]
    rows = curve_rows(traces, ["confidence", "hybrid-v1", "random"], [10], lifecycle=frozenset())
    table = paired_table(rows)
    neutral = table[table["comparison"] == "hybrid-v1 - confidence, tie-neutral"].set_index("metric")
    confidence = rows[rows["policy"] == "confidence"]
    assert neutral.loc["answerable_rate", "second_mean"] == pytest.approx(confidence["answerable_expected"].mean())
    assert neutral.loc["answerable_rate", "seeds"] == 3
    _, detail = finding_sentences(table, 10)
    assert "level with confidence, tie-neutral" in detail or "than confidence, tie-neutral by" in detail
    assert rows.loc[rows["policy"] == "random", "answerable_draw"].notna().all()
