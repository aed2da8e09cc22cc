"""Composable modifiers (docs/policies.md section 1): a rule applied on top of any base policy.

Each modifier wraps a :class:`~evictlab.policies.base.Policy` and is itself a policy, so
modifiers stack and can be ablated one at a time:

* :func:`with_category_reservation` holds ``min(maximum, ceil(fraction * k))`` slots for the
  top-ranked facts of one category, exactly as DeerMem holds them for corrections;
* :func:`with_redundancy_penalty` re-ranks greedily by ``base score - lam * max similarity to
  the facts already ranked`` (MMR), similarity = token Jaccard of ``content``.

Every command that takes a policy reads it as a spec string with :func:`resolve_policy`::

    SPEC     = BASE ( "+" MODIFIER )*
    BASE     = NAME [ "(" PARAMETER "=" NUMBER ( "," PARAMETER "=" NUMBER )* ")" ]
    NAME     = a registered policy name (``known_policies()``)
    MODIFIER = "reserve(" CATEGORY [ "," FRACTION "," MAXIMUM ] ")"    defaults 0.1, 10
             | "mmr(" [ LAMBDA ] ")"                                  default 0.5

A base's parameters are those its policy declares (``lfu-aging(half_life_days=7)``; see
:class:`~evictlab.policies.base.Parameter`). Modifiers apply left to right, each on top of
everything before it, as in ``lru+reserve(correction,0.1,10)``, ``confidence+mmr(0.5)`` or
``hybrid-v1+mmr()+reserve(correction)``. Spaces around names and arguments are ignored. A
policy's ``name`` is its canonical spec (``confidence+mmr(0.5)``), which
:func:`resolve_policy` reads back to the same policy. Modified policies are not registered:
:func:`~evictlab.policies.registry.get_policy` knows the base names only.

A list of specs (``--policies``) is split by :func:`split_list` at the commas outside
parentheses, so ``lru+reserve(correction,0.1,10),fifo`` is two policies.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ContractError
from ._zoo import KeyedPolicy, RankKey, rank_key_of
from .arrays import Params, Signals
from .base import (
    Decision,
    Policy,
    Reservation,
    Score,
    SelectionContext,
    _require_count,
    _require_real,
    select_by_rank,
)
from .registry import get_policy
from .signals import fact_fields, fact_key

DEFAULT_RESERVED_FRACTION = 0.10
DEFAULT_RESERVED_MAXIMUM = 10
DEFAULT_REDUNDANCY_LAMBDA = 0.5

_TOKEN = re.compile(r"\w+")
_MODIFIER = re.compile(r"(?P<name>[a-z]+)\((?P<arguments>[^()]*)\)")
_BASE = re.compile(r"(?P<name>[^()+,=\s]+)\s*(?:\((?P<arguments>[^()]*)\))?")


class ModifiedPolicy(KeyedPolicy):
    """A base policy with one modifier on top; it ranks ties and tiers as its base does."""

    def __init__(self, base: Policy, name: str, summary: str) -> None:
        self.base = base
        # Instance attributes: a modified policy's name depends on its base and arguments.
        self.name = name
        self.summary = summary
        self.component_names = base.component_names
        self.default_tie_break = base.default_tie_break
        self.uniform_order = base.uniform_order
        # What the decision depends on is the base's.
        self.reads_params = base.reads_params
        self.seeded = base.seeded
        self.value_key = base.value_key
        self.admission = base.admission

    @property
    def vectorised(self) -> bool:
        return self.base.vectorised

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        return self.base.rank_keys(signals, params)

    def rank_key(self, score: Score) -> RankKey:
        return rank_key_of(self.base, score)

    def reservation(self, context: SelectionContext) -> Reservation | None:
        return self.base.reservation(context)

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        return self.base.score(facts, context)


def base_view(
    policy: Policy, facts: Sequence[Any], capacity: int, context: SelectionContext
) -> tuple[list[Score], list[int], tuple[RankKey, ...]]:
    """A policy's scores by input position, its full rank order (best first) and its rank keys."""
    decision = policy.select(facts, capacity, context)
    if sorted(decision.ranking) != list(range(len(facts))):
        raise ContractError(
            f"policy {policy.name!r} reports no full ranking; a modifier cannot re-rank it"
        )
    scores = [decision.scores[fact_key(fact, index)] for index, fact in enumerate(facts)]
    return scores, list(decision.ranking), decision.rank_keys


# --- category reservation ------------------------------------------------------------------


class ReservedPolicy(ModifiedPolicy):
    """The base's rank order with slots held for one category (spec 1.4 step 4).

    The reservation replaces one the base already makes for the same category (so
    ``hybrid-v1+reserve(correction,0.2,10)`` changes DeerMem's fraction); a base that reserves
    a different category is refused, because only one category can be reserved.
    """

    def __init__(self, base: Policy, reservation: Reservation) -> None:
        name = (
            f"{base.name}+reserve({reservation.category},{reservation.fraction!r},"
            f"{reservation.maximum})"
        )
        summary = (
            f"{base.name} with min({reservation.maximum}, ceil({reservation.fraction!r} * k))"
            f" slots reserved for {reservation.category!r} facts."
        )
        super().__init__(base, name, summary)
        self._reservation = reservation

    def reservation(self, context: SelectionContext) -> Reservation:
        own = self.base.reservation(context)
        if own is not None and own.category != self._reservation.category:
            raise ContractError(
                f"{self.name}: {self.base.name!r} already reserves {own.category!r} slots;"
                " only one category can be reserved"
            )
        return self._reservation

    def select(self, facts: Sequence[Any], capacity: int, context: SelectionContext) -> Decision:
        reservation = self.reservation(context)
        scores, ranked, keys = base_view(self.base, facts, capacity, context)
        return select_by_rank(facts, scores, capacity, reservation, self.name, ranked, keys or None)


def with_category_reservation(
    base: Policy,
    category: str,
    fraction: float = DEFAULT_RESERVED_FRACTION,
    maximum: int = DEFAULT_RESERVED_MAXIMUM,
) -> Policy:
    """``base`` keeping ``min(maximum, ceil(fraction * k))`` slots for ``category`` facts.

    ``category`` is compared as DeerMem compares it (stripped, lower-cased); ``fraction``
    must lie in [0, 1] and ``maximum`` be an integer >= 0.
    """
    if not isinstance(category, str) or not category.strip():
        raise ContractError(f"reserved category must be a non-empty string, got {category!r}")
    share = float(_require_real("reserved fraction", fraction))
    if not 0.0 <= share <= 1.0:
        raise ContractError(f"reserved fraction must be in [0, 1], got {fraction!r}")
    maximum = _require_count("reserved maximum", maximum)
    return ReservedPolicy(base, Reservation(category.strip().lower(), share, maximum))


# --- redundancy penalty (MMR) ----------------------------------------------------------------


def content_tokens(fact: Any) -> frozenset[str]:
    """Lower-cased word tokens of a fact's ``content`` (none when it is not a string)."""
    content = fact_fields(fact).get("content")
    return frozenset(_TOKEN.findall(content.lower())) if isinstance(content, str) else frozenset()


def jaccard(first: frozenset[str], second: frozenset[str]) -> float:
    """Token Jaccard similarity; 0 when both token sets are empty."""
    union = len(first | second)
    return len(first & second) / union if union else 0.0


class RedundancyPenaltyPolicy(ModifiedPolicy):
    """Greedy maximal-marginal-relevance ranking over the base's scores.

    Step by step, the next fact is the one whose penalised score ``value - lam * redundancy``
    ranks best under the base's own rank key (so a base's tiers, such as ``oracle``'s support
    facts, still come first), where redundancy is the fact's highest token Jaccard similarity
    to any fact ranked before it. Ties go to the earlier fact in the base's rank order. The
    reported score is the penalised value, with the redundancy as an extra component.
    ``lam`` is in the base's score units (DeerMem's scores lie in [0, 1]).
    """

    def __init__(self, base: Policy, lam: float) -> None:
        super().__init__(
            base,
            f"{base.name}+mmr({lam!r})",
            f"{base.name} re-ranked with a redundancy penalty of {lam!r} x token Jaccard.",
        )
        self.component_names = (*base.component_names, "redundancy")
        self.lam = lam
        # The greedy order is no longer a random draw, and it reports no rank keys (no ties).
        self.uniform_order = False

    @property
    def vectorised(self) -> bool:
        return False  # each step depends on the facts ranked before it: no keys express it

    def rank_keys(self, signals: Signals, params: Params) -> tuple[np.ndarray, ...]:
        raise NotImplementedError(f"{self.name}: a greedy re-ranking has no rank keys; it is decided by select()")

    def score(self, facts: Sequence[Any], context: SelectionContext) -> list[Score]:
        return self.rerank(facts, len(facts), context)[0]

    def select(self, facts: Sequence[Any], capacity: int, context: SelectionContext) -> Decision:
        scores, order = self.rerank(facts, capacity, context)
        return select_by_rank(facts, scores, capacity, self.reservation(context), self.name, order)

    def rerank(
        self, facts: Sequence[Any], capacity: int, context: SelectionContext
    ) -> tuple[list[Score], list[int]]:
        """Penalised scores by input position, and the greedy rank order."""
        base_scores, remaining, _ = base_view(self.base, facts, capacity, context)
        tokens = [content_tokens(fact) for fact in facts]
        redundancy = [0.0] * len(facts)
        penalised: list[Score] = list(base_scores)
        order: list[int] = []
        while remaining:
            for index in remaining:
                penalised[index] = self._penalise(base_scores[index], redundancy[index])
            # min() returns the first of equal keys: ties go to the base's rank order.
            best = min(remaining, key=lambda index: self.rank_key(penalised[index]))
            remaining.remove(best)
            order.append(best)
            for index in remaining:
                redundancy[index] = max(redundancy[index], jaccard(tokens[index], tokens[best]))
        return penalised, order

    def _penalise(self, score: Score, redundancy: float) -> Score:
        components = {**score.components, "redundancy": redundancy}
        return Score(score.value - self.lam * redundancy, components)


def with_redundancy_penalty(base: Policy, lam: float = DEFAULT_REDUNDANCY_LAMBDA) -> Policy:
    """``base`` re-ranked by MMR with penalty weight ``lam`` (finite, >= 0)."""
    weight = float(_require_real("redundancy lambda", lam))
    if weight < 0:
        raise ContractError(f"redundancy lambda must be >= 0, got {lam!r}")
    return RedundancyPenaltyPolicy(base, weight)


# --- specs ---------------------------------------------------------------------------------


def split_list(text: str, separator: str = ",") -> list[str]:
    """The items of ``text`` separated by ``separator`` outside parentheses, stripped; blank ones dropped.

    ``"lru+reserve(correction,0.1,10), fifo"`` -> ``["lru+reserve(correction,0.1,10)", "fifo"]``.
    Unbalanced parentheses are a :class:`ContractError`.
    """
    return [item for item in _split_top_level(text, separator) if item]


def _split_top_level(text: str, separator: str) -> list[str]:
    items, depth, start = [], 0, 0
    for index, character in enumerate(text):
        if character == "(":
            depth += 1
        elif character == ")":
            depth -= 1
            if depth < 0:
                raise ContractError(f"{text!r}: a ')' at position {index} closes nothing")
        elif character == separator and depth == 0:
            items.append(text[start:index].strip())
            start = index + 1
    if depth:
        raise ContractError(f"{text!r}: {depth} '(' not closed")
    items.append(text[start:].strip())
    return items


def resolve_policy(spec: str | Policy) -> Policy:
    """The policy a spec string names (grammar in the module docstring); a policy is its own.

    A spec is parsed once per process (policies do not change once built, so one object serves
    every caller). Raises :class:`~evictlab.errors.UnknownPolicyError` for an unknown base name
    and :class:`ContractError` for parameters or a modifier it cannot read, naming the spec.
    """
    return spec if isinstance(spec, Policy) else _parsed(spec)


@functools.cache
def _parsed(spec: str) -> Policy:
    base, *modifiers = _split_top_level(spec, "+")
    policy = _base_policy(base, spec)
    for text in modifiers:
        match = _MODIFIER.fullmatch(text)
        if match is None or match["name"] not in _BUILDERS:
            raise ContractError(
                f"cannot read modifier {text!r} in policy spec {spec!r}; expected"
                " reserve(CATEGORY[,FRACTION,MAXIMUM]) or mmr([LAMBDA])"
            )
        arguments = [item.strip() for item in match["arguments"].split(",")]
        if arguments == [""]:
            arguments = []
        policy = _BUILDERS[match["name"]](policy, arguments, spec)
    return policy


def _base_policy(text: str, spec: str) -> Policy:
    """``NAME`` or ``NAME(PARAMETER=NUMBER, ...)``: the registered policy with those parameters."""
    match = _BASE.fullmatch(text)
    if match is None:
        if "(" not in text:
            return get_policy(text)  # an unknown name: the error lists the known ones
        raise ContractError(
            f"cannot read policy {text!r} in policy spec {spec!r}; expected NAME or NAME(PARAMETER=VALUE,...)"
        )
    params: dict[str, Any] = {}
    for item in split_list(match["arguments"] or ""):
        name, equals, value = (part.strip() for part in item.partition("="))
        if not equals or not name:
            raise ContractError(f"cannot read parameter {item!r} in policy spec {spec!r}; expected PARAMETER=VALUE")
        if name in params:
            raise ContractError(f"parameter {name} given twice in policy spec {spec!r}")
        params[name] = _parse(_number, value, f"parameter {name}", spec)
    try:
        return get_policy(match["name"], **params)
    except ContractError as error:
        raise ContractError(f"{error} (in policy spec {spec!r})") from None


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _build_reservation(base: Policy, arguments: list[str], spec: str) -> Policy:
    if len(arguments) == 1:
        return with_category_reservation(base, arguments[0])
    if len(arguments) == 3:
        category, fraction, maximum = arguments
        return with_category_reservation(
            base,
            category,
            _parse(float, fraction, "reserve fraction", spec),
            _parse(int, maximum, "reserve maximum", spec),
        )
    raise ContractError(
        f"reserve() takes CATEGORY or CATEGORY,FRACTION,MAXIMUM in policy spec {spec!r}"
    )


def _build_redundancy_penalty(base: Policy, arguments: list[str], spec: str) -> Policy:
    if not arguments:
        return with_redundancy_penalty(base)
    if len(arguments) == 1:
        return with_redundancy_penalty(base, _parse(float, arguments[0], "mmr lambda", spec))
    raise ContractError(f"mmr() takes at most one argument (LAMBDA) in policy spec {spec!r}")


_BUILDERS: dict[str, Callable[[Policy, list[str], str], Policy]] = {
    "reserve": _build_reservation,
    "mmr": _build_redundancy_penalty,
}


def _parse(kind: Callable[[str], Any], text: str, what: str, spec: str) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise ContractError(f"{what} {text!r} is not a number in policy spec {spec!r}") from None
