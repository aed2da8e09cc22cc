"""results.run: one lock, one record, one overwrite rule for every run folder; load_runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from evictlab import locks, results
from evictlab.errors import ContractError, OutputExistsError
from evictlab.workbench import report_folder
from evictlab.writers import TEMP_FILE


def record(folder, kind="demo"):
    return json.loads(results.record_path(folder, kind).read_text())


def test_a_run_records_status_timings_outputs_and_releases_its_lock(tmp_path):
    with results.run(tmp_path / "out", "demo", {"label": "x"}, parameters={"k": (5, 7)}, outputs=("a.json",)) as run:
        assert (tmp_path / "out" / results.LOCK_FILE).exists()
        assert record(tmp_path / "out")["status"] == "running"
        run.write_json("a.json", {"b": 1})
        run.record.dataset = {"sha256": "0" * 64}
    data = record(tmp_path / "out")
    assert data["status"] == "success" and data["error"] is None and data["schema"] == "evictlab-run"
    assert data["parameters"] == {"k": [5, 7]} and data["spec"] == {"label": "x"}
    assert data["outputs"]["a.json"] == results.file_digest(tmp_path / "out" / "a.json")
    assert data["started_at"] <= data["finished_at"] and data["pid"] == os.getpid()
    assert not (tmp_path / "out" / results.LOCK_FILE).exists()


def test_errors_and_interruptions_are_recorded_and_propagate(tmp_path):
    with pytest.raises(ValueError), results.run(tmp_path / "e", "demo"):
        raise ValueError("boom")
    assert record(tmp_path / "e")["status"] == "error" and record(tmp_path / "e")["error"] == "ValueError: boom"
    with pytest.raises(KeyboardInterrupt), results.run(tmp_path / "i", "demo"):
        raise KeyboardInterrupt
    assert record(tmp_path / "i")["status"] == "interrupted"
    with results.run(tmp_path / "f", "demo") as run:
        run.fail("2 rows failed")
    assert (record(tmp_path / "f")["status"], record(tmp_path / "f")["error"]) == ("error", "2 rows failed")


def test_a_signal_right_after_the_running_record_is_written_ends_it_interrupted(tmp_path, monkeypatch):
    # A preempted process runs a pending signal's handler at its next bytecode: here a real
    # SIGINT arrives the moment the "running" record is on disk, before the work starts.
    first_save = results.Run.save

    def save_then_signal(self):
        first_save(self)
        if self.record.status == "running":
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(results.Run, "save", save_then_signal)
    with pytest.raises(KeyboardInterrupt), results.run(tmp_path / "out", "demo"):
        pytest.fail("the run body must not start")
    data = record(tmp_path / "out")
    assert (data["status"], data["error"]) == ("interrupted", "interrupted (Ctrl-C)") and data["finished_at"]
    assert not (tmp_path / "out" / results.LOCK_FILE).exists()


def test_the_existing_rules(tmp_path):
    with results.run(tmp_path, "demo", outputs=("a",)) as run:
        run.write_bytes("a", b"1")
    with pytest.raises(OutputExistsError, match="finished demo run"), results.run(tmp_path, "demo", outputs=("a",)):
        pass
    with results.run(tmp_path, "demo", existing="resume") as run:  # a resumable kind continues
        assert run.previous.status == "success"
    with results.run(tmp_path, "demo", existing="replace") as run:
        assert run.previous.outputs == {}
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "a").write_text("user data")
    with (
        pytest.raises(OutputExistsError, match=r"no demo\.run\.json says they belong"),
        results.run(tmp_path / "other", "demo", outputs=("a",)),
    ):
        pass
    assert (tmp_path / "other" / "a").read_text() == "user data"


def test_a_forged_or_broken_record_is_refused(tmp_path):
    results.record_path(tmp_path, "demo").write_text('{"schema": "evictlab-run", "schema_version": 1, "status": "ok"}')
    with pytest.raises(ContractError, match="status 'ok' is not one of"), results.run(tmp_path, "demo"):
        pass


def test_stray_temporary_files_of_an_interrupted_write_are_removed(tmp_path):
    stray = tmp_path / ".rows.parquet.ab12cd_9.tmp"
    stray.write_bytes(b"partial")
    keep = tmp_path / "notes.tmp"
    keep.write_text("mine")
    with results.run(tmp_path, "demo"):
        pass
    assert not stray.exists() and keep.exists()


def test_a_folder_that_is_a_file_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputExistsError, match="exists and is not a folder"), results.run(tmp_path / "file", "demo"):
        pass


HOLD = textwrap.dedent(
    """
    import sys, time
    from evictlab import results
    with results.run(sys.argv[1], "demo"):
        print("locked", flush=True)
        time.sleep(30)
    """
)


def test_a_held_folder_is_refused_naming_the_holder_and_a_stale_lock_is_reported(tmp_path, capsys):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with (
            pytest.raises(results.FolderBusyError, match=rf"in use by evictlab demo \(pid {holder.pid}, started "),
            results.run(tmp_path, "other-kind"),
        ):
            pass
    finally:
        holder.kill()  # SIGKILL: no cleanup, the lock file and a "running" record stay
        holder.wait(timeout=10)
    assert record(tmp_path)["status"] == "running"
    with results.run(tmp_path, "demo") as run:
        notes = run.record.notes
    assert f"stale lock {tmp_path / results.LOCK_FILE}: left by evictlab demo (pid {holder.pid}" in notes[0]
    assert "its run is marked interrupted" in notes[0]
    assert "warning: stale lock" in capsys.readouterr().err
    assert record(tmp_path)["status"] == "success"


def test_load_runs_reads_every_record_back(tmp_path):
    for name, fail in (("a", False), ("b", True)):
        with results.run(tmp_path / name, "demo") as run:
            if fail:
                run.fail("no")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "junk.run.json").write_text("{")
    frame = results.load_runs(tmp_path)
    assert list(frame.columns) == list(results.LOAD_RUNS_COLUMNS)
    assert sorted(frame["status"].dropna()) == ["error", "success"]
    assert frame.loc[frame["kind"] == "junk", "error"].str.contains("unreadable run record").all()
    assert isinstance(frame.loc[frame["status"] == "success", "record"].iloc[0], results.RunRecord)


def test_a_live_run_is_never_taken_for_a_dead_one(tmp_path):
    """A second run into a held folder is refused and leaves the holder's record alone: only a
    run that holds the lock itself marks records still "running" interrupted."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        for _ in range(3):
            with pytest.raises(results.FolderBusyError), results.run(tmp_path, "demo"):
                pass
        assert record(tmp_path)["status"] == "running"
    finally:
        holder.kill()
        holder.wait(timeout=10)


# A nested run caught in the middle of an atomic write: its temporary file is on disk, written
# and synced, and the rename waits for a line on standard input.
WRITING = textwrap.dedent(
    """
    import os, sys
    from evictlab import results
    fsync = os.fsync

    def fsync_then_wait(fd):
        fsync(fd)
        print("writing", flush=True)
        sys.stdin.readline()

    with results.run(sys.argv[1], "sweep") as run:
        os.fsync = fsync_then_wait
        run.write_bytes("rows.parquet", b"every row")
        os.fsync = fsync
    """
)


def stray(folder):
    """A temporary file as an interrupted atomic write leaves one in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ".rows.parquet.x7k2p_9q.tmp"
    path.write_bytes(b"torn")
    return path


def test_a_run_leaves_the_temporary_files_of_a_live_nested_run_alone(tmp_path):
    """A run into results/ removes stray temporary files, but not in results/sweep1/, which a
    nested run in another process holds while its write is open: that write still lands."""
    parent, nested = tmp_path / "results", tmp_path / "results" / "sweep1"
    nested.mkdir(parents=True)
    writer = subprocess.Popen([sys.executable, "-c", WRITING, str(nested)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert writer.stdout.readline().strip() == "writing"
        (open_write,) = [path for path in nested.iterdir() if TEMP_FILE.match(path.name)]
        inside, beside, top = stray(nested / "parts"), stray(parent / "sweep2"), stray(parent)
        with results.run(parent, "report"):
            pass
        assert open_write.read_bytes() == b"every row" and inside.exists()
        assert not beside.exists() and not top.exists()
        writer.communicate("\n", timeout=60)
    finally:
        writer.kill()
        writer.wait(timeout=10)
    assert writer.returncode == 0
    assert (nested / "rows.parquet").read_bytes() == b"every row" and not open_write.exists()
    assert record(nested, "sweep")["status"] == "success"


def test_temporary_files_under_a_stale_nested_lock_are_removed_and_the_stale_run_still_reported(tmp_path):
    parent, nested = tmp_path / "results", tmp_path / "results" / "sweep1"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(nested)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
    finally:
        holder.kill()  # SIGKILL: its lock file and its "running" record stay
        holder.wait(timeout=10)
    assert (nested / results.LOCK_FILE).exists()
    strays = [stray(nested), stray(nested / "parts")]
    with results.run(parent, "report"):
        pass
    assert not any(path.exists() for path in strays)
    assert record(nested)["status"] == "running"  # the nested folder's own next run marks it
    with results.run(nested, "demo") as run:
        assert f"left by evictlab demo (pid {holder.pid}" in run.record.notes[0]
    assert record(nested)["status"] == "success"


def test_a_nested_lock_file_that_cannot_be_judged_keeps_its_folder_untouched(tmp_path):
    nested = tmp_path / "results" / "odd"
    kept = stray(nested)
    (nested / results.LOCK_FILE).symlink_to(tmp_path / "nowhere")
    with results.run(tmp_path / "results", "report"):
        pass
    assert kept.exists() and not (tmp_path / "nowhere").exists()


def test_runs_racing_for_one_folder_in_threads_get_one_lock_and_clear_refusals(tmp_path):
    """Runs of one process start at once into one folder: one gets the lock, the others a
    FolderBusyError, never a raw OS error, and no private file of theirs is left behind."""
    outcomes: list[str] = []

    def attempt(folder, start, tried):
        lock = locks.FolderLock(folder, "demo")
        start.wait()
        try:
            lock.acquire()
            outcomes.append("locked")
        except locks.FolderBusyError:
            outcomes.append("busy")
        except Exception as error:  # noqa: BLE001 - recorded, so the assertion names it
            outcomes.append(repr(error))
        tried.wait()  # the lock is held until every thread has tried
        lock.release()

    for trial in range(40):
        folder = tmp_path / str(trial)
        start, tried = threading.Barrier(4), threading.Barrier(4)
        threads = [threading.Thread(target=attempt, args=(folder, start, tried)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(outcomes) == ["busy", "busy", "busy", "locked"], outcomes
        assert list(folder.iterdir()) == []
        outcomes.clear()


@pytest.mark.parametrize("target", ["nowhere", "elsewhere.txt"])
def test_a_lock_file_that_is_a_symbolic_link_is_refused_naming_it(tmp_path, target):
    (tmp_path / "elsewhere.txt").write_text("mine")
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / results.LOCK_FILE).symlink_to(tmp_path / target)
    refused = r"\.evictlab\.lock: cannot use it as this folder's lock file"
    with pytest.raises(OutputExistsError, match=refused), results.run(folder, "demo"):
        pass
    assert (tmp_path / "elsewhere.txt").read_text() == "mine" and not (tmp_path / "nowhere").exists()


def test_a_report_folder_holding_only_lock_files_counts_as_empty(tmp_path):
    (tmp_path / f"{results.LOCK_FILE}.k2j3x9a1").write_bytes(b"")  # left by a run killed while locking
    report_folder.check_folder(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match=r"is not empty and holds no report\.run\.json"):
        report_folder.check_folder(tmp_path)


def test_git_state_names_the_head_and_whether_the_tree_is_dirty(tmp_path):
    def git(*argv):
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.org", *argv],
                       check=True, capture_output=True)  # fmt: skip

    assert results.git_state(tmp_path) == {"head": None, "dirty": None}  # not a repository
    git("init", "-q")
    assert results.git_state(tmp_path) == {"head": None, "dirty": None}  # no commit yet
    (tmp_path / "a.txt").write_text("a\n")
    git("add", "a.txt")
    git("commit", "-qm", "first")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert results.git_state(tmp_path) == {"head": head.strip(), "dirty": False}
    (tmp_path / "b.txt").write_text("untracked\n")
    assert results.git_state(tmp_path)["dirty"] is True
    (tmp_path / "b.txt").unlink()
    (tmp_path / "a.txt").write_text("changed\n")
    assert results.git_state(tmp_path) == {"head": head.strip(), "dirty": True}
