"""``grade-qa``: grade a finished ``run-qa`` folder without calling any provider (spec 3.8).

The checks run in the spec's order: the tasks are rebuilt from the current protocol and
dataset; the run marker must exist and match the five current input hashes; every one of the
response rows must be present and completed; each row must answer exactly its recomputed task
(identity, kept facts, capacity, policy and request fingerprint). Only then is each prediction
graded, blindly, against the reference answer of the recomputed case (never anything stored in
the row), and the three result files are written. The grading runs inside
:func:`evictlab.results.run` (record ``grade-qa.run.json``): a finished grading is never
overwritten, an interrupted one is redone in place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import results
from ...core.pools import PoolSet
from ...errors import ContractError
from .grading import GRADER_VERSION, grade_answer
from .runner import RESPONSES_DIR, check_marker, identity_mismatches, load_completed, response_path, storage_problem
from .stats import STATS_FILE, SUMMARY_FILE, stats_documents, write_stats_files
from .tasks import QATask, build_tasks

KIND = "grade-qa"
ROWS_FILE = "qa.rows.jsonl"
GRADED_FILES = (ROWS_FILE, SUMMARY_FILE, STATS_FILE)
GRADED_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class GradeResult:
    """The graded rows (sorted by row id), the summary and the statistics that were written."""

    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    stats: dict[str, Any]


def grade_run(pool_set: PoolSet, output_dir: str | Path) -> GradeResult:
    """Check the stored rows of ``output_dir`` against ``pool_set`` and write the graded files."""
    protocol = pool_set.protocol
    if protocol.config.qa.grader_version != GRADER_VERSION:
        raise ContractError(
            f"{protocol.files.config}: qa.grader_version {protocol.config.qa.grader_version!r}"
            f" is not the committed grader {GRADER_VERSION!r}"
        )
    tasks = sorted(build_tasks(pool_set), key=lambda task: task.row_id)
    stored: dict[str, dict[str, Any]] = {}

    def check_run() -> None:  # read-only, under the folder's lock: a refusal leaves no trace
        check_marker(output_dir, pool_set, action="grade")
        stored.update(load_responses(output_dir, tasks))
        check_identities(output_dir, tasks, stored)

    statistics = protocol.config.statistics
    parameters = {"grader_version": GRADER_VERSION, "variant": pool_set.variant.as_dict()}
    with results.run(output_dir, KIND, parameters=parameters, outputs=GRADED_FILES, precheck=check_run) as run:
        run.record.dataset = pool_set.dataset.record()
        rows = [graded_row(task, stored[task.row_id]) for task in tasks]
        summary, stats = stats_documents(
            rows,
            protocol_id=protocol.protocol_id,
            grader_version=GRADER_VERSION,
            seed=statistics.bootstrap_seed,
            iterations=statistics.bootstrap_iterations,
            alpha=statistics.alpha,
            qa_capacity=protocol.config.pool.qa_capacity,
        )
        write_stats_files(run, summary, stats)
        run.write_jsonl(ROWS_FILE, rows)
        run.record.summary = {"rows": len(rows)}
    return GradeResult(rows, summary, stats)


def load_responses(output_dir: str | Path, tasks: Sequence[QATask]) -> dict[str, dict[str, Any]]:
    """Every task's stored row, or an error listing each missing or invalid one."""
    rows: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for task in tasks:
        path = response_path(output_dir, task.row_id)
        row = load_completed(path)
        problem = storage_problem(path, row)
        if problem or row is None:
            problems.append(f"{task.row_id} ({problem or 'missing'})")
        else:
            rows[task.row_id] = row
    if problems:
        raise ContractError(
            f"{Path(output_dir) / RESPONSES_DIR}: {len(problems)} of {len(tasks)} response rows are"
            f" missing or invalid: {', '.join(problems)}; run run-qa again to complete them"
        )
    return rows


def check_identities(
    output_dir: str | Path, tasks: Sequence[QATask], stored: Mapping[str, Mapping[str, Any]]
) -> None:
    """Every stored row must answer its recomputed task; the error names each row and field."""
    problems = [f"{response_path(output_dir, task.row_id)}: {mismatch}"
                for task in tasks for mismatch in identity_mismatches(stored[task.row_id], task)]
    if problems:
        raise ContractError(
            "stored rows do not match the tasks recomputed from the current protocol and dataset;"
            " refusing to grade:\n  " + "\n  ".join(problems)
        )


def graded_row(task: QATask, stored: Mapping[str, Any]) -> dict[str, Any]:
    """A ``qa.rows.jsonl`` row: the 19 fields of spec 3.8.

    Case metadata comes from the recomputed task; attempts, fingerprint, model and usage are
    copied from the stored row. The grader sees only the prediction and the reference answer.
    """
    try:
        grade = grade_answer(stored["prediction"], task.case.answer)
    except ContractError:
        # The grader's message quotes the reference answer, which must not reach any log.
        raise ContractError(
            f"{task.row_id}: the reference answer of case {task.case.case_id} has no tokens to grade against"
        ) from None
    return {
        "schema_version": GRADED_SCHEMA_VERSION,
        "row_id": task.row_id,
        "case_id": task.case.case_id,
        "source": task.case.source,
        "scenario": task.case.scenario,
        "question_type": task.case.question_type,
        "policy": task.policy,
        "capacity": task.capacity,
        "kept_fact_ids": list(task.kept_fact_ids),
        "support_all_retained": task.support_all_retained,
        "support_recall": task.support_recall,
        "prediction": stored["prediction"],
        "grade_correct": grade.correct,
        "grade_rule": grade.rule,
        "grader_version": GRADER_VERSION,
        "attempts": stored["attempts"],
        "request_fingerprint": stored["request_fingerprint"],
        "response_model": stored["response_model"],
        "usage": stored["usage"],
    }
