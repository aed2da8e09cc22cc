"""Attacks on trace mode's work (issue 26, "Trace mode has no bounds on its work"): every
generator and replay option is bounded before work starts, naming the option that raises the
bound; empty and question-less traces and repeated capacities or policies are not silent."""

from __future__ import annotations

import pytest

from evictlab.analysis.traces.output import load_run
from evictlab.cli import main

TINY = ["--horizon-days", "3", "--facts-per-day", "4", "--question-rate", "3", "--search-rate", "2"]


@pytest.mark.parametrize(
    "options, says",
    [
        (["--horizon-days", "1e6"], "pass --max-events"),
        (["--search-results", "1000000000"], "pass --max-events"),
        (["--facts-per-day", "1e12"], "pass --max-events"),
        (["--question-rate", "1e300"], "pass --max-events"),
        (["--horizon-days", "1e300"], "at most 3,652,425 days"),
        (["--question-delay-days", "1e300"], "question_delay_days must be at most"),
        (["--start", "9999-12-30T00:00:00Z"], "ends after the year 9999"),
        (["--seed", str(2**70)], "seed must be an integer in [0, 2**63)"),
    ],
)
def test_generate_refuses_unbounded_work_before_drawing(options, says, tmp_path, cli_error):
    output = tmp_path / "t.jsonl"
    code, line = cli_error("trace", "generate", "--output", str(output), *options)
    assert code == 2 and says in line
    assert not output.exists()


def test_max_events_lifts_the_generator_bound_deliberately(tmp_path, cli_error):
    output = tmp_path / "t.jsonl"
    code, line = cli_error("trace", "generate", "--output", str(output), *TINY, "--max-events", "10")
    assert code == 2 and "over the limit of 10;" in line
    needed = line.rsplit("--max-events ", 1)[1].split()[0]
    assert main(["trace", "generate", "--output", str(output), *TINY, "--max-events", needed]) == 0


@pytest.mark.parametrize(
    "options, says",
    [
        (["--seeds", "1000000000"], "pass --max-event-replays"),
        (["--seeds", "2", "--max-event-replays", "100"], "over the limit of 100;"),
        (["--capacities", str(10**30)], "is outside [1, 1,000,000,000] (a replay's cap)"),
        (["--horizon-days", "1e6"], "pass --max-events"),
    ],
)
def test_replay_refuses_unbounded_work_before_its_folder(options, says, tmp_path, cli_error):
    out = tmp_path / "run"
    code, line = cli_error("trace", "replay", *TINY, *options, "--output-dir", str(out))
    assert code == 2 and says in line
    assert not out.exists()


def test_study_refuses_a_huge_grid(tmp_path, cli_error):
    grid = ["--grid", "search_rate=" + ",".join(str(value) for value in range(1, 200)),
            "--grid", "question_rate=" + ",".join(str(value) for value in range(1, 200))]
    out = tmp_path / "study"
    code, line = cli_error("trace", "study", *grid, "--seeds", "3", "--workers", "0", "--output-dir", str(out))
    assert code == 2 and "118,803 tasks" in line and "pass --max-tasks 118803" in line
    assert not out.exists()


@pytest.mark.parametrize("text", ["", "\n\n   \n"])
def test_an_empty_trace_is_an_error_not_nan(text, tmp_path, cli_error):
    trace = tmp_path / "empty.jsonl"
    trace.write_text(text)
    out = tmp_path / "run"
    code, line = cli_error("trace", "replay", "--trace", str(trace), "--output-dir", str(out))
    assert code == 2 and "the trace has no events" in line and str(trace) in line
    assert not out.exists()


def test_a_trace_of_ticks_only_warns_that_its_rates_are_undefined(tmp_path, capsys):
    trace = tmp_path / "ticks.jsonl"
    trace.write_text('{"time": "2026-01-01T00:00:00Z", "event": "tick"}\n'
                     '{"time": "2026-01-02T00:00:00Z", "event": "tick"}\n')
    out = tmp_path / "run"
    assert main(["trace", "replay", "--trace", str(trace), "--capacities", "10", "--policies", "fifo",
                 "--output-dir", str(out)]) == 0
    assert "has no question (ask event)" in capsys.readouterr().err


def test_repeated_capacities_and_policies_run_once_with_a_warning(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["trace", "replay", *TINY, "--seeds", "1", "--capacities", "10,10,20", "--policies",
                 "fifo,lru,fifo", "--output-dir", str(out)]) == 0
    err = capsys.readouterr().err
    assert "--capacities lists 10 more than once" in err and "--policies lists fifo more than once" in err
    _, tables = load_run(out, "trace-replay")
    rows = tables["curve.rows.parquet"]
    assert sorted(rows.loc[rows["policy"] == "fifo", "capacity"]) == [10, 20]


@pytest.mark.parametrize("capacity", ["0", "-3", "10000000000"])
def test_audit_capacity_is_refused_before_the_run_folder_exists(capacity, tmp_path, cli_error):
    out = tmp_path / "out"
    code, line = cli_error("trace", "replay", "--seeds", "1", *TINY, "--audit-capacity", capacity,
                           "--output-dir", str(out))
    assert code == 2 and "--audit-capacity" in line and "is outside [1, 1,000,000,000]" in line
    assert not out.exists()
