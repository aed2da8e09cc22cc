"""The stored layout of a sweep folder: lean part files, settings and cases written once,
joined back into the in-memory tables; the summary's sums; a setting by its index."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from test_sweep import POOLS, TWO_PRESETS

from evictlab.analysis import sweep_output, sweep_tables
from evictlab.analysis.sweep import ROW_COLUMNS, SUMMARY_COLUMNS, make_grid, run_sweep
from evictlab.analysis.sweep_output import CASES_FILE, MANIFEST_FILE, ROWS_FILE, SETTINGS_FILE, SUMMARY_FILE
from evictlab.analysis.sweep_tables import STORED_ROW_COLUMNS, STORED_SUMMARY_COLUMNS

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
    # Without the joins the stored rows are much narrower than the tidy ones.
    assert len(part.column_names) < len(ROW_COLUMNS) - 8


def test_chunks_are_decided_and_written_in_row_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_output, "ROW_GROUP_ROWS", 500)  # 3 settings of 135 rows a group
    written = sweep_output.write_sweep(tmp_path / "groups", POOLS, GRID, progress=False)
    groups = pq.ParquetFile(tmp_path / "groups" / ROWS_FILE / "part-000001.parquet").metadata.num_row_groups
    assert written.chunks == 2 and groups == -(-GRID.size // 3)
    expected = run_sweep(POOLS, GRID, progress=False)
    loaded = sweep_output.load_sweep(tmp_path / "groups")
    pd.testing.assert_frame_equal(loaded.rows, expected.rows)
    pd.testing.assert_frame_equal(loaded.summary, expected.summary)


def test_a_folder_written_before_the_settings_moved_out_still_loads(tmp_path):
    sweep_output.write_sweep(tmp_path, POOLS, GRID, progress=False)
    expected = run_sweep(POOLS, GRID, progress=False)
    for folder in (ROWS_FILE, SUMMARY_FILE):
        for path in (tmp_path / folder).iterdir():
            path.unlink()
    expected.rows.to_parquet(tmp_path / ROWS_FILE / "part-000000.parquet")
    expected.summary.to_parquet(tmp_path / SUMMARY_FILE / "part-000000.parquet")
    for name in (SETTINGS_FILE, CASES_FILE):
        (tmp_path / name).unlink()
    loaded = sweep_output.load_sweep(tmp_path)
    pd.testing.assert_frame_equal(loaded.rows, expected.rows)
    pd.testing.assert_frame_equal(loaded.summary, expected.summary)
    assert list(loaded.summary.columns) == list(SUMMARY_COLUMNS)


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
