"""Reading a DeerMem store (spec 1.14): fact files, usage and audit sidecars, without the text.

:func:`read_store` walks ``<root>/users/<uid>/agents/<agent>/facts/**/*.md`` (and the no-user
tree ``<root>/agents/<agent>/...``), parses every fact file as ``FileMemoryStorage`` does and
refuses, with the file and the field, what it refuses: no front matter or no closing
delimiter, a front matter that is not a mapping, an id that differs from the file name, a
scope (``user_id``, ``agent_name``) that is not the bucket's, and every broken field rule of
the schema-v2 table (an unquoted YAML timestamp loads as a date and is refused, as in
production). Production fails the whole agent read on one bad file; evictlab names every bad
file, and goes on without them only when asked (:func:`check_problems`).

What is kept of a fact is what the policies, staleness and injection read (:data:`KEPT`)
plus what is counted of its content: ``content_tokens`` (spec 1.13's rule, :mod:`..tokens`),
``content_length`` (characters), ``line_tokens`` (its injection line, ``\n- [category | conf]
content``, by the same rule) and ``content_key`` (a digest of the duplicate key, 1.12 C5.4).
The content, the title and free-text fields (``sourceError``, ``topics``) are read to be
counted and then dropped; no message names them. The sidecars are read as DeerMem reads
them: an unreadable file, or one whose root is not an array (audit) or an object (usage), is
empty, and the import says so.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ContractError
from ...policies.signals import parse_timestamp
from ...readers import (
    MAX_PROTOCOL_FILE_BYTES,
    MAX_ROWS_FILE_BYTES,
    parse_yaml,
    read_bounded,
    repeated_keys,
    structure_problem,
)
from ...times import iso_z
from ..tokens import content_digest, fact_line, pool_line_tokens, token_counter

CATEGORIES = ("preference", "correction", "context", "goal", "behavior", "identity", "constraint", "decision", "other")
SOURCE_TYPES = ("manual", "consolidation", "import", "unknown")
FACT_ID = re.compile(r"[A-Za-z0-9_-]+")
AGENT = re.compile(r"[A-Za-z0-9-]+|__default__")
TIMESTAMPS = ("createdAt", "updatedAt", "lastConfirmedAt", "consolidatedAt")
#: The fact fields an import keeps (with ``content_tokens`` and ``content_length``).
KEPT = ("id", "category", "categoryExtension", "confidence", "createdAt", "updatedAt", "lastConfirmedAt",
        "confirmationCount", "expected_valid_days", "revision", "source", "consolidatedFrom")  # fmt: skip
METADATA, USAGE_FILE, AUDIT_FILE = ".metadata", "fact-usage.json", "eviction-audit.json"
JOURNAL = ".memory.journal.json"
PRODUCTION_NOTE = (
    "DeerMem fails the whole agent read (HTTP 500 'Stored memory data is corrupted.') on one such file;"
    " evictlab names every one and imports the rest only with --skip-invalid"
)


def stored_category(category: str) -> str:
    """The ``category`` storage writes (spec 1.14): one of :data:`CATEGORIES` or ``""`` as is (readers
    take ``""`` as ``context``), anything else ``other``, the original then kept as ``categoryExtension``."""
    return category if category in CATEGORIES or category == "" else "other"


class StoreProblem(ContractError):
    """A fact file DeerMem would refuse; the message names the file and the field."""


def user_dir_name(raw: str) -> str:
    """``<uid>`` of a raw user id: itself when made of ``[A-Za-z0-9_-]``, else sanitised + hash."""
    if FACT_ID.fullmatch(raw):
        return raw
    return re.sub(r"[^A-Za-z0-9_-]", "-", raw) + "-" + hashlib.sha256(raw.encode()).hexdigest()[:16]


def shard(fact_id: str) -> str:
    """``<hh>``: the first two hex digits of SHA-256 of the id."""
    return hashlib.sha256(fact_id.encode()).hexdigest()[:2]


@dataclass
class Bucket:
    """One (user, agent) scope of a store: its facts (sorted by id, no text) and sidecars."""

    user_dir: str | None  # None: the no-user tree
    user_id: str | None
    agent: str
    facts: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    audit: list[Any] = field(default_factory=list)

    @property
    def key(self) -> str:
        """``<uid>/<agent>``, or ``<agent>`` for the no-user tree: the case id of the bucket."""
        return self.agent if self.user_dir is None else f"{self.user_dir}/{self.agent}"

    @property
    def relative(self) -> Path:
        base = Path("agents") / self.agent
        return base if self.user_dir is None else Path("users") / self.user_dir / base


@dataclass
class Store:
    """What :func:`read_store` read: the buckets, the refused files and the notes, and the clock."""

    root: Path
    buckets: list[Bucket]
    clock: _dt.datetime
    token_counting: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_store(
    root: str | Path,
    *,
    user: str | None = None,
    agent: str | None = None,
    token_counting: str = "tiktoken",
    clock: _dt.datetime | None = None,
) -> Store:
    """Every bucket of the store at ``root`` (only ``user``'s and ``agent``'s when given).

    A refused file is left out and named in :attr:`Store.problems` (one line each: the file
    and the field); callers decide whether to go on without it (:func:`check_problems`). The
    clock is ``clock`` or the latest time the store records (a fact's creation, update or
    confirmation, an access, an audit event), so importing the same files gives the same
    snapshot. A fact without ``createdAt`` gets the clock (DeerMem gives it the load time).
    """
    root = Path(root)
    if not root.is_dir():
        raise ContractError(f"{root}: not a DeerMem store folder")
    counter = token_counter(token_counting)
    problems: list[str] = []
    notes: list[str] = []
    buckets = [_read_bucket(root, bucket, counter.count, problems, notes) for bucket in _buckets(root, user, agent)]
    if not buckets:
        wanted = " ".join(part for part in (user and f"user {user!r}", agent and f"agent {agent!r}") if part)
        raise ContractError(f"{root}: no agent bucket{' for ' + wanted if wanted else ''} (expected"
                            " users/<uid>/agents/<agent>/facts/ or agents/<agent>/facts/)")
    moment = clock or _latest(buckets)
    for bucket in buckets:
        for fact in bucket.facts:
            fact.setdefault("createdAt", iso_z(moment))
            fact.setdefault("updatedAt", fact["createdAt"])
    return Store(root, buckets, moment, counter.method, problems, list(dict.fromkeys(notes)))


def check_problems(store: Store, skip_invalid: bool) -> None:
    """Refuse a store with refused files unless ``skip_invalid`` (the files are listed before)."""
    if store.problems and not skip_invalid:
        raise StoreProblem(f"{len(store.problems)} fact file(s) refused: {PRODUCTION_NOTE}")


def _buckets(root: Path, user: str | None, agent: str | None) -> list[Bucket]:
    found = []
    trees = [(None, root)] + [(path.name, path) for path in sorted((root / "users").glob("*")) if path.is_dir()]
    for user_dir, tree in trees:
        if user is not None and user_dir != user_dir_name(user):
            continue
        for folder in sorted((tree / "agents").glob("*")):
            if (folder / "facts").is_dir() and (agent is None or folder.name == agent.lower()):
                found.append(Bucket(user_dir, user, folder.name))
    return found


def _read_bucket(root: Path, bucket: Bucket, count: Any, problems: list[str], notes: list[str]) -> Bucket:
    folder = root / bucket.relative
    if (folder.parents[1] / JOURNAL).exists():
        notes.append(f"{folder.parents[1] / JOURNAL}: an unfinished commit (DeerMem rolls it back on its next"
                     " access); the fact files may be mid-commit")
    if (folder / "memory.json").exists() or (bucket.agent == "lead-agent" and not (folder / "config.yaml").exists()):
        notes.append(f"{folder}: DeerMem migrates this bucket on its next read (a legacy per-agent memory.json, or"
                     " lead-agent without config.yaml, which moves to __default__); evictlab reads it as it is")
    if not AGENT.fullmatch(bucket.agent):
        problems.append(f"{folder}: agent folder name {bucket.agent!r} is not [A-Za-z0-9-]+ or __default__")
        return bucket
    by_id: dict[str, Path] = {}
    for path in sorted((folder / "facts").glob("**/*.md")):
        try:
            fact = parse_fact(path, read_bounded(path, MAX_PROTOCOL_FILE_BYTES, what="fact file", error=StoreProblem),
                              bucket, count, notes)
        except StoreProblem as problem:
            problems.append(str(problem))
            continue
        if fact["id"] in by_id:
            problems.append(f"{path}: field 'id': {fact['id']!r} is also the id of {by_id[fact['id']]}")
            continue
        by_id[fact["id"]] = path
        if path.parent.name != shard(fact["id"]):
            notes.append(f"{path}: in shard {path.parent.name}, not {shard(fact['id'])}: DeerMem loads it but"
                         " cannot reach it by id (get, delete and upsert miss it)")
        bucket.facts.append(fact)
    bucket.facts.sort(key=lambda fact: fact["id"])
    bucket.usage = _sidecar(folder / METADATA / USAGE_FILE, dict, notes)
    bucket.audit = _sidecar(folder / METADATA / AUDIT_FILE, list, notes)
    return bucket


def _sidecar(path: Path, kind: type, notes: list[str]) -> Any:
    """A sidecar as DeerMem reads it (Python's ``json``): missing, unreadable or of the wrong root
    type reads as empty. ``json`` also reads NaN, Infinity, a number beyond the double range (as
    infinity) and a repeated key (the last value wins); the snapshot holds such numbers as null
    (1.3 reads them alike: no heat, no score), so that its strict readers read it back."""
    if not path.exists():
        return kind()
    repeated: list[str] = []

    def last_wins(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        document = dict(pairs)
        if len(document) != len(pairs):
            repeated.extend(repeated_keys(pairs))
        return document

    try:
        value = json.loads(read_bounded(path, MAX_ROWS_FILE_BYTES, what="sidecar"), object_pairs_hook=last_wins)
    except ContractError as problem:
        notes.append(f"{problem}; read as empty, as DeerMem does")
        return kind()
    except (UnicodeDecodeError, ValueError, RecursionError) as problem:
        reason = "not UTF-8 text" if isinstance(problem, UnicodeDecodeError) else "not JSON Python reads"
        notes.append(f"{path}: {reason} ({str(problem).splitlines()[0][:200]}); read as empty, as DeerMem does")
        return kind()
    if repeated:
        notes.append(f"{path}: repeats key(s) {', '.join(sorted(set(repeated)))!r} in an object; the last value is"
                     " read, as DeerMem does")  # fmt: skip
    value, replaced = _finite(value)
    if replaced:
        notes.append(f"{path}: {replaced} non-finite number(s) (NaN, Infinity or beyond the double range) read as"
                     " null: no heat or score, as DeerMem reads them")  # fmt: skip
    found = structure_problem(value, strings=False)
    if found:
        notes.append(f"{path}: {found}; read as empty")
        return kind()
    if not isinstance(value, kind):
        notes.append(f"{path}: the root is not a JSON {'array' if kind is list else 'object'}; read as empty,"
                     " as DeerMem does")
        return kind()
    return value


# --------------------------------------------------------------------------- one fact file


def split_fact_text(text: str) -> tuple[str, str, str] | None:
    """``(front matter, title, content)`` of a fact file's text, or None without front matter."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # universal newlines
    end = text.find("\n---\n", 3)
    if not text.startswith("---\n") or end < 0:
        return None
    lines = text[end + 5 :].lstrip("\n").split("\n")
    title = ""
    if lines[0].startswith("# "):
        title, lines = lines[0][2:].strip(), lines[1:]
        if lines and not lines[0].strip():
            lines = lines[1:]
    return text[4:end], title, "\n".join(lines).strip()


def _finite(value: Any) -> tuple[Any, int]:
    """``value`` with every NaN or infinite float replaced by None, and how many were."""
    if isinstance(value, float) and not math.isfinite(value):
        return None, 1
    if isinstance(value, list):
        items = [_finite(item) for item in value]
        return [item for item, _ in items], sum(count for _, count in items)
    if isinstance(value, dict):
        pairs = {key: _finite(item) for key, item in value.items()}
        return {key: item for key, (item, _) in pairs.items()}, sum(count for _, count in pairs.values())
    return value, 0


def parse_fact(path: Path, data: bytes, bucket: Bucket, count: Any, notes: list[str] | None = None) -> dict[str, Any]:
    """The kept fields of one fact file, or :class:`StoreProblem` naming the file and field.

    A key repeated in the front matter is read as PyYAML's ``safe_load`` reads it (the last
    value wins), with a line in ``notes``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise StoreProblem(f"{path}: not UTF-8 text (byte {error.start})") from None
    parts = split_fact_text(text)
    if parts is None:
        raise StoreProblem(f"{path}: no front matter (the file must start with '---' and close it with a '---' line)")
    front, _title, content = parts
    repeated: list[str] = []
    meta = parse_yaml(front, where=f"{path}: front matter", error=StoreProblem, repeated=repeated)
    if repeated and notes is not None:
        notes.append(f"{path}: front matter repeats key {', '.join(map(repr, dict.fromkeys(repeated)))}; the last value"
                     " is read, as DeerMem's YAML loader does")  # fmt: skip
    if not isinstance(meta, dict):
        raise StoreProblem(f"{path}: the front matter is not a YAML mapping")
    fact = check_fields(meta, path, bucket)
    fact["content_tokens"] = count(content)
    fact["content_length"] = len(content)
    avoid = meta.get("sourceError")
    # The fact's line as DeerMem injects it (counted as a later line), and its duplicate key (spec 1.12-1.13).
    line = fact_line(fact.get("category"), fact["confidence"], content, avoid.strip() if isinstance(avoid, str) else "")
    fact["line_tokens"] = pool_line_tokens(line, count)
    fact["content_key"] = content_digest(content)
    return fact


def check_fields(meta: dict[Any, Any], path: Path, bucket: Bucket) -> dict[str, Any]:
    """Spec 1.14's field rules on a front matter; the kept fields, normalised as storage does."""

    def bad(name: str, rule: str) -> StoreProblem:
        value = meta.get(name)
        got = "an unquoted YAML timestamp" if isinstance(value, _dt.date) else type(value).__name__
        return StoreProblem(f"{path}: field {name!r}: {rule}, got {got}")

    fact_id = meta.get("id")
    if not isinstance(fact_id, str) or not FACT_ID.fullmatch(fact_id):
        raise bad("id", "required, a string of [A-Za-z0-9_-]")
    if fact_id != path.stem:
        raise StoreProblem(f"{path}: field 'id': {fact_id!r} differs from the file name {path.stem!r}")
    _check_scope(meta, path, bucket, bad)
    for name in TIMESTAMPS:
        if name in meta and not isinstance(meta[name], str):
            raise bad(name, "must be a quoted string")
    category = meta.get("category")
    if "category" in meta and not isinstance(category, str):
        raise bad("category", "must be a string")
    for name in ("categoryExtension",):
        if name in meta and not isinstance(meta[name], str):
            raise bad(name, "must be a string")
    confidence = meta.get("confidence", 0.5)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
        raise bad("confidence", "must be a number between 0 and 1")
    if meta.get("status", "active") != "active":
        raise bad("status", "must be 'active'")
    for name in ("topics", "consolidatedFrom"):
        if not isinstance(meta.get(name, []), list) or not all(isinstance(item, str) for item in meta.get(name, [])):
            raise bad(name, "must be a list of strings")
    for name, low in (("revision", 1), ("confirmationCount", 1)):
        value = meta.get(name, low)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise bad(name, f"must be an integer >= {low}")
    fact = {name: meta[name] for name in KEPT if name in meta}
    fact["confidence"] = float(confidence)
    fact["source"] = _source(meta, bad)
    if isinstance(category, str) and stored_category(category) != category:  # storage's rewrite
        fact["category"], fact["categoryExtension"] = stored_category(category), category
    evd = fact.get("expected_valid_days", 0)
    if not isinstance(evd, (int, float, str, type(None))) or (isinstance(evd, float) and not math.isfinite(evd)):
        del fact["expected_valid_days"]  # kept as written by storage; only JSON numbers and strings travel
    return fact


def _check_scope(meta: dict[Any, Any], path: Path, bucket: Bucket, bad: Any) -> None:
    agent_name = meta.get("agent_name")
    if not isinstance(agent_name, str) or agent_name.lower() != bucket.agent.lower():
        raise bad("agent_name", f"required, the bucket's agent {bucket.agent!r} (any case)")
    user_id = meta.get("user_id")
    if bucket.user_dir is None:
        if user_id is not None:
            raise bad("user_id", "must be null or absent in the no-user tree")
        return
    if not isinstance(user_id, str) or user_dir_name(user_id) != bucket.user_dir:
        raise bad("user_id", f"required, the raw user id of folder {bucket.user_dir!r}")
    if bucket.user_id is None:
        bucket.user_id = user_id  # the first fact names the raw id; the others must agree
    elif user_id != bucket.user_id:
        raise StoreProblem(f"{path}: field 'user_id': {user_id!r} is not the bucket's user {bucket.user_id!r}")


def _source(meta: dict[Any, Any], bad: Any) -> dict[str, Any]:
    source = meta.get("source")
    if source is None:
        return {"type": "unknown", "threadId": None}
    if isinstance(source, str):
        return {"type": source, "threadId": None} if source in SOURCE_TYPES else {"type": "conversation",
                                                                                  "threadId": source}
    if (not isinstance(source, dict) or not isinstance(source.get("type"), str)
            or not isinstance(source.get("threadId"), (str, type(None)))):  # fmt: skip
        raise bad("source", "must be a mapping {type: string, threadId: string or null} or a string")
    return {"type": source["type"], "threadId": source.get("threadId")}


# --------------------------------------------------------------------------- times


def recorded_times(bucket: Bucket) -> list[_dt.datetime]:
    """Every readable time the bucket records (facts, usage, audit events)."""
    values: list[Any] = [fact.get(name) for fact in bucket.facts for name in TIMESTAMPS]
    values += [entry.get("lastAccessedAt") for entry in bucket.usage.values() if isinstance(entry, dict)]
    values += [event.get("occurredAt") for event in bucket.audit if isinstance(event, dict)]
    return [moment for moment in map(parse_timestamp, values) if moment is not None]


def _latest(buckets: Sequence[Bucket]) -> _dt.datetime:
    times = [moment for bucket in buckets for moment in recorded_times(bucket)]
    if not times:
        raise ContractError("the store records no readable time; pass --clock")
    return max(times)
