"""Why a fact was kept or evicted (docs/policies.md section 2 item 1).

:func:`explain` runs a policy on one snapshot and reports, for every fact, its rank, whether it
was kept or held by a reserved slot, its score and components, its margin to the cut line and,
for an evicted fact, the kept fact that displaced it. For DeerMem's scoring policies
(``confidence`` and ``hybrid-v1``) it also finds, exactly, the smallest change of one signal
that would have kept an evicted fact:

* ``min_confidence``: the smallest double x such that confidence = x keeps it (both policies);
* ``confirm_within_days``: the largest whole number of days d such that a confirmation d days
  before the clock keeps it, i.e. "kept if confirmed within d days" (``hybrid-v1`` only; a
  confirmation d days old has freshness ``2^(-d / H)``). A confirmation is never dated before
  the fact's ``createdAt``: d is at most its age in whole days, and None when even a
  confirmation at the clock is not enough or the fact was created after the clock;
* ``min_access_heat``: the smallest whole heat h such that a usage entry with ``accessHeat`` h
  accessed at the clock keeps it (``hybrid-v1`` only; the component is
  ``min(1, log1p(h) / ln 9)``, so h never needs to exceed 8).

Each is ``None`` when no such change exists (confidence 1.0, a confirmation at the clock or a
saturated heat is still not enough), and ``None`` for kept facts. For every other policy (the
zoo, modified specs) only rank, score, margin and displacer are reported
(``Explanation.counterfactual_signals`` is empty).

How the changes are found: with the other facts' scores fixed, raising one fact's score can
only move it up, so an evicted fact is kept after a change exactly when its new score ranks
above its displacer's under DeerMem's order (higher score first, the earlier input position on
equal scores). Each signal is searched with that test at its own resolution: confidence over
every double (exact), confirmations in whole days back to the fact's creation (year 1 for an
undated fact), access heat in whole units from 1 to 8. The changed fact is scored with the
policy's own scoring code (both policies score each fact on its own), and the answer is then
confirmed by re-running the real selector on the changed snapshot.
"""

from __future__ import annotations

import datetime as _dt
import math
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from ..policies import Policy, PolicyParams, SelectionContext, check_snapshot, selection_context
from ..policies.modifiers import resolve_policy
from ..policies.signals import UTC, fact_fields, fact_key, parse_timestamp, read_confidence, resolve_now
from ..policies.ties import CutLine
from ..times import iso_z

CONFIDENCE = "confidence"
CONFIRMATION = "confirmation"
ACCESS = "access"
COUNTERFACTUAL_SIGNALS = {
    "confidence": (CONFIDENCE,),
    "hybrid-v1": (CONFIDENCE, CONFIRMATION, ACCESS),
}
#: The :class:`FactExplanation` field holding each signal's smallest change.
CHANGE_FIELDS = {
    CONFIDENCE: "min_confidence",
    CONFIRMATION: "confirm_within_days",
    ACCESS: "min_access_heat",
}
SATURATING_HEAT = 8  # log1p(8) / ln 9 = 1: more heat changes nothing
EARLIEST = _dt.datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class FactExplanation:
    """One fact's place in a decision.

    ``margin``: for a kept fact, its score minus the score of the first evicted fact (the
    highest-ranked one), ``None`` when nothing was evicted; for an evicted fact, its score
    minus its displacer's score, ``None`` without a displacer. ``displaced_by``: for an
    evicted fact, the lowest-ranked kept fact whose place it would take if it ranked above it:
    the lowest-ranked kept fact that holds no reserved slot or, for a fact of the reserved
    category, the lowest-ranked kept fact of all (it could take a reserved slot too); ``None``
    when every kept fact holds a reserved slot it cannot take, or nothing is kept. Margins
    compare scores, so for policies whose order is not score-descending (ties by LRU, tiers,
    modifiers) a margin may have either sign. The three counterfactual fields are described
    in the module docstring.
    """

    fact_id: str
    position: int
    rank: int
    kept: bool
    reserved: bool
    score: float
    components: dict[str, float]
    margin: float | None
    displaced_by: str | None
    min_confidence: float | None = None
    confirm_within_days: int | None = None
    min_access_heat: int | None = None

    @property
    def status(self) -> str:
        """``reserved`` (kept in a reserved slot), ``kept`` or ``evicted``."""
        if self.reserved:
            return "reserved"
        return "kept" if self.kept else "evicted"


@dataclass(frozen=True)
class Explanation:
    """Every fact of one snapshot explained, best rank first."""

    policy: str
    capacity: int
    reserved_slots: int
    counterfactual_signals: tuple[str, ...]
    facts: tuple[FactExplanation, ...] = ()

    def fact(self, fact_id: str) -> FactExplanation:
        for item in self.facts:
            if item.fact_id == fact_id:
                return item
        raise KeyError(fact_id)

    def to_frame(self) -> pd.DataFrame:
        """One row per fact in rank order (``status`` as :attr:`FactExplanation.status`); each
        score component is a column of its own name."""
        rows = []
        for item in self.facts:
            row = {
                "fact_id": item.fact_id,
                "position": item.position,
                "rank": item.rank,
                "kept": item.kept,
                "reserved": item.reserved,
                "status": item.status,
                "score": item.score,
                "margin": item.margin,
                "displaced_by": item.displaced_by,
                "min_confidence": item.min_confidence,
                "confirm_within_days": item.confirm_within_days,
                "min_access_heat": item.min_access_heat,
            }
            rows.append({**row, **item.components})
        frame = pd.DataFrame(rows, columns=_frame_columns(self.facts))
        return frame.astype(
            {
                "margin": "float64",
                "min_confidence": "float64",
                "confirm_within_days": "Int64",
                "min_access_heat": "Int64",
            }
        )

    def render(self) -> str:
        """A human summary for the command line: scores and margins rounded, thresholds exact."""
        kept = sum(item.kept for item in self.facts)
        lines = [
            f"{self.policy} at capacity {self.capacity}: kept {kept} of {len(self.facts)}"
            f" ({self.reserved_slots} reserved)",
            f"{'rank':>4}  {'fact':<32} {'status':<8} {'score':>10} {'margin':>10}",
        ]
        for item in self.facts:
            lines.append(
                f"{item.rank:>4}  {item.fact_id:<32} {item.status:<8} {item.score:>10.4f}"
                f" {_signed(item.margin):>10}"
            )
        evicted = [item for item in self.facts if not item.kept]
        if evicted:
            lines.append("why evicted:")
            lines.extend(f"  {item.fact_id}: {self._reasons(item)}" for item in evicted)
        return "\n".join(lines)

    def _reasons(self, item: FactExplanation) -> str:
        if item.displaced_by is None:
            parts = ["no kept fact it could displace"]
        else:
            parts = [f"displaced by {item.displaced_by} (margin {_signed(item.margin)})"]
        if CONFIDENCE in self.counterfactual_signals:
            parts.append(
                f"kept if confidence >= {item.min_confidence!r}"
                if item.min_confidence is not None
                else "no confidence keeps it"
            )
        if CONFIRMATION in self.counterfactual_signals:
            parts.append(
                f"kept if confirmed within {item.confirm_within_days} days"
                if item.confirm_within_days is not None
                else "no confirmation since its creation keeps it"
            )
        if ACCESS in self.counterfactual_signals:
            parts.append(
                f"kept if access heat >= {item.min_access_heat}"
                if item.min_access_heat is not None
                else "no access heat keeps it"
            )
        return "; ".join(parts)


def at_least(value: float, places: int = 4) -> str:
    """``">= 0.8401"`` for the smallest value that suffices, in ``places`` decimals, still true.

    A threshold that sits a rounding error above a short decimal (0.8400000000000002: the fact
    must beat a score tie at 0.84) reads ``"> 0.84"``; any other value is rounded up, so the
    printed bound is always enough. ``evictlab explain --format json`` and
    :attr:`FactExplanation.min_confidence` keep the exact value.
    """
    scale = 10**places
    rounded = round(value, places)
    if rounded == value:
        return f">= {rounded:g}"
    if 0 < value - rounded <= 1e-9:
        return f"> {rounded:g}"
    return f">= {math.ceil(value * scale) / scale:g}"


def _frame_columns(facts: Iterable[FactExplanation]) -> list[str]:
    columns = [
        "fact_id", "position", "rank", "kept", "reserved", "status", "score", "margin", "displaced_by",
        "min_confidence", "confirm_within_days", "min_access_heat",
    ]  # fmt: skip
    for item in facts:
        columns.extend(name for name in item.components if name not in columns)
    return columns


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4f}"


# --- explain -------------------------------------------------------------------------------


def explain(
    facts: Sequence[Mapping[str, Any]],
    capacity: int,
    *,
    policy: str | Policy = "hybrid-v1",
    usage: Mapping[str, Any] | None = None,
    now: _dt.datetime | None = None,
    params: PolicyParams | None = None,
    support_fact_ids: Iterable[str] = (),
    seed: int = 0,
) -> Explanation:
    """Explain the decision of ``policy`` (a policy spec or object) on ``facts`` at ``capacity``.

    The arguments are those of :func:`evictlab.policies.select`; ``policy`` may also carry
    modifiers (:func:`~evictlab.policies.modifiers.resolve_policy`). Raises
    :class:`ContractError` for duplicate fact ids or a negative capacity.
    """
    selector = resolve_policy(policy)
    check_snapshot(facts, capacity)
    context = selection_context(
        now=now, usage=usage, params=params, support_fact_ids=support_fact_ids, seed=seed
    )
    decision = selector.select(facts, capacity, context)
    signals = COUNTERFACTUAL_SIGNALS.get(selector.name, ())
    cut = CutLine(facts, decision, selector.reservation(context))
    explained = []
    for place, index in enumerate(decision.ranking, start=1):
        key = cut.keys[index]
        score = decision.scores[key]
        displacer = cut.displacer(index)
        explained.append(
            FactExplanation(
                fact_id=key,
                position=index,
                rank=place,
                kept=index in cut.kept,
                reserved=index in cut.reserved,
                score=score.value,
                components=dict(score.components),
                margin=cut.margin(index),
                displaced_by=None if displacer is None else cut.keys[displacer],
                **_counterfactuals(
                    signals, selector, facts, capacity, context, index, displacer, cut.values
                ),
            )
        )
    return Explanation(
        policy=selector.name,
        capacity=capacity,
        reserved_slots=decision.reserved_correction_slots,
        counterfactual_signals=signals,
        facts=tuple(explained),
    )


# --- counterfactuals -------------------------------------------------------------------------


def _counterfactuals(
    signals: tuple[str, ...],
    policy: Policy,
    facts: Sequence[Mapping[str, Any]],
    capacity: int,
    context: SelectionContext,
    index: int,
    displacer: int | None,
    cut_values: Sequence[float],
) -> dict[str, Any]:
    if not signals or displacer is None:
        return {}
    change = _Change(policy, facts, capacity, context, index, displacer, cut_values[displacer])
    found: dict[str, Any] = {}
    if CONFIDENCE in signals:
        current = read_confidence(facts[index].get("confidence"))
        found["min_confidence"] = change.find(
            change.confidence, lambda test: _smallest_double(test, current, 1.0)
        )
    if CONFIRMATION in signals:
        limit = confirmation_limit(facts[index], context.now)
        found["confirm_within_days"] = (
            None if limit is None else change.find(change.confirmation, lambda test: _largest_int(test, limit))
        )
    if ACCESS in signals:
        found["min_access_heat"] = change.find(
            change.heat, lambda test: _first(test, range(1, SATURATING_HEAT + 1))
        )
    return found


def confirmation_limit(fact: Mapping[str, Any], now: _dt.datetime) -> int | None:
    """The most whole days before ``now`` a confirmation of ``fact`` can be dated.

    A fact cannot be confirmed before it existed: the limit is its age in whole days since a
    readable ``createdAt`` (None, "not possible", when it was created after ``now``), and
    year 1 for a fact without one.
    """
    now = resolve_now(now)
    limit = (now - EARLIEST).days
    created = parse_timestamp(fact_fields(fact).get("createdAt"))
    if created is None:
        return limit
    if created > now:
        return None
    return min(limit, (now - created) // _dt.timedelta(days=1))


Changed = tuple[list[Mapping[str, Any]], SelectionContext]


class _Change:
    """Single-signal changes of one evicted fact, tested against its displacer."""

    def __init__(
        self,
        policy: Policy,
        facts: Sequence[Mapping[str, Any]],
        capacity: int,
        context: SelectionContext,
        index: int,
        displacer: int,
        target: float,
    ) -> None:
        self.policy = policy
        self.facts = facts
        self.capacity = capacity
        self.context = context
        self.index = index
        self.key = fact_key(facts[index], index)
        self.displacer = displacer
        self.target = target  # the displacer's score

    def confidence(self, value: float) -> Changed:
        return self._with_fact(confidence=value)

    def confirmation(self, days: int) -> Changed:
        return self._with_fact(lastConfirmedAt=iso_z(self.context.now - _dt.timedelta(days=days)))

    def heat(self, heat: int) -> Changed:
        entry = {"accessHeat": heat, "lastAccessedAt": iso_z(self.context.now)}
        usage = {**_usage_of(self.context), self.key: entry}
        return list(self.facts), replace(self.context, usage=usage)

    def find(
        self, build: Callable[[Any], Changed], search: Callable[[Callable[[Any], bool]], Any]
    ) -> Any:
        """``search`` a signal's domain with the rank test; confirm the answer with the selector."""
        value = search(lambda candidate: self._ranks_above_target(build(candidate)))
        if value is not None and not self._kept(build(value)):
            raise RuntimeError(
                f"explain: changing {self.key!r} to {value!r} does not keep it under"
                f" {self.policy.name}: the rank test and the selector disagree"
            )
        return value

    def _ranks_above_target(self, changed: Changed) -> bool:
        facts, context = changed
        fact = facts[self.index]
        # Scored alone, the fact sits at position 0: give it its entry under that key.
        entry = _usage_of(context).get(self.key)
        alone = replace(context, usage={} if entry is None else {fact_key(fact, 0): entry})
        value = self.policy.score([fact], alone)[0].value
        # DeerMem's order: the higher score first; on equal scores the earlier input position.
        return value > self.target or (value == self.target and self.index < self.displacer)

    def _kept(self, changed: Changed) -> bool:
        facts, context = changed
        decision = self.policy.select(facts, self.capacity, context)
        return self.key not in {item.fact_id for item in decision.evicted}

    def _with_fact(self, **changes: Any) -> Changed:
        facts = list(self.facts)
        facts[self.index] = {**facts[self.index], **changes}
        return facts, self.context


def _usage_of(context: SelectionContext) -> Mapping[str, Any]:
    return context.usage if isinstance(context.usage, Mapping) else {}


# --- searches over ordered domains -------------------------------------------------------------


def _smallest_double(
    keeps: Callable[[float], bool], current: float, ceiling: float
) -> float | None:
    """The smallest double x in (current, ceiling] with ``keeps(x)``; ``keeps`` is monotone.

    Non-negative doubles sort like their bit patterns, so this bisects over the integers
    between the two patterns and visits every double in the range.
    """
    if not keeps(ceiling):
        return None
    low, high = _bits(current), _bits(ceiling)  # keeps(current) is false: the fact was evicted
    while high - low > 1:
        middle = (low + high) // 2
        if keeps(_double(middle)):
            high = middle
        else:
            low = middle
    return _double(high)


def _bits(value: float) -> int:
    return struct.unpack("<q", struct.pack("<d", abs(value)))[0]


def _double(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<q", bits))[0]


def _largest_int(keeps: Callable[[int], bool], limit: int) -> int | None:
    """The largest integer d in [0, limit] with ``keeps(d)``, for ``keeps`` true up to a point.

    Doubles from 1 until ``keeps`` fails (or ``limit`` is reached), then bisects.
    """
    if not keeps(0):
        return None
    low, high = 0, 1
    while high <= limit and keeps(high):
        low, high = high, high * 2
    high = min(high, limit + 1)  # keeps(high) is false, or high is past the limit
    while high - low > 1:
        middle = (low + high) // 2
        if keeps(middle):
            low = middle
        else:
            high = middle
    return low


def _first(keeps: Callable[[int], bool], candidates: Iterable[int]) -> int | None:
    return next((value for value in candidates if keeps(value)), None)
