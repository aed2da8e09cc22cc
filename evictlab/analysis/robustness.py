"""Robustness curves: retention and decision churn when the pools' signals are perturbed.

docs/policies.md section 2 items 3 and 10: a policy that wins on clean metadata may lose when
the extractor's confidence is noisy, timestamps are skewed, confirmations are falsely
detected, access heat is gamed, or fields go missing. :func:`robustness_curves` perturbs every
pool with a seeded draw per (perturbation, level, seed), decides the perturbed pools with the
one selector (all seeds of one level in one batch), and reports per policy and capacity:

* ``mean_retained``: supports retained over all cases, averaged over the seeds;
* ``lower`` / ``upper``: the 2.5 % and 97.5 % quantiles of that count over the seeds (the
  range one perturbed draw falls in 95 % of the time);
* ``churn``: the share of (case, seed) decisions whose kept set differs from the
  unperturbed decision.

The perturbations (:data:`PERTURBATIONS`), each applied fact by fact with its own seeded
generator (``numpy.random.default_rng`` seeded by SHA-256 of the perturbation, the level and
the seed, so a draw never depends on the process or on the other levels):

* ``confidence_noise`` (level = sigma): confidence + sigma * N(0, 1), clipped to [0, 1]
  (a missing confidence stays missing);
* ``timestamp_jitter`` (level = days): every readable timestamp (``createdAt``,
  ``lastConfirmedAt``, ``lastAccessedAt``) moves by level * N(0, 1) days;
* ``false_confirmations`` (level = rate): an unconfirmed fact is marked confirmed, at a
  uniformly random time in the 30 days before the clock, with this probability;
* ``heat_inflation`` (level = rate): a fact's access heat grows by 8 (a burst of repeated
  queries, accessed at the clock) with this probability;
* ``missing_metadata`` (level = rate): a fact's confidence, its confirmation and its usage
  entry are each dropped with this probability.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ContractError
from ..policies import DEERMEM_POLICIES, PolicyParams
from ..policies.signals import parse_timestamp, read_number
from ..selection.engine import BatchResult, PreparedCases, vectorised
from ..times import iso_z

ROBUSTNESS_CAPACITIES = (5, 7, 9)
ROBUSTNESS_SEEDS = 200
QUANTILES = (0.025, 0.975)
FALSE_CONFIRMATION_WINDOW_DAYS = 30
HEAT_BURST = 8.0
COLUMNS = (
    "perturbation", "level", "policy", "capacity", "seeds", "cases", "baseline_retained",
    "mean_retained", "lower", "upper", "churn",
)  # fmt: skip


@dataclass(frozen=True)
class Perturbation:
    """One kind of signal damage: its name, what its level means and the default levels."""

    name: str
    unit: str
    levels: tuple[float, ...]
    apply: Callable[[_Draw, dict[str, Any], dict[str, Any] | None, float], tuple[dict, dict | None]]


@dataclass(frozen=True)
class _PerturbedCase:
    """The fields :class:`~evictlab.selection.engine.PreparedCases` reads, for one perturbed copy of a case."""

    case_id: str
    scenario: str
    source: str
    facts: list[dict[str, Any]]
    usage: dict[str, Any]
    support_fact_ids: tuple[str, ...]


class _Draw:
    """The seeded generator of one (perturbation, level, seed) and the clock."""

    def __init__(self, name: str, level: float, seed: int, now: _dt.datetime) -> None:
        material = json.dumps([name, repr(float(level)), int(seed)]).encode("utf-8")
        self.rng = np.random.default_rng(int.from_bytes(hashlib.sha256(material).digest()[:8], "big"))
        self.now = now

    def shifted(self, value: Any, days: float) -> Any:
        moment = parse_timestamp(value)
        if moment is None:
            return value
        return iso_z(moment - _dt.timedelta(days=days))


def _confidence_noise(draw: _Draw, fact: dict, entry: dict | None, sigma: float) -> tuple[dict, dict | None]:
    value = read_number(fact.get("confidence"))
    if value is None:
        return fact, entry
    return {**fact, "confidence": min(1.0, max(0.0, value + sigma * float(draw.rng.standard_normal())))}, entry


def _timestamp_jitter(draw: _Draw, fact: dict, entry: dict | None, days: float) -> tuple[dict, dict | None]:
    shifts = days * draw.rng.standard_normal(3)
    fact = {**fact}
    for name, shift in zip(("createdAt", "lastConfirmedAt"), shifts):
        if name in fact:
            fact[name] = draw.shifted(fact[name], float(shift))
    if isinstance(entry, Mapping) and "lastAccessedAt" in entry:
        entry = {**entry, "lastAccessedAt": draw.shifted(entry["lastAccessedAt"], float(shifts[2]))}
    return fact, entry


def _false_confirmations(draw: _Draw, fact: dict, entry: dict | None, rate: float) -> tuple[dict, dict | None]:
    hit, age = draw.rng.random(), draw.rng.random() * FALSE_CONFIRMATION_WINDOW_DAYS
    if parse_timestamp(fact.get("lastConfirmedAt")) is not None or hit >= rate:
        return fact, entry
    confirmed = iso_z(draw.now - _dt.timedelta(days=float(age)))
    return {**fact, "lastConfirmedAt": confirmed, "confirmationCount": 1}, entry


def _heat_inflation(draw: _Draw, fact: dict, entry: dict | None, rate: float) -> tuple[dict, dict | None]:
    if draw.rng.random() >= rate:
        return fact, entry
    heat = read_number(entry.get("accessHeat")) if isinstance(entry, Mapping) else None
    burst = {"accessHeat": max(0.0, heat or 0.0) + HEAT_BURST, "lastAccessedAt": iso_z(draw.now)}
    return fact, {**(entry if isinstance(entry, Mapping) else {}), **burst}


def _missing_metadata(draw: _Draw, fact: dict, entry: dict | None, rate: float) -> tuple[dict, dict | None]:
    lose_confidence, lose_confirmation, lose_usage = draw.rng.random(3) < rate
    dropped = {"confidence"} if lose_confidence else set()
    if lose_confirmation:
        dropped |= {"lastConfirmedAt", "confirmationCount"}
    fact = {name: value for name, value in fact.items() if name not in dropped}
    return fact, None if lose_usage else entry


PERTURBATIONS: dict[str, Perturbation] = {
    item.name: item
    for item in (
        Perturbation("confidence_noise", "sigma", (0.0, 0.01, 0.02, 0.05, 0.1), _confidence_noise),
        Perturbation("timestamp_jitter", "days (sd)", (0.0, 1.0, 7.0, 30.0, 90.0), _timestamp_jitter),
        Perturbation("false_confirmations", "rate", (0.0, 0.05, 0.1, 0.2, 0.4), _false_confirmations),
        Perturbation("heat_inflation", "rate", (0.0, 0.05, 0.1, 0.2, 0.4), _heat_inflation),
        Perturbation("missing_metadata", "rate", (0.0, 0.05, 0.1, 0.2, 0.4), _missing_metadata),
    )
}


def perturbation(name: str) -> Perturbation:
    try:
        return PERTURBATIONS[name]
    except KeyError:
        raise ContractError(f"unknown perturbation {name!r}; known: {', '.join(PERTURBATIONS)}") from None


def perturb_cases(
    cases: Sequence[Any], name: str, level: float, seeds: Sequence[int], now: _dt.datetime
) -> list[_PerturbedCase]:
    """One perturbed copy of every case per seed, seed by seed (case ids ``"{id}#{seed}"``).

    Level 0 returns unchanged copies. Facts and usage entries are new objects; the input is
    never mutated.
    """
    kind = perturbation(name)
    if not level >= 0:
        raise ContractError(f"{name}: level must be >= 0, got {level!r}")
    out = []
    for seed in seeds:
        draw = _Draw(name, level, seed, now)
        for case in cases:
            usage = dict(case.usage) if isinstance(case.usage, Mapping) else {}
            facts = []
            for fact in case.facts:
                key = str(fact.get("id"))
                entry = usage.get(key)
                changed, entry = (fact, entry) if level == 0 else kind.apply(draw, dict(fact), entry, level)
                facts.append(changed)
                if entry is None:
                    usage.pop(key, None)
                else:
                    usage[key] = entry
            out.append(
                _PerturbedCase(f"{case.case_id}#{seed}", case.scenario, case.source, facts, usage,
                               tuple(case.support_fact_ids))
            )  # fmt: skip
    return out


def robustness_curves(
    pool_set: Any, perturbations: Sequence[str] | None = None, *, levels: Mapping[str, Sequence[float]] | None = None,
    policies: Sequence[str] = DEERMEM_POLICIES, capacities: Sequence[int] = ROBUSTNESS_CAPACITIES,
    seeds: int = ROBUSTNESS_SEEDS, params: PolicyParams | None = None,
) -> pd.DataFrame:
    """Retention and churn per perturbation x level x policy x capacity (columns :data:`COLUMNS`).

    ``perturbations`` default to all of :data:`PERTURBATIONS`, ``levels`` to each one's
    defaults; ``seeds`` perturbed copies per level (seeds 0 to ``seeds - 1``); ``params`` to
    the protocol's hybrid-v1 parameters. Any policy with rank keys is accepted (not ``mmr``):
    the point is many decisions fast.
    """
    names = list(PERTURBATIONS) if perturbations is None else list(perturbations)
    for name in names:
        perturbation(name)
    for policy in policies:
        if not vectorised(policy):
            raise ContractError(f"robustness curves run on the selector's rank keys, which {policy!r} has not")
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ContractError(f"seeds must be an integer >= 1, got {seeds!r}")
    capacities = tuple(int(capacity) for capacity in capacities)
    params = params or pool_set.protocol.config.hybrid
    now = pool_set.protocol.evaluation_time
    cases = list(pool_set.cases)
    base = PreparedCases(cases, now)
    clean = {policy: base.select(policy, [params], capacities, details=True) for policy in policies}
    records = []
    for name in names:
        for level in (levels or {}).get(name, PERTURBATIONS[name].levels):
            # One batch per level: every seed's copy of every case, decided together.
            perturbed = PreparedCases(perturb_cases(cases, name, float(level), range(seeds), now), now)
            for policy in policies:
                result = perturbed.select(policy, [params], capacities, details=True)
                retained = result.support_retained[0].reshape(seeds, len(cases), len(capacities)).sum(axis=1)
                kept = _kept(result).reshape(seeds, len(cases), len(capacities), -1)
                changed = (kept != _kept(clean[policy])[None]).any(axis=-1)  # (seeds, cases, capacities)
                baseline = clean[policy].support_retained[0].sum(axis=0)
                for k, capacity in enumerate(capacities):
                    low, high = np.quantile(retained[:, k], QUANTILES)
                    records.append(
                        {"perturbation": name, "level": float(level), "policy": policy, "capacity": capacity,
                         "seeds": seeds, "cases": len(cases), "baseline_retained": int(baseline[k]),
                         "mean_retained": float(retained[:, k].mean()), "lower": float(low), "upper": float(high),
                         "churn": float(changed[:, :, k].mean())}
                    )  # fmt: skip
    order = {policy: index for index, policy in enumerate(policies)}
    frame = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    return frame.sort_values(["perturbation", "policy", "level", "capacity"], key=lambda column: (
        column.map({n: i for i, n in enumerate(names)}) if column.name == "perturbation"
        else column.map(order) if column.name == "policy" else column
    ), kind="stable").reset_index(drop=True)


def _kept(result: BatchResult) -> np.ndarray:
    """The kept masks of the result's one setting, shape (cases, capacities, width)."""
    if result.kept is None:
        raise ContractError("robustness curves need kept masks: select with details=True")
    return result.kept[0]


__all__ = [
    "COLUMNS",
    "PERTURBATIONS",
    "Perturbation",
    "perturb_cases",
    "perturbation",
    "robustness_curves",
]
