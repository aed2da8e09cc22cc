"""Attacks on a live QA run: tampered rows and markers, bad row ids, signals, closed pipes.

Issue 16 items 4 (one validity rule for resume and grading), 8 (the marker checked field by
field), 16 (row ids before the marker, a second Ctrl-C, a closed pipe). Real stub servers on
127.0.0.1, real subprocesses and real signals.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from openai_stub import OpenAIStub, stalled_reply
from qa_harness import API_KEY, KEY_ENV, URL_ENV, copy_run, grade_cli, run_qa_cli, tampered_task

from evictlab.analysis.qa.runner import MARKER_FILE, response_path
from evictlab.core.protocol import DEFAULT_SYNTHETIC_MANIFEST
from evictlab.results import json_document


def edit_json(path: Path, change) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    change(document)
    path.write_text(json_document(document), encoding="utf-8")


# --------------------------------------------------------------------------- item 4


@pytest.mark.parametrize("field", ["usage", "created_at", "response_model"])
def test_a_row_without_a_field_grading_needs_is_asked_again(
    field, tmp_path, completed_run, answering_stub, demo_tasks, capsys
):
    output = copy_run(completed_run, tmp_path / "run")
    task = tampered_task(demo_tasks)
    edit_json(response_path(output, task.row_id), lambda row: row.pop(field))
    assert grade_cli(copy_run(output, tmp_path / "copy")) == 2  # grading refuses the row ...
    capsys.readouterr()
    assert run_qa_cli(output) == 0  # ... so resume asks it again and says why
    captured = capsys.readouterr()
    assert "answer rows: 89 reused, 1 called, 0 failed" in captured.out
    assert f"grade-qa would refuse: {task.row_id} (no field {field})" in captured.err
    assert grade_cli(output) == 0


# --------------------------------------------------------------------------- item 8


MARKER_EDITS = {
    "qa.model": lambda marker: marker["qa"].update(model="someone-elses-model"),
    "qa.capacity": lambda marker: marker["qa"].update(capacity=5),
    "protocol_id": lambda marker: marker.update(protocol_id="another-protocol"),
    "dataset.revision": lambda marker: marker["dataset"].update(revision="0" * 40),
    "qa.temperature": lambda marker: marker["qa"].update(temperature=0.7),
}


@pytest.mark.parametrize("field", sorted(MARKER_EDITS))
@pytest.mark.parametrize("command", ["grade-qa", "run-qa"])
def test_an_edited_marker_field_is_refused(field, command, tmp_path, completed_run, answering_stub, capsys):
    output = copy_run(completed_run, tmp_path / "run")
    edit_json(output / MARKER_FILE, MARKER_EDITS[field])
    before = len(answering_stub.requests)
    code = grade_cli(output) if command == "grade-qa" else run_qa_cli(output)
    err = capsys.readouterr().err
    assert code == 2
    assert f"{field} (recorded" in err and "the protocol gives" in err
    assert len(answering_stub.requests) == before
    assert not (output / "qa.rows.jsonl").exists()


# --------------------------------------------------------------------------- item 16: row ids


def test_no_marker_is_written_when_a_row_id_cannot_name_a_file(tmp_path, answering_stub, capsys):
    manifest = tmp_path / "synthetic.json"
    text = DEFAULT_SYNTHETIC_MANIFEST.read_text(encoding="utf-8")
    manifest.write_text(text.replace('"case_id": "', '"case_id": "../', 1))
    before = len(answering_stub.requests)
    code = run_qa_cli(tmp_path / "run", "--synthetic-manifest", str(manifest))
    assert code == 2
    assert "cannot name a response file" in capsys.readouterr().err
    assert not (tmp_path / "run" / MARKER_FILE).exists()
    assert len(answering_stub.requests) == before


# --------------------------------------------------------------------------- item 16: signals


WAIT_SECONDS = 300  # a bound, not a measurement: a loaded 2-core machine starts a run slowly


def evictlab(*argv: str, **options) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "evictlab", *argv], **options)


def wait_while_running(condition, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert process.poll() is None, f"run-qa ended (exit {process.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within {WAIT_SECONDS} s"
        time.sleep(0.05)


def test_a_second_ctrl_c_aborts_the_calls_in_flight(tmp_path):
    err = tmp_path / "stderr.txt"
    with OpenAIStub(fallback=stalled_reply(60)) as stub:
        env = {**os.environ, KEY_ENV: API_KEY, URL_ENV: stub.base_url}
        with open(err, "wb") as sink:
            process = evictlab("run-qa", "--output-dir", str(tmp_path / "run"),
                               stdout=subprocess.DEVNULL, stderr=sink, env=env)
        try:
            wait_while_running(lambda: len(stub.requests) >= 3, process, "three calls in flight")
            assert len(stub.requests) == 3  # the three workers' calls are in flight
            process.send_signal(signal.SIGINT)
            # The first Ctrl-C waits for them (they stall for 60 s): the run says so and goes on.
            wait_while_running(lambda: "press Ctrl-C again to abort them" in err.read_text(), process,
                               "'press Ctrl-C again' message")
            with pytest.raises(subprocess.TimeoutExpired):
                process.wait(timeout=1)
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=10) == 130  # the second aborts them at once
        finally:
            process.kill()
            process.wait()
        assert len(stub.requests) == 3
    text = err.read_text()
    assert "aborting 3 call(s) in flight" in text and "Traceback" not in text
    assert list((tmp_path / "run" / "responses").glob("*.json")) == []


# --------------------------------------------------------------------------- item 16: pipes


@pytest.mark.parametrize(
    "argv",
    [["validate-contracts"], ["validate"]],
    ids=["validate-contracts", "validate"],
)
def test_a_closed_pipe_ends_quietly(argv):
    process = evictlab(*argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # the reader is gone before the first line, as with "| head -0"
    _, err = process.communicate(timeout=60)
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()
    # Quiet, as if killed by SIGPIPE; 0 when all the output fitted in the pipe's buffer.
    assert process.returncode in (0, 128 + signal.SIGPIPE)


# --------------------------------------------------------------------------- item 9: huge rows


def test_a_2_gb_response_file_is_asked_again_not_read(tmp_path, completed_run, answering_stub, demo_tasks, capsys):
    task = tampered_task(demo_tasks)
    runs = [copy_run(completed_run, tmp_path / name) for name in ("grade", "run")]
    for output in runs:
        with open(response_path(output, task.row_id), "r+b") as handle:
            handle.truncate(2 << 30)  # sparse: 2 GiB to a reader, no disk space
    assert grade_cli(runs[0]) == 2
    assert f"{task.row_id} (not a completed response row)" in capsys.readouterr().err
    assert run_qa_cli(runs[1]) == 0
    captured = capsys.readouterr()
    assert f"{task.row_id} (not a completed response row)" in captured.err
    assert "answer rows: 89 reused, 1 called, 0 failed" in captured.out
    assert response_path(runs[1], task.row_id).stat().st_size < 10_000
