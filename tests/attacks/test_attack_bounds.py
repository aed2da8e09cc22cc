"""Attacks by work: grids and bootstraps too large to finish, prompts that cannot render.

Issue 16 items 6 (bounded grids and bootstrap iterations, with the way to lift the bound)
and 14 (``validate-contracts`` parses the answer prompt's template).
"""

from __future__ import annotations

import pytest
from qa_harness import copy_run, grade_cli, protocol_copy

from evictlab.analysis.qa.runner import MARKER_FILE
from evictlab.cli import main

TOO_MANY = "bootstrap_iterations: 1000000000000"


@pytest.mark.parametrize("step", ["1e-9", "0.001"])
def test_a_huge_sweep_grid_is_refused_before_it_is_built(step, tmp_path, cli_error):
    code, line = cli_error("sweep", "--weights-step", step, "--output-dir", str(tmp_path / "out"))
    assert code == 2
    assert "settings, over the limit of 50,000" in line and "pass --max-settings" in line
    assert not (tmp_path / "out").exists()


def test_max_settings_lifts_the_bound_deliberately(tmp_path, cli_error):
    options = ["sweep", "--weights-step", "0.5", "--capacities", "5", "--output-dir", str(tmp_path / "out")]
    code, line = cli_error(*options, "--confirmation-half-lives", "30,90", "--max-settings", "11")
    assert code == 2 and "about 12 settings, over the limit of 11" in line
    assert main([*options, "--max-settings", "12", "--no-progress"]) == 0


def test_a_config_with_10_to_the_12_bootstrap_iterations_is_refused(tmp_path, cli_error):
    options = protocol_copy(tmp_path, config_edits={"bootstrap_iterations: 10000": TOO_MANY})
    code, line = cli_error("validate-contracts", *options)
    assert code == 2
    assert "statistics.bootstrap_iterations: 1,000,000,000,000 bootstrap iterations are over the limit" in line
    assert "pass --max-bootstrap-iterations 1000000000000" in line


def test_grade_qa_refuses_an_endless_bootstrap_before_grading(tmp_path, completed_run, cli_error):
    output = copy_run(completed_run, tmp_path / "run")
    options = protocol_copy(tmp_path / "protocol", config_edits={"bootstrap_iterations: 10000": TOO_MANY})
    code, line = cli_error("grade-qa", "--output-dir", str(output), *options)
    assert code == 2 and "over the limit" in line
    assert sorted(path.name for path in output.iterdir()) == [MARKER_FILE, "responses", "run-qa.run.json"]
    assert grade_cli(output) == 0  # the run itself is fine


def test_qa_stats_refuses_an_endless_bootstrap(tmp_path, cli_error):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("")
    code, line = cli_error("qa", "stats", "--rows", str(rows), "--protocol-id", "p",
                           "--iterations", "1000000000000", "--output-dir", str(tmp_path / "o"))  # fmt: skip
    assert code == 2 and "--iterations: 1,000,000,000,000 bootstrap iterations are over the limit" in line


@pytest.mark.parametrize(
    "edit, reason",
    [({"QUESTION: {{QUESTION}}": "QUESTION:"}, "lacks placeholder(s) {{QUESTION}}"),
     ({"SYSTEM:\n": "SYSTEM\n"}, "must start with 'SYSTEM:'")],
    ids=["no question", "no system header"],
)
def test_validate_contracts_parses_the_answer_template(edit, reason, tmp_path, cli_error):
    options = protocol_copy(tmp_path, prompt_edits=edit)
    code, line = cli_error("validate-contracts", *options)
    assert code == 2
    assert reason in line
