"""QA run folders: reading a graded run (DeerFlow's published ones or any folder) into a :class:`QARun`.

A *QA run folder* holds ``qa.rows.jsonl`` (the graded rows) and, when the run was finished
by a grading step, ``qa.summary.json``, ``qa.stats.json`` and the run marker ``qa_run.json``.
DeerFlow's three published runs (PR #4810) ship in ``data/reference/deerflow-pr4810/`` in
that layout; :func:`load_reference_run` reads them, and :func:`load_qa_run` reads any folder.
Nothing here writes; :mod:`evictlab.analysis.qa.report` turns a run into tables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ContractError
from ...readers import MAX_PROTOCOL_FILE_BYTES, read_bounded
from ...resources import DATA_DIR
from .stats import GRADED_ROW_FIELDS, STATS_FILE, SUMMARY_FILE, json_object, load_graded_rows

ROWS_FILE = "qa.rows.jsonl"
RUN_FILE = "qa_run.json"
REFERENCE_DIR = DATA_DIR / "reference" / "deerflow-pr4810"
REFERENCE_VERSIONS = ("v1", "v2", "v3")
DEFAULT_REFERENCE_VERSION = "v3"

#: Fields the report reads from every row, on top of those the statistics need.
REPORT_ROW_FIELDS = {
    **GRADED_ROW_FIELDS,
    "row_id": str,
    "question_type": str,
    "prediction": str,
    "grade_rule": str,
    "support_all_retained": bool,
}


@dataclass(frozen=True)
class QARun:
    """One QA run folder: its graded rows and whichever result files it holds (else ``None``)."""

    path: Path
    rows: tuple[dict[str, Any], ...] = field(repr=False)
    summary: dict[str, Any] | None = field(repr=False)
    stats: dict[str, Any] | None = field(repr=False)
    marker: dict[str, Any] | None = field(repr=False)

    @property
    def protocol_id(self) -> str | None:
        for document in (self.stats, self.summary, self.marker):
            if document and isinstance(document.get("protocol_id"), str):
                return document["protocol_id"]
        return None

    @property
    def grader_version(self) -> str | None:
        versions = {row["grader_version"] for row in self.rows if "grader_version" in row}
        if len(versions) == 1:
            return versions.pop()
        for document in (self.stats, self.summary):
            if document and isinstance(document.get("grader_version"), str):
                return document["grader_version"]
        return None

    @property
    def label(self) -> str:
        """A short name for titles: DeerFlow's published runs by version, other runs by folder."""
        if self.path.resolve().parent == REFERENCE_DIR.resolve():
            return f"DeerFlow's published run {self.path.name} (PR #4810, real LongMemEval file)"
        return f"QA run {self.path.resolve().name}"

    @property
    def source(self) -> str:
        """Where the rows come from, in words: DeerFlow's published run on the real LongMemEval
        file with its model, or a graded run of the given folder (with its model when known)."""
        model = self.info().get("model")
        answered = f", answered by {model}" if model else ""
        if self.path.resolve().parent == REFERENCE_DIR.resolve():
            return (
                f"DeerFlow's published run {self.path.name} (PR #4810): the real LongMemEval oracle file"
                f"{answered}; not evictlab's demo data"
            )
        return f"graded QA run {self.path}{answered}"

    def info(self) -> dict[str, Any]:
        """What identifies the run: folder, rows, protocol, model, git head and creation time."""
        marker = self.marker or {}
        qa = marker.get("qa")
        qa = qa if isinstance(qa, Mapping) else {}
        git = marker.get("git")
        git = git if isinstance(git, Mapping) else {}
        return {
            "folder": str(self.path),
            "rows": len(self.rows),
            "cases": len({row["case_id"] for row in self.rows}),
            "protocol_id": self.protocol_id,
            "grader_version": self.grader_version,
            "model": qa.get("model"),
            "capacity": qa.get("capacity"),
            "created_at": marker.get("created_at"),
            "git_head": git.get("head"),
            "git_dirty": git.get("dirty"),
            "marker_schema_version": marker.get("schema_version"),
        }


def reference_run_dir(version: str = DEFAULT_REFERENCE_VERSION) -> Path:
    """The folder of DeerFlow's published run ``v1``, ``v2`` or ``v3``."""
    if version not in REFERENCE_VERSIONS:
        raise ContractError(
            f"unknown published run {version!r}; known: {', '.join(REFERENCE_VERSIONS)}"
        )
    return REFERENCE_DIR / version


def load_reference_run(version: str = DEFAULT_REFERENCE_VERSION) -> QARun:
    return load_qa_run(reference_run_dir(version))


def load_qa_run(folder: str | os.PathLike) -> QARun:
    """Read a QA run folder; ``qa.rows.jsonl`` is required, the three JSON files are optional."""
    path = Path(folder)
    if not path.is_dir():
        raise ContractError(f"{path}: QA run folder not found")
    rows_path = path / ROWS_FILE
    if not rows_path.is_file():
        raise ContractError(f"{path}: no {ROWS_FILE}; a QA run folder holds the graded rows")
    rows = load_graded_rows(rows_path, REPORT_ROW_FIELDS)
    if not rows:
        raise ContractError(f"{rows_path}: no graded rows")
    return QARun(
        path=path,
        rows=tuple(rows),
        summary=_optional_json(path / SUMMARY_FILE),
        stats=_optional_json(path / STATS_FILE),
        marker=_optional_json(path / RUN_FILE),
    )


def _optional_json(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    return json_object(read_bounded(path, MAX_PROTOCOL_FILE_BYTES, what="run file"), str(path))
