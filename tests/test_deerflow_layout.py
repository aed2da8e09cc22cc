"""Protocol files in DeerFlow's exact schema and folder layout drive every command end to end.

``tests/fixtures/deerflow-layout/`` holds a config, both manifests (the official one with
its ``selection`` block, listed last) and an answer prompt, laid out as DeerFlow lays them
out (``configs/``, ``manifests/`` and ``prompts/`` side by side), written for these tests in
their own wording and style. Its official manifest lists the embedded demo's cases, so the
commands run on the demo dataset; no ``--answer-prompt`` is passed, so the prompt must be
found beside ``configs/`` as DeerFlow's layout places it.
"""

from __future__ import annotations

import json
from pathlib import Path

from openai_stub import OpenAIStub
from qa_harness import Responder, demo_pool_set, grade_cli, run_qa_cli

from evictlab.analysis.qa.prompt import parse_answer_template
from evictlab.analysis.qa.tasks import build_tasks
from evictlab.cli import main
from evictlab.core.protocol import ARTIFACT_NAMES, load_protocol, sha256_file

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "deerflow-layout"
FILES = {
    "config": FIXTURE / "configs" / "pr4789-reproduction-v1.yaml",
    "official_manifest": FIXTURE / "manifests" / "longmemeval-pr4789-v1.json",
    "synthetic_manifest": FIXTURE / "manifests" / "synthetic-corrections-pr4789-v1.json",
    "answer_prompt": FIXTURE / "prompts" / "answer-v1.txt",
}
OPTIONS = [
    "--config", str(FILES["config"]),
    "--official-manifest", str(FILES["official_manifest"]),
    "--synthetic-manifest", str(FILES["synthetic_manifest"]),
]  # fmt: skip
HASHES = {f"{name}_sha256": sha256_file(path) for name, path in FILES.items()}


def test_the_fixture_is_its_own_set_of_files():
    ours = load_protocol().artifact_hashes()
    assert all(HASHES[key] != ours[key] for key in HASHES)  # none is a copy of evictlab's files
    official = json.loads(FILES["official_manifest"].read_text(encoding="utf-8"))
    assert list(official)[-1] == "selection"


def test_validate_contracts_loads_the_fixture_and_reports_its_hashes(capsys):
    assert main(["validate-contracts", *OPTIONS]) == 0
    out = capsys.readouterr().out
    for name in ARTIFACT_NAMES:
        line = next(line for line in out.splitlines() if line.split()[:1] == [name])
        assert HASHES[f"{name}_sha256"] in line
    assert f"{FILES['answer_prompt']}" in out  # found beside configs/, not passed
    assert "validated 40 official and 5 synthetic cases" in out


def test_validate_recomputes_the_selection_with_the_fixtures_rule(capsys):
    assert main(["validate", *OPTIONS]) == 0
    out = capsys.readouterr().out
    assert f"matches {FILES['official_manifest']}" in out
    assert "prepared 45 cases" in out


def test_run_policy_records_the_fixtures_identity(tmp_path, capsys):
    output = tmp_path / "run"
    assert main(["run-policy", "--output-dir", str(output), *OPTIONS]) == 0
    run = json.loads((output / "run.json").read_text(encoding="utf-8"))
    assert run["artifacts"] == HASHES
    summary = json.loads((output / "summary.json").read_text(encoding="utf-8"))
    retained = {}
    for group in summary["groups"]:
        key = (group["policy"], group["capacity"])
        retained[key] = retained.get(key, 0) + group["support_all_retained"]
    assert retained == {
        ("confidence", 5): 20, ("confidence", 7): 27, ("confidence", 9): 35,
        ("hybrid-v1", 5): 35, ("hybrid-v1", 7): 45, ("hybrid-v1", 9): 45,
    }  # fmt: skip


def test_run_qa_and_grade_qa_with_the_fixture(tmp_path, credentials, capsys):
    tasks = build_tasks(demo_pool_set(*OPTIONS))
    system = parse_answer_template(FILES["answer_prompt"].read_text(encoding="utf-8")).system
    output = tmp_path / "qa"
    with OpenAIStub(fallback=Responder(tasks)) as stub:
        credentials(stub)
        assert run_qa_cli(output, *OPTIONS) == 0
        requests = stub.requests
    assert len(requests) == 90
    assert {request.json["model"] for request in requests} == {"fixture-model"}
    assert {request.json["messages"][0]["content"] for request in requests} == {system}
    # The fixture's own correction wording reaches the model.
    assert any("Peanuts give the user an allergic reaction" in request.json["messages"][1]["content"]
               for request in requests)
    assert "answer rows: 0 reused, 90 called, 0 failed" in capsys.readouterr().out
    assert grade_cli(output, *OPTIONS) == 0
    assert "overall: confidence 27/45, hybrid-v1 45/45" in capsys.readouterr().out
    summary = json.loads((output / "qa.summary.json").read_text(encoding="utf-8"))
    assert summary["protocol_id"] == "deermem-hybrid-v1-pr4789-reproduction-v1"


def test_diff_between_two_specs_naming_the_fixture(tmp_path, capsys):
    keys = "".join(f"{name}: {path}\n" for name, path in FILES.items() if name != "answer_prompt")
    before, after = tmp_path / "run2.yaml", tmp_path / "final.yaml"
    before.write_text(f"preset: pr4810-run2\n{keys}", encoding="utf-8")
    after.write_text(f"preset: pr4810-final\n{keys}", encoding="utf-8")
    output = tmp_path / "diff"
    assert main(["diff", "--from", str(before), "--to", str(after), "--output-dir", str(output)]) == 0
    summary = json.loads((output / "diff.summary.json").read_text(encoding="utf-8"))
    for side in ("from", "to"):
        assert summary[side]["artifacts_used"] == HASHES
    # As with evictlab's own files on the demo: only two capacity-7 kept sets move (docs/variants.md).
    assert summary["pools_changed"] == 0 and summary["kept_sets_changed"]["7"] == 2
    assert "0/45 pools, 2/90 kept sets (capacity 7), 90/90 prompts changed" in capsys.readouterr().out
