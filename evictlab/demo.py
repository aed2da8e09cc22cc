"""The embedded demo dataset: a deterministic, LongMemEval-shaped file written by evictlab itself.

Every command and notebook runs on a fresh machine against this file (spec section 0, item 3).
Its rows have the shape of the LongMemEval oracle file (``question_id``, ``question_type``,
``question``, ``answer``, ``question_date``, ``haystack_session_ids``, ``haystack_dates``,
``haystack_sessions`` of turns ``{role, content, has_answer?}``, ``answer_session_ids``), but
all text is synthetic and written for this project. The official manifest is derived from the
file by the protocol's own selection rule (spec 2.3), so everything that depends only on
metadata matches the published protocol: support retention is 20/45 vs 35/45, 27/45 vs 45/45
and 35/45 vs 45/45 at capacities 5, 7 and 9.

How the file is made. Stories are templates with a few slots; a ``random.Random`` seeded from
a fixed string per section fills the slots and draws the dates. Ids are the first 8 hex
characters of SHA-256 over ``evictlab-demo-v1/{group}:{n}`` for n = 0, 1, ...; each group's
ids are sorted and then handed to rows by a planned rank, so the traps below land where they
matter by construction, not by luck. Only the pilot ids, the ``_abs`` ids and the ``gpt4_`` ids
have other shapes, as in the real file.

The traps a real file has, each placed so that it would be selected if its rule did not
exclude it (its id sorts among the first 20 of its type; see :func:`trap_catalogue`):

* the 8 pilot ids (four knowledge-update, four temporal-reasoning). ``gpt4_`` ids sort after
  every hex id, so the twentieth selected temporal-reasoning case is itself a ``gpt4_`` id;
* ``_abs`` ids; an answer over 100 characters; a blank answer; answers containing
  ``only mentioned`` and ``Not Enough`` (the match ignores case); a row whose every session is
  skipped (empty evidence); evidence over 2000 characters;
* a null answer, which passes the filters (it becomes the text ``null``). It sorts after the
  twentieth knowledge-update id, so the demo's QA never asks a question whose reference
  answer is the word null; an integer answer (``3``) is selected;
* sessions with no ``has_answer`` turn (user-turn fallback), sessions with neither (skipped),
  a turn whose content is null, an evidence turn spoken by the assistant, ``has_answer:
  false`` turns;
* accents, CJK, emoji and U+2028 inside contents;
* bank candidates at exactly 40 and 700 code points (kept) and at 39 and 701 (dropped), an
  empty and an overlong bank record, a bank ``_abs`` id (kept: the bank has no id rules);
* rows of other types (multi-session, single-session-assistant) that are ignored.

Protocol variants. Under the ``bracket`` header every rendered session is 7 characters longer.
The bank record of role :data:`BANK_CROSSING_ROLE` (``0a13f2b8``, the third bank id) renders
to 697 code points with the ``session`` header and 704 with ``bracket``, so it leaves the
bracket bank; so does the 700-point record. The 39-point record (46 under ``bracket``) and the
41st candidate enter instead, which shifts the draws of all 45 pools. The second surplus
candidate stays out under both headers.
Under the ``confidence`` policy, raw fact ids (``pr4810-run2``) and protocol ids
(``pr4810-final``) keep different capacity-7 sets where a pool's draws wrap past the end of
the bank while tied 0.70 distractors straddle the cut: ``cb2f905c`` (confidence_control,
offset 33) and ``dfffed0b`` (noisy_signal_control, offset 37); ``tests/test_demo.py`` pins both.

Changing the demo on purpose: edit the generator, bump :data:`GENERATOR_VERSION`, then run
``evictlab data demo --output evictlab/data/demo/longmemeval-demo.json --manifest-output
evictlab/data/demo/manifest.json --force`` and copy the SHA-256 it prints into :data:`DEMO_SHA256`.
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

from .dataset import Dataset, check_selection, load_dataset, render_evidence, select_official
from .errors import OutputExistsError
from .protocol import DatasetPin, Protocol, sha256_bytes, sha256_file
from .resources import DATA_DIR
from .results import atomic_write_bytes

GENERATOR_VERSION = "evictlab-demo-generator-v1"
DEMO_DIR = DATA_DIR / "demo"
DEMO_FILENAME = "longmemeval-demo.json"
DEMO_DATASET = DEMO_DIR / DEMO_FILENAME
DEMO_MANIFEST = DEMO_DIR / "manifest.json"
DEMO_REPOSITORY = "evictlab/demo"
# A stand-in for a git revision: 40 hex characters that change with the generator version.
DEMO_REVISION = hashlib.sha256(GENERATOR_VERSION.encode("utf-8")).hexdigest()[:40]
DEMO_SHA256 = "145cc9337f80410d38467c57a79c90279e52fb7eda3dc20b69a874d0112af137"
DEMO_PIN = DatasetPin(DEMO_REPOSITORY, DEMO_REVISION, DEMO_FILENAME, DEMO_SHA256)

ID_NAMESPACE = "evictlab-demo-v1"
KNOWLEDGE_UPDATE = "knowledge-update"
TEMPORAL_REASONING = "temporal-reasoning"
SINGLE_SESSION_USER = "single-session-user"
SINGLE_SESSION_PREFERENCE = "single-session-preference"
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


def demo_protocol(protocol: Protocol) -> Protocol:
    """``protocol`` with the demo's committed official manifest in place of its own."""
    return protocol.with_official_manifest(DEMO_MANIFEST)


def load_demo(protocol: Protocol | None = None, *, path: str | Path | None = None) -> Dataset:
    """Load the committed demo file, checking its SHA-256 against :data:`DEMO_PIN`.

    With ``protocol`` (normally from :func:`demo_protocol`), the recomputed selection is also
    checked against that protocol's official manifest.
    """
    dataset = load_dataset(path or DEMO_DATASET, DEMO_PIN)
    if protocol is not None:
        selection = select_official(dataset, protocol.official, "session")
        check_selection(selection, protocol.official, protocol.files.official_manifest)
    return dataset


def open_dataset(
    protocol: Protocol,
    path: str | Path | None = None,
    *,
    allow_unpinned: bool = False,
    keep_official_manifest: bool = False,
) -> tuple[Protocol, Dataset]:
    """The dataset a command or notebook works on, and the protocol that goes with it.

    With ``path``, the file checked against the config's pin (an unpinned file only with
    ``allow_unpinned``; the returned dataset then says ``pinned = False`` and callers warn).
    Without it, or with a file whose SHA-256 is the demo's (a copy of it, or the embedded file
    itself), the demo, with the demo's own official manifest unless ``keep_official_manifest``
    (the user named a manifest explicitly).
    """
    if path is not None and not is_demo_file(path):
        return protocol, load_dataset(Path(path), protocol.config.dataset, allow_unpinned=allow_unpinned)
    if not keep_official_manifest:
        protocol = demo_protocol(protocol)
    return protocol, load_demo(protocol, path=path)


def is_demo_file(path: str | Path) -> bool:
    """Whether ``path`` is a readable file with the demo's SHA-256 (identified by content, not name)."""
    path = Path(path)
    return path.is_file() and sha256_file(path) == DEMO_SHA256


def committed_problems(protocol: Protocol) -> list[str]:
    """How the committed demo files differ from what the generator makes now (empty when they agree)."""
    problems = []
    expected = {
        DEMO_DATASET: dataset_bytes(),
        DEMO_MANIFEST: manifest_bytes(derive_manifest(protocol)),
    }
    for path, data in expected.items():
        if not path.is_file():
            problems.append(f"{path}: missing")
            continue
        committed = path.read_bytes()
        if committed != data:
            offset = next((i for i, (a, b) in enumerate(zip(committed, data)) if a != b), min(len(committed), len(data)))
            problems.append(
                f"{path}: differs from the generator output at byte {offset}"
                f" ({len(committed)} bytes committed, {len(data)} generated)"
            )
    actual = sha256_bytes(expected[DEMO_DATASET])
    if actual != DEMO_SHA256:
        problems.append(f"the generated demo has SHA-256 {actual}, but DEMO_SHA256 in {__file__} is {DEMO_SHA256}")
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
    digest = hashlib.sha256(f"{ID_NAMESPACE}/seed/{section}".encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _hex_ids(group: str, count: int, *, above: str = "") -> list[str]:
    """``count`` distinct sorted 8-hex ids from SHA-256 of ``{namespace}/{group}:{n}``, all > ``above``."""
    found: list[str] = []
    n = 0
    while len(found) < count:
        candidate = hashlib.sha256(f"{ID_NAMESPACE}/{group}:{n}".encode("utf-8")).hexdigest()[:8]
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
        raise ValueError(f"story {story.question!r}: {len(story.sessions)} sessions need {len(story.sessions) - 1} gaps")
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
    planned = _assign(ids[:-3], ["selected"] * 19 + traps, rng) + [(ids[-3], "selected")]
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
# Everything below was written for evictlab's demo. Turn codes are explained on Story.

_COMPANIES = (("Brightwater Analytics", "Fennel & Finch"), ("Larkspur Logistics", "Quarry Lane Games"),
              ("Northgate Insurance", "Tidepool Robotics"))
_PET_NAMES = (("Pepper", "Juniper", "Waffles"), ("Mochi", "Basil", "Tofu"), ("Clementine", "Socks", "Noodle"))

KU_STORIES: tuple[Story, ...] = (
    Story(
        "Which company am I working for at the moment?",
        "{co[1]}",
        (
            (("U*", "I signed the offer yesterday! I start at {co[0]} as a junior data analyst on the 1st."),
             ("A", "Congratulations on the new job! Would you like help planning your first week?")),
            (("U*", "Quick update: I left {co[0]} last month and joined {co[1]} as a product analyst. Much better team."),
             ("A", "That sounds like a good move. How are you finding the new role so far?")),
        ),
        slots={"co": _COMPANIES},
    ),
    Story(
        "Which evening do I go to the climbing gym now?",
        "{day[1]}",
        (
            (("U*", "I've got a standing slot at the bouldering gym every {day[0]} evening with my friend Tariq."),
             ("A", "A regular slot is a great way to stay consistent.")),
            (("U*", "The gym reshuffled its member nights, so Tariq and I moved our climbing session to {day[1]}s."),
             ("A", "Thanks for letting me know. I'll keep {day[1]} in mind for your schedule.")),
        ),
        slots={"day": (("Tuesday", "Thursday"), ("Monday", "Wednesday"))},
    ),
    Story(
        "How many cats do I have now?",
        3,
        (
            (("U*", "Our two cats, {pets[0]} and {pets[1]}, finally stopped hissing at each other 🐈"),
             ("A", "That's lovely news. Slow introductions usually pay off.")),
            (("U*", "We adopted a third cat from the shelter this weekend. Her name is {pets[2]} and she's tiny."),
             ("A", "Congratulations! Three cats will keep the house lively.")),
        ),
        slots={"pets": _PET_NAMES},
    ),
    Story(
        "How do I get to work these days?",
        "By train",
        (
            (("U*", "I cycle to the office every day, it's about 25 minutes along the canal."),
             ("A", "That's a nice commute. Do you ride in the rain too?")),
            (("U-", "Can you recommend a good podcast?"),
             ("A", "Sure, what topics do you enjoy?"),
             ("U*", "Since the canal path closed for repairs I've switched to the train; I read on the way now.")),
        ),
    ),
    Story(
        "Which city do I live in now?",
        "{city[1]}",
        (
            (("U*", "I'm still settling into my flat in {city[0]}; the neighbourhood bakery is my favourite place."),
             ("A", "It sounds like you've found a good spot.")),
            (("U*", "Big change: we moved to {city[1]} three weeks ago for my partner's new post."),
             ("A", "Moving cities is a lot of work. How is the new place?")),
        ),
        slots={"city": (("Leeds", "Zürich"), ("Porto", "Montréal"), ("Glasgow", "Saint-Étienne"))},
    ),
    Story(
        "What is my current 10k personal best?",
        "{pb[1]}",
        (
            (("U*", "Ran the river 10k this morning in {pb[0]}, a new personal best for me."),
             ("A", "Well done! That's a solid time.")),
            (("U*", "I smashed my old record at the autumn 10k: {pb[1]}! The interval work paid off."),
             ("A", "Fantastic progress. Interval training clearly suits you.")),
        ),
        slots={"pb": (("52:10", "48:35"), ("55:42", "51:09"))},
    ),
    Story(
        "Who teaches my piano lessons now?",
        "Mr. Lindqvist",
        (
            (("U*", "My piano teacher, Ms. Okafor, says I'm ready to start the Clementi sonatina."),
             ("A", "That's a big milestone for a beginner.")),
            (("U", "Ms. Okafor retired, so the school paired me with a new teacher."),
             ("A", "I hope the new teacher is a good fit."),
             ("U", "He's called Mr. Lindqvist and he's very patient with my left hand.")),
        ),
    ),
    Story(
        "What do I usually order at the café now?",
        "A cortado",
        (
            (("U*", "My usual at the café on the corner is an oat flat white, every single morning."),
             ("A", "A reliable favourite!")),
            (("U*", "I've gone off oat milk, so I switched my daily café order to a cortado."),
             ("A", "A cortado is a nice, smaller option.")),
        ),
    ),
    Story(
        "What phone do I use now?",
        "{phone[1]}",
        (
            (("U*", "My {phone[0]} is three years old but it still takes great photos."),
             ("A", "It's held up well!")),
            (("U*", "The battery finally gave up, so I bought a {phone[1]} and moved everything over."),
             ("A", "Good luck getting used to the new phone.")),
        ),
        slots={"phone": (("Pixel 6", "iPhone 15"), ("Galaxy S20", "Fairphone 5"))},
    ),
    Story(
        "What is my current savings goal for the emergency fund?",
        "${goal[1]}",
        (
            (("U*", "I set a savings goal of ${goal[0]} for my emergency fund this year."),
             ("A", "That's a sensible target.")),
            (("U*", "After the car repair scare I raised the emergency fund goal to ${goal[1]}."),
             ("A", "Raising the goal makes sense after an unexpected expense.")),
        ),
        slots={"goal": (("5,000", "8,000"), ("3,000", "4,500"))},
    ),
    Story(
        "How many people are on the team I manage?",
        "{size[1]}",
        (
            (("U*", "I manage a small team of {size[0]} engineers, which keeps one-to-ones manageable."),
             ("A", "A small team can move quickly.")),
            (("U*", "We merged with the platform group, so I now have {size[1]} people reporting to me."),
             ("A", "That's a big jump. Do you need help restructuring your one-to-ones?")),
        ),
        slots={"size": ((4, 7), (5, 9))},
    ),
    Story(
        "When does my book club meet now?",
        "On the last Sunday of the month",
        (
            (("U*", "My book club meets on the first Thursday of every month at the library."),
             ("A", "Monthly meetings give you time to finish each book.")),
            (("U*", "Book club moved!\u2028New slot: the last Sunday of the month, at Dana's flat."),
             ("A", "Thanks, I'll remember the new slot.")),
        ),
    ),
    Story(
        "How many houseplants do I have now?",
        "{plants[2]}",
        (
            (("U*", "I counted my houseplants today: {plants[0]}. The monstera is the biggest."),
             ("A", "That's quite a collection!")),
            (("U*", "I bought three more at the plant fair, so that's {plants[1]} now."),
             ("A", "Your windowsills must be full.")),
            (("U*", "I gave two of my plants to my neighbour, which leaves me with {plants[2]}."),
             ("A", "Sharing cuttings and plants is a lovely habit.")),
        ),
        slots={"plants": ((12, 15, 13), (9, 12, 10))},
    ),
    Story(
        "Which language am I studying at the moment?",
        "Japanese",
        (
            (("U*", "I'm on a 40-day Spanish streak in my language app."),
             ("A", "Keep it going!")),
            (("U*", "I dropped Spanish and started Japanese for our trip. 日本語 is much harder than I expected."),
             ("A", "Japanese takes time, but the trip is great motivation.")),
        ),
    ),
    Story(
        "What car do I drive now?",
        "A used Toyota Prius",
        (
            (("U*", "My old Honda Civic needs new brakes again."),
             ("A", "Brakes are worth fixing promptly.")),
            (("A", "Here is the checklist for selling a car privately that you asked for."),),
            (("U*", "Sold the Civic and bought a used Toyota Prius. The fuel savings are already noticeable."),
             ("A", "Congratulations on the new car.")),
        ),
    ),
    Story(
        "Who is my manager now?",
        "Priya Raman",
        (
            (("U*", "My manager Tom approved my training budget."),
             ("A", "Nice, what course will you take?")),
            (("U", "There was a reorganisation at work today."),
             ("A*", "So to confirm: Tom moved to the sales team and Priya Raman is now your manager."),
             ("U", "Exactly, and she already scheduled our first one-to-one.")),
        ),
    ),
    Story(
        "What time am I aiming to go to bed these days?",
        "10:45 pm",
        (
            (("U*", "I'm trying to get to bed by 11:30 pm on weeknights."),
             ("A", "A regular bedtime helps.")),
            (("U*", None),
             ("U*", "New rule for myself: lights out at 10:45 pm, because 11:30 still left me tired."),
             ("A", "Earlier is worth trying.")),
        ),
    ),
    Story(
        "How many days a week am I running in my training plan now?",
        "5",
        (
            (("U*", "My marathon plan has me running 4 days a week for now."),
             ("A", "Four days leaves room for recovery.")),
            (("U*", "The plan just stepped up: I'm running 5 days a week until the taper."),
             ("A", "Make sure to keep the easy days easy.")),
        ),
    ),
    Story(
        "Which school does my daughter go to now?",
        "Riverside Primary",
        (
            (("U*", "My daughter Ana loves her teacher at Hillcrest Primary."),
             ("A", "A good teacher makes all the difference.")),
            (("U*", "Ana started at Riverside Primary after we moved; she already has a best friend there."),
             ("A", "That's a quick start. I'm glad she's settling in.")),
        ),
    ),
    Story(
        "Which internet provider do I use now?",
        "Fibrelink",
        (
            (("U*", "Our internet with Skyband keeps dropping during video calls."),
             ("A", "That's frustrating. Have you tried restarting the router?")),
            (("U*", "We finally switched to Fibrelink and the calls are stable."),
             ("A", "Glad the switch fixed it.")),
        ),
    ),
    Story(
        "Where does my sister live now?",
        "In Vancouver",
        (
            (("U*", "My sister Noor lives in Calgary, so we mostly talk on Sundays."),
             ("A", "Weekly calls are a nice tradition.")),
            (("U*", "Noor moved to Vancouver for work; she says the rain is worth the mountains."),
             ("A", "Vancouver is beautiful.")),
        ),
    ),
    Story(
        "When is my volunteer shift at the food bank now?",
        "Wednesday evenings",
        (
            (("U*", "I volunteer at the food bank on Saturday mornings, sorting donations."),
             ("A", "That's a generous use of a weekend.")),
            (("U*", "I moved my food bank shift to Wednesday evenings so I can sleep in on Saturdays."),
             ("A", "A sensible change.")),
        ),
    ),
    Story(
        "Which instrument am I practising now?",
        "The bass guitar",
        (
            (("U*", "I practise acoustic guitar for half an hour after dinner."),
             ("A", "Consistent practice is the key.")),
            (("U*", "I sold the acoustic and bought a bass guitar. I've been practising it every night."),
             ("A", "Bass is a great choice if you like rhythm.")),
        ),
    ),
    Story(
        "How much is my monthly rent now?",
        "${rent[1]}",
        (
            (("U*", "Our rent is ${rent[0]} a month, which is fine for the area."),
             ("A", "That sounds reasonable.")),
            (("U*", "The landlord raised the rent to ${rent[1]} a month from this quarter."),
             ("A", "Rent increases are never welcome. Do you want help updating your budget?")),
        ),
        slots={"rent": (("1,450", "1,560"), ("980", "1,040"))},
    ),
    Story(
        "Where do I do my weekly grocery shopping now?",
        "At the co-op on Mill Street",
        (
            (("U*", "I do the big weekly shop at the discount supermarket on Saturday."),
             ("A", "Planning a weekly shop saves money.")),
            (("U*", "I switched my weekly shop to the co-op on Mill Street; it's walkable and the veg is better."),
             ("A", "Walkable shopping is a bonus.")),
        ),
    ),
    Story(
        "How many chickens do I keep?",
        "6",
        (
            (("U*", "We have four hens in the garden coop, and they lay most days."),
             ("A", "Fresh eggs are a treat.")),
            (("U*", "Two more hens joined the flock today, so six chickens in total."),
             ("A", "Make sure the coop has enough room for six.")),
        ),
    ),
)

KU_ABSTENTION = Story(
    "What is the name of my manager at the new company?",
    "The information provided is not enough. You mentioned starting the new job but never named a manager.",
    (
        (("U*", "First week at the architecture studio done! The commute is short and the coffee is good."),
         ("A", "Congratulations on finishing your first week.")),
        (("U*", "I moved desks at the studio to sit near the model workshop."),
         ("A", "Being close to the workshop sounds handy.")),
    ),
)

KU_TRAPS: dict[str, Story] = {
    "answer-too-long": Story(
        "What route do I cycle to work now?",
        "You now ride along the river path to the second bridge, cross to the market side, and finish on"
        " the quiet back streets behind the station instead of taking the ring road.",
        (
            (("U*", "I cycle the ring road to work, it's fast but noisy."),
             ("A", "Noise aside, a fast route helps.")),
            (("U*", "New route: river path to the second bridge, then the back streets behind the station."),
             ("A", "That sounds more pleasant.")),
        ),
    ),
    "answer-only-mentioned": Story(
        "What time is my tennis lesson now?",
        "You only mentioned booking the lessons, not the new time.",
        (
            (("U*", "I booked a block of tennis lessons at the park courts."),
             ("A", "Have fun on court!")),
            (("U*", "The coach asked to move our lessons, and I said yes."),
             ("A", "I hope the new time works for you.")),
        ),
    ),
    "answer-blank": Story(
        "Which membership tier do I have at the pool now?",
        "   ",
        (
            (("U*", "I have the basic tier at the pool, off-peak swims only."),
             ("A", "Off-peak is usually quieter anyway.")),
            (("U*", "I upgraded my pool membership so I can swim before work."),
             ("A", "Early swims are a great start to the day.")),
        ),
    ),
    "evidence-empty": Story(
        "Which airline do I fly with now?",
        "Nordair",
        (
            (("A", "Here are three airlines with direct flights on that route."),),
            (("A-", "I've noted that you now prefer Nordair for work trips."),),
        ),
    ),
    "evidence-too-long": Story(
        "How many kilometres do I cycle on my longest weekly ride now?",
        "80 kilometres",
        tuple(
            (("U*", text), ("A", "Thanks for the detailed update on your riding."))
            for text in (
                "I want to describe my cycling routine in detail so you can help me plan. At the moment my longest"
                " weekly ride is 50 kilometres, usually on Sunday mornings when the roads are quiet. I leave the"
                " house around seven, ride out along the valley road, stop for a coffee at the village with the"
                " stone bridge, and come back over the two short climbs near the reservoir. The first climb is"
                " steep but short; the second is long and gentle, and that is where I usually feel my legs. I"
                " carry two bottles, a banana and a rain jacket, because the weather in the hills changes fast.",
                "A month later I have a few changes to report. I started riding with a club on Saturdays, which"
                " means my Sunday ride is now a recovery spin of about 30 kilometres, while the Saturday club run"
                " has become the long one at 65 kilometres. The club keeps a steady pace, regroups at the top of"
                " every climb and always stops at the same bakery, which sells an excellent almond croissant. I"
                " had to buy proper lights because the winter runs start before sunrise, and I fitted mudguards"
                " so the riders behind me stay dry. My average speed has gone up by almost two kilometres an hour.",
                "Another update: the club introduced a longer route for the spring, and I did it for the first time"
                " today. It goes out past the reservoir, over the ridge road to the coast and back through the"
                " forest, 80 kilometres in all, and that is now my longest weekly ride. I ate properly this time,"
                " a sandwich at the coast and a gel before the ridge, and I felt strong until the very end. The"
                " forest section has some loose gravel, so I am thinking about wider tyres. My knees were fine,"
                " which matters to me after the trouble I had last autumn, and I would like to keep it that way.",
                "To finish the picture, here is how the rest of the week looks. Monday is a rest day, Tuesday is a"
                " turbo session with short intervals, Wednesday is a commute by bike with a detour, Thursday is an"
                " easy hour, Friday is rest, Saturday is the club run and Sunday is the recovery spin. I would like"
                " to add some strength work without losing the freshness I need for Saturday, and I want to know"
                " whether the 80 kilometre route every week is too much so early in the year for someone like me.",
            )
        ),
        gaps=((25, 40, 1), (25, 40, 1), (1, 3, 1)),
    ),
}

TR_STORIES: tuple[Story, ...] = (
    Story(
        "How many days passed between adopting my kitten and her first vet check-up?",
        "{g1} days",
        (
            (("U*", "We adopted a kitten today! She's a grey tabby and we named her {pet}."),
             ("A", "Congratulations! Kittens need a vet check-up in the first weeks.")),
            (("U*", "Took {pet} for her first vet check-up today; she weighs just under a kilo."),
             ("A", "Glad the check-up went well.")),
        ),
        slots={"pet": ("Miso", "Pickle", "Luna")},
        gaps=((6, 24, 1),),
    ),
    Story(
        "How many weeks after starting the couch-to-5k plan did I run my first full 5k?",
        "{w1} weeks",
        (
            (("U*", "Day one of the couch-to-5k plan done. Sixty seconds of running felt like forever."),
             ("A", "Everyone starts somewhere. Well done!")),
            (("U*", "I ran my first full 5k without stopping today! I nearly cried at the finish."),
             ("A", "What an achievement!")),
        ),
        gaps=((49, 84, 7),),
    ),
    Story(
        "How many days did it take for my new sofa to arrive after I ordered it?",
        "{g1} days",
        (
            (("U*", "Ordered the green velvet sofa today, finally."),
             ("A", "Exciting! Did they give you a delivery date?")),
            (("U*", "The sofa was delivered this morning and it fits the living room perfectly."),
             ("A", "Enjoy the new sofa!")),
        ),
        gaps=((9, 40, 1),),
    ),
    Story(
        "How many days after planting the tomato seeds did I pick my first ripe tomato?",
        "{g1} days",
        (
            (("U*", "Planted tomato seeds in little pots on the windowsill today."),
             ("A", "Tomatoes love warmth and light.")),
            (("U*", "Picked my first ripe tomato today! It was small but sweet."),
             ("A", "The first harvest is always the best one.")),
        ),
        gaps=((70, 95, 1),),
    ),
    Story(
        "How many days after my job interview did I get the offer?",
        "{g1} days",
        (
            (("U*", "Had the final interview at the museum today; I think it went well."),
             ("A", "Fingers crossed for you.")),
            (("U*", "They called today with an offer for the curator assistant job!"),
             ("A", "Congratulations!")),
        ),
        gaps=((3, 16, 1),),
    ),
    Story(
        "How many days after buying the tickets did I see the concert?",
        "{g1} days",
        (
            (("U*", "Got two tickets for the string quartet concert at Café Müller today."),
             ("A", "Enjoy the music.")),
            (("U*", "The quartet concert was tonight; they played Dvořák and it was stunning."),
             ("A", "Sounds wonderful.")),
        ),
        gaps=((14, 60, 1),),
    ),
    Story(
        "How many days did it take me to knit my first scarf?",
        "{g1} days",
        (
            (("U*", "Cast on my first scarf today, in chunky blue wool."),
             ("A", "Knitting is relaxing once you get going.")),
            (("U", "Can you explain how to cast off?"),
             ("A", "Knit two stitches, then pass the first over the second, and repeat."),
             ("U", "Thanks! That worked, and the scarf is finished today.")),
        ),
        gaps=((10, 30, 1),),
    ),
    Story(
        "Which happened first, the trip to Kyoto or seeing the lunar eclipse?",
        "The trip to Kyoto",
        (
            (("U*", "Back from the trip to Kyoto (京都) today, the temples were unforgettable."),
             ("A", "Welcome back.")),
            (("U*", "Stayed up to watch the lunar eclipse tonight."),
             ("A", "It must have been beautiful.")),
        ),
        gaps=((10, 60, 1),),
    ),
    Story(
        "How many days ago did I return the faulty blender?",
        "{ask} days ago",
        (
            (("U*", "Returned the faulty blender to the shop today and they gave me a refund."),
             ("A", "Good that the refund was easy.")),
        ),
        ask=(4, 30, 1),
    ),
    Story(
        "Which happened first, my dentist appointment or my haircut?",
        "The dentist appointment",
        (
            (("U*", "Dentist appointment this morning: no cavities!"),
             ("A", "Great news.")),
            (("U*", "Got a haircut today, much shorter than usual."),
             ("A", "A change can feel refreshing.")),
        ),
        gaps=((5, 30, 1),),
    ),
    Story(
        "How many weeks did it take to receive my renewed passport after I sent the application?",
        "{w1} weeks",
        (
            (("U*", "Posted my passport renewal application today."),
             ("A", "Keep the tracking number safe.")),
            (("U*", "My renewed passport arrived today, just in time for the trip."),
             ("A", "Perfect timing.")),
        ),
        gaps=((21, 56, 7),),
    ),
    Story(
        "How many days did it take me to finish Middlemarch?",
        "{g1} days",
        (
            (("U*", "Started reading Middlemarch today; it's a big one."),
             ("A", "It's a classic worth the time.")),
            (("U*", "Finished Middlemarch tonight. Dorothea's ending stayed with me."),
             ("A", "It's a memorable ending.")),
        ),
        gaps=((18, 45, 1),),
    ),
    Story(
        "How many weeks after joining the choir did I sing in my first concert?",
        "{w1} weeks",
        (
            (("U*", "Joined the community choir today, in the alto section."),
             ("A", "Singing in a choir is wonderful.")),
            (("U*", "First choir concert tonight. We sang in the old church and it was magical."),
             ("A", "What a lovely first concert.")),
        ),
        gaps=((35, 70, 7),),
    ),
    Story(
        "How many days after buying my road bike did I do my first 100 km ride?",
        "{g1} days",
        (
            (("U*", "Bought my first proper road bike today, a blue steel frame."),
             ("A", "Enjoy the new bike!")),
            (("U*", "Did my first 100 km ride today on the new bike. Legs are finished."),
             ("A", "Impressive milestone!")),
        ),
        gaps=((30, 60, 1),),
    ),
    Story(
        "How many days before my sister's wedding did I buy my dress?",
        "{g1} days",
        (
            (("U*", "Found the perfect dress for my sister's wedding today, dusty rose and knee length."),
             ("A", "It sounds lovely.")),
            (("U*", "My sister's wedding was today. I cried during the vows 🎂💐"),
             ("A", "Congratulations to your sister!")),
        ),
        gaps=((10, 35, 1),),
    ),
    Story(
        "How many days after moving into the new flat did I hold the housewarming party?",
        "{g1} days",
        (
            (("U*", "Got the keys and moved into the new flat today."),
             ("A", "Congratulations on the move.")),
            (("U*", "Housewarming party tonight, twenty people squeezed into the kitchen."),
             ("A", "Sounds like a great party.")),
        ),
        gaps=((12, 30, 1),),
    ),
    Story(
        "How many weeks ago did I start the pottery class?",
        "{askw} weeks ago",
        (
            (("U*", "First pottery class tonight. My bowl collapsed twice, but I loved it."),
             ("A", "Clay takes practice.")),
        ),
        ask=(14, 63, 7),
    ),
    Story(
        "How many days after making my sourdough starter did I bake my first loaf?",
        "{g1} days",
        (
            (("U*", "Mixed flour and water for a sourdough starter today."),
             ("A", "Feed it daily and keep it warm.")),
            (("U*", "Baked my first sourdough loaf today. The crust crackled!"),
             ("A", "Congratulations on the first loaf.")),
        ),
        gaps=((8, 21, 1),),
    ),
    Story(
        "How many days before the trip to Lisbon did I book the flights?",
        "{g1} days",
        (
            (("U*", "Booked the flights to Lisbon today."),
             ("A", "Exciting! Lisbon is great in spring.")),
            (("U*", "We landed in Lisbon this morning; the pastéis de nata are as good as promised."),
             ("A", "Enjoy the trip!")),
        ),
        gaps=((20, 75, 1),),
    ),
    Story(
        "How many days was my car off the road after it broke down?",
        "{g1m1} days",
        (
            (("U*", "The car broke down on the motorway today and got towed to the garage."),
             ("A", "I'm sorry, that's stressful.")),
            (("U*", "The garage finished the repair and I picked up the car yesterday."),
             ("A", "Glad it's fixed.")),
        ),
        gaps=((4, 15, 1),),
    ),
    Story(
        "Which did I do first, filing my tax return or getting my bike serviced?",
        "Getting the bike serviced",
        (
            (("U*", "Dropped the bike off for its annual service today."),
             ("A", "A service before the season is smart.")),
            (("U*", "Filed my tax return today, a week before the deadline."),
             ("A", "Well done for filing early.")),
        ),
        gaps=((3, 25, 1),),
    ),
    Story(
        "How long was I a member of the gym before I cancelled?",
        "{g1} days",
        (
            (("U*", "Signed up at the gym near the office today."),
             ("A", "Good luck with the new routine.")),
            (("U*", "Cancelled the gym membership today; I only went four times."),
             ("A", "It happens. Maybe a different activity will suit you better.")),
        ),
        gaps=((40, 90, 1),),
    ),
    Story(
        "How many weeks of physiotherapy did I have before my knee stopped hurting?",
        "{w1} weeks",
        (
            (("U*", "First physiotherapy session for my knee today."),
             ("A", "Doing the exercises at home will help.")),
            (("U*", "My knee didn't hurt at all on today's walk. The physio says we're done."),
             ("A", "That's great to hear.")),
        ),
        gaps=((28, 70, 7),),
    ),
    Story(
        "How many days did my neighbour keep my ladder?",
        "{g1} days",
        (
            (("U*", "Lent my ladder to the neighbour today for his gutters."),
             ("A", "Kind of you.")),
            (("U*", "Finally got the ladder back from the neighbour today."),
             ("A", "Better late than never.")),
        ),
        gaps=((7, 30, 1),),
    ),
    Story(
        "How many days ago did I visit the science museum?",
        "{ask} days ago",
        (
            (("U*", "Spent the whole day at the science museum with my nephew; the planetarium was the highlight."),
             ("A", "Sounds like a great day out.")),
        ),
        ask=(3, 25, 1),
    ),
    Story(
        "How many days after starting the new job did I get my first paycheck?",
        "{g1} days",
        (
            (("U*", "First day at the new job today; everyone was welcoming."),
             ("A", "Good luck in the new role.")),
            (("U*", "First paycheck landed today!"),
             ("A", "Congratulations.")),
        ),
        gaps=((14, 35, 1),),
    ),
)

TR_ABSTENTION = Story(
    "How many days after I ordered the bookshelf did it arrive?",
    "The information provided is not enough. You mentioned ordering a desk, not a bookshelf.",
    (
        (("U*", "Ordered a standing desk today."),
         ("A", "Nice, it will help your back.")),
        (("U*", "The standing desk arrived today."),
         ("A", "Enjoy it.")),
    ),
    gaps=((5, 20, 1),),
)

TR_NOT_ENOUGH = Story(
    "How many days did the parcel from my aunt take to arrive?",
    "Not Enough detail: the day the parcel arrived was never mentioned.",
    (
        (("U*", "My aunt posted a parcel to me today, she says it's a surprise."),
         ("A", "How exciting.")),
        (("U*", "I opened my aunt's parcel: a hand-knitted jumper!"),
         ("A", "What a thoughtful gift.")),
    ),
    gaps=((5, 20, 1),),
)

OTHER_TYPE_STORIES: tuple[tuple[str, Story], ...] = (
    ("multi-session", Story(
        "How many different instruments have I mentioned learning?",
        "Two",
        (
            (("U*", "I started ukulele lessons this month."), ("A", "Fun choice.")),
            (("U*", "I also picked up the harmonica for the campfire."), ("A", "Great for travelling.")),
        ),
    )),
    ("multi-session", Story(
        "What is the total I spent on concert tickets?",
        "",
        ((("A", "You haven't told me about any tickets."),),),
    )),
    ("single-session-assistant", Story(
        "What was the third tip you gave me about caring for orchids?",
        "Water them sparingly, about once a week.",
        (
            (("U", "How do I keep my orchid alive?"),
             ("A*", "Give it bright indirect light, use bark instead of soil, and water sparingly, about once a week.")),
        ),
    )),
)

_USER = SINGLE_SESSION_USER
_PREF = SINGLE_SESSION_PREFERENCE

BANK_RECORDS: tuple[Bank, ...] = (
    Bank(_USER, "What breed is my dog?", "A border collie",
         (("U*", "My border collie, Skye, has figured out how to open the back gate."),
          ("A", "Border collies are famously clever."))),
    Bank(_USER, "What did I name my sourdough starter?", "Doughbi",
         (("U*", "I named my sourdough starter Doughbi and I feed it every morning before work."),
          ("A", "A named starter is a cared-for starter."))),
    Bank(_USER, "Where did I go on my last holiday?", "The Faroe Islands",
         (("U-", "Can you help me sort my photos?"),
          ("A", "Of course. How would you like to group them?"),
          ("U*", "By place, mostly. The last holiday was the Faroe Islands, so start with those."))),
    Bank(_USER, "How many siblings do I have?", "Three",
         (("U*", "I'm the middle of four kids, so three siblings to buy birthday gifts for."),
          ("A", "That's a lot of birthdays to track."))),
    Bank(_USER, "What is my favourite board game?", "Carcassonne",
         (("U*", "Carcassonne is my favourite board game; we play it every Friday."),
          ("A", "It's a classic for good reason."))),
    Bank(_USER, "What do I do for a living?", "A paediatric nurse",
         (("U*", "After twelve-hour shifts as a paediatric nurse I need easy dinners."),
          ("A", "Let's find quick, nourishing recipes."))),
    Bank(_USER, "What colour did I paint my front door?", "Mustard yellow",
         (("U*", "I painted the front door mustard yellow and the whole street has opinions."),
          ("A", "A bold door is a great conversation starter."))),
    Bank(_USER, "Which marathon am I training for?", "The Rotterdam marathon",
         (("U*", "I'm training for the Rotterdam marathon in April and I need a taper plan."),
          ("A", "Let's work backwards from race day."))),
    Bank(_USER, "What allergy do I have?", "Shellfish",
         (("U*", "I'm allergic to shellfish, so please leave prawns out of any recipe."),
          ("A", "Noted, no shellfish."))),
    Bank(_USER, "What is my cat's name?", "Biscuit",
         (("U", "My cat Biscuit knocked a glass off the table again."),
          ("A", "Cats and glasses are old enemies."),
          ("U", "Any tips to stop her jumping on the table?"))),
    Bank(_USER, "How long is my commute?", "About 40 minutes each way",
         (("U*", "My commute is about 40 minutes each way on two buses, so I listen to a lot of audiobooks."),
          ("A", "Audiobooks make long commutes pass faster."))),
    Bank(_USER, "What did I study at university?", "Marine biology",
         (("U*", "I studied marine biology, though I ended up working in software."),
          ("A", "Plenty of people change fields after university."))),
    Bank(_USER, "What is my grandmother's hometown?", "Tromsø",
         (("U*", "My grandmother grew up in Tromsø and still talks about the northern lights."),
          ("A", "What a place to grow up."))),
    Bank(_USER, "What vegetable do I grow the most of?", "Courgettes",
         (("U*", "The allotment is overrun with courgettes again. I have nine plants and far too many courgettes."),
          ("A", "Courgette fritters and soup freeze well."))),
    Bank(_USER, "What language does my partner speak at home?", "Portuguese",
         (("U*", "My partner speaks Portuguese with our son at home and I'm trying to keep up."),
          ("A", "Growing up bilingual is a gift."))),
    Bank(_USER, "What is my shoe size?", "EU 43",
         (("?*", "I take an EU 43 in most brands but a 44 in trail shoes."),
          ("A", "Good to know for recommendations."))),
    Bank(_USER, "What instrument did I play as a child?", "The cello",
         (("U*", "I played the cello as a child and I'm thinking of picking it up again."),
          ("A", "Many adults return to an instrument happily."))),
    Bank(_USER, "Which team do I support?", "Hibernian",
         (("U*", "I've supported Hibernian since I was six; Saturday afternoons are sacred."),
          ("A", "Loyal support through thick and thin."))),
    Bank(_USER, "What is my WiFi router model?", "A TP-Link Archer AX55",
         (("U*", "My router is a TP-Link Archer AX55 and the bedroom signal is weak."),
          ("A", "A mesh extender might help."))),
    Bank(_USER, "How old is my son?", "Seven",
         (("U*", "My son turned seven last week and now wants a proper bike with gears."),
          ("A", "Seven is a great age for a first geared bike."))),
    Bank(_USER, "What is my favourite dessert?", "Crème brûlée",
         (("U*", "Crème brûlée is my favourite dessert, and I finally bought a blowtorch to make it."),
          ("A", "Enjoy cracking that caramel top."))),
    Bank(_USER, "Where do I keep my bike?", "In the hallway",
         (("U*", "I keep my bike in the hallway because the flat has no shed, which annoys my flatmate."),
          ("A", "A wall hook might keep the peace."))),
    Bank(_USER, "What kind of tea do I drink in the morning?", "Genmaicha",
         (("U*", "Every morning I drink genmaicha (玄米茶); the toasted rice smell wakes me up."),
          ("A", "Genmaicha is a lovely morning tea."))),
    Bank(_USER, "What is my dog's favourite toy?", "A squeaky hedgehog",
         (("U*", "The dog's favourite toy is a squeaky hedgehog 🦔 that has survived two years."),
          ("A", "Impressive durability."))),
    Bank(_PREF, "Can you suggest something to cook this weekend?",
         "The user would prefer vegetarian dishes they can make in a cast-iron pan, ideally with smoky flavours.",
         (("U*", "I'm vegetarian and I just got a cast-iron pan. I love smoky flavours, paprika, charred peppers, that kind of thing."),
          ("A", "Great, I'll keep that in mind."))),
    Bank(_PREF, "Any podcast recommendations for my commute?",
         "The user would prefer narrative history podcasts with episodes under 40 minutes.",
         (("U*", "I like narrative history podcasts, but my commute is 35 minutes so long episodes never get finished."),
          ("A", "Short narrative episodes, noted."))),
    Bank(_PREF, "What should I read next?",
         "The user would prefer literary science fiction with strong characters, not military space opera.",
         (("U*", "I loved Station Eleven and Klara and the Sun. I don't enjoy military space opera at all."),
          ("A", "That helps narrow it down."))),
    Bank(_PREF, "Can you recommend a hotel for my trip?",
         "The user would prefer a quiet, small hotel within walking distance of the old town, with a good breakfast.",
         (("U*", "For hotels I always pick small quiet places I can walk into the old town from; breakfast matters more to me than a gym."),
          ("A", "Small, central, and a good breakfast."))),
    Bank(_PREF, "Suggest a weekend activity for me.",
         "The user would prefer an outdoor activity that is calm, such as birdwatching or a long walk, not crowds.",
         (("U*", "At weekends I need calm: long walks, birdwatching, anything outdoors without crowds."),
          ("A", "Calm and outdoors, understood."))),
    Bank(_PREF, "What laptop should I buy?",
         "The user would prefer a light laptop with long battery life and a good keyboard for writing.",
         (("U*", "I write all day, so the keyboard matters most, and I travel a lot, so light with long battery life."),
          ("A", "Keyboard, weight and battery it is."))),
    Bank(_PREF, "Any ideas for a gift for my mum?",
         "The user would prefer a handmade or experience gift related to gardening rather than gadgets.",
         (("U*", "Mum hates gadgets. She lives for her garden, and she likes handmade things or days out."),
          ("A", "Garden-related and handmade, got it."))),
    Bank(_PREF, "Can you suggest a workout plan?",
         "The user would prefer short home workouts without equipment, around 20 minutes, that fit a busy morning.",
         (("U*", "I only have 20 minutes in the morning and no equipment at home."),
          ("A", "Bodyweight circuits would fit well."),
          ("U*", "Yes, and nothing that needs jumping, my downstairs neighbour complains."))),
    Bank(_PREF, "Recommend a film for tonight.",
         "The user would prefer a slow, atmospheric foreign-language film rather than an action blockbuster.",
         (("U*", "Tonight I want something slow and atmospheric, subtitles are fine, no explosions please."),
          ("A", "A quiet film night, noted."))),
    Bank(_PREF, "What coffee beans should I try?",
         "The user would prefer light-roast, fruity single-origin beans for their pour-over setup.",
         (("U*", "I brew pour-over and I love fruity light roasts, especially Ethiopian ones."),
          ("A", "Light and fruity suits pour-over."))),
    Bank(_PREF, "Can you help me plan a dinner party menu?",
         "The user would prefer a make-ahead menu with one vegan main, since two guests are vegan.",
         (("U*", "Two of my guests are vegan and I hate being stuck in the kitchen, so everything should be make-ahead."),
          ("A", "A make-ahead menu with a vegan main."))),
    Bank(_PREF, "Suggest a houseplant for my flat.",
         "The user would prefer a low-light, pet-safe plant that tolerates irregular watering.",
         (("U*", "My flat faces north, my cat chews leaves, and I forget to water for weeks."),
          ("A", "Low light, pet-safe and forgiving."))),
    Bank(_PREF, "Which running shoes should I buy?",
         "The user would prefer cushioned neutral shoes with a wide toe box for long road runs.",
         (("U*", "I need a wide toe box, I run long on roads, and I like a lot of cushioning. I don't overpronate."),
          ("A", "Cushioned neutral with a wide fit."))),
    Bank(_PREF, "What music should I put on while I work?",
         "The user would prefer instrumental music, such as ambient or jazz piano, with no lyrics.",
         (("U*", "Lyrics distract me at work; ambient or jazz piano is perfect.\u2028Nothing too upbeat."),
          ("A", "Instrumental only."))),
)

BANK_ABSTENTION = Bank(
    _USER, "What is the name of my goldfish?",
    "You did not mention a goldfish. You mentioned a tortoise called Dumpling.",
    (("U*", "Our tortoise Dumpling has started eating dandelions from the lawn again."),
     ("A", "Dandelions are a tortoise favourite.")),
)

BANK_SPECIALS: dict[str, Bank] = {
    # 40 and 39 code points under the compact session header "SESSION s1 AT 2023/06/01":
    # 24 for the header, 7 for the line break and "USER: ", then the text.
    "bank-40": Bank(_USER, "What diet do I follow?", "Vegan", (("U*", "I'm vegan"),)),
    "bank-39": Bank(_USER, "How far do I usually run?", "5k", (("U*", "I run 5k"),)),
    # 700 and 701 code points with a full header; the 700 one mixes accents, CJK and emoji, so
    # its UTF-8 byte count is larger than its code-point count.
    "bank-700": Bank(
        _USER, "Which city am I moving to?", "Sapporo",
        (("U*", "I am moving to Sapporo (札幌) in the early autumn for a two-year research post, and I"
                " want to get the practical things sorted before I go. My flatmate Zoë is taking over"
                " the lease here, my cello is going into storage at my aunt's house, and I'm selling the"
                " bike because winters there are snowy. I've started evening Japanese lessons twice a"
                " week and I can now order ramen 🍜 without pointing at the menu."),
         ("A", "That's a lot of preparation already. What would you like help with first?"),
         ("U*", "A checklist, please: bank account, residence card, phone contract, and a warm winter"
                " coat that isn't too bulky. I also want to find a café near the university where I can"
                " write in the mornings, and maybe a climbing gym for the evenings.")),
    ),
    "bank-701": Bank(
        _USER, "Which city am I moving to?", "Valencia",
        (("U*", "I am moving to Valencia in the spring for a two-year teaching post, and I want to get"
                " the practical things sorted before I go. My brother is taking over the lease here, my"
                " drum kit is going into storage at a friend's garage, and I'm selling the car because"
                " the city is flat and very good for cycling. I've started Spanish lessons three times a"
                " week and I can now order paella without pointing at the menu."),
         ("A", "That's a lot of preparation already. What would you like help with first?"),
         ("U*", "A checklist, please: bank account, residence permit, phone contract, and somewhere to"
                " buy a second-hand bike. I also want to find a quiet library near the new school where"
                " I can plan lessons, and maybe a running club for the weekend.")),
    ),
    # 697 code points with the session header, 704 with the bracket header.
    BANK_CROSSING_ROLE: Bank(
        _PREF, "Can you plan a three-day itinerary for my trip?",
        "The user would prefer a slow itinerary built around markets, long lunches and one museum a day.",
        (("U*", "I'm going to Lyon for three days in late October with my partner, and we want a slow,"
                " unhurried trip. Mornings at a market, a long lunch somewhere local, one museum a day at"
                " most, and plenty of time to wander the old streets. We don't want to rush between"
                " famous sights or queue for an hour for a photo."),
         ("A", "A slow, food-centred trip sounds lovely. Any constraints?"),
         ("U*", "I don't eat pork, which I know is a challenge in Lyon. I am happy to walk a lot, but my"
                " partner has a bad knee, so hills need to be optional or reachable by the funicular. We"
                " love second-hand bookshops, the old covered passages, quiet squares and small cinemas,"
                " and we'd like one evening at the opera if the tickets are affordable.")),
    ),
    "bank-empty": Bank(
        _USER, "What is my favourite season?", "Autumn",
        (("A", "You said you love autumn for the colours and the cooler runs."),),
    ),
    "bank-too-long": Bank(
        _PREF, "Can you recommend a bread recipe?",
        "The user would prefer a long-fermented rye bread without commercial yeast.",
        tuple(
            ("U*", text) for text in (
                "I bake every weekend and I want to try rye properly. I've only made wheat sourdough so far,"
                " with a starter I've kept for four years, and I'm comfortable with long fermentations and"
                " sticky doughs. I don't want to use commercial yeast at all, because I like the slower flavour.",
                "My kitchen is cold in winter, around seventeen degrees, so I usually proof overnight in the"
                " oven with just the light on. I have a cast-iron pot, a banneton, a digital scale and a"
                " probe thermometer, but no stand mixer, so the recipe has to work by hand.",
                "I like dense, dark loaves with caraway or fennel, the kind you slice thinly and eat with"
                " butter and smoked fish. I'm not a fan of sweet breads or anything with dried fruit, and"
                " I'd rather avoid seeds on the crust because they burn in my oven.",
                "If it helps, my oven runs about ten degrees hot, and the bottom element is stronger than the"
                " top, so loaves sometimes scorch underneath. I usually put a tray on the lowest shelf to"
                " shield them, which seems to help.",
            )
        ) + (("A", "That's plenty of detail, thank you."),),
    ),
}
