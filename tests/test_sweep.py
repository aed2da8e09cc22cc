"""Sweep grids, the tidy rows and summaries, the run folder and the ``evictlab sweep`` command."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re

import pandas as pd
import pytest
from test_engine import CLOCK, scenario_cases

from evictlab import cli, results
from evictlab.analysis import sweep, sweep_output
from evictlab.analysis.sweep import ROW_COLUMNS, SUMMARY_COLUMNS, SweepRequest, make_grid, run_sweep, simplex_weights
from evictlab.analysis.sweep_output import (
    EXTREMES_FILE,
    MANIFEST_FILE,
    ROWS_FILE,
    SETTINGS_FILE,
    SUMMARY_FILE,
)
from evictlab.core.runspec import RunSpec
from evictlab.errors import ContractError, OutputExistsError, UnknownPolicyError
from evictlab.policies import PolicyParams, modifiers
from evictlab.selection.engine import PreparedCases, reference_outcome

CASES = scenario_cases("protocol")
RAW_CASES = scenario_cases("raw")
POOLS = {"pr4810-final": PreparedCases(CASES, CLOCK)}
TWO_PRESETS = {**POOLS, "pr4810-run2": PreparedCases(RAW_CASES, CLOCK)}
DEFAULT = PolicyParams()


# --- grids ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("step", "points"), [(1, 3), (0.5, 6), (0.1, 66), (0.05, 231), (0.01, 5151)])
def test_simplex_sizes(step, points):
    triples = simplex_weights(step)
    assert len(triples) == points == len(set(triples))
    assert all(abs(a + b + c - 1) <= 1e-9 and min(a, b, c) >= 0 for a, b, c in triples)


@pytest.mark.parametrize("step", [0.05, 0.01])
def test_simplex_weights_are_exact_decimals_and_hold_deermem_default(step):
    triples = simplex_weights(step)
    assert all(weight == round(weight, 2) for triple in triples for weight in triple)
    assert DEFAULT.weights in triples  # exactly (0.65, 0.25, 0.10), not a neighbour
    assert triples[0] == (1.0, 0.0, 0.0)


@pytest.mark.parametrize("step", [0.03, 0.3, 0.0, -0.1, 1.5, math.nan, math.inf, True, "0.1"])
def test_bad_steps(step):
    with pytest.raises(ContractError, match="weight step"):
        simplex_weights(step)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([(0.5, 0.3, 0.3)], r"weights #1 \(0.5, 0.3, 0.3\) are off the simplex: they sum to 1.1"),
        ([(0.65, 0.25, 0.1), (0.7, 0.2, 0.2)], "weights #2"),
        ([(1.2, -0.1, -0.1)], "each weight must be a number in"),
        ([(0.5, 0.5)], "expected three numbers"),
        ([(0.5, 0.5, math.nan)], "each weight must be a number in"),
    ],
)
def test_off_simplex_weights_are_rejected(weights, message):
    with pytest.raises(ContractError, match=message):
        make_grid(weights=weights)


def test_parse_weights():
    assert sweep.parse_weights("0.65,0.25,0.10; 0.5,0.3,0.2") == ((0.65, 0.25, 0.1), (0.5, 0.3, 0.2))
    with pytest.raises(ContractError, match="weights #2 'a,b,c'"):
        sweep.parse_weights("1,0,0;a,b,c")
    with pytest.raises(ContractError, match="no weights"):
        sweep.parse_weights(" ; ")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"confirmation_half_lives": ()}, "empty grid: no confirmation half-lives"),
        ({"access_half_lives": ()}, "empty grid: no access half-lives"),
        ({"reserved_fractions": ()}, "empty grid: no reserved fractions"),
        ({"reserved_maxima": ()}, "empty grid: no reserved maxima"),
        ({"capacities": ()}, "empty grid: no capacities"),
        ({"policies": ()}, "empty grid: no policies"),
        ({"confirmation_half_lives": (90, 0)}, "confirmation half-lives must be numbers > 0, got 0"),
        ({"access_half_lives": (math.nan,)}, "access half-lives must be numbers > 0"),
        ({"access_half_lives": (30, 30.0)}, "access half-lives: 30 listed more than once"),
        ({"reserved_fractions": (1.5,)}, r"reserved fractions must be numbers in \[0, 1\]"),
        ({"reserved_maxima": (-1,)}, "reserved maxima must be integers >= 0"),
        ({"reserved_maxima": (2.0,)}, "reserved maxima must be integers >= 0"),
        ({"capacities": (0, 5)}, "capacity must be an integer >= 1, got 0"),
        ({"capacities": (5, 5)}, "capacities: 5 listed more than once"),
        ({"policies": ("hybrid-v1", "hybrid-v1")}, "policies: 'hybrid-v1' listed more than once"),
    ],
)
def test_bad_grids(options, message):
    with pytest.raises(ContractError, match=message):
        make_grid(**options)


def test_unknown_policy_names_the_known_ones():
    with pytest.raises(UnknownPolicyError, match=r"known policies: .*hybrid-v1"):
        make_grid(policies=("hybrid-v2",))


def test_a_grid_is_checked_as_it_is_made():
    grid = make_grid()
    with pytest.raises(ContractError, match="capacities: 5 listed more than once"):
        dataclasses.replace(grid, capacities=(5, 5))
    with pytest.raises(UnknownPolicyError, match="unknown policy 'nope'"):
        dataclasses.replace(grid, policies=("nope",))
    with pytest.raises(ContractError, match="empty grid: no weights"):
        dataclasses.replace(grid, weights=())
    with pytest.raises(ContractError, match="each weight must be a number in"):
        dataclasses.replace(grid, weights=((2.0, -1.0, 0.0),))
    with pytest.raises(ContractError, match=r"weights: \(0.65, 0.25, 0.1\) listed more than once"):
        dataclasses.replace(grid, weights=((0.65, 0.25, 0.1), (0.65, 0.25, 0.1)))


def test_a_request_checks_its_presets_and_capacities_as_it_is_made(tmp_path):
    folder = tmp_path / "run"
    with pytest.raises(ContractError, match="presets: 'pr4810-run2' listed more than once"):
        SweepRequest(folder, [RunSpec("pr4810-run2"), RunSpec("pr4810-final"), RunSpec("pr4810-run2")], make_grid())
    # A run spec's pools are not opened for the check: its config says their size.
    with pytest.raises(ContractError, match=r"capacity 10 is outside \[1, 9\] \(pool size 10, config .*\.yaml\)"):
        SweepRequest(folder, [RunSpec()], make_grid(capacities=(10,)))
    with pytest.raises(ContractError, match="no presets"):
        SweepRequest(folder, {}, make_grid())
    with pytest.raises(ContractError, match="expected a PoolSet or PreparedCases, got list"):
        SweepRequest(folder, {"mine": []}, make_grid())
    assert not folder.exists()
    request = SweepRequest(str(folder), [RunSpec("pr4810-run2"), RunSpec()], make_grid())
    assert list(request.pools) == ["pr4810-run2", "pr4810-final"] and request.output_dir == folder


def test_grid_defaults_and_order():
    assert make_grid().settings == (DEFAULT,)
    grid = make_grid(
        weights_step=0.5,
        weights=[(0.65, 0.25, 0.10), (0.5, 0.5, 0.0)],  # the second is already on the grid
        confirmation_half_lives=(30, 90),
        access_half_lives=(7,),
        reserved_fractions=(0.0, 0.1),
        reserved_maxima=(10,),
    )
    assert grid.weights == (*simplex_weights(0.5), (0.65, 0.25, 0.10))
    assert len(grid.settings) == 7 * 2 * 1 * 2 * 1
    # Weights outermost, reservation innermost.
    assert [s.confirmation_half_life_days for s in grid.settings[:4]] == [30, 30, 90, 90]
    assert [s.correction_reserved_fraction for s in grid.settings[:4]] == [0.0, 0.1, 0.0, 0.1]
    assert sweep.default_settings(grid) == []
    with_default = make_grid(weights_step=0.05, confirmation_half_lives=(30, 90), access_half_lives=(7, 30))
    (index,) = sweep.default_settings(with_default)
    assert with_default.settings[index] == DEFAULT


# --- rows --------------------------------------------------------------------------------------


GRID = make_grid(
    weights=[(1.0, 0.0, 0.0), (0.65, 0.25, 0.10), (0.0, 0.0, 1.0)],
    confirmation_half_lives=(90, 7),
    reserved_fractions=(0.1, 0.0),
    capacities=(5, 7, 9),
)


@pytest.fixture(scope="module")
def result():
    return run_sweep(TWO_PRESETS, GRID, progress=False)


def test_rows_are_tidy_and_complete(result):
    rows = result.rows
    n_settings = len(GRID.settings)
    assert list(rows.columns) == list(ROW_COLUMNS)
    assert len(rows) == 2 * 2 * n_settings * 45 * 3
    assert rows.duplicated(["preset", "policy", "setting", "case_id", "capacity"]).sum() == 0
    dtypes = rows.dtypes.astype(str).to_dict()
    assert {name: dtypes[name] for name in ("setting", "capacity", "support_rank", "reserved_correction_slots",
                                            "correction_reserved_max")} == dict.fromkeys(
        ("setting", "capacity", "support_rank", "reserved_correction_slots", "correction_reserved_max"), "int64")
    assert dtypes["support_retained"] == "bool"
    assert dtypes["support_margin"] == "float64"
    # Nesting: preset, policy, setting, case (build order), capacity.
    head = rows.head(4)
    assert head["capacity"].tolist() == [5, 7, 9, 5]
    assert head["case_id"].astype(str).tolist() == [CASES[0].case_id] * 3 + [CASES[1].case_id]
    assert set(rows["preset"].astype(str).iloc[: len(rows) // 2]) == {"pr4810-final"}
    assert rows["policy"].astype(str).iloc[0] == "confidence"
    assert rows["source"].astype(str).iloc[-1] == "synthetic"
    assert rows["scenario"].astype(str).iloc[-1] == "correction_reserve"


def test_rows_carry_each_setting_and_the_scalar_decision(result):
    rows = result.rows
    sample = rows.iloc[:: 997]  # a spread of rows through every preset and policy
    cases = {"pr4810-final": CASES, "pr4810-run2": RAW_CASES}
    by_id = {preset: {case.case_id: case for case in items} for preset, items in cases.items()}
    for row in sample.itertuples(index=False):
        setting = GRID.settings[row.setting]
        assert tuple(getattr(row, name) for name in sweep.SETTING_COLUMNS) == tuple(setting.as_dict().values())
        case = by_id[row.preset][row.case_id]
        assert (row.scenario, row.source) == (case.scenario, case.source)
        expected = reference_outcome(case, row.policy, setting, row.capacity, CLOCK)
        assert row.support_retained == expected.support_retained
        assert row.support_rank == expected.support_rank
        assert row.reserved_correction_slots == expected.reserved_correction_slots
        assert row.support_margin == expected.support_margin or (
            math.isnan(row.support_margin) and math.isnan(expected.support_margin)
        )


def test_reservation_fraction_zero_loses_the_corrections(result):
    rows = result.rows
    hybrid = rows[(rows["policy"] == "hybrid-v1") & (rows["scenario"] == "correction_reserve")]
    assert (hybrid.loc[hybrid["correction_reserved_fraction"] == 0.1, "reserved_correction_slots"] == 1).all()
    assert (hybrid.loc[hybrid["correction_reserved_fraction"] == 0.0, "reserved_correction_slots"] == 0).all()


def test_capacities_outside_the_pool_are_rejected():
    with pytest.raises(ContractError, match=r"capacity 10 is outside \[1, 9\] \(pool size 10, preset pr4810-final\)"):
        run_sweep(POOLS, make_grid(capacities=(9, 10)), progress=False)
    with pytest.raises(ContractError, match="no presets"):
        run_sweep({}, make_grid(), progress=False)
    with pytest.raises(ContractError, match="expected a PoolSet or PreparedCases, got list"):
        run_sweep({"x": CASES}, make_grid(), progress=False)


def test_registry_policies_run_through_the_scalar_path():
    grid = make_grid(weights=[(0.65, 0.25, 0.10), (1.0, 0.0, 0.0)], capacities=(5, 7), policies=("lru", "hybrid-v1"))
    rows = run_sweep(POOLS, grid, progress=False).rows
    lru = rows[rows["policy"] == "lru"]
    assert len(lru) == 2 * 45 * 2
    for row in lru.iloc[::17].itertuples(index=False):
        case = CASES[[c.case_id for c in CASES].index(row.case_id)]
        expected = reference_outcome(case, "lru", grid.settings[row.setting], row.capacity, CLOCK)
        assert (row.support_retained, row.support_rank) == (expected.support_retained, expected.support_rank)


def test_progress_bar_only_when_asked(capsys):
    run_sweep(POOLS, make_grid(), progress=False)
    assert capsys.readouterr().err == ""
    run_sweep(POOLS, make_grid(), progress=True)
    assert "sweep" in capsys.readouterr().err


# --- summaries ---------------------------------------------------------------------------------


def test_scenario_summary_counts_retained_supports(result):
    summary = result.summary
    assert list(summary.columns) == list(SUMMARY_COLUMNS)
    assert len(summary) == 2 * 2 * len(GRID.settings) * 5 * 3
    assert summary["cases"].sum() == len(result.rows)
    default = GRID.settings.index(DEFAULT)
    mine = summary[(summary["preset"] == "pr4810-final") & (summary["setting"] == default)]
    totals = mine.groupby(["policy", "capacity"], observed=True)["support_retained"].sum()
    assert totals.to_dict() == {
        ("confidence", 5): 20, ("confidence", 7): 27, ("confidence", 9): 35,
        ("hybrid-v1", 5): 35, ("hybrid-v1", 7): 45, ("hybrid-v1", 9): 45,
    }
    assert (mine["support_retained_rate"] == mine["support_retained"] / mine["cases"]).all()
    assert (mine["confidence_weight"] == 0.65).all() and (mine["correction_reserved_max"] == 10).all()


def test_extreme_settings_pick_the_first_of_the_tied(result):
    summary = result.summary
    extremes = sweep.extreme_settings(summary)
    assert len(extremes) == 2 * 2 * 5 * 2
    for row in extremes.itertuples(index=False):
        mine = summary[(summary["preset"] == row.preset) & (summary["policy"] == row.policy)
                       & (summary["scenario"] == row.scenario)]
        totals = {}
        for item in mine.itertuples(index=False):
            totals[item.setting] = totals.get(item.setting, 0) + item.support_retained
        target = (max if row.extreme == "best" else min)(totals.values())
        tied = sorted(setting for setting, total in totals.items() if total == target)
        assert (row.setting, row.support_retained, row.tied, row.settings) == (tied[0], target, len(tied), len(totals))
        assert row.confidence_weight == GRID.settings[row.setting].confidence_weight


# --- run folders -------------------------------------------------------------------------------


def read_manifest(folder):
    return json.loads((folder / MANIFEST_FILE).read_text())


def folder_files(folder):
    """Every file under ``folder`` (relative path -> bytes), the run record aside."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MANIFEST_FILE
    }


def test_write_sweep_writes_the_tables_with_provenance(tmp_path):
    folder = tmp_path / "run"
    request = SweepRequest(folder, POOLS, GRID, progress=False, arguments={"weights_step": None})
    written = sweep_output.write_sweep(request)
    manifest = read_manifest(folder)
    assert manifest["status"] == "success" and manifest["error"] is None
    assert manifest["kind"] == "sweep" and manifest["schema"] == "evictlab-run" and manifest["schema_version"] == 1
    assert {"evictlab_version", "git", "python", "packages"} <= set(manifest["provenance"])
    assert set(manifest["provenance"]["git"]) == {"head", "dirty"}
    parameters = manifest["parameters"]
    assert parameters["grid"]["settings"] == len(GRID.settings)
    assert parameters["grid"]["capacities"] == [5, 7, 9]
    assert parameters["presets"] == ["pr4810-final"]
    assert parameters["inputs"]["pr4810-final"]["cases"] == 45
    assert parameters["arguments"] == {"weights_step": None}
    assert parameters["chunking"] == {
        "chunk_rows": sweep.CHUNK_ROWS, "chunks": 2, "rows": written.rows, "layout": sweep_output.LAYOUT,
    }  # fmt: skip
    assert parameters["tie_breaks"] == {"confidence": "input-order", "hybrid-v1": "input-order"}
    assert manifest["started_at"] <= manifest["finished_at"] and manifest["elapsed_seconds"] >= 0
    files = folder_files(folder)
    assert set(files) == {EXTREMES_FILE, SETTINGS_FILE,
                          *(f"{name}/part-00000{i}.parquet" for name in (ROWS_FILE, SUMMARY_FILE) for i in (0, 1))}
    assert {name: entry["sha256"] for name, entry in manifest["outputs"].items()} == {
        name: hashlib.sha256(data).hexdigest() for name, data in files.items()
    }
    in_memory = run_sweep(POOLS, GRID, progress=False)
    loaded = sweep_output.load_sweep(folder)
    pd.testing.assert_frame_equal(loaded.rows, in_memory.rows)
    pd.testing.assert_frame_equal(loaded.summary, in_memory.summary)
    assert written.rows == len(in_memory.rows) and len(loaded.summary) == manifest["summary"]["scenario_summary_rows"]


def test_identical_sweeps_write_identical_tables(tmp_path):
    for name in ("first", "second"):
        sweep_output.write_sweep(SweepRequest(tmp_path / name, TWO_PRESETS, GRID, progress=False))
    assert folder_files(tmp_path / "first") == folder_files(tmp_path / "second")


def test_a_finished_sweep_is_never_overwritten(tmp_path):
    sweep_output.write_sweep(SweepRequest(tmp_path, POOLS, make_grid(), progress=False))
    before = {**folder_files(tmp_path), MANIFEST_FILE: (tmp_path / MANIFEST_FILE).read_bytes()}
    with pytest.raises(OutputExistsError, match="finished sweep"):
        sweep_output.write_sweep(SweepRequest(tmp_path, POOLS, GRID, progress=False))
    assert {**folder_files(tmp_path), MANIFEST_FILE: (tmp_path / MANIFEST_FILE).read_bytes()} == before


def test_a_grid_the_pools_cannot_take_is_refused_before_the_folder_is_made(tmp_path):
    with pytest.raises(ContractError, match="capacity 12 is outside"):
        sweep_output.write_sweep(SweepRequest(tmp_path / "run", POOLS, make_grid(capacities=(12,)), progress=False))
    assert not (tmp_path / "run").exists()


def test_a_failed_sweep_records_the_error_and_may_be_rerun_in_place(tmp_path, monkeypatch):
    def fail(*arguments):
        raise ContractError("the engine failed")

    with monkeypatch.context() as patch:
        patch.setattr(sweep_output, "chunk_files", fail)
        with pytest.raises(ContractError, match="the engine failed"):
            sweep_output.write_sweep(SweepRequest(tmp_path, POOLS, make_grid(), progress=False))
    manifest = read_manifest(tmp_path)
    assert manifest["status"] == "error" and manifest["error"] == "the engine failed"
    assert not (tmp_path / ROWS_FILE).exists()
    with pytest.raises(ContractError, match="did not finish"):
        sweep_output.load_sweep(tmp_path)
    sweep_output.write_sweep(SweepRequest(tmp_path, POOLS, make_grid(), progress=False))
    assert read_manifest(tmp_path)["status"] == "success"


def test_an_interrupted_sweep_may_be_rerun_in_place(tmp_path):
    with pytest.raises(KeyboardInterrupt), results.run(tmp_path, "sweep"):
        (tmp_path / ROWS_FILE).write_bytes(b"partial")
        raise KeyboardInterrupt
    assert read_manifest(tmp_path)["status"] == "interrupted"
    sweep_output.write_sweep(SweepRequest(tmp_path, POOLS, make_grid(), progress=False))
    assert read_manifest(tmp_path)["status"] == "success"
    assert "ended interrupted; resuming in place" in read_manifest(tmp_path)["notes"][0]
    assert len(pd.read_parquet(tmp_path / ROWS_FILE)) == 2 * 45 * 3


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({MANIFEST_FILE: "{not json"}, "unreadable run record"),
        ({MANIFEST_FILE: '{"status": "done"}'}, "not an evictlab run record"),
        ({MANIFEST_FILE: "[1, 2]"}, "not an evictlab run record"),
        ({SUMMARY_FILE: "a,b\n"}, "no sweep.run.json says they belong to an unfinished sweep run"),
    ],
)
def test_folders_of_unknown_state_are_refused(tmp_path, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises((OutputExistsError, ContractError), match=message):
        sweep_output.write_sweep(SweepRequest(tmp_path, POOLS, make_grid(), progress=False))


# --- the command line ------------------------------------------------------------------------


def run_cli(*argv):
    return cli.main(["sweep", "--no-progress", *argv])


def test_cli_writes_the_tables_prints_the_settings_that_matter_and_refuses_to_overwrite(tmp_path, capsys):
    folder = tmp_path / "sweep"
    argv = ["--weights-step", "0.25", "--weights", "0.65,0.25,0.10", "--confirmation-half-lives", "90,7.5",
            "--capacities", "5,7,9", "--output-dir", str(folder)]
    assert run_cli(*argv) == 0
    out = capsys.readouterr().out
    assert {path.name for path in folder.iterdir()} == {
        MANIFEST_FILE, ROWS_FILE, SUMMARY_FILE, SETTINGS_FILE, EXTREMES_FILE,
    }  # fmt: skip
    manifest = read_manifest(folder)
    assert manifest["status"] == "success"
    assert manifest["parameters"]["grid"]["confirmation_half_lives"] == [90, 7.5]
    assert manifest["parameters"]["grid"]["access_half_lives"] == [30]  # the config's
    assert manifest["parameters"]["grid"]["weights"] == [[0.65, 0.25, 0.1]]  # beyond the 0.25 simplex
    assert manifest["parameters"]["grid"]["weight_triples"] == len(simplex_weights(0.25)) + 1
    inputs = manifest["parameters"]["inputs"]["pr4810-final"]
    assert set(inputs) >= {"protocol_id", "dataset", "artifacts", "variant"}
    assert len(inputs["dataset"]["sha256"]) == 64 and len(inputs["artifacts"]["config_sha256"]) == 64
    assert "DeerMem default, setting" in out
    assert "total                       20/45        27/45        35/45       35/45       45/45       45/45" in out
    assert "best and worst setting per scenario" in out
    assert "confidence: every setting retains the same number of supports in every scenario" in out
    settings = (len(simplex_weights(0.25)) + 1) * 2
    assert len(sweep_output.load_sweep(folder).rows) == 2 * settings * 45 * 3
    assert len(pd.read_parquet(folder / ROWS_FILE)) == 2 * settings * 45 * 3  # a plain Parquet dataset

    assert run_cli(*argv) == 2
    assert "finished sweep run; refusing to overwrite" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--weights-step", "0.03"], "does not divide 1"),
        (["--weights", "0.5,0.3,0.3"], "off the simplex"),
        (["--capacities", "5,10"], r"capacity 10 is outside \[1, 9\] \(pool size 10, config "),
        (["--preset", "pr4810-run1", "--presets", "pr4810-run2"], "either --preset or --presets"),
        (["--presets", "pr4810-final,nope"], "unknown preset 'nope'"),
        (["--presets", "pr4810-run1,pr4810-run1"], "presets: 'pr4810-run1' listed more than once"),
        (["--policies", "nope"], "unknown policy 'nope'"),
    ],
)
def test_cli_errors_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    assert run_cli(*argv, "--output-dir", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert err.startswith("evictlab sweep: error:") and len(err.strip().splitlines()) <= 2
    assert re.search(message, err)


def test_cli_sweeps_several_presets(tmp_path, capsys):
    assert run_cli("--presets", "pr4810-final,pr4810-run2", "--capacities", "7", "--output-dir", str(tmp_path)) == 0
    rows = pd.read_parquet(tmp_path / ROWS_FILE)
    assert rows["preset"].astype(str).unique().tolist() == ["pr4810-final", "pr4810-run2"]
    manifest = read_manifest(tmp_path)
    assert manifest["parameters"]["inputs"]["pr4810-run2"]["variant"]["fact_ids"] == "raw"
    assert "preset pr4810-run2" in capsys.readouterr().out


def test_cli_parses_each_policy_spec_once(tmp_path):
    # Four specs, one of them written short (its policy's name spells the reservation out):
    # each is parsed once for the whole command, however many layers check or resolve it.
    modifiers._parsed.cache_clear()
    argv = ["--policies", "lru,lfu-aging,lru+reserve(correction)", "--param", "lfu-aging.half_life_days=7,30",
            "--capacities", "7", "--output-dir", str(tmp_path)]  # fmt: skip
    assert run_cli(*argv) == 0
    assert modifiers._parsed.cache_info().misses == 4
    assert read_manifest(tmp_path)["parameters"]["grid"]["policies"] == [
        "lru", "lfu-aging(half_life_days=7)", "lfu-aging(half_life_days=30)", "lru+reserve(correction)",
    ]  # fmt: skip
