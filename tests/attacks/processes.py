"""Real ``python -m evictlab`` processes for the attack tests, caught at a fixed point of their run.

To catch a run while it holds its folder, it is started through :data:`PAUSING`, which makes
the process stop itself (SIGSTOP) at a fixed point: just after it took the folder's lock, or
just after it wrote its ``running`` record. The test waits for that stop (``waitpid`` with
``WUNTRACED``), so whatever it does next (a second run, a signal, filling the disk) meets that
state however slow or fast the machine is; SIGCONT lets the run go on. Nothing of the run is
replaced: the pause is added after the real step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evictlab import results

DEADLINE_SECONDS = 300  # a bound, not a measurement: a loaded 2-core machine runs a report slowly


# Runs evictlab's command line with a self-stop added after one real step of the run.
PAUSING = """
import os, signal, sys
from evictlab import cli, locks, results

point = sys.argv.pop(1)

def pause():
    os.kill(os.getpid(), signal.SIGSTOP)

if point == "locked":
    acquire = locks.FolderLock.acquire

    def acquire_then_pause(self):
        stale = acquire(self)
        pause()
        return stale

    locks.FolderLock.acquire = acquire_then_pause
else:
    save, paused = results.Run.save, []

    def save_then_pause(self):
        save(self)
        if self.record.status == results.RUNNING and not paused:
            paused.append(True)
            pause()

    results.Run.save = save_then_pause
sys.exit(cli.main(sys.argv[1:]))
"""
LOCKED, RUNNING = "locked", "running"


def start(*argv: str, env: dict | None = None, pause_at: str | None = None) -> subprocess.Popen:
    """``python -m evictlab ARGV``; with ``pause_at`` (LOCKED or RUNNING) it stops itself there."""
    launcher = ["-c", PAUSING, pause_at] if pause_at else ["-m", "evictlab"]
    return subprocess.Popen(
        [sys.executable, *launcher, *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def finish(process: subprocess.Popen) -> tuple[int, str]:
    _, err = process.communicate(timeout=DEADLINE_SECONDS)
    assert "Traceback" not in err, err
    return process.returncode, err


def wait_until_paused(process: subprocess.Popen) -> None:
    """Wait (bounded) until ``process`` has stopped itself; fail with its output if it ended instead."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        pid, status = os.waitpid(process.pid, os.WUNTRACED | os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the run never reached its pause: {process.communicate()}")
        time.sleep(0.005)
    if not os.WIFSTOPPED(status):
        process.returncode = os.waitstatus_to_exitcode(status)
        pytest.fail(f"the run ended (exit {process.returncode}) before its pause: {process.communicate()}")


def check_record(folder: Path, kind: str, pid: int) -> dict:
    """The finished record of ``pid``'s run, every listed output unchanged since it was written."""
    record = json.loads(results.record_path(folder, kind).read_text())
    assert (record["status"], record["pid"]) == ("success", pid), record
    for name, written in record["outputs"].items():
        assert results.file_digest(folder / name) == written, name
    assert not (folder / results.LOCK_FILE).exists()
    assert not list(folder.rglob(".*.tmp"))
    return record
