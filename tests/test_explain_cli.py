"""`evictlab explain` on the embedded demo: the table, the JSON document and the errors."""

from __future__ import annotations

import json
import re

import pytest

from evictlab.cli import main
from evictlab.selection.explain import at_least, explain
from evictlab.workbench import loaders


@pytest.fixture(scope="module")
def pool_set():
    return loaders.load_pool_set()


@pytest.fixture(scope="module")
def lost_case(pool_set):
    """A confirmation_help case whose support the confidence policy evicts at capacity 7 (loss rank > 7)."""
    return next(c for c in pool_set.cases if c.scenario == "confirmation_help" and c.loss_rank > 7)


def run(capsys, *arguments):
    code = main(["explain", *arguments])
    out, err = capsys.readouterr()
    return code, out, err


def reference(pool_set, case, policy, capacity, params=None, **options):
    return explain(
        case.facts, capacity, policy=policy, usage=case.usage, now=pool_set.protocol.evaluation_time,
        params=params or pool_set.protocol.config.hybrid, support_fact_ids=case.support_fact_ids, **options,
    )


def test_table_lists_every_fact_and_why_the_support_went(capsys, pool_set, lost_case):
    code, out, _ = run(capsys, "--case", lost_case.case_id, "--policy", "confidence", "--capacity", "7")
    assert code == 0
    expected = reference(pool_set, lost_case, "confidence", 7)
    support = lost_case.support_fact_ids[0]
    lines = out.splitlines()
    assert lines[0].startswith(f"case {lost_case.case_id} (confirmation_help, loss rank {lost_case.loss_rank})")
    assert "support EVICTED" in lines[1] and "kept 7 of 10" in lines[1]
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["rank", "fact"])
    for item, line in zip(expected.facts, lines[header + 1:]):
        cells = line.split()
        assert cells[0] == str(item.rank) and cells[1] == item.fact_id
        assert ("*" in cells) == (item.fact_id == support)
        assert ("evicted" if not item.kept else "kept") in cells
        assert f"{item.score:.4f}" in cells
    why = out[out.index("why evicted:"):]
    item = expected.fact(support)
    assert f"{support} (support)" in why
    assert f"displaced by: {item.displaced_by} (margin {item.margin:+.4f})" in why
    assert f"confidence {at_least(item.min_confidence)}" in why  # rounded; --format json keeps it exact


def test_json_document_matches_the_explanation(capsys, pool_set, lost_case):
    code, out, _ = run(capsys, "--case", lost_case.case_id, "--policy", "hybrid-v1", "--capacity", "5",
                       "--format", "json")
    assert code == 0
    document = json.loads(out)
    expected = reference(pool_set, lost_case, "hybrid-v1", 5)
    assert document["case_id"] == lost_case.case_id and document["scenario"] == lost_case.scenario
    assert document["policy"] == "hybrid-v1" and document["capacity"] == 5
    assert document["preset"] == "pr4810-final" and document["variant"]["fact_ids"] == "protocol"
    assert document["parameters"] == pool_set.protocol.config.hybrid.as_dict()
    assert document["counterfactual_signals"] == ["confidence", "confirmation", "access"]
    assert [fact["fact_id"] for fact in document["facts"]] == [item.fact_id for item in expected.facts]
    kept = {item.fact_id for item in expected.facts if item.kept}
    assert document["support_retained"] == (lost_case.support_fact_ids[0] in kept)
    for fact, item in zip(document["facts"], expected.facts):
        assert fact["rank"] == item.rank and fact["score"] == item.score
        assert fact["components"] == item.components
        assert fact["margin"] == item.margin and fact["displaced_by"] == item.displaced_by
        assert fact["status"] == ("reserved" if item.reserved else "kept" if item.kept else "evicted")
        if item.kept:
            assert fact["smallest_changes"] is None
        else:
            assert fact["smallest_changes"] == {
                "min_confidence": item.min_confidence,
                "confirm_within_days": item.confirm_within_days,
                "min_access_heat": item.min_access_heat,
            }
    assert any(fact["smallest_changes"] for fact in document["facts"] if fact["status"] == "evicted")


def test_parameter_overrides_change_the_explanation(capsys, pool_set, lost_case):
    overrides = ["--param", "confidence_weight=0.4", "--param", "confirmation_weight=0.5",
                 "--param", "access_weight=0.1"]
    code, out, _ = run(capsys, "--case", lost_case.case_id, "--policy", "hybrid-v1", "--capacity", "5",
                       "--format", "json", *overrides)
    assert code == 0
    document = json.loads(out)
    params = pool_set.protocol.config.hybrid.replace(confidence_weight=0.4, confirmation_weight=0.5, access_weight=0.1)
    assert document["parameters"] == params.as_dict()
    expected = reference(pool_set, lost_case, "hybrid-v1", 5, params)
    assert [fact["score"] for fact in document["facts"]] == [item.score for item in expected.facts]
    default = reference(pool_set, lost_case, "hybrid-v1", 5)
    assert [item.score for item in expected.facts] != [item.score for item in default.facts]


def test_zoo_policies_and_modifier_specs_report_no_counterfactuals(capsys, pool_set):
    case = pool_set.case("correction_language")
    code, out, _ = run(capsys, "--case", case.case_id, "--policy", "lru", "--capacity", "7")
    assert code == 0
    assert "not computed for lru (only for confidence and hybrid-v1)" in out
    code, out, _ = run(capsys, "--case", case.case_id, "--policy", "lru+reserve(correction)", "--capacity", "7",
                       "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert document["counterfactual_signals"] == [] and document["reserved_slots"] == 1
    assert document["support_retained"] is True
    statuses = {fact["fact_id"]: fact["status"] for fact in document["facts"]}
    assert statuses[case.support_fact_ids[0]] == "reserved"
    assert all(fact["smallest_changes"] == {} for fact in document["facts"] if fact["status"] == "evicted")


def test_seeded_policies_follow_the_seed(capsys, pool_set, lost_case):
    ranks = set()
    for seed in ("0", "1", "2", "3"):
        code, out, _ = run(capsys, "--case", lost_case.case_id, "--policy", "random", "--capacity", "5",
                           "--seed", seed, "--format", "json")
        assert code == 0
        document = json.loads(out)
        assert document["seed"] == int(seed)
        expected = reference(pool_set, lost_case, "random", 5, seed=int(seed))
        assert [fact["fact_id"] for fact in document["facts"]] == [item.fact_id for item in expected.facts]
        ranks.add(tuple(fact["fact_id"] for fact in document["facts"]))
    assert len(ranks) > 1


def test_preset_selects_the_variant(capsys, lost_case):
    code, out, _ = run(capsys, "--case", lost_case.case_id, "--policy", "confidence", "--capacity", "7",
                       "--preset", "pr4810-run2", "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert document["preset"] == "pr4810-run2" and document["variant"]["fact_ids"] == "raw"
    assert document["support_fact_ids"] == [lost_case.case_id]  # raw ids: the support is the source id


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--case", "nope", "--policy", "confidence", "--capacity", "7"], "no case 'nope'"),
        (["--case", "correction_language", "--policy", "nope", "--capacity", "7"], "unknown policy 'nope'"),
        (["--case", "correction_language", "--policy", "hybrid-v1", "--capacity", "7", "--param", "bogus=1"],
         "unknown parameter 'bogus'"),
        (["--case", "correction_language", "--policy", "hybrid-v1", "--capacity", "7", "--param",
          "confidence_weight=0.9"], "weights must sum to 1.0"),
    ],
)
def test_errors_name_the_problem_and_exit_2(capsys, arguments, message):
    code, out, err = run(capsys, *arguments)
    assert code == 2 and out == ""
    error = err.splitlines()[-1]
    assert error.startswith("evictlab explain: error:") and message in error


def test_capacity_must_be_positive(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["explain", "--case", "correction_language", "--policy", "lru", "--capacity", "0"])
    assert exit_info.value.code == 2
    assert "expected an integer >= 1" in capsys.readouterr().err


def test_capacity_must_leave_something_to_evict(capsys):
    code, out, err = run(capsys, "--case", "correction_language", "--policy", "lru", "--capacity", "10")
    assert code == 2 and out == ""
    assert err.splitlines()[-1].endswith("capacity 10 is outside [1, 9] (pool size 10, case correction_language)")


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.84, ">= 0.84"), (0.8400000000000002, "> 0.84"), (0.7061538461538464, ">= 0.7062"), (1.0, ">= 1")],
)
def test_thresholds_are_printed_rounded_and_still_sufficient(value, text):
    assert at_least(value) == text


def test_the_table_prints_no_long_floats(capsys, pool_set):
    for case in pool_set.cases[:10]:
        code, out, _ = run(capsys, "--case", case.case_id, "--policy", "hybrid-v1", "--capacity", "5")
        assert code == 0
        assert not re.search(r"\d\.\d{5,}", out), out
