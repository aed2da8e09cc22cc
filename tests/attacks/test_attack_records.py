"""Attacks on run records and folder locks (issue 26, "Records and locks").

A record replaced by a huge file or by a link to an endless device, a lock file that is a
dangling symbolic link, two ``qa stats`` into one folder, ``qa stats`` killed between its two
files, a record of another kind under a report's name, and a forged record that names a file
the user put in the folder with its correct hash. Every run is real (the command line, real
files, a real second lock holder, a real SIGKILL).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evictlab import locks, results
from evictlab.workbench import report_folder

ROOT = Path(__file__).resolve().parents[2]
V3 = ROOT / "data" / "reference" / "deerflow-pr4810" / "v3"
PROTOCOL_ID = "deermem-hybrid-v1-pr4789-reproduction-v1"
STATS = ["qa", "stats", "--rows", str(V3 / "qa.rows.jsonl"), "--protocol-id", PROTOCOL_ID]
DEADLINE = 120  # seconds: a bound on a command that must end at once, not a measurement


def evictlab(*argv: str, timeout: float = DEADLINE) -> subprocess.CompletedProcess:
    """``python -m evictlab ARGV``; a run that never ends fails the test instead of hanging it."""
    try:
        done = subprocess.run([sys.executable, "-m", "evictlab", *argv], capture_output=True, text=True,
                              timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"evictlab {' '.join(argv)} did not end within {timeout} s")
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.mark.parametrize("replacement", ["huge file", "endless device"])
def test_a_record_replaced_by_a_huge_file_or_an_endless_device_is_refused_by_its_size(tmp_path, replacement):
    folder = tmp_path / "out"
    folder.mkdir()
    record = results.record_path(folder, "run-policy")
    if replacement == "huge file":
        with open(record, "wb") as handle:
            handle.truncate(3 << 30)  # 3 GiB, sparse: costs no disk
    else:
        record.symlink_to("/dev/zero")
    # A bound on the address space: reading the whole record would fail with a MemoryError.
    done = subprocess.run(
        ["bash", "-c", f"ulimit -v {3 << 20}; exec {sys.executable} -m evictlab run-policy --output-dir {folder}"],
        capture_output=True, text=True, timeout=DEADLINE,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert f"{record}: run record is" in done.stderr and "over evictlab's limit" in done.stderr
    frame = results.load_runs(tmp_path)
    assert frame["error"].iloc[0].startswith("unreadable run record") and frame["status"].isna().all()


def test_a_lock_file_that_is_a_dangling_symlink_is_refused_at_once(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / locks.LOCK_FILE).symlink_to(tmp_path / "nowhere")
    done = evictlab("run-policy", "--output-dir", str(folder))
    assert done.returncode == 2
    assert f"{folder / locks.LOCK_FILE}: cannot use it as this folder's lock file" in done.stderr
    assert not (tmp_path / "nowhere").exists() and sorted(p.name for p in folder.iterdir()) == [locks.LOCK_FILE]


def test_a_second_qa_stats_into_a_held_folder_is_refused(tmp_path):
    folder = tmp_path / "stats"
    holder = locks.FolderLock(folder, "qa-stats")  # a real flock, held by this process
    holder.acquire()
    try:
        done = evictlab(*STATS, "--output-dir", str(folder))
    finally:
        holder.release()
    assert done.returncode == 2
    assert f"{folder} is in use by" in done.stderr and "refusing to start a second run into it" in done.stderr
    assert sorted(p.name for p in folder.iterdir()) == []


# Runs evictlab's command line, killing itself (SIGKILL, no cleanup) right after one file lands.
KILLED_AFTER = """
import os, signal, sys
from evictlab import cli, results
name = sys.argv.pop(1)
write = results.atomic_write_bytes
def write_then_die(path, data):
    written = write(path, data)
    if os.path.basename(path) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    return written
results.atomic_write_bytes = write_then_die
sys.exit(cli.main(sys.argv[1:]))
"""


def test_qa_stats_killed_between_its_two_files_is_redone_by_the_same_command(tmp_path):
    folder = tmp_path / "stats"
    killed = subprocess.run([sys.executable, "-c", KILLED_AFTER, "qa.summary.json", *STATS, "--output-dir",
                             str(folder)], capture_output=True, text=True, timeout=DEADLINE)  # fmt: skip
    assert killed.returncode == -9 and (folder / "qa.summary.json").exists() and not (folder / "qa.stats.json").exists()
    done = evictlab(*STATS, "--output-dir", str(folder))
    assert done.returncode == 0, done.stderr
    for name in ("qa.summary.json", "qa.stats.json"):
        assert (folder / name).read_bytes() == (V3 / name).read_bytes(), name  # as a clean run writes them
    record = json.loads(results.record_path(folder, "qa-stats").read_text())
    assert record["status"] == "success" and "ended without releasing it" in record["notes"][0]
    assert evictlab(*STATS, "--output-dir", str(folder)).returncode == 2  # finished: refused from now on


def test_rows_refused_by_the_statistics_leave_no_folder(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_bytes(b"".join((V3 / "qa.rows.jsonl").read_bytes().splitlines(keepends=True)[1:]))  # one unpaired
    done = evictlab("qa", "stats", "--rows", str(rows), "--protocol-id", "p", "--output-dir", str(tmp_path / "out"))
    assert done.returncode == 2 and f"{rows}: " in done.stderr
    assert not (tmp_path / "out").exists()


def forged_report_record(folder: Path, kind: str, outputs: dict) -> None:
    record = results.RunRecord(kind=kind, status="success", started_at="2026-12-01T00:00:00Z", pid=1,
                               provenance={}, outputs=outputs)  # fmt: skip
    results.write_json(results.record_path(folder, "report"), record.as_dict())


def test_a_report_refuses_a_record_of_another_kind_under_its_name(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    forged_report_record(folder, "run-policy", {})
    done = evictlab("report", "--smoke", "--notebooks", "01", "--no-progress", "--output-dir", str(folder))
    assert done.returncode == 2
    assert "a record of kind 'run-policy' under the name of a report record" in done.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["report.run.json"]


def test_a_forged_record_with_the_right_hash_cannot_make_a_report_delete_a_users_file(tmp_path):
    folder = tmp_path / "out"
    (folder / "figures").mkdir(parents=True)
    photo = folder / "figures" / "holiday.png"
    photo.write_bytes(b"a user's photo")
    digest = {"bytes": photo.stat().st_size, "sha256": hashlib.sha256(photo.read_bytes()).hexdigest()}
    forged_report_record(folder, "report", {"figures/holiday.png": digest})
    report_folder.check_folder(folder)  # a report folder, as far as its record says
    with results.run(folder, "report", existing="replace") as run:
        report_folder.remove_previous_report(run)
    assert photo.read_bytes() == b"a user's photo"
    # What a report run wrote itself is still replaced by the next one.
    with results.run(folder, "report", existing="replace") as run:
        run.write_bytes("figures/chart.png", b"drawn")
    with results.run(folder, "report", existing="replace") as run:
        report_folder.remove_previous_report(run)
    assert not (folder / "figures" / "chart.png").exists() and photo.exists()
    assert os.listdir(folder / "figures") == ["holiday.png"]


def test_a_diff_of_two_configs_it_cannot_compare_leaves_no_folder(tmp_path):
    """Bad input found once the folder is locked (two configs with different capacities) is
    refused before the record: no folder holding only an error record (a regression)."""
    protocol = tmp_path / "protocol"
    shutil.copytree(ROOT / "data" / "protocol", protocol)
    config = protocol / "configs" / "pr4789-reproduction-v1.yaml"
    config.write_text(config.read_text().replace("capacities: [5, 7, 9]", "capacities: [5, 7]"))
    folder = tmp_path / "out"
    to = f"pr4810-final:config={config}"
    done = evictlab("diff", "--from", "pr4810-final", "--to", to, "--output-dir", str(folder))
    assert done.returncode == 2 and "the two configs evaluate different capacities" in done.stderr
    assert not folder.exists()
