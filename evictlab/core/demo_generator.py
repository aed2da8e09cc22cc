"""The generator of the embedded demo dataset (:mod:`evictlab.core.demo`).

Its rows have the shape of the LongMemEval oracle file, but all text is synthetic and written
for this project (``data/demo/stories.json``; this module is the generator). The official
manifest is derived from the file by the protocol's own selection rule (spec 2.3), so
everything that depends only on metadata matches the published protocol: support retention is
20/45 vs 35/45, 27/45 vs 45/45 and 35/45 vs 45/45 at capacities 5, 7 and 9.

Stories are templates with a few slots; a ``random.Random`` seeded from a fixed string per
section fills the slots and draws the dates. Ids are the first 8 hex characters of SHA-256 over
``evictlab-demo-v1/{group}:{n}``; each group's ids are sorted and handed to rows by a planned
rank, so every trap of a real file lands where its rule decides (its id sorts among the first 20
of its type; :func:`trap_catalogue` lists them): the 8 pilot ids (``gpt4_`` ids sort after every
hex id, so the twentieth temporal-reasoning case is itself a ``gpt4_`` id), ``_abs`` ids, long,
blank, ``only mentioned`` and ``Not Enough`` answers, empty and overlong evidence, a null answer
(sorted after the twentieth knowledge-update id) and an integer one, sessions without
``has_answer`` turns, null contents, non-ASCII text, bank candidates at exactly 39, 40, 700 and
701 code points, and rows of ignored types.

Under the ``bracket`` header every rendered session is 7 characters longer: the bank record of
role :data:`BANK_CROSSING_ROLE` (697 code points) and the 700-point one leave the bank, the
39-point record and the 41st candidate enter, which shifts the draws of all 45 pools. Under
``confidence``, raw and protocol fact ids keep different capacity-7 sets in two pools whose
draws wrap past the end of the bank while tied 0.70 distractors straddle the cut
(``tests/test_demo.py`` pins both).

Changing the demo on purpose: edit the text or the generator, bump :data:`GENERATOR_VERSION`,
run ``evictlab data demo --output data/demo/longmemeval-demo.json --manifest-output
data/demo/manifest.json --force`` and copy the SHA-256 it prints into :data:`DEMO_SHA256`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import OutputExistsError
from ..writers import atomic_write_bytes
from . import demo
from .dataset import Dataset, render_evidence, select_official
from .demo import DEMO_DATASET, DEMO_PIN, STORIES_FILE
from .protocol import Protocol, sha256_bytes

ID_NAMESPACE = "evictlab-demo-v1"
KNOWLEDGE_UPDATE = "knowledge-update"
TEMPORAL_REASONING = "temporal-reasoning"
BANK_CROSSING_ROLE = "bank-crossing-697"

KU_PILOT_IDS = ("0f05491a", "4b24c848", "7e974930", "8077ef71")
TR_PILOT_IDS = ("bcbe585f", "dfde3500", "gpt4_85da3956", "gpt4_af6db32f")
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_FIRST_DAY = _dt.date(2023, 1, 2)


# --------------------------------------------------------------------------- public API


def generate_rows() -> list[dict[str, Any]]:
    """The demo rows in file order (a fresh list on every call; identical every time)."""
    return _build().rows


def trap_catalogue() -> dict[str, list[str]]:
    """Role name -> the question ids generated for it (traps, selected cases, bank records)."""
    return _build().roles


def dataset_bytes() -> bytes:
    """The demo file's exact bytes (see :func:`serialise`)."""
    return serialise(generate_rows())


def serialise(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """Rows as the demo file stores them: 1-space indented JSON, raw non-ASCII, final newline."""
    return (json.dumps(list(rows), indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def write_demo(output: str | Path, *, force: bool = False) -> Path:
    """Write the demo file to ``output`` atomically.

    An existing file with the same bytes is left alone; a different one is an
    :class:`OutputExistsError` unless ``force``.
    """
    return _write_unless_different(Path(output), dataset_bytes(), force=force)


def derive_manifest(protocol: Protocol) -> dict[str, Any]:
    """The demo's official manifest: the selection rule (spec 2.3) applied to the demo rows.

    Same schema, ``protocol_id`` and ``selection`` block as the protocol's own official
    manifest; the rule reads its parameters from that block.
    """
    rows = generate_rows()
    dataset = Dataset(
        path=DEMO_DATASET, sha256=sha256_bytes(serialise(rows)), pinned=True, pin=DEMO_PIN,
        rows=tuple(rows), by_id={row["question_id"]: row for row in rows},
    )
    selection = select_official(dataset, protocol.official, "session")
    return {
        "schema_version": 1,
        "protocol_id": protocol.protocol_id,
        "selection": protocol.official.selection.as_dict(),
        "scenario_order": list(protocol.official.scenario_order),
        "loss_ranks": list(protocol.official.loss_ranks),
        "scenarios": {name: list(ids) for name, ids in selection.scenarios.items()},
    }


def manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    """A manifest in the layout of the protocol's own manifests: 2-space indent, keys in schema order."""
    return (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def write_manifest(output: str | Path, protocol: Protocol, *, force: bool = False) -> Path:
    """Write :func:`derive_manifest` to ``output`` atomically (same overwrite rule as :func:`write_demo`)."""
    return _write_unless_different(Path(output), manifest_bytes(derive_manifest(protocol)), force=force)


def committed_problems(protocol: Protocol) -> list[str]:
    """How the committed demo files differ from what the generator makes now (empty when they agree)."""
    problems = []
    expected = {
        demo.DEMO_DATASET: dataset_bytes(),
        demo.DEMO_MANIFEST: manifest_bytes(derive_manifest(protocol)),
    }
    for path, data in expected.items():
        if not path.is_file():
            problems.append(f"{path}: missing")
            continue
        committed = path.read_bytes()
        if committed != data:
            offset = next(
                (i for i, (a, b) in enumerate(zip(committed, data)) if a != b), min(len(committed), len(data))
            )
            problems.append(
                f"{path}: differs from the generator output at byte {offset}"
                f" ({len(committed)} bytes committed, {len(data)} generated)"
            )
    actual = sha256_bytes(expected[demo.DEMO_DATASET])
    if actual != demo.DEMO_SHA256:
        problems.append(
            f"the generated demo has SHA-256 {actual}, but DEMO_SHA256 in {demo.__file__} is {demo.DEMO_SHA256}"
        )
    return problems


def _write_unless_different(target: Path, data: bytes, *, force: bool) -> Path:
    if target.exists() and not force:
        if target.is_file() and target.read_bytes() == data:
            return target
        raise OutputExistsError(
            f"refusing to overwrite {target}: it exists and differs from the generated file"
            " (remove it, choose another path or pass --force)"
        )
    return atomic_write_bytes(target, data)


# --------------------------------------------------------------------------- building blocks


@dataclass(frozen=True)
class Story:
    """A question with the dated sessions that answer it.

    ``sessions`` holds turns as ``(code, text)``: code ``U``/``A`` is a user/assistant turn
    without ``has_answer``, a trailing ``*`` marks ``has_answer: true``, a trailing ``-``
    ``has_answer: false``; ``?*`` is a marked turn without a role. ``None`` text makes an
    invalid turn (content null). Texts and the answer are ``str.format`` templates over the
    slots and the timing values (``g1``, ``g2`` days between sessions, ``w1`` = g1 // 7,
    ``g1m1`` = g1 - 1, ``ask`` days from the last session to the question, ``askw``).
    ``gaps`` gives (low, high, step) days per pair of consecutive sessions; ``ask`` likewise.
    """

    question: str
    answer: Any
    sessions: tuple[tuple[tuple[str, str | None], ...], ...]
    slots: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    gaps: tuple[tuple[int, int, int], ...] = ()
    ask: tuple[int, int, int] = (2, 30, 1)


@dataclass(frozen=True)
class Bank:
    """A single-session bank record: one session of turns, written as in :class:`Story`."""

    kind: str
    question: str
    answer: str
    turns: tuple[tuple[str, str | None], ...]


_Add = Callable[[str, dict[str, Any]], None]  # records a row under a role


@dataclass
class _Demo:
    rows: list[dict[str, Any]]
    roles: dict[str, list[str]]


def _seeded(section: str) -> random.Random:
    digest = hashlib.sha256(f"{ID_NAMESPACE}/seed/{section}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _hex_ids(group: str, count: int, *, above: str = "") -> list[str]:
    """``count`` distinct sorted 8-hex ids from SHA-256 of ``{namespace}/{group}:{n}``, all > ``above``."""
    found: list[str] = []
    n = 0
    while len(found) < count:
        candidate = hashlib.sha256(f"{ID_NAMESPACE}/{group}:{n}".encode()).hexdigest()[:8]
        if candidate > above and candidate not in found:
            found.append(candidate)
        n += 1
    return sorted(found)


def _stamp(day: _dt.date, minute: int) -> str:
    """LongMemEval's date format, ``2023/05/30 (Tue) 23:40`` (weekday names fixed, not locale)."""
    return f"{day:%Y/%m/%d} ({_WEEKDAYS[day.weekday()]}) {minute // 60:02d}:{minute % 60:02d}"


def _turn(code: str, text: str | None) -> dict[str, Any]:
    roles = {"U": "user", "A": "assistant", "?": None}
    turn: dict[str, Any] = {}
    if roles[code[0]] is not None:
        turn["role"] = roles[code[0]]
    turn["content"] = text
    if code.endswith("*"):
        turn["has_answer"] = True
    elif code.endswith("-"):
        turn["has_answer"] = False
    return turn


def _fill(template: Any, values: Mapping[str, Any]) -> Any:
    return template.format(**values) if isinstance(template, str) else template


def _draw(spec: tuple[int, int, int], rng: random.Random) -> int:
    low, high, step = spec
    return rng.randrange(low, high + 1, step)


def _story_row(
    question_id: str, kind: str, story: Story, rng: random.Random, *, answer: Any = ...
) -> dict[str, Any]:
    values: dict[str, Any] = {name: rng.choice(list(options)) for name, options in story.slots.items()}
    gap_specs = story.gaps or ((14, 120, 1),) * (len(story.sessions) - 1)
    if len(gap_specs) != len(story.sessions) - 1:
        raise ValueError(
            f"story {story.question!r}: {len(story.sessions)} sessions need {len(story.sessions) - 1} gaps"
        )
    day = _FIRST_DAY + _dt.timedelta(days=rng.randrange(0, 150))
    days = [day]
    for index, spec in enumerate(gap_specs, start=1):
        gap = _draw(spec, rng)
        values[f"g{index}"], values[f"w{index}"], values[f"g{index}m1"] = gap, gap // 7, gap - 1
        days.append(days[-1] + _dt.timedelta(days=gap))
    ask = _draw(story.ask, rng)
    values["ask"], values["askw"] = ask, ask // 7
    session_ids = [f"sess-{question_id}-{n}" for n in range(1, len(story.sessions) + 1)]
    sessions = [[_turn(code, _fill(text, values)) for code, text in session] for session in story.sessions]
    return {
        "question_id": question_id,
        "question_type": kind,
        "question": _fill(story.question, values),
        "answer": _fill(story.answer if answer is ... else answer, values),
        "question_date": _stamp(days[-1] + _dt.timedelta(days=ask), rng.randrange(18 * 60, 23 * 60)),
        "haystack_session_ids": session_ids,
        "haystack_dates": [_stamp(d, rng.randrange(7 * 60, 23 * 60)) for d in days],
        "haystack_sessions": sessions,
        "answer_session_ids": _answer_sessions(session_ids, sessions),
    }


def _bank_row(question_id: str, record: Bank, rng: random.Random, *, compact: bool = False) -> dict[str, Any]:
    """A bank row; ``compact`` uses session id ``s1`` and a bare ``YYYY/MM/DD`` date (a 24-character header)."""
    day = _FIRST_DAY + _dt.timedelta(days=rng.randrange(0, 240))
    minute = rng.randrange(7 * 60, 23 * 60)
    session_id = "s1" if compact else f"sess-{question_id}-1"
    session = [_turn(code, text) for code, text in record.turns]
    return {
        "question_id": question_id,
        "question_type": record.kind,
        "question": record.question,
        "answer": record.answer,
        "question_date": _stamp(day + _dt.timedelta(days=rng.randrange(1, 20)), rng.randrange(18 * 60, 23 * 60)),
        "haystack_session_ids": [session_id],
        "haystack_dates": [f"{day:%Y/%m/%d}" if compact else _stamp(day, minute)],
        "haystack_sessions": [session],
        "answer_session_ids": _answer_sessions([session_id], [session]),
    }


def _answer_sessions(session_ids: Sequence[str], sessions: Sequence[Sequence[Mapping[str, Any]]]) -> list[str]:
    """The ids of the sessions holding a ``has_answer: true`` turn, as the real file lists them."""
    return [sid for sid, turns in zip(session_ids, sessions) if any(t.get("has_answer") is True for t in turns)]


def _require_length(row: Mapping[str, Any], header: str, expected: int) -> None:
    # A guard for the length traps: an edit to their text must not silently move them.
    actual = len(render_evidence(row, header))
    if actual != expected:
        raise ValueError(
            f"demo row {row['question_id']}: {header} evidence is {actual} code points, the trap needs {expected}"
        )


def _story_order(table: Sequence[Story], rng: random.Random) -> Iterator[Story]:
    """The first 20 stories of a table (shuffled) for the selected cases, then the rest in table order.

    The tables put every story that carries a rendering trap among their first 20, so those
    traps reach selected cases; the rest go to pilot and surplus rows.
    """
    selected = list(table[:20])
    rng.shuffle(selected)
    return iter(selected + list(table[20:]))


def _assign(ids: Sequence[str], roles: Sequence[str], rng: random.Random) -> list[tuple[str, str]]:
    """Pair sorted ``ids`` with ``roles`` in a seeded random order."""
    shuffled = list(roles)
    rng.shuffle(shuffled)
    return list(zip(ids, shuffled))


# --------------------------------------------------------------------------- the build


def _build() -> _Demo:
    rows: list[dict[str, Any]] = []
    roles: dict[str, list[str]] = {}

    def add(role: str, row: dict[str, Any]) -> None:
        rows.append(row)
        roles.setdefault(role, []).append(row["question_id"])

    _knowledge_update(add)
    _temporal_reasoning(add)
    _bank(add)
    _other_types(add)
    # File order carries no meaning (the rules sort by id); mix it as a real file would be.
    _seeded("file-order").shuffle(rows)
    return _Demo(rows, roles)


def _knowledge_update(add: _Add) -> None:
    """20 selected cases and the exclusion traps share the lower ids; pilot ids are fixed."""
    rng = _seeded(KNOWLEDGE_UPDATE)
    stories = _story_order(KU_STORIES, rng)
    traps = ["abstention", "answer-too-long", "answer-only-mentioned", "answer-blank",
             "evidence-empty", "evidence-too-long"]
    ids = _hex_ids(KNOWLEDGE_UPDATE, 20 + len(traps) + 2)
    # The largest id below the two surplus ones is always a selected case, so every trap
    # sorts below the twentieth selected id; the two surplus ids are eligible but not selected.
    extra_ids = ids[-2:]
    planned = [*_assign(ids[:-3], ["selected"] * 19 + traps, rng), (ids[-3], "selected")]
    for question_id, role in planned:
        if role == "selected":
            add("ku-selected", _story_row(question_id, KNOWLEDGE_UPDATE, next(stories), rng))
        elif role == "abstention":
            add("abstention", _story_row(question_id + "_abs", KNOWLEDGE_UPDATE, KU_ABSTENTION, rng))
        else:
            row = _story_row(question_id, KNOWLEDGE_UPDATE, KU_TRAPS[role], rng)
            if role == "evidence-too-long":
                length = len(render_evidence(row))
                if not 2000 < length < 3000:
                    raise ValueError(f"demo row {question_id}: the long-evidence trap renders {length} code points")
            add(role, row)
    for question_id in KU_PILOT_IDS:
        add("pilot", _story_row(question_id, KNOWLEDGE_UPDATE, next(stories), rng))
    add("extra-eligible", _story_row(extra_ids[0], KNOWLEDGE_UPDATE, next(stories), rng))
    add("answer-null", _story_row(extra_ids[1], KNOWLEDGE_UPDATE, next(stories), rng, answer=None))
    if next(stories, None) is not None:
        raise ValueError("demo: unused knowledge-update stories")


def _temporal_reasoning(add: _Add) -> None:
    """19 hex-id cases and a gpt4_ case are selected; the traps sort below the gpt4_ case."""
    rng = _seeded(TEMPORAL_REASONING)
    stories = _story_order(TR_STORIES, rng)
    traps = ["abstention", "answer-not-enough"]
    ids = _hex_ids(TEMPORAL_REASONING, 19 + len(traps))
    # gpt4_ ids sort after every hex id. With only 19 hex ids eligible, the twentieth
    # selected case is a gpt4_ id above both gpt4_ pilot ids, so those pilots would be selected.
    gpt4_ids = ["gpt4_" + h for h in _hex_ids(TEMPORAL_REASONING + "/gpt4", 3, above=TR_PILOT_IDS[-1][5:])]
    planned = _assign(ids, ["selected"] * 19 + traps, rng)
    planned.append((gpt4_ids[0], "selected"))
    for question_id, role in planned:
        if role == "selected":
            add("tr-selected", _story_row(question_id, TEMPORAL_REASONING, next(stories), rng))
        elif role == "abstention":
            add("abstention", _story_row(question_id + "_abs", TEMPORAL_REASONING, TR_ABSTENTION, rng))
        else:
            add(role, _story_row(question_id, TEMPORAL_REASONING, TR_NOT_ENOUGH, rng))
    for question_id in TR_PILOT_IDS:
        add("pilot", _story_row(question_id, TEMPORAL_REASONING, next(stories), rng))
    for question_id in gpt4_ids[1:]:
        add("extra-eligible", _story_row(question_id, TEMPORAL_REASONING, next(stories), rng))
    if next(stories, None) is not None:
        raise ValueError("demo: unused temporal-reasoning stories")


# Session-header lengths of the bank traps; one rendered session is 7 longer under "bracket".
_BANK_LENGTHS = {"bank-39": 39, "bank-40": 40, "bank-700": 700, "bank-701": 701, BANK_CROSSING_ROLE: 697}


def _bank(add: _Add) -> None:
    """Bank-type rows. The lower ids hold exactly 40 records within 40..700 code points (the
    session-header bank) mixed with the out-of-bounds traps; the two highest ids are surplus
    candidates. Under the bracket header the 697 and 700 records leave and the 39 record and
    the first surplus candidate enter."""
    rng = _seeded("bank")
    ordinary = list(BANK_RECORDS)
    rng.shuffle(ordinary)
    specials = ["bank-40", "bank-39", "bank-700", "bank-701", BANK_CROSSING_ROLE,
                "bank-empty", "bank-too-long", "bank-abstention"]
    first_region = len(ordinary) - 2 + len(specials)
    ids = _hex_ids("bank", first_region + 2)
    records = iter(ordinary)
    # The last id of the region is an ordinary record, so every trap sorts inside the bank's range.
    planned = _assign(ids[:first_region - 1], ["bank"] * (len(ordinary) - 3) + specials, rng)
    planned.append((ids[first_region - 1], "bank"))
    for question_id, role in planned:
        if role == "bank":
            add("bank", _bank_row(question_id, next(records), rng))
        elif role == "bank-abstention":
            add(role, _bank_row(question_id + "_abs", BANK_ABSTENTION, rng))
        else:
            # The 39 and 40 traps use a compact header to leave room for a few words of text.
            row = _bank_row(question_id, BANK_SPECIALS[role], rng, compact=role in ("bank-39", "bank-40"))
            if role in _BANK_LENGTHS:
                _require_length(row, "session", _BANK_LENGTHS[role])
                _require_length(row, "bracket", _BANK_LENGTHS[role] + 7)
            add(role, row)
    # The two largest ids: the 41st and 42nd candidates, outside the bank under the session header.
    for question_id in ids[first_region:]:
        add("bank-surplus", _bank_row(question_id, next(records), rng))


def _other_types(add: _Add) -> None:
    rng = _seeded("other-types")
    ids = _hex_ids("other-types", len(OTHER_TYPE_STORIES))
    for question_id, (kind, story) in zip(ids, OTHER_TYPE_STORIES):
        add("ignored-type", _story_row(question_id, kind, story, rng))


# --------------------------------------------------------------------------- the text
# The stories and bank records live in data/demo/stories.json (written for evictlab's
# demo; turn codes and templates are explained on Story). JSON arrays become tuples here.


def _tuples(value: Any) -> Any:
    return tuple(_tuples(item) for item in value) if isinstance(value, list) else value


def _story(spec: Mapping[str, Any]) -> Story:
    return Story(
        spec["question"],
        spec["answer"],
        _tuples(spec["sessions"]),
        slots={name: _tuples(options) for name, options in spec.get("slots", {}).items()},
        gaps=_tuples(spec.get("gaps", [])),
        ask=_tuples(spec.get("ask", [2, 30, 1])),
    )


def _bank_record(spec: Mapping[str, Any]) -> Bank:
    return Bank(spec["type"], spec["question"], spec["answer"], _tuples(spec["turns"]))


_TEXT = json.loads(STORIES_FILE.read_text(encoding="utf-8"))
KU_STORIES: tuple[Story, ...] = tuple(_story(spec) for spec in _TEXT["knowledge_update"]["stories"])
KU_ABSTENTION = _story(_TEXT["knowledge_update"]["abstention"])
KU_TRAPS: dict[str, Story] = {role: _story(spec) for role, spec in _TEXT["knowledge_update"]["traps"].items()}
TR_STORIES: tuple[Story, ...] = tuple(_story(spec) for spec in _TEXT["temporal_reasoning"]["stories"])
TR_ABSTENTION = _story(_TEXT["temporal_reasoning"]["abstention"])
TR_NOT_ENOUGH = _story(_TEXT["temporal_reasoning"]["not_enough"])
OTHER_TYPE_STORIES: tuple[tuple[str, Story], ...] = tuple((spec["type"], _story(spec)) for spec in _TEXT["other_types"])
BANK_RECORDS: tuple[Bank, ...] = tuple(_bank_record(spec) for spec in _TEXT["bank"]["records"])
BANK_ABSTENTION = _bank_record(_TEXT["bank"]["abstention"])
#: The length traps of the bank. bank-40 and bank-39 are 40 and 39 code points under the
#: compact session header "SESSION s1 AT 2023/06/01" (24 for the header, 7 for the line break
#: and "USER: ", then the text); bank-700 and bank-701 are 700 and 701 with a full header (the
#: 700 one mixes accents, CJK and emoji, so its UTF-8 byte count is larger than its code-point
#: count); the crossing record is 697 with the session header and 704 with the bracket header.
BANK_SPECIALS: dict[str, Bank] = {role: _bank_record(spec) for role, spec in _TEXT["bank"]["specials"].items()}
