"""Differences between two protocol variants (or any two run specs) on one dataset.

The comparison follows the pipeline: which records the distractor bank admits, which source
records each case's pool draws and with what metadata, which records each policy keeps at
every capacity of the config, whether the support survives, and which answer requests change
at the QA capacity.

Everything is compared per *source record* (the dataset question id a fact was rendered
from; the case id for a support fact), never per fact id, so renaming ids (``fact_ids``
``raw`` -> ``protocol``) is not a change by itself. A record's *metadata* is every fact field
except ``id`` and ``content``, plus its usage entry. Content is counted separately: the
evidence header variant rewrites the text of every record, which would otherwise hide the
pools whose draws or metadata really moved.

Both DeerMem policies (``confidence``, ``hybrid-v1``) are compared, as in the published runs.
A case row (``diff.cases.jsonl``, one per case and policy) holds: ``case_id``, ``source``,
``scenario``, ``policy``; the pool fields ``pool_changed``, ``records_in``/``records_out``
(source records that entered or left the pool), ``draws_changed`` (draw positions holding
another record), ``metadata_changed`` and ``content_changed`` (records); per capacity
``kept_changed``, ``entered``/``left`` (records entering or leaving the kept set),
``support_retained`` and ``tie_at_cut`` before and after; ``prompt_changed`` and both
``request_fingerprint`` values at the QA capacity. Pool fields repeat on both policy rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from .. import results
from ..core.pools import Case, PoolSet, open_pools
from ..core.runspec import RunSpec, canonical_params, check_same_dataset
from ..errors import ContractError
from ..policies import DEERMEM_POLICIES, Decision
from ..times import iso_z
from .evaluate import decide
from .qa.prompt import row_id
from .qa.tasks import build_tasks

KIND = "diff"
SUMMARY_FILE = "diff.summary.json"
CASES_FILE = "diff.cases.jsonl"
RUN_FILE = f"{KIND}{results.RECORD_SUFFIX}"  # the run record
OUTPUT_FILES = (CASES_FILE, SUMMARY_FILE)
DIFF_FILES = (*OUTPUT_FILES, RUN_FILE)
SIDES = ("from", "to")


@dataclass(frozen=True)
class DiffResult:
    """``summary``: the counts of ``diff.summary.json``; ``cases``: one row per case and policy."""

    summary: dict[str, Any]
    cases: list[dict[str, Any]]

    def kept_frame(self) -> pd.DataFrame:
        """Tidy kept-set changes: one row per case x policy x capacity."""
        return pd.DataFrame(
            [
                {
                    "case_id": row["case_id"],
                    "source": row["source"],
                    "scenario": row["scenario"],
                    "policy": row["policy"],
                    "capacity": int(capacity),
                    "kept_changed": cell["kept_changed"],
                    "entered": len(cell["entered"]),
                    "left": len(cell["left"]),
                    "support_retained_from": cell["support_retained"]["from"],
                    "support_retained_to": cell["support_retained"]["to"],
                }
                for row in self.cases
                for capacity, cell in row["capacities"].items()
            ]
        )


# --------------------------------------------------------------------------- entry points


def diff_specs(
    a: RunSpec, b: RunSpec, dataset_path: str | Path | None = None, *, allow_unpinned: bool = False
) -> DiffResult:
    """Build both specs' pools on one dataset (:func:`diff_dataset`) and diff them.

    The specs' configs must pin the same dataset; otherwise a :class:`ContractError` says so
    before any dataset is read.
    """
    check_same_dataset([a, b])
    dataset_path, allow_unpinned = diff_dataset(a, b, dataset_path, allow_unpinned)
    pools_a = open_pools(a.on_dataset(dataset_path, allow_unpinned=allow_unpinned))
    pools_b = open_pools(b.on_dataset(dataset_path, allow_unpinned=allow_unpinned))
    return diff_pool_sets(pools_a, pools_b, specs=(a, b))


def diff_dataset(
    a: RunSpec, b: RunSpec, dataset_path: str | Path | None = None, allow_unpinned: bool = False
) -> tuple[str | Path | None, bool]:
    """The dataset of a diff: ``dataset_path`` when given, else the one the specs name (a spec
    naming none takes the other's; None, the demo, when neither does). Two specs naming two
    files are a :class:`ContractError`."""
    if dataset_path is not None:
        return dataset_path, allow_unpinned
    named = {spec.dataset for spec in (a, b) if spec.dataset is not None}
    if len(named) > 1:
        raise ContractError(
            f"{a.where} names dataset {a.dataset} and {b.where} names {b.dataset}; a comparison needs one dataset"
        )
    return (named.pop() if named else None), allow_unpinned or a.allow_unpinned or b.allow_unpinned


def diff_pool_sets(
    a: PoolSet, b: PoolSet, *, specs: tuple[RunSpec, RunSpec] | None = None
) -> DiffResult:
    """Compare pool set ``a`` (before) with ``b`` (after) at every capacity of the config.

    Each side is evaluated with its own protocol's hybrid parameters and clock (a spec's
    :meth:`~evictlab.core.runspec.RunSpec.load_protocol` puts them there). Both sides must come
    from the same dataset, hold the same case ids and use the same capacities. ``specs``, when
    given, describe the two sides in the summary.
    """
    _check_comparable(a, b)
    pool_config = a.protocol.config.pool
    capacities = tuple(pool_config.capacities)
    qa_capacity = pool_config.qa_capacity
    # The QA tasks fix the order and content of each request; compare their fingerprints.
    fingerprints = [
        {task.row_id: task.request_fingerprint for task in build_tasks(side)} for side in (a, b)
    ]
    cases_b = {case.case_id: case for case in b.cases}
    rows = []
    for case_a in a.cases:
        case_b = cases_b[case_a.case_id]
        pool = compare_pools(case_a, case_b)
        for policy in DEERMEM_POLICIES:
            row_key = row_id(case_a.case_id, policy)
            cells = {}
            for capacity in capacities:
                before = _decide(a, case_a, policy, capacity)
                after = _decide(b, case_b, policy, capacity)
                cells[str(capacity)] = compare_decisions(case_a, before, case_b, after)
            prompt = {side: fp[row_key] for side, fp in zip(SIDES, fingerprints)}
            rows.append(
                {
                    "case_id": case_a.case_id,
                    "source": case_a.source,
                    "scenario": case_a.scenario,
                    "policy": policy,
                    **pool,
                    "capacities": cells,
                    "prompt_changed": prompt["from"] != prompt["to"],
                    "request_fingerprint": prompt,
                }
            )
    summary = summarize_diff(a, b, rows, capacities, qa_capacity, specs)
    return DiffResult(summary, rows)


def _check_comparable(a: PoolSet, b: PoolSet) -> None:
    if a.dataset.sha256 != b.dataset.sha256:
        raise ContractError(
            f"the two pool sets come from different datasets ({a.dataset.path}: {a.dataset.sha256},"
            f" {b.dataset.path}: {b.dataset.sha256}); a diff compares two variants on one dataset"
        )
    ids_a = [case.case_id for case in a.cases]
    ids_b = [case.case_id for case in b.cases]
    if sorted(ids_a) != sorted(ids_b):
        only_a = sorted(set(ids_a) - set(ids_b))
        only_b = sorted(set(ids_b) - set(ids_a))
        raise ContractError(
            f"the two sides prepare different cases (only before: {only_a}, only after: {only_b});"
            " their manifests must list the same case ids"
        )
    pool_a, pool_b = a.protocol.config.pool, b.protocol.config.pool
    if (pool_a.capacities, pool_a.qa_capacity) != (pool_b.capacities, pool_b.qa_capacity):
        raise ContractError(
            f"the two configs evaluate different capacities ({list(pool_a.capacities)}, QA"
            f" {pool_a.qa_capacity} vs {list(pool_b.capacities)}, QA {pool_b.qa_capacity})"
        )


def _decide(pool_set: PoolSet, case: Case, policy: str, capacity: int) -> Decision:
    protocol = pool_set.protocol
    return decide(case, policy, capacity, protocol.config.hybrid, protocol.evaluation_time)


# --------------------------------------------------------------------------- per case


def source_records(case: Case) -> dict[str, dict[str, Any]]:
    """Source record id -> the fact drawn from it, with its usage entry under ``usage``."""
    records = {}
    for fact in case.facts:
        records[case.fact_sources[fact["id"]]] = {**fact, "usage": case.usage.get(fact["id"])}
    return records


def record_metadata(record: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key not in ("id", "content")}


def compare_pools(a: Case, b: Case) -> dict[str, Any]:
    """Pool-level differences of one case: membership, draws, metadata, content."""
    records_a, records_b = source_records(a), source_records(b)
    union = sorted(set(records_a) | set(records_b))
    metadata_changed = [
        source for source in union
        if source not in records_a or source not in records_b
        or record_metadata(records_a[source]) != record_metadata(records_b[source])
    ]
    content_changed = [
        source for source in union
        if source in records_a and source in records_b
        and records_a[source]["content"] != records_b[source]["content"]
    ]
    draws = max(len(a.distractor_sources), len(b.distractor_sources))
    draws_changed = sum(
        1 for i in range(draws) if _at(a.distractor_sources, i) != _at(b.distractor_sources, i)
    )
    records_in = sorted(set(records_b) - set(records_a))
    records_out = sorted(set(records_a) - set(records_b))
    return {
        "pool_changed": bool(records_in or records_out or metadata_changed),
        "records_in": records_in,
        "records_out": records_out,
        "draws_changed": draws_changed,
        "metadata_changed": len(metadata_changed),
        "content_changed": len(content_changed),
    }


def _at(items: Sequence[str], index: int) -> str | None:
    return items[index] if index < len(items) else None


def compare_decisions(case_a: Case, before: Decision, case_b: Case, after: Decision) -> dict[str, Any]:
    """One capacity of one case and policy: kept records before and after, retention, ties."""
    kept_a = {case_a.fact_sources[fact_id] for fact_id in before.kept_ids}
    kept_b = {case_b.fact_sources[fact_id] for fact_id in after.kept_ids}
    return {
        "kept_changed": kept_a != kept_b,
        "entered": sorted(kept_b - kept_a),
        "left": sorted(kept_a - kept_b),
        "support_retained": {
            "from": support_retained(case_a, before),
            "to": support_retained(case_b, after),
        },
        "tie_at_cut": {"from": tie_at_cut(before), "to": tie_at_cut(after)},
    }


def support_retained(case: Case, decision: Decision) -> bool:
    kept = set(decision.kept_ids)
    return all(fact_id in kept for fact_id in case.support_fact_ids)


def tie_at_cut(decision: Decision) -> bool:
    """Whether a kept fact and an evicted fact have exactly equal scores.

    Only then can the input order (fact-id order) decide what is kept, so a kept set that
    changes while every record keeps its score must have a tie at the cut.
    """
    kept = {decision.scores[fact_id].value for fact_id in decision.kept_ids}
    return any(item.score in kept for item in decision.evicted)


# --------------------------------------------------------------------------- summary


def summarize_diff(
    a: PoolSet, b: PoolSet, rows: list[dict[str, Any]], capacities: Sequence[int], qa_capacity: int,
    specs: tuple[RunSpec, RunSpec] | None,
) -> dict[str, Any]:
    """The counts of ``diff.summary.json`` from the case rows."""
    policies = DEERMEM_POLICIES
    pool_rows = [row for row in rows if row["policy"] == policies[0]]  # pool fields repeat per policy
    bank_a = [record.question_id for record in a.bank]
    bank_b = [record.question_id for record in b.bank]
    per_capacity: dict[str, dict[str, Any]] = {}
    for capacity in map(str, capacities):
        cells = [row["capacities"][capacity] for row in rows]
        retained = {
            policy: {
                side: sum(
                    row["capacities"][capacity]["support_retained"][side]
                    for row in rows if row["policy"] == policy
                )
                for side in SIDES
            }
            for policy in policies
        }
        per_capacity[capacity] = {
            "kept_sets_total": len(cells),
            "kept_sets_changed": sum(cell["kept_changed"] for cell in cells),
            "support_retention_changed": sum(
                cell["support_retained"]["from"] != cell["support_retained"]["to"] for cell in cells
            ),
            "support_retained": retained,
        }
    sides = specs if specs is not None else (None, None)
    return {
        "schema_version": 1,
        "from": side_record(a, sides[0]),
        "to": side_record(b, sides[1]),
        "dataset": a.dataset.record(),
        "policies": list(policies),
        "capacities": list(capacities),
        "qa_capacity": qa_capacity,
        "pools_total": len(pool_rows),
        "pools_changed": sum(row["pool_changed"] for row in pool_rows),
        "pools_content_changed": sum(row["content_changed"] > 0 for row in pool_rows),
        "distractor_draws_total": sum(len(case.distractor_sources) for case in a.cases),
        "distractor_draws_changed": sum(row["draws_changed"] for row in pool_rows),
        "metadata_assignments_changed": sum(row["metadata_changed"] for row in pool_rows),
        "content_records_changed": sum(row["content_changed"] for row in pool_rows),
        "kept_sets_total": {c: cell["kept_sets_total"] for c, cell in per_capacity.items()},
        "kept_sets_changed": {c: cell["kept_sets_changed"] for c, cell in per_capacity.items()},
        "support_retention_changed": {c: cell["support_retention_changed"] for c, cell in per_capacity.items()},
        "support_retained": {c: cell["support_retained"] for c, cell in per_capacity.items()},
        "prompts_total": len(rows),
        "prompts_changed": sum(row["prompt_changed"] for row in rows),
        "bank_records_in": sorted(set(bank_b) - set(bank_a)),
        "bank_records_out": sorted(set(bank_a) - set(bank_b)),
        "bank_positions_changed": sum(x != y for x, y in zip(bank_a, bank_b)) + abs(len(bank_a) - len(bank_b)),
    }


def side_record(pool_set: PoolSet, spec: RunSpec | None) -> dict[str, Any]:
    """What one side was: the spec's record (or the pool set's resolved values) and the files used."""
    protocol = pool_set.protocol
    # The files actually read: the demo dataset brings its own official manifest.
    used = {"artifacts_used": protocol.artifact_hashes()}
    if spec is not None:
        return {**spec.as_record(), **used}
    return {
        "variant": pool_set.variant.as_dict(),
        "policy_parameters": canonical_params(protocol.config.hybrid),
        "evaluation_time": iso_z(protocol.evaluation_time),
        **used,
    }


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """A short human summary; the first line is the headline."""
    qa = str(summary["qa_capacity"])
    others = [str(c) for c in summary["capacities"] if str(c) != qa]
    kept_changed, kept_total = summary["kept_sets_changed"], summary["kept_sets_total"]
    retention_changed = summary["support_retention_changed"]
    if any(retention_changed.values()):
        retention = "retention changed in " + ", ".join(
            f"{retention_changed[c]}/{kept_total[c]} (capacity {c})" for c in map(str, summary["capacities"])
        )
    else:
        retention = "retention unchanged"
    headline = (
        f"{summary['pools_changed']}/{summary['pools_total']} pools,"
        f" {kept_changed[qa]}/{kept_total[qa]} kept sets (capacity {qa}),"
        f" {summary['prompts_changed']}/{summary['prompts_total']} prompts changed; {retention}"
    )
    label_from = summary["from"].get("label", "before")
    label_to = summary["to"].get("label", "after")
    lines = [f"{label_from} -> {label_to}: {headline}"]
    if others:
        lines.append(
            "kept sets at other capacities: "
            + ", ".join(f"{kept_changed[c]}/{kept_total[c]} (capacity {c})" for c in others)
        )
    lines.append(
        f"pools: {summary['distractor_draws_changed']}/{summary['distractor_draws_total']} distractor draws"
        f" and {summary['metadata_assignments_changed']} metadata assignments changed;"
        f" record text changed in {summary['pools_content_changed']}/{summary['pools_total']} pools"
    )
    if summary["bank_records_in"] or summary["bank_records_out"]:
        lines.append(
            f"bank: out {', '.join(summary['bank_records_out']) or '-'};"
            f" in {', '.join(summary['bank_records_in']) or '-'}"
        )
    for capacity in map(str, summary["capacities"]):
        retained = summary["support_retained"][capacity]
        if retention_changed[capacity]:
            cases = summary["pools_total"]
            lines.append(
                f"support retained at capacity {capacity}: "
                + ", ".join(f"{policy} {r['from']}/{cases} -> {r['to']}/{cases}" for policy, r in retained.items())
            )
    return lines


# --------------------------------------------------------------------------- files


def run_parameters(sides: Mapping[str, RunSpec]) -> dict[str, Any]:
    """The record's parameters: each side's label and identity."""
    return {side: {"label": spec.label, "identity": spec.identity} for side, spec in sides.items()}


def write_diff_files(run: results.Run, result: DiffResult) -> list[Path]:
    """Write ``diff.cases.jsonl`` and ``diff.summary.json`` into an open ``diff`` run.

    The summary and case rows hold no timestamps, so identical inputs give identical bytes;
    the run record ``diff.run.json`` holds provenance, times, both specs' labels and identities
    (:func:`run_parameters`) and the files' SHA-256.
    """
    run.record.dataset = result.summary["dataset"]
    paths = [run.write_jsonl(CASES_FILE, result.cases), run.write_json(SUMMARY_FILE, result.summary)]
    run.record.summary = {"case_rows": len(result.cases)}
    return paths
