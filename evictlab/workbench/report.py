"""``evictlab report``: run the notebook suite with papermill and assemble a report folder.

The suite is :data:`NOTEBOOKS`, an ordered list of files in ``notebooks/``. Every notebook gets
the same parameters (``spec``, from ``--spec`` or ``--preset`` with ``--dataset`` and
``--allow-unpinned``; ``smoke``; ``figures_dir``; ``tables_dir``; any ``-p NAME VALUE``), saves
its figures into ``figures_dir`` (:func:`evictlab.workbench.plots.save_into`) and its key tables
into ``tables_dir`` (:func:`evictlab.workbench.tables.save_table`), each named with its number.
A report folder (``results/<name>/`` by default) holds::

    notebooks/<notebook>.ipynb|.html   the executed copies (a failed one kept up to its error)
    figures/<figure>.png|.svg          every figure the notebooks saved
    tables/<table>.csv|.json           every key table the notebooks saved
    report.md, report.html, .pdf       findings (read from the tables), key tables, figures
    report.run.json                    the run record: provenance, parameters, hashes,
                                       per-notebook status and duration, every file's SHA-256

The report decides, replays and samples nothing itself: its findings are sentences over the
saved tables (:func:`evictlab.workbench.report_document.findings`). A rerun of the same report replaces it,
deleting only files its record lists unchanged; a folder holding a report of another notebook
set or spec is refused unless ``replace`` (:mod:`evictlab.workbench.report_folder` holds these
rules). A failing notebook does not stop the others; the report names it, its failing cell and
the exception, the record's status is ``error``, and the command exits non-zero.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import results
from ..core.protocol import DEFAULT_PRESET
from ..errors import ContractError
from ..resources import NOTEBOOK_DIR
from . import loaders
from .notebook_kernel import KERNEL_ARGUMENTS, KERNEL_NAME, check_kernel, kernel_config
from .report_document import NotebookView, build_context, export_notebook_html, figure_view, findings, relative, render
from .report_folder import (
    KIND,
    MANIFEST_FILE,
    REPORT_KIND,
    RESULTS_DIR,
    TABLES_SUBDIR,
    check_folder,
    check_name,
    check_same_report,
    default_name,
    describe_inputs,
    notebook_spec,
    parse_parameter_value,
    remove_previous_report,
    select_notebooks,
)
from .report_pdf import report_pdf
from .tables import Table, read_tables

#: The report's notebooks, in execution order (file names inside ``notebooks/``).
NOTEBOOKS: list[str] = [
    "01_pools.ipynb",
    "02_retention.ipynb",
    "03_weight_sweep.ipynb",
    "04_half_life_sweep.ipynb",
    "05_protocol_variants.ipynb",
    "06_qa_report.ipynb",
    "07_explorer.ipynb",
    "08_policy_zoo.ipynb",
    "09_robustness.ipynb",
    "10_traces.ipynb",
]

#: Notebooks executed at once (each in its own kernel process): one per core of a 2-core machine.
JOBS = 2
MARKDOWN_FILE = "report.md"
HTML_FILE = "report.html"
PDF_FILE = "report.pdf"
NOTEBOOKS_SUBDIR = "notebooks"
FIGURES_SUBDIR = "figures"
FIGURE_SUFFIXES = (".png", ".svg")
#: Parameters the report sets itself; ``-p`` may not override them. The notebooks take the
#: first three in ``spec``; they stay reserved, so ``-p preset ...`` is an error, not a no-op.
RESERVED_PARAMETERS = ("dataset", "allow_unpinned", "preset", "spec", "smoke", "figures_dir", "tables_dir")

SUCCESS = "success"
ERROR = "error"
RUNNING = "running"
NOT_RUN = "not run"


# --------------------------------------------------------------------------- results


@dataclass
class NotebookRun:
    """One notebook's execution: where it came from and went, how it ended and what it drew."""

    name: str
    input_path: Path
    output_path: Path
    status: str = NOT_RUN
    duration_seconds: float | None = None
    error: dict[str, Any] | None = None
    figures: list[Path] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)  # the key tables it saved (CSV and its JSON)
    html_path: Path | None = None  # the executed copy exported to HTML, when that worked

    @property
    def prefix(self) -> str:
        """What the names of its figures and tables start with: its number and ``_`` (``02_``)."""
        return Path(self.name).stem.split("_")[0] + "_"

    def as_record(self, root: Path) -> dict[str, Any]:
        return {
            "name": self.name,
            "input": str(self.input_path),
            "output": _relative(self.output_path, root),
            "html": None if self.html_path is None else _relative(self.html_path, root),
            "status": self.status,
            "duration_seconds": None if self.duration_seconds is None else round(self.duration_seconds, 3),
            "error": self.error,
            "figures": [_relative(path, root) for path in self.figures],
            "tables": [_relative(path, root) for path in self.tables],
        }


@dataclass
class ReportResult:
    output_dir: Path
    status: str
    notebooks: list[NotebookRun]
    error: str | None = None
    tables: list[Table] = field(default_factory=list)  # the tables the notebooks saved
    findings: list[Any] = field(default_factory=list)  # the findings report.md opens with

    @property
    def manifest_path(self) -> Path:
        return self.output_dir / MANIFEST_FILE

    @property
    def markdown_path(self) -> Path:
        return self.output_dir / MARKDOWN_FILE

    @property
    def html_path(self) -> Path:
        return self.output_dir / HTML_FILE

    @property
    def ok(self) -> bool:
        return self.status == SUCCESS


# --------------------------------------------------------------------------- running


def run_report(
    output_dir: str | os.PathLike | None = None,
    *,
    name: str | None = None,
    spec: str | None = None,
    dataset: str | os.PathLike | None = None,
    allow_unpinned: bool = False,
    preset: str | None = DEFAULT_PRESET,
    smoke: bool = False,
    parameters: Mapping[str, Any] | None = None,
    notebooks: Iterable[str] | None = None,
    notebook_dir: str | os.PathLike = NOTEBOOK_DIR,
    available: Sequence[str] | None = None,
    kernel_name: str = KERNEL_NAME,
    progress: bool = True,
    on_finish: Callable[[NotebookRun], None] | None = None,
    jobs: int = JOBS,
    replace: bool = False,
) -> ReportResult:
    """Execute the notebooks and write the report folder; return what happened.

    ``spec`` (a SPEC string or YAML file) is every notebook's run spec; without it ``preset``
    is. ``dataset`` and ``allow_unpinned`` put the spec on that dataset (``allow_unpinned``
    accepts one whose SHA-256 is not the pinned one; it warns, and the record says ``"pinned":
    false``). ``output_dir`` is the whole folder (default ``results/<name>``, ``name`` defaulting
    to :func:`default_name`, which names a subset of notebooks and a spec with overrides).
    ``notebooks`` selects from ``available`` (default :data:`NOTEBOOKS`), whose files live in
    ``notebook_dir``. A folder holding a report of another notebook set or spec is refused
    unless ``replace``. Notebook failures are recorded, not raised; invalid inputs (unknown
    spec or notebook, unreadable or unpinned dataset, a reserved parameter in ``parameters``,
    a foreign output folder) raise :class:`EvictlabError`, and a dataset that cannot be loaded
    leaves no folder behind. ``on_finish`` is called with each notebook's run as soon as it has
    finished; ``jobs`` notebooks run at once (:func:`execute_all`).
    """
    parameters = dict(parameters or {})
    reserved = sorted(set(parameters) & set(RESERVED_PARAMETERS))
    if reserved:
        raise ContractError(
            f"parameter(s) {', '.join(reserved)} are set by the report itself;"
            " use --spec, --dataset, --allow-unpinned, --preset or --smoke"
        )
    available = NOTEBOOKS if available is None else available
    selected = select_notebooks(notebooks, available)
    notebook_dir = Path(notebook_dir)
    missing = [nb for nb in selected if not (notebook_dir / nb).is_file()]
    if missing:
        raise ContractError(f"notebook file(s) not found in {notebook_dir}: {', '.join(missing)}")
    check_kernel(kernel_name)
    dataset_path = None if dataset is None else Path(dataset).resolve()
    spec_text = notebook_spec(spec, preset, dataset_path, allow_unpinned)  # every notebook's spec parameter
    run_spec = loaders.run_spec(spec_text)
    if output_dir is None:
        subset = None if list(selected) == list(available) else selected
        output_dir = RESULTS_DIR / check_name(name or default_name(run_spec, smoke, subset))
    root = Path(output_dir).resolve()
    figures_dir, tables_dir = root / FIGURES_SUBDIR, root / TABLES_SUBDIR
    notebook_parameters = {"spec": spec_text, "smoke": bool(smoke), "figures_dir": str(figures_dir),
                           "tables_dir": str(tables_dir), **parameters}
    runs = [NotebookRun(nb, notebook_dir / nb, root / NOTEBOOKS_SUBDIR / nb) for nb in selected]
    recorded = {
        "dataset": None if run_spec.dataset is None else str(run_spec.dataset),
        "allow_unpinned": bool(run_spec.allow_unpinned),
        "preset": run_spec.preset,
        **notebook_parameters,
        "notebooks": selected,
        "kernel_name": kernel_name,
    }
    # The inputs load before the folder is touched: a missing or unpinned dataset leaves no
    # folder behind, and a previous report in it untouched.
    inputs = describe_inputs(run_spec)

    def precheck() -> None:
        check_folder(root)
        if not replace:
            check_same_report(root, recorded)

    with results.run(root, KIND, parameters=recorded, existing="replace", precheck=precheck) as run:
        remove_previous_report(run)
        for folder in (figures_dir, tables_dir, root / NOTEBOOKS_SUBDIR):
            folder.mkdir(parents=True, exist_ok=True)
        run.record.dataset = inputs.record["dataset"]
        run.record.summary.update({key: value for key, value in inputs.record.items() if key != "dataset"})
        try:
            execute_all(runs, notebook_parameters, figures_dir, kernel_name=kernel_name, progress=progress,
                        on_finish=on_finish, jobs=jobs, order=longest_first(runs, run.previous))
        finally:  # what ran is recorded, also when interrupted
            _summarize(run, runs)
        failures = [notebook for notebook in runs if notebook.status != SUCCESS]
        error = "; ".join(describe_failure(notebook) for notebook in failures) or None
        saved = {key: table for key, table in read_tables(tables_dir).items()
                 if any(key.startswith(notebook.prefix) for notebook in runs)}
        try:
            found = findings(saved, {**inputs.record, "spec": loaders.spec_label(run_spec),
                                     "cases": len(inputs.pool_set.cases)},
                             inputs.pool_set.protocol.config.pool.qa_capacity)
        except (KeyError, ValueError, TypeError) as reading:  # a table a notebook changed by hand
            found, error = [], "; ".join(filter(None, [error, f"findings: {type(reading).__name__}: {reading}"]))
        status = ERROR if error else SUCCESS
        context = build_context(
            root, {**run.record.as_dict(), **inputs.record}, [notebook_view(notebook, root) for notebook in runs],
            found, list(saved.values()), status, error, manifest_file=MANIFEST_FILE,
            hidden_parameters=(*RESERVED_PARAMETERS, "notebooks", "kernel_name"),
        )
        run.write_text(MARKDOWN_FILE, render(context, "md"))
        run.write_text(HTML_FILE, render(context, "html"))
        shown = [figure for notebook in context["notebooks"] for figure in notebook.figures]
        run.write_bytes(PDF_FILE, report_pdf(context["title"], found, shown, context["figure_number"], root))
        run.record.summary["files"] = [MARKDOWN_FILE, HTML_FILE, PDF_FILE]
        if error:
            run.fail(error)
    return ReportResult(root, status, runs, error, list(saved.values()), found)


def notebook_view(run: NotebookRun, root: Path) -> NotebookView:
    """How the report lists ``run``: links relative to ``root``, its figures in saving order."""
    return NotebookView(
        name=run.name,
        status=run.status,
        duration="" if run.duration_seconds is None else f"{run.duration_seconds:.1f} s",
        ipynb=relative(run.output_path, root),
        html=relative(run.html_path, root) if run.html_path is not None else None,
        figures=[figure_view(path, root) for path in run.figures if path.suffix == ".png"],
        failure=describe_failure(run) if run.status == ERROR else None,
    )


def execute_all(
    runs: Sequence[NotebookRun],
    parameters: Mapping[str, Any],
    figures_dir: Path,
    *,
    kernel_name: str,
    progress: bool,
    on_finish: Callable[[NotebookRun], None] | None = None,
    jobs: int = JOBS,
    order: Sequence[int] | None = None,
) -> None:
    """Execute ``runs``, ``jobs`` at a time, each in a kernel of its own.

    ``order``: the indices of ``runs`` in the order to start them (default: as given; see
    :func:`longest_first`). The runs keep their places in ``runs``, which is the report's order.
    Notebooks are independent, so on two cores two run at once; each one's figures and tables
    are the files whose names start with its number (:attr:`NotebookRun.prefix`).
    ``on_finish`` is called from one thread at a time.
    """
    from tqdm.auto import tqdm

    jobs = max(1, min(jobs, len(runs)))
    queue = [runs[index] for index in (range(len(runs)) if order is None else order)]
    if sorted(map(id, queue)) != sorted(map(id, runs)):
        raise ValueError(f"order {order!r} does not list each of the {len(runs)} runs once")
    finished = threading.Lock()
    with tqdm(total=len(runs), desc="notebooks", unit="notebook", disable=not progress, file=sys.stderr) as bar:

        def work(notebook: NotebookRun) -> None:
            execute(notebook, parameters, figures_dir, kernel_name=kernel_name)
            with finished:
                bar.update()
                if on_finish is not None:
                    on_finish(notebook)

        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="report-notebook") as pool:
            futures = [pool.submit(work, notebook) for notebook in queue]
            try:
                for future in futures:
                    future.result()
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise


def longest_first(runs: Sequence[NotebookRun], previous: results.RunRecord | None) -> list[int]:
    """The indices of ``runs``, those that take longest first.

    With two notebooks at once, the report ends soonest when the long ones start early. A
    notebook's duration is the previous report's (its record), else the notebook's own
    estimate (``metadata.evictlab.typical_seconds``, measured on the demo: a fresh report starts
    the trace notebook first, not last); a notebook with neither keeps its suite place ahead.
    """
    listed = previous.summary.get("notebooks", []) if previous is not None else []
    entries = [*map(_estimate, runs), *(listed if isinstance(listed, list) else [])]  # the record's win
    timed = {entry["name"]: float(entry["duration_seconds"]) for entry in entries if isinstance(entry, dict)
             and isinstance(entry.get("duration_seconds"), (int, float)) and isinstance(entry.get("name"), str)}
    return sorted(range(len(runs)), key=lambda index: -timed.get(runs[index].name, math.inf))


def _estimate(run: NotebookRun) -> dict[str, Any] | None:
    """The notebook's own estimate as a record entry; None without one (or without a notebook)."""
    try:
        metadata = json.loads(run.input_path.read_text(encoding="utf-8"))["metadata"]
        return {"name": run.name, "duration_seconds": metadata["evictlab"]["typical_seconds"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def execute(
    run: NotebookRun,
    parameters: Mapping[str, Any],
    figures_dir: Path,
    *,
    kernel_name: str = KERNEL_NAME,
) -> NotebookRun:
    """Execute one notebook with papermill; record status, duration, error, figures and tables.

    papermill writes the executed copy cell by cell, so a failed notebook is kept up to and
    including the failing cell, with the exception in its output; the copy is also exported to
    HTML beside it. Its figures are the files of ``figures_dir`` named with its prefix, in the
    order it saved them; its tables those of ``parameters["tables_dir"]``.
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    started = time.perf_counter()
    run.status = RUNNING
    socket_dir = tempfile.TemporaryDirectory(prefix="evictlab-kernel-")
    try:
        papermill.execute_notebook(
            str(run.input_path),
            str(run.output_path),
            parameters=dict(parameters),
            kernel_name=kernel_name,
            progress_bar=False,
            log_output=False,
            extra_arguments=KERNEL_ARGUMENTS,
            shutdown_kernel="immediate",  # a graceful shutdown logs an interrupt of the idle kernel
            config=kernel_config(Path(socket_dir.name)),
        )
    except PapermillExecutionError as error:
        run.status = ERROR
        run.error = {
            "cell_index": error.cell_index,
            "execution_count": error.exec_count,
            "ename": error.ename,
            "evalue": error.evalue,
            "source": error.source,
        }
    except Exception as error:  # noqa: BLE001 - a dead kernel or unreadable notebook is this notebook's failure
        run.status = ERROR
        run.error = {"cell_index": None, "execution_count": None, "ename": type(error).__name__,
                     "evalue": str(error), "source": None}
    else:
        run.status = SUCCESS
    finally:
        socket_dir.cleanup()
    run.duration_seconds = time.perf_counter() - started
    if run.output_path.is_file():  # also a failed notebook's copy, up to its failing cell
        try:
            run.html_path = export_notebook_html(run.output_path)
        except Exception:  # noqa: BLE001 - the .ipynb stays the record; the report links what exists
            run.html_path = None
    run.figures = _named(figures_dir, run.prefix, FIGURE_SUFFIXES)
    tables_dir = parameters.get("tables_dir")
    run.tables = [] if tables_dir is None else _named(Path(tables_dir), run.prefix, (".csv", ".json"))
    return run


def _named(folder: Path, prefix: str, suffixes: Sequence[str]) -> list[Path]:
    """The files of ``folder`` whose names start with ``prefix``, in the order they were written."""
    if not folder.is_dir():
        return []
    found = [path for path in folder.iterdir() if path.name.startswith(prefix) and path.suffix in suffixes]
    return sorted(found, key=lambda path: (path.stat().st_mtime_ns, path.name))


def describe_failure(run: NotebookRun) -> str:
    """``02_retention.ipynb failed at In [4] (cell index 5): KeyError: 'x'``.

    ``In [n]`` is the execution count Jupyter shows; the cell index counts every cell of the
    executed copy from 0, including markdown and papermill's injected-parameters cell.
    """
    error = run.error or {}
    where = []
    if error.get("execution_count") is not None:
        where.append(f"at In [{error['execution_count']}]")
    if error.get("cell_index") is not None:
        where.append(f"(cell index {error['cell_index']})")
    where_text = (" " + " ".join(where)) if where else ""
    return f"{run.name} failed{where_text}: {error.get('ename', 'error')}: {error.get('evalue', '')}".rstrip(": ")


def _summarize(run: results.Run, runs: Sequence[NotebookRun]) -> None:
    """Each notebook's status, duration and figures into the record; its files as outputs."""
    root = run.folder
    run.record.summary["notebooks"] = [notebook.as_record(root) for notebook in runs]
    figures = sorted({_relative(path, root) for notebook in runs for path in notebook.figures})
    run.record.summary["figures"] = figures
    tables = sorted({_relative(path, root) for notebook in runs for path in notebook.tables})
    run.record.summary["tables"] = tables
    copies = [path for n in runs for path in (n.output_path, n.html_path) if path is not None and path.is_file()]
    for name in [*figures, *tables, *(_relative(path, root) for path in copies)]:
        run.add_output(name)


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


__all__ = [
    "MANIFEST_FILE",
    "NOTEBOOKS",
    "NOTEBOOK_DIR",
    "REPORT_KIND",
    "RESULTS_DIR",
    "NotebookRun",
    "ReportResult",
    "default_name",
    "describe_inputs",
    "execute",
    "parse_parameter_value",
    "run_report",
    "select_notebooks",
]
