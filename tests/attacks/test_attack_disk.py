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
from qa_harness import API_KEY, KEY_ENV, URL_ENV, Responder, grade_cli, run_qa_cli

from evictlab.analysis.qa.runner import RESERVE_FILE, RESPONSE_FIELDS, RESPONSES_DIR, SPACE_RESERVE_BYTES

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
    disk = tmpfs(f"{SPACE_RESERVE_BYTES // 1024 + 64}k")  # the space held back, the marker, a dozen rows
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
