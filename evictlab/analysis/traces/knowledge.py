"""Knowledge-update workloads from a dataset's ``knowledge-update`` questions (docs/traces.md).

:func:`knowledge_update_traces` is the fair one: one memory per user question, abstention
left out, updates above and below the old value, distractors so the cap binds, and the old
value used again after its update in a stated share of questions. :func:`knowledge_update_trace`
is the earlier single trace of every question in one memory (a recency test), which the
suites and ``trace generate --knowledge-updates`` write. No text is kept: a fact's ``tokens``
are its injection line's (spec 1.13, :func:`~evictlab.core.tokens.token_counter`) and its
``content_key`` a digest of the duplicate key.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from ...core.tokens import content_digest, fact_line, pool_line_tokens, token_counter
from ...errors import ContractError
from .generate import KIND_ORDER, SECOND, labelled_texts
from .lifecycle import line_tokens, written_category
from .schema import ADD, ASK, CONFIRM, MESSAGE, SEARCH, Chunk, chunk_from_rows, time_us

DISTRACTOR_CATEGORIES = ("preference", "context", "knowledge")
#: What a ``knowledge`` fact's injection line prints: storage writes it as ``other`` (spec 1.14).
KNOWLEDGE = written_category("knowledge")


_DATE = re.compile(r"^(\d{4})/(\d{2})/(\d{2})(?: \(\w{3}\))? (\d{2}):(\d{2})$")


def parse_session_date(text: Any, where: str) -> int:
    """A LongMemEval date (``2023/05/20 (Sat) 02:21``) as UTC microseconds."""
    match = _DATE.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ContractError(f"{where}: not a LongMemEval date: {text!r}")
    year, month, day, hour, minute = (int(part) for part in match.groups())
    try:
        return time_us(_dt.datetime(year, month, day, hour, minute, tzinfo=_dt.UTC))
    except ValueError:
        raise ContractError(f"{where}: not a valid date: {text!r}") from None


def _evidence(row: Mapping[str, Any]) -> list[tuple[int, str, str, int]]:
    """(time, session id, evidence text, its length) of each session holding evidence, by time."""
    where = f"question {row.get('question_id')!r}"
    sessions = []
    for session_id, date, turns in zip(row.get("haystack_session_ids") or [], row.get("haystack_dates") or [],
                                       row.get("haystack_sessions") or []):
        said = [turn["content"] for turn in turns if isinstance(turn, Mapping) and turn.get("has_answer") is True
                and isinstance(turn.get("content"), str)]
        if said:
            sessions.append((parse_session_date(date, f"{where}: haystack_dates"), str(session_id), "\n".join(said),
                             sum(map(len, said))))
    return sorted(sessions)


def knowledge_update_trace(rows: Sequence[Mapping[str, Any]], seed: int = 0) -> Chunk:
    """Every ``knowledge-update`` question with two evidence sessions in one trace: each session a
    fact (``<question_id>:<session_id>``, category ``knowledge``, confidence ``U(0.7, 1.0)``)
    superseding the one before, and the question at its date needing the last one."""
    rng, count = np.random.default_rng(seed), token_counter().count
    events: list[tuple[int, int, int, dict[str, Any]]] = []
    for row in rows:
        question_id = str(row.get("question_id"))
        sessions = _evidence(row) if row.get("question_type") == "knowledge-update" else []
        if len(sessions) < 2:
            continue
        previous = None
        for moment, session_id, content, length in sessions:
            fact_id, confidence = f"{question_id}:{session_id}", round(float(rng.uniform(0.7, 1.0)), 2)
            _emit(events, moment, {"event": ADD, "fact_id": fact_id, "content_length": length, "confidence": confidence,
                                   "category": "knowledge", "supersedes": previous,
                                   "tokens": pool_line_tokens(fact_line(KNOWLEDGE, confidence, content), count),
                                   "content_key": content_digest(content)})
            previous = fact_id
        asked = parse_session_date(row.get("question_date"), f"question {question_id!r}: question_date")
        _emit(events, max(asked, sessions[-1][0]), {"event": ASK, "fact_id": previous,
                                                    "supersedes": f"{question_id}:{sessions[-2][1]}"})
    if not events:
        raise ContractError("the dataset has no knowledge-update question with two evidence sessions")
    return chunk_from_rows([record for *_, record in sorted(events, key=lambda item: item[:3])])


def _emit(events: list[tuple[int, int, int, dict[str, Any]]], moment: int, record: dict[str, Any]) -> None:
    events.append((moment, KIND_ORDER[record["event"]], len(events), {**record, "time": moment}))


def knowledge_update_traces(rows: Sequence[Mapping[str, Any]], seed: int = 0, *, recent_share: float = 0.5,
                            distractors: int = 40) -> list[tuple[str, Chunk]]:
    """``(question id, trace)`` per user question (see the module docstring)."""
    if not 0 <= recent_share <= 1 or distractors < 0:
        raise ContractError("recent_share must be in [0, 1] and distractors >= 0")
    rng, count, confirming = np.random.default_rng(seed), token_counter().count, labelled_texts()[True]
    traces = []
    for row in rows:
        question_id = str(row.get("question_id"))
        if row.get("question_type") != "knowledge-update" or question_id.endswith("_abs"):
            continue
        sessions = _evidence(row)
        if len(sessions) < 2:
            continue
        asked = max(parse_session_date(row.get("question_date"), f"question {question_id!r}"), sessions[-1][0])
        events: list[tuple[int, int, int, dict[str, Any]]] = []
        emit = partial(_emit, events)

        previous, confidence = None, float(rng.uniform(0.7, 1.0))
        for moment, session_id, content, length in sessions:
            fact_id, value = f"{question_id}:{session_id}", round(confidence, 2)
            emit(moment, {"event": ADD, "fact_id": fact_id, "content_length": length, "confidence": value,
                          "category": "knowledge", "supersedes": previous, "content_key": content_digest(content),
                          "tokens": pool_line_tokens(fact_line(KNOWLEDGE, value, content), count)})
            previous, confidence = fact_id, min(1.0, max(0.7, confidence + float(rng.uniform(-0.2, 0.2))))
        old, updated = f"{question_id}:{sessions[-2][1]}", sessions[-1][0]
        first = sessions[0][0]
        names = [f"{question_id}:d{index}" for index in range(distractors)]
        for name in names:
            value, category = round(float(rng.uniform(0.7, 1.0)), 2), str(rng.choice(DISTRACTOR_CATEGORIES))
            length = int(max(1, round(rng.lognormal(4.3, 0.5))))
            emit(int(rng.integers(first, asked + 1)), {
                "event": ADD, "fact_id": name, "content_length": length, "confidence": value, "category": category,
                "content_key": name, "tokens": line_tokens(category, value, length)})
        for _ in names:
            emit(int(rng.integers(first, asked + 1)) + SECOND, {"event": SEARCH, "fact_ids": [str(rng.choice(names))]})
        if rng.random() < recent_share and asked - updated > 3 * SECOND:
            for step in (1, 2):
                emit(updated + (asked - updated) * step // 3, {"event": SEARCH, "fact_ids": [old]})
            moment = updated + (asked - updated) * 5 // 6
            emit(moment, {"event": MESSAGE, "role": "human", "text": confirming[int(rng.integers(len(confirming)))]})
            emit(moment, {"event": CONFIRM, "fact_ids": [old], "reinforcement": True})
        emit(asked + SECOND, {"event": ASK, "fact_id": previous, "supersedes": old})
        traces.append((question_id, chunk_from_rows([record for *_, record in sorted(events, key=lambda e: e[:3])])))
    if not traces:
        raise ContractError("the dataset has no knowledge-update question (abstention aside) with two evidence"
                            " sessions")
    return traces
