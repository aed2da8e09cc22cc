"""``evictlab report``: run the notebook suite with papermill and assemble a report folder.

The suite is :data:`NOTEBOOKS`, an ordered list of files in ``notebooks/``; adding a notebook
to the report is adding its file name there. Every notebook receives the same parameters
(``spec``, the SPEC string of ``--preset``, ``--dataset`` and ``--allow-unpinned`` built by
:func:`evictlab.workbench.loaders.spec_text`; ``smoke``; ``figures_dir``; plus any
``-p NAME VALUE`` overrides) and saves its figures with :func:`evictlab.workbench.plots.save` into
``figures_dir``.

A report folder (``results/<name>/`` in the working directory by default) holds::

    notebooks/<notebook>.ipynb   the executed copies (a failed one is kept up to its error)
    figures/<figure>.png|.svg    every figure the notebooks saved
    report.md, report.html       key tables and every figure, linked relatively
    report.run.json              the run record (:func:`evictlab.results.run`): provenance,
                                 parameters, dataset and protocol hashes, per-notebook
                                 status and duration, every file's SHA-256, overall status

A report is a regenerated artifact, so ``make report`` can run again on the same checkout:
a rerun into a folder that holds a previous report replaces that report. Of the previous
report's notebooks, figures and pages, exactly the files its record lists with their SHA-256
unchanged are removed first, so nothing stale is linked and nothing the report did not write
is ever deleted (a forged or edited record deletes nothing else). A folder that exists, is
not empty and holds no report is refused, and ``--name`` must be a plain folder name, so the
report never writes outside ``results/`` (:mod:`evictlab.workbench.report_folder` holds these
rules). The folder is locked while a report runs into it.

A failing notebook does not stop the others (they are independent); the report then names
the notebook, the failing cell and the exception, the manifest's status is ``error``, and
the command exits non-zero.
"""

from __future__ import annotations

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
from ..core.demo import DEMO_PIN
from ..core.pools import PoolSet
from ..core.protocol import DEFAULT_PRESET, preset_variant
from ..core.runspec import RunSpec
from ..errors import ContractError
from ..resources import NOTEBOOK_DIR
from . import loaders
from .plots.saving import FIGURE_LOG_VARIABLE
from .report_document import (
    NotebookView,
    build_context,
    export_notebook_html,
    figure_view,
    relative,
    render,
)
from .report_findings import Analysis, Finding, Table, analyse
from .report_folder import (
    KIND,
    MANIFEST_FILE,
    REPORT_KIND,
    RESULTS_DIR,
    check_folder,
    check_name,
    default_name,
    remove_previous_report,
)
from .report_kernels import KERNEL_ARGUMENTS, KernelPlan, WarmKernels, cpu_seconds, notebook_imports

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

KERNEL_NAME = "python3"
#: Notebooks executed at once (each in its own kernel process): one per core of a 2-core machine.
JOBS = 2
MARKDOWN_FILE = "report.md"
HTML_FILE = "report.html"
NOTEBOOKS_SUBDIR = "notebooks"
FIGURES_SUBDIR = "figures"
FIGURE_SUFFIXES = (".png", ".svg")

#: How the header names the embedded demo: synthetic data, never LongMemEval.

#: Parameters the report sets itself; ``-p`` may not override them. The notebooks take the
#: first three in ``spec``; they stay reserved, so ``-p preset ...`` is an error, not a no-op.
RESERVED_PARAMETERS = ("dataset", "allow_unpinned", "preset", "spec", "smoke", "figures_dir")

SUCCESS = "success"
ERROR = "error"
RUNNING = "running"
NOT_RUN = "not run"


# --------------------------------------------------------------------------- selection and naming


def select_notebooks(selection: Iterable[str] | None, available: Sequence[str] = NOTEBOOKS) -> list[str]:
    """The notebooks of ``available`` named by ``selection`` (all when None), in suite order.

    An item matches a notebook by file name, by stem (``01_pools``) or by its number prefix
    (``01``).
    """
    if selection is None:
        return list(available)
    chosen = set()
    for item in selection:
        item = item.strip()
        matches = [nb for nb in available if item in (nb, Path(nb).stem) or Path(nb).stem.startswith(f"{item}_")]
        if not item or not matches:
            raise ContractError(f"no notebook {item!r} in the report; known: {', '.join(available)}")
        chosen.update(matches)
    return [nb for nb in available if nb in chosen]


def parse_parameter_value(text: str) -> Any:
    """A ``-p NAME VALUE`` value: ``None``/``True``/``False``, an int, a float, else the string."""
    literals = {"None": None, "none": None, "null": None, "True": True, "true": True, "False": False, "false": False}
    if text in literals:
        return literals[text]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


# --------------------------------------------------------------------------- results


@dataclass
class NotebookRun:
    """One notebook's execution: where it came from and went, how it ended and what it drew."""

    name: str
    input_path: Path
    output_path: Path
    status: str = NOT_RUN
    duration_seconds: float | None = None
    cpu_seconds: float | None = None  # its kernel's CPU time, start-up and warm imports included
    error: dict[str, Any] | None = None
    figures: list[Path] = field(default_factory=list)
    html_path: Path | None = None  # the executed copy exported to HTML, when that worked

    def as_record(self, root: Path) -> dict[str, Any]:
        return {
            "name": self.name,
            "input": str(self.input_path),
            "output": _relative(self.output_path, root),
            "html": None if self.html_path is None else _relative(self.html_path, root),
            "status": self.status,
            "duration_seconds": None if self.duration_seconds is None else round(self.duration_seconds, 3),
            "cpu_seconds": None if self.cpu_seconds is None else round(self.cpu_seconds, 3),
            "error": self.error,
            "figures": [_relative(path, root) for path in self.figures],
        }


@dataclass
class ReportResult:
    output_dir: Path
    status: str
    notebooks: list[NotebookRun]
    error: str | None = None
    tables: list[Table] = field(default_factory=list)  # the key tables shown in report.md
    findings: list[Finding] = field(default_factory=list)  # the findings report.md opens with

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
) -> ReportResult:
    """Execute the notebooks and write the report folder; return what happened.

    ``output_dir`` is the whole folder (default ``results/<name>``, ``name`` defaulting to
    :func:`default_name`). ``notebooks`` selects from ``available`` (default
    :data:`NOTEBOOKS`), whose files live in ``notebook_dir``. ``allow_unpinned`` accepts a
    ``dataset`` whose SHA-256 is not the pinned one, for the key tables and every notebook (it
    warns, and the manifest's dataset record says ``"pinned": false``). Notebook failures are
    recorded, not raised; invalid inputs (unknown preset or notebook, unreadable or unpinned
    dataset, a reserved parameter in ``parameters``, a foreign output folder) raise
    :class:`EvictlabError`, and a dataset that cannot be loaded leaves no folder behind.
    ``on_finish`` is called with each notebook's run as soon as it has finished; ``jobs``
    notebooks run at once (:func:`execute_all`).
    """
    preset = preset or DEFAULT_PRESET
    preset_variant(preset)  # an unknown preset fails before anything is written
    parameters = dict(parameters or {})
    reserved = sorted(set(parameters) & set(RESERVED_PARAMETERS))
    if reserved:
        raise ContractError(
            f"parameter(s) {', '.join(reserved)} are set by the report itself;"
            " use --dataset, --allow-unpinned, --preset or --smoke"
        )
    selected = select_notebooks(notebooks, NOTEBOOKS if available is None else available)
    notebook_dir = Path(notebook_dir)
    missing = [nb for nb in selected if not (notebook_dir / nb).is_file()]
    if missing:
        raise ContractError(f"notebook file(s) not found in {notebook_dir}: {', '.join(missing)}")
    check_kernel(kernel_name)
    dataset_path = None if dataset is None else Path(dataset).resolve()
    spec = loaders.spec_text(preset, dataset_path, allow_unpinned)  # every notebook's spec parameter
    if output_dir is None:
        output_dir = RESULTS_DIR / check_name(name or default_name(preset, dataset, smoke))
    root = Path(output_dir)
    root = root.resolve()
    figures_dir = root / FIGURES_SUBDIR
    notebook_parameters = {"spec": spec, "smoke": bool(smoke), "figures_dir": str(figures_dir), **parameters}
    runs = [NotebookRun(nb, notebook_dir / nb, root / NOTEBOOKS_SUBDIR / nb) for nb in selected]
    recorded = {
        "dataset": None if dataset_path is None else str(dataset_path),
        "allow_unpinned": bool(allow_unpinned),
        "preset": preset,
        **notebook_parameters,
        "notebooks": selected,
        "kernel_name": kernel_name,
    }
    # The inputs load before the folder is touched: a missing or unpinned dataset leaves no
    # folder behind, and a previous report in it untouched.
    inputs = describe_inputs(spec)
    with results.run(root, KIND, parameters=recorded, existing="replace", precheck=lambda: check_folder(root)) as run:
        remove_previous_report(run)
        figures_dir.mkdir(parents=True, exist_ok=True)
        (root / NOTEBOOKS_SUBDIR).mkdir(parents=True, exist_ok=True)
        run.record.dataset = inputs.record["dataset"]
        run.record.summary.update({key: value for key, value in inputs.record.items() if key != "dataset"})
        # The findings need only the pools: they are computed while the kernels work.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="report-findings") as findings:
            analysis_future = findings.submit(analyse, inputs.pool_set, preset=preset, dataset=dataset_path,
                                              allow_unpinned=allow_unpinned, parameters=parameters, smoke=smoke)
            try:
                execute_all(runs, notebook_parameters, figures_dir, kernel_name=kernel_name, progress=progress,
                            on_finish=on_finish, jobs=jobs, order=longest_first(runs, run.previous))
            except BaseException:
                analysis_future.cancel()
                raise
            finally:  # what ran is recorded, also when interrupted
                _summarize(run, runs)
            failures = [notebook for notebook in runs if notebook.status != SUCCESS]
            error = "; ".join(describe_failure(notebook) for notebook in failures) or None
            try:
                analysis = analysis_future.result()
            except Exception as analysis_error:  # noqa: BLE001 - recorded: the notebooks still deserve a report
                analysis = Analysis([], [])
                error = "; ".join(filter(None, [error, f"findings: {type(analysis_error).__name__}: {analysis_error}"]))
        status = ERROR if error else SUCCESS
        context = build_context(
            root, {**run.record.as_dict(), **inputs.record}, [notebook_view(notebook, root) for notebook in runs],
            analysis.findings, analysis.tables, status, error, manifest_file=MANIFEST_FILE,
            hidden_parameters=(*RESERVED_PARAMETERS, "notebooks", "kernel_name"),
        )
        run.write_text(MARKDOWN_FILE, render(context, "md"))
        run.write_text(HTML_FILE, render(context, "html"))
        run.record.summary["files"] = [MARKDOWN_FILE, HTML_FILE]
        if error:
            run.fail(error)
    return ReportResult(root, status, runs, error, analysis.tables, analysis.findings)


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
    """Execute ``runs``, ``jobs`` at a time, each on a kernel warmed beforehand.

    ``order``: the indices of ``runs`` in the order to start them (default: as given; see
    :func:`longest_first`). The runs keep their places in ``runs``, which is the report's order.

    Notebooks are independent, so on two cores two run at once. Each kernel appends the
    figures its notebook saves to a log of its own (:data:`evictlab.plots.saving.FIGURE_LOG_VARIABLE`),
    which tells the runs' figures apart whatever else is saving at the same time.
    ``on_finish`` is called from one thread at a time.
    """
    from tqdm.auto import tqdm

    jobs = max(1, min(jobs, len(runs)))
    queue = [runs[index] for index in (range(len(runs)) if order is None else order)]
    if sorted(map(id, queue)) != sorted(map(id, runs)):
        raise ValueError(f"order {order!r} does not list each of the {len(runs)} runs once")
    finished = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="evictlab-report-") as scratch, \
            tqdm(total=len(runs), desc="notebooks", unit="notebook", disable=not progress, file=sys.stderr) as bar:
        # Step i of the queue runs on kernel i, which logs its figures to logs[i].
        logs = [Path(scratch) / f"{step}.figures" for step in range(len(queue))]
        plans = [KernelPlan({FIGURE_LOG_VARIABLE: str(log)}, notebook_imports(notebook.input_path))
                 for notebook, log in zip(queue, logs)]

        def work(step: int) -> None:
            notebook = queue[step]
            kernel = kernels.take(step)
            try:
                execute(notebook, parameters, figures_dir, kernel_name=kernel_name, km=kernel, figure_log=logs[step])
                notebook.cpu_seconds = cpu_seconds(kernel)
            finally:
                kernels.release(step)
            with finished:
                bar.update()
                if on_finish is not None:
                    on_finish(notebook)

        with WarmKernels(kernel_name, plans, ahead=jobs) as kernels, \
                ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="report-notebook") as pool:
            futures = [pool.submit(work, step) for step in range(len(queue))]
            try:
                for future in futures:
                    future.result()
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise


def longest_first(runs: Sequence[NotebookRun], previous: results.RunRecord | None) -> list[int]:
    """The indices of ``runs``, those a previous report in the folder took longest to run first.

    With two notebooks at once, the report ends soonest when the long ones start early. Their
    CPU time (else their duration) comes from the previous report's record; a notebook it does
    not list, or no previous report, keeps its suite place ahead of the timed ones.
    """
    timed: dict[str, float] = {}
    listed = previous.summary.get("notebooks", []) if previous is not None else []
    for entry in listed if isinstance(listed, list) else []:
        seconds = entry.get("cpu_seconds") or entry.get("duration_seconds") if isinstance(entry, dict) else None
        if isinstance(seconds, (int, float)) and isinstance(entry.get("name"), str):
            timed[entry["name"]] = float(seconds)
    return sorted(range(len(runs)), key=lambda index: -timed.get(runs[index].name, math.inf))



def check_kernel(kernel_name: str) -> None:
    """Refuse a kernel that would not run this interpreter (it would not see this evictlab)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(kernel_name)
    except NoSuchKernel:
        raise ContractError(
            f"no Jupyter kernel {kernel_name!r}; install one with '{sys.executable} -m ipykernel install --sys-prefix'"
        ) from None
    command = spec.argv[0] if spec.argv else ""
    # jupyter_client starts sys.executable for these names (KernelManager.format_kernel_cmd).
    same_interpreter = {"python", f"python{sys.version_info[0]}", f"python{sys.version_info[0]}.{sys.version_info[1]}"}
    if command in same_interpreter or Path(command).absolute() == Path(sys.executable).absolute():
        return
    raise ContractError(
        f"Jupyter kernel {kernel_name!r} ({spec.resource_dir}) runs {command}, not {sys.executable};"
        f" reinstall it with '{sys.executable} -m ipykernel install --sys-prefix'"
    )


def execute(
    run: NotebookRun,
    parameters: Mapping[str, Any],
    figures_dir: Path,
    *,
    kernel_name: str = KERNEL_NAME,
    km: Any = None,
    figure_log: Path | None = None,
) -> NotebookRun:
    """Execute one notebook with papermill; record status, duration, error and new figures.

    ``km``: a started :class:`jupyter_client.KernelManager` to run it on (see
    :class:`~evictlab.workbench.report_kernels.WarmKernels`); without one papermill starts its own
    kernel. papermill writes the executed copy cell by cell, so a failed notebook is kept up to
    and including the failing cell, with the exception in its output; the copy is also exported
    to HTML beside it. ``figure_log``: the file this notebook's kernel lists its saved figures
    in (see :func:`execute_all`); without one, the figures are the files of ``figures_dir``
    that changed while it ran, which holds only while no other notebook runs.
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    before = _snapshot(figures_dir)
    started = time.perf_counter()
    run.status = RUNNING
    try:
        papermill.execute_notebook(
            str(run.input_path),
            str(run.output_path),
            parameters=dict(parameters),
            kernel_name=kernel_name,
            progress_bar=False,
            log_output=False,
            extra_arguments=KERNEL_ARGUMENTS,
            **({"km": km} if km is not None else {}),
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
    run.duration_seconds = time.perf_counter() - started
    if run.output_path.is_file():  # also a failed notebook's copy, up to its failing cell
        try:
            run.html_path = export_notebook_html(run.output_path)
        except Exception:  # noqa: BLE001 - the .ipynb stays the record; the report links what exists
            run.html_path = None
    if figure_log is not None:
        run.figures = _logged_figures(figure_log)
        return run
    after = _snapshot(figures_dir)
    # In the order the notebook saved them (modification time), which is its narrative order.
    changed = [path for path, stamp in after.items() if before.get(path) != stamp]
    run.figures = sorted(changed, key=lambda path: (after[path][1], path.name))
    return run


def _logged_figures(log: Path) -> list[Path]:
    """The figure files a kernel logged, in the order they were last saved, if they still exist."""
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:  # the notebook saved no figure
        return []
    last = {Path(line): index for index, line in enumerate(lines) if line}
    return [path for path in sorted(last, key=last.__getitem__)
            if path.suffix in FIGURE_SUFFIXES and path.is_file()]


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


def _snapshot(folder: Path) -> dict[Path, tuple[int, int]]:
    """Figure files by (inode, mtime): an atomic rewrite changes both, even with equal bytes."""
    if not folder.is_dir():
        return {}
    return {
        path: (path.stat().st_ino, path.stat().st_mtime_ns)
        for path in folder.iterdir()
        if path.suffix in FIGURE_SUFFIXES
    }


def _summarize(run: results.Run, runs: Sequence[NotebookRun]) -> None:
    """Each notebook's status, duration and figures into the record; its files as outputs."""
    root = run.folder
    run.record.summary["notebooks"] = [notebook.as_record(root) for notebook in runs]
    figures = sorted({_relative(path, root) for notebook in runs for path in notebook.figures})
    run.record.summary["figures"] = figures
    copies = [path for n in runs for path in (n.output_path, n.html_path) if path is not None and path.is_file()]
    for name in [*figures, *(_relative(path, root) for path in copies)]:
        run.add_output(name)


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------- inputs and key tables


@dataclass(frozen=True)
class Inputs:
    """The pools the report's tables are computed from, and their identity for the manifest."""

    pool_set: PoolSet
    record: dict[str, Any]


def describe_inputs(spec: str | RunSpec) -> Inputs:
    """The pools of ``spec`` (the notebooks' own spec parameter) and their record."""
    spec = loaders.run_spec(spec)
    pool_set = loaders.load_pool_set(spec)
    protocol = pool_set.protocol
    return Inputs(
        pool_set,
        {
            "dataset": {
                **pool_set.dataset.record(),
                "path": str(pool_set.dataset.path),
                "embedded_demo": pool_set.dataset.pin == DEMO_PIN,
            },
            "protocol": {"protocol_id": protocol.protocol_id, "artifacts": protocol.artifact_hashes()},
            "preset": spec.preset,
            "variant": pool_set.variant.as_dict(),
        },
    )


__all__ = [
    "MANIFEST_FILE",
    "NOTEBOOKS",
    "NOTEBOOK_DIR",
    "REPORT_KIND",
    "RESULTS_DIR",
    "NotebookRun",
    "ReportResult",
    "default_name",
    "execute",
    "parse_parameter_value",
    "run_report",
    "select_notebooks",
]
