"""The exclusive lock on an output folder, held for one run (see :func:`evictlab.results.run`).

An OS file lock (``flock``, through the ``filelock`` library) on ``{folder}/.evictlab.lock``:
a second run into the folder is refused at once, naming the holder's pid and start time, which
are asked of the system (``/proc/locks``) rather than of a record the holder may not have
written yet. The kernel releases the lock of a process that dies; the run it belonged to is
known by its record, left ``running`` (:func:`evictlab.results.run` marks it interrupted).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import filelock

from .errors import ContractError, OutputExistsError
from .readers import MAX_RECORD_BYTES, parse_json, read_bounded
from .times import iso_z
from .writers import TEMP_FILE

LOCK_FILE = ".evictlab.lock"
RECORD_SUFFIX = ".run.json"
RUNNING = "running"
_RETRIES = 20  # a lock found busy whose holder is already gone (it was releasing): look again


class FolderBusyError(OutputExistsError):
    """Another run holds the output folder's lock."""


class FolderLock:
    """An exclusive ``flock`` on ``{folder}/.evictlab.lock``, held for one run.

    The lock file is empty (so it costs no space on a full disk) and is removed when the run
    ends, while still held: ``filelock`` opens it without following a symbolic link and, when
    it wins the lock of a file removed in the meantime, takes that for not locked and looks
    again, so two runs never hold the folder at once. A lock file that is a symbolic link
    (or anything evictlab cannot open as a plain file) is refused, naming it.
    """

    def __init__(self, folder: str | os.PathLike, kind: str) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.kind = kind
        self.created = False  # whether acquire made the folder
        self._lock = filelock.FileLock(self.path, timeout=0, thread_local=False, fallback_to_soft=False)

    def acquire(self) -> None:
        """Take the lock or raise :class:`FolderBusyError` naming the holder."""
        self.created = make_folder(self.folder)
        self._take()

    def _take(self) -> None:
        for _ in range(_RETRIES):
            try:
                self._lock.acquire()
                return
            except filelock.Timeout:
                holder = lock_holder(self.path)
            except OSError as error:
                raise OutputExistsError(
                    f"{self.path}: cannot use it as this folder's lock file ({error.strerror or error});"
                    " it is not one evictlab made (a symbolic link?): remove it or choose another output folder"
                ) from None
            if holder is not None:
                holder["kind"] = _running_kind(self.folder, holder["pid"])
                break
        raise FolderBusyError(
            f"{self.folder} is in use by {describe_holder(holder)}; refusing to start a second"
            " run into it (wait for it to finish or choose another output folder)"
        )

    def remove_stray_temp_files(self) -> None:
        """Remove the temporary files of interrupted writes (:data:`~evictlab.writers.TEMP_FILE`)
        under the folder, which this lock holds, except in the folders another live run holds
        (:func:`in_use`), which it does not enter: their temporary files may be that run's writes
        in progress. Those of a folder whose lock is stale go as well."""
        for here, subfolders, names in os.walk(self.folder):
            place = Path(here)
            # Asked after the listing, of every folder from ours down to here: a run that locks
            # one of them later has written none of the files listed.
            inner = place.relative_to(self.folder).parts
            if any(in_use(self.folder.joinpath(*inner[:depth])) for depth in range(1, len(inner) + 1)):
                subfolders.clear()
                continue
            for name in names:
                if TEMP_FILE.match(name) and (place / name).is_file():
                    (place / name).unlink(missing_ok=True)

    def release(self) -> None:
        if not self._lock.is_locked:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # while still holding it; see the class docstring
        self._lock.release()


def in_use(folder: Path) -> bool:
    """Whether a live run holds ``folder``'s lock, judged as :class:`FolderLock` judges it: by
    taking the lock and, when that works, giving it back at once (which removes the lock file).
    The kernel drops the ``flock`` of a process that dies, so the lock file of a run that was
    killed holds nothing; one evictlab cannot use as a lock file counts as held."""
    if not os.path.lexists(folder / LOCK_FILE):
        return False
    probe = FolderLock(folder, "probe")
    try:
        probe._take()  # not acquire: a folder removed meanwhile is not made again
    except OutputExistsError:
        return True
    probe.release()
    return False


def is_lock_file(name: str) -> bool:
    """Whether a folder entry is a run's lock file (or the private lock file of earlier versions)."""
    return name == LOCK_FILE or name.startswith(f"{LOCK_FILE}.")


def lock_holder(path: Path) -> dict[str, Any] | None:
    """``{"pid", "started_at", "command"}`` of the process holding a flock on ``path`` (Linux), else None."""
    try:
        inode = os.stat(path).st_ino
        with open("/proc/locks", encoding="ascii") as handle:
            entries = [line.split() for line in handle]
    except OSError:
        return None
    for fields_ in entries:
        if len(fields_) > 5 and fields_[1] == "FLOCK" and fields_[5].rsplit(":", 1)[-1] == str(inode):
            pid = int(fields_[4])
            return {"pid": pid, "started_at": _process_start(pid), "command": _process_command(pid)}
    return None


def _running_kind(folder: Path, pid: int) -> str | None:
    """The kind whose record in ``folder`` says process ``pid`` is running it."""
    for path in folder.glob(f"*{RECORD_SUFFIX}"):
        try:
            data = parse_json(read_bounded(path, MAX_RECORD_BYTES, what="run record"), where=str(path))
        except ContractError:
            continue
        if isinstance(data, dict) and data.get("pid") == pid and data.get("status") == RUNNING:
            return str(data.get("kind"))
    return None


def _process_start(pid: int) -> str | None:
    """The UTC start time of process ``pid`` from ``/proc`` (boot time + start ticks)."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        lines = Path("/proc/stat").read_text().splitlines()
        boot = next(int(line.split()[1]) for line in lines if line.startswith("btime"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return iso_z(_dt.datetime.fromtimestamp(boot + ticks / os.sysconf("SC_CLK_TCK"), _dt.UTC), seconds=True)


def _process_command(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return None


def describe_holder(holder: Mapping[str, Any] | None) -> str:
    if not holder:
        return "another evictlab run (pid unknown)"
    what = f"evictlab {holder['kind']}" if holder.get("kind") else "another run"
    return f"{what} (pid {holder.get('pid', '?')}, started {holder.get('started_at') or '?'})"


def make_folder(folder: Path) -> bool:
    """Create an output folder (and its parents); True when it did not exist before."""
    if folder.exists() and not folder.is_dir():
        raise OutputExistsError(f"{folder}: exists and is not a folder")
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)  # an OSError names the path; the command line prints it
    return created
