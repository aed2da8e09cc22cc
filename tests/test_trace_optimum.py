"""The offline optimum is exact (brute force on 1,000 tiny traces) and no policy beats it."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import numpy as np
import pytest
from scipy import sparse
from scipy.optimize import linprog

from evictlab.analysis.traces.memory import Lockstep, MemorySpec, replayable
from evictlab.analysis.traces.optimum import Network, network, offline_optimum, outline
from evictlab.analysis.traces.replay import replay, replay_policy
from evictlab.analysis.traces.schema import Updates, chunk_from_rows
from evictlab.policies import known_policies

START = 1_780_000_000_000_000


def tiny_trace(rng: random.Random) -> dict:
    """A random trace of a few facts, searches, confirmations and questions."""
    return chunk_from_rows(tiny_rows(rng))


def tiny_rows(rng: random.Random) -> list[dict]:
    """:func:`tiny_trace`'s rows."""
    rows: list[dict] = []
    added: list[str] = []
    moment = START
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
    return rows


def tiny_cases(seed: int, count: int) -> Iterator[tuple[dict, int]]:
    """``count`` seeded pairs of a tiny trace and a capacity of 1 to 3."""
    rng = random.Random(seed)
    for _ in range(count):
        yield tiny_trace(rng), rng.randint(1, 3)


def brute_force(chunk: dict, capacity: int) -> int:
    """The best answer count over every schedule that evicts exactly the excess at each write."""
    shape = outline([chunk])
    arrivals: dict[int, list[int]] = {}
    for fact, write in enumerate(shape.fact_write.tolist()):
        if write:
            arrivals.setdefault(write, []).append(fact)
    asks_after: dict[int, list[int]] = {}
    for period, fact in zip(shape.ask_period.tolist(), shape.ask_fact.tolist()):
        asks_after.setdefault(period, []).append(fact)

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


def linear_programme(flow: Network, capacity: int) -> int:
    """The same flow solved as a linear programme by HiGHS's dual simplex (the solver before OR-Tools)."""
    arcs = len(flow.tails)
    incidence = sparse.coo_matrix(
        (np.concatenate((np.ones(arcs), -np.ones(arcs))),
         (np.concatenate((flow.tails, flow.heads)), np.concatenate((np.arange(arcs), np.arange(arcs))))),
        shape=(flow.nodes, arcs),
    ).tocsr()
    supply = np.zeros(flow.nodes)
    supply[0], supply[flow.timeline] = capacity, -capacity
    bounds = np.column_stack((np.zeros(arcs), flow.capacities(capacity)))
    result = linprog(-flow.answers, A_eq=incidence, b_eq=supply, bounds=bounds, method="highs-ds")
    assert result.success
    return round(-result.fun)


def test_a_message_row_inside_an_update_changes_no_write():
    """The replay reads a message row as the next update's feed, so a message at the time of the
    update's adds neither ends that update nor starts one; the outline must agree."""
    rows = [{"time": START, "event": "add", "fact_id": "a", "content_length": 5, "confidence": 0.9,
             "category": "context"},
            {"time": START, "event": "message", "role": "human", "text": "thanks"},
            {"time": START, "event": "add", "fact_id": "b", "content_length": 5, "confidence": 0.8,
             "category": "context"},
            {"time": START + 1, "event": "ask", "fact_id": "a"}]
    with_message = outline([chunk_from_rows(rows)])
    without = outline([chunk_from_rows([rows[0], *rows[2:]])])
    assert with_message.writes == without.writes == 1
    assert with_message.fact_write.tolist() == without.fact_write.tolist() == [1, 1]
    assert with_message.ask_period.tolist() == [1]


class Observed(Lockstep):
    """A keep-all lockstep that notes, at each question, how many writes the replay has made."""

    def __init__(self) -> None:
        super().__init__([MemorySpec.of("keep-all", None)])
        self.writes, self.periods = 0, []

    def contains(self, fact_id: str) -> np.ndarray:
        self.periods.append(self.writes)
        return super().contains(fact_id)


def test_the_outline_groups_updates_as_the_replay_does_on_random_traces_with_messages():
    """The outline and the replay group rows by one rule (:class:`Updates`); on 300 tiny traces
    with message rows at the times of their neighbours, both count the same writes and put every
    question in the same period."""
    rng = random.Random(11)
    for _ in range(300):
        rows = []
        for row in tiny_rows(rng):
            if rng.random() < 0.3:
                rows.append({"time": row["time"], "event": "message", "role": "human", "text": "ok"})
            rows.append(row)
        chunk = chunk_from_rows(rows)
        memory = Observed()
        sizes: list[int] = []

        def note(_, memories, sizes=sizes) -> None:  # a write is an update that stored a fact
            memories.writes += bool(memories.sizes[0] > (sizes[-1] if sizes else 0))
            sizes.append(int(memories.sizes[0]))

        replay([chunk], memory, on_write=note)
        shape = outline([chunk])
        assert shape.writes == memory.writes and shape.ask_period.tolist() == memory.periods


def test_updates_do_not_depend_on_where_the_trace_is_cut_into_chunks():
    """One number per update; a message row keeps the update of its time open and ends an earlier
    one. An update may span a chunk boundary: the numbers, the outline and the replay's counts are
    those of the whole trace wherever it is cut."""
    def add(moment: int, fact_id: str) -> dict:
        return {"time": moment, "event": "add", "fact_id": fact_id, "content_length": 5, "confidence": 0.9,
                "category": "context"}

    def message(moment: int) -> dict:
        return {"time": moment, "event": "message", "role": "human", "text": "ok"}

    rows = [message(START), add(START + 1, "a"), message(START + 1),
            {"time": START + 1, "event": "confirm", "fact_ids": ["a"], "reinforcement": True},
            message(START + 2), add(START + 2, "b"), {"time": START + 2, "event": "ask", "fact_id": "a"},
            add(START + 2, "c")]
    whole = [0, 1, 1, 1, 0, 2, 0, 3]
    assert Updates().numbers(chunk_from_rows(rows)).tolist() == whole
    for cut in range(len(rows) + 1):
        updates = Updates()
        assert [*updates.numbers(chunk_from_rows(rows[:cut])), *updates.numbers(chunk_from_rows(rows[cut:]))] == whole
    rng = random.Random(5)
    for _ in range(100):
        rows = []
        for row in tiny_rows(rng):
            if rng.random() < 0.3:
                rows.append(message(row["time"] + rng.choice([0, 1])))
            rows.append(row)
        rows.sort(key=lambda row: row["time"])
        cuts = [0, *sorted(rng.randint(0, len(rows)) for _ in range(2)), len(rows)]
        chunks = [chunk_from_rows(rows[start:end]) for start, end in itertools.pairwise(cuts)]
        one, cut = outline([chunk_from_rows(rows)]), outline(chunks)
        assert (one.writes, one.fact_ids) == (cut.writes, cut.fact_ids)
        for name in ("fact_write", "ask_period", "ask_fact"):
            assert getattr(one, name).tolist() == getattr(cut, name).tolist()
        assert (replay_policy([chunk_from_rows(rows)], "hybrid-v1", 2).counts
                == replay_policy(chunks, "hybrid-v1", 2).counts)


def test_min_cost_flow_equals_brute_force_and_the_linear_programme():
    binding = 0
    for chunk, capacity in tiny_cases(4242, 150):
        flow = network(outline([chunk]))
        if flow.reachable == 0:
            continue
        exact = brute_force(chunk, capacity)
        assert offline_optimum(flow, capacity).answerable == exact, (chunk, capacity)
        assert linear_programme(flow, capacity) == exact, (chunk, capacity)
        binding += exact < flow.reachable
    assert binding >= 10  # the capacity binds often enough for the check to mean something


def test_min_cost_flow_equals_the_linear_programme_on_generated_workloads():
    from evictlab.analysis.traces.generate import WorkloadParams, generate

    for seed in range(3):
        flow = network(outline([generate(WorkloadParams(horizon_days=20), seed)]))
        for capacity in (1, 5, 10, 50):
            assert offline_optimum(flow, capacity).answerable == linear_programme(flow, capacity)


def test_the_optimum_is_bounded_before_its_network_is_built():
    chunk = next(tiny_cases(3, 1))[0]
    shape = outline([chunk])
    with pytest.raises(ValueError, match=r"arcs, over the limit of 2 .*; pass --max-optimum-arcs 6"):
        offline_optimum(shape, 1, max_arcs=2)


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


def test_the_rate_aware_bound_ranks_by_the_model_rate_now_and_never_beats_the_optimum():
    from evictlab.analysis.traces.generate import WorkloadParams, generate
    from evictlab.analysis.traces.metrics import RATE_AWARE, curve_rows, rate_keys

    day = 86_400 * 1_000_000
    # Rates fall by e per day (d = 1): b's 3.0 at day 0 is 3/e at day 1, below a's 2.0 then, so a
    # ranks above b; c has rate 0, last; d is a later version of a's topic at the same key: above a.
    seen = {"event": ["add", "add", "add", "ask", "add"], "time": [0, day, day, day, 2 * day],
            "fact_id": ["b", "a", "d", "a", "c"], "ask_rate": [3.0, 2.0, 2.0, None, 0.0],
            "ask_decay_days": [1.0, 1.0, 1.0, None, 1.0]}
    keys = rate_keys(seen)
    assert sorted(keys, key=keys.get) == ["c", "b", "a", "d"]
    assert max(keys.values()) == 1.0 and min(keys.values()) == 0.25
    assert rate_keys({**seen, "ask_rate": [3.0, None, 2.0, None, 0.0]}) is None  # a fact without a rate
    for seed in range(3):
        chunk = generate(WorkloadParams(horizon_days=8), seed)
        rows = curve_rows([("t", lambda chunk=chunk: [chunk])], ["confidence", "lru"], [3, 10, 30])
        for _, at in rows.groupby("capacity"):
            rates = at.set_index("policy")["answerable_rate"]
            assert rates[RATE_AWARE] <= rates["optimum"] + 1e-12
            assert (at.set_index("policy").loc[RATE_AWARE, ["role", "regret_rate_aware"]] == ["bound", 0.0]).all()
            regret = at["regret_rate_aware"].to_numpy()
            assert regret == pytest.approx(rates[RATE_AWARE] - at["answerable_rate"].to_numpy())


def test_every_version_ranks_above_the_version_it_supersedes_and_one_decay_is_required():
    from evictlab.analysis.traces.generate import WorkloadParams, generate
    from evictlab.analysis.traces.metrics import rate_keys

    pairs = 0
    for seed in range(3):
        chunk = generate(WorkloadParams(horizon_days=200), seed)
        seen = {name: chunk[name] for name in ("event", "time", "fact_id", "ask_rate", "ask_decay_days")}
        keys = rate_keys(seen)
        added = {fact for kind, fact in zip(chunk["event"], chunk["fact_id"]) if kind == "add"}
        versions = [(fact, old) for kind, fact, old in zip(chunk["event"], chunk["fact_id"], chunk["supersedes"])
                    if kind == "add" and old in added]
        # Same topic, so the same key in exact arithmetic, added seconds or days apart: rounding
        # alone ordered about a quarter of such pairs the wrong way before keys were compared
        # within a tolerance.
        assert all(keys[fact] > keys[old] for fact, old in versions)
        pairs += len(versions)
        decays = seen["ask_decay_days"]
        mixed = [None if decay is None else decay * (1 + index % 2) for index, decay in enumerate(decays)]
        assert rate_keys({**seen, "ask_decay_days": mixed}) is None  # no one order serves every write
    assert pairs >= 30


def test_a_trace_without_ask_rates_has_no_rate_aware_rows():
    from evictlab.analysis.traces.generate import WorkloadParams, generate
    from evictlab.analysis.traces.metrics import RATE_AWARE, curve_rows

    chunk = generate(WorkloadParams(horizon_days=8), 0)
    chunk = {**chunk, "ask_rate": [None] * len(chunk["time"]), "ask_decay_days": [None] * len(chunk["time"])}
    rows = curve_rows([("t", lambda: [chunk])], ["lru"], [3, 10])
    assert RATE_AWARE not in set(rows["policy"]) and {"optimum", "lru"} <= set(rows["policy"])
    assert rows["regret_rate_aware"].isna().all()
