"""Attacks on output paths: a file where a folder goes, a name too long, a read-only disk and
a full one. Every case is one clean error line and a non-zero exit; nothing stored is lost.

Issue 16 item 7. The read-only and full disks are real: small tmpfs file systems mounted for
the test (this needs root, as on the project's machines and CI; elsewhere these tests skip).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from openai_stub import OpenAIStub
from processes import RUNNING, check_record, finish, start, wait_until_paused
from qa_harness import API_KEY, KEY_ENV, URL_ENV, Responder, grade_cli, run_qa_cli

from evictlab.analysis.qa.runner import RESERVE_FILE, RESPONSE_FIELDS, RESPONSES_DIR, SPACE_RESERVE_BYTES
from evictlab.cli import main
from evictlab.results import RECORD_RESERVE_BYTES, record_path

OUTPUT_COMMANDS = {
    "run-policy": ["run-policy"],
    "sweep": ["sweep", "--capacities", "5", "--weights-step", "0.5"],
    "diff": ["diff", "--from", "pr4810-run1", "--to", "pr4810-final"],
}


@pytest.fixture
def tmpfs(tmp_path):
    """``tmpfs(size)``: a fresh tmpfs of ``size`` (e.g. "64k") mounted under tmp_path."""
    mounted = []

    def mount(size: str, *options: str) -> Path:
        point = tmp_path / f"disk{len(mounted)}"
        point.mkdir()
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *options]), "tmpfs", str(point)],
            capture_output=True,
        )
        if result.returncode != 0:
            pytest.skip("cannot mount a tmpfs here (needs root)")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], check=False)


def remount(point: Path, *options: str) -> None:
    subprocess.run(["mount", "-o", ",".join(["remount", *options]), str(point)], check=True)


@pytest.mark.parametrize("command", sorted(OUTPUT_COMMANDS))
def test_an_output_folder_that_is_a_file(command, tmp_path, cli_error):
    target = tmp_path / "taken"
    target.write_text("mine\n")
    code, line = cli_error(*OUTPUT_COMMANDS[command], "--output-dir", str(target))
    assert code == 2
    assert f"{target}: exists and is not a folder" in line
    assert target.read_text() == "mine\n"


def test_an_output_name_too_long(tmp_path, cli_error):
    code, line = cli_error("run-policy", "--output-dir", str(tmp_path / ("x" * 300)))
    assert code == 2
    assert line.endswith("File name too long")


@pytest.mark.parametrize("command", sorted(OUTPUT_COMMANDS))
def test_a_read_only_disk(command, tmpfs, cli_error):
    disk = tmpfs("1m", "ro")
    code, line = cli_error(*OUTPUT_COMMANDS[command], "--output-dir", str(disk / "out"))
    assert code == 2
    assert line.endswith("Read-only file system")


@pytest.mark.parametrize("command", sorted(OUTPUT_COMMANDS))
def test_a_full_disk(command, tmpfs, cli_error):
    disk = tmpfs("8k")
    code, line = cli_error(*OUTPUT_COMMANDS[command], "--output-dir", str(disk / "out"))
    assert code == 2
    assert "No space left on device" in line


def stored_rows(folder: Path) -> dict[str, dict]:
    """Every response file, each of which must be a complete row."""
    rows = {}
    for path in (folder / RESPONSES_DIR).glob("*.json"):
        row = json.loads(path.read_text(encoding="utf-8"))
        assert set(row) == set(RESPONSE_FIELDS), path
        rows[path.name] = row
    return rows


def test_run_qa_stops_on_a_full_disk_keeping_every_answer_it_paid_for(tmpfs, demo_tasks, credentials, capsys):
    # The space held back for the answers and for the record, the marker, a dozen rows.
    disk = tmpfs(f"{(SPACE_RESERVE_BYTES + RECORD_RESERVE_BYTES) // 1024 + 64}k")
    with OpenAIStub(fallback=Responder(demo_tasks)) as stub:
        credentials(stub)
        assert run_qa_cli(disk / "run") == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert "No space left on device" in err and "run the same command again to resume" in err
        kept = stored_rows(disk / "run")
        assert 0 < len(kept) < 90
        assert len(kept) == len(stub.requests)  # every answer received was stored
        assert not (disk / "run" / RESPONSES_DIR / RESERVE_FILE).exists()
        remount(disk, "size=2m")
        assert run_qa_cli(disk / "run") == 0
    assert f"answer rows: {len(kept)} reused, {90 - len(kept)} called, 0 failed" in capsys.readouterr().out
    after = stored_rows(disk / "run")
    assert all(after[name] == row for name, row in kept.items())
    assert grade_cli(disk / "run") == 0


def test_killing_run_qa_on_a_full_disk_loses_no_received_answer(tmpfs, demo_tasks):
    disk = tmpfs("1m")
    release = threading.Event()
    responder = Responder(demo_tasks)
    counting = threading.Lock()
    calls = 0

    def answer(body):  # the first six at once, the next calls once the disk is full
        nonlocal calls
        with counting:  # the stub's handler threads run this side by side
            calls += 1
            number = calls
        if number > 6:
            release.wait(60)
        return responder(body)

    with OpenAIStub(fallback=answer) as stub:
        env = {**os.environ, KEY_ENV: API_KEY, URL_ENV: stub.base_url}
        process = subprocess.Popen(
            [sys.executable, "-m", "evictlab", "run-qa", "--output-dir", str(disk / "run"), "--retry-delay", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        try:
            wait_for(lambda: len(stub.requests) == 9 and len(stored_rows(disk / "run")) == 6)
            fill(disk / "filler")  # the disk is full while three answers are on their way
            release.set()
            wait_for(lambda: len(stored_rows(disk / "run")) == 9 or process.poll() is not None)
            process.send_signal(signal.SIGKILL)
        finally:
            release.set()
            process.kill()
            _, err = process.communicate()
        assert b"Traceback" not in err
        kept = stored_rows(disk / "run")  # every file is a whole row: none torn by the kill
        assert len(kept) == len(stub.requests) == 9  # and every answer received is among them
        (disk / "filler").unlink()
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(KEY_ENV, API_KEY)
            patch.setenv(URL_ENV, stub.base_url)
            assert run_qa_cli(disk / "run") == 0
    assert all(stored_rows(disk / "run")[name] == row for name, row in kept.items())


def wait_for(condition, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def fill(path: Path) -> None:
    with open(path, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(bytes(4096))
        except OSError:
            pass
    assert os.statvfs(path.parent).f_bavail == 0


# --------------------------------------------------------------------------- issue 26: full disks mid-run


def full_disk_attack(disk: Path, argv: list[str], folder: Path, kind: str, env: dict | None = None) -> dict:
    """Fill ``disk`` while ``argv --output-dir folder`` runs, then give the space back and run it again.

    The run is caught just after its ``running`` record (:mod:`processes`) and the disk filled to
    the last block, so whatever it writes next meets a full disk. The promises of issue 26: one
    error line naming the path it could not write, a record ``error`` (never ``running``), and the
    same command resuming once there is space, to a finished record whose outputs are all there.
    Returns the first run's record, for the caller's own checks (rows kept).
    """
    command = [*argv, "--output-dir", str(folder)]
    process = start(*command, env=env, pause_at=RUNNING)
    try:
        wait_until_paused(process)
        fill(disk / "filler")
    finally:
        process.send_signal(signal.SIGCONT)
        code, err = finish(process)
    errors = [line for line in err.splitlines() if "error:" in line]
    assert code == 2 and len(errors) == 1, err
    assert "No space left on device" in errors[0] and f"{disk}/" in errors[0], errors[0]
    record = json.loads(record_path(folder, kind).read_text())
    assert record["status"] == "error" and "No space left on device" in record["error"], record
    (disk / "filler").unlink()
    second = start(*command, env=env)
    code, err = finish(second)
    assert code == 0, err
    check_record(folder, kind, second.pid)
    assert not list(folder.glob(".*")), list(folder.glob(".*"))  # no reserve, no temporary file left
    return record


TRACE_COMMANDS = {  # ten-day workloads: what is written, not how much, meets the full disk
    "trace-replay": ["trace", "replay", "--seeds", "2", "--policies", "confidence,fifo", "--capacities", "5,9",
                     "--horizon-days", "10"],
    "trace-study": ["trace", "study", "--seeds", "1", "--grid", "search_rate=5,20", "--workers", "0", "--no-progress",
                    "--horizon-days", "10", "--policies", "confidence,fifo", "--capacities", "10,50"],
}


@pytest.mark.parametrize("kind", sorted(TRACE_COMMANDS))
def test_a_trace_run_on_a_disk_that_fills_up_ends_error_and_resumes(kind, tmpfs, tmp_path):
    disk = tmpfs("4m")
    full_disk_attack(disk, TRACE_COMMANDS[kind], disk / "out", kind)
    clean = tmp_path / "clean"
    assert main([*TRACE_COMMANDS[kind], "--output-dir", str(clean)]) == 0
    outputs = json.loads(record_path(disk / "out", kind).read_text())["outputs"]
    assert outputs == json.loads(record_path(clean, kind).read_text())["outputs"]  # as a clean run's, byte for byte


def test_a_record_is_never_left_running_when_another_process_fills_the_disk(tmpfs):
    """The record's own room is held back while the run is open: the final record is written
    even when not a byte is left (here the run's outputs fit; only its record would not)."""
    disk = tmpfs("4m")
    command = ["trace", "replay", "--seeds", "1", "--policies", "confidence", "--capacities", "5"]
    process = start(*command, "--output-dir", str(disk / "out"), pause_at=RUNNING)
    try:
        wait_until_paused(process)
        fill(disk / "filler")
    finally:
        process.send_signal(signal.SIGCONT)
        code, _ = finish(process)
    assert code == 2
    assert json.loads(record_path(disk / "out", "trace-replay").read_text())["status"] == "error"


def test_view_on_a_full_disk_names_the_page_and_keeps_the_earlier_one(tmpfs, tmp_path, cli_error):
    run_dir = tmp_path / "run"
    assert main(["trace", "replay", "--seeds", "1", "--policies", "confidence", "--capacities", "5",
                 "--output-dir", str(run_dir)]) == 0
    disk = tmpfs("1m")
    page = disk / "view.html"
    assert main(["view", str(run_dir), "--output", str(page)]) == 0
    earlier = page.read_bytes()
    fill(disk / "filler")
    code, line = cli_error("view", str(run_dir), "--output", str(page))
    assert code == 2 and line.endswith(f"{page}: No space left on device")
    assert page.read_bytes() == earlier and sorted(disk.iterdir()) == [disk / "filler", page]
    (disk / "filler").unlink()
    assert main(["view", str(run_dir), "--output", str(page)]) == 0


def test_trace_generate_on_a_full_disk_names_the_file_and_writes_nothing(tmpfs, cli_error):
    disk = tmpfs("1m")
    fill(disk / "filler")
    code, line = cli_error("trace", "generate", "--output", str(disk / "trace.parquet"))
    assert code == 2 and line.endswith(f"{disk / 'trace.parquet'}: No space left on device")
    assert sorted(disk.iterdir()) == [disk / "filler"]
    (disk / "filler").unlink()
    assert main(["trace", "generate", "--output", str(disk / "trace.parquet")]) == 0
