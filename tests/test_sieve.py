"""``sieve`` (evictlab/policies/sieve.py): the paper's hand on a snapshot, and the one file showing
everywhere a registered policy shows (snapshots, the zoo table, a sweep, the explorer, trace replay).

The reference below is SIEVE as Zhang et al. (NSDI 2024) write it, on the queue a snapshot gives:
entries oldest first, a visited bit per entry, a hand that starts at the oldest entry, clears set
bits, evicts the first clear one and wraps from the newest back to the oldest.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import clocks, snapshots

from evictlab.analysis import zoo
from evictlab.analysis.sweep import make_grid, run_sweep
from evictlab.analysis.traces.metrics import default_policies
from evictlab.analysis.traces.output import load_run
from evictlab.cli import main
from evictlab.policies import SelectionContext, known_policies, select
from evictlab.policies._zoo import access_count, confirmation_count, days_since, usage_entries
from evictlab.policies.signals import fact_fields
from evictlab.selection.decisions import decide_grid
from evictlab.selection.engine import PreparedCases
from evictlab.workbench import loaders, widgets

CAPACITIES = (5, 7, 9)


def hand_evictions(facts, usage, now, capacity):
    """The facts the paper's hand evicts, in its order (input positions)."""
    entries = usage_entries(facts, SelectionContext(now=now, usage=usage))
    ages = [days_since(now, fact_fields(fact).get("createdAt")) for fact in facts]
    # Oldest first; of two facts created at once the later in the input is the older (every
    # policy breaks a tie by input position, the earlier one first).
    queue = sorted(range(len(facts)), key=lambda index: (-ages[index], -index))
    visited = {i: access_count(entries[i]) > 0 or confirmation_count(facts[i]) > 0 for i in queue}
    hand, evicted = 0, []
    while len(queue) > capacity:
        entry = queue[hand]
        if visited[entry]:
            visited[entry] = False
            hand += 1
        else:
            evicted.append(entry)
            queue.pop(hand)
        if hand >= len(queue):
            hand = 0
    return evicted


@settings(max_examples=300, deadline=None)
@given(snapshots(unique_ids=True), clocks(), st.data())
def test_the_selector_evicts_what_the_hand_evicts_in_its_order(snapshot, now, data):
    facts, usage = snapshot
    capacity = data.draw(st.integers(0, len(facts) + 1))
    decision = select("sieve", facts, capacity, usage=usage, now=now)
    ids = [f"fact-{index:02d}" for index in range(len(facts))]
    assert [item.fact_id for item in decision.evicted] == [ids[i] for i in hand_evictions(facts, usage, now, capacity)]


def test_a_visited_old_fact_outlives_unvisited_new_ones_until_the_hand_wraps():
    facts = [
        {"id": "old", "createdAt": "2026-08-01T00:00:00Z", "confirmationCount": 1},
        {"id": "mid", "createdAt": "2026-08-05T00:00:00Z"},
        {"id": "new", "createdAt": "2026-08-09T00:00:00Z"},
        {"id": "hit", "createdAt": "2026-08-03T00:00:00Z"},
    ]
    usage = {"hit": {"accessCount": 2, "lastAccessedAt": "2026-08-10T00:00:00Z"}}
    now = loaders.load_pool_set().protocol.evaluation_time
    kept = {k: select("sieve", facts, k, usage=usage, now=now).kept_ids for k in range(5)}
    assert kept[2] == ["hit", "old"]  # the unvisited mid and new went first, oldest first
    assert kept[1] == ["hit"]  # then, the bits cleared, the oldest of the visited
    assert kept[3] == ["hit", "old", "new"] and kept[0] == []
    scores = select("sieve", facts, 4, usage=usage, now=now).scores
    assert {key: score.components["visited"] for key, score in scores.items()} == {
        "old": 1.0, "mid": 0.0, "new": 0.0, "hit": 1.0,
    }  # fmt: skip


@pytest.fixture(scope="module")
def pool_set():
    return loaders.load_pool_set()


def scalar_retained(pool_set, capacity):
    now = pool_set.protocol.evaluation_time
    return [
        case.support_fact_ids[0] in select("sieve", case.facts, capacity, usage=case.usage, now=now).kept_ids
        for case in pool_set.cases
    ]


def test_registered_and_decided_like_the_scalar_selector_on_the_pools(pool_set):
    assert "sieve" in known_policies()
    frame = decide_grid(pool_set, ["sieve"], capacities=CAPACITIES)
    for capacity in CAPACITIES:
        assert frame[frame["capacity"] == capacity]["support_retained"].tolist() == scalar_retained(pool_set, capacity)


def test_in_the_zoo_table_and_a_sweep(pool_set):
    rows = zoo.zoo_rows(pool_set, capacities=(7,), seeds=range(1))
    mine = rows[rows["policy"] == "sieve"]
    assert len(mine) == len(pool_set.cases) and set(mine["role"]) == {"zoo"}
    expected = decide_grid(pool_set, ["sieve"], capacities=(7,))["retention"].tolist()
    assert mine["support_retained"].tolist() == pytest.approx(expected)
    grid = make_grid(weights=[(0.65, 0.25, 0.10)], capacities=CAPACITIES, policies=("sieve",))
    swept = run_sweep({"pr4810-final": pool_set}, grid, progress=False).rows
    assert swept[swept["capacity"] == 5]["support_retained"].tolist() == scalar_retained(pool_set, 5)


def test_in_the_explorer(pool_set):
    prepared = PreparedCases.from_pool_set(pool_set)
    frame = widgets.decisions_for(prepared, "sieve", pool_set.protocol.config.hybrid, 5)
    assert frame["support_retained"].tolist() == scalar_retained(pool_set, 5)
    explorer = widgets.Explorer(capacity=5, policy="sieve")
    assert "sieve" in explorer.controls["policy"].options
    assert explorer.results["support_retained"].tolist() == scalar_retained(pool_set, 5)


def test_in_trace_replay(tmp_path):
    assert "sieve" in default_policies()
    trace = tmp_path / "t.jsonl"
    assert main(["trace", "generate", "--output", str(trace), "--seed", "3", "--horizon-days", "6",
                 "--facts-per-day", "6", "--search-rate", "10"]) == 0  # fmt: skip
    out = tmp_path / "run"
    assert main(["trace", "replay", "--trace", str(trace), "--policies", "sieve,fifo", "--capacities", "3,10",
                 "--output-dir", str(out)]) == 0  # fmt: skip
    _, tables = load_run(out, "trace-replay")
    rows = tables["curve.rows.parquet"]
    assert set(rows[rows["policy"] == "sieve"]["capacity"]) == {3, 10}
