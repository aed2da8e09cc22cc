"""Protocol diffs on the embedded demo dataset: cascades, tie-breaks, consistency with run-policy, errors."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from evictlab.analysis.diff import (
    CASES_FILE,
    DIFF_FILES,
    RUN_FILE,
    SUMMARY_FILE,
    diff_pool_sets,
    diff_specs,
    summary_lines,
)
from evictlab.analysis.evaluate import decide
from evictlab.cli import main
from evictlab.core.demo import DEMO_DATASET
from evictlab.core.pools import open_pools
from evictlab.core.protocol import DEFAULT_CONFIG, load_protocol, sha256_file
from evictlab.core.runspec import parse_spec
from evictlab.errors import ContractError, DatasetError

POLICIES = ("confidence", "hybrid-v1")
CAPACITIES = ("5", "7", "9")
HEAVY = "pr4810-final:confidence_weight=0.9,confirmation_weight=0.05,access_weight=0.05"
HEAVY_PARAMS = ["confidence_weight=0.9", "confirmation_weight=0.05", "access_weight=0.05"]


@pytest.fixture(scope="module")
def pool_sets():
    """Pools of the three presets and the weights override on the demo, built once."""
    return {text: open_pools(parse_spec(text)) for text in ("pr4810-run1", "pr4810-run2", "pr4810-final", HEAVY)}


@pytest.fixture(scope="module")
def diffs(pool_sets):
    cache = {}

    def get(before, after):
        if (before, after) not in cache:
            cache[before, after] = diff_pool_sets(pool_sets[before], pool_sets[after])
        return cache[before, after]

    return get


def changed_kept_sets(result):
    return [
        (row["case_id"], row["policy"], capacity)
        for row in result.cases
        for capacity, cell in row["capacities"].items()
        if cell["kept_changed"]
    ]


# --------------------------------------------------------------------------- the cascades


def test_run1_to_run2_is_a_cascade_with_retention_unchanged(diffs):
    result = diffs("pr4810-run1", "pr4810-run2")
    summary = result.summary
    # The bracket header pushes bank records across the 700-character bound.
    assert summary["bank_records_out"] and summary["bank_records_in"]
    assert summary["bank_positions_changed"] > 0
    assert summary["pools_changed"] > 0 and summary["distractor_draws_changed"] > 0
    assert summary["metadata_assignments_changed"] > 0
    assert summary["pools_content_changed"] == 45  # the header text is in every record
    assert all(summary["kept_sets_changed"][c] > 0 for c in CAPACITIES)
    assert summary["prompts_changed"] > 0
    assert summary["support_retention_changed"] == dict.fromkeys(CAPACITIES, 0)
    # Retention equals the published totals on both sides (spec 2.10).
    assert summary["support_retained"]["7"] == {
        "confidence": {"from": 27, "to": 27}, "hybrid-v1": {"from": 45, "to": 45}
    }
    assert summary_lines(summary)[0].endswith("prompts changed; retention unchanged")


def test_pool_counts_agree_with_the_draws_of_each_case(pool_sets, diffs):
    result = diffs("pr4810-run1", "pr4810-run2")
    before, after = pool_sets["pr4810-run1"], pool_sets["pr4810-run2"]
    rows = {row["case_id"]: row for row in result.cases if row["policy"] == "confidence"}
    for case_a, case_b in zip(before.cases, after.cases):
        row = rows[case_a.case_id]
        draws = sum(x != y for x, y in zip(case_a.distractor_sources, case_b.distractor_sources))
        assert row["draws_changed"] == draws
        assert row["records_in"] == sorted(set(case_b.distractor_sources) - set(case_a.distractor_sources))
        assert row["records_out"] == sorted(set(case_a.distractor_sources) - set(case_b.distractor_sources))
        # A pool whose draws moved changed; one whose draws stayed only changed its text.
        assert row["pool_changed"] == (draws > 0) == (row["metadata_changed"] > 0)
        # Records that entered or left have an assignment on one side only.
        assert row["metadata_changed"] >= len(row["records_in"]) + len(row["records_out"])
        # Every shared record carries a session header, except a synthetic support's plain text.
        shared = 10 - len(row["records_out"])
        assert row["content_changed"] == shared - (case_a.source == "synthetic")
    assert result.summary["pools_changed"] == sum(row["pool_changed"] for row in rows.values())
    assert result.summary["distractor_draws_changed"] == sum(row["draws_changed"] for row in rows.values())


def test_run2_to_final_changes_kept_sets_only_where_the_tie_break_moves(pool_sets, diffs):
    result = diffs("pr4810-run2", "pr4810-final")
    summary = result.summary
    assert summary["pools_changed"] == 0 and summary["metadata_assignments_changed"] == 0
    assert summary["distractor_draws_changed"] == 0 and summary["pools_content_changed"] == 0
    assert summary["bank_records_in"] == summary["bank_records_out"] == []
    assert summary["support_retention_changed"] == dict.fromkeys(CAPACITIES, 0)
    assert summary["prompts_changed"] == 90  # the memory joiner changes every prompt
    changed = changed_kept_sets(result)
    assert changed, "the demo places tied 0.70 distractors across the capacity-7 cut of two pools"
    assert summary["kept_sets_changed"]["7"] == 2
    run2 = pool_sets["pr4810-run2"]
    for case_id, policy, capacity in changed:
        case = run2.case(case_id)
        decision = decide(case, policy, int(capacity), run2.protocol.config.hybrid, run2.protocol.evaluation_time)
        # The cut falls inside a group of equal scores: the best evicted fact scores exactly
        # as much as the weakest fact kept on rank (a reserved correction is kept regardless).
        kept_on_rank = [
            decision.scores[fact["id"]].value for fact in decision.kept
            if str(fact.get("category")).strip().lower() != "correction"
        ]
        assert max(item.score for item in decision.evicted) == min(kept_on_rank), (case_id, policy, capacity)


def test_a_spec_diffed_with_itself_changes_nothing(diffs):
    result = diffs("pr4810-final", "pr4810-final")
    summary = result.summary
    for key in ("pools_changed", "pools_content_changed", "distractor_draws_changed",
                "metadata_assignments_changed", "content_records_changed", "prompts_changed",
                "bank_positions_changed"):
        assert summary[key] == 0, key
    assert summary["kept_sets_changed"] == summary["support_retention_changed"] == dict.fromkeys(CAPACITIES, 0)
    assert summary["kept_sets_total"] == dict.fromkeys(CAPACITIES, 90)
    assert (summary["pools_total"], summary["prompts_total"]) == (45, 90)
    assert summary["bank_records_in"] == summary["bank_records_out"] == []
    assert len(result.cases) == 90
    for row in result.cases:
        assert not row["pool_changed"] and not row["prompt_changed"]
        assert row["records_in"] == row["records_out"] == []
        for cell in row["capacities"].values():
            assert not cell["kept_changed"] and cell["entered"] == cell["left"] == []
            assert cell["support_retained"]["from"] == cell["support_retained"]["to"]
    assert summary_lines(summary)[0].endswith(
        "0/45 pools, 0/90 kept sets (capacity 7), 0/90 prompts changed; retention unchanged"
    )


def test_a_respelled_spec_is_the_same_spec_and_diffs_to_nothing():
    same = parse_spec("pr4810-run2:fact_ids=protocol,memory_joiner=blank-line")
    result = diff_specs(parse_spec("pr4810-final"), same)
    assert result.summary["from"]["identity"] == result.summary["to"]["identity"]
    assert result.summary["prompts_changed"] == 0
    assert sum(result.summary["kept_sets_changed"].values()) == 0


def test_renaming_fact_ids_alone_is_not_a_pool_change(pool_sets, diffs):
    # run2 -> final renames every fact; compared per source record nothing moved.
    run2, final = pool_sets["pr4810-run2"], pool_sets["pr4810-final"]
    assert run2.cases[0].fact_ids != final.cases[0].fact_ids
    assert diffs("pr4810-run2", "pr4810-final").summary["pools_changed"] == 0


# --------------------------------------------------------------------------- against run-policy


def kept_by_source(run_dir, pool_set):
    """(case, policy, capacity) -> (kept source records, support retained) from policy.raw.jsonl."""
    rows = [json.loads(line) for line in (run_dir / "policy.raw.jsonl").read_text(encoding="utf-8").splitlines()]
    cases = {case.case_id: case for case in pool_set.cases}
    return {
        (row["case_id"], row["policy"], str(row["capacity"])): (
            {cases[row["case_id"]].fact_sources[fact_id] for fact_id in row["kept_fact_ids"]},
            row["support_all_retained"],
        )
        for row in rows
    }


def test_a_weights_override_agrees_with_run_policy_on_both_specs(tmp_path, pool_sets, capsys):
    base_dir, heavy_dir, diff_dir = tmp_path / "base", tmp_path / "heavy", tmp_path / "diff"
    assert main(["run-policy", "--preset", "pr4810-final", "--output-dir", str(base_dir)]) == 0
    params = [arg for item in HEAVY_PARAMS for arg in ("--param", item)]
    assert main(["run-policy", "--preset", "pr4810-final", *params, "--output-dir", str(heavy_dir)]) == 0
    assert main(["diff", "--from", "pr4810-final", "--to", HEAVY, "--output-dir", str(diff_dir)]) == 0
    printed = capsys.readouterr().out
    final = pool_sets["pr4810-final"]
    before, after = kept_by_source(base_dir, final), kept_by_source(heavy_dir, final)
    rows = [json.loads(line) for line in (diff_dir / CASES_FILE).read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 90 and len(before) == len(after) == 270
    kept_changes = retention_changes = 0
    for row in rows:
        for capacity, cell in row["capacities"].items():
            key = (row["case_id"], row["policy"], capacity)
            (kept_a, retained_a), (kept_b, retained_b) = before[key], after[key]
            assert cell["kept_changed"] == (kept_a != kept_b), key
            assert cell["entered"] == sorted(kept_b - kept_a) and cell["left"] == sorted(kept_a - kept_b), key
            assert cell["support_retained"] == {"from": retained_a, "to": retained_b}, key
            kept_changes += cell["kept_changed"]
            retention_changes += retained_a != retained_b
    # The override matters: hybrid-v1 kept sets and retention move, confidence ones cannot.
    assert kept_changes > 0 and retention_changes > 0
    assert not any(cell["kept_changed"] for row in rows if row["policy"] == "confidence"
                   for cell in row["capacities"].values())
    summary = json.loads((diff_dir / SUMMARY_FILE).read_text(encoding="utf-8"))
    assert sum(summary["kept_sets_changed"].values()) == kept_changes
    assert sum(summary["support_retention_changed"].values()) == retention_changes
    assert summary["pools_changed"] == 0
    assert summary["to"]["policy_parameters"]["confidence_weight"] == 0.9
    assert f"pr4810-final -> {HEAVY}: 0/45 pools," in printed and "retention changed in" in printed


# --------------------------------------------------------------------------- files and command line


def test_the_command_writes_deterministic_files_and_refuses_to_overwrite(tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    args = ["diff", "--from", "pr4810-run1", "--to", "pr4810-run2"]
    assert main([*args, "--output-dir", str(first)]) == 0
    assert main([*args, "--output-dir", str(second)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("pr4810-run1 -> pr4810-run2: ") and "kept sets at other capacities:" in out
    for name in (SUMMARY_FILE, CASES_FILE):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    summary = json.loads((first / SUMMARY_FILE).read_text(encoding="utf-8"))
    for key in ("pools_total", "pools_changed", "distractor_draws_changed", "metadata_assignments_changed",
                "kept_sets_total", "kept_sets_changed", "support_retention_changed", "prompts_total",
                "prompts_changed", "bank_records_in", "bank_records_out", "dataset", "from", "to"):
        assert key in summary, key
    assert summary["dataset"]["sha256"] and summary["from"]["label"] == "pr4810-run1"
    assert summary["from"]["identity"] == parse_spec("pr4810-run1").identity
    assert summary["to"]["description"] == parse_spec("pr4810-run2").describe()
    # The demo brings its own official manifest; the summary records the file actually used.
    assert summary["from"]["artifacts_used"]["official_manifest_sha256"] != (
        summary["from"]["artifacts"]["official_manifest_sha256"]
    )
    run = json.loads((first / RUN_FILE).read_text(encoding="utf-8"))
    assert run["status"] == "success" and run["kind"] == "diff"
    assert run["parameters"]["from"]["identity"] == summary["from"]["identity"]
    assert run["outputs"][CASES_FILE]["bytes"] == (first / CASES_FILE).stat().st_size
    assert {"evictlab_version", "git", "python"} <= set(run["provenance"])

    before = {name: (first / name).read_bytes() for name in DIFF_FILES}
    assert main([*args, "--output-dir", str(first)]) == 2
    error = capsys.readouterr().err
    assert "evictlab diff: error: " in error and "finished diff run; refusing to overwrite" in error
    assert all((first / name).read_bytes() == data for name, data in before.items())


@pytest.mark.parametrize(
    "before, after, message",
    [
        ("pr4810-run3", "pr4810-final", "spec 'pr4810-run3': unknown preset 'pr4810-run3'"),
        ("pr4810-final", "pr4810-final:joiner=newline", "unknown spec key 'joiner'"),
        ("pr4810-final", "pr4810-final:confidence_weight=abc",
         "spec 'pr4810-final:confidence_weight=abc': confidence_weight must be a number, got 'abc'"),
        ("pr4810-final", "pr4810-final:confidence_weight=0.5", "weights must sum to 1.0 within 1e-9"),
    ],
)
def test_bad_specs_fail_the_command_with_a_clear_error(tmp_path, capsys, before, after, message):
    out = tmp_path / "out"
    assert main(["diff", "--from", before, "--to", after, "--output-dir", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("evictlab diff: error: ") and message in error
    assert not out.exists()


def other_dataset_spec(tmp_path):
    """A spec whose config pins another dataset (otherwise evictlab's own files)."""
    config = tmp_path / "configs" / "other-dataset.yaml"
    config.parent.mkdir(parents=True)
    pinned = load_protocol().config.dataset.sha256
    config.write_text(DEFAULT_CONFIG.read_text(encoding="utf-8").replace(pinned, "e" * 64), encoding="utf-8")
    prompt = DEFAULT_CONFIG.parent.parent / "prompts" / "answer-v1.txt"
    spec = tmp_path / "other.yaml"
    spec.write_text(f"preset: pr4810-final\nconfig: {config}\nanswer_prompt: {prompt}\n", encoding="utf-8")
    return spec


def test_specs_pinning_different_datasets_fail_the_command(tmp_path, capsys):
    spec = other_dataset_spec(tmp_path)
    out = tmp_path / "out"
    assert main(["diff", "--from", "pr4810-final", "--to", str(spec), "--output-dir", str(out)]) == 2
    error = capsys.readouterr().err
    assert "the specs use different datasets" in error and "e" * 64 in error
    assert not out.exists()


def test_the_installed_command_exits_non_zero(tmp_path):
    # The real process, not just main(): the error's exit code reaches the shell.
    command = [sys.executable, "-m", "evictlab", "diff", "--output-dir", str(tmp_path / "out"),
               "--from", "nope", "--to", "pr4810-final"]
    finished = subprocess.run(command, capture_output=True, text=True)
    assert finished.returncode == 2
    assert "evictlab diff: error: spec 'nope': unknown preset 'nope'" in finished.stderr


def test_pool_sets_from_different_datasets_are_refused(pool_sets):
    final = pool_sets["pr4810-final"]
    other = dataclasses.replace(final, dataset=dataclasses.replace(final.dataset, sha256="0" * 64))
    with pytest.raises(ContractError, match="the two pool sets come from different datasets"):
        diff_pool_sets(final, other)


def test_pool_sets_with_different_cases_are_refused(pool_sets):
    final = pool_sets["pr4810-final"]
    fewer = dataclasses.replace(final, cases=final.cases[:-1])
    with pytest.raises(ContractError, match=r"only before: \['correction_shipping_address'\]"):
        diff_pool_sets(final, fewer)


def test_a_dataset_file_is_checked_against_the_pin(tmp_path):
    # A changed copy of the demo is neither the demo (recognised by its hash) nor the pinned file.
    copy = tmp_path / "demo.json"
    copy.write_bytes(DEMO_DATASET.read_bytes() + b"\n")
    with pytest.raises(DatasetError, match="is not the pinned"):
        diff_specs(parse_spec("pr4810-final"), parse_spec("pr4810-run2"), copy)


def test_kept_frame_is_tidy(diffs):
    frame = diffs("pr4810-run2", "pr4810-final").kept_frame()
    assert len(frame) == 270
    assert set(frame["capacity"]) == {5, 7, 9} and set(frame["policy"]) == set(POLICIES)
    assert int(frame.loc[frame["capacity"] == 7, "kept_changed"].sum()) == 2


def test_a_dataset_named_in_a_spec_is_the_diffs_dataset(tmp_path, capsys):
    copy = tmp_path / "demo-copy.json"
    copy.write_bytes(DEMO_DATASET.read_bytes() + b"\n")
    named = f"pr4810-run2:dataset={copy}"
    # Named by one side only, the file applies to both; it is checked against the pin ...
    with pytest.raises(DatasetError, match=r"demo-copy\.json.*is not the pinned"):
        diff_specs(parse_spec("pr4810-final"), parse_spec(named))
    # ... and --dataset wins over the specs.
    assert diff_specs(parse_spec("pr4810-final"), parse_spec(named), DEMO_DATASET).summary["pools_total"] == 45
    out = tmp_path / "out"
    assert main(["diff", "--from", f"pr4810-run2:dataset={DEMO_DATASET}", "--to", "pr4810-final",
                 "--output-dir", str(out)]) == 0
    assert json.loads((out / SUMMARY_FILE).read_text())["dataset"]["sha256"] == sha256_file(DEMO_DATASET)
    assert "using the embedded demo dataset" not in capsys.readouterr().err  # a named file is no default
    # Two files named by the two sides are refused before the folder is made.
    refused = tmp_path / "refused"
    assert main(["diff", "--from", named, "--to", f"pr4810-final:dataset={DEMO_DATASET}",
                 "--output-dir", str(refused)]) == 2
    assert "a comparison needs one dataset" in capsys.readouterr().err and not refused.exists()
