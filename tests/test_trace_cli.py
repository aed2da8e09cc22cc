"""``evictlab trace generate|replay|study`` end to end, and the study on a real LocalCluster."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from evictlab.analysis.traces import schema
from evictlab.analysis.traces.output import load_run
from evictlab.analysis.traces.study import loss_map, run_study, study_summary, study_tasks
from evictlab.cli import main
from evictlab.distributed import Placement, dask_client

TINY = ["--horizon-days", "6", "--facts-per-day", "6", "--search-rate", "10"]


def test_generate_is_byte_stable_and_refuses_to_overwrite(tmp_path, capsys):
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert main(["trace", "generate", "--output", str(first), "--seed", "5", *TINY]) == 0
    assert main(["trace", "generate", "--output", str(second), "--seed", "5", *TINY]) == 0
    assert first.read_bytes() == second.read_bytes()
    assert "events" in capsys.readouterr().out
    assert main(["trace", "generate", "--output", str(first), *TINY]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err


def test_replay_writes_curves_with_bounds_and_regret(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    assert main(["trace", "generate", "--output", str(trace), "--seed", "2", *TINY]) == 0
    out = tmp_path / "run"
    argv = ["trace", "replay", "--trace", str(trace), "--policies", "hybrid-v1,confidence,lru",
            "--capacities", "3,10", "--audit-capacity", "3", "--output-dir", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "paired differences over seeds" in printed and "hybrid-v1 - best other policy" in printed
    manifest, tables = load_run(out, "trace-replay")
    assert manifest["status"] == "success" and manifest["parameters"]["capacities"] == [3, 10]
    assert set(manifest["outputs"]) == {"curve.rows.parquet", "curve.summary.csv", "curve.paired.csv", "audit.jsonl",
                                        "stages.csv"}
    rows = tables["curve.rows.parquet"]
    assert set(rows["policy"]) == {"optimum", "rate-aware", "keep-all", "hybrid-v1", "confidence", "lru"}
    assert set(rows.loc[rows["role"] == "bound", "policy"]) == {"optimum", "rate-aware", "keep-all"}
    optimum = rows[rows["policy"] == "optimum"].set_index("capacity")["answerable_rate"]
    aware = rows[rows["policy"] == "rate-aware"].set_index("capacity")["answerable_rate"]
    for _, row in rows[rows["policy"].isin(["hybrid-v1", "confidence", "lru", "rate-aware"])].iterrows():
        assert row["answerable_rate"] <= optimum[row["capacity"]]
        assert row["regret"] == pytest.approx(optimum[row["capacity"]] - row["answerable_rate"])
        assert row["regret_rate_aware"] == pytest.approx(aware[row["capacity"]] - row["answerable_rate"])
    audit = tables["audit.jsonl"]
    assert {event["policy"] for event in audit} == {"confidence", "hybrid-v1"}
    assert all(("shadow" in event) == (event["policy"] == "confidence") for event in audit)
    assert all(event["maxFacts"] == 3 and event["evicted"] for event in audit)
    assert manifest["summary"]["rows"]["audit.jsonl"] == len(audit)
    assert main(argv) == 2  # a finished run is never overwritten
    assert "refus" in capsys.readouterr().err


def test_replay_checks_each_row_of_a_trace_file_once(tmp_path, monkeypatch, capsys):
    trace = tmp_path / "t.parquet"
    assert main(["trace", "generate", "--output", str(trace), "--seed", "1", *TINY]) == 0
    checked = []
    check = schema.RowChecker.check
    monkeypatch.setattr(schema.RowChecker, "check", lambda self, values: (checked.append(1), check(self, values)))
    assert main(["trace", "replay", "--trace", str(trace), "--policies", "confidence", "--capacities", "5",
                 "--no-progress", "--output-dir", str(tmp_path / "run")]) == 0
    assert len(checked) == len(schema.read_trace(trace)["time"])  # read_trace after the count
    capsys.readouterr()


def test_bad_trace_is_one_line_error_before_any_output(tmp_path, capsys):
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"time": "2026-01-01T00:00:00Z", "event": "ask"}\n')
    assert main(["trace", "replay", "--trace", str(trace), "--output-dir", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert f"{trace}: row 0, field 'fact_id': required" in error and "Traceback" not in error
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_study_tables_identical_in_process_and_on_a_local_cluster():
    grid = {"confidence_noise": [0.0, 0.6], "search_rate": [2.0, 20.0]}
    tasks = study_tasks(grid, 1, base=_tiny(), capacities=[3, 8])
    in_process = run_study(tasks, Placement(workers=0), progress=False)
    with dask_client(Placement(workers=2, processes=False)) as client:
        address = client.scheduler.address
        on_scheduler = run_study(tasks, Placement(scheduler=address), progress=False)
    on_cluster = run_study(tasks, Placement(workers=2, processes=False), progress=False)
    pd.testing.assert_frame_equal(in_process, on_cluster)
    pd.testing.assert_frame_equal(in_process, on_scheduler)
    summary = study_summary(in_process)
    assert set(summary["policy"]) == {"confidence", "hybrid-v1", "fifo", "lru"}
    confidence = summary[summary["policy"] == "confidence"]
    assert (confidence["tie_rate_vs_confidence"] == 1.0).all()
    losses = loss_map(in_process, "confidence_noise", "search_rate")
    assert losses.shape == (2, 2) and ((losses >= 0) & (losses <= 1)).all().all()


@pytest.mark.slow
def test_study_command_on_a_process_cluster(tmp_path, capsys):
    out = tmp_path / "study"
    argv = ["trace", "study", "--grid", "search_rate=5,20", "--seeds", "2", "--capacities", "3,8",
            "--policies", "hybrid-v1,confidence", "--workers", "2", "--no-progress", "--output-dir", str(out), *TINY]
    assert main(argv) == 0
    manifest = json.loads((out / "trace-study.run.json").read_text())
    assert manifest["status"] == "success" and "2 process workers" in manifest["parameters"]["placement"]
    serial = tmp_path / "serial"
    assert main([*argv[:-len(TINY) - 2], "--workers", "0", "--output-dir", str(serial), *TINY]) == 0
    for name in ("study.rows.parquet", "study.summary.csv"):
        assert (out / name).read_bytes() == (serial / name).read_bytes()


@pytest.mark.slow
def test_replay_on_a_process_cluster_writes_the_in_process_tables(tmp_path):
    argv = ["trace", "replay", "--seeds", "3", "--policies", "hybrid-v1,confidence,lru", "--capacities", "3,8",
            "--no-progress", *TINY]
    assert main([*argv, "--workers", "2", "--output-dir", str(tmp_path / "cluster")]) == 0
    assert main([*argv, "--output-dir", str(tmp_path / "serial")]) == 0
    # One trace on two workers: its policies shared out over two tasks, the bounds in the first.
    one = ["trace", "replay", "--seeds", "1", *argv[4:]]
    assert main([*one, "--workers", "2", "--output-dir", str(tmp_path / "one-cluster")]) == 0
    assert main([*one, "--output-dir", str(tmp_path / "one-serial")]) == 0
    for run in ("cluster", "one-cluster"):
        manifest = json.loads((tmp_path / run / "trace-replay.run.json").read_text())
        assert "2 process workers" in manifest["parameters"]["placement"]
        serial = run.replace("cluster", "serial")
        for name in ("curve.rows.parquet", "curve.summary.csv", "curve.paired.csv", "stages.csv"):
            assert (tmp_path / run / name).read_bytes() == (tmp_path / serial / name).read_bytes(), (run, name)
    single = ["trace", "replay", "--seeds", "1", "--policies", "lru", *argv[6:], "--workers", "2"]
    assert main([*single, "--output-dir", str(tmp_path / "single")]) == 0  # one trace, one policy: in this process
    manifest = json.loads((tmp_path / "single" / "trace-replay.run.json").read_text())
    assert manifest["parameters"]["placement"] == "in-process (no Dask)"


def _tiny():
    from evictlab.analysis.traces.generate import WorkloadParams

    return WorkloadParams(horizon_days=6, facts_per_day=6, search_rate=10)


def test_the_command_line_takes_the_library_maths_and_replays_the_same_rows(tmp_path):
    """A command asks numpy, before importing it, to leave its own AVX512 maths kernels unused
    (evictlab.cli.library_maths), so the rank keys take the vector route; a user's own setting
    of numpy's variable is left alone (on an AVX512 machine: the scalar route). Both must write
    the same curve, byte for byte."""
    import os
    import platform
    import subprocess
    import sys

    trace = tmp_path / "t.parquet"
    assert main(["trace", "generate", "--output", str(trace), "--seed", "4", *TINY, "--horizon-days", "20"]) == 0
    environ = {name: value for name, value in os.environ.items() if not name.startswith("NPY_")}
    probe = [sys.executable, "-c", "import os; from evictlab.cli import library_maths; library_maths();"
             " print(os.environ.get('NPY_DISABLE_CPU_FEATURES', ''))"]
    asked = subprocess.run(probe, env=environ, check=True, capture_output=True, text=True).stdout.strip()
    assert bool(asked) == (platform.machine().lower() in ("x86_64", "amd64"))
    found = {}
    for name, extra in (("default", {}), ("own-kernels", {"NPY_DISABLE_CPU_FEATURES": ""})):
        out = tmp_path / name
        subprocess.run([sys.executable, "-m", "evictlab", "trace", "replay", "--trace", str(trace), "--capacities",
                        "3,10", "--output-dir", str(out)], env={**environ, **extra}, check=True, capture_output=True)
        record = json.loads((out / "trace-replay.run.json").read_text())
        found[name] = (record["provenance"]["numerics"], (out / "curve.rows.parquet").read_bytes())
    if asked:
        assert found["default"][0] == "vector"
    assert found["default"][1] == found["own-kernels"][1]
