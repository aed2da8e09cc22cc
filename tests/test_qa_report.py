"""QA run folders as tables: DeerFlow's published runs are the golden data (spec 5, 6.3, 6.4)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from scipy.stats import binom

from evictlab.analysis.qa import report as qa_report
from evictlab.analysis.qa.stats import STATS_FILE, SUMMARY_FILE
from evictlab.errors import ContractError

# Spec 6.3: correct answers per suite, (confidence, hybrid-v1).
PUBLISHED_SUITES = {
    "v1": {"official": (23, 35), "synthetic": (1, 5), "overall": (24, 40)},
    "v2": {"official": (23, 33), "synthetic": (1, 5), "overall": (24, 38)},
    "v3": {"official": (23, 35), "synthetic": (1, 5), "overall": (24, 40)},
}
PUBLISHED_TOKENS = {"v1": (81_742, 14_156), "v2": (81_463, 17_009), "v3": (86_342, 12_340)}
# Spec 6.4: the v3 cases only hybrid-v1 answered correctly, and the one only confidence did.
V3_HYBRID_WINS = {
    "07741c45", "08e075c7", "08f4fc43", "0bb5a684", "0bc8ad92", "0db4c65d", "2a1811e2",
    "10e09553", "184da446", "2c63a862", "2ebe6c90", "2ebe6c92", "4dfccbf7",
    "correction_language", "correction_timezone", "correction_review_resolution", "correction_shipping_address",
}


@pytest.fixture(scope="module")
def v3():
    return qa_report.load_reference_run("v3")


@pytest.fixture(scope="module")
def v3_rows(v3):
    return qa_report.rows_frame(v3.rows)


def test_reference_run_loads_with_its_marker(v3):
    info = v3.info()
    assert info["rows"] == 90 and info["cases"] == 45
    assert info["protocol_id"] == "deermem-hybrid-v1-pr4789-reproduction-v1"
    assert info["grader_version"] == "deterministic-overlap-v1"
    assert info["model"] == "deepseek-v4-flash" and info["capacity"] == 7
    assert info["git_head"] == "01f99d61d3e068083978c72c43f5de67d2543c92"


def test_unknown_reference_version_is_refused():
    with pytest.raises(ContractError, match=r"v4.*v1, v2, v3"):
        qa_report.reference_run_dir("v4")


@pytest.mark.parametrize("version", qa_report.REFERENCE_VERSIONS)
def test_scenario_accuracy_equals_the_stored_summary(version):
    run = qa_report.load_reference_run(version)
    accuracy = qa_report.accuracy_frame(qa_report.rows_frame(run.rows))
    scenarios = accuracy[accuracy["level"] == "scenario"]
    ours = {(r.group, r.policy): (r.correct, r.cases) for r in scenarios.itertuples()}
    stored = {(g["scenario"], g["policy"]): (g["correct"], g["cases"]) for g in run.summary["groups"]}
    assert ours == stored


@pytest.mark.parametrize("version", qa_report.REFERENCE_VERSIONS)
def test_suite_accuracy_and_stats_match_the_published_totals(version):
    run = qa_report.load_reference_run(version)
    accuracy = qa_report.accuracy_frame(qa_report.rows_frame(run.rows))
    suites = accuracy[accuracy["level"] == "suite"].set_index(["group", "policy"])["correct"]
    stats = qa_report.stats_frame(run.stats).set_index("suite")
    for suite, (first, second) in PUBLISHED_SUITES[version].items():
        assert (suites[(suite, "confidence")], suites[(suite, "hybrid-v1")]) == (first, second)
        assert (stats.loc[suite, "first_correct"], stats.loc[suite, "second_correct"]) == (first, second)


def test_stats_frame_carries_the_published_v3_numbers(v3):
    stats = qa_report.stats_frame(v3.stats).set_index("suite")
    assert list(stats.index) == ["official", "synthetic", "overall"]
    official = stats.loc["official"]
    assert (official["only_first_correct"], official["only_second_correct"]) == (1, 13)
    assert (official["both_correct"], official["both_wrong"]) == (22, 4)
    assert official["p_value"] == 0.0018310546875
    assert (official["mean_difference"], official["lower"], official["upper"]) == (
        0.30000000000000004, 0.15000000000000002, 0.45000000000000007)
    assert stats.loc["overall", "p_value"] == 0.00014495849609375
    table = qa_report.stats_table(qa_report.stats_frame(v3.stats))
    assert table.loc["official", "exact McNemar p"] == "0.001831"
    assert table.loc["official", "difference [bootstrap CI]"] == "+0.300 [+0.150, +0.450]"
    # Beside the published bootstrap: Newcombe's interval, Holm over the two separate suites,
    # and a note where the suite is too small for any interval to mean 95%.
    assert table.loc["synthetic", "Newcombe CI"] == "[+0.193, +0.964]"
    assert table.loc["official", "Holm p"] == "0.003662" and table.loc["overall", "Holm p"] == "0.000145"
    assert table.loc["synthetic", "note"].startswith("only 5 pairs (< 30)") and table.loc["official", "note"] == ""


@pytest.mark.parametrize("version", qa_report.REFERENCE_VERSIONS)
def test_recomputed_files_are_byte_identical(version):
    run = qa_report.load_reference_run(version)
    check = qa_report.recompute(run)
    assert check.identical == {SUMMARY_FILE: True, STATS_FILE: True}
    assert check.all_identical
    frame = check.frame(run)
    assert (frame["stored_sha256"] == frame["recomputed_sha256"]).all()


def test_a_tampered_stats_file_is_detected(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(qa_report.reference_run_dir("v3"), folder)
    stats = json.loads((folder / STATS_FILE).read_text())
    stats["suites"]["official"]["mcnemar"]["p_value"] = 0.002
    (folder / STATS_FILE).write_text(json.dumps(stats, indent=2, sort_keys=True) + "\n")
    (folder / SUMMARY_FILE).unlink()
    check = qa_report.recompute(qa_report.load_qa_run(folder))
    assert check.identical == {SUMMARY_FILE: None, STATS_FILE: False}
    assert not check.all_identical


def test_a_folder_with_only_rows_needs_a_protocol_id(tmp_path):
    (tmp_path / qa_report.ROWS_FILE).write_bytes((qa_report.reference_run_dir("v3") / qa_report.ROWS_FILE).read_bytes())
    run = qa_report.load_qa_run(tmp_path)
    assert run.stats is None and run.summary is None and run.marker is None
    with pytest.raises(ContractError, match="no protocol id"):
        qa_report.recompute(run)
    check = qa_report.recompute(run, protocol_id="deermem-hybrid-v1-pr4789-reproduction-v1")
    assert check.stats == json.loads((qa_report.reference_run_dir("v3") / STATS_FILE).read_text())


def test_discordant_cases_of_v3(v3_rows):
    discordant = qa_report.discordant_cases(v3_rows)
    wins = set(discordant.loc[discordant["winner"] == "hybrid-v1", "case_id"])
    losses = list(discordant.loc[discordant["winner"] == "confidence", "case_id"])
    assert wins == V3_HYBRID_WINS
    assert losses == ["1cea1afa"]
    # Hybrid-v1's wins come first; in every one the confidence run said INSUFFICIENT.
    assert list(discordant["winner"]).index("confidence") == len(V3_HYBRID_WINS)
    hybrid_wins = discordant[discordant["winner"] == "hybrid-v1"]
    assert (hybrid_wins["confidence_grade_rule"] == "insufficient").all()
    loss = discordant[discordant["case_id"] == "1cea1afa"].iloc[0]
    assert (loss["confidence_prediction"], loss["hybrid-v1_prediction"]) == ("600", "INSUFFICIENT")
    assert loss["confidence_support_all_retained"] and loss["hybrid-v1_support_all_retained"]


@pytest.mark.parametrize("version", qa_report.REFERENCE_VERSIONS)
def test_token_sums_match_the_published_ones(version):
    rows = qa_report.rows_frame(qa_report.load_reference_run(version).rows)
    totals = qa_report.token_totals(rows)
    assert (totals["prompt_tokens"], totals["completion_tokens"]) == PUBLISHED_TOKENS[version]
    summary = qa_report.token_summary(rows)
    per_policy = summary[summary["scenario"] == "all"]
    assert per_policy["prompt_tokens"].sum() == PUBLISHED_TOKENS[version][0]
    assert per_policy["requests"].tolist() == [45, 45]


def test_reference_tables_cover_the_three_runs():
    totals = qa_report.reference_totals().set_index(["version", "suite"])
    for version, suites in PUBLISHED_SUITES.items():
        for suite, expected in suites.items():
            assert tuple(totals.loc[(version, suite), ["confidence", "hybrid-v1"]]) == expected
    tokens = qa_report.reference_tokens().set_index("version")
    assert {v: (int(r.prompt_tokens), int(r.completion_tokens)) for v, r in tokens.iterrows()} == PUBLISHED_TOKENS


@pytest.mark.parametrize("correct, cases", [(0, 10), (3, 10), (23, 40), (40, 45), (5, 5)])
def test_wilson_bounds_solve_the_score_equation(correct, cases):
    lower, upper = qa_report.wilson_interval(correct, cases, 0.05)
    z = 1.959963984540054
    share = correct / cases
    for bound in (lower, upper):
        # Each bound p satisfies n (share - p)^2 = z^2 p (1 - p), except where clipped at 0 or 1.
        if bound not in (0.0, 1.0):
            assert cases * (share - bound) ** 2 == pytest.approx(z * z * bound * (1 - bound), rel=1e-9)
    assert 0.0 <= lower <= share <= upper <= 1.0


@pytest.mark.parametrize("correct, cases", [(0, 10), (3, 10), (23, 40), (40, 45), (5, 5)])
def test_clopper_pearson_bounds_have_exact_tail_probabilities(correct, cases):
    lower, upper = qa_report.clopper_pearson_interval(correct, cases, 0.05)
    if correct > 0:
        assert binom.sf(correct - 1, cases, lower) == pytest.approx(0.025, rel=1e-7)
    else:
        assert lower == 0.0
    if correct < cases:
        assert binom.cdf(correct, cases, upper) == pytest.approx(0.025, rel=1e-7)
    else:
        assert upper == 1.0
    wilson = qa_report.wilson_interval(correct, cases)
    assert lower <= wilson[0] and wilson[1] <= upper  # the exact interval is the conservative one here


def test_interval_arguments_are_checked():
    with pytest.raises(ContractError, match="11/10"):
        qa_report.wilson_interval(11, 10)
    with pytest.raises(ContractError, match="alpha"):
        qa_report.clopper_pearson_interval(1, 10, alpha=1.5)
    with pytest.raises(ContractError, match="unknown interval method 'bayes'"):
        qa_report.accuracy_frame(pd.DataFrame(), method="bayes")


def test_accuracy_frame_columns_and_order(v3_rows):
    accuracy = qa_report.accuracy_frame(v3_rows, method="clopper-pearson", alpha=0.1)
    assert list(accuracy.columns) == ["level", "group", "source", "policy", "correct", "cases", "accuracy",
                                      "lower", "upper", "method", "alpha"]
    assert list(dict.fromkeys(accuracy["group"])) == [
        "confirmation_help", "access_help", "confidence_control", "noisy_signal_control", "correction_reserve",
        "official", "synthetic", "overall"]
    assert set(accuracy["method"]) == {"clopper-pearson"} and set(accuracy["alpha"]) == {0.1}
    table = qa_report.accuracy_table(qa_report.accuracy_frame(v3_rows))
    assert table.loc[("suite", "official"), "confidence"] == "23/40  57.5% [42.2, 71.5]"


def test_rows_without_usage_have_missing_token_counts(v3):
    rows = [dict(row) for row in v3.rows[:2]]
    del rows[0]["usage"]
    rows[1]["usage"] = {"prompt_tokens": 10, "completion_tokens": True}
    frame = qa_report.rows_frame(rows)
    assert frame["prompt_tokens"].isna().tolist() == [True, False]
    assert frame["completion_tokens"].isna().all()  # a boolean is not a count


def test_loading_errors_name_the_folder_file_and_field(tmp_path):
    with pytest.raises(ContractError, match="QA run folder not found"):
        qa_report.load_qa_run(tmp_path / "absent")
    with pytest.raises(ContractError, match=r"no qa\.rows\.jsonl"):
        qa_report.load_qa_run(tmp_path)
    row = json.loads((qa_report.reference_run_dir("v3") / qa_report.ROWS_FILE).read_text().splitlines()[0])
    del row["grade_rule"]
    (tmp_path / qa_report.ROWS_FILE).write_text(json.dumps(row) + "\n")
    with pytest.raises(ContractError, match=r"qa.rows.jsonl, line 1: missing field 'grade_rule'"):
        qa_report.load_qa_run(tmp_path)
    (tmp_path / qa_report.ROWS_FILE).write_text("")
    with pytest.raises(ContractError, match="no graded rows"):
        qa_report.load_qa_run(tmp_path)
    (tmp_path / qa_report.ROWS_FILE).write_bytes((qa_report.reference_run_dir("v3") / qa_report.ROWS_FILE).read_bytes())
    (tmp_path / STATS_FILE).write_text("[1, 2]\n")
    with pytest.raises(ContractError, match=r"qa\.stats\.json: expected a JSON object"):
        qa_report.load_qa_run(tmp_path)


def test_discordant_cases_need_both_deermem_policies(v3_rows):
    only_confidence = v3_rows[v3_rows["policy"] == "confidence"]
    assert qa_report.discordant_cases(only_confidence).empty
