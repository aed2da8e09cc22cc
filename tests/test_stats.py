"""Exact paired statistics (spec section 5) against scipy, the published numbers and the rules."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from evictlab import results
from evictlab.analysis.qa.stats import (
    BootstrapInterval,
    build_stats,
    build_summary,
    load_graded_rows,
    mcnemar_exact,
    paired_bootstrap,
    stats_documents,
    suite_report_lines,
    write_stats_files,
)
from evictlab.errors import ContractError

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "reference" / "deerflow-pr4810"
PROTOCOL_ID = "deermem-hybrid-v1-pr4789-reproduction-v1"
GRADER = "deterministic-overlap-v1"
FAST = {"iterations": 200}  # enough for structural tests; published numbers use the default
LABELS = {"protocol_id": "p", "grader_version": GRADER}


def published_rows(version: str) -> list[dict]:
    with open(REFERENCE / version / "qa.rows.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def row(case_id, policy, correct, *, source="longmemeval", scenario="confirmation_help", **extra):
    return {
        "row_id": f"{case_id}__{policy}",
        "case_id": case_id,
        "source": source,
        "scenario": scenario,
        "policy": policy,
        "grade_correct": correct,
        **extra,
    }


def paired(case_id, first, second, **fields):
    return [
        row(case_id, "confidence", first, **fields),
        row(case_id, "hybrid-v1", second, **fields),
    ]


# --- exact McNemar ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [  # spec section 6.3
        (2, 14, 0.004180908203125),
        (0, 4, 0.125),
        (2, 18, 0.0004024505615234375),
        (2, 12, 0.012939453125),
        (2, 16, 0.001312255859375),
        (1, 13, 0.0018310546875),
        (1, 17, 0.00014495849609375),
    ],
)
def test_mcnemar_reproduces_published_p_values(b, c, p):
    assert mcnemar_exact(b, c) == p
    assert mcnemar_exact(c, b) == p


@pytest.mark.parametrize("b", range(26))
def test_mcnemar_matches_scipy_binomial_test(b):
    for c in range(26):
        n = b + c
        expected = 1.0 if n == 0 else binomtest(min(b, c), n, 0.5).pvalue
        assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12, abs=0.0)


# Past n = 1030 the binomial coefficients exceed the largest double: exact arithmetic only.
@pytest.mark.parametrize(("b", "c"), [(300, 400), (10, 900), (512, 511), (900, 1100)])
def test_mcnemar_matches_scipy_for_large_counts(b, c):
    assert mcnemar_exact(b, c) == pytest.approx(binomtest(min(b, c), b + c, 0.5).pvalue, rel=1e-9)


def test_mcnemar_edges():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(1000, 1000) == 1.0
    assert mcnemar_exact(0, 1) == 1.0
    assert mcnemar_exact(0, 2) == 0.5
    # 2 / 2**2000 is below the smallest double: exact arithmetic, then one rounding to 0.0.
    assert mcnemar_exact(0, 2000) == 0.0
    assert mcnemar_exact(0, 1000) == 2.0**-999


@pytest.mark.parametrize(("b", "c"), [(-1, 2), (2, -1), (True, 2), (1.0, 2), ("1", 2)])
def test_mcnemar_refuses_non_counts(b, c):
    with pytest.raises(ContractError, match="McNemar count"):
        mcnemar_exact(b, c)


@settings(max_examples=100, deadline=None)
@given(b=st.integers(0, 200), c=st.integers(0, 200))
def test_mcnemar_is_symmetric_and_a_probability(b, c):
    p = mcnemar_exact(b, c)
    assert p == mcnemar_exact(c, b)
    assert 0.0 < p <= 1.0
    if b == c:
        assert p == 1.0


# --- paired bootstrap ------------------------------------------------------------------------


def test_bootstrap_of_identical_grades_is_zero():
    grades = [True, False, True, True, False]
    assert paired_bootstrap(grades, grades, **FAST) == BootstrapInterval(0.0, 0.0, 0.0)


def test_bootstrap_when_second_always_wins():
    interval = paired_bootstrap([False] * 7, [True] * 7, **FAST)
    assert interval == BootstrapInterval(1.0, 1.0, 1.0)


def test_bootstrap_mean_difference_is_two_divided_means():
    # 3/10 - 0/10 in doubles: the published 0.30000000000000004 comes from this order.
    firsts = [False] * 10
    seconds = [True] * 3 + [False] * 7
    assert paired_bootstrap(firsts, seconds, **FAST).mean_difference == 3 / 10 - 0 / 10
    firsts = [True] * 23 + [False] * 17
    seconds = [True] * 35 + [False] * 5
    assert paired_bootstrap(firsts, seconds, **FAST).mean_difference == 0.30000000000000004


def test_bootstrap_draws_with_randrange_from_one_seeded_stream():
    # With one iteration the interval is that single resample; recompute it from the
    # documented draws: n calls of random.Random(seed).randrange(n).
    firsts = [True, False, False, True, False, True]
    seconds = [True, True, False, False, True, True]
    rng = random.Random(11)
    picks = [rng.randrange(len(firsts)) for _ in firsts]
    expected = sum(seconds[i] for i in picks) / 6 - sum(firsts[i] for i in picks) / 6
    interval = paired_bootstrap(firsts, seconds, seed=11, iterations=1)
    assert interval.lower == interval.upper == expected


def test_bootstrap_percentiles_pick_the_documented_order_statistics():
    # alpha 0.5 over 4 iterations: lower = sorted[floor(0.25 * 4)] = sorted[1] and
    # upper = sorted[floor(0.75 * 4) - 1] = sorted[2], from the documented draws.
    firsts = [True, False, False, True, False, True, False]
    seconds = [True, True, False, False, True, True, True]
    n = len(firsts)
    rng = random.Random(3)
    resamples = []
    for _ in range(4):
        picks = [rng.randrange(n) for _ in range(n)]
        resamples.append(sum(seconds[i] for i in picks) / n - sum(firsts[i] for i in picks) / n)
    ordered = sorted(resamples)
    assert len(set(ordered)) == 4  # distinct, so an off-by-one index would be seen
    interval = paired_bootstrap(firsts, seconds, seed=3, iterations=4, alpha=0.5)
    assert (interval.lower, interval.upper) == (ordered[1], ordered[2])


def test_bootstrap_is_deterministic_and_seed_dependent():
    firsts = [i % 3 == 0 for i in range(30)]
    seconds = [i % 2 == 0 for i in range(30)]
    first = paired_bootstrap(firsts, seconds, seed=1, **FAST)
    assert paired_bootstrap(firsts, seconds, seed=1, **FAST) == first
    others = {paired_bootstrap(firsts, seconds, seed=seed, **FAST) for seed in (2, 3, 4)}
    assert others != {first}


def test_bootstrap_percentile_indices_are_clamped():
    firsts = [i % 3 == 0 for i in range(12)]
    seconds = [i % 2 == 0 for i in range(12)]
    wide = paired_bootstrap(firsts, seconds, alpha=0.999999, iterations=50)
    assert wide.lower <= wide.upper
    tiny = paired_bootstrap(firsts, seconds, alpha=1e-9, iterations=50)
    assert tiny.lower <= wide.lower and tiny.upper >= wide.upper


@pytest.mark.parametrize(
    ("firsts", "seconds", "options", "message"),
    [
        ([], [], {}, "non-empty"),
        ([True], [True, False], {}, "equally long"),
        ([True], [True], {"iterations": 0}, "iterations"),
        ([True], [True], {"iterations": 2.0}, "iterations"),
        ([True], [True], {"seed": "4789"}, "seed"),
        ([True], [True], {"alpha": 0.0}, "alpha"),
        ([True], [True], {"alpha": 1.0}, "alpha"),
    ],
)
def test_bootstrap_refuses_bad_input(firsts, seconds, options, message):
    with pytest.raises(ContractError, match=message):
        paired_bootstrap(firsts, seconds, **options)


# --- qa.stats.json ---------------------------------------------------------------------------

# Spec section 6.3: (b, c, both correct, both wrong, p, mean, lower, upper) per suite.
PUBLISHED = {
    "v1": {
        "official": (2, 14, 21, 3, 0.004180908203125, 0.30000000000000004, 0.125, 0.475),
        "synthetic": (0, 4, 1, 0, 0.125, 0.8, 0.4, 1.0),
        "overall": (2, 18, 22, 3, 0.0004024505615234375, 0.3555555555555555,
                    0.19999999999999996, 0.5111111111111112),
    },
    "v2": {
        "official": (2, 12, 21, 5, 0.012939453125, 0.25, 0.07500000000000007, 0.425),
        "synthetic": (0, 4, 1, 0, 0.125, 0.8, 0.4, 1.0),
        "overall": (2, 16, 22, 5, 0.001312255859375, 0.3111111111111111,
                    0.15555555555555556, 0.4666666666666667),
    },
    "v3": {
        "official": (1, 13, 22, 4, 0.0018310546875, 0.30000000000000004,
                     0.15000000000000002, 0.45000000000000007),
        "synthetic": (0, 4, 1, 0, 0.125, 0.8, 0.4, 1.0),
        "overall": (1, 17, 23, 4, 0.00014495849609375, 0.3555555555555555,
                    0.20000000000000007, 0.5111111111111111),
    },
}  # fmt: skip


@pytest.mark.parametrize("version", sorted(PUBLISHED))
def test_stats_reproduce_published_numbers(version):
    stats = build_stats(published_rows(version), protocol_id=PROTOCOL_ID, grader_version=GRADER)
    assert stats["policies"] == ["confidence", "hybrid-v1"]
    assert stats["schema_version"] == 1
    assert set(stats["suites"]) == {"official", "synthetic", "overall"}
    for suite, (b, c, both, neither, p, mean, lower, upper) in PUBLISHED[version].items():
        entry = stats["suites"][suite]
        assert entry["cases"] == {"official": 40, "synthetic": 5, "overall": 45}[suite]
        assert entry["mcnemar"] == {
            "both_correct": both,
            "both_wrong": neither,
            "only_first_correct": b,
            "only_second_correct": c,
            "p_value": p,
        }
        assert entry["bootstrap"] == {
            "alpha": 0.05,
            "iterations": 10000,
            "lower": lower,
            "mean_difference": mean,
            "seed": 4789,
            "upper": upper,
        }


def test_stats_do_not_depend_on_row_order():
    rows = published_rows("v3")
    expected = build_stats(rows, protocol_id=PROTOCOL_ID, grader_version=GRADER, **FAST)
    shuffled = list(rows)
    random.Random(5).shuffle(shuffled)
    assert build_stats(shuffled, protocol_id=PROTOCOL_ID, grader_version=GRADER, **FAST) == expected


def test_cases_are_ordered_by_case_id_for_the_bootstrap():
    # The same pairs attached to other case ids reorder the sample, so the draws hit other
    # cases: the interval must follow case_id order, not row order.
    grades = [(True, False), (False, True), (False, True), (True, True), (False, False)]
    forward = [r for i, (a, b) in enumerate(grades) for r in paired(f"c{i}", a, b)]
    backward = [r for i, (a, b) in enumerate(grades) for r in paired(f"c{9 - i}", a, b)]
    guard = paired("correction_x", True, True, source="synthetic")  # the synthetic suite needs a case
    one = build_stats(forward + guard, **LABELS, iterations=1)
    other = build_stats(backward + guard, **LABELS, iterations=1)
    rng = random.Random(4789)
    picks = [rng.randrange(5) for _ in range(5)]
    for stats, ordered in ((one, grades), (other, grades[::-1])):
        expected = sum(ordered[i][1] for i in picks) / 5 - sum(ordered[i][0] for i in picks) / 5
        assert stats["suites"]["official"]["bootstrap"]["lower"] == expected


def test_a_suite_without_cases_is_refused():
    rows = paired("a", True, False) + paired("b", False, True) + paired("c", False, True)
    with pytest.raises(ContractError, match="suite\\(s\\) synthetic have no cases"):
        build_stats(rows, **LABELS, **FAST)
    synthetic_only = paired("correction_x", False, True, source="synthetic")
    with pytest.raises(ContractError, match="official have no cases"):
        build_stats(synthetic_only, **LABELS, **FAST)
    both = rows + synthetic_only
    assert set(build_stats(both, **LABELS, **FAST)["suites"]) == {"official", "synthetic", "overall"}


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([], "no graded rows"),
        ([row("a", "confidence", True)], "case 'a' has no hybrid-v1 row"),
        ([row("a", "hybrid-v1", True)], "case 'a' has no confidence row"),
        (
            [*paired("a", True, True), row("a", "hybrid-v1", False)],
            r"row 3 \(a__hybrid-v1\): second 'hybrid-v1' row",
        ),
        (
            [row("a", "confidence", True), row("a", "hybrid-v1", True, source="synthetic")],
            "row 2.*source 'synthetic' here but 'longmemeval'",
        ),
        ([row("a", "lru", True)], r"row 1 \(a__lru\): field 'policy' is 'lru'"),
        ([row("a", "confidence", True, source="web")], "field 'source' is 'web'"),
        (
            [{"case_id": "a", "source": "longmemeval", "policy": "confidence"}],
            "row 1: missing field 'grade_correct'",
        ),
        ([row("a", "confidence", 1)], "field 'grade_correct' must be bool, got 1"),
        ([row("a", "confidence", "true")], "field 'grade_correct' must be bool"),
        ([row(7, "confidence", True)], "field 'case_id' must be str"),
        (["not a row"], "row 1: expected a mapping"),
        (paired("a", True, True, grader_version="v2"), "field 'grader_version' is 'v2'"),
    ],
)  # fmt: skip
def test_stats_refuse_bad_rows(rows, message):
    with pytest.raises(ContractError, match=message):
        build_stats(rows, **LABELS, **FAST)


# --- qa.summary.json -------------------------------------------------------------------------


def test_summary_counts_groups_sorted_by_source_scenario_policy():
    rows = (
        paired("b", True, False, scenario="zeta")
        + paired("a", False, True, scenario="alpha")
        + paired("c", True, True, scenario="alpha")
        + paired("correction_x", False, True, source="synthetic", scenario="correction_reserve")
    )
    summary = build_summary(rows, **LABELS)
    assert summary["qa_capacity"] == 7
    assert summary["schema_version"] == 1
    assert summary["protocol_id"] == "p"
    assert summary["grader_version"] == GRADER
    fields = ("source", "scenario", "policy", "correct", "cases")
    assert [tuple(group[name] for name in fields) for group in summary["groups"]] == [
        ("longmemeval", "alpha", "confidence", 1, 2),
        ("longmemeval", "alpha", "hybrid-v1", 2, 2),
        ("longmemeval", "zeta", "confidence", 1, 1),
        ("longmemeval", "zeta", "hybrid-v1", 0, 1),
        ("synthetic", "correction_reserve", "confidence", 0, 1),
        ("synthetic", "correction_reserve", "hybrid-v1", 1, 1),
    ]  # fmt: skip
    assert [g["accuracy"] for g in summary["groups"]] == [0.5, 1.0, 1.0, 0.0, 0.0, 1.0]


@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
def test_summary_reproduces_published_totals(version):
    # Spec section 6.3, scenario totals per version (confidence, hybrid-v1).
    totals = {
        "v1": {"confirmation_help": (3, 10), "access_help": (3, 9), "confidence_control": (7, 8),
               "noisy_signal_control": (10, 8), "correction_reserve": (1, 5)},
        "v2": {"confirmation_help": (3, 9), "access_help": (3, 9), "confidence_control": (8, 6),
               "noisy_signal_control": (9, 9), "correction_reserve": (1, 5)},
        "v3": {"confirmation_help": (3, 10), "access_help": (3, 9), "confidence_control": (8, 7),
               "noisy_signal_control": (9, 9), "correction_reserve": (1, 5)},
    }[version]  # fmt: skip
    summary = build_summary(published_rows(version), protocol_id=PROTOCOL_ID, grader_version=GRADER)
    found = {}
    for group in summary["groups"]:
        found.setdefault(group["scenario"], {})[group["policy"]] = group["correct"]
    assert {s: (p["confidence"], p["hybrid-v1"]) for s, p in found.items()} == totals


def test_summary_refuses_rows_of_another_capacity_or_grader():
    with pytest.raises(ContractError, match=r"row 2 \(a__hybrid-v1\): field 'capacity' is 5"):
        build_summary(
            [row("a", "confidence", True, capacity=7), row("a", "hybrid-v1", True, capacity=5)],
            **LABELS,
        )
    with pytest.raises(ContractError, match="grader_version"):
        build_summary(paired("a", True, True, grader_version="x"), **LABELS)
    with pytest.raises(ContractError, match="missing field 'scenario'"):
        no_scenario = {"source": "synthetic", "policy": "confidence", "grade_correct": True}
        build_summary([no_scenario], **LABELS)


# --- report lines ----------------------------------------------------------------------------


def test_suite_report_lines_follow_the_published_format():
    stats = build_stats(published_rows("v3"), **LABELS, **FAST)
    assert suite_report_lines(stats) == [
        "official: confidence 23/40, hybrid-v1 35/40, exact McNemar p=0.001831",
        "synthetic: confidence 1/5, hybrid-v1 5/5, exact McNemar p=0.125000",
        "overall: confidence 24/45, hybrid-v1 40/45, exact McNemar p=0.000145",
    ]


# --- files -----------------------------------------------------------------------------------


def test_write_stats_files_writes_both_documents_as_outputs_of_the_run(tmp_path):
    rows = paired("a", False, True) + paired("b", True, True) + paired("correction_x", True, True, source="synthetic")
    summary, stats = stats_documents(rows, **LABELS, **FAST)
    with results.run(tmp_path / "out", "qa-stats") as run:
        write_stats_files(run, summary, stats)
    for name, value in (("qa.summary.json", summary), ("qa.stats.json", stats)):
        text = (tmp_path / "out" / name).read_text(encoding="utf-8")
        assert text == json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        assert run.record.outputs[name] == results.file_digest(tmp_path / "out" / name)


def test_invalid_rows_fail_before_any_document_exists():
    with pytest.raises(ContractError):
        stats_documents([row("a", "confidence", True)], **LABELS)


# --- reading rows ----------------------------------------------------------------------------


VALID_LINE = json.dumps(row("a", "confidence", True))


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_load_graded_rows_reads_published_file():
    rows = load_graded_rows(REFERENCE / "v3" / "qa.rows.jsonl")
    assert len(rows) == 90
    assert rows[0]["row_id"] == "01493427__confidence"


def test_load_graded_rows_splits_on_newlines_only(tmp_path):
    record = row("a", "confidence", True, prediction="line\u2028separator")
    path = write_lines(tmp_path / "rows.jsonl", [json.dumps(record, ensure_ascii=False)])
    assert load_graded_rows(path) == [record]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([VALID_LINE, "{not json"], r"rows\.jsonl, line 2: not valid JSON"),
        ([VALID_LINE, "", VALID_LINE], r"line 2: blank line"),
        (["[1, 2]"], r"line 1: expected a JSON object, got list"),
        ([json.dumps({"case_id": "a"})], r"line 1: missing field 'source'"),
        (
            [json.dumps(row("a", "confidence", None))],
            r"line 1: field 'grade_correct' must be bool, got None",
        ),
    ],
)
def test_load_graded_rows_names_file_line_and_field(tmp_path, lines, message):
    path = write_lines(tmp_path / "rows.jsonl", lines)
    with pytest.raises(ContractError, match=message):
        load_graded_rows(path)


def test_load_graded_rows_names_a_missing_file(tmp_path):
    with pytest.raises(ContractError, match=r"absent\.jsonl: cannot read"):
        load_graded_rows(tmp_path / "absent.jsonl")
