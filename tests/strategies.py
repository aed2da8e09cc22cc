"""Hypothesis strategies for DeerMem-shaped facts, usage maps and parameters.

The values deliberately include everything DeerMem's fallbacks must survive: confidences of
every type (numeric strings, ``"1_0"``, ``"1e400"``, booleans, ``None``, NaN, infinities),
timestamps with ``Z``, offsets, whitespace, naive or garbage text, categories that spell
``correction`` with odd case and padding, and usage entries valid and malformed. Small value
pools make exact score ties frequent, so tie-breaks are exercised too.

Import from tests as ``from strategies import ...`` (pytest puts ``tests/`` on the path).
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

from hypothesis import strategies as st

from evictlab.policies import PolicyParams

UTC = _dt.UTC
CLOCK = _dt.datetime(2026, 8, 13, tzinfo=UTC)

_WELL_FORMED_CONFIDENCE = st.sampled_from([0.0, 0.1, 0.5, 0.65, 0.7, 0.9, 0.95, 1.0])
_ODD_CONFIDENCE = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(
        [
            math.nan,
            math.inf,
            -math.inf,
            -3,
            7,
            "0.9",
            " 0.7 ",
            "high",
            "",
            "1_0",
            "1e400",
            "-1e400",
            "nan",
            10**400,
            [0.9],
            {"value": 0.9},
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-5, max_value=5),
    st.floats(min_value=0, max_value=1).map(repr),
)


def confidences() -> st.SearchStrategy[Any]:
    """Any value a fact's ``confidence`` field may hold; about half are well formed."""
    return st.one_of(_WELL_FORMED_CONFIDENCE, _ODD_CONFIDENCE)


def moments(
    min_value: _dt.datetime = _dt.datetime(2024, 1, 1),
    max_value: _dt.datetime = _dt.datetime(2027, 1, 1),
) -> st.SearchStrategy[_dt.datetime]:
    """Aware UTC datetimes in a window around the evaluation clock."""
    return st.datetimes(min_value=min_value, max_value=max_value).map(
        lambda moment: moment.replace(tzinfo=UTC)
    )


def _render(moment: _dt.datetime, style: str) -> str:
    naive = moment.astimezone(UTC).replace(tzinfo=None)
    if style == "z":
        return naive.isoformat() + "Z"
    if style == "utc-offset":
        return naive.isoformat() + "+00:00"
    if style == "plus-eight":
        return moment.astimezone(_dt.timezone(_dt.timedelta(hours=8))).isoformat()
    if style == "minus-five":
        return moment.astimezone(_dt.timezone(_dt.timedelta(hours=-5))).isoformat()
    if style == "naive":
        return naive.isoformat()
    if style == "padded":
        return "  " + naive.isoformat() + "Z\n"
    if style == "date-only":
        return naive.date().isoformat()
    raise AssertionError(style)


_TIMESTAMP_STYLES = ["z", "utc-offset", "plus-eight", "minus-five", "naive", "padded", "date-only"]
_BAD_TIMESTAMPS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from(
        [
            "",
            "   ",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-08-13T00:00:00z",
            "2026-08-13T25:00:00Z",
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-01:00",
        ]
    ),
    st.text(max_size=12),
)


def timestamps() -> st.SearchStrategy[Any]:
    """Timestamp field values: parseable in every accepted spelling, or unusable."""
    good = st.builds(_render, moments(), st.sampled_from(_TIMESTAMP_STYLES))
    return st.one_of(good, good, _BAD_TIMESTAMPS)


def categories() -> st.SearchStrategy[Any]:
    """Category values; several of them read as ``correction``."""
    return st.sampled_from(
        [
            "correction",
            " Correction ",
            "CORRECTION",
            "correction\t",
            "corrections",
            "preference",
            "context",
            "",
            None,
            0,
            7,
        ]
    )


def fact_ids() -> st.SearchStrategy[Any]:
    """Id values: mostly short strings (so duplicates happen), sometimes falsy or non-string."""
    return st.one_of(
        st.sampled_from([f"f{number}" for number in range(12)]),
        st.sampled_from(["", None, 0, False, 3, "gold_x", "d_x_0_q"]),
    )


_OPTIONAL_FACT_FIELDS = {
    "content": st.text(max_size=20),
    "category": categories(),
    "confidence": confidences(),
    "createdAt": timestamps(),
    "lastConfirmedAt": timestamps(),
    "confirmationCount": st.one_of(st.integers(-1, 5), st.booleans(), st.none()),
}


def facts() -> st.SearchStrategy[dict[str, Any]]:
    """One DeerMem fact dict; every field may be missing, including ``id``."""
    return st.fixed_dictionaries({}, optional={"id": fact_ids(), **_OPTIONAL_FACT_FIELDS})


def fact_lists(*, min_size: int = 0, max_size: int = 14, unique_ids: bool = False):
    """Lists of distinct fact dict objects.

    With ``unique_ids`` every fact has a distinct non-empty string id, which is what
    :func:`evictlab.policies.select` requires.
    """
    if not unique_ids:
        return st.lists(facts(), min_size=min_size, max_size=max_size)

    def with_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**item, "id": f"fact-{index:02d}"} for index, item in enumerate(items)]

    return st.lists(facts(), min_size=min_size, max_size=max_size).map(with_ids)


def usage_entries() -> st.SearchStrategy[Any]:
    """Usage sidecar entries: well formed, partly malformed, or not a mapping at all."""
    heat = st.one_of(
        st.sampled_from([1.0, 1.5, 8, 8.0, 100000]),
        st.floats(min_value=0, max_value=50),
        st.sampled_from([None, True, False, "x", "8", math.nan, math.inf, -1.0, 0]),
    )
    entry = st.fixed_dictionaries(
        {},
        optional={
            "accessHeat": heat,
            "accessCount": st.one_of(st.integers(-1, 20), st.booleans(), st.none(), st.just("3")),
            "lastAccessedAt": timestamps(),
        },
    )
    return st.one_of(entry, entry, entry, st.sampled_from([None, 8, "hot", [1, 2]]))


def usage_maps(ids: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """A usage map keyed by some of ``ids`` plus the occasional key of no fact."""
    keys = st.sampled_from([*ids, "orphan", "__missing_0"])
    return st.dictionaries(keys, usage_entries(), max_size=len(ids) + 2)


@st.composite
def snapshots(draw, *, unique_ids: bool = False, min_size: int = 0, max_size: int = 14):
    """``(facts, usage)``: a fact list and a usage map keyed by the ids those facts score under."""
    items = draw(fact_lists(min_size=min_size, max_size=max_size, unique_ids=unique_ids))
    keys = [
        str(item["id"]) if item.get("id") else f"__missing_{index}"
        for index, item in enumerate(items)
    ]
    usage = draw(usage_maps(keys or ["f0"]))
    return items, usage


def clocks() -> st.SearchStrategy[_dt.datetime]:
    """Evaluation times: the protocol clock, other aware times and non-UTC offsets.

    All timezone-aware, as evictlab's own API requires; :func:`naive_clocks` adds naive ones
    for the DeerMem-compatible entry point, which reads them as local time.
    """
    return st.one_of(
        st.just(CLOCK),
        moments(),
        moments().map(lambda moment: moment.astimezone(_dt.timezone(_dt.timedelta(hours=8)))),
    )


def naive_clocks() -> st.SearchStrategy[_dt.datetime]:
    return st.datetimes(min_value=_dt.datetime(2024, 1, 1), max_value=_dt.datetime(2027, 1, 1))


def capacities(max_value: int = 16) -> st.SearchStrategy[int]:
    return st.integers(min_value=0, max_value=max_value)


@st.composite
def policy_params(draw) -> PolicyParams:
    """Valid :class:`PolicyParams`: weights summing to 1 within the tolerance, any bounds."""
    triple = draw(
        st.one_of(
            st.sampled_from(
                [(0.65, 0.25, 0.10), (1.0, 0.0, 0.0), (0.0, 0.0, 1.0), (0.5, 0.5, 0.0)]
            ),
            st.tuples(st.floats(0, 1), st.floats(0, 1)).map(_complete_weights),
        )
    )
    confidence_weight, confirmation_weight, access_weight = triple
    return PolicyParams(
        confidence_weight=confidence_weight,
        confirmation_weight=confirmation_weight,
        access_weight=access_weight,
        confirmation_half_life_days=draw(st.sampled_from([1, 7, 90, 3650, 0.5])),
        access_half_life_days=draw(st.sampled_from([1, 30, 365, 2.5])),
        correction_reserved_fraction=draw(st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0])),
        correction_reserved_max=draw(st.integers(0, 12)),
    )


def _complete_weights(pair: tuple[float, float]) -> tuple[float, float, float]:
    first = pair[0]
    second = pair[1] * (1.0 - first)
    third = max(0.0, 1.0 - first - second)
    return (first, second, third)
