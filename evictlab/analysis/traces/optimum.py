"""The exact offline optimum: the most questions any eviction schedule can answer.

A clairvoyant memory knows every future question. It still lives under DeerMem's rules: facts
enter only when added, at most ``capacity`` facts stay after each write, and an evicted fact
never returns. Which facts should it evict, and when, to answer the most questions?

**Formulation: a min-cost flow along the timeline**, solved exactly by successive shortest
paths (:func:`most_answers`; a generic linear programme took 69 s at 10^6 events, OR-Tools'
cost-scaling solver 240 s on that long chain, this 3 s at capacity 10). Number the writes
(updates that add at least one fact) 1..W; *period* p is the time after write p and before
write p+1 (period 0 precedes the first write). A question asked in period p is answerable when
its fact is in memory then. The timeline is a chain of nodes v_0 .. v_{W+1} and edges v_p ->
v_{p+1} (period p) of capacity ``capacity``: ``capacity`` units of flow run from v_0 to
v_{W+1}, and a unit on the timeline is a free slot. A fact added at write w and asked in
distinct periods P_1 < ... < P_k (with n_1 .. n_k questions) is a private chain c_1 -> ... ->
c_k entered from v_w by an edge that earns n_1 answers; edge c_{j-1} -> c_j earns n_j, and the
unit may leave from any c_j back to v_{P_j + 1}, freeing the slot at the next write. A unit
inside a chain is an occupied slot, so every period's occupancy is at most the capacity, and
the chain makes a fact's stay one interval from its addition: it cannot return. Facts nobody
asks about are evicted first, for free. Every edge but the timeline's carries at most one unit;
costs are minus the answers, so minus the least cost is the most questions answered (flows on
integer capacities have integral optima, and augmenting one unit at a time finds one).

Evicting more than a write requires never helps (a fact kept longer occupies a slot that is
free anyway), so the optimum over these schedules equals the optimum over DeerMem's schedules
that evict exactly the excess at each write; the tests check this against brute force on a
thousand tiny traces and against a linear programme of the same flow.

The network has ``W + 1 + 2 * (distinct (fact, period) pairs asked)`` arcs; a trace whose
network exceeds :data:`MAX_OPTIMUM_ARCS` is refused before it is built (``max_arcs`` raises it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.sparse.csgraph import dijkstra

from ...errors import ContractError
from .schema import ADD, ASK, Chunk, Updates

#: Arcs of the flow network above which the optimum is refused (about 1.5 GiB of solver state).
MAX_OPTIMUM_ARCS = 20_000_000


@dataclass(frozen=True)
class Outline:
    """What the optimum needs from a trace: writes, when each fact arrived, every question.

    Facts are numbered ``0..len(fact_ids)-1`` (added facts first, in order of addition, then
    facts only asked about); ``fact_write[f]`` is the write that added fact ``f`` (0: never
    added); ``ask_period[i]`` and ``ask_fact[i]`` are question ``i``'s period and fact.
    """

    writes: int
    fact_ids: tuple[str, ...]
    fact_write: np.ndarray
    ask_period: np.ndarray
    ask_fact: np.ndarray

    @property
    def asks(self) -> int:
        return len(self.ask_period)


def outline(chunks: Iterable[Chunk]) -> Outline:
    """Writes, fact arrivals and questions, the rows grouped into updates by :class:`.schema.Updates`
    (as :func:`.replay.replay` groups them). An update is a write when it adds a fact. A
    question's period is the number of writes before it.
    """
    updates = Updates()
    numbers: list[np.ndarray] = []
    events: list[str] = []
    ids: list[str | None] = []
    for chunk in chunks:
        numbers.append(updates.numbers(chunk))
        events += chunk["event"]
        ids += chunk["fact_id"]
    event = np.array(events, dtype=object)
    update = np.concatenate(numbers) if numbers else np.zeros(0, dtype=np.int64)
    is_add, is_ask = event == ADD, event == ASK
    writing = np.zeros(updates.begun + 1, dtype=bool)
    writing[update[is_add]] = True
    write_of_update = np.cumsum(writing)  # the write number of each writing update
    # Writes begun before each row: those of the latest update begun (a question closes it).
    begun = write_of_update[np.maximum.accumulate(update)]
    fact_ids = np.array(ids, dtype=object)
    codes, names = pd.factorize(np.concatenate((fact_ids[is_add], fact_ids[is_ask])))
    added = int(is_add.sum())
    fact_write = np.zeros(len(names), dtype=np.int64)
    fact_write[codes[:added]] = write_of_update[update[is_add]]
    return Outline(
        writes=int(writing.sum()),
        fact_ids=tuple(names),
        fact_write=fact_write,
        ask_period=begun[is_ask].astype(np.int64),
        ask_fact=codes[added:].astype(np.int64),
    )


@dataclass(frozen=True)
class Optimum:
    capacity: int
    asks: int
    answerable: int  # by the optimum
    reachable: int  # asks whose fact was added before them (the keep-all ceiling)

    @property
    def answerable_rate(self) -> float:
        return self.answerable / self.asks if self.asks else float("nan")


@dataclass(frozen=True)
class Network:
    """The flow of the module docstring without its capacity: arcs and the answers each earns."""

    nodes: int
    tails: np.ndarray
    heads: np.ndarray
    answers: np.ndarray  # per arc: questions answered by a unit on it (0 on timeline and exit arcs)
    timeline: int  # the first ``timeline`` arcs are the timeline's, v_0 -> v_1 .. v_W -> v_{W+1}
    asks: int
    reachable: int  # asks whose fact was added before them
    level: np.ndarray  # per node: p for timeline node v_p, P + 1 for a chain node of period P

    def feasible_potential(self) -> np.ndarray:
        """Node potentials under which every arc's reduced cost is >= 0 (see :func:`most_answers`)."""
        periods = np.zeros(self.timeline + 1, dtype=np.int64)
        np.add.at(periods, self.level[self.heads[self.answers > 0]] - 1, self.answers[self.answers > 0])
        before = np.concatenate(([0], np.cumsum(periods)))  # answers of periods < p
        return -before[self.level].astype(np.float64)

    def capacities(self, capacity: int) -> np.ndarray:
        caps = np.ones(len(self.tails), dtype=np.int64)
        caps[: self.timeline] = capacity
        return caps


def network_arcs(shape: Outline) -> int:
    """The number of arcs :func:`network` builds, counted without building it."""
    reachable = _reachable(shape)
    pairs = len(np.unique(shape.ask_fact[reachable] * (shape.writes + 1) + shape.ask_period[reachable]))
    return shape.writes + 1 + 2 * pairs


def _reachable(shape: Outline) -> np.ndarray:
    written = shape.fact_write[shape.ask_fact]
    return (written > 0) & (written <= shape.ask_period)


def network(shape: Outline, max_arcs: int = MAX_OPTIMUM_ARCS) -> Network:
    """The optimum's flow network for ``shape``; refused above ``max_arcs`` arcs."""
    arcs = network_arcs(shape)
    if arcs > max_arcs:
        raise ContractError(
            f"the exact optimum's flow network has {arcs:,} arcs, over the limit of {max_arcs:,}"
            f" (about 80 bytes each); pass --max-optimum-arcs {arcs} to solve it"
        )
    reachable = _reachable(shape)
    periods = shape.writes + 1
    keys, counts = np.unique(shape.ask_fact[reachable] * periods + shape.ask_period[reachable], return_counts=True)
    fact, period = keys // periods, keys % periods
    first = np.concatenate(([True], fact[1:] != fact[:-1])) if len(keys) else np.zeros(0, dtype=bool)
    timeline = shape.writes + 1
    chain = timeline + 1 + np.arange(len(keys))  # node c of each (fact, period) pair
    entry = np.where(first, shape.fact_write[fact], chain - 1)
    tails = np.concatenate((np.arange(timeline), entry, chain))
    heads = np.concatenate((np.arange(1, timeline + 1), chain, period + 1))
    answers = np.concatenate((np.zeros(timeline, dtype=np.int64), counts, np.zeros(len(keys), dtype=np.int64)))
    level = np.concatenate((np.arange(timeline + 1), period + 1))
    return Network(timeline + 1 + len(keys), tails, heads, answers, timeline, shape.asks, int(reachable.sum()), level)


def most_answers(flow: Network, capacities: Sequence[int]) -> dict[int, int]:
    """The most questions each capacity's slots can answer: successive shortest paths.

    Each augmentation sends one more slot along the cheapest path of the residual network
    (Dijkstra on reduced costs, scipy's C implementation), so after ``k`` augmentations the flow
    is a least-cost flow of value ``k``: one run gives every capacity, stopping when no path
    earns an answer (the remaining slots stay free on the timeline). The starting potentials
    are minus the answers of all earlier periods, under which every arc's reduced cost is >= 0;
    after each run a node's potential grows by its distance (capped at the sink's), which
    keeps them so. Costs and potentials are integers, exact in doubles.
    """
    nodes, arcs = flow.nodes, len(flow.tails)
    sink, top = flow.timeline, max(capacities)
    tails = np.concatenate((flow.tails, flow.heads))  # residual arcs: forward, then backward
    heads = np.concatenate((flow.heads, flow.tails))
    cost = np.concatenate((-flow.answers, flow.answers)).astype(np.float64)
    residual = np.concatenate((flow.capacities(top), np.zeros(arcs, dtype=np.int64)))
    by_tail = np.argsort(tails, kind="stable")
    keys = tails * nodes + heads  # no two residual arcs join the same pair of nodes
    by_key = np.argsort(keys)
    sorted_keys = keys[by_key]
    potential = flow.feasible_potential()
    earned = [0]
    while len(earned) <= top:
        usable = by_tail[residual[by_tail] > 0]
        reduced = cost[usable] + potential[tails[usable]] - potential[heads[usable]]
        pointers = np.concatenate(([0], np.cumsum(np.bincount(tails[usable], minlength=nodes))))
        graph = sparse.csr_matrix((reduced, heads[usable], pointers), shape=(nodes, nodes))
        distance, previous = dijkstra(graph, indices=0, return_predecessors=True)
        path_cost = distance[sink] - potential[0] + potential[sink]
        if not path_cost < 0:  # no path earns an answer: more slots change nothing
            break
        path = [sink]
        while path[-1] != 0:
            path.append(int(previous[path[-1]]))
        route = np.array(path[::-1], dtype=np.int64)
        used = by_key[np.searchsorted(sorted_keys, route[:-1] * nodes + route[1:])]
        residual[used] -= 1
        residual[(used + arcs) % (2 * arcs)] += 1
        earned.append(earned[-1] - round(path_cost))
        potential += np.minimum(distance, distance[sink])
    return {capacity: earned[min(capacity, len(earned) - 1)] for capacity in capacities}


def offline_optima(
    trace: Outline | Network | Iterable[Chunk], capacities: Sequence[int], *, max_arcs: int = MAX_OPTIMUM_ARCS
) -> list[Optimum]:
    """The largest number of questions any schedule can answer at each capacity (exact), in one run.

    ``trace`` may be a trace's chunks, its :func:`outline`, or the :func:`network` of one.
    """
    for capacity in capacities:
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 0:
            raise ContractError(f"capacity must be an integer >= 0, got {capacity!r}")
    if isinstance(trace, Network):
        flow = trace
    else:
        flow = network(trace if isinstance(trace, Outline) else outline(trace), max_arcs)
    wanted = [int(capacity) for capacity in capacities]
    best = most_answers(flow, wanted) if flow.reachable and any(wanted) else dict.fromkeys(wanted, 0)
    return [Optimum(capacity, flow.asks, best[capacity], flow.reachable) for capacity in wanted]


def offline_optimum(
    trace: Outline | Network | Iterable[Chunk], capacity: int, *, max_arcs: int = MAX_OPTIMUM_ARCS
) -> Optimum:
    """The largest number of questions any schedule can answer at ``capacity`` (exact)."""
    return offline_optima(trace, [capacity], max_arcs=max_arcs)[0]
