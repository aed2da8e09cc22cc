"""The stored layout of a sweep folder: lean part files, settings and cases written once,
joined back into the in-memory tables; the summary's sums; a setting by its index."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from test_engine import CLOCK
from test_sweep import CASES, POOLS, RAW_CASES, TWO_PRESETS, read_manifest

from evictlab import cli
from evictlab.analysis import sweep_chunks, sweep_output, sweep_tables
from evictlab.analysis.sweep import make_grid, run_sweep
from evictlab.analysis.sweep_output import CASES_FILE, MANIFEST_FILE, ROWS_FILE, SETTINGS_FILE, SUMMARY_FILE
from evictlab.analysis.sweep_tables import STORED_ROW_COLUMNS, STORED_SUMMARY_COLUMNS
from evictlab.errors import ContractError, EvictlabError
from evictlab.selection.engine import PreparedCases

GRID = make_grid(weights_step=0.25, confirmation_half_lives=(90, 7), capacities=(5, 7, 9))


def test_part_files_hold_keys_and_outputs_and_the_rest_is_written_once(tmp_path):
    sweep_output.write_sweep(tmp_path, TWO_PRESETS, GRID, progress=False, chunk_rows=2000)
    part = pq.read_table(tmp_path / ROWS_FILE / "part-000000.parquet")
    assert tuple(part.column_names) == STORED_ROW_COLUMNS
    assert {str(part.schema.field(name).type) for name in ("setting", "case", "capacity", "support_rank")} == {"int32"}
    assert tuple(pq.read_table(tmp_path / SUMMARY_FILE / "part-000000.parquet").column_names) == STORED_SUMMARY_COLUMNS
    settings = pd.read_parquet(tmp_path / SETTINGS_FILE)
    assert settings["setting"].tolist() == list(range(GRID.size))
    assert [settings.iloc[index, 1:].tolist() for index in (0, 17)] == [
        list(GRID.settings[index].as_dict().values()) for index in (0, 17)
    ]
    cases = pd.read_parquet(tmp_path / CASES_FILE)
    assert len(cases) == 2 * 45 and cases["case"].tolist() == [*range(45), *range(45)]
    assert cases["preset"].astype(str).unique().tolist() == list(TWO_PRESETS)
    record = json.loads((tmp_path / MANIFEST_FILE).read_text())
    assert record["parameters"]["tie_breaks"] == {"confidence": "input-order", "hybrid-v1": "input-order"}


def test_chunks_are_decided_and_written_in_row_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_chunks, "ROW_GROUP_ROWS", 500)  # 3 settings of 135 rows a group
    written = sweep_output.write_sweep(tmp_path / "groups", POOLS, GRID, progress=False)
    groups = pq.ParquetFile(tmp_path / "groups" / ROWS_FILE / "part-000001.parquet").metadata.num_row_groups
    assert written.chunks == 2 and groups == -(-GRID.size // 3)
    expected = run_sweep(POOLS, GRID, progress=False)
    loaded = sweep_output.load_sweep(tmp_path / "groups")
    pd.testing.assert_frame_equal(loaded.rows, expected.rows)
    pd.testing.assert_frame_equal(loaded.summary, expected.summary)


LEGACY = Path(__file__).parent / "fixtures" / "sweep-layout-1"  # written by evictlab at 476f281


def test_a_folder_written_before_the_settings_moved_out_still_loads():
    grid = make_grid(weights=[(0.65, 0.25, 0.10), (1.0, 0.0, 0.0)], capacities=(5, 7))
    expected = run_sweep(POOLS, grid, progress=False)
    loaded = sweep_output.load_sweep(LEGACY)
    assert "layout" not in loaded.manifest["parameters"]["chunking"]
    pd.testing.assert_frame_equal(loaded.rows, expected.rows)
    pd.testing.assert_frame_equal(loaded.summary, expected.summary)


def test_a_folder_of_this_layout_without_its_settings_file_is_an_error(tmp_path):
    sweep_output.write_sweep(tmp_path, POOLS, GRID, progress=False)
    (tmp_path / SETTINGS_FILE).unlink()
    with pytest.raises(ContractError, match=r"settings\.parquet: missing"):
        sweep_output.load_sweep(tmp_path)


def kahan_by_group(values, group_of, groups):
    """The compensated sum over cases, in case order, of every (setting, capacity) column."""
    settings, _, capacities = values.shape
    out = np.zeros((settings, groups, capacities))
    for setting, capacity in itertools.product(range(settings), range(capacities)):
        for group in range(groups):
            total = compensation = 0.0
            for case in np.flatnonzero(np.asarray(group_of) == group):
                term = values[setting, case, capacity] - compensation
                running = total + term
                compensation = (running - total) - term
                total = running
            out[setting, group, capacity] = total
    return out


@pytest.mark.parametrize("fraction_share", [0.0, 0.02, 1.0])
def test_group_sums_are_compensated_where_a_fraction_is_summed(fraction_share):
    rng = np.random.default_rng(7)
    values = rng.integers(0, 2, size=(40, 30, 3)).astype(np.float64)
    fractions = rng.random(values.shape) < fraction_share
    values[fractions] = rng.choice([1 / 3, 2 / 3, 0.1, 1 / 7, 0.7], size=int(fractions.sum()))
    group_of = rng.integers(0, 4, size=30).tolist()
    sums = sweep_tables._compensated_group_sums(values, group_of, 4)
    expected = kahan_by_group(values, group_of, 4)
    assert np.array_equal(sums, expected)  # bit for bit
    plain = sweep_tables._group_sums(values, group_of, 4, np.float64)
    # The data is such that a plain sum differs from the compensated one somewhere, so the
    # shortcut for whole numbers is tested on both sides.
    assert np.array_equal(plain, expected) == (fraction_share == 0.0)


def test_a_setting_by_index_is_the_one_the_grid_builds():
    grid = make_grid(
        weights_step=0.5, weights=[(0.65, 0.25, 0.10), (-0.0, 1.0, 0.0)], confirmation_half_lives=(90, 7.5),
        access_half_lives=(30,), reserved_fractions=(0.1, 0.0), reserved_maxima=(10, 2),
    )  # fmt: skip
    columns = grid.settings_between(0, grid.size)
    for index in range(grid.size):
        setting = grid.setting(index)
        assert setting == columns[index]
        assert all(
            np.float64(value).tobytes() == np.float64(getattr(columns[index], name)).tobytes()
            for name, value in setting.as_dict().items()
        )  # -0.0 is +0.0 in both
    with pytest.raises(IndexError):
        grid.setting(grid.size)


def test_presets_of_other_cases_and_orders_are_joined_back_by_name(tmp_path):
    pools = {
        "later": PreparedCases(CASES[5:], CLOCK),
        "reversed": PreparedCases(RAW_CASES[:17][::-1], CLOCK),
    }
    grid = make_grid(weights=[(0.65, 0.25, 0.10), (0.2, 0.6, 0.2)], capacities=(5, 7),
                     policies=("random", "hybrid-v1", "lru", "confidence"))  # fmt: skip
    sweep_output.write_sweep(tmp_path, pools, grid, progress=False, chunk_rows=60)
    expected = run_sweep(pools, grid, progress=False)
    loaded = sweep_output.load_sweep(tmp_path)
    pd.testing.assert_frame_equal(loaded.rows, expected.rows)
    pd.testing.assert_frame_equal(loaded.summary, expected.summary)
    # A part read on its own joins as well, and an empty selection gives an empty frame.
    stored = pd.read_parquet(tmp_path / ROWS_FILE / "part-000005.parquet")
    tables = [pd.read_parquet(tmp_path / name) for name in (CASES_FILE, SETTINGS_FILE)]
    part = sweep_tables.tidy_rows(stored, *tables, dict.fromkeys(grid.policies, "input-order"))
    assert part["case_id"].tolist() == [
        case.case_id for case in pools[str(stored["preset"].iloc[0])].cases for _ in (5, 7)
    ][: len(part)]
    empty = sweep_tables.tidy_rows(stored.iloc[:0], *tables, {})
    assert empty.empty and list(empty.columns) == list(expected.rows.columns)


@pytest.mark.parametrize("failing", [0, 27, 87])  # the first, a middle and the last row group
def test_a_row_group_that_fails_to_encode_fails_the_sweep(tmp_path, monkeypatch, failing):
    monkeypatch.setattr(sweep_chunks, "ROW_GROUP_ROWS", 500)  # 3 settings a row group: starts 0, 3, ..., 87
    real = sweep_chunks.rows_table

    def rows_table(categories, preset, policy, first, *rest):
        if policy == "hybrid-v1" and first == failing:
            raise ValueError("cannot encode")
        return real(categories, preset, policy, first, *rest)

    monkeypatch.setattr(sweep_chunks, "rows_table", rows_table)
    grid = make_grid(weights_step=0.125, confirmation_half_lives=(90, 7), capacities=(5, 7, 9))
    assert grid.size == 90
    with pytest.raises(EvictlabError, match=r"chunk 1 \(pr4810-final, hybrid-v1, settings 0-89\): writing its tables"):
        sweep_output.write_sweep(tmp_path / "api", POOLS, grid, progress=False)
    assert read_manifest(tmp_path / "api")["status"] == "error"


def test_the_command_reports_a_failed_row_group_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sweep_chunks, "rows_table", lambda *arguments: 1 / 0)
    assert cli.main(["sweep", "--no-progress", "--output-dir", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    (line,) = [line for line in error.splitlines() if line.startswith("evictlab sweep: error:")]
    assert line.startswith("evictlab sweep: error: chunk 0 (pr4810-final, confidence") and "ZeroDivisionError" in line
    assert "Traceback" not in error and read_manifest(tmp_path)["status"] == "error"


@pytest.mark.parametrize("layout", [None, 2])  # before the layout was recorded; before confidence was stored once
def test_an_unfinished_sweep_of_an_earlier_layout_starts_over(tmp_path, capsys, layout):
    sweep_output.write_sweep(tmp_path, POOLS, GRID, progress=False, chunk_rows=2000)
    path = tmp_path / MANIFEST_FILE
    record = json.loads(path.read_text())
    if layout is None:
        del record["parameters"]["chunking"]["layout"]
    else:
        record["parameters"]["chunking"]["layout"] = layout
    path.write_text(json.dumps({**record, "status": "interrupted", "error": "killed"}))
    written = sweep_output.write_sweep(tmp_path, POOLS, GRID, progress=False, chunk_rows=2000)
    assert written.reused_chunks == 0
    assert "file layout (an earlier evictlab's); starting over" in capsys.readouterr().err


def test_group_sums_are_pandas_group_sums_bit_for_bit():
    rng = np.random.default_rng(11)
    values = rng.choice([0.0, 1.0, 1 / 3, 0.1, 2 / 7], size=(25, 40, 3), p=[0.4, 0.4, 0.1, 0.05, 0.05])
    group_of = rng.integers(0, 5, size=40)
    group_of[:5] = range(5)  # groups in order of first appearance, as the summary numbers them
    sums = sweep_tables._compensated_group_sums(values, group_of.tolist(), 5)
    frame = pd.DataFrame({
        "setting": np.repeat(np.arange(25), 40 * 3), "group": np.tile(np.repeat(group_of, 3), 25),
        "capacity": np.tile(np.arange(3), 25 * 40), "value": values.reshape(-1),
    })  # fmt: skip
    by_pandas = frame.groupby(["setting", "group", "capacity"], sort=False)["value"].sum()
    assert np.array_equal(sums.reshape(-1), by_pandas.to_numpy())


def test_a_policy_that_ignores_the_setting_is_stored_once_and_read_back_for_every_setting(tmp_path):
    grid = make_grid(weights_step=0.5, confirmation_half_lives=(90, 7), capacities=(5, 7),
                     policies=("confidence", "hybrid-v1", "confidence+reserve(correction,0.1,10)"))  # fmt: skip
    written = sweep_output.write_sweep(tmp_path, TWO_PRESETS, grid, progress=False, chunk_rows=500)
    assert written.rows == 3 * 2 * grid.size * 45 * 2
    stored = pd.read_parquet(tmp_path / ROWS_FILE)
    every = stored[stored["setting"] == sweep_tables.EVERY_SETTING]
    assert set(every["policy"]) == {"confidence"} and len(every) == 2 * 45 * 2  # once per preset
    assert len(stored) == written.rows - 2 * 45 * 2 * (grid.size - 1)
    expected = run_sweep(TWO_PRESETS, grid, progress=False)
    loaded = sweep_output.load_sweep(tmp_path)
    pd.testing.assert_frame_equal(loaded.rows, expected.rows)
    pd.testing.assert_frame_equal(loaded.summary, expected.summary)
    assert written.summary_rows == len(expected.summary)
    extremes = written.extremes[written.extremes["policy"] == "confidence"]
    assert (extremes["tied"] == grid.size).all() and (extremes["setting"] == 0).all()


def test_rows_for_every_setting_are_written_out_where_they_stood():
    frame = pd.DataFrame({
        "preset": pd.Categorical(["a"] * 5 + ["b"] * 2), "policy": pd.Categorical(["x", "x", "y", "y", "y", "x", "x"]),
        "setting": np.array([-1, -1, 0, 1, 2, -1, -1], dtype=np.int32), "value": range(7),
    })  # fmt: skip
    expanded = sweep_tables.expand_every_setting(frame, 3)
    assert expanded["value"].tolist() == [0, 1, 0, 1, 0, 1, 2, 3, 4, 5, 6, 5, 6, 5, 6]
    assert expanded["setting"].tolist() == [0, 0, 1, 1, 2, 2, 0, 1, 2, 0, 0, 1, 1, 2, 2]
    assert expanded["setting"].dtype == np.int32
    assert sweep_tables.expand_every_setting(frame.iloc[2:5], 3).equals(frame.iloc[2:5])


@pytest.mark.parametrize(
    "policies", [("confidence", "hybrid-v1"), ("random", "lru"), ("hybrid-v1",)],
)
def test_the_printed_default_table_is_pandas_text_of_the_retention_table(policies):
    from evictlab.cli.sweep import retention_lines, retention_table

    grid = make_grid(weights=[(0.65, 0.25, 0.10)], capacities=(5, 7, 9), policies=policies)
    summary = run_sweep(TWO_PRESETS, grid, progress=False).summary
    for preset in TWO_PRESETS:
        mine = summary[summary["preset"] == preset]
        lines = retention_lines(mine)
        assert lines == retention_table(mine).to_string().splitlines()
        assert lines[-1].startswith("total ") and len(lines) == 1 + mine["scenario"].nunique() + 1
    if "random" in policies:  # expected counts print with a decimal
        assert any("." in cell for cell in " ".join(retention_lines(summary[summary["preset"] == preset])).split("/"))


def test_deermem_default_rows_come_in_the_summary_order_whatever_the_chunks_order(tmp_path, capsys):
    grid = make_grid(weights=[(0.5, 0.5, 0.0), (0.2, 0.4, 0.4), (0.65, 0.25, 0.10)], capacities=(5, 7),
                     policies=("hybrid-v1", "confidence"))  # fmt: skip
    summary = run_sweep(TWO_PRESETS, grid, progress=False).summary
    expected = summary[summary["setting"] == 2].reset_index(drop=True)
    written = sweep_output.write_sweep(tmp_path, TWO_PRESETS, grid, progress=False, chunk_rows=45 * 2)
    pd.testing.assert_frame_equal(written.defaults, expected)
    # Resumed: the kept chunks are counted first, and the order is still the summary's.
    path = tmp_path / MANIFEST_FILE
    path.write_text(json.dumps({**json.loads(path.read_text()), "status": "interrupted", "error": "killed"}))
    (tmp_path / SUMMARY_FILE / "part-000001.parquet").unlink()
    resumed = sweep_output.write_sweep(tmp_path, TWO_PRESETS, grid, progress=False, chunk_rows=45 * 2)
    assert resumed.reused_chunks > 0
    pd.testing.assert_frame_equal(resumed.defaults, expected)


def test_rows_of_every_setting_must_be_written_out_before_their_parameters_are_joined(tmp_path):
    sweep_output.write_sweep(tmp_path, POOLS, GRID, progress=False)
    summary, settings = (pd.read_parquet(tmp_path / name) for name in (SUMMARY_FILE, SETTINGS_FILE))
    with pytest.raises(ContractError, match="expand_every_setting first"):
        sweep_tables.with_setting_columns(summary, settings)
    joined = sweep_tables.with_setting_columns(sweep_tables.expand_every_setting(summary, len(settings)), settings)
    assert len(joined) == 2 * GRID.size * 5 * 3
