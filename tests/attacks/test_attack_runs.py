"""Attacks on run folders: two runs into one folder, signals mid-run, degenerate lists.

Issue 16 items 1, 10, 11 and 15. Every run is a real ``python -m evictlab`` process and every
signal a real one; :mod:`processes` catches a run just after it took its folder's lock or
wrote its ``running`` record.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from openai_stub import OpenAIStub
from processes import LOCKED, RUNNING, check_record, finish, start, wait_until_paused
from qa_harness import API_KEY, KEY_ENV, URL_ENV, Responder

from evictlab import results

COMMANDS = {
    "run-policy": ["run-policy"],
    "sweep": ["sweep", "--capacities", "5,7", "--weights-step", "0.1", "--no-progress"],
    "diff": ["diff", "--from", "pr4810-run1", "--to", "pr4810-run2"],
    "report": ["report", "--smoke", "--notebooks", "05", "--no-progress"],  # the quickest notebook
}


def second_run_is_refused(first: subprocess.Popen, argv: list[str], folder: Path, env: dict | None = None) -> None:
    """With ``first`` stopped inside its run, the same command into the same folder is refused at once."""
    code, err = finish(start(*argv, env=env))
    assert code == 2
    assert f"{folder} is in use by" in err and f"(pid {first.pid}, started 20" in err, err
    assert "refusing to start a second run into it" in err


def refuse_while_running(argv: list[str], folder: Path, pause_at: str, seconds: list[list[str]], env=None) -> int:
    """Start ``argv``; paused at ``pause_at``, each of ``seconds`` is refused; the first then succeeds. Its pid."""
    first = start(*argv, env=env, pause_at=pause_at)
    try:
        wait_until_paused(first)
        for second in seconds:
            second_run_is_refused(first, second, folder, env)
    finally:
        first.send_signal(signal.SIGCONT)
        code, err = finish(first)
    assert code == 0, err
    return first.pid


@pytest.mark.parametrize(
    "command",
    ["run-policy", pytest.param("sweep", marks=pytest.mark.slow), pytest.param("diff", marks=pytest.mark.slow),
     pytest.param("report", marks=pytest.mark.slow)],
)  # fmt: skip
def test_a_second_run_into_a_busy_folder_is_refused_and_the_first_finishes_untouched(command, tmp_path):
    folder = tmp_path / "out"
    argv = [*COMMANDS[command], "--output-dir", str(folder)]
    pid = refuse_while_running(argv, folder, LOCKED, [argv])
    check_record(folder, command, pid)


@pytest.mark.slow
def test_run_qa_and_grade_qa_refuse_a_busy_folder(tmp_path, demo_tasks):
    folder = tmp_path / "qa"
    with OpenAIStub(fallback=Responder(demo_tasks)) as stub:
        env = {**os.environ, KEY_ENV: API_KEY, URL_ENV: stub.base_url}
        run_qa = ["run-qa", "--output-dir", str(folder), "--retry-delay", "0"]
        grade = ["grade-qa", "--output-dir", str(folder)]
        pid = refuse_while_running(run_qa, folder, RUNNING, [run_qa, grade], env)
        assert len(stub.requests) == 90  # the refused second run-qa made no call
    check_record(folder, "run-qa", pid)
    check_record(folder, "grade-qa", refuse_while_running(grade, folder, LOCKED, [grade]))


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_run_leaves_an_interrupted_folder_that_a_rerun_completes(signum, tmp_path):
    folder = tmp_path / "out"
    argv = ["sweep", "--capacities", "5,7", "--weights-step", "0.1", "--no-progress", "--output-dir", str(folder)]
    first = start(*argv, pause_at=RUNNING)
    try:
        wait_until_paused(first)
        first.send_signal(signum)  # pending until the run continues, right after its record
    finally:
        first.send_signal(signal.SIGCONT)
        code, err = finish(first)
    assert code == 130 and "interrupted" in err
    record = json.loads(results.record_path(folder, "sweep").read_text())
    assert record["status"] == "interrupted", record
    assert record["error"] == ("terminated (SIGTERM)" if signum == signal.SIGTERM else "interrupted (Ctrl-C)")
    assert not (folder / results.LOCK_FILE).exists()
    (folder / ".rows.parquet.k3j9x_2a.tmp").write_bytes(b"torn")  # as a kill -9 mid-write leaves

    second = start(*argv)
    code, err = finish(second)
    assert code == 0, err
    assert "ended interrupted; resuming in place" in err
    check_record(folder, "sweep", second.pid)


@pytest.mark.slow
def test_a_killed_run_leaves_a_stale_lock_that_is_reported_never_silently_broken(tmp_path):
    folder = tmp_path / "out"
    argv = ["run-policy", "--output-dir", str(folder)]
    first = start(*argv, pause_at=RUNNING)
    try:
        wait_until_paused(first)
        first.send_signal(signal.SIGKILL)
    finally:
        finish(first)
    assert (folder / results.LOCK_FILE).exists()  # left by the killed process, lock released by the kernel
    second = start(*argv)
    code, err = finish(second)
    assert code == 0, err
    assert f"warning: stale lock {folder / results.LOCK_FILE}: left by evictlab run-policy (pid {first.pid}" in err
    record = check_record(folder, "run-policy", second.pid)
    assert "its run is marked interrupted" in record["notes"][0]


@pytest.mark.parametrize(
    "option, message",
    [(["--policies", ""], "empty grid: no policies"), (["--capacities", "5,5"], "capacities: 5 listed more than once")],
)
def test_degenerate_policy_and_capacity_lists_are_refused_before_any_file(option, message, tmp_path):
    folder = tmp_path / "out"
    code, err = finish(start("run-policy", *option, "--output-dir", str(folder)))
    assert code == 2
    assert err.strip().splitlines()[-1] == f"evictlab run-policy: error: {message}"
    assert not folder.exists()


def test_report_never_writes_outside_its_results_folder(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "evictlab", "report", "--name", "../x", "--no-progress"],
        cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    code, err = finish(process)
    assert code == 2 and "--name '../x': expected a plain folder name" in err
    assert not any(work.iterdir()) and not (tmp_path / "x").exists()


@pytest.mark.slow
def test_report_with_a_forged_legacy_manifest_deletes_nothing(tmp_path):
    folder = tmp_path / "out"
    (folder / "figures").mkdir(parents=True)
    (folder / "figures" / "holiday.png").write_bytes(b"a user's photo")
    (folder / "thesis.md").write_text("precious\n")
    (folder / "report.json").write_text(json.dumps({"kind": "evictlab-report", "files": ["thesis.md"]}))
    code, err = finish(start(*COMMANDS["report"], "--output-dir", str(folder)))
    assert code == 0, err
    assert (folder / "figures" / "holiday.png").read_bytes() == b"a user's photo"
    assert (folder / "thesis.md").read_text() == "precious\n"
    shutil.rmtree(folder)
