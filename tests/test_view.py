"""``evictlab view``: one offline HTML page for a run folder, and the A/B list of two real runs."""

from __future__ import annotations

import json
import re

import pytest

from evictlab.cli import main
from evictlab.workbench.viewer import compare, load_run

MAX_BYTES = 5_000_000


def run_policy(folder, *options):
    assert main(["run-policy", "--output-dir", str(folder), *options]) == 0
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three real run-policy folders: confidence; hybrid-v1 at DeerMem's defaults; hybrid-v1 with
    more weight on confirmation."""
    root = tmp_path_factory.mktemp("runs")
    return {
        "confidence": run_policy(root / "confidence", "--policies", "confidence"),
        "hybrid": run_policy(root / "hybrid", "--policies", "hybrid-v1"),
        "confirmation": run_policy(root / "confirmation", "--policies", "hybrid-v1",
                                   "--param", "confidence_weight=0.35", "--param", "confirmation_weight=0.55",
                                   "--param", "access_weight=0.1"),
    }


def raw_rows(folder):
    lines = (folder / "policy.raw.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def expected_disagreements(first, second, *, by_policy):
    """(capacity, case) pairs whose kept sets or support outcomes differ, read from the raw rows."""
    def index(folder):
        return {((row["policy"],) if by_policy else ()) + (row["capacity"], row["case_id"]): row
                for row in raw_rows(folder)}
    left, right = index(first), index(second)
    assert left.keys() == right.keys()
    differ = set()
    for key, a in left.items():
        b = right[key]
        outcome = [set(row["support_fact_ids"]) <= set(row["kept_fact_ids"]) for row in (a, b)]
        if set(a["kept_fact_ids"]) != set(b["kept_fact_ids"]) or outcome[0] != outcome[1]:
            differ.add((a["capacity"], a["case_id"]))
    return differ


@pytest.mark.parametrize(("a", "b", "by_policy"), [("confidence", "hybrid", False), ("hybrid", "confirmation", True)])
def test_the_comparison_lists_exactly_the_cases_that_disagree(runs, a, b, by_policy):
    result = compare(load_run(runs[a]), load_run(runs[b]))
    listed = {(row["capacity"], row["case_id"]) for row in result["disagreeing"]}
    assert listed == expected_disagreements(runs[a], runs[b], by_policy=by_policy)
    assert 0 < len(listed) < result["pairs"] == 135
    assert result["paired_by"].startswith("capacity and case" if not by_policy else "policy, capacity")


def test_the_side_by_side_summary_counts_retention_and_flips_from_the_raw_rows(runs):
    result = compare(load_run(runs["confidence"]), load_run(runs["hybrid"]))
    kept = {name: {(row["capacity"], row["case_id"]): (row["scenario"],
                   set(row["support_fact_ids"]) <= set(row["kept_fact_ids"])) for row in raw_rows(runs[name])}
            for name in ("confidence", "hybrid")}
    rows = {(row["scenario"], row["capacity"]): row for row in result["summary"]}
    assert len(rows) == len(result["summary"]) == 3 * (5 + 1)  # five scenarios and all cases, three capacities
    for (scenario, capacity), row in rows.items():
        keys = [key for key, (where, _) in kept["confidence"].items()
                if key[0] == capacity and scenario in (where, "all cases")]
        a = [kept["confidence"][key][1] for key in keys]
        b = [kept["hybrid"][key][1] for key in keys]
        assert row["pairs"] == len(keys) and row["a_retained"] == sum(a) and row["b_retained"] == sum(b)
        assert row["flips_a_only"] == sum(x and not y for x, y in zip(a, b))
        assert row["flips_b_only"] == sum(y and not x for x, y in zip(a, b))
    assert sum(row["flips_b_only"] for row in result["summary"] if row["scenario"] == "all cases") > 0


def test_a_case_shows_its_facts_margins_and_why(runs):
    run = load_run(runs["confidence"])
    case = next(item for item in run.cases if item["key"] == "confidence|5|5fadc924")
    assert [fact["kept"] for fact in case["facts"]] == [True] * 5 + [False] * 5
    support = next(fact for fact in case["facts"] if fact["support"])
    assert support["fact_id"] == "gold_5fadc924" and not support["kept"]
    lowest_kept = min(fact["score"] for fact in case["facts"] if fact["kept"])
    assert support["margin"] == pytest.approx(support["score"] - lowest_kept)
    assert case["status"] == "support evicted"
    assert "support gold_5fadc924 evicted: score 0.7000, 0.1600 below the lowest kept" in case["explanation"]


def test_the_command_writes_one_offline_page_under_5_mb(runs, capsys):
    output = runs["confidence"].parent / "ab.html"
    assert main(["view", str(runs["confidence"]), str(runs["hybrid"]), "--output", str(output)]) == 0
    assert re.search(r"wrote .*ab\.html \(\d\.\d\d MB\); \d+ of 135 paired cases disagree", capsys.readouterr().out)
    page = output.read_text(encoding="utf-8")
    assert output.stat().st_size < MAX_BYTES
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing fetched from a network
    assert "<script src" not in page and "<link rel=\"stylesheet\"" not in page
    data = json.loads(re.search(r'id="evictlab-data">(.*?)</script>', page, re.S).group(1))
    assert [run["label"] for run in data["runs"]] == ["confidence", "hybrid"]
    # Written again over its own earlier page; never over another file.
    assert main(["view", str(runs["confidence"]), "--output", str(output)]) == 0
    other = runs["confidence"].parent / "notes.html"
    other.write_text("mine")
    assert main(["view", str(runs["confidence"]), "--output", str(other)]) == 2
    assert other.read_text() == "mine"
    assert "is not an evictlab view page" in capsys.readouterr().err


def test_bad_folders_get_one_line(tmp_path, capsys):
    assert main(["view", str(tmp_path / "missing")]) == 2
    assert main(["view", str(tmp_path)]) == 2
    (tmp_path / "policy.raw.jsonl").write_text('{"case_id": "x"}\n')
    assert main(["view", str(tmp_path)]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors[0].endswith("missing: not a folder; evictlab view reads a run folder")
    assert "not an evictlab run folder" in errors[1]
    assert errors[2].endswith("policy.raw.jsonl line 1: missing field(s) policy, capacity, kept_fact_ids, scores,"
                              " support_fact_ids")
    assert len(errors) == 3 and not (tmp_path / "view.html").exists()


def test_qa_answers_stay_out_unless_asked_for(tmp_path):
    row = {"case_id": "c1", "policy": "hybrid-v1", "capacity": 7, "scenario": "access_help", "grade_correct": True,
           "grade_rule": "token-f1", "request_fingerprint": "ab12", "prediction": "PRIVATE-MEMORY-QUOTE",
           "kept_fact_ids": ["f1"], "usage": {"prompt_tokens": 12}}
    (tmp_path / "qa.rows.jsonl").write_text(json.dumps(row) + "\n")
    hidden = tmp_path / "hidden.html"
    assert main(["view", str(tmp_path), "--output", str(hidden)]) == 0
    text = hidden.read_text(encoding="utf-8")
    assert "PRIVATE-MEMORY-QUOTE" not in text and "ab12" in text and "token-f1" in text
    shown = tmp_path / "shown.html"
    assert main(["view", str(tmp_path), "--include-private-text", "--output", str(shown)]) == 0
    assert "PRIVATE-MEMORY-QUOTE" in shown.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_page_loads_without_console_errors_and_lists_the_disagreeing_cases(runs, chromium):
    from browser import ConsoleLog

    output = runs["hybrid"].parent / "browser.html"
    assert main(["view", str(runs["hybrid"]), str(runs["confirmation"]), "--output", str(output)]) == 0
    page = chromium.new_page()
    console = ConsoleLog(page)
    page.goto(output.as_uri())
    rows = page.locator("#disagreeing tbody tr")
    rows.first.wait_for()
    shown = {tuple(key.split("|")) for key in rows.evaluate_all("rows => rows.map(row => row.dataset.key)")}
    expected = expected_disagreements(runs["hybrid"], runs["confirmation"], by_policy=True)
    assert shown == {("hybrid-v1", str(capacity), case) for capacity, case in expected}
    rows.first.click()
    assert page.locator(".pair .detail").count() == 2  # A and B side by side
    page.get_by_role("button", name="B: cases").click()
    page.locator("select[data-filter=scenario]").select_option("correction_reserve")
    assert page.locator(".count").text_content() == "15 of 135 cases"
    page.locator("tbody tr.pick").first.click()
    assert page.locator(".detail tr.support").count() >= 1
    assert not console.errors, console.errors


@pytest.mark.slow
def test_the_ab_tab_filters_its_pairs_sums_them_side_by_side_and_folds_the_provenance(runs, chromium):
    from browser import ConsoleLog

    output = runs["confidence"].parent / "ab.html"
    assert main(["view", str(runs["confidence"]), str(runs["hybrid"]), "--output", str(output)]) == 0
    result = compare(load_run(runs["confidence"]), load_run(runs["hybrid"]))
    page = chromium.new_page()
    console = ConsoleLog(page)
    page.goto(output.as_uri())
    page.locator("#disagreeing tbody tr").first.wait_for()
    assert page.locator("#ab-summary tbody tr").count() == len(result["summary"])
    every = len(result["disagreeing"])
    assert page.locator(".count").text_content() == f"{every} of {every} disagreeing pairs"
    page.locator("select[data-filter=capacity]").select_option("5")
    at_five = [row for row in result["disagreeing"] if row["capacity"] == 5]
    assert page.locator(".count").text_content() == f"{len(at_five)} of {every} disagreeing pairs"
    shown = page.locator("#disagreeing tbody tr").evaluate_all("rows => rows.map(row => row.dataset.key)")
    assert shown == [row["pair"] for row in at_five]
    page.locator("select[data-filter=scenario]").select_option("correction_reserve")
    both = [row for row in at_five if row["scenario"] == "correction_reserve"]
    assert page.locator("#disagreeing tbody tr").count() == len(both)
    provenance = page.locator("details.provenance").first
    assert provenance.get_attribute("open") is None and not page.locator("details.provenance pre").first.is_visible()
    provenance.locator("summary").click()
    assert '"dataset"' in page.locator("details.provenance pre").first.text_content()
    # Nothing in the header or the tables reaches past the page's right edge.
    overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0
    assert not console.errors, console.errors


@pytest.mark.slow
def test_the_trace_page_draws_one_line_per_policy(tmp_path, chromium):
    import pandas as pd

    folder = tmp_path / "replay"
    assert main(["trace", "replay", "--seeds", "1", "--policies", "confidence,lru", "--capacities", "5,50",
                 "--output-dir", str(folder)]) == 0
    assert main(["view", str(folder)]) == 0
    page = chromium.new_page()
    page.goto((folder / "view.html").as_uri())
    page.get_by_role("button", name="summary").click()
    lines = page.locator("#trace-chart path")
    summary = pd.read_csv(folder / "curve.summary.csv")
    drawn = sorted(lines.evaluate_all("paths => paths.map(path => path.dataset.policy)"))
    assert drawn == sorted(summary["policy"].unique()) and {"confidence", "lru"} <= set(drawn)  # and the bounds
    for path in lines.evaluate_all("paths => paths.map(path => path.getAttribute('d'))"):
        assert path.count("L") == summary["capacity"].nunique() - 1  # a point per capacity


def test_a_trace_replay_folder_shows_its_rows_and_summary(tmp_path):
    import pandas as pd

    folder = tmp_path / "replay"
    assert main(["trace", "replay", "--seeds", "1", "--policies", "confidence", "--capacities", "5",
                 "--output-dir", str(folder)]) == 0
    run = load_run(folder)
    assert run.kind == "trace-replay" and run.manifest["status"] == "success"
    rows = pd.read_parquet(folder / "curve.rows.parquet")
    assert [case["policy"] for case in run.cases] == rows["policy"].tolist()
    assert len(run.summary) == len(pd.read_csv(folder / "curve.summary.csv"))
    assert main(["view", str(folder)]) == 0 and (folder / "view.html").exists()


def test_a_diff_folder_shows_one_row_per_case_and_policy_with_its_capacities(tmp_path):
    folder = tmp_path / "diff"
    assert main(["diff", "--from", "pr4810-run2", "--to", "pr4810-final", "--output-dir", str(folder)]) == 0
    run = load_run(folder)
    rows = [json.loads(line) for line in (folder / "diff.cases.jsonl").read_text().splitlines()]
    assert run.kind == "diff" and len(run.cases) == len(rows) == 90
    changed_kept = {(row["policy"], row["case_id"], capacity) for row in rows
                    for capacity, block in row["capacities"].items() if block["kept_changed"]}
    shown = {(case["policy"], case["case_id"], name[1:].split("_")[0]) for case in run.cases
             for name, value in case.items() if name.endswith("_kept_changed") and value}
    assert shown == changed_kept
    assert sum(capacity == "7" for _, _, capacity in shown) == 2  # docs/variants.md's two capacity-7 kept sets


def test_a_sweep_folder_shows_its_summary_not_its_rows(tmp_path):
    folder = tmp_path / "sweep"
    assert main(["sweep", "--weights-step", "0.5", "--capacities", "5", "--output-dir", str(folder)]) == 0
    run = load_run(folder)
    assert run.kind == "sweep" and run.cases == []
    with open(folder / "extreme_settings.csv", encoding="utf-8") as handle:
        assert len(run.summary) == sum(1 for _ in handle) - 1
    assert main(["view", str(folder)]) == 0


def test_a_graded_qa_run_shows_grades_and_fingerprints_but_no_answers(tmp_path, completed_run):
    from qa_harness import copy_run, grade_cli

    folder = copy_run(completed_run, tmp_path / "qa")
    assert grade_cli(folder) == 0
    rows = [json.loads(line) for line in (folder / "qa.rows.jsonl").read_text(encoding="utf-8").splitlines()]
    run = load_run(folder)
    assert run.kind == "qa" and len(run.cases) == len(rows) == 90
    by_key = {case["key"]: case for case in run.cases}
    for row in rows:
        case = by_key[f"{row['policy']}|{row['capacity']}|{row['case_id']}"]
        assert case["status"] == ("correct" if row["grade_correct"] else "incorrect")
        assert case["grade_rule"] == row["grade_rule"]
        assert case["request_fingerprint"] == row["request_fingerprint"]
        assert "prediction" not in case
    assert len(run.summary) == 10  # scenario x policy groups of qa.summary.json
    assert main(["view", str(folder)]) == 0
    page = (folder / "view.html").read_text(encoding="utf-8")
    answers = {row["prediction"] for row in rows if len(row["prediction"]) >= 20}
    assert answers and not [answer for answer in answers if json.dumps(answer)[1:-1] in page]


def test_private_text_comes_from_the_runs_dataset_only_when_asked_for(runs, tmp_path):
    from evictlab.workbench.loaders import load_pool_set

    case = load_pool_set().case("5fadc924")
    support = next(fact for fact in case.facts if fact["id"] == "gold_5fadc924")
    pages = {}
    for name, options in (("public", []), ("private", ["--include-private-text"])):
        output = tmp_path / f"{name}.html"
        assert main(["view", str(runs["confidence"]), *options, "--output", str(output)]) == 0
        pages[name] = output.read_text(encoding="utf-8")
    for text in (case.question, support["content"]):
        encoded = json.dumps(text, ensure_ascii=False)[1:-1].replace("</", "<\\/")
        assert encoded not in pages["public"] and encoded in pages["private"]
    assert "keep it local" in pages["private"] and "keep it local" not in pages["public"]
