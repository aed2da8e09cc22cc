"""Run folders: provenance and the one run record.

Every command that writes an output folder (``run-policy``, ``sweep``, ``diff``, ``report``,
``run-qa``, ``grade-qa``, ``qa stats``) runs inside :func:`run`, which locks the folder, applies
the overwrite / resume rule, and keeps a typed, versioned :class:`RunRecord` in
``{kind}.run.json`` with the status (``running``, ``success``, ``error``, ``interrupted``),
timings, provenance, spec, dataset record and every output's SHA-256. :func:`load_runs` reads
the records of a tree back into one DataFrame. Files are written through :mod:`evictlab.writers`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ContractError, EvictlabError, OutputExistsError
from .locks import LOCK_FILE, RECORD_SUFFIX, RUNNING, FolderBusyError, FolderLock, describe_holder  # noqa: F401
from .readers import MAX_RECORD_BYTES, parse_json, read_bounded
from .times import utc_now_iso
from .writers import (  # noqa: F401 - the writers are part of a run folder's face
    atomic_write_bytes,
    atomic_write_text,
    file_digest,
    file_stamp,
    json_document,
    json_line,
    utf8,
    write_json,
    write_jsonl,
)

if TYPE_CHECKING:
    import pandas as pd

PROVENANCE_PACKAGES = ("numpy", "pandas", "scipy", "matplotlib", "pyarrow", "papermill")


def git_state(cwd: str | os.PathLike | None = None) -> dict[str, Any]:
    """``{"head": ..., "dirty": ...}`` of the repository holding evictlab (or ``cwd``)."""
    where = Path(cwd) if cwd is not None else Path(__file__).resolve().parent
    try:
        # One call for both: the head's commit on a "# branch.oid" line, then a line per
        # changed or untracked file.
        status = subprocess.run(
            ["git", "status", "--porcelain=v2", "--branch"], cwd=where, capture_output=True, text=True, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return {"head": None, "dirty": None}
    head = next((line.split()[2] for line in status if line.startswith("# branch.oid ")), "(initial)")
    if head == "(initial)":  # no commit yet
        return {"head": None, "dirty": None}
    return {"head": head, "dirty": any(not line.startswith("#") for line in status)}


@functools.cache
def _package_version(name: str) -> str | None:
    # Looked up once per process (reading a package's metadata scans sys.path, several ms each),
    # so a package upgraded while the process runs keeps its old version here.
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def provenance() -> dict[str, Any]:
    """What every run manifest records about the software that produced it, and which route
    computed the policies' transcendental steps (``numerics``: ``vector`` or ``scalar``, the same
    doubles; :mod:`evictlab.numerics`)."""
    from . import __version__
    from .numerics import ROUTE

    return {
        "evictlab_version": __version__,
        "git": git_state(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {name: _package_version(name) for name in PROVENANCE_PACKAGES},
        "numerics": ROUTE,
    }


# --------------------------------------------------------------------------- run records

RECORD_SCHEMA = "evictlab-run"
RECORD_VERSION = 1
SUCCESS, ERROR, INTERRUPTED = "success", "error", "interrupted"
STATUSES = (RUNNING, SUCCESS, ERROR, INTERRUPTED)
#: What :func:`run` does with a folder that holds this kind's earlier run.
EXISTING_RULES = ("refuse", "resume", "replace")


def record_path(folder: str | os.PathLike, kind: str) -> Path:
    """``{folder}/{kind}.run.json``: where a run of ``kind`` keeps its record."""
    return Path(folder) / f"{kind}{RECORD_SUFFIX}"


@dataclass
class RunRecord:
    """The typed, versioned record of one run (``{kind}.run.json``).

    ``parameters`` are the kind's own inputs (grid, policies, notebook parameters, ...);
    ``summary`` what the kind reports about its result (row counts, notebook statuses, ...);
    ``outputs`` maps each output file (relative path) to ``{"bytes", "sha256"}``, and
    ``written`` each file this run wrote itself to its :func:`file_stamp` (which file it is, not
    only what it holds); ``notes`` hold what the run had to tell about the folder it found (a
    stale lock, an interrupted predecessor it replaced).
    """

    kind: str
    status: str
    started_at: str
    pid: int
    provenance: dict[str, Any]
    spec: dict[str, Any] | None = None
    dataset: dict[str, Any] | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    written: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    finished_at: str | None = None
    elapsed_seconds: float | None = None
    error: str | None = None
    schema: str = RECORD_SCHEMA
    schema_version: int = RECORD_VERSION

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, where: str | os.PathLike) -> RunRecord:
        """Check a parsed record: schema, version, kind, status and the type of every field."""
        if not isinstance(data, dict) or data.get("schema") != RECORD_SCHEMA:
            raise ContractError(f"{where}: not an evictlab run record (no \"schema\": \"{RECORD_SCHEMA}\")")
        if data.get("schema_version") != RECORD_VERSION:
            raise ContractError(
                f"{where}: run record schema_version {data.get('schema_version')!r}, expected {RECORD_VERSION}"
            )
        unknown = sorted(set(data) - {item.name for item in fields(cls)})
        if unknown:
            raise ContractError(f"{where}: unknown run record field(s) {', '.join(unknown)}")
        if data.get("status") not in STATUSES:
            raise ContractError(f"{where}: status {data.get('status')!r} is not one of {', '.join(STATUSES)}")
        for name, expected in _FIELD_TYPES.items():
            # "written" came after the first records; theirs read as listing no file written.
            if not isinstance(data.get(name, {} if name == "written" else None), expected):
                raise ContractError(f"{where}: field {name} must be {expected.__name__}")
        return cls(**data)


_FIELD_TYPES = {"kind": str, "started_at": str, "pid": int, "provenance": dict, "parameters": dict,
                "summary": dict, "outputs": dict, "written": dict, "notes": list}  # fmt: skip


def read_record(folder: str | os.PathLike, kind: str) -> RunRecord | None:
    """The record of ``kind`` in ``folder``, or None when there is none.

    Read through the bounded, strict readers (a record replaced by a huge file or a link to
    ``/dev/zero`` is refused at :data:`~evictlab.readers.MAX_RECORD_BYTES`); a record whose
    ``kind`` is not the one its file name says is refused too.
    """
    path = record_path(folder, kind)
    if not os.path.lexists(path):
        return None
    try:
        data = parse_json(read_bounded(path, MAX_RECORD_BYTES, what="run record"), where=str(path))
    except ContractError as error:
        raise ContractError(f"unreadable run record: {error}") from None
    record = RunRecord.from_dict(data, path)
    if record.kind != kind:
        raise ContractError(f"{path}: a record of kind {record.kind!r} under the name of a {kind} record")
    return record


class Terminated(KeyboardInterrupt):
    """SIGTERM during a run: handled like Ctrl-C, so the run ends as ``interrupted``."""


@dataclass
class Run:
    """An open run (see :func:`run`): write outputs through it so the record lists them."""

    folder: Path
    record: RunRecord
    previous: RunRecord | None
    failure: str | None = None
    reserve: Path | None = None  # space held back for the final record (see _hold_back)

    def path(self, name: str) -> Path:
        return self.folder / name

    def write_bytes(self, name: str, data: bytes) -> Path:
        path = atomic_write_bytes(self.path(name), data)
        self.record.outputs[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        self.record.written[name] = file_stamp(path)
        return path

    def write_text(self, name: str, text: str) -> Path:
        return self.write_bytes(name, utf8(text))

    def write_json(self, name: str, value: Any) -> Path:
        return self.write_text(name, json_document(value))

    def write_jsonl(self, name: str, rows: Iterable[Any]) -> Path:
        return self.write_bytes(name, utf8("".join(json_line(row) for row in rows)))

    def add_output(self, name: str) -> None:
        """Record a file this run had written by someone else (papermill, a figure) as its output."""
        self.record.outputs[name] = file_digest(self.path(name))
        self.record.written[name] = file_stamp(self.path(name))

    def wrote_before(self, name: str) -> bool:
        """Whether the previous run of this kind wrote ``folder/name`` itself and the file is
        still the one it wrote, unchanged: its stamp and its SHA-256 as that run recorded them."""
        path = self.path(name)
        previous = self.previous
        if previous is None or name not in previous.outputs or not path.is_file() or path.is_symlink():
            return False
        return previous.written.get(name) == file_stamp(path) and file_digest(path) == previous.outputs[name]

    def fail(self, message: str) -> None:
        """End the run with status ``error`` and ``message`` although nothing was raised."""
        self.failure = message

    def save(self) -> None:
        """Rewrite the record (it is written at the start and the end anyway)."""
        write_json(record_path(self.folder, self.record.kind), self.record.as_dict())


@contextmanager
def run(
    out_dir: str | os.PathLike, kind: str, spec: Any = None, *, parameters: Mapping[str, Any] | None = None,
    outputs: Sequence[str] = (), existing: str = "refuse", precheck: Callable[[], None] | None = None,
) -> Iterator[Run]:
    """Own one run of ``kind`` into ``out_dir``: lock, refuse or resume, record, status.

    * The folder is created and locked (:class:`FolderLock`) for the whole run; a second run is
      refused at once, naming the holder. A stale lock's run is marked ``interrupted`` (noted on
      standard error and in the record's ``notes``).
    * ``existing``: ``"refuse"`` refuses a finished earlier run of this kind and reruns an
      unfinished one in place, and refuses files named in ``outputs`` that no record accounts
      for; ``"resume"`` always continues (the kind checks its own inputs, as run-qa does);
      ``"replace"`` starts over, :attr:`Run.previous` telling what the earlier run wrote.
    * The record says ``running`` before the work and ``success``, ``error`` (an exception or
      :meth:`Run.fail`) or ``interrupted`` (Ctrl-C, or SIGTERM, raised as :class:`Terminated`)
      at the end; the exception propagates. :data:`RECORD_RESERVE_BYTES` of disk are held back
      until the final record, so a disk that fills up meanwhile never leaves ``running``.

    ``precheck`` runs under the lock before the record is written (checks whose failure should
    leave no trace: run-qa's marker, grade-qa's rows); a folder the run made is removed again
    when such a refusal leaves it empty. ``spec``: a :class:`~evictlab.core.runspec.RunSpec`, a
    mapping, or None.
    """
    if existing not in EXISTING_RULES:
        raise ValueError(f"existing must be one of {EXISTING_RULES}, got {existing!r}")
    folder = Path(out_dir)
    lock = FolderLock(folder, kind)
    lock.acquire()
    try:
        with _sigterm_raises():  # from the lock on, SIGTERM ends the run like Ctrl-C
            yield from _locked_run(folder, kind, lock, spec, parameters, outputs, existing, precheck)
    except EvictlabError:
        lock.release()
        if lock.created and not any(folder.iterdir()):
            # Refused before it started (precheck): the folder this run made goes too, unless
            # another run has just begun to lock it.
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    finally:
        lock.release()


def _locked_run(
    folder: Path, kind: str, lock: FolderLock, spec: Any, parameters: Mapping[str, Any] | None,
    outputs: Sequence[str], existing: str, precheck: Callable[[], None] | None,
) -> Iterator[Run]:
    """The body of :func:`run` once the folder is locked."""
    notes = []
    stale = _recover_stale(folder, lock.path)
    if stale:
        notes.append(stale)
        print(f"warning: {stale}", file=sys.stderr)
    previous = read_record(folder, kind)
    for note in _check_existing(folder, kind, previous, outputs, existing):
        print(f"note: {note}", file=sys.stderr)
        notes.append(note)
    if precheck is not None:
        precheck()
    lock.remove_stray_temp_files()  # not in the folders of nested runs still going
    record = RunRecord(
        kind=kind, status=RUNNING, started_at=utc_now_iso(), pid=os.getpid(), provenance=provenance(),
        spec=spec.as_record() if hasattr(spec, "as_record") else _plain(spec), notes=notes,
        parameters=_plain(dict(parameters or {})),
    )
    current = Run(folder, record, previous, reserve=_hold_back(folder / f".{kind}{RECORD_RESERVE_SUFFIX}"))
    started = time.perf_counter()
    try:
        # Saved inside the try: a signal that lands right after the "running" record is on
        # disk (a preempted process runs its handler at the next bytecode) must still end
        # the record as interrupted.
        current.save()
        yield current
    except BaseException as error:
        interrupted = isinstance(error, KeyboardInterrupt) or getattr(error, "interruption", False)
        record.status = INTERRUPTED if interrupted else ERROR
        record.error = _describe_error(error)
        _finish(current, started, keep_error=True)
        raise
    record.status = ERROR if current.failure else SUCCESS
    record.error = current.failure
    _finish(current, started)


#: Disk space a run holds back (a hidden file beside its record) so that its final record can be
#: written when the disk has filled up meanwhile: a record is a few KiB, a resumable sweep's a few
#: dozen with a hash per part.
RECORD_RESERVE_BYTES = 64 * 1024
RECORD_RESERVE_SUFFIX = ".run.reserve"


def _hold_back(path: Path) -> Path:
    """Fill ``path`` with :data:`RECORD_RESERVE_BYTES` (before the ``running`` record, so a disk
    too full for it refuses the run, naming the file, before any record says it started)."""
    try:
        with open(path, "wb") as handle:
            handle.write(bytes(RECORD_RESERVE_BYTES))
            handle.flush()
    except OSError as error:
        path.unlink(missing_ok=True)
        raise OSError(error.errno, error.strerror, str(path)) from None
    return path


def _recover_stale(folder: Path, lock_path: Path) -> str | None:
    """Mark interrupted, and describe, the runs whose record still says ``running`` although the
    folder is ours (a run holds the lock from before its first record to after its last)."""
    left = []
    for path in sorted(folder.glob(f"*{RECORD_SUFFIX}")):
        try:
            record = read_record(folder, path.name[: -len(RECORD_SUFFIX)])
        except ContractError:
            continue
        if record is not None and record.status == RUNNING:
            record.status = INTERRUPTED
            record.error = record.error or "ended without finishing (stale lock)"
            write_json(path, record.as_dict())
            left.append(describe_holder(asdict(record)))
    if not left:
        return None
    return (
        f"stale lock {lock_path}: left by {'; '.join(left)}, which ended without releasing it (the process is"
        f" gone); {'its run is' if len(left) == 1 else 'those runs are'} marked {INTERRUPTED}"
    )


def _finish(current: Run, started: float, *, keep_error: bool = False) -> None:
    """Write the final record; with ``keep_error`` a failing write (a full disk) does not hide
    the error that ended the run."""
    current.record.finished_at = utc_now_iso()
    current.record.elapsed_seconds = round(time.perf_counter() - started, 6)
    try:
        if current.reserve is not None:  # the room held back for this record
            current.reserve.unlink(missing_ok=True)
        current.save()
    except OSError as error:
        if not keep_error:
            raise
        print(f"warning: cannot write the run record ({error.strerror or error})", file=sys.stderr)


def _check_existing(
    folder: Path, kind: str, previous: RunRecord | None, outputs: Sequence[str], existing: str
) -> list[str]:
    """Apply the ``existing`` rule of :func:`run`; returns notes for the record."""
    record = record_path(folder, kind)
    if previous is None:
        found = [str(folder / name) for name in outputs if (folder / name).exists()]
        if found and existing != "resume":
            raise OutputExistsError(
                f"refusing to overwrite {', '.join(found)}: no {record.name} says they belong to an"
                f" unfinished {kind} run (choose a new output folder)"
            )
        return []
    if previous.status == SUCCESS:
        if existing == "refuse":
            raise OutputExistsError(
                f"{record}: this folder holds a finished {kind} run; refusing to overwrite it"
                " (choose a new output folder)"
            )
        return []
    action = "resuming" if existing == "resume" else "running again"
    return [f"the previous {kind} run here (started {previous.started_at}) ended {previous.status}; {action} in place"]


def check_output(out_dir: str | os.PathLike, kind: str, outputs: Sequence[str] = ()) -> None:
    """Fail early, before any work, where :func:`run` with ``existing="refuse"`` would refuse."""
    folder = Path(out_dir)
    if folder.exists() and not folder.is_dir():
        raise OutputExistsError(f"{folder}: exists and is not a folder")
    if folder.is_dir():
        _check_existing(folder, kind, read_record(folder, kind), outputs, "refuse")


def _plain(value: Any) -> Any:
    """JSON-ready: paths and other objects as strings, containers walked."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _describe_error(error: BaseException) -> str:
    if isinstance(error, Terminated):
        return "terminated (SIGTERM)"
    if isinstance(error, KeyboardInterrupt):
        return "interrupted (Ctrl-C)"
    if isinstance(error, EvictlabError):
        return str(error)
    return f"{type(error).__name__}: {error}"


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While open (in the main thread), SIGTERM raises :class:`Terminated` instead of killing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: Any) -> None:
        raise Terminated()

    before = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def load_runs(root: str | os.PathLike) -> pd.DataFrame:
    """Every run record under ``root`` (any depth), one row each (:data:`LOAD_RUNS_COLUMNS`:
    ``spec`` is its label, ``outputs`` how many files, ``record`` the whole :class:`RunRecord`),
    sorted by start time. A file named like a record that does not parse as one gets a row with
    status ``None`` and the reason in ``error``."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for path in sorted(Path(root).rglob(f"*{RECORD_SUFFIX}")):
        kind = path.name[: -len(RECORD_SUFFIX)]
        try:
            record = read_record(path.parent, kind)
        except ContractError as error:
            rows.append({"folder": str(path.parent), "kind": kind, "status": None, "error": str(error)})
            continue
        if record is None:
            continue
        spec, dataset, git = record.spec or {}, record.dataset or {}, record.provenance.get("git") or {}
        rows.append({
            "folder": str(path.parent), "kind": record.kind, "status": record.status,
            "started_at": record.started_at, "finished_at": record.finished_at,
            "elapsed_seconds": record.elapsed_seconds, "error": record.error,
            "spec": spec.get("label"), "spec_identity": spec.get("identity"),
            "dataset_sha256": dataset.get("sha256"), "pinned": dataset.get("pinned"),
            "evictlab_version": record.provenance.get("evictlab_version"),
            "git_head": git.get("head"), "git_dirty": git.get("dirty"),
            "outputs": len(record.outputs), "record": record,
        })  # fmt: skip
    frame = pd.DataFrame.from_records(rows, columns=list(LOAD_RUNS_COLUMNS))
    return frame.sort_values("started_at", kind="stable", na_position="last").reset_index(drop=True)


LOAD_RUNS_COLUMNS = (
    "folder", "kind", "status", "started_at", "finished_at", "elapsed_seconds", "error", "spec",
    "spec_identity", "dataset_sha256", "pinned", "evictlab_version", "git_head", "git_dirty", "outputs",
    "record",
)  # fmt: skip
