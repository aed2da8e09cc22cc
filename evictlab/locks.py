"""The exclusive lock on an output folder, held for one run (see :func:`evictlab.results.run`).

An OS file lock (``flock``) on ``{folder}/.evictlab.lock``: a second run into the folder is
refused at once, naming the holder's pid and start time, which are asked of the system
(``/proc``) rather than of a file the holder may not have written yet.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import OutputExistsError

LOCK_FILE = ".evictlab.lock"
RECORD_SUFFIX = ".run.json"
RUNNING = "running"
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK}


class FolderBusyError(OutputExistsError):
    """Another run holds the output folder's lock."""


class FolderLock:
    """An exclusive ``flock`` on ``{folder}/.evictlab.lock``, held for one run.

    The lock file is empty (so it costs no space on a full disk) and is removed when the run
    ends. Who holds a lock is asked of the system (``/proc/locks``: the pid, and that
    process's start time), so a refusal names the holder even before it has written anything.
    The kernel releases the lock of a process that dies, so a lock file that exists but is not
    locked was left by a run that ended without finishing: :meth:`acquire` reports it as
    *stale* and takes the lock only then, never from a live holder.
    """

    def __init__(self, folder: str | os.PathLike, kind: str) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.kind = kind
        self.fd: int | None = None
        self.created = False  # whether acquire made the folder

    def acquire(self) -> bool:
        """Take the lock or raise :class:`FolderBusyError` naming the holder; True if it was stale."""
        self.created = make_folder(self.folder)
        while True:
            fd = self._create_locked()
            if fd is not None:
                self.fd = fd
                return False
            try:
                fd = os.open(self.path, os.O_RDWR)
            except FileNotFoundError:
                continue  # its holder removed it just now
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = lock_holder(self.path)
                os.close(fd)
                if holder is not None:
                    holder["kind"] = _running_kind(self.folder, holder["pid"])
                raise FolderBusyError(
                    f"{self.folder} is in use by {describe_holder(holder)}; refusing to start a second"
                    " run into it (wait for it to finish or choose another output folder)"
                ) from None
            # The previous holder may have removed the file between our open and our lock.
            if _same_file(self.path, fd):
                self.fd = fd
                return True  # a lock file nobody holds: its run ended without releasing it
            os.close(fd)

    def _create_locked(self) -> int | None:
        """A new lock file, already locked when it appears at its path; None if one exists there.

        The file is made and locked under a private name of its own (unique per call, so two
        runs in one process or two processes with one pid never share it), then hard-linked
        into place (a link fails if the name exists). A lock file that exists is therefore
        always locked unless its run died, and a second run can never find a live run's file
        unlocked (which it would take for stale) in the moment between creating and locking it.
        """
        fd, private = tempfile.mkstemp(dir=self.folder, prefix=f"{LOCK_FILE}.")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a file nobody else has opened
            os.link(private, self.path)
        except (FileExistsError, FileNotFoundError):
            os.close(fd)
            return None  # taken by another run, or our private file removed: look again
        except OSError as error:
            os.close(fd)
            if error.errno not in _NO_HARD_LINKS:
                raise
            return self._create_then_lock()
        except BaseException:
            os.close(fd)
            raise
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(private)
        return fd

    def _create_then_lock(self) -> int | None:
        """For a file system without hard links: create, then lock. A narrow window stays
        open there: a second run may find the new file unlocked and take it for stale, and
        then this one finds it locked and reports the folder busy (None: look again)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # while still holding it; see acquire for the race this closes
        os.close(self.fd)  # closing the last descriptor releases the flock
        self.fd = None


def is_lock_file(name: str) -> bool:
    """Whether a folder entry is a run's lock file, or one being made (see FolderLock)."""
    return name == LOCK_FILE or name.startswith(f"{LOCK_FILE}.")


def _same_file(path: Path, fd: int) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


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
            data = json.loads(path.read_bytes())
        except (OSError, ValueError, RecursionError):
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
    moment = _dt.datetime.fromtimestamp(boot + ticks / os.sysconf("SC_CLK_TCK"), _dt.UTC)
    return moment.replace(tzinfo=None, microsecond=0).isoformat() + "Z"


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
