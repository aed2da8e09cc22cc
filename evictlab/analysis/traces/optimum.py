"""The exact offline optimum: the most questions any eviction schedule can answer.

A clairvoyant memory knows every future question. It still lives under DeerMem's rules: facts
enter only when added, at most ``capacity`` facts stay after each write, and an evicted fact
never returns. Which facts should it evict, and when, to answer the most questions?

**Formulation (a min-cost flow, solved exactly with HiGHS: as a linear programme, whose
simplex vertex is integral for a flow, or as an integer programme should it not be).**
Number the writes (updates that add at least one fact) 1..W; *period* p is the time after
write p and before write p+1 (period 0 precedes the first write). A question asked in period p
is answerable when its fact is in memory then. The timeline is a chain of nodes v_0 .. v_{W+1}
and edges v_p -> v_{p+1} (period p) of capacity ``capacity``: ``capacity`` units of flow run
from v_0 to v_{W+1}, and a unit on the timeline is a free slot. A fact added at write w and
asked in distinct periods P_1 < ... < P_k (with n_1 .. n_k questions) is a private chain
c_0 -> c_1 -> ... -> c_k entered from v_w; edge c_{j-1} -> c_j earns n_j answers, and the unit
may leave from any c_j (j >= 1) back to v_{P_j + 1}, freeing the slot at the next write. A
unit inside a chain is an occupied slot, so every period's occupancy is at most the
capacity, and the chain makes a fact's stay one interval from its addition: it cannot return.
Facts nobody asks about are evicted first, for free.

Evicting more than a write requires never helps (a fact kept longer occupies a slot that is
free anyway), so the optimum over these schedules equals the optimum over DeerMem's schedules
that evict exactly the excess at each write; the tests check this against brute force on a
thousand tiny traces. The constraint matrix of a flow is totally unimodular, so the LP is
integral: HiGHS's dual simplex solves it as a linear programme, and a solution that is not
integral (which the theory rules out) is solved again as an integer programme. That fallback
never runs on a flow, so the tests solve both programmes on tiny traces against brute force.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from ...errors import ContractError
from .schema import ADD, ASK, CONFIRM, Chunk

#: A flow value farther than this from an integer means the linear programme's solution is not a vertex.
INTEGRAL_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Outline:
    """What the optimum needs from a trace: writes, when each fact arrived, every question."""

    writes: int
    fact_write: dict[str, int]  # fact id -> the write that added it
    asks: list[tuple[int, str]]  # (period, needed fact id), in trace order


def outline(chunks: Iterable[Chunk]) -> Outline:
    """Writes, fact arrivals and questions, grouped into updates as :func:`.replay.replay` does."""
    writes = 0
    fact_write: dict[str, int] = {}
    asks: list[tuple[int, str]] = []
    adds: list[str] = []
    update_time = None

    def close() -> None:
        nonlocal writes, adds
        if adds:
            writes += 1
            for fact_id in adds:
                fact_write[fact_id] = writes
            adds = []

    for chunk in chunks:
        times, events, fact_ids = chunk["time"], chunk["event"], chunk["fact_id"]
        for index in range(len(times)):
            event = events[index]
            if event in (ADD, CONFIRM):
                if times[index] != update_time:
                    close()
                update_time = times[index]
                if event == ADD:
                    adds.append(fact_ids[index])
                continue
            close()
            update_time = None
            if event == ASK:
                asks.append((writes, fact_ids[index]))
    close()
    return Outline(writes, fact_write, asks)


@dataclass(frozen=True)
class Optimum:
    capacity: int
    asks: int
    answerable: int  # by the optimum
    reachable: int  # asks whose fact was added before them (the keep-all ceiling)

    @property
    def answerable_rate(self) -> float:
        return self.answerable / self.asks if self.asks else float("nan")


def offline_optimum(trace: Outline | Iterable[Chunk], capacity: int) -> Optimum:
    """The largest number of questions any schedule can answer at ``capacity`` (exact)."""
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 0:
        raise ContractError(f"capacity must be an integer >= 0, got {capacity!r}")
    shape = trace if isinstance(trace, Outline) else outline(trace)
    if capacity == 0:  # nothing is ever kept: no flow to build
        return Optimum(0, len(shape.asks), 0, _asked_periods(shape)[1])
    flow = answer_flow(shape, capacity)
    if flow.reachable == 0:
        return Optimum(int(capacity), len(shape.asks), 0, 0)
    # The dual simplex ends on a vertex of the flow polytope, which is integral; a solution
    # that is not (which the theory rules out) is solved again as an integer programme.
    answers = most_answers_linear(flow)
    if answers is None:
        answers = most_answers_integer(flow)
    return Optimum(int(capacity), len(shape.asks), answers, flow.reachable)


@dataclass(frozen=True)
class Flow:
    """The optimum's min-cost flow: minimise ``cost @ x`` subject to ``incidence @ x == supply``
    and ``0 <= x <= upper``; minus the least cost is the most questions answered."""

    incidence: sparse.csr_matrix  # node x edge: +1 at the edge's tail, -1 at its head
    supply: np.ndarray
    cost: np.ndarray
    upper: np.ndarray
    reachable: int  # asks whose fact was added before them


def _asked_periods(shape: Outline) -> tuple[dict[str, dict[int, int]], int]:
    """Per fact, the periods it is asked in (with the number of asks), and the asks whose
    fact was added before them."""
    periods: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    reachable = 0
    for period, fact_id in shape.asks:
        added = shape.fact_write.get(fact_id)
        if added is not None and added <= period:
            periods[fact_id][period] += 1
            reachable += 1
    return periods, reachable


def answer_flow(shape: Outline, capacity: int) -> Flow:
    """The flow of the module docstring for ``shape`` at ``capacity``."""
    periods, reachable = _asked_periods(shape)
    timeline = shape.writes + 2  # nodes v_0 .. v_{W+1}
    tails: list[int] = []
    heads: list[int] = []
    costs: list[float] = []
    upper: list[float] = []

    def edge(tail: int, head: int, cost: float, bound: float) -> None:
        tails.append(tail)
        heads.append(head)
        costs.append(cost)
        upper.append(bound)

    for period in range(timeline - 1):
        edge(period, period + 1, 0.0, capacity)
    nodes = timeline
    for fact_id, counts in periods.items():
        chain = nodes
        nodes += 1 + len(counts)
        edge(shape.fact_write[fact_id], chain, 0.0, 1)
        for step, period in enumerate(sorted(counts), start=1):
            edge(chain + step - 1, chain + step, -float(counts[period]), 1)
            edge(chain + step, period + 1, 0.0, 1)
    edges = len(tails)
    incidence = sparse.coo_matrix(
        (
            np.concatenate((np.ones(edges), -np.ones(edges))),
            (np.concatenate((tails, heads)), np.concatenate((np.arange(edges), np.arange(edges)))),
        ),
        shape=(nodes, edges),
    ).tocsr()
    supply = np.zeros(nodes)
    supply[0] = capacity
    supply[timeline - 1] = -capacity
    return Flow(incidence, supply, np.array(costs), np.array(upper), reachable)


def most_answers_linear(flow: Flow) -> int | None:
    """The flow's most answers by linear programme (dual simplex); ``None`` if the solver
    fails or its solution is not integral (the caller then solves the integer programme)."""
    limits = np.column_stack((np.zeros(len(flow.cost)), flow.upper))
    result = linprog(flow.cost, A_eq=flow.incidence, b_eq=flow.supply, bounds=limits, method="highs-ds")
    if not result.success or np.abs(result.x - np.round(result.x)).max() > INTEGRAL_TOLERANCE:
        return None
    return round(-result.fun)


def most_answers_integer(flow: Flow) -> int:
    """The flow's most answers by integer programme (the fallback of :func:`offline_optimum`)."""
    result = milp(flow.cost, constraints=LinearConstraint(flow.incidence, flow.supply, flow.supply),
                  integrality=np.ones(len(flow.cost)), bounds=Bounds(np.zeros(len(flow.cost)), flow.upper))
    if not result.success:  # pragma: no cover - a feasible flow always exists (all on the timeline)
        raise RuntimeError(f"the offline optimum's flow could not be solved: {result.message}")
    return round(-result.fun)
