"""Spec 1.2 and 1.3: reading signals with DeerMem's fallbacks, and the component formulas."""

from __future__ import annotations

import datetime as _dt
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import confidences, timestamps, usage_entries

from evictlab.errors import ContractError
from evictlab.policies.signals import (
    access_heat,
    confirmation_freshness,
    decay,
    elapsed_days,
    fact_key,
    is_category,
    parse_timestamp,
    read_confidence,
    reported_category,
    resolve_now,
)

UTC = _dt.UTC
CLOCK = _dt.datetime(2026, 8, 13, tzinfo=UTC)


def days_before(days: float) -> str:
    return (CLOCK - _dt.timedelta(days=days)).isoformat().replace("+00:00", "Z")


# --- confidence -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, 0.5),
        ("0.9", 0.9),
        (" 0.25\n", 0.25),
        ("high", 0.5),
        ("", 0.5),
        (True, 0.5),
        (False, 0.5),
        (math.nan, 0.5),
        (math.inf, 0.5),
        (-math.inf, 0.5),
        ("nan", 0.5),
        ("-inf", 0.5),
        ("1_0", 1.0),  # float("1_0") is 10.0, then clamped
        ("1e400", 0.5),  # float("1e400") is inf
        (10**400, 0.5),  # too large for a double
        ([0.9], 0.5),
        ({"value": 0.9}, 0.5),
        (-3, 0.0),
        (7, 1.0),
        (0, 0.0),
        (1, 1.0),
        (0.7, 0.7),
        ("-0.2", 0.0),
    ],
)
def test_confidence_fallbacks_and_clamping(raw, expected):
    assert read_confidence(raw) == expected


@settings(max_examples=300, deadline=None)
@given(confidences())
def test_confidence_is_always_a_bounded_double(raw):
    value = read_confidence(raw)
    assert type(value) is float
    assert 0.0 <= value <= 1.0


# --- timestamps -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-08-06T00:00:00Z", _dt.datetime(2026, 8, 6, tzinfo=UTC)),
        ("2026-08-06T00:00:00+00:00", _dt.datetime(2026, 8, 6, tzinfo=UTC)),
        ("2026-08-06T08:00:00+08:00", _dt.datetime(2026, 8, 6, tzinfo=UTC)),
        ("2026-08-05T19:00:00-05:00", _dt.datetime(2026, 8, 6, tzinfo=UTC)),
        ("  2026-08-06T00:00:00Z \n", _dt.datetime(2026, 8, 6, tzinfo=UTC)),
        ("2026-08-06T00:00:00", _dt.datetime(2026, 8, 6, tzinfo=UTC)),  # naive = UTC
        ("2026-08-06", _dt.datetime(2026, 8, 6, tzinfo=UTC)),
        ("2026-08-06T00:00:00.250000Z", _dt.datetime(2026, 8, 6, 0, 0, 0, 250000, tzinfo=UTC)),
    ],
)
def test_timestamps_parse_to_aware_utc(raw, expected):
    parsed = parse_timestamp(raw)
    assert parsed == expected
    assert parsed.utcoffset() == _dt.timedelta(0)


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "",
        "   ",
        "yesterday",
        "2026-13-01T00:00:00Z",
        "2026-08-13T00:00:00z",  # only an upper-case Z is rewritten
        20260806,
        1.5,
        True,
        # Valid ISO text whose conversion to UTC leaves the representable range.
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
    ],
)
def test_unparseable_timestamps_read_as_absent(raw):
    assert parse_timestamp(raw) is None


@settings(max_examples=300, deadline=None)
@given(timestamps())
def test_timestamp_parsing_never_raises(raw):
    parsed = parse_timestamp(raw)
    assert parsed is None or parsed.tzinfo is not None


def test_now_is_converted_to_utc_and_a_naive_now_is_refused():
    shanghai = _dt.timezone(_dt.timedelta(hours=8))
    assert resolve_now(_dt.datetime(2026, 8, 13, 8, tzinfo=shanghai)) == CLOCK
    assert resolve_now(_dt.datetime(2026, 8, 13, 8, tzinfo=shanghai)).tzinfo is UTC
    assert resolve_now(None).tzinfo is not None
    with pytest.raises(ContractError, match="now must be a timezone-aware datetime"):
        resolve_now(_dt.datetime(2026, 8, 13))


# --- decay and freshness --------------------------------------------------------------------


def test_decay_halves_per_half_life_and_clamps_the_future():
    assert decay(0, 90) == 1.0
    assert decay(90, 90) == 0.5
    assert decay(180, 90) == 0.25
    assert decay(-5, 90) == 1.0  # a future timestamp does not boost
    assert decay(1e12, 1) == 0.0


@pytest.mark.parametrize("half_life", [0, -1, -90.0])
def test_decay_with_non_positive_half_life_is_zero(half_life):
    assert decay(0, half_life) == 0.0
    assert decay(10, half_life) == 0.0


def test_elapsed_days_are_fractional():
    assert elapsed_days(CLOCK, CLOCK - _dt.timedelta(hours=6)) == 0.25
    assert elapsed_days(CLOCK, CLOCK + _dt.timedelta(days=2)) == -2.0


def test_freshness_of_the_protocol_metadata():
    # Spec 2.9, to the published precision.
    confirmed = confirmation_freshness({"lastConfirmedAt": "2026-08-06T00:00:00Z"}, CLOCK, 90)
    assert confirmed == pytest.approx(0.9475160078, abs=5e-11)
    assert confirmed == 2 ** (-7 / 90)
    created_180 = confirmation_freshness({"createdAt": "2026-02-14T00:00:00Z"}, CLOCK, 90)
    assert created_180 == 0.125
    created_30 = confirmation_freshness({"createdAt": "2026-07-14T00:00:00Z"}, CLOCK, 90)
    assert created_30 == pytest.approx(0.3968502630, abs=5e-11)


def test_freshness_prefers_confirmation_and_halves_creation():
    both = {"lastConfirmedAt": days_before(90), "createdAt": days_before(0)}
    assert confirmation_freshness(both, CLOCK, 90) == 0.5
    assert confirmation_freshness({"createdAt": days_before(90)}, CLOCK, 90) == 0.25
    assert confirmation_freshness({"createdAt": days_before(0)}, CLOCK, 90) == 0.5
    assert confirmation_freshness({}, CLOCK, 90) == 0.0


def test_malformed_confirmation_falls_through_to_creation():
    fact = {"lastConfirmedAt": "not a date", "createdAt": days_before(90)}
    assert confirmation_freshness(fact, CLOCK, 90) == 0.25
    assert (
        confirmation_freshness({"lastConfirmedAt": None, "createdAt": days_before(90)}, CLOCK, 90)
        == 0.25
    )
    assert confirmation_freshness({"lastConfirmedAt": "x", "createdAt": "y"}, CLOCK, 90) == 0.0


def test_future_confirmation_counts_as_now():
    fact = {"lastConfirmedAt": "2027-01-01T00:00:00Z"}
    assert confirmation_freshness(fact, CLOCK, 90) == 1.0
    assert confirmation_freshness({"createdAt": "2027-01-01T00:00:00Z"}, CLOCK, 90) == 0.5


def test_freshness_with_zero_half_life_is_zero():
    assert confirmation_freshness({"lastConfirmedAt": days_before(0)}, CLOCK, 0) == 0.0
    assert confirmation_freshness({"createdAt": days_before(0)}, CLOCK, 0) == 0.0


# --- access heat ----------------------------------------------------------------------------

AT_CLOCK = "2026-08-13T00:00:00Z"


@pytest.mark.parametrize(
    "entry",
    [
        None,
        8,
        "hot",
        [8, AT_CLOCK],
        {"accessHeat": 8},
        {"accessHeat": 8, "lastAccessedAt": None},
        {"accessHeat": 8, "lastAccessedAt": "soon"},
        {"lastAccessedAt": AT_CLOCK},
        {"accessHeat": None, "lastAccessedAt": AT_CLOCK},
        {"accessHeat": True, "lastAccessedAt": AT_CLOCK},
        {"accessHeat": False, "lastAccessedAt": AT_CLOCK},
        {"accessHeat": "x", "lastAccessedAt": AT_CLOCK},
        {"accessHeat": math.nan, "lastAccessedAt": AT_CLOCK},
        {"accessHeat": math.inf, "lastAccessedAt": AT_CLOCK},
        {"accessHeat": 0, "lastAccessedAt": AT_CLOCK},
        {"accessHeat": -2.0, "lastAccessedAt": AT_CLOCK},
    ],
)
def test_unusable_usage_entries_give_no_heat(entry):
    assert access_heat(entry, CLOCK, 30) == 0.0


def test_heat_saturates_at_eight_and_above():
    assert access_heat({"accessHeat": 8, "lastAccessedAt": AT_CLOCK}, CLOCK, 30) == 1.0
    assert access_heat({"accessHeat": 100000, "lastAccessedAt": AT_CLOCK}, CLOCK, 30) == 1.0
    assert access_heat({"accessHeat": 16, "lastAccessedAt": days_before(30)}, CLOCK, 30) == 1.0


def test_heat_is_log_scaled_after_decay():
    entry = {"accessHeat": 4, "lastAccessedAt": days_before(30)}  # decays to 2
    # log1p(2) / ln 9, one bit below the 0.5 that log(1 + 2) / ln 9 gives (spec 1.3).
    assert access_heat(entry, CLOCK, 30) == math.log1p(2) / math.log(9) == 0.4999999999999999
    entry = {"accessHeat": "2", "lastAccessedAt": AT_CLOCK}  # float() reads numeric strings
    assert access_heat(entry, CLOCK, 30) == 0.4999999999999999
    future = {"accessHeat": 2, "lastAccessedAt": "2027-01-01T00:00:00+08:00"}
    assert access_heat(future, CLOCK, 30) == 0.4999999999999999
    assert access_heat({"accessHeat": 8, "lastAccessedAt": AT_CLOCK}, CLOCK, 0) == 0.0


def test_a_small_decayed_heat_is_not_lost_to_rounding():
    # Spec 1.3: log(1 + x) gives 2.2755982542820220e-10 and 0.0 for these two.
    tiny = {"accessHeat": 5e-10, "lastAccessedAt": AT_CLOCK}
    assert access_heat(tiny, CLOCK, 30) == 2.2755980659981940e-10
    tinier = {"accessHeat": 8e-23, "lastAccessedAt": AT_CLOCK}
    assert 3.6e-23 < access_heat(tinier, CLOCK, 30) < 3.7e-23


@settings(max_examples=300, deadline=None)
@given(usage_entries(), st.sampled_from([1, 30, 0.5]))
def test_heat_is_always_in_the_unit_interval(entry, half_life):
    assert 0.0 <= access_heat(entry, CLOCK, half_life) <= 1.0


# --- identity and categories ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("fact", "index", "expected"),
    [
        ({"id": "a"}, 0, "a"),
        ({"id": 7}, 0, "7"),
        ({"id": ""}, 3, "__missing_3"),
        ({"id": None}, 1, "__missing_1"),
        ({"id": 0}, 2, "__missing_2"),
        ({"id": False}, 4, "__missing_4"),
        ({}, 5, "__missing_5"),
        ("not a mapping", 6, "__missing_6"),
    ],
)
def test_fact_key(fact, index, expected):
    assert fact_key(fact, index) == expected


@pytest.mark.parametrize(
    ("category", "is_correction"),
    [
        ("correction", True),
        (" Correction ", True),
        ("CORRECTION\t", True),
        ("corrections", False),
        (None, False),
        ("", False),
    ],
)
def test_correction_category_is_stripped_and_case_folded(category, is_correction):
    assert is_category({"category": category}, "correction") is is_correction
    assert is_category({}, "correction") is False


@pytest.mark.parametrize(
    ("fact", "expected"),
    [
        ({"category": " Correction "}, " Correction "),  # not normalised
        ({"category": "preference"}, "preference"),
        ({"category": ""}, "context"),
        ({"category": None}, "context"),
        ({}, "context"),
        ({"category": 7}, "7"),
    ],
)
def test_reported_category(fact, expected):
    assert reported_category(fact) == expected
