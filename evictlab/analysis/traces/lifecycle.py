
"""DeerMem's lifecycle around the cap (spec 1.9, 1.11a-1.15), one pure function per stage.

Each function reads a memory's columns (numpy arrays in stored order, or the few new facts of
one update) and returns what the stage keeps, removes or shows; none mutates its input. What
each stage of :data:`STAGES` does, in spec 1.12 C's order, is in docs/traces.md ("Lifecycle
stages"); :func:`parse_stages` reads ``--lifecycle``. The capacity selection (1.4) is always on
and is the one selector's, not this module's; with every stage off a replay is the cap alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.stores.deermem import stored_category
from ...core.tokens import fact_line, pool_line_tokens
from ...errors import ContractError
from .patterns import detect_signals, is_trivial

STAGES = ("reinforcement", "staleness", "admission", "dedup", "contradiction", "consolidation", "storage", "injection")
#: DeerMem's middleware mode, as production ships it: every stage but consolidation.
MIDDLEWARE = tuple(stage for stage in STAGES if stage != "consolidation")
#: The stages every replay, study, notebook and report runs unless told otherwise (``none``: the cap alone).
DEFAULT_STAGES = frozenset(MIDDLEWARE)
#: Where an unanswerable question's needed fact was lost, one stage each (see :func:`attribute`).
LOSSES = ("rejected", "duplicate", "stale", "contradicted", "evicted", "not_injected", "refused")
LOSS_NAMES = {
    "rejected": "never admitted", "duplicate": "skipped as a duplicate", "stale": "removed as stale",
    "contradicted": "removed as contradicted", "evicted": "evicted by the cap",
    "not_injected": "stored but not injected", "refused": "in an update refused whole",
}
DAY_US = 86_400 * 1_000_000
GATE = (("scope", "user"), ("durability", "durable"), ("authority", "descriptive"))
_UPLOADS = re.compile(r"<(uploaded_files|current_uploads)>.*?</\1>\n*", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class LifecycleConfig:
    """DeerMem's lifecycle settings (spec 1.8 and the constants of 1.15), production defaults."""

    fact_confidence_threshold: float = 0.7
    staleness_age_days: int = 90
    staleness_protected_categories: tuple[str, ...] = ("correction",)
    staleness_min_candidates: int = 3
    staleness_max_removals_per_cycle: int = 10
    staleness_max_lifetime_multiplier: float = 20.0
    max_injection_tokens: int = 2000
    guaranteed_categories: tuple[str, ...] = ("correction",)
    guaranteed_token_budget: int = 500

    @property
    def creation_valid_days_cap(self) -> int:
        """The ``expected_valid_days`` cap of a new fact: int(90 x 20.0) = 1800 (1.12 C5.7)."""
        return int(self.staleness_age_days * self.staleness_max_lifetime_multiplier)


def parse_stages(text: str) -> frozenset[str]:
    """``--lifecycle``: ``middleware`` (the default), ``none`` (the cap alone), or stage names
    separated by commas; ``-NAME`` drops one (``middleware,-injection``)."""
    stages: set[str] = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        drop = item.startswith("-")
        name = item.lstrip("-")
        named = set(MIDDLEWARE) if name == "middleware" else set() if name == "none" else {name}
        if not named <= set(STAGES):
            raise ContractError(f"--lifecycle: unknown stage {name!r}; known: middleware, none, {', '.join(STAGES)}")
        stages = stages - named if drop else stages | named
    if "consolidation" in stages:
        raise ContractError("--lifecycle: consolidation is off in production (spec 1.12 C8) and needs the LLM's"
                            " merge decisions, which a trace does not carry")
    return frozenset(stages)


# --------------------------------------------------------------------------- reinforcement (1.9, 1.12 A)


def filter_messages(messages: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The filtered list of ``(role, text)`` pairs (spec 1.12 A2-A3), in two passes as DeerMem
    runs them: upload blocks stripped from human text, an emptied human turn dropped together
    with the next ``ai`` message, roles other than ``human`` and ``ai`` dropped (A2); then, on
    what is left, a trivial human turn dropped together with the next ``ai`` message (A3)."""
    uploads = [(role, _UPLOADS.sub("", text).strip() if role == "human" else text) for role, text in messages]
    return _drop_with_reply(_drop_with_reply(uploads, lambda text: not text), is_trivial)


def _drop_with_reply(messages: Iterable[tuple[str, str]], drop: Callable[[str], bool]) -> list[tuple[str, str]]:
    """``human`` and ``ai`` messages but the human ones ``drop`` says, each with the next ``ai`` one."""
    kept: list[tuple[str, str]] = []
    drop_next_ai = False
    for role, text in messages:
        if role == "ai":
            if not drop_next_ai:
                kept.append((role, text))
            drop_next_ai = False
        elif role == "human":
            if drop(text):
                drop_next_ai = True
            else:
                kept.append((role, text))
    return kept


def feed_signal(messages: Iterable[tuple[str, str]]) -> bool:
    """Whether the ``reinforcement`` signal fires on an update's feed (spec 1.9, 1.15)."""
    return "reinforcement" in detect_signals(filter_messages(messages))


# --------------------------------------------------------------------------- staleness (1.10, 1.12 C3)


def staleness_candidates(
    reference_us: np.ndarray,
    valid_days: np.ndarray,
    categories: Sequence[str | None] | None,
    now_us: int,
    config: LifecycleConfig = LifecycleConfig(),
    *,
    protected: np.ndarray | None = None,
) -> np.ndarray:
    """Which facts the staleness review may remove: review clock older than ``now`` minus the
    effective age (``valid_days`` when > 0, else ``staleness_age_days``), protected categories
    (raw string, exact match) never. Any shape; ``protected`` (:func:`protected_categories`
    of the categories) may stand for ``categories``."""
    reference_us = np.asarray(reference_us, dtype=np.int64)
    valid = np.asarray(valid_days, dtype=np.int64)
    age = np.where(valid > 0, valid, config.staleness_age_days)
    if protected is None:
        protected = protected_categories(() if categories is None else categories, config)
    return (reference_us < now_us - age * DAY_US) & ~protected


def protected_categories(categories: Sequence[str | None], config: LifecycleConfig = LifecycleConfig()) -> np.ndarray:
    """Which categories staleness never removes (raw string, exact match, 1.11a C6)."""
    protected = config.staleness_protected_categories
    return np.fromiter((category in protected for category in categories), dtype=bool, count=len(categories))


def review_proposals(candidates_in_prompt: np.ndarray, superseded: np.ndarray,
                     config: LifecycleConfig = LifecycleConfig()) -> np.ndarray:
    """The reviewer trace mode models: shown the candidates (only when there are at least
    ``staleness_min_candidates``), it proposes removing those the trace has superseded and
    extends none. Along the last axis (one memory a row)."""
    shown = np.count_nonzero(candidates_in_prompt, axis=-1, keepdims=True) >= config.staleness_min_candidates
    return candidates_in_prompt & superseded & shown


def stale_removals(proposed: np.ndarray, candidates: np.ndarray, confidence: np.ndarray,
                   config: LifecycleConfig = LifecycleConfig(), *,
                   storage_order: np.ndarray | None = None) -> np.ndarray:
    """The facts removed (spec 1.12 C3): proposed and candidates at apply time; above the
    per-cycle limit, the lowest confidences first, ties in the snapshot's order, which is
    storage's (id ascending, 1.14): ``storage_order`` (numbers in id order), else the order given."""
    chosen = np.flatnonzero(np.asarray(proposed) & np.asarray(candidates))
    removed = np.zeros(len(candidates), dtype=bool)
    if len(chosen) > config.staleness_max_removals_per_cycle:
        ties = np.arange(len(chosen)) if storage_order is None else np.asarray(storage_order)[chosen]
        order = np.lexsort((ties, np.asarray(confidence, dtype=float)[chosen]))
        chosen = chosen[order[: config.staleness_max_removals_per_cycle]]
    removed[chosen] = True
    return removed


# --------------------------------------------------------------------------- admission and dedup (1.12 C5)


def label(value: object) -> str | None:
    """A parsed ``scope``/``durability``/``authority``: stripped, lower-cased, kept when non-empty."""
    text = value.strip().lower() if isinstance(value, str) else ""
    return text or None


def gate_reason(scope: object, durability: object, authority: object) -> str:
    """``""`` when the labels pass the scope gate, else ``missing``, ``scope``, ``durability`` or
    ``authority`` (spec 1.12 C5.2: any missing label first, then the three in that order)."""
    labels = (label(scope), label(durability), label(authority))
    if None in labels:
        return "missing"
    return next((name for (name, wanted), value in zip(GATE, labels) if value != wanted), "")


@dataclass(frozen=True)
class NewFact:
    """One ``newFacts`` entry as the update step reads it."""

    key: str
    confidence: float
    scope: str | None = "user"
    durability: str | None = "durable"
    authority: str | None = "descriptive"
    empty: bool = False  # an empty content, which the parser drops (spec 1.12 B7)


def admit(new: Sequence[NewFact], existing_keys: Container[str], *, gate: bool = True, dedup: bool = True,
          config: LifecycleConfig = LifecycleConfig()) -> tuple[list[str], dict[int, str]]:
    """Each new fact's outcome, in order, and the ``replacement`` keys of spec 1.12 C5.5.

    An outcome is ``stored``, ``dropped`` (an empty content, which the parser drops before the
    gates, spec 1.12 B7), a gate reason (``missing``, ``scope``, ``durability``, ``authority``),
    ``confidence`` (below the threshold), ``empty`` (an empty key) or ``duplicate``.
    ``existing_keys`` are the keys of the facts left after the staleness step; ``gate`` (the
    parser's drop, the scope gate and the threshold) and ``dedup`` switch the admission and
    duplicate stages.
    """
    existing = np.array([[fact.key in existing_keys for fact in new]], dtype=bool).reshape(1, len(new))
    outcomes, replacement = admit_many(new, existing, gate=gate, dedup=dedup, config=config)
    return outcomes[0].tolist(), replacement


def admit_many(new: Sequence[NewFact], existing: np.ndarray, *, gate: bool = True, dedup: bool = True,
               config: LifecycleConfig = LifecycleConfig()) -> tuple[np.ndarray, dict[int, str]]:
    """:func:`admit` for many memories at once: ``existing`` (M, new facts) says whether each
    new fact's key is among a memory's keys; the outcomes (M, new facts, strings) and the
    ``replacement`` keys (the same for every memory)."""
    outcomes = np.full(existing.shape, "stored", dtype=object)
    replacement: dict[int, str] = {}
    batch: dict[str, np.ndarray] = {}  # the memories that stored a new fact of the key
    for index, fact in enumerate(new):
        reason = ("dropped" if fact.empty else gate_reason(fact.scope, fact.durability, fact.authority)) if gate else ""
        if not reason and gate and not fact.confidence >= config.fact_confidence_threshold:
            reason = "confidence"
        if not reason and not fact.key:
            reason = "empty"
        if reason:
            outcomes[:, index] = reason
            continue
        replacement[index] = fact.key
        stored = np.ones(len(existing), dtype=bool)
        if dedup:
            stored = ~(existing[:, index] | batch.get(fact.key, False))
            outcomes[~stored, index] = "duplicate"
        batch[fact.key] = batch.get(fact.key, False) | stored
    return outcomes, replacement


def refusal(new: Sequence[NewFact], removals: bool, stages: Container[str],
            config: LifecycleConfig = LifecycleConfig()) -> str | None:
    """Why DeerMem refuses an update whole (nothing applied, the watermark left), or ``None``:

    * ``parse``: an entry was dropped while ``factsToRemove`` (``removals``) is non-empty, the
      unsafe-partial rule of spec 1.12 B8 (with the ``admission`` and ``contradiction`` stages);
    * ``storage``: a fact that passes the parser, the gates and the batch's duplicate skip has a
      confidence outside [0, 1], which storage refuses (C5, D3, 1.14; the ``storage`` stage).

    Decided on the update alone, for every memory: a fact a memory skips as a duplicate of one it
    holds, or evicts by the cap, would not reach storage in DeerMem (docs/traces.md)."""
    gate = "admission" in stages
    if gate and removals and "contradiction" in stages and any(fact.empty for fact in new):
        return "parse"
    if "storage" not in stages or all(0 <= fact.confidence <= 1 for fact in new):
        return None  # nothing storage refuses: no second admission pass on an ordinary write
    outcomes, _ = admit_many(new, np.zeros((1, len(new)), dtype=bool), gate=gate, dedup="dedup" in stages,
                             config=config)
    if any(outcome == "stored" and not 0 <= fact.confidence <= 1 for outcome, fact in zip(outcomes[0], new)):
        return "storage"
    return None


def parsed_category(category: str) -> str:
    """A ``newFacts`` entry's category as the response parser keeps it: stripped, or ``context``
    when that leaves nothing (spec 1.12 B7)."""
    return category.strip() or "context"


def creation_valid_days(value: int | None, config: LifecycleConfig = LifecycleConfig()) -> int | None:
    """A new fact's ``expected_valid_days``: positive values capped at 1800, else absent (1.12 C5.7)."""
    return min(value, config.creation_valid_days_cap) if value is not None and value > 0 else None


# --------------------------------------------------------------------------- contradiction (1.12 C7)


def contradiction_removals(entries: Sequence[tuple[int | None, int | None]], keys: np.ndarray,
                           held: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What ``factsToRemove`` removes after the capacity selection, for one or many memories.

    ``entries`` are ``(target, key)`` in order (scope and reason already passed): ``target`` is
    the position of the named fact among ``keys`` (``None``: an id no position has, so no memory holds it),
    ``key`` the content-key code its replacement must have (``None``: a pure retraction; ``-1``:
    its ``replacementFactIndex`` names no stored fact). ``keys`` are the content-key codes of
    the positions and ``held`` (..., positions) which ones each memory holds after the cap. A
    paired entry removes its target only when some held fact other than the target has the
    replacement's key, on what the earlier entries left; otherwise it is refused. Unknown ids
    remove nothing, and nothing is back-filled. Returns the removed positions (like ``held``)
    and the entries refused per memory.
    """
    held = np.array(held, dtype=bool)
    removed = np.zeros_like(held)
    refused = np.zeros(held.shape[:-1], dtype=np.int64)
    for target, key in entries:
        passes: np.ndarray = np.ones(held.shape[:-1], dtype=bool)
        if key is not None:
            others = np.asarray(keys) == key
            if target is not None:
                others[target] = False
            passes = np.asarray(held[..., others].any(axis=-1))
            refused += ~passes
        if target is not None:
            gone = passes & held[..., target]
            held[..., target] &= ~gone
            removed[..., target] = gone
    return removed, refused


# --------------------------------------------------------------------------- injection (1.13)


def written_category(category: str) -> str:
    """A ``newFacts`` entry's category as storage writes it: the parser's (:func:`parsed_category`),
    rewritten by :func:`stored_category`; what its injection line prints, since ``get_context``
    reads the stored document (spec 1.13)."""
    return stored_category(parsed_category(category))


def line_tokens(category: str, confidence: float, content_length: int) -> int:
    """A generated fact's token count: an ASCII line of that content length, with the category
    storage writes (:func:`written_category`), as a later line (``\\n`` + line) under the
    character rule of spec 1.13; the trace keeps no text."""
    return pool_line_tokens(fact_line(written_category(category), confidence, "x" * content_length))


def first_line_tokens(category: str, confidence: float, content_length: int, tokens: int | None = None) -> int:
    """The same line counted alone, as the first line of a pool is (spec 1.13): without ``tokens``,
    the character rule on :func:`line_tokens`' ASCII line; from a trace's ``tokens`` (the line
    counted as a later one), those less what the ``\\n`` adds to that ASCII line under the character
    rule (exact for the generator's counts; docs/traces.md says what it assumes of others)."""
    line = fact_line(written_category(category), confidence, "x" * content_length)
    alone = pool_line_tokens(line, first=True)
    return alone if tokens is None else max(0, tokens - (pool_line_tokens(line) - alone))


def _greedy(members: np.ndarray, first: np.ndarray, later: np.ndarray, budget: Any) -> tuple[np.ndarray, np.ndarray]:
    """The ``members`` (along the last axis, in order) that fit ``budget`` (one per row), and
    the tokens they use: strict, the first line that does not fit ends it; the first member
    costs ``first``, the others ``later``."""
    budget = np.asarray(budget)[..., None]
    leading = members & (np.cumsum(members, axis=-1) == 1)
    costs = np.where(leading, first, np.where(members, later, 0))
    over = members & (np.cumsum(costs, axis=-1) > budget)
    taken = members & (np.cumsum(over, axis=-1) == 0) & (budget > 0)
    return taken, np.where(taken, costs, 0).sum(axis=-1)


def guaranteed_pool(categories: Iterable[object], config: LifecycleConfig = LifecycleConfig()) -> np.ndarray:
    """Which facts enter the guaranteed pool: a string category that, stripped, is one of the
    stripped ``guaranteed_categories`` (case-sensitive; a missing category never does)."""
    wanted = {name.strip() for name in config.guaranteed_categories}
    return np.array([isinstance(category, str) and category.strip() in wanted for category in categories], dtype=bool)


def injection_value(confidence: np.ndarray) -> np.ndarray:
    """The confidence ``get_context`` ranks by: NaN and infinities as 0.0, clamped to [0, 1]."""
    return np.clip(np.nan_to_num(np.asarray(confidence, dtype=float), nan=0.0, posinf=0.0, neginf=0.0), 0.0, 1.0)


def injected(
    guaranteed: np.ndarray,
    confidence: np.ndarray,
    first_tokens: np.ndarray,
    later_tokens: np.ndarray,
    *,
    config: LifecycleConfig = LifecycleConfig(),
    preceding_tokens: int = 0,
    header_tokens: int = 1,
    newline_tokens: int = 0,
) -> np.ndarray:
    """The positions of the facts ``get_context`` injects (spec 1.13), in the order it prints
    them, from facts in storage order (id ascending); ``guaranteed`` from :func:`guaranteed_pool`,
    ``confidence`` as floats (NaN and infinities sort as 0.0).

    ``first_tokens`` is a line counted alone, ``later_tokens`` as ``\\n`` + line; the header
    ``Facts:\\n`` and ``\\n`` count ``header_tokens`` and ``newline_tokens`` (1 and 0 under the
    character rule), the summaries before the facts ``preceding_tokens``. The regular budget is
    charged the guaranteed lines as the sum of their counts.
    """
    ranked = np.argsort(-injection_value(confidence), kind="stable")
    pool = np.asarray(guaranteed, dtype=bool)[ranked]
    first, later = (np.asarray(tokens, dtype=np.int64)[ranked] for tokens in (first_tokens, later_tokens))
    shown = injected_in_order(np.ones(len(ranked), dtype=bool), pool, first, later, config,
                              (preceding_tokens, header_tokens, newline_tokens))
    return np.concatenate((ranked[shown & pool], ranked[shown & ~pool]))


def injected_in_order(members: np.ndarray, guaranteed: np.ndarray, first_tokens: np.ndarray,
                      later_tokens: np.ndarray, config: LifecycleConfig = LifecycleConfig(),
                      fixed: tuple[int, int, int] = (0, 1, 0)) -> np.ndarray:
    """Which facts :func:`injected` shows, for facts already in ``get_context``'s ranking
    (:func:`injection_value` descending, then id) along the last axis, ``members`` saying which
    are in memory (one memory a row); ``fixed`` is (preceding, header, newline) tokens, the
    other arguments are :func:`injected`'s."""
    preceding_tokens, header_tokens, newline_tokens = fixed
    special, used = _greedy(members & guaranteed, first_tokens, later_tokens, config.guaranteed_token_budget)
    charged = preceding_tokens + header_tokens + used + np.where(special.any(axis=-1), newline_tokens, 0)
    regular, _ = _greedy(members & ~guaranteed, first_tokens, later_tokens, config.max_injection_tokens - charged)
    return special | regular


# --------------------------------------------------------------------------- attribution


def attribute(answerable: bool, fate: str | None, in_memory: bool) -> str | None:
    """The one stage an unanswerable question is lost to (:data:`LOSSES`), ``None`` when answered.

    ``fate`` is how the needed fact left (or never entered) memory: a :data:`LOSSES` name, or
    ``None`` when it was never offered to memory (counted as ``rejected``); a fact still in
    memory and not shown is ``not_injected``.
    """
    if answerable:
        return None
    if in_memory:
        return "not_injected"
    return fate if fate in LOSSES else "rejected"
