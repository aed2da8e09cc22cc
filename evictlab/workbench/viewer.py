"""``evictlab view``: one self-contained HTML file for one run folder, or an A/B comparison of two.

:func:`load_run` reads a folder that evictlab wrote and tells its kind by its files:

* ``policy`` (``evictlab run-policy``: ``run.json``, ``policy.raw.jsonl``): one *case* per
  policy x capacity x pool, with every fact's score, components, kept or evicted, support or
  not, its margin to the cut line and a one-line explanation;
* ``qa`` (``evictlab grade-qa``: ``qa.rows.jsonl``): one case per graded row, with the grade,
  the grader's rule, the request fingerprint, the model and the token counts;
* ``diff`` (``evictlab diff``: ``diff.cases.jsonl``), ``sweep`` (``evictlab sweep``:
  ``sweep.run.json`` and ``extreme_settings.csv``; the Parquet tables can hold millions of rows
  and are summarised, not embedded) and ``trace replay`` / ``trace study`` (``trace-replay.run.json`` or
  ``trace-study.run.json`` and the tables they name; a row table is embedded up to 5,000 rows): their
  rows as they are.

Private text never enters the page unless asked for: the questions, reference answers and
memory text are not in any run file, and a QA row's model answer (``prediction``, which can
quote memory) is left out unless ``include_private_text`` is set, for a page kept locally.
:func:`add_private_text` then adds each case's question, reference answer and every fact's
text from the pools the run was made on.

:func:`compare` pairs the cases of two runs (same policy, capacity and case; or, when each run
holds one policy and the two differ, same capacity and case) and lists those that disagree:
different kept sets or a different support outcome (policy runs), a different grade (QA).
:func:`render` writes the page through the ``templates/view.html.j2`` template: data as
embedded JSON, CSS and JavaScript inline, no network access.

Margins here are computed from the scores stored in the run: a kept fact's score minus the
highest evicted score, an evicted fact's score minus the lowest score kept without a reserved
slot. They equal ``evictlab explain``'s for score-ordered policies; for the others (LRU ties,
tiers, modifiers) ``explain`` is exact and this is a reading aid.
"""

from __future__ import annotations

import csv
import html
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ContractError
from ..results import RECORD_SUFFIX, read_record, record_path

SWEEP_RECORD = f"sweep{RECORD_SUFFIX}"  # the sweep's run record
VIEW_MARKER = "<!-- evictlab view -->"
#: A QA row's fields that carry text a model produced from private memory.
PRIVATE_QA_FIELDS = ("prediction",)
#: Provenance shown in the page header (the rest of each manifest is left out).
HEADER_KEYS = ("created_at", "preset", "protocol_id", "policies", "capacities", "policy_parameters", "variant",
               "dataset", "git", "evictlab_version", "status")
_SWEEP_SUMMARY_ROWS = 5_000  # enough for every scenario x capacity x policy of a dense grid
#: ``evictlab trace replay`` and ``trace study`` folders: a ``<kind>.run.json`` record naming its tables.
TRACE_KINDS = ("trace-replay", "trace-study")
_TRACE_CASE_ROWS = 5_000  # a row table up to this size is embedded, row by row


@dataclass
class Run:
    """One run folder read for the viewer. ``cases`` are plain JSON-ready dicts with a ``key``."""

    path: Path
    kind: str
    manifest: dict[str, Any]
    cases: list[dict[str, Any]] = field(default_factory=list)
    summary: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.path.name

    def payload(self) -> dict[str, Any]:
        header = {key: self.manifest[key] for key in HEADER_KEYS if key in self.manifest}
        # A policy case's facts say what was kept: the id list is for compare() only.
        cases = [{k: v for k, v in case.items() if k != "kept_fact_ids"} if "facts" in case else case
                 for case in self.cases]
        return {"label": self.label, "kind": self.kind, "header": header, "cases": cases,
                "summary": self.summary, "notes": self.notes}


def load_run(folder: str | os.PathLike, *, include_private_text: bool = False) -> Run:
    """Read a run folder (see the module docstring); :class:`ContractError` for anything else."""
    path = Path(folder)
    if not path.is_dir():
        raise ContractError(f"{path}: not a folder; evictlab view reads a run folder")
    if (path / "policy.raw.jsonl").exists():
        return _policy_run(path)
    if (path / "qa.rows.jsonl").exists():
        return _qa_run(path, include_private_text)
    if (path / "diff.cases.jsonl").exists():
        return _diff_run(path)
    if (path / SWEEP_RECORD).exists():
        return _sweep_run(path)
    for kind in TRACE_KINDS:
        if record_path(path, kind).exists():
            return _trace_run(path, kind)
    raise ContractError(
        f"{path}: not an evictlab run folder (no policy.raw.jsonl, qa.rows.jsonl, diff.cases.jsonl, {SWEEP_RECORD},"
        f" {' or '.join(record_path(path, kind).name for kind in TRACE_KINDS)})"
    )


# --------------------------------------------------------------------------- reading files


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ContractError(f"{path}: not a readable JSON document ({error})") from None
    if not isinstance(value, dict):
        raise ContractError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ContractError(f"{path}: cannot be read ({error})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ContractError(f"{path} line {number}: not JSON ({error.msg})") from None
        if not isinstance(row, dict):
            raise ContractError(f"{path} line {number}: expected a JSON object")
        yield number, row


def _require(path: Path, number: int, row: Mapping[str, Any], names: Sequence[str]) -> None:
    missing = [name for name in names if name not in row]
    if missing:
        raise ContractError(f"{path} line {number}: missing field(s) {', '.join(missing)}")


def _scalars(row: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a row that fit a table cell (numbers, strings, booleans, None)."""
    return {name: value for name, value in row.items() if value is None or isinstance(value, (str, int, float, bool))}


# --------------------------------------------------------------------------- policy runs

_POLICY_FIELDS = ("case_id", "policy", "capacity", "kept_fact_ids", "scores", "support_fact_ids")


def _policy_run(path: Path) -> Run:
    rows_file = path / "policy.raw.jsonl"
    cases = []
    for number, row in _read_jsonl(rows_file):
        _require(rows_file, number, row, _POLICY_FIELDS)
        cases.append(_policy_case(rows_file, number, row))
    summary = _read_json(path / "summary.json").get("groups", [])
    return Run(path, "policy", _read_json(path / "run.json"), cases, [_scalars(group) for group in summary])


def _policy_case(path: Path, number: int, row: Mapping[str, Any]) -> dict[str, Any]:
    kept = set(row["kept_fact_ids"])
    support = set(row["support_fact_ids"])
    scores = row["scores"]
    if not isinstance(scores, dict) or not kept <= set(scores):
        raise ContractError(f"{path} line {number}: field scores must hold every kept fact")
    reserved_slots = int(row.get("reserved_correction_slots") or 0)
    categories = {item.get("fact_id"): item.get("category") for item in row.get("evicted", [])}
    facts = [
        {"fact_id": fact_id, "score": float(entry["value"]), "components": entry.get("components", {}),
         "kept": fact_id in kept, "support": fact_id in support}
        | ({"category": categories[fact_id]} if categories.get(fact_id) else {})
        for fact_id, entry in scores.items()
    ]
    # Kept facts first, each side best score first: the decision's own order up to ties.
    facts.sort(key=lambda fact: (not fact["kept"], -fact["score"]))
    kept_scores = [fact["score"] for fact in facts if fact["kept"]]
    evicted_scores = [fact["score"] for fact in facts if not fact["kept"]]
    # The lowest kept scores may hold reserved slots; an evicted fact competes with the rest.
    open_scores = sorted(kept_scores, reverse=True)[: max(0, len(kept_scores) - reserved_slots)] or kept_scores
    for fact in facts:
        if fact["kept"]:
            fact["margin"] = fact["score"] - max(evicted_scores) if evicted_scores else None
        else:
            fact["margin"] = fact["score"] - min(open_scores) if open_scores else None
    case = {
        **_scalars(row),
        "key": f"{row['policy']}|{row['capacity']}|{row['case_id']}",
        "kept_fact_ids": sorted(kept),
        "support_fact_ids": sorted(support),
        "status": "support kept" if support <= kept else "support evicted",
        "facts": facts,
    }
    case["explanation"] = _explain_case(case)
    return case


def _explain_case(case: Mapping[str, Any]) -> str:
    facts = case["facts"]
    parts = []
    for fact in facts:
        if not fact["support"]:
            continue
        verb = "kept" if fact["kept"] else "evicted"
        if fact["margin"] is None:
            parts.append(f"support {fact['fact_id']} {verb} (nothing on the other side of the cut)")
        elif fact["margin"] == 0:
            tied = sum(other["score"] == fact["score"] for other in facts)
            scope = f"all {tied} facts" if tied == len(facts) else f"{tied} facts"
            parts.append(f"support {fact['fact_id']} {verb} by the tie-break: {scope} score {fact['score']:.4f}")
        else:
            side = "above the highest evicted" if fact["kept"] else "below the lowest kept"
            distance = f"{abs(fact['margin']):.4f} {side}"
            parts.append(f"support {fact['fact_id']} {verb}: score {fact['score']:.4f}, {distance}")
    kept = sum(fact["kept"] for fact in facts)
    reserved = case.get("reserved_correction_slots") or 0
    head = f"{case['policy']} at capacity {case['capacity']} kept {kept} of {len(facts)} facts"
    head += f" ({reserved} in reserved correction slots)" if reserved else ""
    return head + ("; " + "; ".join(parts) if parts else "")


# --------------------------------------------------------------------------- QA, diffs, sweeps

_QA_FIELDS = ("case_id", "policy", "capacity", "grade_correct", "grade_rule", "request_fingerprint")


def _qa_run(path: Path, include_private_text: bool) -> Run:
    rows_file = path / "qa.rows.jsonl"
    cases = []
    for number, row in _read_jsonl(rows_file):
        _require(rows_file, number, row, _QA_FIELDS)
        shown = {name: value for name, value in row.items() if include_private_text or name not in PRIVATE_QA_FIELDS}
        usage = row["usage"] if isinstance(row.get("usage"), dict) else {}
        cases.append({
            **_scalars(shown),
            **{f"usage_{name}": value for name, value in usage.items() if isinstance(value, (int, float))},
            "key": f"{row['policy']}|{row['capacity']}|{row['case_id']}",
            "kept_fact_ids": list(row.get("kept_fact_ids", [])),
            "status": "correct" if row["grade_correct"] else "incorrect",
        })
    notes = [] if include_private_text else [
        "The model's answers are left out (they can quote memory text); pass --include-private-text"
        " for a page kept locally."]
    summary = _read_json(path / "qa.summary.json")
    groups = summary.get("groups") or summary.get("policies") or []
    return Run(path, "qa", _read_json(path / "qa_run.json") or summary, cases,
               [_scalars(group) for group in groups if isinstance(group, dict)], notes)


def _diff_run(path: Path) -> Run:
    rows_file = path / "diff.cases.jsonl"
    cases = []
    for number, row in _read_jsonl(rows_file):
        _require(rows_file, number, row, ("case_id",))
        key = "|".join(str(row[name]) for name in ("policy", "case_id") if name in row)
        flat = {**_scalars(row), **_diff_capacities(row.get("capacities"))}
        changed = any(name.endswith("_changed") and value is True for name, value in flat.items())
        cases.append({**flat, "key": key, "status": "changed" if changed else "unchanged"})
    summary = _read_json(path / "diff.summary.json")
    return Run(path, "diff", _read_json(path / "diff.run.json") or summary, cases, [_scalars(summary)])


def _diff_capacities(capacities: Any) -> dict[str, Any]:
    """A diff row's per-capacity block as flat cells: ``k7_kept_changed``, ``k7_support`` ("kept ->
    evicted"), ``k7_entered`` and ``k7_left`` (fact ids)."""
    if not isinstance(capacities, dict):
        return {}
    cells: dict[str, Any] = {}
    for capacity, block in capacities.items():
        if not isinstance(block, dict):
            continue
        cells[f"k{capacity}_kept_changed"] = block.get("kept_changed")
        retained = block.get("support_retained")
        if isinstance(retained, dict):
            cells[f"k{capacity}_support"] = " -> ".join(
                "kept" if retained.get(side) else "evicted" for side in ("from", "to"))
        for name in ("entered", "left"):
            if block.get(name):
                cells[f"k{capacity}_{name}"] = " ".join(map(str, block[name]))
    return cells


def _sweep_run(path: Path) -> Run:
    manifest = _read_json(path / SWEEP_RECORD)
    summary_file = path / "extreme_settings.csv"
    rows: list[dict[str, Any]] = []
    notes = [
        "A sweep's rows.parquet and scenario_summary.parquet are summarised here, not embedded:"
        " the table is extreme_settings.csv, the best and worst setting per scenario."
    ]
    if summary_file.exists():
        with open(summary_file, newline="", encoding="utf-8") as handle:
            for index, row in enumerate(csv.DictReader(handle)):
                if index == _SWEEP_SUMMARY_ROWS:
                    notes.append(f"Only the first {_SWEEP_SUMMARY_ROWS:,} summary rows are shown.")
                    break
                rows.append({name: _number_or_text(value) for name, value in row.items()})
    return Run(path, "sweep", manifest, [], rows, notes)


def _trace_run(path: Path, kind: str) -> Run:
    """A trace run: its summary CSV as the summary, its row table as cases when it is small."""
    import pandas as pd

    record = read_record(path, kind)
    manifest = record.as_dict() if record is not None else {}
    outputs = manifest.get("outputs") or {}
    row_counts = (manifest.get("summary") or {}).get("rows") or {}
    if manifest.get("status") != "success":
        name = record_path(path, kind)
        raise ContractError(f"{name}: status {manifest.get('status')!r}; only a finished run is shown")
    summary: list[dict[str, Any]] = []
    cases: list[dict[str, Any]] = []
    notes = []
    for name in outputs:
        table = path / name
        rows = row_counts.get(name, 0)
        if name.endswith(".csv") and not summary:
            summary = [_scalars(row) for row in pd.read_csv(table).head(_SWEEP_SUMMARY_ROWS).to_dict("records")]
        elif name.endswith(".parquet") and rows <= _TRACE_CASE_ROWS and not cases:
            records = pd.read_parquet(table).to_dict("records")
            cases = [{**_scalars(row), "key": f"{name}|{index}"} for index, row in enumerate(records)]
        else:
            notes.append(f"{name} ({rows:,} rows) is not embedded; read it with pandas.")
    return Run(path, kind, {**manifest.get("parameters", {}), "status": manifest.get("status")},
               cases, summary, notes)


def add_private_text(run: Run, pool_set: Any) -> None:
    """Add each case's question and reference answer, and each fact's text, from ``pool_set``
    (a :class:`~evictlab.core.pools.PoolSet` built on the run's dataset and preset)."""
    recorded = (run.manifest.get("dataset") or {}).get("sha256")
    if recorded and recorded != pool_set.dataset.sha256:
        raise ContractError(
            f"{run.path}: the run was made on a dataset with SHA-256 {recorded}, not {pool_set.dataset.path}"
            f" ({pool_set.dataset.sha256}); pass that file with --dataset"
        )
    cases = {case.case_id: case for case in pool_set.cases}
    for item in run.cases:
        case = cases.get(item.get("case_id"))
        if case is None:
            continue
        item["question"], item["reference_answer"] = case.question, case.answer
        texts = {str(fact.get("id")): fact.get("content") for fact in case.facts}
        for fact in item.get("facts", []):
            fact["text"] = texts.get(fact["fact_id"])
    run.notes.append("This page holds private text (questions, reference answers, memory): keep it local.")


def _number_or_text(value: str) -> Any:
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


# --------------------------------------------------------------------------- A/B


def compare(first: Run, second: Run) -> dict[str, Any]:
    """Pair the cases of two runs and list the pairs that disagree (see the module docstring)."""
    if first.kind != second.kind:
        raise ContractError(
            f"cannot compare a {first.kind} run ({first.path}) with a {second.kind} run ({second.path})"
        )
    if first.kind not in ("policy", "qa"):
        raise ContractError(f"evictlab view compares policy and QA runs; {first.path} is a {first.kind} run")
    policies = [sorted({case["policy"] for case in run.cases}) for run in (first, second)]
    cross = len(policies[0]) == len(policies[1]) == 1 and policies[0] != policies[1]

    def pair_key(case: Mapping[str, Any]) -> str:
        return f"{case['capacity']}|{case['case_id']}" if cross else case["key"]

    left = {pair_key(case): case for case in first.cases}
    right = {pair_key(case): case for case in second.cases}
    shared = [key for key in left if key in right]
    rows = []
    for key in shared:
        a, b = left[key], right[key]
        if first.kind == "policy":
            reasons = []
            if a["status"] != b["status"]:
                reasons.append("support outcome")
            if a["kept_fact_ids"] != b["kept_fact_ids"]:
                reasons.append("kept set")
        else:
            reasons = ["grade"] if a["grade_correct"] != b["grade_correct"] else []
        if reasons:
            rows.append({"pair": key, "case_id": a["case_id"], "scenario": a.get("scenario"), "capacity": a["capacity"],
                         "a_key": a["key"], "b_key": b["key"], "a_policy": a["policy"], "b_policy": b["policy"],
                         "a_status": a["status"], "b_status": b["status"], "differs_in": ", ".join(reasons),
                         "only_in_a": sorted(set(a["kept_fact_ids"]) - set(b["kept_fact_ids"])),
                         "only_in_b": sorted(set(b["kept_fact_ids"]) - set(a["kept_fact_ids"]))})
    return {
        "paired_by": "capacity and case (one policy on each side)" if cross else "policy, capacity and case",
        "pairs": len(shared), "only_in_a": len(left) - len(shared), "only_in_b": len(right) - len(shared),
        "disagreeing": rows,
    }


# --------------------------------------------------------------------------- the page


def render(runs: Sequence[Run], comparison: dict[str, Any] | None = None) -> str:
    """The page: ``templates/view.html.j2`` with the runs (and the comparison) embedded as JSON."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("evictlab.workbench", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        keep_trailing_newline=True,
    )
    payload = _finite({"runs": [run.payload() for run in runs], "comparison": comparison})
    # Inside <script>, "</" would end the element: JSON allows "<\/" for the same string.
    data = json.dumps(payload, ensure_ascii=False, allow_nan=False, default=str).replace("</", "<\\/")
    title = " vs. ".join(html.unescape(run.label) for run in runs)
    return environment.get_template("view.html.j2").render(marker=VIEW_MARKER, title=title, data=data)


def _finite(value: Any) -> Any:
    """``value`` with every infinite or NaN number as None (JSON has no such numbers) and every
    other float to 6 decimals (the page shows 4; the run files keep every bit)."""
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def check_output(path: Path) -> None:
    """Refuse to replace a file that is not an earlier page of this viewer."""
    if path.is_dir():
        raise ContractError(f"{path}: is a folder; --output names the HTML file to write")
    if path.exists():
        with open(path, encoding="utf-8", errors="replace") as handle:
            if VIEW_MARKER not in handle.read(512):
                raise ContractError(f"{path}: exists and is not an evictlab view page; choose another --output")
