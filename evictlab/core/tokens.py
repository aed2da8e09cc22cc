"""Token counts of DeerMem's injection budget (spec 1.13): one counter for stores and traces.

DeerMem counts with tiktoken's ``cl100k_base`` encoding when it loads, and otherwise (tiktoken
missing, its encoding file not loadable, or ``token_counting: char``) with the character rule
``(len - cjk) // 4 + cjk // 2``, where ``cjk`` counts code points in U+4E00-U+9FFF,
U+3040-U+30FF and U+AC00-U+D7A3. evictlab does the same: tiktoken is not a dependency, and
without a network its encoding loads only from tiktoken's own cache, so on most machines the
count is the character rule. Every count says which rule made it (:attr:`TokenCounter.method`).
"""

from __future__ import annotations

import functools
import hashlib
import html
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..policies.signals import read_number

TIKTOKEN, CHAR = "tiktoken", "char"
MODES = (TIKTOKEN, CHAR)
CL100K = "cl100k_base"
#: What a count made by each rule is recorded as.
METHODS = {TIKTOKEN: f"tiktoken-{CL100K}", CHAR: CHAR}
_CJK = re.compile("[\u4e00-\u9fff\u3040-\u30ff\uac00-\ud7a3]")


def char_tokens(text: str) -> int:
    """The character rule: ``(len - cjk) // 4 + cjk // 2`` (``Facts:\\n`` is 1, ``中文测试abcd`` 3)."""
    cjk = len(_CJK.findall(text))
    return (len(text) - cjk) // 4 + cjk // 2


@dataclass(frozen=True)
class TokenCounter:
    """A token count function and the rule it applies (``tiktoken-cl100k_base`` or ``char``)."""

    method: str
    count: Callable[[str], int]


@functools.cache
def _cl100k() -> Callable[[str], int] | None:
    try:
        import tiktoken  # type: ignore[import-not-found]

        encoding = tiktoken.get_encoding(CL100K)
    except Exception:  # noqa: BLE001 - any failure to load means the char rule, as in DeerMem
        return None
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def token_counter(mode: str = TIKTOKEN) -> TokenCounter:
    """The counter DeerMem would use in ``mode`` on this machine (``char`` when tiktoken cannot load)."""
    if mode not in MODES:
        raise ValueError(f"token counting must be one of {', '.join(MODES)}, got {mode!r}")
    encode = _cl100k() if mode == TIKTOKEN else None
    if encode is None:
        return TokenCounter(METHODS[CHAR], char_tokens)
    return TokenCounter(METHODS[TIKTOKEN], encode)


def count_tokens(text: str, mode: str = TIKTOKEN) -> int:
    """``text``'s token count under ``mode`` (see :func:`token_counter` for the rule used)."""
    return token_counter(mode).count(text)


def content_key(content: str) -> str:
    """The duplicate key: stripped and case-folded, inner whitespace kept (spec 1.11a, 1.12 C5.4)."""
    return content.strip().casefold()


def content_digest(content: str) -> str:
    """A trace's ``content_key`` for a fact whose text is not kept: 16 hex digits of SHA-256 of the key."""
    return hashlib.sha256(content_key(content).encode()).hexdigest()[:16]


def injection_confidence(value: object) -> float:
    """The confidence injection sorts and prints by: float-coerced, unusable -> 0.0, clamped."""
    number = read_number(value)
    return 0.0 if number is None else min(1.0, max(0.0, number))


def pool_line_tokens(line: str, count: Callable[[str], int] = char_tokens, *, first: bool = False) -> int:
    """An injection line's tokens in its pool (spec 1.13): a later line costs ``\\n`` + line, the
    first line of a pool is counted alone (``first``)."""
    return count(line if first else "\n" + line)


def fact_line(category: object, confidence: object, content: str, source_error: str = "") -> str:
    """A fact's injection line: ``- [<category> | <conf 2dp>] <content>`` (+ ``(avoid: …)`` for a
    correction with a ``sourceError``), escaped with quotes left alone."""
    name = html.escape(str(category).strip() if category is not None else "", quote=False) or "context"
    line = f"- [{name} | {injection_confidence(confidence):.2f}] {html.escape(content, quote=False)}"
    if name == "correction" and source_error:
        line += f" (avoid: {html.escape(source_error, quote=False)})"
    return line
