"""Ties at the cut line: when the order of equal facts, not their signals, decides.

DeerMem breaks every tie by input position (spec 1.4), and the pools list the support fact
after every distractor, so a tie at the cut line always goes against the support. That is the
rule the DeerMem-compatible path must follow (``input-order``), but it makes a policy that
ties often look worse, or better, than its signals are. The ``expected`` tie-break reports
the exact expectation over uniformly random orders of the tied facts instead.

Two facts are tied when their rank keys (:attr:`~evictlab.policies.base.Decision.rank_keys`:
the score, then any further key the policy ranks by) are exactly equal. Within a group of
``t`` tied facts the selector keeps a fixed number no matter how they are ordered, so without
a reservation each member is kept with probability ``s / t``, where ``s`` is the number of
slots left for the group. With a reservation the first ``q`` reserved-category members of the
group (in the random order) take reserved slots and the fill then walks the group's other
members; :func:`keep_probability` gives that in closed form (the number of other members
before the ``q``-th reserved one is negative-hypergeometric). ``random`` ranks by a seeded
draw, so its expectation is the one where every fact is tied (``Policy.uniform_order``):
``k / n`` for each fact.

A near tie is narrower than it may sound. :meth:`CutLine.near_tie` compares one fact with
the one fact across the cut line that its margin is measured against (:meth:`CutLine.reference`)
and reports a non-zero margin of at most :data:`NEAR_TIE_RELATIVE` times the larger of the two
scores: the doubles differ only in their last bits, so the order of the arithmetic, not the
signals, put the fact on its side of the line (DeerMem decides on the doubles, so the decision
stands). Near-equal scores elsewhere in the ranking, or on the same side of the line, are not
near ties. The decisions table flags the support fact only (``support_near_tie``), so a count
of near ties is a count of decisions, one per case, setting and capacity, not of pairs of facts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..errors import ContractError
from .base import Decision, Reservation
from .signals import fact_key, is_category

INPUT_ORDER = "input-order"
EXPECTED = "expected"
TIE_BREAKS = (INPUT_ORDER, EXPECTED)
#: A margin this small relative to the scores it separates is a rounding artefact, not a signal.
NEAR_TIE_RELATIVE = 1e-12


def check_tie_break(tie_break: str) -> str:
    if tie_break not in TIE_BREAKS:
        raise ContractError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, got {tie_break!r}")
    return tie_break


def keep_probability(
    *,
    capacity: int,
    reserved_slots: int,
    better_reserved: int,
    better_other: int,
    tied_reserved: int,
    tied_other: int,
    reserved_member: bool,
) -> Fraction:
    """Probability that one member of a tie group is kept when the group is ordered at random.

    ``better_*`` count the facts ranked strictly above the group, ``tied_*`` the group's
    members (the fact itself included), split by whether they belong to the reserved category;
    ``reserved_slots`` is the number of slots the decision reserved (0 without a reservation);
    ``reserved_member`` says which kind the fact is. The pool must be over capacity.
    """
    size = tied_reserved + tied_other
    if size < 1 or (tied_reserved if reserved_member else tied_other) < 1:
        raise ContractError("a tie group must contain the fact it is asked about")
    # Reserved slots go to the best reserved-category facts: q of them to this group.
    taken = min(tied_reserved, max(0, reserved_slots - better_reserved))
    open_above = better_other + max(0, better_reserved - reserved_slots)
    filled = min(max(0, capacity - reserved_slots - open_above), size - taken)
    # Expected reserved-category members among the `filled` unreserved members taken first.
    rest_reserved = tied_reserved - taken
    if taken == 0:
        filled_reserved = Fraction(filled * rest_reserved, size)
    else:
        filled_reserved = Fraction(0)
        arrangements = math.comb(size, tied_reserved)
        # x = other members ahead of the q-th reserved member; they head the unreserved order.
        for ahead in range(tied_other + 1):
            weight = Fraction(
                math.comb(ahead + taken - 1, taken - 1)
                * math.comb(tied_other - ahead + rest_reserved, rest_reserved),
                arrangements,
            )
            if weight and filled > ahead:
                filled_reserved += weight * Fraction(
                    (filled - ahead) * rest_reserved, rest_reserved + tied_other - ahead
                )
    if reserved_member:
        return (taken + filled_reserved) / tied_reserved
    return (filled - filled_reserved) / tied_other


def keep_probabilities(
    facts: Sequence[Any],
    decision: Decision,
    capacity: int,
    reservation: Reservation | None,
    *,
    uniform: bool = False,
) -> list[float]:
    """Each fact's probability of being kept when tied facts are ordered uniformly at random.

    Indexed by input position. ``uniform`` treats every fact as tied (the expectation of a
    policy that ranks by a random draw). A decision whose ranking reports no rank keys (a
    greedy re-ranking such as MMR) has no ties: its probabilities are its decision.
    """
    n = len(facts)
    if n <= capacity:
        return [1.0] * n
    keys = [()] * n if uniform else list(decision.rank_keys)
    if len(keys) != n:
        evicted = {item.fact_id for item in decision.evicted}
        return [0.0 if fact_key(fact, index) in evicted else 1.0 for index, fact in enumerate(facts)]
    in_category = [
        reservation is not None and is_category(fact, reservation.category) for fact in facts
    ]
    groups: dict[Any, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    probabilities = [0.0] * n
    better_reserved = better_other = 0
    for key in sorted(groups):
        members = groups[key]
        tied_reserved = sum(in_category[index] for index in members)
        tied_other = len(members) - tied_reserved
        for kind in (True, False):
            if (tied_reserved if kind else tied_other) == 0:
                continue
            chance = float(
                keep_probability(
                    capacity=capacity,
                    reserved_slots=decision.reserved_correction_slots,
                    better_reserved=better_reserved,
                    better_other=better_other,
                    tied_reserved=tied_reserved,
                    tied_other=tied_other,
                    reserved_member=kind,
                )
            )
            for index in members:
                if in_category[index] == kind:
                    probabilities[index] = chance
        better_reserved += tied_reserved
        better_other += tied_other
    return probabilities


@dataclass(frozen=True)
class TieOutcome:
    """How one fact's fate depends on the order of tied facts."""

    expected: float  # probability of being kept under uniformly random tie orders
    tied: bool  # settled by an exact tie at the cut line (0 < expected < 1 over its rank keys)
    tie_size: int  # facts sharing its rank key, itself included

    def reported(self, tie_break: str, kept: bool) -> float:
        """The retention a table shows: the decision as made, or its expectation."""
        return self.expected if check_tie_break(tie_break) == EXPECTED else float(kept)


def tie_outcome(
    facts: Sequence[Any],
    decision: Decision,
    capacity: int,
    reservation: Reservation | None,
    position: int,
    *,
    uniform: bool = False,
) -> TieOutcome:
    """The :class:`TieOutcome` of the fact at input ``position``."""
    expected = keep_probabilities(facts, decision, capacity, reservation, uniform=uniform)[position]
    # A uniform order is the policy's draw, not a tie: ties are read from the keys it ranked by.
    by_keys = keep_probabilities(facts, decision, capacity, reservation)[position] if uniform else expected
    keys = decision.rank_keys
    size = sum(1 for key in keys if key == keys[position]) if len(keys) == len(facts) else 1
    return TieOutcome(expected, 0.0 < by_keys < 1.0, size)


class CutLine:
    """Where a decision cut the ranking: kept and reserved positions, displacers, margins.

    A kept fact's margin is its score minus the score of the first evicted fact; an evicted
    fact's margin is its score minus its displacer's, the kept fact it would have to outrank:
    the lowest-ranked fact kept on rank alone or, for a fact of the reserved category (which
    could take a reserved slot too), the lowest-ranked kept fact of all.
    """

    def __init__(self, facts: Sequence[Any], decision: Decision, reservation: Reservation | None) -> None:
        self.facts = facts
        self.keys = keys = [fact_key(fact, index) for index, fact in enumerate(facts)]
        self.values = [decision.scores[key].value for key in keys]
        evicted_ids = {item.fact_id for item in decision.evicted}
        ranked_kept = [index for index in decision.ranking if keys[index] not in evicted_ids]
        self.kept = set(ranked_kept)
        self.first_evicted = next(
            (index for index in decision.ranking if keys[index] in evicted_ids), None
        )
        self.category: str | None = None
        self.reserved: set[int] = set()
        if reservation is not None:
            self.category = reservation.category
            candidates = [
                index for index in decision.ranking if is_category(facts[index], self.category)
            ]
            self.reserved = set(candidates[: decision.reserved_correction_slots])
        open_kept = [index for index in ranked_kept if index not in self.reserved]
        self.lowest_open = open_kept[-1] if open_kept else None
        self.lowest_kept = ranked_kept[-1] if ranked_kept else None

    def displacer(self, index: int) -> int | None:
        """The kept fact an evicted fact would replace; None for a kept fact."""
        if index in self.kept:
            return None
        if self.category is not None and is_category(self.facts[index], self.category):
            return self.lowest_kept
        return self.lowest_open

    def reference(self, index: int) -> int | None:
        """The fact a margin is measured against: the first evicted fact, or the displacer."""
        return self.first_evicted if index in self.kept else self.displacer(index)

    def margin(self, index: int) -> float | None:
        reference = self.reference(index)
        return None if reference is None else self.values[index] - self.values[reference]

    def near_tie(self, index: int) -> bool:
        """Whether the fact's margin to its :meth:`reference` fact is a rounding artefact
        (:func:`near_tie`); only that pair is compared. False for a fact without one."""
        reference = self.reference(index)
        if reference is None:
            return False
        first, second = self.values[index], self.values[reference]
        return near_tie(first - second, first, second)


def near_tie(margin: float, first: float, second: float) -> bool:
    """Whether ``margin`` (``first - second``) is non-zero and at most :data:`NEAR_TIE_RELATIVE`
    times the larger magnitude of the two scores; an exact tie (0) or a NaN margin is not."""
    if not math.isfinite(margin) or margin == 0:
        return False
    return abs(margin) <= NEAR_TIE_RELATIVE * max(abs(first), abs(second))


__all__ = [
    "EXPECTED",
    "INPUT_ORDER",
    "NEAR_TIE_RELATIVE",
    "TIE_BREAKS",
    "CutLine",
    "TieOutcome",
    "check_tie_break",
    "keep_probabilities",
    "keep_probability",
    "near_tie",
    "tie_outcome",
]
