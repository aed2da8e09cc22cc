"""Answer prompt, chat messages, request payload and request fingerprint (spec 3.1 to 3.3).

The answer prompt is a text template with a ``SYSTEM:`` part and a ``USER:`` part. A case is
rendered into two chat messages by plain string replacement of three placeholders; the
messages, the model and the sampling settings form the request payload, and the SHA-256 of the
payload's canonical JSON is the ``request_fingerprint`` that identifies a call. Two policies
that keep the same facts therefore produce the same fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import ContractError

MEMORY_JOINERS = {"blank-line": "\n\n", "newline": "\n"}

SYSTEM_HEADER = "SYSTEM:\n"
USER_SEPARATOR = "\n\nUSER:\n"
DATE_PLACEHOLDER = "{{CURRENT_DATE_SECTION}}"
MEMORY_PLACEHOLDER = "{{STORED_MEMORY}}"
QUESTION_PLACEHOLDER = "{{QUESTION}}"
USER_PLACEHOLDERS = (DATE_PLACEHOLDER, MEMORY_PLACEHOLDER, QUESTION_PLACEHOLDER)


@dataclass(frozen=True)
class AnswerTemplate:
    """The two parts of an answer prompt, without surrounding newlines."""

    system: str
    user: str


def parse_answer_template(text: str, *, source: str = "answer prompt") -> AnswerTemplate:
    """Split an answer prompt into its system and user parts (spec 3.2).

    ``text`` must start with ``SYSTEM:`` and a newline and contain a blank line followed by
    ``USER:`` and a newline; the system part is the text between the two, the user part is
    everything after the separator, both with leading and trailing newlines stripped. The user
    part must contain the three placeholders. A violation raises :class:`ContractError` naming
    ``source`` and what is missing.
    """
    line_hint = " (line endings must be LF, not CRLF)" if "\r\n" in text else ""
    if not text.startswith(SYSTEM_HEADER):
        raise ContractError(f"{source}: must start with 'SYSTEM:' and a newline{line_hint}")
    rest = text[len(SYSTEM_HEADER):]
    system, separator, user = rest.partition(USER_SEPARATOR)
    if not separator:
        raise ContractError(
            f"{source}: missing the separator: a blank line, then 'USER:' and a newline{line_hint}"
        )
    user = user.strip("\n")
    missing = [placeholder for placeholder in USER_PLACEHOLDERS if placeholder not in user]
    if missing:
        raise ContractError(f"{source}: the USER part lacks placeholder(s) {', '.join(missing)}")
    return AnswerTemplate(system=system.strip("\n"), user=user)


def render_messages(
    template: AnswerTemplate, *, question: str, question_date: str | None, facts: Sequence[Mapping[str, Any]],
    memory_joiner: str = "blank-line",
) -> list[dict[str, str]]:
    """The system and user messages for one case and one kept set (spec 3.2).

    ``facts`` are the kept facts, each a mapping with string ``id`` and ``content``; at least
    one is required and ids must be unique. Blocks are ordered by fact id whatever the order of
    ``facts``. ``memory_joiner`` names a key of :data:`MEMORY_JOINERS`.
    """
    user = template.user
    # Plain replacement in this fixed order: text inserted by an earlier step (a fact that
    # happens to contain "{{QUESTION}}") is replaced by a later one, as in the reference.
    user = user.replace(DATE_PLACEHOLDER, _current_date_section(question_date))
    user = user.replace(MEMORY_PLACEHOLDER, _stored_memory(facts, memory_joiner))
    user = user.replace(QUESTION_PLACEHOLDER, question)
    return [{"role": "system", "content": template.system}, {"role": "user", "content": user}]


def _current_date_section(question_date: str | None) -> str:
    return f"CURRENT DATE: {question_date}\n" if question_date else ""


def _stored_memory(facts: Sequence[Mapping[str, Any]], memory_joiner: str) -> str:
    if memory_joiner not in MEMORY_JOINERS:
        raise ContractError(
            f"unknown memory_joiner {memory_joiner!r}; known: {', '.join(MEMORY_JOINERS)}"
        )
    if not facts:
        raise ContractError("stored memory needs at least one kept fact")
    blocks: dict[str, str] = {}
    for position, fact in enumerate(facts):
        fact_id, content = _fact_field(fact, position, "id"), _fact_field(fact, position, "content")
        if fact_id in blocks:
            raise ContractError(f"duplicate fact id {fact_id!r} in the kept facts")
        blocks[fact_id] = f"[{fact_id}]\n{content}"
    # Plain string order of the ids, not the order the selector kept them in.
    return MEMORY_JOINERS[memory_joiner].join(blocks[fact_id] for fact_id in sorted(blocks))


def _fact_field(fact: Mapping[str, Any], position: int, name: str) -> str:
    if not isinstance(fact, Mapping):
        raise ContractError(
            f"kept fact at position {position} must be a mapping with 'id' and 'content'"
        )
    value = fact.get(name)
    if not isinstance(value, str):
        raise ContractError(f"kept fact at position {position}: '{name}' must be a string")
    return value


def row_id(case_id: str, policy: str) -> str:
    """The id of one answer row: case id and policy joined by a double underscore."""
    return f"{case_id}__{policy}"


def build_payload(
    messages: Sequence[Mapping[str, str]], *, model: str, temperature: float, max_tokens: int, stream: bool
) -> dict[str, Any]:
    """The chat-completions request payload: exactly these five keys (spec 3.3).

    ``temperature`` is stored as a float (``0`` and ``0.0`` give the same fingerprint); each
    message is copied as ``role`` and ``content`` only.
    """
    if not isinstance(model, str) or not model:
        raise ContractError("model must be a non-empty string")
    if not _is_finite_number(temperature):
        raise ContractError(f"temperature must be a finite number, got {temperature!r}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ContractError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    if not isinstance(stream, bool):
        raise ContractError(f"stream must be true or false, got {stream!r}")
    return {
        "model": model,
        "temperature": float(temperature),
        "max_tokens": max_tokens,
        "stream": stream,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
    }


def _is_finite_number(value: Any) -> bool:
    return (
        not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    )


def canonical_payload_json(payload: Mapping[str, Any]) -> str:
    """The payload text that is hashed: keys sorted at every level, raw non-ASCII.

    The separators are written out because they are part of the fingerprint's bytes: ``", "``
    and ``": "`` (Python's defaults without indentation), so the text matches the reference.
    """
    try:
        return json.dumps(
            payload, sort_keys=True, ensure_ascii=False, separators=(", ", ": "), allow_nan=False
        )
    except ValueError as error:
        raise ContractError(f"payload cannot be serialised as JSON: {error}") from None


def request_fingerprint(payload: Mapping[str, Any]) -> str:
    """Lowercase hex SHA-256 of the UTF-8 bytes of :func:`canonical_payload_json`."""
    try:
        data = canonical_payload_json(payload).encode("utf-8")
    except UnicodeEncodeError:
        raise ContractError(
            "payload text contains a lone surrogate and cannot be encoded as UTF-8"
        ) from None
    return hashlib.sha256(data).hexdigest()
