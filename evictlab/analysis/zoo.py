"""The policy-zoo table: every registered policy x scenario x capacity on the 45 pools.

Each (policy, case, capacity) is one decision of :func:`evictlab.policies.select` on the
case's pool, with the protocol's clock and hybrid-v1 parameters (as ``evictlab run-policy``
runs them), and the support fact ids in the context (only the ``oracle`` bound reads them).
A row records the support's retention as the tables count it (the ``retention`` column of
:func:`evictlab.selection.decisions.decide_grid`), following docs/policies.md section 1:

* **ties**: the zoo policies rank many facts equally (FIFO ties every fact created the same
  day), and breaking those ties by input position always evicts the support, which is listed
  last. So every policy but DeerMem's two reports its ``expected`` retention: the exact
  expectation over uniformly random orders of the tied facts (a fraction in [0, 1]);
  ``support_tied`` records whether the decision was settled by a tie at the cut line.
* **seeded policies** (:data:`SEEDED_POLICIES`): ``random`` reports its exact expectation
  (``k / n``, every fact tied); ``memorybank-seeded`` decides with seeded draws that have no
  closed form, so its row holds the mean over the seeds (by default
  :data:`~evictlab.policies.random_policy.RETENTION_SEEDS`, 0 to 99).
* **bounds**: ``oracle`` keeps what the question needs first (the ceiling at each capacity),
  and ``keep-all`` means infinite capacity, so it is evaluated with no limit
  (``evaluated_capacity`` = the pool size). Its rows keep the table's ``capacity`` so that
  they line up with the others.

:func:`zoo_rows` gives the tidy per-case rows, :func:`zoo_summary` the totals per policy,
scenario and capacity (plus all cases), and :func:`zoo_pivot` the policy x (capacity,
scenario) table of "retained/cases" cells for the report, with the number of tied decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from ..core.manifests import scenario_order
from ..core.pools import Case, PoolSet
from ..errors import ContractError
from ..intervals import wilson_interval
from ..policies import (
    BASELINE,
    BOUND,
    DEERMEM_POLICIES,
    PolicyParams,
    check_capacity_range,
    known_policies,
    policy_class,
)
from ..policies.random_policy import RETENTION_SEEDS
from ..selection.decisions import decide_grid, distinct, retention_counts, retention_table
from ..selection.engine import PreparedCases
from ..selection.tables import format_count

ZOO_CAPACITIES = (5, 7, 9)
# The lists below are read from the traits each policy file declares (evictlab.policies.base).
#: Policies whose decision depends on ``SelectionContext.seed``; reported as a mean over seeds.
#: A test checks that every other registered policy decides the same under any seed.
SEEDED_POLICIES = tuple(name for name in known_policies() if policy_class(name).seeded)
#: Reference points that are not deployable policies: those that respect the capacity first.
BOUND_POLICIES = tuple(
    sorted((name for name in known_policies() if policy_class(name).role == BOUND),
           key=lambda name: (policy_class(name).unlimited, name))
)
#: The bounds evaluated with no capacity limit.
UNLIMITED_POLICIES = tuple(name for name in known_policies() if policy_class(name).unlimited)
#: The floors: a uniformly random subset.
BASELINE_POLICIES = tuple(name for name in known_policies() if policy_class(name).role == BASELINE)
#: The table's roles: DeerMem's two policies, the other deployable ones, baselines and bounds.
ROLES = ("deermem", "zoo", BASELINE, BOUND)
ALL_CASES = "all cases"

ROW_COLUMNS = (
    "policy", "role", "case_id", "source", "scenario", "capacity", "evaluated_capacity", "seeds",
    "tie_break", "support_retained", "support_tied",
)  # fmt: skip
SUMMARY_COLUMNS = (
    "policy", "role", "scenario", "capacity", "retained", "cases", "retained_rate", "wilson_lower",
    "wilson_upper", "seeds", "ties",
)  # fmt: skip
#: The column of :func:`zoo_pivot` that counts the decisions a tie at the cut line settled.
TIES_COLUMN = "tied"


def policy_role(policy: str) -> str:
    """``deermem`` (confidence, hybrid-v1), ``baseline`` (random), ``bound`` (oracle, keep-all) or ``zoo``."""
    if policy in DEERMEM_POLICIES:
        return "deermem"
    if policy in BASELINE_POLICIES:
        return "baseline"
    if policy in BOUND_POLICIES:
        return "bound"
    return "zoo"


def zoo_order(policies: Iterable[str]) -> list[str]:
    """Table order: DeerMem's two policies, the zoo by name, the random floor, then the bounds."""
    distinct = list(dict.fromkeys(policies))
    head = [p for p in DEERMEM_POLICIES if p in distinct]
    tail = [p for p in (*BASELINE_POLICIES, *BOUND_POLICIES) if p in distinct]
    return head + sorted(p for p in distinct if p not in head and p not in tail) + tail


def zoo_rows(
    pool_set: PoolSet, policies: Sequence[str] | None = None, capacities: Sequence[int] = ZOO_CAPACITIES, *,
    seeds: Iterable[int] = RETENTION_SEEDS, params: PolicyParams | None = None,
) -> pd.DataFrame:
    """One row per policy x case x capacity (columns :data:`ROW_COLUMNS`, policies in :func:`zoo_order`).

    ``policies`` defaults to every registered policy; ``params`` to the protocol's hybrid-v1
    parameters; ``seeds`` are the seeds ``memorybank-seeded`` is averaged over.
    ``support_retained`` is the retention under the policy's tie-break (a probability for
    ``expected``, a seed mean for a seeded policy), ``support_tied`` whether (the share of
    seeds in which) a tie at the cut line settled it.
    """
    names = zoo_order(known_policies() if policies is None else policies)
    if not names:
        raise ContractError("no policies to evaluate")
    known = set(known_policies())
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ContractError(f"unknown policy {unknown[0]!r}; known policies: {', '.join(sorted(known))}")
    capacities = distinct("capacities", check_capacity_range(capacities, low=1))
    seed_list = list(seeds)
    if not seed_list:
        raise ContractError("no seeds to average the seeded policies over")
    params = params or pool_set.protocol.config.hybrid
    prepared = PreparedCases.from_pool_set(pool_set)
    widest = int(prepared.sizes.max())
    # random's expectation is exact (every fact tied), so only memorybank-seeded needs seeds.
    averaged = [p for p in names if p in SEEDED_POLICIES and not policy_class(p).uniform_order]
    groups = (
        # (policies, the capacities they are decided at, seeds)
        ([p for p in names if p not in averaged and p not in UNLIMITED_POLICIES], capacities, [0]),
        (averaged, capacities, seed_list),
        ([p for p in names if p in UNLIMITED_POLICIES], (widest,), [0]),
    )
    decisions = [decide_grid(prepared, chosen, [params], caps, seeds) for chosen, caps, seeds in groups if chosen]
    per_case = pd.concat(
        [retention_counts(frame, ["policy", "case_id", "source", "scenario", "capacity"]) for frame in decisions],
        ignore_index=True,
    )
    sizes = {case.case_id: len(case.facts) for case in pool_set.cases}
    unlimited = per_case["policy"].isin(UNLIMITED_POLICIES)
    # keep-all is decided once, without a cap, and shown at every capacity of the table.
    spread = [per_case[unlimited].assign(capacity=capacity) for capacity in capacities]
    rows = pd.concat([per_case[~unlimited], *spread], ignore_index=True)
    rows["evaluated_capacity"] = np.where(
        rows["policy"].isin(UNLIMITED_POLICIES), rows["case_id"].map(sizes), rows["capacity"]
    ).astype(np.int64)
    rows["role"] = rows["policy"].map(policy_role)
    rows["tie_break"] = rows["policy"].map(lambda name: policy_class(name).default_tie_break)
    rows["support_retained"] = rows["retained"].astype(np.float64)
    rows["support_tied"] = rows["ties"].astype(np.float64)
    case_order = {case.case_id: index for index, case in enumerate(pool_set.cases)}
    rows = rows.sort_values(
        ["policy", "case_id", "capacity"],
        key=lambda column: column.map(
            {"policy": {name: i for i, name in enumerate(names)}, "case_id": case_order}.get(
                column.name, {c: i for i, c in enumerate(capacities)}
            )
        ),
        kind="stable",
    )
    return rows[list(ROW_COLUMNS)].reset_index(drop=True)


def first_evicted_case(
    pool_set: PoolSet, policy: str, capacity: int, *, params: PolicyParams | None = None, seed: int = 0
) -> Case | None:
    """The first case, in build order, whose support ``policy`` evicts at ``capacity``; None if none is.

    Decided as :func:`zoo_rows` decides (protocol clock, ``params`` defaulting to the
    protocol's), at one ``seed``.
    """
    decisions = decide_grid(pool_set, [policy], [params or pool_set.protocol.config.hybrid], [capacity], [seed])
    evicted = decisions.loc[~decisions["support_retained"].to_numpy(dtype=bool), "case_id"]
    return pool_set.case(str(evicted.iloc[0])) if len(evicted) else None


def zoo_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Support retained per policy x scenario x capacity, and over all cases (columns :data:`SUMMARY_COLUMNS`).

    ``retained`` sums ``support_retained`` (a float: expected counts), ``ties`` sums
    ``support_tied`` (decisions settled by a tie at the cut line), ``wilson_lower`` and
    ``wilson_upper`` bound the 95% Wilson interval of the rate, ``seeds`` is the number of
    seeds behind each decision (1 for a deterministic policy);
    rows come policy by policy in the rows' order, scenarios in protocol order then
    :data:`ALL_CASES`, capacities ascending.
    """
    missing = [column for column in ("policy", "role", "scenario", "capacity", "seeds", "support_retained")
               if column not in rows.columns]
    if missing:
        raise ContractError(f"zoo_summary needs columns {', '.join(missing)}")
    scenarios = scenario_order(rows["scenario"])
    policies = list(dict.fromkeys(rows["policy"]))
    counts = retention_counts(rows, ["policy", "scenario", "capacity"], total=ALL_CASES)
    order = {"policy": policies, "scenario": [*scenarios, ALL_CASES]}
    counts = counts.sort_values(
        ["policy", "scenario", "capacity"],
        key=lambda column: (
            column.map({v: i for i, v in enumerate(order[column.name])}) if column.name in order else column
        ),
        kind="stable",
    )
    roles = rows.drop_duplicates("policy").set_index("policy")["role"]
    summary = counts.assign(
        role=counts["policy"].map(roles),
        retained=counts["retained"].astype(np.float64),
        capacity=counts["capacity"].astype(np.int64),
    )
    summary["retained_rate"] = summary["retained"] / summary["cases"]
    bounds = [wilson_interval(r, int(c)) for r, c in zip(summary["retained"], summary["cases"])]
    summary["wilson_lower"] = [low for low, _ in bounds]
    summary["wilson_upper"] = [high for _, high in bounds]
    summary["ties"] = summary["ties"].astype(np.float64)
    return summary[list(SUMMARY_COLUMNS)].reset_index(drop=True)


def zoo_pivot(summary: pd.DataFrame, *, scenarios: bool = True, intervals: bool = False) -> pd.DataFrame:
    """Policies (rows, in the summary's order) x (capacity, scenario) of ``"retained/cases"`` cells.

    Each capacity ends with a :data:`TIES_COLUMN` column: the decisions (over all cases) that a
    tie at the cut line settled. With ``scenarios=False`` only the all-cases totals, one column
    per capacity, each cell followed by ``" (n tied)"`` when n > 0. Whole counts are printed as
    integers, expected counts with one decimal; ``intervals`` adds the Wilson interval in
    percent after each count (``"27/45 [45.5, 73.0]"``).
    """
    shown = summary if scenarios else summary[summary["scenario"] == ALL_CASES]
    columns = ["capacity", "scenario"] if scenarios else "capacity"
    table = retention_table(shown, "policy", columns, sort_columns_by="capacity", intervals=intervals)
    table.index.name = "policy"
    totals = summary[summary["scenario"] == ALL_CASES]
    ties = {(p, c): t for p, c, t in zip(totals["policy"], totals["capacity"], totals["ties"])}
    capacities = sorted(set(shown["capacity"]))
    if not scenarios:
        for capacity in capacities:
            table[capacity] = [
                cell + (f" ({format_count(ties[p, capacity])} tied)" if ties.get((p, capacity), 0) else "")
                for p, cell in zip(table.index, table[capacity])
            ]
        return table
    for capacity in capacities:
        table[(capacity, TIES_COLUMN)] = [format_count(ties.get((p, capacity), 0.0)) for p in table.index]
    order = [key for capacity in capacities for key in table.columns if key[0] == capacity]
    return table[order]


def seeded_distribution(
    pool_set: PoolSet, policy: str = "random", capacities: Sequence[int] = ZOO_CAPACITIES, *,
    seeds: Iterable[int] = RETENTION_SEEDS, params: PolicyParams | None = None,
) -> pd.DataFrame:
    """Support retained over all cases by single seeded draws: one row per seed x capacity.

    Columns ``policy``, ``capacity``, ``seed``, ``retained``, ``cases``. The tables report a
    seeded policy's expectation; this is the spread one draw of it has around that value.
    """
    capacities = distinct("capacities", check_capacity_range(capacities, low=1))
    params = params or pool_set.protocol.config.hybrid
    decisions = decide_grid(pool_set, [policy], [params], capacities, list(seeds))
    counts = decisions.groupby(["capacity", "seed"], sort=True, observed=True)["support_retained"].agg(["sum", "size"])
    return pd.DataFrame(
        {
            "policy": policy,
            "capacity": counts.index.get_level_values("capacity").astype(np.int64),
            "seed": counts.index.get_level_values("seed").astype(np.int64),
            "retained": counts["sum"].to_numpy(dtype=np.int64),
            "cases": counts["size"].to_numpy(dtype=np.int64),
        }
    )


__all__ = [
    "ALL_CASES",
    "BOUND_POLICIES",
    "ROLES",
    "SEEDED_POLICIES",
    "ZOO_CAPACITIES",
    "first_evicted_case",
    "policy_role",
    "seeded_distribution",
    "zoo_order",
    "zoo_pivot",
    "zoo_rows",
    "zoo_summary",
]
