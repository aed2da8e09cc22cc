"""Helpers shared by the policies beyond DeerMem (the "zoo", docs/policies.md section 1).

They read the extra signals those policies use from DeerMem-shaped facts and usage entries,
never raising on malformed values (like :mod:`.signals`), deal seeded per-case randomness,
and select along a rank order that is not plain "score descending, then input position".

Time rules common to every zoo policy: ages are fractional days ``(now - ts) / 86400 s``; a
timestamp in the future counts as now (age 0), as DeerMem's decay does; a fact with no
readable timestamp is infinitely old (age ``inf``), so every decayed term of it is 0 and it is
the oldest under FIFO and LRU.

This module starts with an underscore, so the package does not import it as a policy module.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .base import (
    Decision,
    Policy,
    Score,
    SelectionContext,
    select_by_rank,
)
from .signals import elapsed_days, fact_fields, fact_key, parse_timestamp, read_count

RankKey = tuple[float, ...]


# --- reading signals --------------------------------------------------------------------------


def usage_entries(facts: Sequence[Any], context: SelectionContext) -> list[Mapping[str, Any]]:
    """Each fact's usage entry (looked up by :func:`fact_key`); ``{}`` when absent or malformed."""
    usage = context.usage if isinstance(context.usage, Mapping) else {}
    entries = []
    for index, fact in enumerate(facts):
        entry = usage.get(fact_key(fact, index))
        entries.append(entry if isinstance(entry, Mapping) else {})
    return entries


def access_count(entry: Mapping[str, Any]) -> int:
    """``accessCount`` of a usage entry: the number of searches that returned the fact."""
    return read_count(entry.get("accessCount"))


def confirmation_count(fact: Any) -> int:
    """``confirmationCount`` of a fact: the number of explicit user confirmations."""
    return read_count(fact_fields(fact).get("confirmationCount"))


def days_since(now: _dt.datetime, *values: Any) -> float:
    """Days from the first readable timestamp among ``values`` (a fallback chain) to ``now``.

    A future timestamp gives 0; ``inf`` when none of the values is a readable timestamp.
    """
    for value in values:
        moment = parse_timestamp(value)
        if moment is not None:
            return max(0.0, elapsed_days(now, moment))
    return math.inf


def days_since_latest(now: _dt.datetime, *values: Any) -> float:
    """Days since the most recent readable timestamp among ``values``; ``inf`` when none reads."""
    return min((days_since(now, value) for value in values), default=math.inf)


def last_access_days(fact: Any, entry: Mapping[str, Any], now: _dt.datetime) -> float:
    """Days since the usage entry's ``lastAccessedAt``, falling back to the fact's ``createdAt``.

    A fact never returned by a search counts as last accessed when it was created.
    """
    return days_since(now, entry.get("lastAccessedAt"), fact_fields(fact).get("createdAt"))


def min_max(values: Sequence[float]) -> list[float]:
    """Min-max normalisation into [0, 1] over the pool; a constant term normalises to 0."""
    if not values:
        return []
    low, high = min(values), max(values)
    if high == low:
        return [0.0] * len(values)
    return [(value - low) / (high - low) for value in values]


def flag(condition: bool) -> float:
    """A yes/no signal as a component value (components dicts hold floats)."""
    return 1.0 if condition else 0.0


# --- seeded randomness --------------------------------------------------------------------------


def seeded_draws(namespace: str, facts: Sequence[Any], seed: int) -> list[float]:
    """One uniform draw in [0, 1) per fact, fixed by ``namespace``, ``seed`` and the fact ids.

    The generator is seeded with the first 8 bytes of SHA-256 over the JSON list
    ``[namespace, seed, sorted fact ids]`` (never Python's ``hash()``, which is salted per
    process), and the draws are dealt in sorted-id order, so a fact's draw follows its id and
    not its position in the input. Every fact's draw depends on every id in the snapshot.
    """
    return draws_for_keys(namespace, [fact_key(fact, index) for index, fact in enumerate(facts)], seed).tolist()


def draws_for_keys(namespace: str, keys: Sequence[str], seed: int) -> np.ndarray:
    """:func:`seeded_draws` for facts scored under ``keys``, by position (an array).

    The draws are ``random.Random.random()``'s, taken from its 32-bit outputs at once
    (``getrandbits``: outputs in order, the first lowest) and combined as ``random()`` combines
    each pair, ``(a >> 5) * 2**26 + (b >> 6)`` over 2**53, exact in doubles. The JSON material
    is ``json.dumps``', its id list joined directly when no id holds a character JSON escapes.
    """
    ordered = sorted(keys)
    try:
        plain = bool(ordered) and not _ESCAPED.search("".join(ordered))
    except TypeError:  # not all strings: json.dumps says what
        plain = False
    if plain:
        joined = '", "'.join(ordered)
        material = json.dumps([namespace, seed, []], ensure_ascii=False)[:-3] + f'["{joined}"]]'
    else:
        material = json.dumps([namespace, seed, ordered], ensure_ascii=False)
    digest = hashlib.sha256(material.encode("utf-8")).digest()
    bits = random.Random(int.from_bytes(digest[:8], "big")).getrandbits(64 * len(ordered))
    words = np.frombuffer(bits.to_bytes(8 * len(ordered), "little"), dtype="<u4").astype(np.int64)
    draws = ((words[0::2] >> 5) * 67108864.0 + (words[1::2] >> 6)) * (1.0 / 9007199254740992.0)
    by_key = dict(zip(ordered, draws.tolist()))  # a repeated key keeps its last draw
    return np.fromiter(map(by_key.__getitem__, keys), dtype=np.float64, count=len(keys))


# Characters ``json.dumps(..., ensure_ascii=False)`` writes as escapes.
_ESCAPED = re.compile(r'["\\\x00-\x1f]')


# --- selection along a rank order ------------------------------------------------------------


def rank_positions(keys: Sequence[RankKey]) -> list[int]:
    """Input positions sorted by their key, ascending; the input position breaks every tie."""
    return sorted(range(len(keys)), key=lambda index: (*keys[index], index))


class KeyedPolicy(Policy):
    """A policy ranked by :meth:`rank_key` of each score (ascending), then input position.

    The default key is ``(-value,)``, DeerMem's order; a subclass puts tiers in front of it
    (for example "expired facts last") or a tie-break after it, read from the components.
    """

    def rank_key(self, score: Score) -> RankKey:
        return (-score.value,)

    def select(self, facts: Sequence[Any], capacity: int, context: SelectionContext) -> Decision:
        scores = self.score(facts, context)
        keys = [self.rank_key(score) for score in scores]
        return select_by_rank(
            facts, scores, capacity, self.reservation(context), self.name, rank_positions(keys), keys
        )


def rank_key_of(policy: Policy, score: Score) -> RankKey:
    """``policy.rank_key(score)`` for a keyed policy, DeerMem's ``(-value,)`` for any other."""
    if isinstance(policy, KeyedPolicy):
        return policy.rank_key(score)
    return (-score.value,)
