"""The LongMemEval-shaped dataset: pinned loading, evidence rendering, case selection, bank.

Spec 2.1, 2.3, 2.5 and 2.6. All lengths are Unicode code-point counts (``len`` of a ``str``).
The file's SHA-256 is checked against the pin *before* it is parsed; a malformed row is an
error naming its question id and the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DatasetError
from ..readers import MAX_DATASET_BYTES, check_size, is_text, parse_json, read_bounded
from .manifests import OfficialManifest, SelectionRule
from .protocol import DatasetPin, PoolConfig, sha256_bytes

HAYSTACK_FIELDS = ("haystack_session_ids", "haystack_dates", "haystack_sessions")
HEADERS = {
    "session": "SESSION {session_id} AT {date}",
    "bracket": "[session_id={session_id} date={date}]",
}


@dataclass(frozen=True)
class Dataset:
    """A loaded dataset file: its rows in file order, its hash and whether that hash is pinned."""

    path: Path
    sha256: str
    pinned: bool
    pin: DatasetPin
    rows: tuple[Mapping[str, Any], ...]
    by_id: dict[str, Mapping[str, Any]] = field(repr=False)

    def record(self) -> dict[str, Any]:
        """The ``dataset`` block of run files: the pin's identity with the file's actual hash."""
        block: dict[str, Any] = {**self.pin.as_dict(), "sha256": self.sha256}
        if not self.pinned:
            block["pinned"] = False
        return block


def load_dataset(path: str | Path, pin: DatasetPin, *, allow_unpinned: bool = False) -> Dataset:
    """Verify the file's hash against ``pin``, then parse and check its rows.

    A different hash is an error unless ``allow_unpinned``; then ``Dataset.pinned`` is False
    and callers must warn and record it.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: dataset file not found")
    check_size(path, MAX_DATASET_BYTES, what="dataset file", error=DatasetError)
    data = read_bounded(path, MAX_DATASET_BYTES, what="dataset file", error=DatasetError)
    actual = sha256_bytes(data)
    pinned = actual == pin.sha256
    if not pinned and not allow_unpinned:
        raise DatasetError(
            f"{path}: SHA-256 {actual} is not the pinned {pin.sha256} ({pin.repository}"
            f" {pin.filename}); pass --allow-unpinned to use it anyway"
        )
    rows = check_rows(parse_json(data, where=str(path), error=DatasetError, check_strings=False), path)
    return Dataset(path, actual, pinned, pin, tuple(rows), {row["question_id"]: row for row in rows})


def check_rows(data: Any, path: Path) -> list[Mapping[str, Any]]:
    if not isinstance(data, list):
        raise DatasetError(f"{path}: root must be a JSON array of objects, got {type(data).__name__}")
    seen: dict[str, int] = {}
    for index, row in enumerate(data):
        if not isinstance(row, Mapping):
            raise DatasetError(f"{path}: row {index}: must be an object, got {type(row).__name__}")
        question_id = row.get("question_id")
        if not isinstance(question_id, str) or not question_id or not is_text(question_id):
            raise DatasetError(
                f"{path}: row {index}: question_id must be a non-empty string of Unicode text,"
                f" got {question_id!r}"
            )
        if question_id in seen:
            raise DatasetError(
                f"{path}: row {index}: duplicate question_id {question_id!r} (first at row {seen[question_id]})"
            )
        seen[question_id] = index
    return data


def row_error(row: Mapping[str, Any], field_name: str, message: str) -> DatasetError:
    return DatasetError(f"question {row.get('question_id')!r}: field {field_name}: {message}")


def check_candidate(row: Mapping[str, Any]) -> None:
    """A row of an eligible or bank type needs a question and a string (or absent) date."""
    question = row.get("question")
    if not isinstance(question, str) or not question:
        raise row_error(row, "question", f"must be a non-empty string, got {question!r}")
    date = row.get("question_date")
    if date is not None and not isinstance(date, str):
        raise row_error(row, "question_date", f"must be a string when present, got {date!r}")


def answer_text(row: Mapping[str, Any]) -> str:
    """The answer as a string: strings as they are, anything else (``null`` included) as JSON."""
    answer = row.get("answer")
    if isinstance(answer, str):
        return answer
    return json.dumps(answer, sort_keys=True, ensure_ascii=False)


def render_evidence(row: Mapping[str, Any], header: str = "session") -> str:
    """The row's evidence sessions as text (spec 2.5).

    Per session: the turns marked ``has_answer: true``; if none, the user turns; if none,
    the session is skipped. A header line, then ``ROLE: content`` lines; sessions are joined
    by a blank line.
    """
    template = HEADERS[header]
    columns = []
    for name in HAYSTACK_FIELDS:
        value = row.get(name)
        if not isinstance(value, list):
            raise row_error(row, name, f"must be a list, got {type(value).__name__}")
        columns.append(value)
    if len({len(column) for column in columns}) != 1:
        lengths = ", ".join(f"{name} {len(column)}" for name, column in zip(HAYSTACK_FIELDS, columns))
        raise row_error(row, "haystack_*", f"lists must have equal length ({lengths})")
    blocks = []
    for position, (session_id, date, session) in enumerate(zip(*columns)):
        if not isinstance(session, list):
            raise row_error(row, f"haystack_sessions[{position}]", "must be a list of turns")
        turns = [turn for turn in session if isinstance(turn, Mapping) and isinstance(turn.get("content"), str)]
        chosen = [turn for turn in turns if turn.get("has_answer") is True]
        if not chosen:
            chosen = [turn for turn in turns if str(turn.get("role")).lower() == "user"]
        if not chosen:
            continue
        lines = [template.format(session_id=str(session_id), date=str(date))]
        lines.extend(f"{_role(turn)}: {turn['content']}" for turn in chosen)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _role(turn: Mapping[str, Any]) -> str:
    role = turn.get("role")
    return "UNKNOWN" if role is None else str(role).upper()


# --------------------------------------------------------------------------- selection


@dataclass(frozen=True)
class Exclusion:
    question_id: str
    question_type: str
    reason: str


@dataclass(frozen=True)
class Selection:
    """The recomputed official selection: the first ids per type and why others fell out."""

    by_type: dict[str, tuple[str, ...]]
    scenarios: dict[str, tuple[str, ...]]
    exclusions: tuple[Exclusion, ...]


def exclusion_reason(row: Mapping[str, Any], rule: SelectionRule, header: str = "session") -> str | None:
    """Why an eligible-type row is not a candidate under ``rule`` (spec 2.3), or None.

    The id and answer rules come first, so a pilot or abstention row is excluded without its
    evidence being rendered (a malformed haystack there does not stop the run).
    """
    question_id = row["question_id"]
    if question_id in rule.excluded_pilot_ids:
        return "pilot id"
    if question_id.endswith(rule.exclude_abstention_suffix):
        return f"abstention id ({rule.exclude_abstention_suffix})"
    answer = answer_text(row).strip()
    if not rule.answer_min_chars <= len(answer) <= rule.answer_max_chars:
        return f"answer length {len(answer)} outside {rule.answer_min_chars}..{rule.answer_max_chars}"
    lowered = answer.lower()
    for phrase in rule.answer_excluded_substrings:
        if phrase.lower() in lowered:
            return f"answer contains {phrase!r}"
    evidence = render_evidence(row, header)
    if not rule.evidence_min_chars <= len(evidence) <= rule.evidence_max_chars:
        return f"evidence length {len(evidence)} outside {rule.evidence_min_chars}..{rule.evidence_max_chars}"
    return None


def select_official(dataset: Dataset, manifest: OfficialManifest, header: str = "session") -> Selection:
    """Recompute the official selection from the dataset with the manifest's rule (spec 2.3)."""
    rule = manifest.selection
    eligible: dict[str, list[str]] = {kind: [] for kind in rule.eligible_question_types}
    exclusions = []
    for row in dataset.rows:
        kind = row.get("question_type")
        if not isinstance(kind, str) or kind not in eligible:
            continue
        check_candidate(row)
        reason = exclusion_reason(row, rule, header)
        if reason is None:
            eligible[kind].append(row["question_id"])
        else:
            exclusions.append(Exclusion(row["question_id"], kind, reason))
    take = rule.take_per_question_type
    by_type = {}
    for kind, ids in eligible.items():
        if len(ids) < take:
            raise DatasetError(f"{dataset.path}: not enough eligible {kind} rows: {len(ids)} of {take} needed")
        by_type[kind] = tuple(sorted(ids)[:take])
    step = rule.cases_per_type_per_scenario
    # Scenario k takes the k-th block from each type, in the rule's type order.
    scenarios = {
        name: tuple(
            case_id for kind in rule.eligible_question_types for case_id in by_type[kind][k * step : (k + 1) * step]
        )
        for k, name in enumerate(manifest.scenario_order)
    }
    return Selection(by_type, scenarios, tuple(exclusions))


def check_selection(selection: Selection, manifest: OfficialManifest, manifest_path: str | Path) -> None:
    """The manifest must list exactly the recomputed ids, scenario by scenario, in order."""
    problems = []
    for name in manifest.scenario_order:
        expected = selection.scenarios[name]
        listed = manifest.scenarios[name]
        if tuple(listed) != expected:
            only_manifest = [i for i in listed if i not in expected]
            only_dataset = [i for i in expected if i not in listed]
            detail = f"manifest-only {only_manifest}, dataset-only {only_dataset}"
            if not only_manifest and not only_dataset:
                detail = "same ids in a different order"
            problems.append(f"{name}: {detail}")
    if problems:
        raise DatasetError(
            f"{manifest_path}: the manifest disagrees with the selection recomputed from the dataset: "
            + "; ".join(problems)
        )


# --------------------------------------------------------------------------- distractor bank


@dataclass(frozen=True)
class BankRecord:
    question_id: str
    question_type: str
    evidence: str


def build_bank(dataset: Dataset, pool: PoolConfig, header: str = "session") -> tuple[BankRecord, ...]:
    """The distractor bank (spec 2.6): bank-type rows with evidence of 40..700 code points,
    sorted by id, the first ``distractor_bank_size``; exactly that many are required."""
    candidates = []
    for row in dataset.rows:
        kind = row.get("question_type")
        if kind not in pool.distractor_types:
            continue
        check_candidate(row)
        evidence = render_evidence(row, header)
        if pool.distractor_min_evidence_chars <= len(evidence) <= pool.distractor_max_evidence_chars:
            candidates.append(BankRecord(row["question_id"], kind, evidence))
    candidates.sort(key=lambda record: record.question_id)
    if len(candidates) < pool.distractor_bank_size:
        raise DatasetError(
            f"{dataset.path}: distractor bank needs {pool.distractor_bank_size} records, found {len(candidates)}"
        )
    return tuple(candidates[: pool.distractor_bank_size])
