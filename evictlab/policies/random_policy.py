"""``random``: the lower bound, a uniformly random k-subset fixed per case and seed.

Every fact gets one seeded uniform draw (:func:`._zoo.seeded_draws`, from SHA-256 over the
policy name, ``SelectionContext.seed`` and the sorted fact ids) and the facts with the highest
draws are kept: the kept set is a uniform k-subset, identical for the same case and seed.
Tables report its exact expectation, ``k / n`` per fact (:mod:`.ties`: every fact tied);
:func:`random_retention_mean` gives the mean over seeded draws (policies.md's R = 100 seeds),
whose spread is the distribution of single draws.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import ContractError
from ..palette import OKABE_ITO
from ._zoo import seeded_draws
from .arrays import Params, Signals
from .base import BASELINE, Policy, Score, SelectionContext
from .registry import register
from .signals import resolve_now

RETENTION_SEEDS = range(100)


@register
class RandomPolicy(Policy):
    name = "random"
    summary = "Lower bound: keep a uniformly random subset, seeded per case."
    role = BASELINE
    seeded = True
    color = OKABE_ITO["yellow"]
    component_names = ("draw",)
    uniform_order = True

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        return [
            Score(draw, {"draw": draw}) for draw in seeded_draws(type(self).name, facts, context.seed)
        ]

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        return (-signals.draws(type(self).name, params.seeds),)


def random_retention_mean(
    facts: Sequence[Any],
    capacity: int,
    support_fact_ids: Iterable[str],
    *,
    seeds: Iterable[int] = RETENTION_SEEDS,
    now: _dt.datetime | None = None,
) -> float:
    """Mean over ``seeds`` of the share of ``support_fact_ids`` that ``random`` keeps.

    With one support fact per case this is the share of seeds that keep it; its expectation
    is ``min(capacity, n) / n``. ``now`` does not change the result (``random`` reads no
    timestamps); it is accepted so every selection runs with an explicit clock.
    """
    support = frozenset(support_fact_ids)
    seed_list = list(seeds)
    if not support:
        raise ContractError("random_retention_mean needs at least one support fact id")
    if not seed_list:
        raise ContractError("random_retention_mean needs at least one seed")
    policy = RandomPolicy()
    moment = resolve_now(now)
    total = 0.0
    for seed in seed_list:
        decision = policy.select(facts, capacity, SelectionContext(now=moment, seed=seed))
        total += len(support.intersection(decision.kept_ids)) / len(support)
    return total / len(seed_list)
