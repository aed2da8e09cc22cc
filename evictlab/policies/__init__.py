"""Capacity policies: one module each, registered by name.

Importing this package imports every module in it, so a new policy is one new file that
decorates its class with :func:`register`. :func:`select` is evictlab's own entry point; it
rejects duplicate fact ids, which the DeerMem-compatible :mod:`evictlab.selection.deermem` accepts.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import numbers
import pkgutil
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import ContractError
from .base import (
    ADMISSIONS,
    ADMIT,
    BASELINE,
    BOUND,
    COMPETE,
    POLICY,
    ROLES,
    Decision,
    EvictedFact,
    Policy,
    PolicyParams,
    Reservation,
    Score,
    SelectionContext,
    select_by_rank,
)
from .modifiers import resolve_policy, split_list
from .registry import get_policy, known_policies, policy_class, register
from .signals import fact_key, resolve_now

_INFRASTRUCTURE = {"arrays", "base", "registry", "signals", "ties"}

for _module in pkgutil.iter_modules(__path__):
    if _module.name not in _INFRASTRUCTURE and not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")

DEERMEM_POLICIES = ("confidence", "hybrid-v1")


def check_capacity_range(
    capacities: Iterable[Any], *, low: int = 0, high: int | None = None, where: str = ""
) -> tuple[int, ...]:
    """The one capacity check: at least one, each an integer (numpy's too, not a boolean) in
    ``[low, high]`` (no upper bound when ``high`` is None); ``where`` names the bounds' source."""
    values, suffix = tuple(capacities), (f" ({where})" if where else "")
    if not values:
        raise ContractError(f"no capacities{suffix}")
    for capacity in values:
        whole = not isinstance(capacity, bool) and isinstance(capacity, numbers.Integral)
        if whole and high is not None and not low <= int(capacity) <= high:
            raise ContractError(f"capacity {capacity} is outside [{low:,}, {high:,}]{suffix}")
        if not whole or int(capacity) < low:
            bound = f">= {low:,}" if high is None else f"in [{low:,}, {high:,}]"
            raise ContractError(f"capacity must be an integer {bound}, got {capacity!r}{suffix}")
    return tuple(int(capacity) for capacity in values)


def check_snapshot(facts: Sequence[Mapping[str, Any]], capacity: int) -> None:
    """evictlab's own entry points refuse a negative capacity and duplicate fact ids."""
    check_capacity_range([capacity])
    seen: set[str] = set()
    for index, fact in enumerate(facts):
        key = fact_key(fact, index)
        if key in seen:
            raise ContractError(f"duplicate fact id {key!r} at position {index}")
        seen.add(key)


def selection_context(
    *,
    now: _dt.datetime | None = None,
    usage: Mapping[str, Any] | None = None,
    params: PolicyParams | None = None,
    support_fact_ids: Iterable[str] = (),
    seed: int = 0,
) -> SelectionContext:
    """A :class:`SelectionContext` with evictlab's defaults (now in UTC, no usage, DeerMem's parameters)."""
    return SelectionContext(
        now=resolve_now(now),
        usage=usage or {},
        params=params or PolicyParams(),
        support_fact_ids=frozenset(support_fact_ids),
        seed=seed,
    )


def select(
    policy: str,
    facts: Sequence[Mapping[str, Any]],
    capacity: int,
    *,
    usage: Mapping[str, Any] | None = None,
    now: _dt.datetime | None = None,
    params: PolicyParams | None = None,
    support_fact_ids: Iterable[str] = (),
    seed: int = 0,
) -> Decision:
    """Run the policy ``policy`` names (a spec: ``lru``, ``lfu-aging(half_life_days=7)``,
    ``lru+reserve(correction,0.1,10)``) on ``facts`` at ``capacity``.

    Raises :class:`ContractError` for duplicate fact ids, a negative capacity or a spec it
    cannot read and :class:`~evictlab.errors.UnknownPolicyError` for an unknown name.
    """
    selector = resolve_policy(policy)
    check_snapshot(facts, capacity)
    context = selection_context(
        now=now, usage=usage, params=params, support_fact_ids=support_fact_ids, seed=seed
    )
    return selector.select(facts, capacity, context)


__all__ = [
    "ADMISSIONS",
    "ADMIT",
    "BASELINE",
    "BOUND",
    "COMPETE",
    "DEERMEM_POLICIES",
    "POLICY",
    "ROLES",
    "Decision",
    "EvictedFact",
    "Policy",
    "PolicyParams",
    "Reservation",
    "Score",
    "SelectionContext",
    "check_capacity_range",
    "check_snapshot",
    "get_policy",
    "known_policies",
    "policy_class",
    "register",
    "resolve_policy",
    "select",
    "select_by_rank",
    "selection_context",
    "split_list",
]
