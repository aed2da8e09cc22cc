"""``run-qa``: answer the 90 tasks through a provider, one response file per row (spec 3.4-3.7).

An output folder holds the run marker ``qa_run.json``, ``responses/{row_id}.json`` and the
run record ``run-qa.run.json`` (:func:`evictlab.results.run`: the folder is locked while a
run is in it, and the record says whether the last one finished, failed or was stopped). The
marker is written once, before the first call, and records the hashes of the five inputs;
a later run in the same folder resumes only when every hash still matches. A response file
is written atomically as soon as its call succeeds, so an interrupted run keeps every row it
finished. On resume a stored row is reused only when it answers exactly the task recomputed
from the current protocol; any other task is called again and its file overwritten.

Nothing written here contains the API key, a question, a reference answer or memory text.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ... import results
from ...core.pools import PoolSet
from ...errors import ContractError, EvictlabError
from ...readers import MAX_PROTOCOL_FILE_BYTES, MAX_RESPONSE_BYTES, parse_json, read_bounded
from ...results import git_state
from ...times import utc_now_iso
from ...writers import json_line, write_json
from .providers import Completion, OpenAICompatibleProvider, ProviderError
from .tasks import QATask, build_tasks

KIND = "run-qa"
MARKER_FILE = "qa_run.json"
RESPONSES_DIR = "responses"
MARKER_SCHEMA_VERSION = 2
RESPONSE_SCHEMA_VERSION = 1

#: The fields of a response row (spec 3.6), as :func:`response_row` writes them.
RESPONSE_FIELDS = (
    "schema_version", "row_id", "case_id", "source", "scenario", "policy", "capacity",
    "kept_fact_ids", "prediction", "attempts", "request_fingerprint", "response_model", "usage",
    "created_at",
)  # fmt: skip

#: The fields that tie a stored row to its task, checked in this order by resume and grading:
#: the five of spec 3.6's reuse rule and the three case fields that grading also requires.
IDENTITY_FIELDS = (
    "row_id", "case_id", "source", "scenario", "kept_fact_ids", "capacity", "policy",
    "request_fingerprint",
)  # fmt: skip


class QARunInterrupted(EvictlabError):
    """Ctrl-C during ``run-qa``: no new calls were started; finished rows are on disk."""

    exit_code = 130
    interruption = True  # the run record says "interrupted", not "error"


class QARunStopped(EvictlabError):
    """An answer could not be stored (disk full, read-only): no new calls; stored rows are kept."""


# --------------------------------------------------------------------------- the run marker


def run_artifacts(pool_set: PoolSet) -> dict[str, str]:
    """The five artifact hashes of a QA run: the four protocol files and the dataset."""
    return {**pool_set.protocol.artifact_hashes(), "dataset_sha256": pool_set.dataset.sha256}


def marker_record(pool_set: PoolSet, *, preset: str | None) -> dict[str, Any]:
    """``qa_run.json``, schema 2 (spec 3.7), plus evictlab's ``preset`` and ``variant``; the ``qa``
    block restates the config's QA settings (a ``--workers`` override is not recorded)."""
    protocol = pool_set.protocol
    qa = protocol.config.qa
    return {
        "schema_version": MARKER_SCHEMA_VERSION,
        "protocol_id": protocol.protocol_id,
        "created_at": utc_now_iso(),
        "git": git_state(),
        "dataset": pool_set.dataset.record(),
        "artifacts": run_artifacts(pool_set),
        "qa": {
            "capacity": protocol.config.pool.qa_capacity,
            "model": qa.model,
            "temperature": qa.temperature,
            "max_tokens": qa.max_tokens,
            "stream": qa.stream,
            "timeout_seconds": _plain_number(qa.timeout_seconds),
            "max_attempts": qa.max_attempts,
            "workers": qa.workers,
            "grader_version": qa.grader_version,
            "api_key_env": qa.api_key_env,
            "base_url_env": qa.base_url_env,
        },
        "preset": preset,
        "variant": pool_set.variant.as_dict(),
    }


def _plain_number(value: float) -> int | float:
    # The config's "timeout_seconds: 120" is parsed as a float; DeerFlow's markers write 120.
    return int(value) if float(value).is_integer() else value


def check_marker(output_dir: str | Path, pool_set: PoolSet, *, action: str) -> None:
    """Raise unless ``qa_run.json`` exists and matches the current inputs (read-only), naming
    every changed artifact (and a changed protocol variant) and refusing ``action``."""
    path = Path(output_dir) / MARKER_FILE
    if not path.is_file():
        raise ContractError(
            f"{path}: no run marker; run run-qa into this folder first; refusing to {action}"
        )
    marker = _read_marker(path, action)
    problems = [
        f"{name.removesuffix('_sha256')} (recorded {marker['artifacts'].get(name)}, now {value})"
        for name, value in sorted(run_artifacts(pool_set).items())
        if marker["artifacts"].get(name) != value
    ]
    if not problems:
        # With the hashes equal, any other difference is an edit to the marker itself.
        problems = [
            f"{name} (recorded {recorded!r}, the protocol gives {expected!r})"
            for name, recorded, expected in _claimed_fields(marker, marker_record(pool_set, preset=None))
        ]
    variant = pool_set.variant.as_dict()
    # Markers written by DeerFlow have no variant; their rows are checked one by one instead.
    if "variant" in marker and marker["variant"] != variant:
        problems.append(
            f"protocol variant (recorded {marker['variant']}, now {variant};"
            " pass the run's --preset and --variant)"
        )
    if problems:
        raise ContractError(
            f"{path}: the inputs changed since this run started: {'; '.join(problems)};"
            f" refusing to {action} (use a new output directory)"
        )


#: Marker blocks that restate the protocol, the dataset and the run's artifacts.
CLAIMED_FIELDS = ("schema_version", "protocol_id", "dataset", "artifacts", "qa")


def _claimed_fields(marker: Mapping[str, Any], expected: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(dotted name, recorded, expected) for every claimed field that differs."""
    differences = []
    for block in CLAIMED_FIELDS:
        recorded, wanted = marker.get(block), expected[block]
        if isinstance(recorded, dict) and isinstance(wanted, dict):
            for name in sorted(set(recorded) | set(wanted)):
                if not _same_json(recorded.get(name), wanted.get(name)):
                    differences.append((f"{block}.{name}", recorded.get(name), wanted.get(name)))
        elif not _same_json(recorded, wanted):
            differences.append((block, recorded, wanted))
    return differences


def _same_json(recorded: Any, expected: Any) -> bool:
    # As JSON text: true is not 1, but a recorded 0.0 equals a config's 0.0.
    return json_line(recorded) == json_line(expected)


def _read_marker(path: Path, action: str) -> dict[str, Any]:
    try:
        marker = parse_json(read_bounded(path, MAX_PROTOCOL_FILE_BYTES, what="run marker"), where=str(path))
    except ContractError as error:
        raise ContractError(f"unreadable run marker: {error}; refusing to {action}") from None
    if not isinstance(marker, dict) or marker.get("schema_version") != MARKER_SCHEMA_VERSION:
        found = marker.get("schema_version") if isinstance(marker, dict) else type(marker).__name__
        raise ContractError(
            f"{path}: expected a run marker with schema_version {MARKER_SCHEMA_VERSION}, got {found!r};"
            f" refusing to {action}"
        )
    if not isinstance(marker.get("artifacts"), dict):
        raise ContractError(f"{path}: the run marker has no artifacts object; refusing to {action}")
    return marker


def ensure_marker(output_dir: str | Path, pool_set: PoolSet, *, preset: str | None) -> Path:
    """Write ``qa_run.json`` when absent, else check that it matches the current inputs."""
    path = Path(output_dir) / MARKER_FILE
    if path.exists():
        check_marker(output_dir, pool_set, action="resume")
    else:
        write_json(path, marker_record(pool_set, preset=preset))
    return path


# --------------------------------------------------------------------------- response rows


def response_path(output_dir: str | Path, row_id: str) -> Path:
    """``{output_dir}/responses/{row_id}.json``; a row id must be a plain file name."""
    if not row_id or row_id.startswith(".") or "/" in row_id or "\\" in row_id:
        raise ContractError(f"row id {row_id!r} cannot name a response file")
    return Path(output_dir) / RESPONSES_DIR / f"{row_id}.json"


def identity_fields(task: QATask) -> dict[str, Any]:
    """The fields that tie a stored row to its task, with the values the task gives them."""
    return {
        "row_id": task.row_id,
        "case_id": task.case.case_id,
        "source": task.case.source,
        "scenario": task.case.scenario,
        "policy": task.policy,
        "capacity": task.capacity,
        "kept_fact_ids": list(task.kept_fact_ids),
        "request_fingerprint": task.request_fingerprint,
    }


def response_row(task: QATask, completion: Completion) -> dict[str, Any]:
    """A ``responses/{row_id}.json`` document: exactly the fields of spec 3.6."""
    return {
        "schema_version": RESPONSE_SCHEMA_VERSION,
        **identity_fields(task),
        "prediction": completion.prediction,
        "attempts": completion.attempts,
        "response_model": completion.response_model,
        "usage": completion.usage,
        "created_at": utc_now_iso(),
    }


def load_completed(path: Path) -> dict[str, Any] | None:
    """The stored row at ``path`` if it is completed (spec 3.6: a JSON object with
    ``schema_version`` 1 and a string ``prediction``), else None."""
    try:
        row = parse_json(read_bounded(path, MAX_RESPONSE_BYTES, what="response row"), where=str(path))
    except ContractError:
        return None
    if not isinstance(row, dict) or row.get("schema_version") != RESPONSE_SCHEMA_VERSION:
        return None
    return row if isinstance(row.get("prediction"), str) else None


def identity_mismatches(row: Mapping[str, Any], task: QATask) -> list[str]:
    """``"capacity is 5, expected 7"``: one line per :data:`IDENTITY_FIELDS` field whose stored
    value differs from the task's, in that order."""
    expected = identity_fields(task)
    return [f"{name} is {row.get(name)!r}, expected {expected[name]!r}"
            for name in IDENTITY_FIELDS if not _same(row.get(name), expected[name])]


def _same(stored: Any, expected: Any) -> bool:
    # The type as well: JSON true equals 1 in Python and would pass for a capacity of 1.
    return type(stored) is type(expected) and stored == expected


def storage_problem(path: Path, row: Mapping[str, Any] | None) -> str | None:
    """Why the stored row at ``path`` (as :func:`load_completed` read it) is unusable, if it is."""
    if row is None:
        return "not a completed response row" if path.exists() else "missing"
    absent = [name for name in RESPONSE_FIELDS if name not in row]
    return f"no field {', '.join(absent)}" if absent else None


def row_problem(path: Path, row: Mapping[str, Any] | None, task: QATask) -> str | None:
    """The one validity rule of stored rows: why grading would refuse ``row`` for ``task``
    (``run-qa`` asks again every such task, so a folder it finishes is one grade-qa accepts)."""
    problem = storage_problem(path, row)
    if problem is not None or row is None:
        return problem
    return "; ".join(identity_mismatches(row, task)) or None


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class RunReport:
    """What one ``run-qa`` invocation did; ``failures`` maps row id -> error."""

    reused: int
    called: int
    failures: dict[str, str] = field(default_factory=dict)

    @property
    def summary_line(self) -> str:
        return f"answer rows: {self.reused} reused, {self.called} called, {len(self.failures)} failed"

    @property
    def failure_lines(self) -> list[str]:
        return [f"{row_id}: {error}" for row_id, error in sorted(self.failures.items())]


def run_qa(
    pool_set: PoolSet, provider: OpenAICompatibleProvider, output_dir: str | Path, *, workers: int | None = None,
    preset: str | None = None, progress: bool = True,
) -> RunReport:
    """Answer every task not already answered in ``output_dir``; see the module docstring.

    ``workers`` defaults to the config's ``qa.workers``. Raises :class:`QARunInterrupted` on
    Ctrl-C once the calls in flight have been stored or aborted (see :func:`call_tasks`).
    """
    workers = workers or pool_set.protocol.config.qa.workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ContractError(f"workers must be an integer >= 1, got {workers!r}")
    tasks = build_tasks(pool_set)
    paths = task_paths(output_dir, tasks)  # every row id checked before anything is written

    def check_marker_if_any() -> None:
        if (Path(output_dir) / MARKER_FILE).exists():
            check_marker(output_dir, pool_set, action="resume")

    parameters = {"preset": preset, "workers": workers, "variant": pool_set.variant.as_dict()}
    with results.run(
        output_dir, KIND, parameters=parameters, outputs=(MARKER_FILE,), existing="resume",
        precheck=check_marker_if_any,
    ) as run:
        run.record.dataset = pool_set.dataset.record()
        ensure_marker(output_dir, pool_set, preset=preset)
        run.add_output(MARKER_FILE)
        problems = {
            task.row_id: row_problem(paths[task.row_id], load_completed(paths[task.row_id]), task) for task in tasks
        }
        pending = [task for task in tasks if problems[task.row_id] is not None]
        refused = sorted((row_id, problem) for row_id, problem in problems.items() if problem not in (None, "missing"))
        if refused:
            print(
                f"asking again {len(refused)} stored row(s) that grade-qa would refuse: "
                + "; ".join(f"{row_id} ({problem})" for row_id, problem in refused),
                file=sys.stderr,
            )
        with tqdm(total=len(pending), desc="answer calls", unit="row", disable=not (progress and pending)) as bar:
            called, failures = call_tasks(pending, provider, output_dir, workers=workers, on_done=bar.update)
        report = RunReport(reused=len(tasks) - len(pending), called=called, failures=failures)
        run.record.summary = {"rows": len(tasks), "reused": report.reused, "called": called, "failed": len(failures)}
        if failures:
            run.fail(f"{len(failures)} of {len(tasks)} rows failed; run run-qa again to retry them")
    return report


def task_paths(output_dir: str | Path, tasks: Sequence[QATask]) -> dict[str, Path]:
    """Each task's response file; an error when a row id cannot name one or names one twice."""
    paths: dict[str, Path] = {}
    for task in tasks:
        if task.row_id in paths:
            raise ContractError(
                f"row id {task.row_id!r} names two tasks (a case id repeated across the manifests?)"
            )
        paths[task.row_id] = response_path(output_dir, task.row_id)
    return paths


def call_tasks(
    tasks: Sequence[QATask], provider: OpenAICompatibleProvider, output_dir: str | Path, *, workers: int,
    on_done: Callable[[int], Any] = lambda count: None,
) -> tuple[int, dict[str, str]]:
    """Call ``tasks`` on ``workers`` threads, storing each answer as it arrives; returns (rows
    answered, {row id: error} of failed rows).

    At most ``workers`` calls run ahead of their results, so Ctrl-C starts nothing new: the calls
    in flight get :data:`INTERRUPT_GRACE_SECONDS` to finish and be stored, the rest are aborted (a
    second Ctrl-C aborts them at once) and :class:`QARunInterrupted` counts the rows stored. When
    an answer cannot be stored (a full disk), the :data:`SPACE_RESERVE_BYTES` held back meanwhile
    are released for the answers in hand and :class:`QARunStopped` ends the run: an answer that
    was paid for is not lost, and a rerun resumes.
    """
    if not tasks:
        return 0, {}
    queue = iter(tasks)
    running: dict[Future, QATask] = {}
    called, failures = 0, {}
    kept = f"every stored row is kept in {Path(output_dir) / RESPONSES_DIR}; run the same command again to resume"
    reserve = _hold_space(Path(output_dir) / RESPONSES_DIR / RESERVE_FILE)
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="run-qa") as executor:
            try:
                while True:
                    while len(running) < workers and (task := next(queue, None)) is not None:
                        running[executor.submit(_answer, task, provider, output_dir)] = task
                    if not running:
                        break
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        task = running.pop(future)
                        try:
                            future.result()
                            called += 1
                        except ProviderError as error:
                            failures[task.row_id] = str(error)
                        on_done(1)
            except KeyboardInterrupt:
                print(
                    f"\ninterrupted: starting no new calls; waiting up to {INTERRUPT_GRACE_SECONDS:g} s for"
                    f" {len(running)} call(s) in flight to finish and be stored (press Ctrl-C again to abort them)",
                    file=sys.stderr,
                )
                stored = _drain(running, provider, grace=INTERRUPT_GRACE_SECONDS)
                raise QARunInterrupted(f"interrupted after {called + stored} new row(s) in this run; {kept}") from None
            except _Unstored as first:
                _release(reserve)
                stored = first.store()  # at once: a kill while the calls in flight finish loses nothing
                stored += _drain(running, provider)
                held = [future.exception() for future in running if not future.cancelled()]
                stored += sum(unstored.store() for unstored in held if isinstance(unstored, _Unstored))
                failure = first.error
                raise QARunStopped(
                    f"cannot store answers ({failure.filename or output_dir}: {failure.strerror or failure});"
                    f" stopped after {called + stored} new row(s) in this run, the answers in hand stored"
                    f" in the space held back for them; {kept} once the disk has room"
                ) from None
    finally:
        _release(reserve)
    return called, failures


#: Disk space held back while calls run, so that the answers in hand when the disk fills up
#: can still be stored (a response row takes one 4 KiB block on most file systems).
SPACE_RESERVE_BYTES = 256 * 1024
RESERVE_FILE = ".space-reserve"


def _hold_space(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(path, "wb") as handle:
            handle.write(bytes(SPACE_RESERVE_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as error:
        _release(path)
        raise QARunStopped(
            f"{path.parent}: cannot hold back {SPACE_RESERVE_BYTES // 1024} KiB of disk space for the"
            f" answers ({error.strerror or error}); no call was made"
        ) from None
    return path


def _release(path: Path) -> None:
    with contextlib.suppress(OSError):  # already released, or on a disk that refuses even that
        path.unlink()


class _Unstored(Exception):
    """An answer that arrived but could not be written; it is held until there is room."""

    def __init__(self, path: Path, row: dict[str, Any], error: OSError) -> None:
        super().__init__(str(error))
        self.path, self.row, self.error = path, row, error

    def store(self) -> int:
        """Write the row now; 1 when it was stored, 0 when the disk still refuses it."""
        try:
            write_json(self.path, self.row)
        except OSError:
            return 0
        return 1


#: How long the first Ctrl-C waits for the calls in flight (their answers are paid for) before
#: it aborts those still running; a second Ctrl-C aborts them at once.
INTERRUPT_GRACE_SECONDS = 5.0


def _drain(
    running: Mapping[Future, QATask], provider: OpenAICompatibleProvider, *, grace: float | None = None
) -> int:
    """Wait for the calls in flight (at most ``grace`` seconds, then abort those left; on Ctrl-C,
    abort them at once); the number of them whose answer was stored."""
    try:
        _, left = wait(running, timeout=grace)
        if left:
            print(f"aborting {len(left)} call(s) still in flight after {grace:g} s", file=sys.stderr)
    except KeyboardInterrupt:
        left = {future for future in running if not future.done()}
        print(f"\ninterrupted again: aborting {len(left)} call(s) in flight", file=sys.stderr)
    if left:
        provider.abort()
        wait(running)
    return sum(1 for future in running if not future.cancelled() and future.exception() is None)


def _answer(task: QATask, provider: OpenAICompatibleProvider, output_dir: str | Path) -> None:
    completion = provider.complete(task.payload)
    path, row = response_path(output_dir, task.row_id), response_row(task, completion)
    try:
        write_json(path, row)
    except OSError as error:
        raise _Unstored(path, row, error) from None
