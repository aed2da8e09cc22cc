"""`evictlab run-qa` end to end against a real scripted HTTP server (spec 3.4-3.7).

The stub server plays a model that reads only its prompt: it answers the case's reference
answer when the case's support fact is shown and ``INSUFFICIENT`` otherwise. The answer is
sent in swapped letter case, which the grader accepts (it lower-cases) while the exact bytes of
the reference answer never reach any output, so the privacy checks below stay meaningful.

The harness (scripted model, tampering) is in ``qa_harness.py``; its fixtures in ``conftest.py``.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from openai_stub import OpenAIStub, error_reply, raw_reply, stalled_reply
from qa_harness import (
    API_KEY,
    KEY_ENV,
    TAMPERING,
    URL_ENV,
    Responder,
    assert_nothing_private,
    copy_run,
    demo_pool_set,
    fingerprints_of,
    grade_cli,
    model_answer,
    protocol_copy,
    run_qa_cli,
    tamper,
    tampered_task,
    unique_tasks,
)

from evictlab.analysis.qa.providers import OpenAICompatibleProvider
from evictlab.analysis.qa.report import REFERENCE_DIR
from evictlab.analysis.qa.runner import QARunInterrupted, response_path, run_qa
from evictlab.analysis.qa.tasks import QATask, build_tasks
from evictlab.cli import main
from evictlab.core.protocol import DEFAULT_SYNTHETIC_MANIFEST, sha256_file
from evictlab.errors import ContractError
from evictlab.results import json_document

RESPONSE_FIELDS = [
    "attempts", "capacity", "case_id", "created_at", "kept_fact_ids", "policy", "prediction",
    "request_fingerprint", "response_model", "row_id", "scenario", "schema_version", "source", "usage",
]  # fmt: skip
MARKER_FIELDS = [
    "artifacts", "created_at", "dataset", "git", "preset", "protocol_id", "qa", "schema_version", "variant",
]  # fmt: skip
QA_FIELDS = [
    "api_key_env", "base_url_env", "capacity", "grader_version", "max_attempts", "max_tokens",
    "model", "stream", "temperature", "timeout_seconds", "workers",
]  # fmt: skip


# --------------------------------------------------------------------------- end to end


def test_faults_then_resume_then_grade(tmp_path, credentials, capsys, demo_tasks):
    timeouts = protocol_copy(tmp_path / "protocol", config_edits={"timeout_seconds: 120": "timeout_seconds: 2"})
    tasks = build_tasks(demo_pool_set(*timeouts))
    limited, repeated_500, slow, malformed, refused = unique_tasks(tasks)[:5]
    faults = {
        limited.request_fingerprint: [error_reply(429)],
        repeated_500.request_fingerprint: [error_reply(500)] * 3,
        slow.request_fingerprint: [stalled_reply(30)],
        malformed.request_fingerprint: [raw_reply("{not json")],
        refused.request_fingerprint: [error_reply(401)],
    }
    output = tmp_path / "run"

    with OpenAIStub(fallback=Responder(tasks, faults)) as stub:
        credentials(stub)
        assert run_qa_cli(output, *timeouts) == 1
        requests = stub.requests
    first = capsys.readouterr()
    assert "answer rows: 0 reused, 87 called, 3 failed" in first.out
    failed = sorted([repeated_500, malformed, refused], key=lambda task: task.row_id)
    reasons = {
        repeated_500.row_id: "failed after 3 attempts (last: HTTP 500)",
        malformed.row_id: "HTTP 200 but the body is refused: not valid JSON (Expecting property name"
        " enclosed in double quotes: line 1 column 2)",
        refused.row_id: "HTTP 401 (not retryable)",
    }
    lines = [line for line in first.err.splitlines() if line.split(":")[0] in reasons]
    assert lines == [f"{task.row_id}: {reasons[task.row_id]}" for task in failed]
    # Every row once, plus the retries: 429 -> 1, three 500s -> 2, the timeout -> 1.
    assert len(requests) == 90 + 1 + 2 + 1
    assert {request.headers["authorization"] for request in requests} == {f"Bearer {API_KEY}"}
    stored = {path.stem for path in (output / "responses").iterdir()}
    assert stored == {task.row_id for task in tasks} - set(reasons)
    assert _load(output, limited)["attempts"] == 2 and _load(output, slow)["attempts"] == 2
    others = stored - {limited.row_id, slow.row_id}
    assert {_load(output, task)["attempts"] for task in tasks if task.row_id in others} == {1}

    with OpenAIStub(fallback=Responder(tasks)) as stub:
        credentials(stub)
        assert run_qa_cli(output, *timeouts) == 0
        assert sorted(fingerprints_of(stub)) == sorted(task.request_fingerprint for task in failed)
    second = capsys.readouterr()
    assert "answer rows: 87 reused, 3 called, 0 failed" in second.out

    with OpenAIStub() as stub:  # any call would be answered 400 and fail the run
        credentials(stub)
        assert run_qa_cli(output, *timeouts) == 0
        assert stub.requests == []
    third = capsys.readouterr()
    assert "answer rows: 90 reused, 0 called, 0 failed" in third.out

    assert grade_cli(output, *timeouts) == 0  # the retried rows grade like any other
    graded = capsys.readouterr()
    assert "overall: confidence 27/45, hybrid-v1 45/45, exact McNemar p=0.000008" in graded.out
    outputs = [first, second, third, graded]
    assert_nothing_private(output, tasks, *(captured.out + captured.err for captured in outputs))


def _load(output: Path, task: QATask) -> dict:
    return json.loads(response_path(output, task.row_id).read_text(encoding="utf-8"))


def test_response_files_hold_exactly_the_spec_fields(completed_run, demo_tasks):
    for task in demo_tasks:
        path = response_path(completed_run, task.row_id)
        row = json.loads(path.read_text(encoding="utf-8"))
        assert sorted(row) == RESPONSE_FIELDS
        assert path.read_text(encoding="utf-8") == json_document(row)
        assert row["schema_version"] == 1
        assert (row["row_id"], row["case_id"], row["policy"]) == (task.row_id, task.case.case_id, task.policy)
        assert (row["source"], row["scenario"], row["capacity"]) == (task.case.source, task.case.scenario, 7)
        assert row["kept_fact_ids"] == list(task.kept_fact_ids)
        assert row["request_fingerprint"] == task.request_fingerprint
        assert row["prediction"] == model_answer(task, task.payload["messages"][1]["content"])
        assert (row["attempts"], row["response_model"]) == (1, "stub-model")
        assert row["usage"] == {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42}
        assert row["created_at"].endswith("Z")
    assert sorted(path.name for path in completed_run.iterdir()) == ["qa_run.json", "responses", "run-qa.run.json"]
    assert len(list((completed_run / "responses").iterdir())) == 90  # no temporary files left


def test_marker_records_the_five_inputs_and_the_qa_settings(completed_run):
    pool_set = demo_pool_set()
    marker = json.loads((completed_run / "qa_run.json").read_text(encoding="utf-8"))
    assert (completed_run / "qa_run.json").read_text(encoding="utf-8") == json_document(marker)
    assert sorted(marker) == MARKER_FIELDS
    assert marker["schema_version"] == 2
    assert marker["protocol_id"] == "deermem-hybrid-v1-pr4789-reproduction-v1"
    files = pool_set.protocol.files
    assert marker["artifacts"] == {
        "answer_prompt_sha256": sha256_file(files.answer_prompt),
        "config_sha256": sha256_file(files.config),
        "dataset_sha256": sha256_file(pool_set.dataset.path),
        "official_manifest_sha256": sha256_file(files.official_manifest),
        "synthetic_manifest_sha256": sha256_file(DEFAULT_SYNTHETIC_MANIFEST),
    }
    assert marker["dataset"] == pool_set.dataset.record()
    assert marker["qa"] == {
        "api_key_env": KEY_ENV, "base_url_env": URL_ENV, "capacity": 7,
        "grader_version": "deterministic-overlap-v1", "max_attempts": 3, "max_tokens": 2048,
        "model": "deepseek-v4-flash", "stream": False, "temperature": 0.0, "timeout_seconds": 120,
        "workers": 3,
    }  # fmt: skip
    assert sorted(marker["qa"]) == QA_FIELDS
    assert isinstance(marker["qa"]["temperature"], float)
    assert sorted(marker["git"]) == ["dirty", "head"]
    assert marker["created_at"].endswith("Z")
    assert (marker["preset"], marker["variant"]) == ("pr4810-final", pool_set.variant.as_dict())


def test_the_marker_has_the_layout_of_deerflows_schema_2_markers(completed_run):
    published = REFERENCE_DIR / "v3" / "qa_run.json"
    theirs = json.loads(published.read_text(encoding="utf-8"))
    ours = json.loads((completed_run / "qa_run.json").read_text(encoding="utf-8"))
    assert set(ours) - {"preset", "variant"} == set(theirs)
    for block in ("artifacts", "dataset", "git", "qa"):
        assert set(ours[block]) - {"pinned"} == set(theirs[block]), block  # "pinned" only when false
    assert ours["qa"] == {**theirs["qa"]}


# --------------------------------------------------------------------------- reuse rules

@pytest.mark.parametrize("name", sorted(TAMPERING))
def test_run_qa_calls_again_exactly_the_rows_that_do_not_match(
    name, tmp_path, completed_run, answering_stub, demo_tasks, capsys
):
    output = copy_run(completed_run, tmp_path / "run")
    task = tampered_task(demo_tasks)
    tamper(output, task, name)
    before = len(answering_stub.requests)
    assert run_qa_cli(output) == 0
    # One validity rule for resume and grading: any row grade-qa would refuse is asked again,
    # the fields outside spec 3.6's reuse rule (case_id, source, scenario) included.
    assert fingerprints_of(answering_stub, before) == [task.request_fingerprint]
    captured = capsys.readouterr()
    assert "answer rows: 89 reused, 1 called, 0 failed" in captured.out
    assert f"asking again 1 stored row(s) that grade-qa would refuse: {task.row_id} ({name} is" in captured.err
    assert _load(output, task)[name] == _load(completed_run, task)[name]


@pytest.mark.parametrize(
    "content",
    ["{truncated", "[1, 2]", '{"schema_version": 2, "prediction": "x"}', '{"schema_version": 1, "prediction": null}'],
)
def test_rows_that_are_not_completed_are_called_again(content, tmp_path, completed_run, answering_stub, demo_tasks):
    output = copy_run(completed_run, tmp_path / "run")
    task = demo_tasks[-1]
    response_path(output, task.row_id).write_text(content, encoding="utf-8")
    before = len(answering_stub.requests)
    assert run_qa_cli(output) == 0
    assert fingerprints_of(answering_stub, before) == [task.request_fingerprint]
    assert _load(output, task) | {"created_at": None} == _load(completed_run, task) | {"created_at": None}


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "edits, changed",
    [
        ({"config_edits": {"workers: 3": "workers: 2"}}, ["config"]),
        ({"prompt_edits": {"shortest answer": "briefest answer"}}, ["answer_prompt", "config"]),
    ],
)
def test_a_changed_protocol_file_stops_resume_and_grading(
    edits, changed, tmp_path, completed_run, answering_stub, capsys
):
    output = copy_run(completed_run, tmp_path / "run")
    options = protocol_copy(tmp_path / "protocol", **edits)
    before = len(answering_stub.requests)
    for command, action in ((run_qa_cli, "resume"), (grade_cli, "grade")):
        assert command(output, *options) == 2
        error = capsys.readouterr().err
        assert re.findall(r"(\w+) \(recorded", error) == changed, error
        assert f"refusing to {action} (use a new output directory)" in error
    assert len(answering_stub.requests) == before
    assert sorted(path.name for path in output.iterdir()) == ["qa_run.json", "responses", "run-qa.run.json"]


def test_another_protocol_variant_stops_resume(tmp_path, completed_run, answering_stub, capsys):
    output = copy_run(completed_run, tmp_path / "run")
    before = len(answering_stub.requests)
    assert run_qa_cli(output, "--variant", "memory_joiner=newline") == 2
    error = capsys.readouterr().err
    assert "protocol variant" in error and "refusing to resume" in error
    assert len(answering_stub.requests) == before


def test_a_broken_marker_is_refused(tmp_path, completed_run, answering_stub, capsys):
    output = copy_run(completed_run, tmp_path / "run")
    (output / "qa_run.json").write_text('{"schema_version": 1, "artifacts": {}}\n', encoding="utf-8")
    assert run_qa_cli(output) == 2
    assert "schema_version 2" in capsys.readouterr().err


@pytest.mark.parametrize("unset", [[KEY_ENV, URL_ENV], [KEY_ENV], [URL_ENV]])
def test_missing_credentials_fail_before_the_dataset_is_read(unset, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, API_KEY)
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:9/v1")
    for name in unset:
        if name == URL_ENV:
            monkeypatch.setenv(name, "   ")  # blank once stripped counts as missing
        else:
            monkeypatch.delenv(name)
    output = tmp_path / "run"
    assert run_qa_cli(output, "--dataset", str(tmp_path / "no-such-dataset.json")) == 2
    error = capsys.readouterr().err
    assert error.strip().endswith("missing or empty environment variable(s): " + ", ".join(unset))
    assert "dataset" not in error and API_KEY not in error
    assert not output.exists()


# --------------------------------------------------------------------------- interruption


class InterruptingProvider(OpenAICompatibleProvider):
    """The real client, with Ctrl-C arriving during its ``interrupt_at``-th call."""

    def __init__(self, *args, interrupt_at: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.interrupt_at = interrupt_at
        self.calls = 0
        self.lock = threading.Lock()

    def complete(self, payload):
        with self.lock:
            self.calls += 1
            number = self.calls
        if number == self.interrupt_at:
            raise KeyboardInterrupt
        return super().complete(payload)


def test_interrupt_keeps_finished_rows_and_starts_nothing_new(tmp_path, answering_stub, demo_tasks, capsys):
    output = tmp_path / "run"
    provider = InterruptingProvider(answering_stub.base_url, API_KEY, retry_delay_seconds=0, interrupt_at=11)
    before = len(answering_stub.requests)
    with pytest.raises(QARunInterrupted, match="run the same command again to resume") as raised:
        run_qa(demo_pool_set(), provider, output, workers=1, progress=False)
    assert raised.value.exit_code == 130
    assert "starting no new calls" in capsys.readouterr().err
    stored = sorted(path.stem for path in (output / "responses").iterdir())
    assert stored == sorted(task.row_id for task in demo_tasks[:10])
    assert provider.calls == 11 and len(answering_stub.requests) - before == 10

    assert run_qa_cli(output) == 0
    assert "answer rows: 10 reused, 80 called, 0 failed" in capsys.readouterr().out


def test_interrupt_with_several_workers_loses_no_answered_call(tmp_path, answering_stub, demo_tasks):
    output = tmp_path / "run"
    provider = InterruptingProvider(answering_stub.base_url, API_KEY, retry_delay_seconds=0, interrupt_at=8)
    before = len(answering_stub.requests)
    with pytest.raises(QARunInterrupted):
        run_qa(demo_pool_set(), provider, output, workers=3, progress=False)
    answered = fingerprints_of(answering_stub, before)
    stored = [json.loads(path.read_text(encoding="utf-8")) for path in (output / "responses").iterdir()]
    assert sorted(row["request_fingerprint"] for row in stored) == sorted(answered)
    assert 7 <= len(stored) < 90


@pytest.mark.parametrize("option", [["--workers", "0"], ["--workers", "two"], ["--retry-delay", "-1"]])
def test_bad_options_are_usage_errors(option, tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["run-qa", "--output-dir", str(tmp_path / "run"), *option])
    assert exited.value.code == 2
    assert option[0] in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_response_files_need_a_plain_row_id(tmp_path):
    for bad in ("../escape__confidence", ".hidden", "a/b", ""):
        with pytest.raises(ContractError):
            response_path(tmp_path, bad)
    assert response_path(tmp_path, "x__hybrid-v1") == tmp_path / "responses" / "x__hybrid-v1.json"

