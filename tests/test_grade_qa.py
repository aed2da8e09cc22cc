"""`evictlab grade-qa` on a finished demo run: checks in order, files, numbers, refusals (spec 3.8, 5).

The run comes from the scripted model of ``test_run_qa`` (the reference answer when the support
fact is shown, else ``INSUFFICIENT``), so every grade must equal support retention at
capacity 7, which :func:`evictlab.analysis.evaluate.evaluate` computes without any QA code.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from qa_harness import (  # the shared harness: a scripted model; its fixtures are in conftest.py
    KEY_ENV,
    TAMPERING,
    URL_ENV,
    assert_nothing_private,
    copy_run,
    demo_pool_set,
    grade_cli,
    tamper,
    tampered_task,
)

from evictlab.analysis.evaluate import evaluate
from evictlab.analysis.qa.grade import GRADED_FILES
from evictlab.analysis.qa.runner import response_path
from evictlab.analysis.qa.stats import build_stats, build_summary
from evictlab.results import json_document, json_line

GRADED_FIELDS = [
    "attempts", "capacity", "case_id", "grade_correct", "grade_rule", "grader_version",
    "kept_fact_ids", "policy", "prediction", "question_type", "request_fingerprint",
    "response_model", "row_id", "scenario", "schema_version", "source", "support_all_retained",
    "support_recall", "usage",
]  # fmt: skip
PROTOCOL_ID = "deermem-hybrid-v1-pr4789-reproduction-v1"
# Support retention at capacity 7 (spec 0.3 and 2.10): 26/40 + 1/5 vs 40/40 + 5/5.
EXPECTED_LINES = [
    "official: confidence 26/40, hybrid-v1 40/40, exact McNemar p=0.000122",
    "synthetic: confidence 1/5, hybrid-v1 5/5, exact McNemar p=0.125000",
    "overall: confidence 27/45, hybrid-v1 45/45, exact McNemar p=0.000008",
]


def grade_quietly(output: Path, *options: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = grade_cli(output, *options)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def graded(tmp_path_factory, completed_run):
    """A copy of the finished run, graded once: (folder, stdout, stderr)."""
    output = copy_run(completed_run, tmp_path_factory.mktemp("graded") / "run")
    before = snapshot(output)
    code, out, err = grade_quietly(output)
    assert code == 0, err
    assert {name: data for name, data in snapshot(output).items() if name in before} == before  # read-only
    return output, out, err


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def read_rows(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / "qa.rows.jsonl").read_text(encoding="utf-8").split("\n")[:-1]]


def assert_refused(output: Path, *options: str, expected: str) -> str:
    code, _, err = grade_quietly(output, *options)
    assert code == 2, err
    assert expected in err, err
    assert not [name for name in GRADED_FILES if (output / name).exists()]
    return err


# --------------------------------------------------------------------------- a graded run


def test_grading_prints_one_line_per_suite_and_the_row_count(graded):
    output, out, _ = graded
    assert out.splitlines() == [*EXPECTED_LINES, f"graded 90 rows to {output}"]


def test_graded_rows_have_the_19_fields_in_row_id_order(graded):
    output, _, _ = graded
    text = (output / "qa.rows.jsonl").read_text(encoding="utf-8")
    rows = read_rows(output)
    assert text == "".join(json_line(row) for row in rows)  # compact, sorted keys, raw non-ASCII
    assert len(rows) == 90
    assert [row["row_id"] for row in rows] == sorted(row["row_id"] for row in rows)
    assert all(sorted(row) == GRADED_FIELDS for row in rows)
    assert {(row["schema_version"], row["capacity"], row["grader_version"]) for row in rows} == {
        (1, 7, "deterministic-overlap-v1")
    }


def test_every_grade_equals_support_retention(graded):
    output, _, _ = graded
    pool_set = demo_pool_set()
    retention = {
        f"{row['case_id']}__{row['policy']}": row
        for row in evaluate(pool_set, ("confidence", "hybrid-v1"), [7])
    }
    cases = {case.case_id: case for case in pool_set.cases}
    for row in read_rows(output):
        expected = retention[row["row_id"]]
        case = cases[row["case_id"]]
        assert row["grade_correct"] is expected["support_all_retained"] is row["support_all_retained"]
        assert row["grade_rule"] == ("exact" if row["grade_correct"] else "insufficient")
        assert row["kept_fact_ids"] == expected["kept_fact_ids"]
        assert row["support_recall"] == expected["support_recall"]
        assert (row["source"], row["scenario"], row["question_type"]) == (
            case.source, case.scenario, case.question_type
        )


def test_summary_and_statistics_follow_the_config(graded):
    output, _, _ = graded
    rows = read_rows(output)
    summary = json.loads((output / "qa.summary.json").read_text(encoding="utf-8"))
    stats = json.loads((output / "qa.stats.json").read_text(encoding="utf-8"))
    assert summary == build_summary(rows, protocol_id=PROTOCOL_ID, grader_version="deterministic-overlap-v1")
    assert stats == build_stats(rows, protocol_id=PROTOCOL_ID, grader_version="deterministic-overlap-v1")
    for name, document in (("qa.summary.json", summary), ("qa.stats.json", stats)):
        assert (output / name).read_text(encoding="utf-8") == json_document(document)
    assert summary["qa_capacity"] == 7
    assert {suite["bootstrap"]["seed"] for suite in stats["suites"].values()} == {4789}
    assert {suite["bootstrap"]["iterations"] for suite in stats["suites"].values()} == {10000}
    totals = {
        policy: sum(g["correct"] for g in summary["groups"] if g["policy"] == policy)
        for policy in ("confidence", "hybrid-v1")
    }
    assert totals == {"confidence": 27, "hybrid-v1": 45}


def test_nothing_private_is_written_or_printed(graded, demo_tasks):
    output, out, err = graded
    assert_nothing_private(output, demo_tasks, out, err)


def test_grading_twice_is_refused_and_changes_nothing(graded):
    output, _, _ = graded
    before = {name: (output / name).read_bytes() for name in GRADED_FILES}
    code, _, err = grade_quietly(output)
    assert code == 2 and "refusing to overwrite" in err
    assert {name: (output / name).read_bytes() for name in GRADED_FILES} == before


@pytest.mark.parametrize("existing", GRADED_FILES)
def test_any_one_existing_result_file_is_refused(existing, tmp_path, completed_run):
    output = copy_run(completed_run, tmp_path / "run")
    (output / existing).write_text("earlier\n", encoding="utf-8")
    code, _, err = grade_quietly(output)
    assert code == 2 and existing in err
    expected = ["qa_run.json", "responses", "run-qa.run.json", existing]
    assert sorted(path.name for path in output.iterdir()) == sorted(expected)
    assert (output / existing).read_text(encoding="utf-8") == "earlier\n"


def test_predictions_and_call_metadata_come_from_the_rows(tmp_path, completed_run, demo_tasks, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)  # grading needs no provider
    monkeypatch.delenv(URL_ENV, raising=False)
    output = copy_run(completed_run, tmp_path / "run")
    task = next(task for task in demo_tasks if task.policy == "hybrid-v1")
    path = response_path(output, task.row_id)
    row = json.loads(path.read_text(encoding="utf-8"))
    row.update(prediction="INSUFFICIENT", attempts=3, response_model=None, usage={"total_tokens": 7})
    path.write_text(json_document(row), encoding="utf-8")
    code, out, err = grade_quietly(output)
    assert code == 0, err
    assert "overall: confidence 27/45, hybrid-v1 44/45" in out
    graded_row = next(r for r in read_rows(output) if r["row_id"] == task.row_id)
    assert (graded_row["grade_correct"], graded_row["grade_rule"]) == (False, "insufficient")
    assert (graded_row["attempts"], graded_row["response_model"], graded_row["usage"]) == (3, None, {"total_tokens": 7})


# --------------------------------------------------------------------------- refusals, in order


def test_no_marker_no_grading(tmp_path, completed_run):
    output = copy_run(completed_run, tmp_path / "run")
    (output / "qa_run.json").unlink()
    assert_refused(output, expected="no run marker")


def test_marker_is_checked_before_the_rows(tmp_path, completed_run, demo_tasks):
    output = copy_run(completed_run, tmp_path / "run")
    response_path(output, demo_tasks[0].row_id).unlink()
    err = assert_refused(output, "--variant", "memory_joiner=newline", expected="protocol variant")
    assert "refusing to grade" in err and "missing" not in err


def test_missing_and_invalid_rows_are_all_listed(tmp_path, completed_run, demo_tasks):
    output = copy_run(completed_run, tmp_path / "run")
    gone, broken, partial = demo_tasks[3], demo_tasks[40], demo_tasks[77]
    response_path(output, gone.row_id).unlink()
    response_path(output, broken.row_id).write_text('{"schema_version": 1, "prediction": null}', encoding="utf-8")
    row = json.loads(response_path(output, partial.row_id).read_text(encoding="utf-8"))
    del row["usage"]
    response_path(output, partial.row_id).write_text(json_document(row), encoding="utf-8")
    err = assert_refused(output, expected="3 of 90 response rows are missing or invalid")
    assert f"{gone.row_id} (missing)" in err
    assert f"{broken.row_id} (not a completed response row)" in err
    assert f"{partial.row_id} (no field usage)" in err


@pytest.mark.parametrize("name", sorted(TAMPERING))
def test_a_row_that_does_not_match_its_task_is_refused(name, tmp_path, completed_run, demo_tasks):
    output = copy_run(completed_run, tmp_path / "run")
    task = tampered_task(demo_tasks)
    tamper(output, task, name)
    err = assert_refused(output, expected="refusing to grade")
    assert f"{response_path(output, task.row_id)}: {name} is " in err
    assert err.count("\n  ") == 1, err  # only the tampered field of the tampered row

