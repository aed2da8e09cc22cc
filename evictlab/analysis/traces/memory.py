"""The memories a trace is replayed through: many (policy, capacity, seed) memories in lockstep.

A replay drives a *collection* of memories through one trace (:func:`.replay.replay`); two
collections decide exactly as the spec says:

* :class:`Lockstep`, the replay's own: every memory of a run over one :class:`FactTable`. A
  fact's signals depend on the trace's events only, never on the memory holding it (an evicted
  fact never returns), so they are kept once, as columns by row; a memory is its rows. At each
  write the memories over their cap are decided in one call of the one selector, on DeerMem's
  input order (spec 1.12 C6): the snapshot as storage returns it, sorted by fact id (1.14), then
  the update's new facts (each row's place in id order is a column, :attr:`FactTable.id_order`),
  :func:`evictlab.selection.selector.select_rows` (each policy's ``rank_keys`` on its memories'
  rows; a policy without rank keys, ``mmr``, by its own ``select`` on the same facts as
  DeerMem-shaped dicts). Rows no memory holds are dropped (:meth:`FactTable.compact`): the state
  is bounded by the caps (keep-all's aside), and a write reads only the rows it decides.
* :class:`.reference.ReferenceMemory`, the scalar reference: one memory as DeerMem stores it,
  deciding with :func:`evictlab.selection.deermem.select_facts_for_capacity` or the policy's own
  ``select``; it writes DeerMem's audit events, and the tests compare the lockstep with it.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import platform
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ContractError
from ...policies import ADMIT, BOUND, Policy, PolicyParams, SelectionContext, check_capacity_range
from ...policies.hybrid import CORRECTION
from ...policies.modifiers import ModifiedPolicy, resolve_policy
from ...selection.selector import select_rows
from .fact_table import FactTable, grown
from .schema import from_us

#: The largest capacity a replay accepts (a memory of a billion facts is no cap at all).
MAX_CAPACITY = 10**9
#: :meth:`Lockstep.size_groups`' spread: beyond it, padding the smaller rows costs more than one more pass.
SIZE_SPREAD = 10


def root_policy(selector: Policy) -> Policy:
    """The registered policy under a policy's modifiers (``lru`` for ``lru+reserve(...)``)."""
    while isinstance(selector, ModifiedPolicy):
        selector = selector.base
    return selector


def replayable(policy: str) -> bool:
    """Whether a trace can be replayed through ``policy`` (a spec), read from its traits: not a
    bound that keeps to the capacity (``oracle`` reads a pool's support facts, which a trace does
    not have; trace mode's upper bound is the exact optimum). Raises for an unknown name."""
    root = root_policy(resolve_policy(policy))
    return not (root.role == BOUND and not root.unlimited)


def uncapped(policy: str) -> bool:
    """Whether ``policy`` is meant to run with no capacity limit (``keep-all``): its ``unlimited`` trait."""
    return resolve_policy(policy).unlimited


def check_policy_spec(policy: str) -> str:
    """A policy spec the replay can run (:func:`replayable`); raises for unknown names."""
    if not replayable(policy):
        raise ContractError(
            f"policy {policy!r} is a bound that reads a pool's support facts, which a trace does not"
            " have; trace mode's upper bound is the exact offline optimum"
        )
    return policy


def check_capacities(capacities: Iterable[Any]) -> tuple[int, ...]:
    """Capacities of a replay: :func:`~evictlab.policies.check_capacity_range` in [1, :data:`MAX_CAPACITY`]."""
    return check_capacity_range(capacities, low=1, high=MAX_CAPACITY, where="a replay's cap")


@dataclass(frozen=True)
class MemorySpec:
    """One memory of a replay: a policy spec, its capacity (``None``: no cap) and seed."""

    policy: str
    capacity: int | None
    seed: int = 0

    @classmethod
    def of(cls, policy: str, capacity: int | None, seed: int = 0) -> MemorySpec:
        """Checked: a replayable policy; an ``unlimited`` one (keep-all) runs without a cap."""
        check_policy_spec(policy)
        return cls(policy, None if capacity is None or uncapped(policy) else check_capacities([capacity])[0], seed)


#: glibc's mallopt parameters (malloc.h), and the sizes :func:`keep_freed_memory` sets.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_TRIM_BYTES, _MMAP_BYTES = 64 << 20, 32 << 20


@functools.cache
def keep_freed_memory() -> bool:
    """Let glibc's malloc keep up to 64 MiB of freed heap and serve arrays below 32 MiB from the
    heap; whether it did (a no-op but on glibc). Process-wide, for the rest of the process, and
    glibc's dynamic mmap threshold goes. Why: each write allocates and frees arrays of a few
    hundred KiB; mapped fresh each time, their zeroed pages cost a tenth of a replay's CPU (1.6
    million minor faults on the 10,000-event curve, 30,000 with these sizes)."""
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_BYTES)) & bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_BYTES))





#: Flat entries of several memories: (each entry's position among them, its table row).
Entries = tuple[np.ndarray, np.ndarray]


def admission_split(policy: Policy, stored: Any, arrivals: int, capacity: int) -> tuple[Any, int, Any, Any]:
    """How one selection is made under ``policy.admission``: (pool, room, held, dropped).

    The pool is selected down to ``room`` by the policy; ``held`` is kept beside the pool's
    kept facts without being ranked; ``dropped`` is evicted unranked. ``compete`` (DeerMem):
    every fact is in the pool. ``admit`` (a cache): the update's ``arrivals`` new facts (the
    last) are held and the residents are trimmed to the room left; when more facts arrive
    than the cap holds, every resident is dropped (last first) and the new facts are the pool.
    ``stored`` is a list or array in DeerMem's input order (the snapshot sorted by id, then the
    update's facts, spec 1.12 C6), so the pool is too; the parts are of the same kind. Only
    the selector's input order is storage's: what a cache policy reads of a fact (its
    ``createdAt`` queue, its access counts) is the fact's own.
    """
    arrivals = min(arrivals, len(stored))
    residents, new = stored[: len(stored) - arrivals], stored[len(stored) - arrivals :]
    if policy.admission != ADMIT or arrivals == 0:
        return stored, capacity, stored[:0], stored[:0]
    if arrivals <= capacity:
        return residents, capacity - arrivals, new, stored[:0]
    return new, capacity, stored[:0], residents[::-1]


class Lockstep:
    """M memories (:class:`MemorySpec`) of one replay over one :class:`FactTable`, decided together.

    ``present`` (M, table rows) says which memory holds which row, ``order[m][: sizes[m]]`` its
    rows: the last selection's input order (its snapshot sorted by id, then its new facts) less
    the evicted, then the facts added since. :meth:`select` decides every memory over its cap
    on DeerMem's input order (spec 1.12 C6): the snapshot sorted by id (the rows merged into id
    order first), then the update's new facts; :meth:`kept_ids` lists them sorted by id, as
    storage stores them.
    """

    #: Call the selector on every write, even under the cap (the reference loop of a benchmark).
    select_every_write = False

    def __init__(self, specs: Sequence[MemorySpec], params: PolicyParams | None = None) -> None:
        if not specs:
            raise ContractError("a replay needs at least one memory")
        keep_freed_memory()
        self.specs = list(specs)
        self.params = params or PolicyParams()
        self.table = FactTable(self.params.access_half_life_days)
        count = len(self.specs)
        self.capacities = np.array([MAX_CAPACITY + 1 if s.capacity is None else s.capacity for s in self.specs])
        self.capped = np.array([spec.capacity is not None for spec in self.specs])
        self.present = np.zeros((count, 1024), dtype=bool)
        self.order = np.zeros((count, 1024), dtype=np.int64)
        self.sizes = np.zeros(count, dtype=np.int64)
        self.arrivals = np.zeros(count, dtype=np.int64)  # facts added since the last selection
        self.policies = {spec.policy: resolve_policy(spec.policy) for spec in self.specs}
        names = list(self.policies)
        #: Each memory's policy (a number), and whether it admits new facts (``admission``).
        self.group_of = np.array([names.index(spec.policy) for spec in self.specs])
        self.admits = np.array([self.policies[spec.policy].admission == ADMIT for spec in self.specs])
        self.selected = np.zeros(count, dtype=bool)  # the memories the last select decided

    def __len__(self) -> int:
        return len(self.specs)

    def size_groups(self, spread: int = SIZE_SPREAD) -> list[np.ndarray]:
        """The memories in groups of about one size, each in memory order, for work done on a
        group's rows padded to its widest: capped memories whose caps lie within a factor of
        ``spread`` of their group's smallest, then the uncapped ones (keep-all's would pad every other)."""
        groups: list[list[int]] = []
        for memory in np.flatnonzero(self.capped)[np.argsort(self.capacities[self.capped], kind="stable")].tolist():
            if not groups or self.capacities[memory] > spread * self.capacities[groups[-1][0]]:
                groups.append([])
            groups[-1].append(memory)
        return [np.sort(group) for group in groups] + [np.flatnonzero(~self.capped)]

    def kept_ids(self, memory: int = 0) -> list[str]:
        """The ids of one memory, in DeerMem's stored order (sorted by id, spec 1.14)."""
        rows = self.order[memory : memory + 1, : self.sizes[memory]]
        return self.table.ids[self.table.by_id(rows, np.ones(rows.shape, dtype=bool))[0]].tolist()

    def contains(self, fact_id: str) -> np.ndarray:
        """Which memories hold ``fact_id`` (M,)."""
        row = self.table.index.get(fact_id)
        return np.zeros(len(self), dtype=bool) if row is None else self.present[:, row]

    def count_held(self, fact_ids: Iterable[str]) -> np.ndarray:
        """How many of ``fact_ids`` (distinct, each added to the replay) each memory holds (M,)."""
        index = self.table.index
        return self.present[:, [index[fact_id] for fact_id in fact_ids]].sum(axis=1)

    def count_corrections(self) -> np.ndarray:
        """Facts of the correction category in each memory (M,)."""
        names, size = self.table.category_names, self.table.size
        if CORRECTION not in names:
            return np.zeros(len(self), dtype=np.int64)
        return (self.present[:, :size] & (self.table.category[:size] == names.index(CORRECTION))).sum(axis=1)

    def stamp(self, fact_ids: set[str], now: int) -> None:
        self.table.stamp(fact_ids, now)

    def access(self, fact_ids: list[str], now: int) -> None:
        self.table.access(fact_ids, now)

    def add(self, fact_id: str, confidence: float, category: str, now: int) -> None:
        """Store a new fact last in every memory."""
        if self.table.size == len(self.table.ids):  # full: drop the rows no memory holds, or grow
            live = np.asarray(self.present[:, : self.table.size].any(axis=0))
            if 2 * int(live.sum()) <= self.table.size:
                self._compact(live)
        row = self.table.add(fact_id, confidence, category, now)
        self.present = grown(self.present, row + 1, False)
        self.order = grown(self.order, int(self.sizes.max()) + 1, 0)
        self.present[:, row] = True
        self.order[np.arange(len(self)), self.sizes] = row
        self.sizes += 1
        self.arrivals += 1

    def stored(self, members: np.ndarray, stop: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The stored rows of some memories, padded: (rows (K, width), valid (K, width)).

        Each memory's first ``stop`` rows (default: all of them) in stored order; padding rows
        are rows of the table (so columns can be read by them) but not ``valid``.
        """
        stop = self.sizes[members] if stop is None else stop
        width = int(stop.max(initial=0))
        valid = np.arange(width) < stop[:, None]
        return np.where(valid, self.order[members, :width], 0), valid

    def discard(self, members: np.ndarray, gone: np.ndarray) -> None:
        """Remove stored positions from some memories (``gone`` (K, width) over positions of
        :meth:`stored`), keeping the others in order."""
        sizes = self.sizes[members]
        width = int(sizes.max(initial=0))
        positions = np.arange(width)
        gone = np.pad(gone[:, :width], ((0, 0), (0, max(0, width - gone.shape[1])))) & (positions < sizes[:, None])
        arrived = positions >= (sizes - self.arrivals[members])[:, None]
        self.arrivals[members] -= (gone & arrived).sum(axis=1)  # a new fact removed arrives no more
        rows = self.order[members, :width]
        self.present[members[:, None].repeat(width, axis=1)[gone], rows[gone]] = False
        moved = np.argsort(gone | (positions >= sizes[:, None]), axis=1, kind="stable")
        self.order[members, :width] = np.take_along_axis(rows, moved, axis=1)
        self.sizes[members] = sizes - gone.sum(axis=1)

    def select(self, now: int) -> list[list[str]]:
        """Trim every memory over its cap; each memory's evicted ids, lowest rank first.

        A policy whose ``admission`` is ``admit`` keeps the update's new facts and trims the
        residents to the room left (:func:`admission_split`); ``compete`` ranks them all. Every
        memory that selects (``selected``) is decided in one call of the selector, the
        memories of a policy side by side; a policy without rank keys by its own ``select``.
        """
        evicted: list[list[str]] = [[] for _ in self.specs]
        self.selected = self.capped & ((self.sizes > self.capacities) | self.select_every_write)
        chosen = np.flatnonzero(self.selected)
        if len(chosen):
            self._select(chosen[np.argsort(self.group_of[chosen], kind="stable")], now, evicted)
        self.arrivals[:] = 0
        return evicted

    def _select(self, chosen: np.ndarray, now: int, evicted: list[list[str]]) -> None:
        """Decide the memories ``chosen`` (grouped by policy), as :func:`admission_split` splits
        each, on DeerMem's input order."""
        sizes, caps = self.sizes[chosen], self.capacities[chosen]
        arrivals = np.minimum(self.arrivals[chosen], sizes)
        # The input order (spec 1.12 C6): the snapshot sorted by id, then this update's facts.
        # Only the last selection's new facts, and those added since, are out of id order.
        full = int(sizes.max())
        snapshot = np.arange(full) < (sizes - arrivals)[:, None]
        self.order[chosen, :full] = self.table.by_id(self.order[chosen, :full], snapshot)
        admit = self.admits[chosen] & (arrivals > 0)
        flood, trim = admit & (arrivals > caps), admit & (arrivals <= caps)
        start = np.where(flood, sizes - arrivals, 0)
        length = np.where(trim, sizes - arrivals, np.where(flood, arrivals, sizes))
        room = np.where(trim, caps - arrivals, caps)
        width = int(length.max())
        if width == 0:
            return
        last = self.order.shape[1] - 1
        valid = np.arange(width) < length[:, None]
        rows = np.where(valid, self.order[chosen[:, None], np.minimum(start[:, None] + np.arange(width), last)], 0)
        # Each memory's evicted rows, flat: (position in ``chosen`` of each entry, row).
        gone: list[Entries] = []
        groups = np.flatnonzero(np.diff(self.group_of[chosen], prepend=-1, append=len(self.specs) + 1))
        vectorised: list[tuple[Policy, slice]] = []
        ranked: list[int] = []  # the positions of vectorised policies, in order
        for first, stop in itertools.pairwise(groups.tolist()):
            policy = self.policies[self.specs[chosen[first]].policy]
            if policy.vectorised:
                vectorised.append((policy, slice(len(ranked), len(ranked) + stop - first)))
                ranked.extend(range(first, stop))
                continue
            moment = from_us(now)  # no rank keys: its scalar select, on the same facts
            for position in range(first, stop):
                pool = rows[position, : length[position]]
                facts, usage = self.table.facts(pool)
                seed = self.specs[chosen[position]].seed
                context = SelectionContext(now=moment, usage=usage, params=self.params, seed=seed)
                decision = policy.select(facts, int(room[position]), context)
                index = dict(zip(self.table.ids[pool].tolist(), pool.tolist()))
                theirs = np.array([index[item.fact_id] for item in decision.evicted], dtype=np.int64)
                gone.append((np.full(len(theirs), position), theirs))
        if vectorised:
            part = slice(None) if len(ranked) == len(chosen) else np.array(ranked)
            mine_rows = rows[part]
            signals = self.table.signals(now, mine_rows, valid[part])
            seeds = np.array([self.specs[memory].seed for memory in chosen[part]])
            _, lost = select_rows(vectorised, signals, room[part], self.params, seeds).entries(mine_rows)
            positions = np.arange(len(chosen))[part]
            gone.append((positions[lost[0]], lost[1]))
        (gone_at, gone_rows), gone_count = _by_position(gone, len(chosen))
        # More new facts than the cap: every resident goes, unranked, last in the snapshot first.
        dropped = {int(position): self.order[chosen[position], : sizes[position] - arrivals[position]][::-1].copy()
                   for position in np.flatnonzero(flood)}
        self.present[chosen[gone_at], gone_rows] = False
        ids = self.table.ids[gone_rows].tolist()
        ends = np.cumsum(gone_count).tolist()
        for position, memory in enumerate(chosen.tolist()):
            evicted[memory] = ids[ends[position] - int(gone_count[position]) : ends[position]]
        for position, residents in dropped.items():
            memory = int(chosen[position])
            self.present[memory, residents] = False
            evicted[memory] = evicted[memory] + self.table.ids[residents].tolist()
        # What is left (the kept facts, and under ``admit`` those held) stays in input order: the
        # snapshot's survivors sorted by id, then the update's, which the next selection merges in.
        stored = self.order[chosen, :full]
        alive = (np.arange(full) < sizes[:, None]) & self.present[chosen[:, None], stored]
        self.order[chosen, :full] = np.take_along_axis(stored, np.argsort(~alive, axis=1, kind="stable"), axis=1)
        self.sizes[chosen] = alive.sum(axis=1)

    def _compact(self, live: np.ndarray) -> None:
        remap = self.table.compact(live)
        self.present = grown(self.present[:, : len(remap)][:, remap >= 0], 1024, False)
        self.order = np.where(np.arange(self.order.shape[1]) < self.sizes[:, None], remap[self.order], 0)


def _by_position(pieces: list[Entries], count: int) -> tuple[Entries, np.ndarray]:
    """Flat ``(position, row)`` entries of several pieces, grouped by position (each piece's order
    kept within a position), and the entries per position (``count`` positions)."""
    at = np.concatenate([piece[0] for piece in pieces]).astype(np.int64)
    rows = np.concatenate([piece[1] for piece in pieces]).astype(np.int64)
    if len(pieces) > 1:
        order = np.argsort(at, kind="stable")
        at, rows = at[order], rows[order]
    return (at, rows), np.bincount(at, minlength=count)
