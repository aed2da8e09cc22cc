"""Sweeps written in chunks: the same tables as in memory, resumed after a kill, on Dask; older layouts."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from test_engine import CLOCK
from test_sweep import CASES, POOLS, RAW_CASES, TWO_PRESETS, folder_files

from evictlab import cli, results
from evictlab.analysis import sweep_output
from evictlab.analysis.sweep import SweepRequest, extreme_settings, make_grid, run_sweep
from evictlab.analysis.sweep_output import EXTREMES_FILE, MANIFEST_FILE, ROWS_FILE, SUMMARY_FILE
from evictlab.distributed import Placement
from evictlab.errors import ContractError
from evictlab.selection.engine import PreparedCases

GRID = make_grid(
    weights_step=0.25,
    confirmation_half_lives=(90, 7),
    reserved_fractions=(0.1, 0.0),
    capacities=(5, 7, 9),
)
DEADLINE_SECONDS = 300  # a bound, not a measurement


def test_settings_are_built_by_index_in_grid_order():
    assert GRID.size == len(GRID.settings) == 15 * 2 * 2
    for start, stop in ((0, 1), (3, 17), (29, 60), (55, 99)):
        assert GRID.settings_between(start, stop) == GRID.settings[start:stop]


def test_chunks_write_the_tables_of_the_whole_sweep_in_memory(tmp_path):
    # 2,000 rows a chunk: 14 settings of 135 rows, so chunks end inside every preset x policy.
    written = sweep_output.write_sweep(SweepRequest(tmp_path, TWO_PRESETS, GRID, progress=False, chunk_rows=2000))
    # Per preset and policy: five chunks of 14 settings or fewer.
    assert written.chunks == 2 * 2 * 5 and written.reused_chunks == 0
    expected = run_sweep(TWO_PRESETS, GRID, progress=False)
    loaded = sweep_output.load_sweep(tmp_path)
    pd.testing.assert_frame_equal(loaded.rows, expected.rows)
    pd.testing.assert_frame_equal(loaded.summary, expected.summary)  # bit for bit, sums included
    extremes = extreme_settings(expected.summary)
    pd.testing.assert_frame_equal(written.extremes, extremes)
    on_file = pd.read_csv(tmp_path / EXTREMES_FILE)
    pd.testing.assert_frame_equal(on_file, extremes.astype({"preset": str, "policy": str, "scenario": str}),
                                  check_dtype=False)  # fmt: skip
    assert written.defaults.empty  # DeerMem's weights are off this grid
    assert len(pd.read_parquet(tmp_path / ROWS_FILE / "part-000001.parquet")) == 14 * 45 * 3
    assert list(pd.read_parquet(tmp_path / ROWS_FILE)) == list(sweep_output.STORED_ROW_COLUMNS)


def test_a_scalar_policy_is_chunked_too(tmp_path):
    grid = make_grid(weights=[(0.65, 0.25, 0.10), (1.0, 0.0, 0.0)], capacities=(5, 7), policies=("lru", "random"))
    sweep_output.write_sweep(SweepRequest(tmp_path, POOLS, grid, progress=False, chunk_rows=90))
    assert len(list((tmp_path / ROWS_FILE).iterdir())) == 4
    expected = run_sweep(POOLS, grid, progress=False)
    loaded = sweep_output.load_sweep(tmp_path)
    assert set(loaded.rows["tie_break"]) == {"expected"}
    pd.testing.assert_frame_equal(loaded.rows, expected.rows)
    pd.testing.assert_frame_equal(loaded.summary, expected.summary)


def test_the_defaults_kept_are_deermem_settings_rows(tmp_path):
    grid = make_grid(weights_step=0.05, capacities=(5, 7))
    written = sweep_output.write_sweep(SweepRequest(tmp_path, POOLS, grid, progress=False, chunk_rows=4000))
    summary = run_sweep(POOLS, grid, progress=False).summary
    (index,) = set(written.defaults["setting"])
    assert grid.settings[index].weights == (0.65, 0.25, 0.10)
    expected = summary[summary["setting"] == index].reset_index(drop=True)
    pd.testing.assert_frame_equal(written.defaults.reset_index(drop=True), expected)


def mark_interrupted(folder):
    """What a killed run leaves once its stale lock is found: the record says interrupted."""
    path = results.record_path(folder, "sweep")
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "status": "interrupted", "error": "killed"}))


def test_a_rerun_keeps_complete_chunks_of_the_same_plan_and_starts_over_otherwise(tmp_path, capsys):
    folder, fresh = tmp_path / "run", tmp_path / "fresh"
    sweep_output.write_sweep(SweepRequest(fresh, POOLS, GRID, progress=False, chunk_rows=2000))
    sweep_output.write_sweep(SweepRequest(folder, POOLS, GRID, progress=False, chunk_rows=2000))
    chunks = read_record(folder)["parameters"]["chunking"]["chunks"]
    mark_interrupted(folder)
    (folder / SUMMARY_FILE / "part-000004.parquet").unlink()  # chunk 4 was cut short: its rows file only
    (folder / EXTREMES_FILE).unlink()
    capsys.readouterr()
    written = sweep_output.write_sweep(SweepRequest(folder, POOLS, GRID, progress=False, chunk_rows=2000))
    assert written.reused_chunks == chunks - 1
    assert f"kept {chunks - 1} of {chunks} chunks" in capsys.readouterr().err
    assert folder_files(folder) == folder_files(fresh)
    assert read_record(folder)["outputs"] == read_record(fresh)["outputs"]

    mark_interrupted(folder)
    written = sweep_output.write_sweep(SweepRequest(folder, POOLS, GRID, progress=False, chunk_rows=5000))
    assert written.reused_chunks == 0
    assert "another grid, inputs, chunk size or file layout" in capsys.readouterr().err
    assert len(list((folder / ROWS_FILE).iterdir())) == written.chunks < chunks
    pd.testing.assert_frame_equal(pd.read_parquet(folder / ROWS_FILE), pd.read_parquet(fresh / ROWS_FILE))


def read_record(folder):
    return json.loads((folder / MANIFEST_FILE).read_text())


@pytest.mark.slow
def test_a_killed_sweep_continues_from_its_last_complete_chunk(tmp_path):
    folder, fresh = tmp_path / "killed", tmp_path / "fresh"
    options = ["--weights-step", "0.05", "--capacities", "5,7,9", "--chunk-rows", "3000", "--no-progress"]
    first = subprocess.Popen([sys.executable, "-m", "evictlab", "sweep", *options, "--output-dir", str(folder)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        while len(list((folder / SUMMARY_FILE).glob("part-*.parquet"))) < 3:
            assert first.poll() is None, f"the sweep ended before the test caught it: {first.communicate()}"
            assert time.monotonic() < deadline, "the sweep never wrote two chunks"
            time.sleep(0.002)
        first.send_signal(signal.SIGKILL)
    finally:
        first.communicate(timeout=DEADLINE_SECONDS)
    record = read_record(folder)
    assert record["status"] == "running"  # as the kill left it
    chunks = record["parameters"]["chunking"]["chunks"]
    vouched = sum(1 for name in record["outputs"] if name.startswith(f"{SUMMARY_FILE}/"))  # saved after each chunk

    second = subprocess.run([sys.executable, "-m", "evictlab", "sweep", *options, "--output-dir", str(folder)],
                            capture_output=True, text=True, timeout=DEADLINE_SECONDS)  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert "Traceback" not in second.stderr
    assert "stale lock" in second.stderr and "ended interrupted; resuming in place" in second.stderr
    kept = int(second.stderr.split("note: kept ")[1].split(" of ")[0])
    assert 2 <= kept == vouched < chunks  # a part on disk the record did not list yet is redone
    assert f"({kept:,} of {chunks:,} chunks kept from the interrupted run)" in second.stdout
    assert read_record(folder)["status"] == "success"

    assert cli.main(["sweep", *options, "--output-dir", str(fresh)]) == 0
    assert folder_files(folder) == folder_files(fresh)


@pytest.mark.slow
def test_a_local_dask_cluster_writes_the_same_files(tmp_path, capsys):
    options = ["sweep", "--weights-step", "0.1", "--confirmation-half-lives", "30,90", "--capacities", "5,7",
               "--chunk-rows", "2000", "--no-progress"]  # fmt: skip
    assert cli.main([*options, "--workers", "0", "--output-dir", str(tmp_path / "here")]) == 0
    here = capsys.readouterr().out
    assert cli.main([*options, "--workers", "2", "--output-dir", str(tmp_path / "dask")]) == 0
    assert capsys.readouterr().out.replace("/dask", "/here") == here
    assert folder_files(tmp_path / "dask") == folder_files(tmp_path / "here")
    record = read_record(tmp_path / "dask")
    assert record["summary"]["placement"] == "local Dask cluster of 2 process workers"
    assert record["summary"]["chunks"] == 2 * 6  # per policy, 22 settings of 90 rows a chunk


def test_placement_reaches_write_sweep_in_process(tmp_path):
    request = SweepRequest(tmp_path, POOLS, make_grid(), progress=False, placement=Placement(workers=0))
    written = sweep_output.write_sweep(request)
    assert read_record(tmp_path)["summary"]["placement"] == "in-process (no Dask)"
    assert written.rows == 2 * 45 * 3


# --- layouts, presets, the printed tables -----------------------------------------------------

LEGACY = Path(__file__).parent / "fixtures" / "sweep-layout-1"  # written by evictlab at 476f281


def test_a_folder_of_layout_1_still_loads():
    grid = make_grid(weights=[(0.65, 0.25, 0.10), (1.0, 0.0, 0.0)], capacities=(5, 7))
    expected = run_sweep(POOLS, grid, progress=False)
    loaded = sweep_output.load_sweep(LEGACY)
    assert "layout" not in loaded.manifest["parameters"]["chunking"]
    pd.testing.assert_frame_equal(loaded.rows, expected.rows)
    pd.testing.assert_frame_equal(loaded.summary, expected.summary)


@pytest.mark.parametrize("layout", [2, 3])
def test_a_folder_of_the_index_layouts_is_refused_naming_its_layout(tmp_path, layout):
    sweep_output.write_sweep(SweepRequest(tmp_path, POOLS, make_grid(), progress=False))
    record = read_record(tmp_path)
    record["parameters"]["chunking"]["layout"] = layout
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(record))
    with pytest.raises(ContractError, match=f"{MANIFEST_FILE}: written in sweep layout {layout} by an earlier"):
        sweep_output.load_sweep(tmp_path)


def test_presets_of_other_cases_and_orders_and_scalar_policies_read_back_whole(tmp_path):
    pools = {"later": PreparedCases(CASES[5:], CLOCK), "reversed": PreparedCases(RAW_CASES[:17][::-1], CLOCK)}
    grid = make_grid(weights=[(0.65, 0.25, 0.10), (0.2, 0.6, 0.2)], capacities=(5, 7),
                     policies=("random", "hybrid-v1", "lru", "confidence"))  # fmt: skip
    sweep_output.write_sweep(SweepRequest(tmp_path, pools, grid, progress=False, chunk_rows=60))
    expected = run_sweep(pools, grid, progress=False)
    loaded = sweep_output.load_sweep(tmp_path)
    pd.testing.assert_frame_equal(loaded.rows, expected.rows)
    pd.testing.assert_frame_equal(loaded.summary, expected.summary)
    pd.testing.assert_frame_equal(loaded.extremes, extreme_settings(expected.summary), check_dtype=False)


@pytest.mark.parametrize("policies", [("confidence", "hybrid-v1"), ("random", "lru"), ("hybrid-v1",)])
def test_the_printed_default_table_has_every_scenario_and_a_total(policies):
    from evictlab.cli.sweep import retention_table

    grid = make_grid(weights=[(0.65, 0.25, 0.10)], capacities=(5, 7, 9), policies=policies)
    summary = run_sweep(TWO_PRESETS, grid, progress=False).summary
    for preset in TWO_PRESETS:
        mine = summary[summary["preset"] == preset]
        lines = retention_table(mine).to_string().splitlines()
        assert lines[-1].startswith("total ") and len(lines) == 1 + mine["scenario"].nunique() + 1
        assert lines[0].split() == [f"{p}/{k}" for p in policies for k in (5, 7, 9)]
    if "random" in policies:  # expected counts print with a decimal
        assert any("." in cell for cell in " ".join(lines).split("/"))


def test_deermem_default_rows_come_in_the_summary_order_whatever_the_chunks_order(tmp_path):
    grid = make_grid(weights=[(0.5, 0.5, 0.0), (0.2, 0.4, 0.4), (0.65, 0.25, 0.10)], capacities=(5, 7),
                     policies=("hybrid-v1", "confidence"))  # fmt: skip
    summary = run_sweep(TWO_PRESETS, grid, progress=False).summary
    expected = summary[summary["setting"] == 2].reset_index(drop=True)
    written = sweep_output.write_sweep(SweepRequest(tmp_path, TWO_PRESETS, grid, progress=False, chunk_rows=45 * 2))
    pd.testing.assert_frame_equal(written.defaults, expected)
    # Resumed: the kept chunks are counted first, and the order is still the summary's.
    mark_interrupted(tmp_path)
    (tmp_path / SUMMARY_FILE / "part-000001.parquet").unlink()
    resumed = sweep_output.write_sweep(SweepRequest(tmp_path, TWO_PRESETS, grid, progress=False, chunk_rows=45 * 2))
    assert 0 < resumed.reused_chunks < resumed.chunks
    pd.testing.assert_frame_equal(resumed.defaults, expected)
