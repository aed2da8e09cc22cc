"""Offline policy evaluation over prepared pools: the rows, summary and run record of ``run-policy``.

Spec 2.10 and 2.11. One row per case x capacity x policy, in that nesting order; every policy
is given the protocol's hybrid parameter set (the confidence policy ignores it). DeerFlow's
three files (``policy.raw.jsonl``, ``summary.json``, ``run.json``: its format, retention as
decided, ties broken by input order) and evictlab's two (``policy.decisions.jsonl``,
``retention.json``: each decision under its tie-break) are described field by field in
docs/protocol.md.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import results
from ..core.dataset import Dataset
from ..core.pools import Case, PoolSet, check_capacities, open_pools
from ..core.protocol import Protocol
from ..core.runspec import RunSpec
from ..policies import DEERMEM_POLICIES, Decision, PolicyParams, resolve_policy, select
from ..results import git_state
from ..selection.decisions import DecisionPlan, distinct, retention_counts
from ..times import utc_now_iso

KIND = "run-policy"
RUN_FILES = ("run.json", "policy.raw.jsonl", "summary.json")  # DeerFlow's
DECISIONS_FILE = "policy.decisions.jsonl"
RETENTION_FILE = "retention.json"
OUTPUT_FILES = (*RUN_FILES, DECISIONS_FILE, RETENTION_FILE)


def decide(case: Case, policy: str, capacity: int, params: PolicyParams, now: _dt.datetime, seed: int = 0) -> Decision:
    return select(
        policy,
        case.facts,
        capacity,
        usage=case.usage,
        now=now,
        params=params,
        support_fact_ids=case.support_fact_ids,
        seed=seed,
    )


def policy_row(case: Case, policy: str, capacity: int, decision: Decision) -> dict[str, Any]:
    """One ``policy.raw.jsonl`` row (spec 2.11)."""
    kept = decision.kept_ids
    retained = [fact_id for fact_id in case.support_fact_ids if fact_id in kept]
    return {
        "schema_version": 1,
        "case_id": case.case_id,
        "source": case.source,
        "scenario": case.scenario,
        "question_type": case.question_type,
        "policy": policy,
        "capacity": capacity,
        "support_fact_ids": list(case.support_fact_ids),
        "kept_fact_ids": kept,
        "evicted": [item.as_dict() for item in decision.evicted],
        "scores": {
            fact_id: {"value": score.value, "components": dict(score.components)}
            for fact_id, score in sorted(decision.scores.items())
        },
        "support_all_retained": len(retained) == len(case.support_fact_ids),
        # An imported store's buckets have no support fact: no recall to report.
        "support_recall": len(retained) / len(case.support_fact_ids) if case.support_fact_ids else None,
        "reserved_correction_slots": decision.reserved_correction_slots,
    }


def decide_run(
    pool_set: PoolSet,
    policies: Sequence[str],
    capacities: Sequence[int],
    params: PolicyParams,
    tie_break: str | None = None,
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The run decided once: :func:`~evictlab.selection.decisions.decide_grid`'s frame and the
    rows of ``policy.raw.jsonl`` (nested case x capacity x policy), both from the same batches."""
    plan = DecisionPlan.build(pool_set, policies, [params], capacities, details=True, tie_break=tie_break)
    batches = {chunk.policy: plan.batch(chunk) for chunk in plan.chunks}  # one setting: one chunk per policy
    decisions = pd.concat([plan.frame(chunk, batches[chunk.policy]) for chunk in plan.chunks], ignore_index=True)
    rows = [
        policy_row(case, policy, capacity, batches[policy].decision(0, c, k))
        for c, case in enumerate(pool_set.cases)
        for k, capacity in enumerate(plan.capacities)
        for policy in plan.policies
    ]
    return decisions, rows


def evaluate(
    pool_set: PoolSet,
    policies: Sequence[str] = DEERMEM_POLICIES,
    capacities: Sequence[int] | None = None,
    params: PolicyParams | None = None,
) -> list[dict[str, Any]]:
    """All rows, nested case x capacity x policy, through the scalar selector: the rows of an
    imported store's buckets (which hold no support fact) and the reference of :func:`decide_run`."""
    for name in policies:
        resolve_policy(name)  # fail on an unknown name before any work
    protocol = pool_set.protocol
    capacities = tuple(capacities or protocol.config.pool.capacities)
    pool_set.check_capacities(capacities, f"{len(pool_set.cases)} pools")
    params = params or protocol.config.hybrid
    now = protocol.evaluation_time
    return [
        policy_row(
            case, policy, capacity, decide(case, policy, evaluated_capacity(case, policy, capacity), params, now)
        )
        for case in pool_set.cases
        for capacity in capacities
        for policy in policies
    ]


def evaluated_capacity(case: Case, policy: str, capacity: int) -> int:
    """``capacity``, or the pool size for a bound meaning "no capacity" (``keep-all``).

    The row keeps the asked capacity; its kept facts are the whole pool.
    """
    return max(capacity, len(case.facts)) if resolve_policy(policy).unlimited else capacity


def summarize(rows: Iterable[dict[str, Any]], protocol_id: str) -> dict[str, Any]:
    """``summary.json``: groups by (source, scenario, capacity, policy), sorted."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        key = (row["source"], row["scenario"], row["capacity"], row["policy"])
        groups.setdefault(key, []).append(row)
    out = []
    for (source, scenario, capacity, policy), members in sorted(groups.items()):
        retained = sum(1 for row in members if row["support_all_retained"])
        recalls = [row["support_recall"] for row in members if row["support_recall"] is not None]
        out.append(
            {
                "source": source,
                "scenario": scenario,
                "capacity": capacity,
                "policy": policy,
                "cases": len(members),
                "support_all_retained": retained,
                "support_all_retained_rate": retained / len(members),
                "mean_support_recall": sum(recalls) / len(recalls) if recalls else None,
            }
        )
    return {"schema_version": 1, "protocol_id": protocol_id, "groups": out}


def run_record(
    pool_set: PoolSet,
    policies: Sequence[str],
    capacities: Sequence[int],
    *,
    preset: str | None,
    params: PolicyParams,
) -> dict[str, Any]:
    """``run.json`` (spec 2.11) plus evictlab's variant, preset and policy parameters."""
    protocol = pool_set.protocol
    return {
        "schema_version": 1,
        "protocol_id": protocol.protocol_id,
        "created_at": utc_now_iso(),
        "git": git_state(),
        "dataset": pool_set.dataset.record(),
        "artifacts": protocol.artifact_hashes(),
        "evaluation_time": protocol.evaluation_time.isoformat(),
        "policies": list(policies),
        "capacities": list(capacities),
        "preset": preset,
        "variant": pool_set.variant.as_dict(),
        "policy_parameters": params.as_dict(),
    }


def check_run_lists(
    policies: Sequence[str], capacities: Sequence[int], pool_size: int, where: str
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Policies known and capacities in range, at least one of each and none repeated (a
    repeated capacity would count every case twice in the summary)."""
    policies = distinct("policies", tuple(policies))
    for name in policies:
        resolve_policy(name)  # an unknown name fails before any work
    capacities = distinct("capacities", tuple(capacities))
    check_capacities(capacities, pool_size, where)
    return policies, capacities


def run_parameters(
    policies: Sequence[str], capacities: Sequence[int], preset: str | None, params: PolicyParams
) -> dict[str, Any]:
    """What the run record of ``run-policy`` keeps as its parameters."""
    return {"policies": list(policies), "capacities": list(capacities), "preset": preset,
            "policy_parameters": params.as_dict()}  # fmt: skip


def write_run(
    output_dir: str | Path,
    pools: PoolSet | RunSpec,
    policies: Sequence[str] = DEERMEM_POLICIES,
    capacities: Sequence[int] | None = None,
    *,
    preset: str | None = None,
    params: PolicyParams | None = None,
    tie_break: str | None = None,
    notice: Callable[[Dataset, Protocol], None] | None = None,
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Decide the run once and write its files (:data:`OUTPUT_FILES`; see the module docstring):
    the one route of ``run-policy`` and the API. Returns :func:`decide_run`'s frame and rows.

    ``pools``: a pool set, or the run spec that opens one (:func:`~evictlab.core.pools.open_pools`,
    told ``notice``) under the folder's lock before the record, so bad input leaves no trace.
    Policies and capacities are checked (:func:`check_run_lists`) against the protocol first.
    Runs inside :func:`evictlab.results.run` (kind ``run-policy``): the folder is locked, a
    finished run is never overwritten, an interrupted one is rerun in place, and
    ``run-policy.run.json`` records the status and the SHA-256 of every file.
    """
    protocol = pools.resolved.protocol if isinstance(pools, RunSpec) else pools.protocol
    cases = sum(map(len, protocol.official.scenarios.values())) + len(protocol.synthetic.cases)
    policies, capacities = check_run_lists(
        policies, capacities or protocol.config.pool.capacities, protocol.config.pool.size, f"{cases} pools"
    )
    params = params or protocol.config.hybrid
    opened: list[PoolSet] = []

    def load() -> None:
        opened.append(pools if isinstance(pools, PoolSet) else open_pools(pools, notice=notice))

    parameters = run_parameters(policies, capacities, preset, params)
    with results.run(output_dir, KIND, parameters=parameters, outputs=OUTPUT_FILES, precheck=load) as run:
        decisions, rows = decide_run(opened[0], policies, capacities, params, tie_break)
        write_run_files(run, opened[0], decisions, rows, preset=preset, params=params)
    return decisions, rows


def write_run_files(
    run: results.Run,
    pool_set: PoolSet,
    decisions: pd.DataFrame,
    rows: list[dict[str, Any]],
    *,
    preset: str | None,
    params: PolicyParams,
) -> list[dict[str, Any]]:
    """The files of an open ``run-policy`` run (``run.json`` last), from :func:`decide_run`'s
    frame and rows of the run (one setting, one seed)."""
    policies = list(decisions["policy"].cat.categories)
    capacities = list(dict.fromkeys(int(capacity) for capacity in decisions["capacity"]))
    run.record.dataset = pool_set.dataset.record()
    protocol_id = pool_set.protocol.protocol_id
    ordered = in_row_order(decisions, len(pool_set.cases), len(capacities), len(policies))
    run.write_jsonl("policy.raw.jsonl", rows)
    run.write_json("summary.json", summarize(rows, protocol_id))
    run.write_jsonl(DECISIONS_FILE, decision_rows(ordered))
    run.write_json(RETENTION_FILE, retention_record(decisions, protocol_id))
    run.write_json("run.json", run_record(pool_set, policies, capacities, preset=preset, params=params))
    run.record.summary = {"rows": len(rows)}
    return rows


def in_row_order(decisions: pd.DataFrame, cases: int, capacities: int, policies: int) -> pd.DataFrame:
    """The frame's rows (policy x case x capacity) in the raw file's order, case x capacity x policy."""
    index = np.arange(policies) * cases * capacities + (np.arange(cases) * capacities)[:, None, None]
    return decisions.iloc[(index + np.arange(capacities)[None, :, None]).reshape(-1)]


def decision_rows(decisions: pd.DataFrame) -> list[dict[str, Any]]:
    """``policy.decisions.jsonl``: each decision's retention under its tie-break and both of its values."""
    names = ["case_id", "source", "scenario", "policy", "capacity", "tie_break", "support_retained",
             "support_expected", "support_tied", "retention"]  # fmt: skip
    columns = [decisions[name].tolist() for name in names]
    return [{"schema_version": 1, **dict(zip(names, values))} for values in zip(*columns)]


def retention_record(decisions: pd.DataFrame, protocol_id: str) -> dict[str, Any]:
    """``retention.json``: the printed table's cells (:func:`retention_counts` of the frame) per
    group and per total, each beside the input-order count and the tie-neutral expectation."""
    tie_breaks = dict(zip(decisions["policy"].astype(str), decisions["tie_break"].astype(str)))

    def groups(keys: list[str]) -> list[dict[str, Any]]:
        counted = retention_counts(decisions, keys)
        as_made = retention_counts(decisions.assign(retention=decisions["support_retained"].astype(float)), keys)
        expected = retention_counts(decisions.assign(retention=decisions["support_expected"]), keys)
        out = [
            {**{key: _plain(row[key]) for key in keys}, "tie_break": tie_breaks[row["policy"]],
             "cases": int(row["cases"]), "retained": _plain(row["retained"]), "ties": int(row["ties"]),
             "support_all_retained": int(made), "support_expected": float(mean)}
            for (_, row), made, mean in zip(counted.iterrows(), as_made["retained"], expected["retained"])
        ]  # fmt: skip
        return sorted(out, key=lambda group: tuple(group[key] for key in keys))

    return {
        "schema": "evictlab-retention", "schema_version": 1, "protocol_id": protocol_id, "tie_breaks": tie_breaks,
        "groups": groups(["source", "scenario", "capacity", "policy"]), "totals": groups(["capacity", "policy"]),
    }  # fmt: skip


def _plain(value: Any) -> Any:
    """A numpy scalar as Python's (a whole float stays a float: counts under ``expected`` are)."""
    return value.item() if isinstance(value, np.generic) else value
