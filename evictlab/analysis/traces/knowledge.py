"""A fair knowledge-update workload: one memory per user, recency not decisive, abstention left out.

:func:`knowledge_update_traces` makes one trace per non-abstention ``knowledge-update`` question
of a dataset with at least two evidence sessions (each LongMemEval question is one user's
history, so one memory each). Per trace and seed:

* each evidence session is a fact at the session's date, each superseding the one before; the
  first draws its confidence from ``U(0.7, 1.0)``, each update the previous value plus
  ``U(-0.2, 0.2)``, clipped to [0.7, 1.0] and rounded to 2 decimals, so updates fall both
  above and below the old value;
* ``distractors`` other facts of the user (``U(0.7, 1.0)``, categories preference, context or
  knowledge) at uniform times between the first session and the question, and as many
  ``search`` rows of a random distractor, so the cap binds and every policy's signals move;
* in a share ``recent_share`` of the questions (drawn per seed) the old value is searched
  twice and confirmed, with a confirming message, between its update and the question, so a
  recency rule that keeps the last-used fact keeps the old value;
* the question, at its date, needs the last fact and names the one it superseded.

No text is kept: tokens and content keys are drawn or computed as :func:`.generate.generate`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from ...core.tokens import content_digest, fact_line, token_counter
from ...errors import ContractError
from .generate import KIND_ORDER, SECOND, labelled_texts, parse_session_date
from .lifecycle import line_tokens
from .schema import ADD, ASK, CONFIRM, MESSAGE, SEARCH, Chunk, chunk_from_rows

DISTRACTOR_CATEGORIES = ("preference", "context", "knowledge")


def _evidence(row: Mapping[str, Any]) -> list[tuple[int, str, str]]:
    where = f"question {row.get('question_id')!r}"
    sessions = []
    for session_id, date, turns in zip(row.get("haystack_session_ids") or [], row.get("haystack_dates") or [],
                                       row.get("haystack_sessions") or []):
        said = [turn["content"] for turn in turns if isinstance(turn, Mapping) and turn.get("has_answer") is True
                and isinstance(turn.get("content"), str)]
        if said:
            sessions.append((parse_session_date(date, f"{where}: haystack_dates"), str(session_id), "\n".join(said)))
    return sorted(sessions)


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
        for moment, session_id, content in sessions:
            fact_id, value = f"{question_id}:{session_id}", round(confidence, 2)
            emit(moment, {"event": ADD, "fact_id": fact_id, "content_length": len(content), "confidence": value,
                          "category": "knowledge", "supersedes": previous, "content_key": content_digest(content),
                          "tokens": count("\n" + fact_line("knowledge", value, content))})
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
