"""The policies beyond DeerMem's two on numeric signals: a memory that decides as their ``select``.

:class:`ZooMemory` keeps, by row, every signal a zoo policy reads from DeerMem-shaped facts and
usage entries: ``createdAt``, ``lastAccessedAt`` and ``accessCount`` (from searches),
``lastConfirmedAt`` and ``confirmationCount`` (from confirmations), the bounded confidence and
the category. At each selection a *rank rule* computes every fact's rank key with the policy's
own formula and in the same operations, so the keys are the very doubles the policy computes:
numpy for ``+ - * /`` (rounded as IEEE prescribes, as Python's floats are) and Python's
``math.exp``, ``math.log`` and ``**`` for the transcendental functions, which numpy may round
differently in the last bit (and a last bit decides a tie). A stable lexicographic sort on the
keys, stored position last, is then the policy's rank order (spec 1.4), and
:meth:`~.memory.RowMemory.select` applies DeerMem's selection along it. Times are integer
microseconds; an age in days is ``((now - then) / 1e6) / 86400``, which is exactly
``timedelta.total_seconds() / 86400`` for any time a trace can hold (below 2**53 microseconds).

The tests replay random traces, ties included, through this memory and through the
reference loop that calls the policy's ``select`` on every write, and compare the kept lists
write by write. A policy (or modifier) without a rank rule here replays on the reference path.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import ContractError
from ...policies import Policy, PolicyParams, SelectionContext
from ...policies._zoo import seeded_draws
from ...policies.confidence import ConfidencePolicy
from ...policies.dory import (
    CORE_FLOOR,
    CORE_SHARE,
    FREQUENCY_WEIGHT,
    PROTECTED_BELOW_ACTIVATIONS,
    RECENCY_WEIGHT,
    REINFORCEMENT_WEIGHT,
    SALIENCE_RECENCY_WEIGHT,
    SALIENCE_WEIGHT,
    DoryPolicy,
)
from ...policies.fifo import FifoPolicy
from ...policies.generative_agents import HOURS_PER_DAY, GenerativeAgentsPolicy
from ...policies.keep_all import KeepAllPolicy
from ...policies.lfu import LfuAgingPolicy
from ...policies.lru import LruPolicy
from ...policies.memorybank import MAX_STRENGTH_GAIN, MemoryBankPolicy, MemoryBankSeededPolicy
from ...policies.memoryos import MemoryOsHeatPolicy
from ...policies.modifiers import ReservedPolicy, resolve_policy
from ...policies.random_policy import RandomPolicy
from ...policies.signals import read_confidence
from .memory import RowMemory, check_policy_spec
from .schema import EPOCH

Keys = list[np.ndarray]  # rank keys by stored position, the most significant first; ascending is best
RankRule = Callable[[Policy, "ZooMemory", np.ndarray, int], Keys]

COLUMNS = ("created", "accessed", "confirmed", "access_count", "confirmation_count")


class ZooMemory(RowMemory):
    """A zoo policy (or ``BASE+reserve(...)`` over one) on numeric signals."""

    def __init__(
        self, policy: str, capacity: int | None, params: PolicyParams | None = None, *, seed: int = 0
    ) -> None:
        self.policy = check_policy_spec(policy)
        selector = resolve_policy(policy)
        found = rank_rule(selector)
        if found is None:
            raise ContractError(f"policy {policy!r} has no fast replay; replay it on the reference path")
        self.base, self.rule = found
        self.params = params or PolicyParams()
        self.seed = seed
        context = SelectionContext(now=EPOCH, params=self.params, seed=seed)
        # An unlimited policy (keep-all) runs without a cap, as on the reference path.
        super().__init__(None if selector.unlimited else capacity, selector.reservation(context))
        # By row: times in microseconds (``accessed`` is ``createdAt`` until the first search
        # returns the fact, ``confirmed`` likewise until the first confirmation) and counts.
        self.columns = {name: np.zeros(1024, dtype=np.int64) for name in COLUMNS}
        self.confidence = np.zeros(1024)

    def stamp(self, fact_ids: set[str], now: int) -> None:
        for fact_id in fact_ids:
            row = self.row_in_memory(fact_id)
            if row is not None:
                self.columns["confirmed"][row] = now
                self.columns["confirmation_count"][row] += 1

    def add(self, fact_id: str, confidence: float, category: str, now: int) -> None:
        row = self.append_row(fact_id, category)
        if row == len(self.confidence):
            self.columns = {name: grown_column(column) for name, column in self.columns.items()}
            self.confidence = grown_column(self.confidence)
        for name in ("created", "accessed", "confirmed"):
            self.columns[name][row] = now
        self.confidence[row] = read_confidence(confidence)

    def access(self, fact_ids: list[str], now: int) -> None:
        for fact_id in fact_ids:
            row = self.row_in_memory(fact_id)
            if row is not None:
                self.columns["accessed"][row] = now
                self.columns["access_count"][row] += 1

    def rank(self, now: int) -> np.ndarray:
        rows = self.order
        keys = self.rule(self.base, self, rows, now)
        return rows[np.lexsort((np.arange(len(rows)), *reversed(keys)))]

    # --- signals of the rows in memory, as the policies read them

    def days_since(self, column: str, rows: np.ndarray, now: int) -> np.ndarray:
        """``max(0, (now - then).total_seconds() / 86400)`` for each row's time in ``column``."""
        elapsed = (now - self.columns[column][rows]).astype(np.float64) / 1e6 / 86400
        return np.maximum(0.0, elapsed)

    def counts(self, column: str, rows: np.ndarray) -> np.ndarray:
        return self.columns[column][rows]

    def draws(self, namespace: str, rows: np.ndarray) -> np.ndarray:
        """The seeded draws of :func:`~evictlab.policies._zoo.seeded_draws` for these facts."""
        facts = [{"id": self.names[row]} for row in rows.tolist()]
        return np.array(seeded_draws(namespace, facts, self.seed))


def grown_column(column: np.ndarray) -> np.ndarray:
    return np.concatenate((column, np.zeros_like(column)))


def each(function: Callable[[float], float], values: np.ndarray) -> np.ndarray:
    """``function`` (a Python float function) on every value, as the scalar policy computes it."""
    return np.array([function(value) for value in values.tolist()], dtype=np.float64)


def decay(days: np.ndarray, half_life_days: float) -> np.ndarray:
    """:func:`evictlab.policies.signals.decay` on ages that are never negative."""
    if half_life_days <= 0:
        return np.zeros(len(days))
    return each(lambda exponent: 2**exponent, -days / half_life_days)


def min_max(values: np.ndarray) -> np.ndarray:
    """:func:`evictlab.policies._zoo.min_max` on an array."""
    if len(values) == 0:
        return values
    low, high = values.min(), values.max()
    if high == low:
        return np.zeros(len(values))
    return (values - low) / (high - low)


# --- rank rules: the key each policy sorts on, ascending (``(-score,)`` unless it says otherwise)


def fifo_keys(policy: Policy, memory: ZooMemory, rows: np.ndarray, now: int) -> Keys:
    return [memory.days_since("created", rows, now)]  # minus the score, minus the age


def lru_keys(policy: Policy, memory: ZooMemory, rows: np.ndarray, now: int) -> Keys:
    return [memory.days_since("accessed", rows, now)]


def lfu_keys(policy: Policy, memory: ZooMemory, rows: np.ndarray, now: int) -> Keys:
    age = memory.days_since("accessed", rows, now)
    count = memory.counts("access_count", rows).astype(np.float64)
    value = np.zeros(len(rows))
    used = count > 0  # a count of 0 scores 0 whatever its decay
    value[used] = count[used] * decay(age[used], policy.values["half_life_days"])
    return [-value, age]


def memoryos_keys(policy: Policy, memory: ZooMemory, rows: np.ndarray, now: int) -> Keys:
    hours = HOURS_PER_DAY * memory.days_since("accessed", rows, now)
    recency = each(math.exp, -hours / policy.values["time_constant_hours"])
    visits = memory.counts("access_count", rows) + memory.counts("confirmation_count", rows)
    return [-(visits.astype(np.float64) + recency)]


def generative_agents_keys(policy: Policy, memory: ZooMemory, rows: np.ndarray, now: int) -> Keys:
    assert isinstance(policy, GenerativeAgentsPolicy)
    base = policy.values["decay_per_hour"]
    recency = each(lambda hours: base**hours, HOURS_PER_DAY * memory.days_since("accessed", rows, now))
    importance = 1 + 9 * memory.confidence[rows]
    relevance = np.zeros(len(rows))
    value = (
        policy.recency_weight * min_max(recency)
        + policy.importance_weight * min_max(importance)
        + policy.relevance_weight * min_max(relevance)
    )
    return [-value]


def memorybank_parts(policy: Policy, memory: ZooMemory, rows: np.ndarray, now: int) -> tuple[np.ndarray, np.ndarray]:
    """Retention and the expired flag (1.0 or 0.0) of each row."""
    recalls = memory.counts("access_count", rows) + memory.counts("confirmation_count", rows)
    strength = 1 + np.minimum(recalls, MAX_STRENGTH_GAIN)
    # The latest of lastAccessedAt, lastConfirmedAt and createdAt (both fall back to it).
    latest = np.maximum(memory.columns["accessed"][rows], memory.columns["confirmed"][rows])
    age = np.maximum(0.0, (now - latest).astype(np.float64) / 1e6 / 86400)
    retention = each(math.exp, -age / strength)
    expired = (age >= policy.values["expiry_days"]).astype(np.float64)
    return retention, expired


def memorybank_keys(policy: Policy, memory: ZooMemory, rows: np.ndarray, now: int) -> Keys:
    retention, expired = memorybank_parts(policy, memory, rows, now)
    return [expired, -retention]


def memorybank_seeded_keys(policy: Policy, memory: ZooMemory, rows: np.ndarray, now: int) -> Keys:
    retention, expired = memorybank_parts(policy, memory, rows, now)
    survived = (memory.draws(type(policy).name, rows) < retention).astype(np.float64)
    return [-survived, expired, -retention]


def dory_keys(policy: Policy, memory: ZooMemory, rows: np.ndarray, now: int) -> Keys:
    values = policy.values
    activations = memory.counts("access_count", rows)
    age = memory.days_since("accessed", rows, now)
    most = int(activations.max(initial=0))
    recency = each(math.exp, -values["recency_rate_per_day"] * age)
    if most:
        logs = {count: math.log(count + 1) / math.log(most + 1) for count in set(activations.tolist())}
        frequency = np.array([logs[count] for count in activations.tolist()], dtype=np.float64)
    else:
        frequency = np.zeros(len(rows))
    reinforced = np.minimum(1, memory.counts("confirmation_count", rows))
    salience = REINFORCEMENT_WEIGHT * reinforced + SALIENCE_RECENCY_WEIGHT * decay(
        age, values["salience_half_life_days"]
    )
    # Core: the top 20 % by salience (salience > 0), ties by stored position.
    core = np.zeros(len(rows), dtype=bool)
    by_salience = np.lexsort((np.arange(len(rows)), -salience))[: math.floor(CORE_SHARE * len(rows))]
    core[by_salience[salience[by_salience] > 0]] = True
    raw = RECENCY_WEIGHT * recency + FREQUENCY_WEIGHT * frequency + SALIENCE_WEIGHT * salience
    protected = activations < PROTECTED_BELOW_ACTIVATIONS
    archivable = ~protected & ~core & (raw < values["archive_threshold"])
    score = np.where(core, raw / CORE_FLOOR, raw)
    return [archivable.astype(np.float64), -score]


def random_keys(policy: Policy, memory: ZooMemory, rows: np.ndarray, now: int) -> Keys:
    return [-memory.draws(type(policy).name, rows)]


def confidence_keys(policy: Policy, memory: ZooMemory, rows: np.ndarray, now: int) -> Keys:
    return [-memory.confidence[rows]]


def keep_all_keys(policy: Policy, memory: ZooMemory, rows: np.ndarray, now: int) -> Keys:
    return [np.zeros(len(rows))]  # every score is 0: stored position decides


#: The rank rule of each policy class (exact classes: a subclass may score differently).
RANK_RULES: dict[type[Policy], RankRule] = {
    FifoPolicy: fifo_keys,
    LruPolicy: lru_keys,
    LfuAgingPolicy: lfu_keys,
    MemoryOsHeatPolicy: memoryos_keys,
    GenerativeAgentsPolicy: generative_agents_keys,
    MemoryBankPolicy: memorybank_keys,
    MemoryBankSeededPolicy: memorybank_seeded_keys,
    DoryPolicy: dory_keys,
    RandomPolicy: random_keys,
    ConfidencePolicy: confidence_keys,
    KeepAllPolicy: keep_all_keys,
}


def rank_rule(selector: Policy) -> tuple[Policy, RankRule] | None:
    """The policy whose rank order ``selector`` follows and its rule, or ``None`` (no fast path).

    A ``reserve`` modifier ranks as its base does; its reservation is applied by the memory.
    """
    base = selector.base if isinstance(selector, ReservedPolicy) else selector
    for cls in type(base).__mro__:
        rule = RANK_RULES.get(cls)
        if rule is not None:
            return (base, rule) if _same_rule(type(base), cls) else None
    return None


def _same_rule(actual: type[Policy], ruled: type[Any]) -> bool:
    """A subclass shares its parent's rule only when it changes nothing but weights and names."""
    if actual is ruled:
        return True
    return issubclass(actual, GenerativeAgentsPolicy) and actual.score is GenerativeAgentsPolicy.score
