"""Workload studies: many seeded workloads x policies x capacities, as one tidy table, on Dask.

A study is a grid over generator parameters (every combination of the listed values, the
other parameters at their defaults) times ``seeds`` seeds. Each (grid point, seed) is one
task: generate the trace, replay every policy at every capacity (with DeerMem's lifecycle
stages, middleware mode unless ``lifecycle`` says otherwise), solve the optimum, and
return the rows of :func:`.metrics.curve_rows` with the workload's parameters attached. Tasks
are pure functions of their inputs and results are gathered in task order
(:mod:`evictlab.distributed`), so in-process, a local cluster and a remote scheduler give
identical tables.

:func:`study_summary` compares every policy with ``confidence`` and with ``fifo`` cell by cell
(a cell is one workload, seed and capacity): the share of cells where it answers more
questions (``win_rate``), where it ties (``tie_rate``), and the 10th, 50th and 90th
percentiles of its answerable-rate advantage. :func:`loss_map` shows where ``hybrid-v1``
loses to ``confidence`` over two grid parameters.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...distributed import Placement, gather_frame
from ...errors import ContractError
from ...policies import BOUND, DEERMEM_POLICIES
from .generate import MAX_TRACE_EVENTS, WorkloadParams, generate
from .lifecycle import DEFAULT_STAGES
from .memory import check_capacities, check_policy_spec
from .metrics import DEFAULT_CAPACITIES, MAX_EVENT_REPLAYS, check_replay_work, curve_rows
from .optimum import MAX_OPTIMUM_ARCS

#: Tasks (grid points x seeds) a study may run; ``--max-tasks`` raises it.
MAX_STUDY_TASKS = 10_000
#: Policies of a study when none are given: DeerMem's two and the simplest baselines.
STUDY_POLICIES = (*DEERMEM_POLICIES, "fifo", "lru")
BASELINES = ("confidence", "fifo")
PERCENTILES = (10, 50, 90)


@dataclass(frozen=True)
class StudyTask:
    workload: int  # the grid point's number
    seed: int
    params: WorkloadParams
    varied: tuple[str, ...]  # the grid's parameter names (recorded in every row)
    policies: tuple[str, ...]
    capacities: tuple[int, ...]
    max_optimum_arcs: int = MAX_OPTIMUM_ARCS
    max_events: int = MAX_TRACE_EVENTS
    lifecycle: frozenset[str] = DEFAULT_STAGES  # DeerMem's stages each replay runs


def study_tasks(
    grid: Mapping[str, Sequence[Any]],
    seeds: int,
    *,
    base: WorkloadParams | None = None,
    policies: Sequence[str] = STUDY_POLICIES,
    capacities: Sequence[int] = DEFAULT_CAPACITIES,
    max_optimum_arcs: int = MAX_OPTIMUM_ARCS,
    max_tasks: int = MAX_STUDY_TASKS,
    max_events: int = MAX_TRACE_EVENTS,
    max_event_replays: int = MAX_EVENT_REPLAYS,
    lifecycle: frozenset[str] = DEFAULT_STAGES,
) -> list[StudyTask]:
    """Every combination of ``grid``'s values x seeds 0..``seeds``-1, in a fixed order.

    Refused before any task is built: more than ``max_tasks`` tasks, a grid point whose trace
    would exceed ``max_events`` events, or more than ``max_event_replays`` events replayed in all.
    """
    base = base or WorkloadParams()
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ContractError(f"seeds must be an integer >= 1, got {seeds!r}")
    names = tuple(grid)
    for name in names:
        if not grid[name]:
            raise ContractError(f"grid parameter {name} has no values")
    policies = tuple(check_policy_spec(policy) for policy in policies)
    for needed in ("confidence", "fifo"):
        if needed not in policies:
            policies = (*policies, needed)  # the baselines every summary compares with
    capacities = check_capacities(capacities)
    count = seeds
    for name in names:
        count *= len(grid[name])
    if count > max_tasks:
        raise ContractError(f"the study has {count:,} tasks (grid points x seeds), over the limit of {max_tasks:,};"
                            f" pass --max-tasks {count} to run it")
    points = [base.replace(**dict(zip(names, values))) for values in itertools.product(*(grid[name] for name in names))]
    for params in points:
        params.check_work(max_events)
    events = sum(params.expected_events() for params in points) / len(points)
    check_replay_work(events, count * (len(policies) + 1) * len(capacities), max_event_replays)
    tasks = []
    for workload, params in enumerate(points):
        for seed in range(seeds):
            tasks.append(StudyTask(workload, seed, params, names, policies, capacities, max_optimum_arcs, max_events,
                                   frozenset(lifecycle)))
    return tasks


def run_task(task: StudyTask) -> pd.DataFrame:
    """One workload and seed: generate, replay every policy and capacity, add the bounds."""
    chunk = generate(task.params, task.seed, max_events=task.max_events)
    rows = curve_rows([(f"w{task.workload}-s{task.seed}", lambda: [chunk])], task.policies, task.capacities,
                      max_optimum_arcs=task.max_optimum_arcs, lifecycle=task.lifecycle)
    rows.insert(0, "seed", task.seed)
    rows.insert(0, "workload", task.workload)
    values = task.params.as_dict()
    for position, name in enumerate(task.varied):
        rows.insert(2 + position, name, values[name])
    return rows


def run_study(tasks: Sequence[StudyTask], placement: Placement, *, progress: bool | None = None) -> pd.DataFrame:
    """All tasks' rows, in task order, run where ``placement`` says."""
    if not tasks:
        raise ContractError("a study needs at least one task")
    return gather_frame(run_task, tasks, placement, progress=progress, description="workloads")


def study_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per policy and capacity: win and tie rates and advantage percentiles vs each baseline."""
    cells = rows[rows["role"] != BOUND].pivot_table(
        index=["workload", "seed", "capacity"], columns="policy", values="answerable_rate", aggfunc="first"
    )
    records = []
    for capacity in sorted(cells.index.get_level_values("capacity").unique()):
        at = cells.xs(capacity, level="capacity")
        for policy in at.columns:
            record: dict[str, Any] = {
                "policy": policy,
                "capacity": int(capacity),
                "cells": int(at[policy].notna().sum()),
            }
            for baseline in BASELINES:
                advantage = (at[policy] - at[baseline]).dropna().to_numpy()
                record[f"win_rate_vs_{baseline}"] = float(np.mean(advantage > 0)) if len(advantage) else np.nan
                record[f"tie_rate_vs_{baseline}"] = float(np.mean(advantage == 0)) if len(advantage) else np.nan
                for percentile in PERCENTILES:
                    value = float(np.percentile(advantage, percentile)) if len(advantage) else np.nan
                    record[f"advantage_vs_{baseline}_p{percentile}"] = value
            records.append(record)
    return pd.DataFrame(records)


def loss_map(
    rows: pd.DataFrame, x: str, y: str, *, policy: str = "hybrid-v1", baseline: str = "confidence"
) -> pd.DataFrame:
    """Share of (seed, capacity) cells where ``policy`` answers fewer questions than ``baseline``,
    for each combination of grid parameters ``x`` (columns) and ``y`` (rows)."""
    for name in (x, y):
        if name not in rows.columns:
            raise ContractError(f"{name} is not a grid parameter of this study")
    keys = ["workload", "seed", "capacity", x, y]
    wide = rows[rows["policy"].isin([policy, baseline])].pivot_table(
        index=keys, columns="policy", values="answerable_rate", aggfunc="first"
    ).reset_index()
    wide["loses"] = wide[policy] < wide[baseline]
    return wide.pivot_table(index=y, columns=x, values="loses", aggfunc="mean")


def effect_table(rows: pd.DataFrame, parameter: str, *, policy: str = "hybrid-v1", baseline: str = "confidence",
                 metric: str = "answerable_rate") -> pd.DataFrame:
    """Per value of grid parameter ``parameter`` and capacity: ``policy``'s and ``baseline``'s mean
    ``metric`` over the seeds, their paired difference and how many seeds go each way."""
    if parameter not in rows.columns:
        raise ContractError(f"{parameter} is not a grid parameter of this study")
    wide = rows[rows["policy"].isin([policy, baseline])].pivot_table(
        index=[parameter, "capacity", "workload", "seed"], columns="policy", values=metric, aggfunc="first")
    wide.columns.name = None
    wide["difference"] = wide[policy] - wide[baseline]
    grouped = wide.groupby(level=[parameter, "capacity"])
    table = grouped[[policy, baseline, "difference"]].mean()
    table["higher"], table["lower"] = grouped["difference"].apply(lambda d: (d > 0).sum()), grouped[
        "difference"].apply(lambda d: (d < 0).sum())
    table["seeds"] = grouped["difference"].count()
    return table.reset_index()
