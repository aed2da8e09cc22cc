"""``PolicyParams`` validation and evictlab's own entry point refusing bad input (spec 1.8)."""

from __future__ import annotations

import datetime as _dt
import json

import numpy as np
import pytest

from evictlab.errors import ContractError, UnknownPolicyError
from evictlab.policies import PolicyParams, known_policies, select

CLOCK = _dt.datetime(2026, 8, 13, tzinfo=_dt.UTC)


def test_defaults_are_deermem_defaults():
    params = PolicyParams()
    assert params.weights == (0.65, 0.25, 0.10)
    assert params.as_dict() == {
        "confidence_weight": 0.65,
        "confirmation_weight": 0.25,
        "access_weight": 0.10,
        "confirmation_half_life_days": 90,
        "access_half_life_days": 30,
        "correction_reserved_fraction": 0.10,
        "correction_reserved_max": 10,
    }


@pytest.mark.parametrize(
    "weights",
    [(0.65, 0.25, 0.09), (0.65, 0.25, 0.11), (0.0, 0.0, 0.0), (0.5, 0.5 - 2e-9, 0.0)],
)
def test_weights_must_sum_to_one(weights):
    with pytest.raises(ContractError) as raised:
        PolicyParams(
            confidence_weight=weights[0], confirmation_weight=weights[1], access_weight=weights[2]
        )
    message = str(raised.value)
    assert "sum to 1.0" in message
    for name in ("confidence_weight", "confirmation_weight", "access_weight"):
        assert name in message


def test_weights_within_the_tolerance_are_accepted():
    params = PolicyParams(confidence_weight=0.5, confirmation_weight=0.5 - 5e-10, access_weight=0.0)
    assert params.confirmation_weight == 0.5 - 5e-10
    assert PolicyParams(confidence_weight=1, confirmation_weight=0, access_weight=0).weights == (
        1,
        0,
        0,
    )


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("confidence_weight", 1.5, "[0, 1]"),
        ("access_weight", -0.1, "[0, 1]"),
        ("confirmation_half_life_days", -1, "> 0"),
        ("confirmation_half_life_days", 0, "> 0"),
        ("access_half_life_days", -30.0, "> 0"),
        ("correction_reserved_fraction", 1.5, "[0, 1]"),
        ("correction_reserved_fraction", -0.1, "[0, 1]"),
        ("correction_reserved_max", -1, "integer >= 0"),
        ("correction_reserved_max", 2.5, "integer >= 0"),
        ("correction_reserved_max", "10", "integer >= 0"),
        ("correction_reserved_max", True, "integer >= 0"),
        ("correction_reserved_fraction", True, "finite number"),
        ("access_half_life_days", False, "finite number"),
        ("confidence_weight", True, "finite number"),
        ("confidence_weight", "0.65", "finite number"),
        ("access_half_life_days", float("nan"), "finite number"),
        ("confirmation_half_life_days", float("inf"), "finite number"),
        ("confirmation_half_life_days", 10**400, "finite number"),
        ("access_half_life_days", None, "finite number"),
    ],
)
def test_bad_values_name_the_field(field, value, fragment):
    with pytest.raises(ContractError) as raised:
        PolicyParams(**{field: value})
    assert field in str(raised.value)
    assert fragment in str(raised.value)


def test_numpy_scalars_become_plain_python_numbers():
    params = PolicyParams(
        confidence_weight=np.float64(0.65),
        access_half_life_days=np.int64(30),
        correction_reserved_max=np.int64(3),
    )
    assert type(params.confidence_weight) is float
    assert type(params.access_half_life_days) is int
    assert type(params.correction_reserved_max) is int
    json.dumps(params.as_dict())
    with pytest.raises(ContractError, match="correction_reserved_max"):
        PolicyParams(correction_reserved_max=np.int64(-1))


def test_replace_validates_and_rejects_unknown_names():
    assert PolicyParams().replace(access_half_life_days=7).access_half_life_days == 7
    with pytest.raises(ContractError, match="access_half_life_days"):
        PolicyParams().replace(access_half_life_days=-7)
    with pytest.raises(ContractError, match=r"unknown policy parameter.*access_halflife"):
        PolicyParams().replace(access_halflife=7)


@pytest.mark.parametrize("facts", [[], [{"id": "a", "confidence": 0.5}]])
def test_select_names_the_known_policies_for_an_unknown_one(facts):
    with pytest.raises(UnknownPolicyError) as raised:
        select("lru-v9", facts, 10, now=CLOCK)
    message = str(raised.value)
    assert "'lru-v9'" in message
    assert "confidence" in message and "hybrid-v1" in message
    assert {"confidence", "hybrid-v1"} <= set(known_policies())


@pytest.mark.parametrize("capacity", [-1, 2.0, True, "3", None])
def test_select_refuses_a_bad_capacity(capacity):
    with pytest.raises(ContractError, match="capacity"):
        select("confidence", [{"id": "a"}], capacity, now=CLOCK)
