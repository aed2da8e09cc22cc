"""Offsets, draws, fact ids and scenario metadata of the pools (spec 2.7-2.9)."""

from __future__ import annotations

import datetime as dt

import pytest

from evictlab.core.dataset import BankRecord
from evictlab.core.pools import (
    FactSpec,
    build_fact,
    distractor_spec,
    draw,
    fact_ids_for,
    iso_z,
    offset_for,
    support_spec,
)

CLOCK = dt.datetime(2026, 8, 13, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    "namespace, case_id, size, expected",
    [
        ("offset-ns", "case-a", 5, 0),
        ("offset-ns", "case-c", 5, 3),
        ("alt-ns", "case-a", 5, 1),
        ("deermem-medium-v1", "01493427", 40, 4),
        ("deermem-medium-v1", "0bc8ad92", 40, 36),
        ("deermem-medium-v1", "af082822", 40, 23),
        ("deermem-medium-v1", "correction_peanut_allergy", 40, 5),
        ("deermem-medium-v1", "correction_language", 40, 9),
        ("deermem-medium-v1", "correction_timezone", 40, 12),
        ("deermem-medium-v1", "correction_review_resolution", 40, 25),
        ("deermem-medium-v1", "correction_shipping_address", 40, 39),
    ],
)
def test_offset_vectors(namespace, case_id, size, expected):
    assert offset_for(namespace, case_id, size) == expected


def test_sha_offset_example_from_the_spec():
    # sha256("deermem-medium-v1:01493427") starts bf78a83c = 3212355644.
    assert offset_for("deermem-medium-v1", "01493427", 40) == 3212355644 % 40


def test_draws_wrap_around():
    bank = ("b0", "b1", "b2", "b3", "b4")
    assert draw(bank, 0, 3) == ["b0", "b1", "b2"]
    assert draw(bank, 3, 3) == ["b3", "b4", "b0"]


def test_fact_id_schemes_and_their_sort_order():
    records = [BankRecord(qid, "single-session-user", "e") for qid in ("ff01", "0a02", "9b03")]
    support, distractors = fact_ids_for("5c5c5c5c", records, "protocol")
    assert support == "gold_5c5c5c5c"
    assert distractors == ["d_5c5c5c5c_0_ff01", "d_5c5c5c5c_1_0a02", "d_5c5c5c5c_2_9b03"]
    # Protocol ids: distractors sort in draw order, all before the support fact.
    assert sorted([support, *distractors]) == [*distractors, support]
    support, distractors = fact_ids_for("5c5c5c5c", records, "raw")
    assert (support, distractors) == ("5c5c5c5c", ["ff01", "0a02", "9b03"])
    # Raw ids: the support lands wherever its id sorts among the distractors.
    assert sorted([support, *distractors]) == ["0a02", "5c5c5c5c", "9b03", "ff01"]


def test_support_metadata_per_scenario():
    assert support_spec("confirmation_help") == FactSpec(0.70, 180, confirmed=True)
    assert support_spec("access_help") == FactSpec(0.70, 180, heated=True)
    assert support_spec("confidence_control") == FactSpec(0.95, 30)
    assert support_spec("noisy_signal_control") == FactSpec(0.90, 180)
    assert support_spec("correction_reserve") == FactSpec(0.65, 180)


def confidences(scenario, loss_rank):
    return [distractor_spec(scenario, i, loss_rank - 1).confidence for i in range(9)]


def test_help_scenario_distractors_use_exact_doubles():
    # L = 8: seven outrankers 0.94 - 0.02 i, then 0.68 - 0.02 (i - 7).
    assert confidences("confirmation_help", 8) == [
        0.94, 0.9199999999999999, 0.8999999999999999, 0.8799999999999999, 0.86,
        0.84, 0.82, 0.68, 0.66,
    ]
    assert confidences("access_help", 6)[5:] == [0.68, 0.66, 0.64, 0.6200000000000001]
    assert not any(distractor_spec("access_help", i, 5).confirmed for i in range(9))


def test_confidence_control_distractors():
    # i >= 5: odd i confirmed 7 days ago, even i heat 8.
    specs = [distractor_spec("confidence_control", i, 9) for i in range(9)]
    assert [s.confidence for s in specs[:5]] == [0.94 - 0.02 * i for i in range(5)]
    assert all(s.confidence == 0.70 for s in specs[5:])
    assert [(s.confirmed, s.heated) for s in specs[5:]] == [(True, False), (False, True), (True, False), (False, True)]
    assert not any(s.confirmed or s.heated for s in specs[:5])


@pytest.mark.parametrize("loss_rank", [6, 8, 10])
def test_noisy_signal_distractors(loss_rank):
    k = loss_rank - 1
    specs = [distractor_spec("noisy_signal_control", i, k) for i in range(9)]
    assert all(s.confidence == 0.70 for s in specs)
    assert [i for i, s in enumerate(specs) if s.confirmed] == [i for i in range(k) if i % 2 == 1]
    assert [i for i, s in enumerate(specs) if s.heated] == [i for i in range(k) if i % 2 == 0]


def test_correction_reserve_distractors():
    assert confidences("correction_reserve", 6) == [0.90 - 0.03 * i for i in range(5)] + [
        0.60 - 0.02 * j for j in range(4)
    ]
    assert confidences("correction_reserve", 10) == [0.90 - 0.03 * i for i in range(9)]


def test_fact_record_fields():
    fact = build_fact("gold_x", "text", "context", FactSpec(0.7, confirmed=True), "x", CLOCK)
    assert fact == {
        "id": "gold_x",
        "content": "text",
        "category": "context",
        "confidence": 0.7,
        "createdAt": "2026-02-14T00:00:00Z",
        "source": "deermem-eviction-eval:x",
        "lastConfirmedAt": "2026-08-06T00:00:00Z",
        "confirmationCount": 1,
    }
    recent = build_fact("gold_y", "t", "context", FactSpec(0.95, 30), "y", CLOCK)
    assert recent["createdAt"] == "2026-07-14T00:00:00Z" and "lastConfirmedAt" not in recent
    assert iso_z(CLOCK) == "2026-08-13T00:00:00Z"
