"""A LongMemEval-shaped stand-in for the pinned dataset, rebuilt from DeerFlow's published rows.

The real ``longmemeval_oracle.json`` is neither committed nor downloaded. What decides every
kept set of the evaluation is not its text, though, but its *structure*: which question ids
the official selection yields (the manifest), which 40 ids form the distractor bank and in
what order (they are sorted by id), and which record enters or leaves the bank when the
evidence header changes. Scores depend only on scenario metadata (spec 2.9); ties fall to
fact-id order (spec 2.8). So a dataset with the same structure and made-up text must give the
published kept fact ids, row for row.

The structure comes from the published data alone:

* the official case ids, scenarios, question types and loss ranks from evictlab's manifests
  (identical ids to DeerFlow's, spec 2.3, 2.4);
* the SESSION bank from the v3 rows: fact id ``d_{case}_{i}_{source}`` names the record drawn
  at position ``(offset(case) + i) mod 40`` (spec 2.7, 2.8); :func:`reveal_session_bank`
  collects every such position over the 90 rows and refuses a position revealed with two ids;
* the bracket bank from the review (spec 2.5, 6.7): ``35a27287`` renders to 697 code points
  under ``SESSION {id} AT {date}`` but 704 under ``[session_id={id} date={date}]`` (one
  session, so exactly the 7-character header difference) and drops out of the 40..700 window;
  ``60d45044``, in bounds under both headers and sorting after every bank id, is then admitted
  as the 40th record.

Every text is synthetic. Nothing here imports evictlab: the offset rule is a published formula
(spec 2.7), restated in :func:`offset`, so the tests compare evictlab with an independent
derivation.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED_DIR = ROOT / "data" / "reference" / "deerflow-pr4810"
#: evictlab preset -> the published DeerFlow version it reproduces (spec 0.4, 6.2).
PRESET_VERSIONS = {"pr4810-run1": "v1", "pr4810-run2": "v2", "pr4810-final": "v3"}

OFFSET_NAMESPACE = "deermem-medium-v1"
BANK_SIZE = 40
DRAWS = 9
#: The record the bracket header pushes out of the bank, and the record that replaces it.
BRACKET_DROPPED = "35a27287"
BRACKET_ADMITTED = "60d45044"
DROPPED_SESSION_CHARS = 697
DROPPED_BRACKET_CHARS = 704
#: ``[session_id={id} date={date}]`` is 7 characters longer than ``SESSION {id} AT {date}``.
HEADER_GROWTH = 7
BANK_MIN_CHARS = 40
BANK_MAX_CHARS = 700

D_FACT = re.compile(r"d_(?P<case>.+)_(?P<index>\d)_(?P<source>[^_]+)")


def offset(case_id: str, namespace: str = OFFSET_NAMESPACE, size: int = BANK_SIZE) -> int:
    """Spec 2.7: first 4 bytes of SHA-256 of ``{namespace}:{case_id}``, big-endian, mod size."""
    digest = hashlib.sha256(f"{namespace}:{case_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % size


def published_rows(version: str) -> list[dict[str, Any]]:
    path = PUBLISHED_DIR / version / "qa.rows.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --------------------------------------------------------------------------- the bank


def reveal_session_bank(rows: Iterable[Mapping[str, Any]]) -> dict[int, str]:
    """Bank position -> source id, for every position a v3 kept fact id reveals.

    Raises ``ValueError`` when a position is revealed with two different ids, when one id
    sits at two positions, or when a ``d_`` id names another case than its row.
    """
    revealed: dict[int, str] = {}
    for row in rows:
        base = offset(row["case_id"])
        for fact_id in row["kept_fact_ids"]:
            match = D_FACT.fullmatch(fact_id)
            if match is None:
                continue
            if match["case"] != row["case_id"]:
                raise ValueError(f"{row['row_id']}: {fact_id} names another case")
            position = (base + int(match["index"])) % BANK_SIZE
            known = revealed.setdefault(position, match["source"])
            if known != match["source"]:
                raise ValueError(f"bank position {position} revealed as {known} and {match['source']}")
    ids = list(revealed.values())
    if len(set(ids)) != len(ids):
        raise ValueError("one source id revealed at two bank positions")
    return revealed


def complete_bank(revealed: Mapping[int, str], size: int = BANK_SIZE) -> tuple[list[str], list[int]]:
    """The full sorted bank: revealed ids in place, unknown positions filled with made-up ids.

    A run of unknown positions between two known ids ``lo`` < ``hi`` gets ``lo-1``, ``lo-2``,
    ... (strictly between them for 8-hex ids, since ``hi`` never has ``lo`` as a prefix); a
    leading run builds on ``0000000`` instead. Returns the bank and the invented positions.
    """
    bank: list[str | None] = [revealed.get(position) for position in range(size)]
    invented = [position for position, value in enumerate(bank) if value is None]
    position = 0
    while position < size:
        if bank[position] is not None:
            position += 1
            continue
        end = position
        while end < size and bank[end] is None:
            end += 1
        base = bank[position - 1] if position else "0000000"
        for k, gap in enumerate(range(position, end), start=1):
            bank[gap] = f"{base}-{k}"
        position = end
    filled = [value for value in bank if value is not None]
    if filled != sorted(filled) or len(set(filled)) != size:
        raise ValueError(f"cannot keep the bank sorted while filling positions {invented}: {filled}")
    return filled, invented


def bracket_bank(session_bank: Sequence[str]) -> list[str]:
    """The v1 bank: ``35a27287`` removed, the rest shifted down, ``60d45044`` appended."""
    return [qid for qid in session_bank if qid != BRACKET_DROPPED] + [BRACKET_ADMITTED]


# --------------------------------------------------------------------------- text


WORDS = (
    "the user mentioned a trip to the coast last spring and asked about packing lists "
    "for a long weekend with friends while the weather stayed mild and the trains ran late "
    "so they planned a quiet dinner near the harbour after a walk along the old pier"
).split()


def filler(length: int, seed: str) -> str:
    """Deterministic plain text of exactly ``length`` code points (ending in a full stop)."""
    if length < 2:
        raise ValueError(f"filler needs at least 2 characters, got {length}")
    rng = random.Random(seed)
    words: list[str] = []
    while sum(len(word) + 1 for word in words) < length:
        words.append(rng.choice(WORDS))
    text = " ".join(words)[: length - 1].rstrip()
    text = text + "x" * (length - 1 - len(text)) + "."
    return text[0].upper() + text[1:]


def session_header(session_id: str, date: str) -> str:
    """Spec 2.5's SESSION header; used here only to size texts to an exact rendered length."""
    return f"SESSION {session_id} AT {date}"


@dataclass(frozen=True)
class Turn:
    role: str
    content: str
    has_answer: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        turn: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.has_answer is not None:
            turn["has_answer"] = self.has_answer
        return turn


def date_for(index: int) -> str:
    """LongMemEval-style dates, ``2023/05/20 (Sat) 02:21``; all of one length (22)."""
    days = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
    day = 1 + index % 28
    month = 1 + (index // 28) % 12
    return f"2023/{month:02d}/{day:02d} ({days[index % 7]}) {index % 24:02d}:{(7 * index) % 60:02d}"


def sized_session(
    question_id: str, index: int, rendered_chars: int, *, preference: bool
) -> tuple[str, str, list[Turn]]:
    """One session whose SESSION-header rendering has exactly ``rendered_chars`` code points.

    Preference rows mark their user turn ``has_answer: true`` (the marked-turn path of spec
    2.5); user rows carry no flags, so the user turn is chosen by the fallback. An assistant
    turn is present in both and never rendered.
    """
    session_id = f"answer_{question_id}_1"
    date = date_for(index)
    fixed = len(session_header(session_id, date)) + len("\nUSER: ")
    content = filler(rendered_chars - fixed, seed=question_id)
    reply = Turn("assistant", filler(120, seed=question_id + "/reply"), False if preference else None)
    user = Turn("user", content, True if preference else None)
    return session_id, date, [user, reply]


# --------------------------------------------------------------------------- rows


def row(
    question_id: str,
    question_type: str,
    question: str,
    answer: Any,
    question_date: str | None,
    sessions: Sequence[tuple[str, str, Sequence[Turn]]],
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "question_id": question_id,
        "question_type": question_type,
        "question": question,
        "answer": answer,
    }
    if question_date is not None:
        record["question_date"] = question_date
    record["haystack_session_ids"] = [session_id for session_id, _, _ in sessions]
    record["haystack_dates"] = [date for _, date, _ in sessions]
    record["haystack_sessions"] = [[turn.as_dict() for turn in turns] for _, _, turns in sessions]
    return record


def official_row(question_id: str, question_type: str, index: int) -> dict[str, Any]:
    """A knowledge-update row (an old and a new value) or a temporal-reasoning row (two dated
    events), with marked evidence turns, a short answer and a question date."""
    first = (f"answer_{question_id}_1", date_for(index), [
        Turn("user", f"For the record, my count was {index + 3} back then. " + filler(60, question_id), True),
        Turn("assistant", "Noted, thanks for telling me.", False),
    ])
    second = (f"answer_{question_id}_2", date_for(index + 40), [
        Turn("user", "Some small talk first. " + filler(80, question_id + "/2"), False),
        Turn("user", f"Update: it is {index + 5} now, as of this week.", True),
        Turn("assistant", "Got it, I will remember the new number.", False),
    ])
    if question_type == "knowledge-update":
        question = f"What is my current count for item {question_id}?"
        answer: Any = str(index + 5)
    else:
        question = f"How many days passed between my two notes about {question_id}?"
        answer = f"{40 + index % 7} days"
    return row(question_id, question_type, question, answer, date_for(index + 80), [first, second])


def bank_row(question_id: str, index: int, rendered_chars: int) -> dict[str, Any]:
    """A single-session bank row; every fourth one a preference row (category never scores)."""
    preference = index % 4 == 3
    kind = "single-session-preference" if preference else "single-session-user"
    question = f"Can you remind me what I said about topic {question_id}?"
    session = sized_session(question_id, index, rendered_chars, preference=preference)
    return row(question_id, kind, question, f"Something about {question_id}.", date_for(index + 5), [session])


@dataclass(frozen=True)
class Reconstruction:
    """The rebuilt dataset's rows (file order) and what went into them."""

    rows: list[dict[str, Any]]
    session_bank: list[str]
    invented_positions: list[int]

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.rows, ensure_ascii=False, indent=1), encoding="utf-8")
        return path


def reconstruct(official: Mapping[str, Sequence[str]]) -> Reconstruction:
    """All rows: the 40 official cases, the 41 bank-type records that matter, and decoys.

    ``official`` maps each eligible type to its 20 manifest ids. The decoys exercise each
    filter without changing the outcome: excluded rows of eligible types that sort before
    the official ids (pilot id, ``_abs`` id, excluded answer phrase, answer over 100
    characters, evidence over 2000 characters), eligible rows sorting after the 20th id,
    bank-type rows outside 40..700 that sort before bank ids, and rows of other types.
    """
    session_bank, invented = complete_bank(reveal_session_bank(published_rows("v3")))
    rows: list[dict[str, Any]] = []
    for kind, ids in official.items():
        rows.extend(official_row(qid, kind, index) for index, qid in enumerate(ids))
    for index, qid in enumerate(session_bank):
        if qid == BRACKET_DROPPED:
            length = DROPPED_SESSION_CHARS
        else:
            # Within 40..700 under both headers, so only 35a27287 moves between the banks.
            length = 80 + (index * 37) % (BANK_MAX_CHARS - HEADER_GROWTH - 80)
        rows.append(bank_row(qid, index, length))
    rows.append(bank_row(BRACKET_ADMITTED, BANK_SIZE, 420))
    rows.extend(decoys())
    random.Random(4810).shuffle(rows)  # file order must not matter: selection and bank sort by id
    return Reconstruction(rows, session_bank, invented)


def decoys() -> list[dict[str, Any]]:
    ku, tr = "knowledge-update", "temporal-reasoning"
    long_session = (
        "answer_00d00001_1", date_for(1), [Turn("user", filler(2100, "long"), True)]
    )
    return [
        official_row("0f05491a", ku, 90),  # pilot id
        official_row("gpt4_85da3956", tr, 91),  # pilot id (sorts after digits, still excluded)
        official_row("00abc123_abs", ku, 92),  # abstention id
        {**official_row("00b00001", ku, 93), "answer": "There is not enough information."},
        {**official_row("00b00002", tr, 94), "answer": "x" * 101},
        row("00c00001", tr, "When did the long story happen?", "May", date_for(3), [long_session]),
        official_row("fa000001", ku, 95),  # eligible, but after the first 20
        official_row("fb000001", tr, 96),  # eligible, but after the first 20
        _too_short_bank_row(),
        bank_row("000fffff", 98, 2000),  # too long under both headers
        {**bank_row("0001abcd", 99, 300), "question_type": "multi-session"},  # not a bank type
        {**bank_row("0002abcd", 99, 300), "question_type": "single-session-assistant"},
    ]


def _too_short_bank_row() -> dict[str, Any]:
    """A user row whose only session renders below 40 code points under either header."""
    session = ("s", "2023/01/01", [Turn("user", "Hi")])
    return row("0000bbbb", "single-session-user", "What did I say?", "Hi", None, [session])
