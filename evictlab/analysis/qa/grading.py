"""The frozen grader ``deterministic-overlap-v1`` (spec section 4).

:func:`grade_answer` sees only two strings, a model's prediction and the reference answer,
never the policy that produced the prediction. Both are normalised into tokens, then six rules
are tried in order and the first that applies decides; its label is the row's ``grade_rule``.
Everything here is part of the grader version: changing any rule, number word or stopword
means a new ``GRADER_VERSION`` (a protocol constant, re-exported here, since the config names
the grader it was run with).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ...core.protocol import GRADER_VERSION as GRADER_VERSION
from ...errors import ContractError

EMPTY_PREDICTION = "empty-prediction"
INSUFFICIENT = "insufficient"
EXACT = "exact"
SUBSTRING = "substring"
NUMERIC_RANGE = "numeric-range"
NUMERIC_CONFLICT = "numeric-conflict"
OVERLAP_ACCEPT = "overlap-accept"
OVERLAP_REJECT = "overlap-reject"

#: Every ``grade_rule`` label, in the order the rules are tried.
GRADE_RULES = (
    EMPTY_PREDICTION,
    INSUFFICIENT,
    EXACT,
    SUBSTRING,
    NUMERIC_RANGE,
    NUMERIC_CONFLICT,
    OVERLAP_ACCEPT,
    OVERLAP_REJECT,
)

#: Whole tokens replaced by digits; other number words (``eleven``...) stay words.
NUMBER_WORDS = {
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "fifteen": "15",
}

#: The 126 stopwords of this grader version. ``yes``, ``no`` and ``not`` are deliberately
#: absent (they carry the answer); ``nor`` is present.
STOPWORDS = frozenset(
    """
    a about above after again against all also although am an and any are at be because
    been before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers him his how i if in into is it
    its just may me might mine more most must my nor of off on once only or other our ours
    out over own same shall she should so some such than that the their theirs them then
    there these they this those though through to too under until up us very was we were
    what when where whether which while who whom whose why will with would yet you your
    yours
    """.split()
)

#: Both sides must share at least this fraction of their content words (rule 6).
OVERLAP_THRESHOLD = 0.6

#: The answer prompt's "not supported by memory" sentinel, as a token.
_SENTINEL = "insufficient"
_SEPARATORS = re.compile(r"[^0-9a-z]+")
_INTEGER = re.compile(r"[0-9]+")
_RANGE = re.compile(r"\branging from (\d+)(?:\s\S+)*?\sto (\d+)\b")


@dataclass(frozen=True)
class Grade:
    """The verdict on one prediction: whether it is correct and which rule decided."""

    correct: bool
    rule: str


def normalise(text: str) -> list[str]:
    """The grader's tokens of ``text``.

    Lower-case, split on every run of characters outside ``[0-9a-z]`` (so punctuation,
    whitespace and non-ASCII letters separate tokens), drop empty tokens, and replace the
    number words of :data:`NUMBER_WORDS` by their digits.
    """
    return [NUMBER_WORDS.get(token, token) for token in _SEPARATORS.split(text.lower()) if token]


def grade_answer(prediction: str, reference: str) -> Grade:
    """Grade ``prediction`` against ``reference`` with the six rules of spec section 4.

    Raises :class:`ContractError` when the reference has no tokens: such a case cannot be
    graded and means the case data is broken, not the answer.
    """
    for name, value in (("prediction", prediction), ("reference", reference)):
        if not isinstance(value, str):
            raise ContractError(f"the grader takes strings; {name} is {type(value).__name__}")
    reference_tokens = normalise(reference)
    if not reference_tokens:
        raise ContractError("the reference answer has no tokens to grade against")
    prediction_tokens = normalise(prediction)
    if not prediction_tokens:
        return Grade(False, EMPTY_PREDICTION)
    if prediction_tokens == [_SENTINEL]:
        return Grade(False, INSUFFICIENT)
    if prediction_tokens == reference_tokens:
        return Grade(True, EXACT)
    if _contains_run(prediction_tokens, reference_tokens) or _contains_run(
        reference_tokens, prediction_tokens
    ):
        return Grade(True, SUBSTRING)
    if _within_reference_range(prediction_tokens, reference_tokens):
        return Grade(True, NUMERIC_RANGE)
    prediction_integers = _integer_set(prediction_tokens)
    reference_integers = _integer_set(reference_tokens)
    if prediction_integers and reference_integers and prediction_integers != reference_integers:
        return Grade(False, NUMERIC_CONFLICT)
    if _content_overlap_accepted(prediction_tokens, reference_tokens):
        return Grade(True, OVERLAP_ACCEPT)
    return Grade(False, OVERLAP_REJECT)


def _contains_run(tokens: Sequence[str], run: Sequence[str]) -> bool:
    """Whether ``run`` occurs in ``tokens`` as a contiguous sequence of whole tokens."""
    width = len(run)
    return any(tokens[start : start + width] == run for start in range(len(tokens) - width + 1))


# Integer tokens are compared as digit strings, never through int(): Python refuses to
# convert strings longer than 4,300 digits, and a model's answer may contain one.
def _integer_key(digits: str) -> tuple[int, str]:
    """A key that orders digit strings by their integer value (leading zeros ignored)."""
    significant = digits.lstrip("0") or "0"
    return (len(significant), significant)


def _integer_set(tokens: Sequence[str]) -> set[tuple[int, str]]:
    return {_integer_key(token) for token in tokens if _INTEGER.fullmatch(token)}


def _within_reference_range(prediction: Sequence[str], reference: Sequence[str]) -> bool:
    """Rule 4: the reference states a range and every prediction integer lies inside it."""
    match = _RANGE.search(" ".join(reference))
    if match is None:
        return False
    low, high = sorted(_integer_key(bound) for bound in match.groups())
    integers = _integer_set(prediction)
    return bool(integers) and all(low <= value <= high for value in integers)


def _content_overlap_accepted(prediction: Sequence[str], reference: Sequence[str]) -> bool:
    """Rule 6: each side shares at least :data:`OVERLAP_THRESHOLD` of its content words."""
    prediction_words = set(prediction) - STOPWORDS
    reference_words = set(reference) - STOPWORDS
    if not prediction_words or not reference_words:
        return False
    shared = len(prediction_words & reference_words)
    return (
        shared / len(prediction_words) >= OVERLAP_THRESHOLD
        and shared / len(reference_words) >= OVERLAP_THRESHOLD
    )
