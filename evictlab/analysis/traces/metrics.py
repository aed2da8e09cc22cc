"""Capacity curves: every policy at every capacity on one or more traces, with the two bounds.

:func:`curve_rows` replays each trace through each policy at each capacity and adds the
bound rows per (trace, capacity): ``optimum`` (the exact offline optimum, answerable rate
only), ``rate-aware`` (:data:`RATE_AWARE`, a bound a real system could approach) and every
policy whose ``unlimited`` trait says it runs with no cap (``keep-all``). Every row carries its
policy's ``role`` trait (``policy``, ``baseline`` or ``bound``), ``regret`` = the optimum's
answerable rate minus the row's and ``regret_rate_aware`` = the rate-aware bound's minus the
row's. The two sides are not measured alike: the bounds count the needed fact in memory (the
optimum replays no stage, the rate-aware bound only :data:`RATE_AWARE_STAGES`), a row under its
stages (with ``injection``: shown to the model), so a regret also counts what those stages lose.
:func:`curve_summary` averages
over traces (seeds) with a 95 % percentile-bootstrap interval per metric; with one trace the
interval is empty (NaN), not zero. Paired findings over seeds are :mod:`.inference`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from ...distributed import Placement, dask_client, run_tasks
from ...errors import ContractError
from ...policies import BOUND, PolicyParams, known_policies, resolve_policy
from .inference import bootstrap_interval
from .lifecycle import DAY_US, DEFAULT_STAGES
from .memory import MemorySpec, check_capacities, check_policy_spec, replayable, root_policy, uncapped
from .optimum import MAX_OPTIMUM_ARCS, network, offline_optima, outline
from .replay import replay_specs
from .schema import Chunk

DEFAULT_CAPACITIES = (10, 20, 50, 100, 200, 500)
#: The exact offline optimum's rows (:mod:`.optimum`): a bound, but not a registered policy.
OPTIMUM = "optimum"
#: The second bound: a memory that knows each fact's expected ask rate under the generator's model
#: (the trace's ``ask_rate`` and ``ask_decay_days``) but no question, and keeps the facts whose topics
#: it expects to be asked about most now: ``confidence``'s rule on a trace whose confidences rank by
#: that rate, with only the ``contradiction`` stage (a system knows a fact was superseded). A trace
#: without the columns (an import, a knowledge-update trace) or whose adds carry different
#: ``ask_decay_days`` (no one order of the rates) has no such rows (:func:`rate_keys`).
RATE_AWARE, SECOND_BOUND = "rate-aware", "confidence"
METRICS = (
    "answerable_rate",
    "stale_kept_rate",
    "correction_survival",
    "evictions_per_event",
    "arrival_eviction_rate",
    "churn_per_event",
    "mean_occupancy",
    "occupancy_fraction",
    "regret",
    "regret_rate_aware",
    "tied_selection_rate",
    "answerable_expected",
)

#: The rate-aware bound's one lifecycle stage, and the columns a curve gathers on its first pass.
RATE_AWARE_STAGES = frozenset({"contradiction"})
GATHERED = ("event", "time", "fact_id", "ask_rate", "ask_decay_days")

TraceSource = Callable[[], Iterable[Chunk]]
#: Events x replays (policy x capacity x trace) a curve or study may run; ``--max-event-replays`` raises it.
MAX_EVENT_REPLAYS = 500_000_000


def check_replay_work(events: float, replays: int, max_event_replays: int = MAX_EVENT_REPLAYS) -> None:
    """Refuse a run of ``replays`` replays of ``events`` events each above ``max_event_replays``."""
    work = events * replays
    if work > max_event_replays:
        raise ContractError(
            f"the run would replay about {work:,.0f} events ({replays:,} replays of about {events:,.0f} events),"
            f" over the limit of {max_event_replays:,}; use fewer seeds, policies or capacities, or pass"
            f" --max-event-replays {math.ceil(work)}"
        )


def default_policies() -> list[str]:
    """Every registered policy the replay can run under a cap, plus one modifier example."""
    names = [name for name in known_policies() if replayable(name) and not uncapped(name)]
    return [*names, "confidence+reserve(correction,0.1,10)"]


def uncapped_bounds() -> list[str]:
    """The registered policies meant to run with no capacity limit (``keep-all``): the ceiling."""
    return [name for name in known_policies() if uncapped(name)]


def role_of(policy: str) -> str:
    """``policy``, ``baseline`` or ``bound``: the ``role`` trait of the policy under any modifiers."""
    return BOUND if policy in (OPTIMUM, RATE_AWARE) else root_policy(resolve_policy(policy)).role


def curve_rows(
    traces: Sequence[tuple[str, TraceSource]],
    policies: Sequence[str],
    capacities: Sequence[int] = DEFAULT_CAPACITIES,
    params: PolicyParams | None = None,
    *,
    progress: Callable[[str, int], None] | None = None,
    max_optimum_arcs: int = MAX_OPTIMUM_ARCS,
    lifecycle: frozenset[str] = DEFAULT_STAGES,
    placement: Placement | None = None,
) -> pd.DataFrame:
    """One row per (trace, policy, capacity), plus the bound rows per (trace, capacity).

    ``lifecycle`` names the DeerMem stages every memory runs (:func:`.replay.replay_specs`:
    DeerMem's middleware mode by default, ``frozenset()`` the cap alone; the optimum knows
    nothing of them: it is the cap's bound).

    The bounds are the exact optimum and every uncapped policy (:func:`uncapped_bounds`,
    replayed once per trace and shown at every capacity); ``role`` holds each row's role.
    ``traces`` are ``(name, source)`` pairs; ``source()`` yields the trace's chunks and is
    called twice per trace when it carries ask rates: every memory (policy x capacity) is
    replayed in lockstep in one pass, which also gathers the optimum's outline and the facts'
    rates, and the rate-aware bound in a second (so a large trace file is streamed, never held
    whole). ``progress(trace, events)`` is called as the pass goes (events done so far).

    ``placement``: where the traces run. In this process by default; with Dask workers each
    trace is one task, or, when the traces are fewer than the workers, each trace's policies are
    shared out over as many tasks as there are workers per trace (contiguous runs of the policy
    list; the first also replays the bounds). A source must then be picklable and its file
    readable by the workers; ``progress`` is not called, a bar counts the tasks done (shown when
    ``progress`` is given and standard error is a terminal), and the rows are the same.
    """
    capacities = check_capacities(capacities)
    policies = replayed_policies(policies)
    job = partial(_trace_rows, capacities=capacities, params=params, max_optimum_arcs=max_optimum_arcs,
                  lifecycle=lifecycle)
    if placement is not None and runs_as_tasks(placement, traces, policies):
        with dask_client(placement) as client:
            workers = placement.workers if placement.scheduler is None else len(client.scheduler_info()["workers"])
            parts = _shares(policies, -(-max(1, workers) // len(traces)))
            items = [(trace, part, index == 0) for trace in traces for index, part in enumerate(parts)]
            found = run_tasks(client, job, items, progress=None if progress else False, description="replays")
        found = [_merged(found[index : index + len(parts)]) for index in range(0, len(found), len(parts))]
    else:
        report = progress or (lambda trace, events: None)
        found = [job((trace, policies, True), report=partial(report, trace[0])) for trace in traces]
    frame = pd.DataFrame([row for rows in found for row in _with_regret(rows)])
    leading = ["trace", "policy", "role", "capacity"]
    return frame[leading + [column for column in frame.columns if column not in leading]]


def replayed_policies(policies: Sequence[str]) -> list[str]:
    """The capped policies of a curve: ``policies`` checked, without the bounds every curve has."""
    ceilings = uncapped_bounds()
    return [check_policy_spec(policy) for policy in policies if policy != OPTIMUM and policy not in ceilings]


def runs_as_tasks(placement: Placement | None, traces: Sequence[Any], policies: Sequence[str]) -> bool:
    """Whether :func:`curve_rows` runs as Dask tasks: a placement with workers or a scheduler, and
    more than one trace or more than one policy to share out (else it runs in this process)."""
    return placement is not None and not placement.in_process and (len(traces) > 1 or len(policies) > 1)


def _shares(policies: Sequence[str], count: int) -> list[list[str]]:
    """``policies`` in at most ``count`` contiguous runs of about one length; the bounds, about
    as costly as two policies, count as two in the first run."""
    count = max(1, min(count, len(policies)))
    shares: list[list[str]] = [[] for _ in range(count)]
    for done, policy in enumerate(policies, start=2):
        shares[done * count // (len(policies) + 2)].append(policy)
    return [share for index, share in enumerate(shares) if share or index == 0]


def _merged(parts: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One trace's rows from the rows of its shares, in the order one task gives them: capacity
    by capacity, each share's rows in share order."""
    capacities = list(dict.fromkeys(row["capacity"] for row in parts[0]))
    return [row for capacity in capacities for rows in parts for row in rows if row["capacity"] == capacity]


def _with_regret(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` of one trace with each row's regret against the optimum and the rate-aware bound
    at its capacity (NaN without a rate-aware row)."""
    best = {row["capacity"]: row["answerable_rate"] for row in rows if row["policy"] == OPTIMUM}
    aware = {row["capacity"]: row["answerable_rate"] for row in rows if row["policy"] == RATE_AWARE}
    for row in rows:
        row["regret"] = best[row["capacity"]] - row["answerable_rate"]
        row["regret_rate_aware"] = aware.get(row["capacity"], math.nan) - row["answerable_rate"]
    return rows


def _trace_rows(item: tuple[tuple[str, TraceSource], Sequence[str], bool], *, capacities: tuple[int, ...],
                params: PolicyParams | None, max_optimum_arcs: int, lifecycle: frozenset[str],
                report: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """:func:`curve_rows`' rows of one trace for some policies at every capacity, and with
    ``bounds`` the bound rows (the optimum, the rate-aware bound, every uncapped policy), without
    the regret columns (:func:`_with_regret` adds them once a trace's rows are together)."""
    (trace_name, source), policies, bounds = item
    ceilings = uncapped_bounds() if bounds else []
    specs = [MemorySpec.of(policy, None) for policy in ceilings]
    specs += [MemorySpec.of(policy, capacity) for policy in policies for capacity in capacities]
    roles = {policy: role_of(policy) for policy in (OPTIMUM, RATE_AWARE, *ceilings, *policies)}
    seen: dict[str, list[Any]] = {name: [] for name in GATHERED}
    results = replay_specs(_gathering(source(), seen) if bounds else source(), specs, params, on_events=report,
                           lifecycle=lifecycle)
    optima = {}
    if bounds:
        optima = dict(zip(capacities, offline_optima(network(outline([seen]), max_optimum_arcs), capacities)))
    keys = rate_keys(seen) if bounds else None
    rated = [] if keys is None else replay_specs(
        _rate_keyed(source(), keys), [MemorySpec.of(SECOND_BOUND, capacity) for capacity in capacities], params,
        lifecycle=RATE_AWARE_STAGES)
    uncapped_rows = [result.row() for result in results[: len(ceilings)]]
    rows: list[dict[str, Any]] = []
    for index, capacity in enumerate(capacities):
        found: list[dict[str, Any]] = []
        if bounds:
            best = optima[capacity]
            limits = [(OPTIMUM, best.asks, best.answerable)]
            limits += [(RATE_AWARE, aware.counts.asks, aware.counts.answerable) for aware in rated[index : index + 1]]
            found += [{"policy": name, "capacity": capacity, "asks": asks, "answerable": answered,
                       "answerable_rate": answered / asks if asks else math.nan} for name, asks, answered in limits]
        found += [{**row, "capacity": capacity, "occupancy_fraction": math.nan} for row in uncapped_rows]
        found += [result.row() for result in results[len(ceilings) :] if result.capacity == capacity]
        for row in found:
            row["trace"] = trace_name
            row["role"] = roles[row["policy"]]
            rows.append(row)
    return rows


#: Rate-aware keys closer than this tie (log units: rates within a relative 10^-9). Versions of one
#: topic have equal keys in exact arithmetic; rounding alone separates them by about 10^-13.
KEY_TOLERANCE = 1e-9


def rate_keys(seen: dict[str, list[Any]]) -> dict[str, float] | None:
    """Each added fact's rank under the rate-aware bound, in (0, 1], or ``None`` when there is no
    one order: a fact without a rate, or adds with different ``ask_decay_days``.

    At time ``t`` a fact's expected rate is ``ask_rate * exp(-(t - added) / ask_decay_days)``; its
    logarithm minus the common ``-(t - first) / ask_decay_days`` (``first``: the first add) is the
    static key ``log(ask_rate) + (added - first) / ask_decay_days`` (days), so one order serves every
    write; with two decays the order of the current rates changes over time. Keys within
    :data:`KEY_TOLERANCE` of the next lower one tie (versions of one topic), and a tie goes to the
    later fact. The ranks over the highest are the confidences ``confidence`` keeps by.
    """
    add = np.asarray(seen["event"], dtype=object) == "add"
    rate, decay = (np.asarray(seen[name], dtype=object)[add] for name in ("ask_rate", "ask_decay_days"))
    if not add.any() or any(value is None for value in (*rate, *decay)) or len(set(decay)) > 1:
        return None
    time = np.asarray(seen["time"], dtype=np.int64)[add]
    with np.errstate(divide="ignore"):  # a rate of 0 is the lowest key, -inf
        key = np.log(rate.astype(float)) + (time - time[0]) / DAY_US / float(decay[0])
    index = np.arange(len(key))
    by_key = np.lexsort((index, key))
    steps = np.diff(key[by_key]) > KEY_TOLERANCE  # False between -inf and -inf (NaN): one tie
    tie = np.empty(len(key), dtype=np.int64)
    tie[by_key] = np.concatenate(([0], np.cumsum(steps)))
    order = np.lexsort((index, tie))
    ids = np.asarray(seen["fact_id"], dtype=object)[add][order].tolist()
    return dict(zip(ids, ((index + 1) / len(key)).tolist()))


def _rate_keyed(chunks: Iterable[Chunk], keys: dict[str, float]) -> Iterator[Chunk]:
    """``chunks`` with each ``add``'s confidence replaced by its rank under the rate-aware bound."""
    for chunk in chunks:
        yield {**chunk, "confidence": [keys[fact_id] if kind == "add" else None
                                       for kind, fact_id in zip(chunk["event"], chunk["fact_id"])]}


def _gathering(chunks: Iterable[Chunk], seen: dict[str, list[Any]]) -> Iterator[Chunk]:
    """``chunks``, appending their :data:`GATHERED` columns to ``seen`` (the optimum's outline, the rates)."""
    for chunk in chunks:
        for name, values in seen.items():
            values += chunk[name]
        yield chunk


def curve_summary(rows: pd.DataFrame, metrics: Sequence[str] = METRICS) -> pd.DataFrame:
    """Mean, 95 % bootstrap interval over traces and trace count per (policy, capacity)."""
    records = []
    for (policy, capacity), group in rows.groupby(["policy", "capacity"], sort=False):
        record: dict[str, Any] = {"policy": policy, "capacity": capacity, "traces": group["trace"].nunique()}
        for metric in metrics:
            values = group[metric].dropna().to_numpy(dtype=float) if metric in group else np.array([])
            mean, low, high = mean_interval(values)
            record.update({metric: mean, f"{metric}_low": low, f"{metric}_high": high})
        records.append(record)
    return pd.DataFrame(records)


def mean_interval(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95 % percentile-bootstrap interval of the mean (inside the values' range, so a
    rate's band stays inside [0, 1]); NaN bounds with fewer than two values."""
    if len(values) == 0:
        return math.nan, math.nan, math.nan
    return (float(values.mean()), *bootstrap_interval(values))


def curve_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Answerable rate and regret as text, ``"0.412 (+0.120)"``, per policy (rows) and capacity
    (regret: the optimum's rate, fact in memory, minus the row's, under its stages)."""
    cells = summary.assign(
        cell=summary["answerable_rate"].map("{:.3f}".format) + " (" + summary["regret"].map("{:+.3f}".format) + ")"
    )
    table = cells.pivot(index="policy", columns="capacity", values="cell")
    table = table.reindex(list(dict.fromkeys(cells["policy"])))
    table.index.name, table.columns.name = None, None
    table.columns = [f"capacity {capacity}" for capacity in table.columns]
    return table
