"""``evictlab view``: one self-contained HTML file for one run folder, or an A/B comparison of two.

What a page shows for each kind of folder, how two runs are paired and what private text it
may hold: docs/viewer.md. :func:`load_run` tells a folder's kind by its files (``policy``,
``qa``, ``diff``, ``sweep``, ``trace replay`` / ``trace study``, ``audit``) and reads every file
through :class:`~evictlab.workbench.viewer_files.RunFolder` (only files inside the folder,
bounded and strict, every field the page uses checked: a tampered folder is one error naming the
file, the line and the field). :func:`add_private_text` adds questions, answers and fact text
from the run's pools; :func:`compare` pairs two runs' cases; :func:`render` fills
``templates/view.html.j2`` (data as embedded JSON, no network access).

Margins here are computed from the scores stored in the run: a kept fact's score minus the
highest evicted score, an evicted fact's score minus the lowest score kept without a reserved
slot. They equal ``evictlab explain``'s for score-ordered policies; for the others (LRU ties,
tiers, modifiers) ``explain`` is exact and this is a reading aid.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ..core.schema import Section
from ..errors import ContractError
from ..results import RECORD_SUFFIX, record_path
from .viewer_files import RunFolder

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
#: ``evictlab audit --output-dir``: the event checks as the summary, the shadow sentence as a note.
AUDIT_RECORD = f"store-audit{RECORD_SUFFIX}"
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
    """Read a run folder (see the module docstring); :class:`ContractError` for anything else,
    naming the file, the line and the field. Only files inside the folder are read
    (:class:`~evictlab.workbench.viewer_files.RunFolder`)."""
    files = RunFolder(Path(folder))
    if files.has("policy.raw.jsonl"):
        return _policy_run(files)
    if files.has("qa.rows.jsonl"):
        return _qa_run(files, include_private_text)
    if files.has("diff.cases.jsonl"):
        return _diff_run(files)
    if files.has(SWEEP_RECORD):
        return _sweep_run(files)
    for kind in TRACE_KINDS:
        if files.has(record_path(files.path, kind).name):
            return _trace_run(files, kind)
    if files.has(AUDIT_RECORD):
        return _audit_run(files)
    raise ContractError(
        f"{files.path}: not an evictlab run folder (no policy.raw.jsonl, qa.rows.jsonl, diff.cases.jsonl,"
        f" {SWEEP_RECORD}, {', '.join(record_path(files.path, kind).name for kind in TRACE_KINDS)} or {AUDIT_RECORD})"
    )


def _require(where: str, row: Mapping[str, Any], names: Sequence[str]) -> Section:
    missing = [name for name in names if name not in row]
    if missing:
        raise ContractError(f"{where}: missing field(s) {', '.join(missing)}")
    return Section(row, file=where)


def _scalars(row: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a row that fit a table cell (numbers, strings, booleans, None)."""
    return {name: value for name, value in row.items() if value is None or isinstance(value, (str, int, float, bool))}


def _groups(path: Path, document: Mapping[str, Any], *names: str) -> list[dict[str, Any]]:
    """A summary document's list of group objects (under the first of ``names`` it holds), as table rows."""
    name = next((name for name in names if name in document), None)
    groups = document.get(name, []) if name else []
    if not isinstance(groups, list) or not all(isinstance(group, dict) for group in groups):
        raise ContractError(f"{path}: {name}: must be a list of objects")
    return [_scalars(group) for group in groups]


def _optional(row: Section, name: str, read: Any, default: Any) -> Any:
    return read(name) if row.data.get(name) is not None else default


# --------------------------------------------------------------------------- policy runs

_POLICY_FIELDS = ("case_id", "policy", "capacity", "kept_fact_ids", "scores", "support_fact_ids")


def _policy_run(files: RunFolder) -> Run:
    cases = [_policy_case(where, row) for where, row in files.json_rows("policy.raw.jsonl")]
    summary = _groups(files.path / "summary.json", files.json("summary.json"), "groups")
    return Run(files.path, "policy", files.json("run.json"), cases, summary)


def _policy_case(where: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    row = _require(where, raw, _POLICY_FIELDS)
    policy, capacity, case_id = row.string("policy"), row.integer("capacity", 0), row.string("case_id")
    kept = set(row.string_list("kept_fact_ids", non_empty=False))
    support = set(row.string_list("support_fact_ids", non_empty=False))
    scores = row.section("scores")
    if not kept <= set(scores.data):
        raise scores.error("must hold every kept fact")
    reserved_slots = _optional(row, "reserved_correction_slots", lambda name: row.integer(name, 0), 0)
    evicted = row.raw("evicted") if "evicted" in row.data else []
    if not isinstance(evicted, list) or not all(isinstance(item, dict) for item in evicted):
        raise row.error("must be a list of objects", "evicted")
    categories = {item.get("fact_id"): item.get("category") for item in evicted}
    facts = []
    for fact_id in scores.data:
        entry = scores.section(fact_id)
        components = entry.section("components") if "components" in entry.data else None
        fact = {"fact_id": fact_id, "score": entry.number("value"),
                "components": {name: components.number(name) for name in components.data} if components else {},
                "kept": fact_id in kept, "support": fact_id in support}
        if isinstance(categories.get(fact_id), str):
            fact["category"] = categories[fact_id]
        facts.append(fact)
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
        **_scalars(raw),
        "key": f"{policy}|{capacity}|{case_id}",
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


def _qa_run(files: RunFolder, include_private_text: bool) -> Run:
    cases = []
    for where, raw in files.json_rows("qa.rows.jsonl"):
        row = _require(where, raw, _QA_FIELDS)
        policy, capacity, case_id = row.string("policy"), row.integer("capacity", 0), row.string("case_id")
        correct = row.boolean("grade_correct")
        usage = _optional(row, "usage", row.section, None)
        shown = {name: value for name, value in raw.items() if include_private_text or name not in PRIVATE_QA_FIELDS}
        cases.append({
            **_scalars(shown),
            **{f"usage_{name}": value for name, value in (usage.data if usage else {}).items()
               if isinstance(value, (int, float)) and not isinstance(value, bool)},
            "key": f"{policy}|{capacity}|{case_id}",
            "kept_fact_ids": list(_optional(row, "kept_fact_ids", partial(row.string_list, non_empty=False), ())),
            "status": "correct" if correct else "incorrect",
        })
    notes = [] if include_private_text else [
        "The model's answers are left out (they can quote memory text); pass --include-private-text"
        " for a page kept locally."]
    summary = files.json("qa.summary.json")
    groups = _groups(files.path / "qa.summary.json", summary, "groups", "policies")
    return Run(files.path, "qa", files.json("qa_run.json") or summary, cases, groups, notes)


def _diff_run(files: RunFolder) -> Run:
    cases = []
    for where, raw in files.json_rows("diff.cases.jsonl"):
        row = _require(where, raw, ("case_id",))
        key = "|".join([*([row.string("policy")] if "policy" in raw else []), row.string("case_id")])
        capacities = _optional(row, "capacities", row.section, None)
        flat = {**_scalars(raw), **(_diff_capacities(capacities) if capacities else {})}
        changed = any(name.endswith("_changed") and value is True for name, value in flat.items())
        cases.append({**flat, "key": key, "status": "changed" if changed else "unchanged"})
    summary = files.json("diff.summary.json")
    return Run(files.path, "diff", files.json("diff.run.json") or summary, cases, [_scalars(summary)])


def _diff_capacities(capacities: Section) -> dict[str, Any]:
    """A diff row's per-capacity block as flat cells: ``k7_kept_changed``, ``k7_support`` ("kept ->
    evicted"), ``k7_entered`` and ``k7_left`` (fact ids)."""
    cells: dict[str, Any] = {}
    for capacity in capacities.data:
        block = capacities.section(capacity)
        cells[f"k{capacity}_kept_changed"] = _optional(block, "kept_changed", block.boolean, None)
        retained = _optional(block, "support_retained", block.section, None)
        if retained:
            cells[f"k{capacity}_support"] = " -> ".join(
                "kept" if _optional(retained, side, retained.boolean, False) else "evicted" for side in ("from", "to"))
        for name in ("entered", "left"):
            if block.data.get(name):
                cells[f"k{capacity}_{name}"] = " ".join(block.string_list(name, unique=False))
    return cells


def _sweep_run(files: RunFolder) -> Run:
    record = files.record("sweep")
    notes = [
        "A sweep's rows.parquet and scenario_summary.parquet are summarised here, not embedded:"
        " the table is extreme_settings.csv, the best and worst setting per scenario."
    ]
    rows: list[dict[str, Any]] = []
    if files.has("extreme_settings.csv"):
        rows, more = files.csv_rows("extreme_settings.csv", _SWEEP_SUMMARY_ROWS)
        notes += [f"Only the first {_SWEEP_SUMMARY_ROWS:,} summary rows are shown."] if more else []
    return Run(files.path, "sweep", record.as_dict() if record else {}, [], [_cells(row) for row in rows], notes)


def _trace_run(files: RunFolder, kind: str) -> Run:
    """A trace run: its summary CSV as the summary, its row table as cases when it is small."""
    record = files.record(kind)
    assert record is not None  # load_run saw the file
    where = files.path / record_path(files.path, kind).name
    if record.status != "success":
        raise ContractError(f"{where}: status {record.status!r}; only a finished run is shown")
    counts = record.summary.get("rows", {})
    if not isinstance(counts, dict) or not all(isinstance(value, int) for value in counts.values()):
        raise ContractError(f"{where}: summary.rows must map each output to its row count")
    tables = [(name, files.locate(name, named_in=f"{where}: outputs")) for name in record.outputs]
    summary: list[dict[str, Any]] = []
    cases: list[dict[str, Any]] = []
    notes = []
    for name, path in tables:
        if name.endswith(".csv") and not summary:
            rows, more = files.csv_rows(name, _SWEEP_SUMMARY_ROWS)
            if not rows or not {"policy", "capacity"} <= set(rows[0]):
                raise ContractError(f"{path}: no rows with columns policy and capacity")
            summary = [_cells(row) for row in rows]
            notes += [f"Only the first {_SWEEP_SUMMARY_ROWS:,} rows of {name} are shown."] if more else []
            continue
        rows, count = files.parquet_rows(name, _TRACE_CASE_ROWS) if name.endswith(".parquet") else ([], None)
        if rows and not cases:
            cases = [{**_scalars(row), "key": f"{name}|{index}"} for index, row in enumerate(rows)]
        else:
            shown = f"{count:,}" if count is not None else f"{counts.get(name, 0):,}"
            notes.append(f"{name} ({shown} rows) is not embedded; read it with pandas.")
    return Run(files.path, kind, {**record.parameters, "status": record.status}, cases, summary, notes)


def _audit_run(files: RunFolder) -> Run:
    """An audit of an imported store: ``audit.checks.csv`` as the summary, shadow mode in a note."""
    record = files.record("store-audit")
    if record is None or record.status != "success":
        raise ContractError(f"{files.path / AUDIT_RECORD}: only a finished audit is shown")
    rows, more = files.csv_rows("audit.checks.csv", _SWEEP_SUMMARY_ROWS)
    shadow = files.json("shadow.summary.json", required=True)
    notes = [f"Only the first {_SWEEP_SUMMARY_ROWS:,} events are shown."] if more else []
    try:
        shares = ", ".join(f"{item['category']} {int(item['saved'])}/{int(item['lost'])}"
                           for item in shadow["categories"])  # fmt: skip
        told = f"{int(shadow['disagreeing'])} of {int(shadow['events'])} events"
    except (KeyError, TypeError, ValueError):
        raise ContractError(f"{files.path / 'shadow.summary.json'}: not an audit's shadow summary") from None
    notes.append(f"Shadow mode: hybrid-v1 would have evicted differently in {told}; categories saved/lost:"
                 f" {shares or 'none'}. Figure: figures/shadow.png." if shadow["events"] else
                 "Shadow mode: no event with a shadow block.")  # fmt: skip
    return Run(files.path, "store-audit", {**record.parameters, "status": record.status}, [],
               [_cells(row) for row in rows], notes)


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


def _cells(row: Mapping[str, str | None]) -> dict[str, Any]:
    """A CSV row's cells as numbers where they read as numbers, empty cells as None."""
    return {name: _number_or_text(value) for name, value in row.items()}


def _number_or_text(value: str | None) -> Any:
    if not value:
        return None
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
        "disagreeing": rows, "summary": _side_by_side([(left[key], right[key]) for key in shared], first.kind),
    }


def _side_by_side(pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], kind: str) -> list[dict[str, Any]]:
    """Per scenario and capacity (then all cases per capacity): the paired cases, how many each side
    got right (support kept, or answered correctly) and the flips: right in A only, right in B only."""
    good = "support kept" if kind == "policy" else "correct"
    word = "retained" if kind == "policy" else "correct"
    groups: dict[tuple[str, int], list[int]] = {}
    for a, b in pairs:
        ok = (a["status"] == good, b["status"] == good)
        for scenario in (str(a.get("scenario") or "?"), "all cases"):
            counts = groups.setdefault((scenario, a["capacity"]), [0, 0, 0, 0, 0])
            for index, value in enumerate((1, ok[0], ok[1], ok[0] and not ok[1], ok[1] and not ok[0])):
                counts[index] += int(value)
    ordered = sorted(groups, key=lambda key: (key[1], key[0] == "all cases", key[0]))
    return [{"scenario": scenario, "capacity": capacity, "pairs": counts[0], f"a_{word}": counts[1],
             f"b_{word}": counts[2], "flips_a_only": counts[3], "flips_b_only": counts[4]}
            for (scenario, capacity), counts in ((key, groups[key]) for key in ordered)]


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
    # Inside <script>, "</script" ends the element and "<!--<script" makes the HTML tokenizer skip
    # the next "</script>": with every "<" (only ever inside a JSON string) written "\u003c", no
    # string can do either. (">" and "&" are harmless there, but escaped as well, as is customary.)
    data = json.dumps(payload, ensure_ascii=False, allow_nan=False, default=str)
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    title = " vs. ".join(run.label for run in runs)
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
