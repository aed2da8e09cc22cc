"""The seeded workload generator: synthetic memory traces (knowledge updates from a dataset: :mod:`.knowledge`).

:func:`generate` draws one trace from :class:`WorkloadParams` and a seed (numpy's PCG64), so
the same parameters and seed give the same rows, and :func:`~.schema.write_trace` the same
bytes. The model, in the order it is drawn:

* **threads**: a topic the user talks about. ``facts_per_day`` new threads arrive per day
  (a Poisson process over ``horizon_days``). Each has an importance ``u ~ U(0, 1)`` and a
  popularity ``w = r ** -zipf_skew`` with ``r`` uniform on 1..1000 (Zipf-like), a category
  from ``category_mix`` and a first fact whose confidence is the extractor's noisy view of the
  importance: ``round(clip(0.7 + 0.3 * (u + N(0, confidence_noise)), 0.7, 1.0), 2)`` (stored
  facts clear DeerMem's 0.7 threshold).
* **updates**: ``correction_rate`` corrections and ``knowledge_update_rate`` knowledge updates
  per day each pick a thread already started (by popularity) and add a fact that supersedes
  the thread's current fact; a correction has category ``correction`` and confidence
  ``U(0.9, 1.0)``, a knowledge update keeps the category and draws its confidence as above.
* **questions**: ``question_rate`` questions per day are shared among threads in proportion to
  ``u * w`` (important and popular topics are asked about); each is asked
  ``Exp(question_delay_days)`` after its thread started, needs the thread's fact current at that
  moment, and names the fact that one superseded, if any.
* **searches**: ``search_rate`` per day, each returning up to ``search_results`` current facts
  of threads drawn by popularity.
* **confirmations**: ``confirmation_rate`` per day, each naming the current fact of a thread
  drawn by popularity, with the reinforcement signal detected; a share
  ``false_confirmation_rate`` names a random other fact instead (spec 1.9's gate is
  batch-level, so a wrong id is confirmed all the same).
* a ``tick`` at every midnight.

Then, from a second random stream (so the rows above are the same with or without them):

* **messages**: each confirmation is said in one human ``message`` at its second, drawn from
  the labelled set of :mod:`.patterns`: a confirming one, or for a false confirmation one
  that does not confirm (near misses, negations, traps), which the lifecycle's text gate
  passes only when a pattern fires anyway;
* **labels**: a share ``label_failure_rate`` of new facts fail the scope gate (a missing
  label, or scope ``thread``, durability ``temporary`` or authority ``transactional``,
  equally often); the others are ``user``/``durable``/``descriptive``;
* **re-extractions**: ``reextraction_rate`` per day, a thread's current fact extracted
  again (a new id with the same ``content_key``, spec 1.12's duplicate);
* each fact's ``tokens``: its injection line under the character rule, with the category storage
  writes (``knowledge`` prints as ``other``; :func:`.lifecycle.line_tokens`);
* each fact's ``ask_rate``: the questions per day the model expects about its thread at the
  fact's second, ``n / d * exp(-(t - start) / d)`` for a thread of ``n`` expected questions and
  the mean delay ``d`` (``ask_decay_days``): what the rate-aware bound may know (no draw).

Rows at the same second are ordered tick, message, confirm, add, search, ask. Fact ids are
``f000000``, ``f000001``, ... in the order facts are added; a fact's ``content_key`` is the id of
the fact it repeats, else its own.
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ...errors import ContractError
from ...times import read_iso
from .lifecycle import line_tokens
from .patterns import read_labelled
from .schema import ADD, ASK, CONFIRM, MESSAGE, SEARCH, TICK, Chunk, chunk_from_rows, time_us

SECOND = 1_000_000
DAY_SECONDS = 86_400
#: Same-second order of event kinds.
KIND_ORDER = {TICK: 0, MESSAGE: 1, CONFIRM: 2, ADD: 3, SEARCH: 4, ASK: 5}
#: The labels of a fact that fails the scope gate, one of these equally often (spec 1.12 C5.2).
FAILED_LABELS = (("", "durable", "descriptive"), ("thread", "durable", "descriptive"),
                 ("user", "temporary", "descriptive"), ("user", "durable", "transactional"))
PASSING_LABELS = ("user", "durable", "descriptive")
POPULARITY_RANKS = 1000
#: Events (rows plus search results) a generated trace may be expected to hold; ``max_events`` raises it.
MAX_TRACE_EVENTS = 5_000_000
#: Longest horizon and mean question delay: the calendar's range, not a work bound.
MAX_DAYS = 3_652_425  # 10,000 years
LAST_TIME = _dt.datetime(9999, 12, 31, tzinfo=_dt.UTC)
DEFAULT_CATEGORY_MIX = (("preference", 0.35), ("knowledge", 0.3), ("context", 0.25), ("behavior", 0.1))

#: What each parameter means, for ``--help`` and the README.
DESCRIPTIONS = {
    "horizon_days": "length of the trace in days",
    "facts_per_day": "new topics (each with a first fact) per day",
    "category_mix": "categories of new facts and their shares, e.g. preference=0.5,knowledge=0.5",
    "confidence_noise": "standard deviation of the extractor's confidence error (0 = perfectly calibrated)",
    "search_rate": "memory searches per day",
    "search_results": "facts one search returns at most",
    "zipf_skew": "popularity skew of topics for searches, confirmations and questions (0 = uniform)",
    "confirmation_rate": "explicit confirmations per day",
    "false_confirmation_rate": "share of confirmations that name a wrong fact, said in a message that does not confirm",
    "label_failure_rate": "share of new facts whose scope/durability/authority labels fail DeerMem's scope gate",
    "reextraction_rate": "re-extractions per day of a topic's current fact (same content: a duplicate)",
    "correction_rate": "user corrections per day (category correction, supersede a fact)",
    "knowledge_update_rate": "knowledge updates per day (a newer value supersedes a fact)",
    "question_rate": "questions per day that need one fact",
    "question_delay_days": "mean delay between a topic's start and a question about it",
    "start": "UTC time of the first day",
}


@dataclass(frozen=True)
class WorkloadParams:
    """The generator's parameters; every one has a default (see :data:`DESCRIPTIONS`)."""

    horizon_days: float = 60.0
    facts_per_day: float = 10.0
    category_mix: tuple[tuple[str, float], ...] = DEFAULT_CATEGORY_MIX
    confidence_noise: float = 0.3
    search_rate: float = 20.0
    search_results: int = 5
    zipf_skew: float = 1.0
    confirmation_rate: float = 2.0
    false_confirmation_rate: float = 0.1
    label_failure_rate: float = 0.05
    reextraction_rate: float = 0.0
    correction_rate: float = 0.5
    knowledge_update_rate: float = 1.0
    question_rate: float = 6.0
    question_delay_days: float = 14.0
    start: str = "2026-01-01T00:00:00Z"

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name in ("category_mix", "start"):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ContractError(f"workload parameter {item.name} must be a finite number >= 0, got {value!r}")
        if self.horizon_days <= 0:
            raise ContractError(f"workload parameter horizon_days must be > 0, got {self.horizon_days!r}")
        if not isinstance(self.search_results, int) or self.search_results < 1:
            raise ContractError(
                f"workload parameter search_results must be an integer >= 1, got {self.search_results!r}"
            )
        for name in ("false_confirmation_rate", "label_failure_rate"):
            if not 0 <= getattr(self, name) <= 1:
                raise ContractError(f"workload parameter {name} must be in [0, 1], got {getattr(self, name)!r}")
        mix = tuple((str(name), float(share)) for name, share in self.category_mix)
        if not mix or any(share < 0 or not math.isfinite(share) for _, share in mix) or sum(s for _, s in mix) <= 0:
            raise ContractError(f"workload parameter category_mix needs shares >= 0 with a positive sum, got {mix!r}")
        object.__setattr__(self, "category_mix", mix)
        for name in ("horizon_days", "question_delay_days"):
            if getattr(self, name) > MAX_DAYS:
                raise ContractError(f"workload parameter {name} must be at most {MAX_DAYS:,} days (10,000 years),"
                                    f" got {getattr(self, name)!r}")
        start = _parse_start(self.start)
        if (LAST_TIME - start).total_seconds() < self.horizon_days * DAY_SECONDS:
            raise ContractError(f"workload parameter start {self.start!r} plus horizon_days {self.horizon_days:g}"
                                " ends after the year 9999, the calendar's last")

    def expected_events(self) -> float:
        """The events a trace of these parameters holds on average: rows plus search results."""
        per_day = (self.facts_per_day + self.correction_rate + self.knowledge_update_rate + self.question_rate
                   + self.search_rate * (1 + self.search_results) + 2 * self.confirmation_rate + 1
                   + self.reextraction_rate)
        return self.horizon_days * per_day

    def check_work(self, max_events: int = MAX_TRACE_EVENTS) -> None:
        """Refuse parameters whose trace would hold more than ``max_events`` events on average."""
        expected = self.expected_events()
        if expected > max_events:
            raise ContractError(
                f"the workload would draw about {expected:,.0f} events and search results, over the limit of"
                f" {max_events:,}; lower the rates or horizon, or pass --max-events {math.ceil(expected)}"
            )

    def replace(self, **changes: Any) -> WorkloadParams:
        values = self.as_dict(raw=True)
        unknown = sorted(set(changes) - set(values))
        if unknown:
            raise ContractError(f"unknown workload parameter(s) {', '.join(unknown)}; known: {', '.join(values)}")
        values.update(changes)
        return WorkloadParams(**values)

    def as_dict(self, raw: bool = False) -> dict[str, Any]:
        values = {item.name: getattr(self, item.name) for item in fields(self)}
        if not raw:
            values["category_mix"] = format_mix(self.category_mix)
        return values


def parse_mix(text: str) -> tuple[tuple[str, float], ...]:
    """``"preference=0.5,knowledge=0.5"`` -> ``(("preference", 0.5), ("knowledge", 0.5))``."""
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, share = item.partition("=")
        try:
            pairs.append((name.strip(), float(share)))
        except ValueError:
            raise ContractError(f"category_mix: {item!r} is not CATEGORY=SHARE") from None
        if not sep or not name.strip():
            raise ContractError(f"category_mix: {item!r} is not CATEGORY=SHARE")
    return tuple(pairs)


def format_mix(mix: Sequence[tuple[str, float]]) -> str:
    return ",".join(f"{name}={share:g}" for name, share in mix)


def parse_param(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` for one workload parameter, typed by its default."""
    name, sep, value = text.partition("=")
    name = name.strip().replace("-", "_")
    defaults = WorkloadParams().as_dict(raw=True)
    if not sep or name not in defaults:
        raise ContractError(f"{text!r}: expected NAME=VALUE with NAME one of {', '.join(defaults)}")
    if name == "category_mix":
        return name, parse_mix(value)
    if name == "start":
        return name, value.strip()
    kind = type(defaults[name])
    try:
        return name, kind(value)
    except ValueError:
        raise ContractError(f"{text!r}: {name} must be {'an integer' if kind is int else 'a number'}") from None


def start_us(text: str = WorkloadParams.start) -> int:
    return time_us(_parse_start(text))


def _parse_start(text: str) -> _dt.datetime:
    moment = read_iso(str(text))
    if moment is None:
        raise ContractError(f"workload parameter start must be an ISO-8601 time, got {text!r}")
    return moment if moment.tzinfo else moment.replace(tzinfo=_dt.UTC)


# --------------------------------------------------------------------------- the generator


@dataclass
class _Thread:
    start: int  # seconds from the trace start
    importance: float
    popularity: float
    category: str
    versions: list[tuple[int, int]] = field(default_factory=list)  # (second, fact number)
    expected_asks: float = 0.0  # the mean of its Poisson count of questions

    def ask_rate(self, second: int, delay_days: float) -> float:
        """Questions per day expected about this thread at ``second`` (its delays are exponential)."""
        return self.expected_asks / delay_days * math.exp(-(second - self.start) / (delay_days * DAY_SECONDS))

    def current(self, second: int) -> tuple[int, int | None]:
        """The fact current at ``second`` and the one it superseded (``None`` for the first)."""
        position = 0
        for index, (added, _) in enumerate(self.versions):
            if added <= second:
                position = index
        previous = self.versions[position - 1][1] if position else None
        return self.versions[position][1], previous


@functools.cache
def labelled_texts() -> dict[bool, list[str]]:
    """The labelled messages' texts, confirming (``True``) and not, in file order."""
    messages = read_labelled()
    return {truth: messages.loc[messages["confirms"] == truth, "text"].tolist() for truth in (True, False)}


def generate(params: WorkloadParams | None = None, seed: int = 0, *, max_events: int = MAX_TRACE_EVENTS) -> Chunk:
    """One trace drawn from ``params`` with ``seed`` (see the module docstring for the model).

    Parameters whose trace would hold more than ``max_events`` events on average are refused
    before anything is drawn (:meth:`WorkloadParams.check_work`).
    """
    params = params or WorkloadParams()
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ContractError(f"seed must be an integer in [0, 2**63), got {seed!r}")
    params.check_work(max_events)
    rng = np.random.default_rng(seed)
    lifecycle_rng = np.random.default_rng([seed, 1])  # messages, labels, re-extractions
    horizon = int(params.horizon_days * DAY_SECONDS)
    base = start_us(params.start)

    def arrivals(rate_per_day: float, draw: np.random.Generator = rng) -> list[int]:
        count = draw.poisson(rate_per_day * params.horizon_days)
        return sorted(draw.integers(0, horizon, size=count).tolist())

    names = [name for name, _ in params.category_mix]
    shares = np.array([share for _, share in params.category_mix])
    starts = arrivals(params.facts_per_day)
    threads = []
    for second in starts:
        importance = float(rng.random())
        rank = int(rng.integers(1, POPULARITY_RANKS + 1))
        category = names[int(rng.choice(len(names), p=shares / shares.sum()))]
        threads.append(_Thread(second, importance, rank ** -params.zipf_skew, category))
    popularity = np.cumsum([thread.popularity for thread in threads]) if threads else np.zeros(0)
    thread_starts = np.array(starts, dtype=np.int64)

    def pick(second: int, draw: np.random.Generator = rng) -> _Thread | None:
        """A thread already started at ``second``, drawn by popularity."""
        available = int(np.searchsorted(thread_starts, second, side="right"))
        if available == 0:
            return None
        total = popularity[available - 1]
        return threads[min(available - 1, int(np.searchsorted(popularity, draw.random() * total, side="right")))]

    facts: list[dict[str, Any]] = []  # adds, numbered in creation order until renamed

    def new_fact(thread: _Thread, second: int, category: str, confidence: float) -> None:
        number = len(facts)
        previous = thread.versions[-1][1] if thread.versions else None
        thread.versions.append((second, number))
        length = int(max(1, round(rng.lognormal(4.3, 0.5))))
        facts.append(
            {"second": second, "category": category, "confidence": confidence, "supersedes": previous, "length": length,
             "repeats": None, "thread": thread}
        )

    def extracted_confidence(importance: float) -> float:
        noisy = 0.7 + 0.3 * (importance + rng.normal(0.0, params.confidence_noise))
        return round(min(1.0, max(0.7, noisy)), 2)

    for thread in threads:
        new_fact(thread, thread.start, thread.category, extracted_confidence(thread.importance))
    updates = [(second, "correction") for second in arrivals(params.correction_rate)]
    updates += [(second, "update") for second in arrivals(params.knowledge_update_rate)]
    for second, kind in sorted(updates):
        updated = pick(second)
        if updated is None or updated.versions[-1][0] >= second:
            continue
        if kind == "correction":
            new_fact(updated, second, "correction", round(float(rng.uniform(0.9, 1.0)), 2))
        else:
            new_fact(updated, second, updated.category, extracted_confidence(updated.importance))

    for second in arrivals(params.reextraction_rate, lifecycle_rng):
        repeated = pick(second, lifecycle_rng)
        if repeated is not None:
            number = repeated.current(second)[0]
            facts.append({**facts[number], "second": second, "supersedes": None, "repeats": number})
    failures = lifecycle_rng.random(len(facts)) < params.label_failure_rate
    failed = lifecycle_rng.integers(0, len(FAILED_LABELS), size=len(facts))
    for fact, fails, which in zip(facts, failures.tolist(), failed.tolist()):
        fact["labels"] = FAILED_LABELS[which] if fails else PASSING_LABELS
    by_time = sorted(range(len(facts)), key=lambda number: (facts[number]["second"], number))
    fact_seconds = np.array([facts[number]["second"] for number in by_time], dtype=np.int64)
    rows: list[tuple[int, int, int, dict[str, Any]]] = []  # (second, kind order, sequence, row)

    def emit(second: int, row: dict[str, Any]) -> None:
        rows.append((second, KIND_ORDER[row["event"]], len(rows), row))

    weights = np.array([thread.importance * thread.popularity for thread in threads])
    asked = bool(len(threads)) and weights.sum() > 0
    if asked:
        expected = params.question_rate * params.horizon_days * weights / weights.sum()
        for thread, mean in zip(threads, expected.tolist()):
            thread.expected_asks = mean
    mean_delay = params.question_delay_days
    for number, fact in enumerate(facts):
        rate = fact["thread"].ask_rate(fact["second"], mean_delay) if mean_delay > 0 else None
        emit(fact["second"], {"event": ADD, "number": number, **fact, "ask_rate": rate})
    if asked:
        for thread, count in zip(threads, rng.poisson(expected).tolist()):
            for delay in rng.exponential(params.question_delay_days * DAY_SECONDS, size=count).tolist():
                second = thread.start + int(delay)
                if second < horizon:
                    needed, previous = thread.current(second)
                    emit(second, {"event": ASK, "needed": needed, "previous": previous})
    for second in arrivals(params.search_rate):
        found = []
        for _ in range(params.search_results):
            searched = pick(second)
            if searched is not None:
                found.append(searched.current(second)[0])
        if found:
            emit(second, {"event": SEARCH, "found": list(dict.fromkeys(found))})
    said = labelled_texts()
    for second in arrivals(params.confirmation_rate):
        chosen = pick(second)
        if chosen is None:
            continue
        confirmed = chosen.current(second)[0]
        false = rng.random() < params.false_confirmation_rate
        texts = said[not false]
        emit(second, {"event": MESSAGE, "role": "human", "text": texts[int(lifecycle_rng.integers(len(texts)))]})
        if false:
            existing = int(np.searchsorted(fact_seconds, second, side="right"))
            others = [number for number in by_time[:existing] if number != confirmed] if existing < 64 else None
            if others is None:  # large: draw until the draw is another fact
                wrong = confirmed
                while wrong == confirmed:
                    wrong = by_time[int(rng.integers(0, existing))]
                confirmed = wrong
            elif others:
                confirmed = others[int(rng.integers(0, len(others)))]
        emit(second, {"event": CONFIRM, "confirmed": confirmed})
    for day in range(1, math.ceil(params.horizon_days)):
        emit(day * DAY_SECONDS, {"event": TICK})
    return _chunk(sorted(rows, key=lambda item: item[:3]), base, mean_delay)


def _chunk(ordered: Sequence[tuple[int, int, int, dict[str, Any]]], base: int, delay_days: float) -> Chunk:
    """Rows in final order, with fact ids assigned in the order facts are added."""
    rename: dict[int, str] = {}
    for _, _, _, row in ordered:
        if row["event"] == ADD:
            rename[row["number"]] = f"f{len(rename):06d}"
    records = []
    for second, _, _, row in ordered:
        record: dict[str, Any] = {"time": base + second * SECOND, "event": row["event"]}
        if row["event"] == ADD:
            record.update(
                fact_id=rename[row["number"]],
                content_length=row["length"],
                confidence=row["confidence"],
                category=row["category"],
                supersedes=None if row["supersedes"] is None else rename[row["supersedes"]],
                tokens=line_tokens(row["category"], row["confidence"], row["length"]),
                content_key=rename[row["number"] if row["repeats"] is None else row["repeats"]],
                ask_rate=row["ask_rate"],
                ask_decay_days=None if row["ask_rate"] is None else delay_days,
                **dict(zip(("scope", "durability", "authority"), row["labels"])),
            )
        elif row["event"] == MESSAGE:
            record.update(role=row["role"], text=row["text"])
        elif row["event"] == ASK:
            record.update(
                fact_id=rename[row["needed"]],
                supersedes=None if row["previous"] is None else rename[row["previous"]],
            )
        elif row["event"] == SEARCH:
            record["fact_ids"] = [rename[number] for number in row["found"]]
        elif row["event"] == CONFIRM:
            record.update(fact_ids=[rename[row["confirmed"]]], reinforcement=True)
        records.append(record)
    return chunk_from_rows(records)
