"""``evictlab report``: run the notebook suite with papermill and assemble a report folder.

The suite is :data:`NOTEBOOKS`, an ordered list of files in ``evictlab/notebooks/``; adding a notebook
to the report is adding its file name there. Every notebook receives the same parameters
(``dataset``, ``allow_unpinned``, ``preset``, ``smoke``, ``figures_dir``, plus any
``-p NAME VALUE`` overrides) and saves its figures with :func:`evictlab.plots.save` into
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
report never writes outside ``results/``. The folder is locked while a report runs into it.

A failing notebook does not stop the others (they are independent); the report then names
the notebook, the failing cell and the exception, the manifest's status is ``error``, and
the command exits non-zero.
"""

from __future__ import annotations

import html
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from . import results, workbench, zoo
from .decisions import scenario_table
from .errors import ContractError, OutputExistsError
from .pools import PoolSet
from .protocol import DEFAULT_PRESET, preset_variant
from .qa import report as qa_report
from .resources import NOTEBOOK_DIR
from .traces import metrics as traces_metrics

RESULTS_DIR = Path("results")  # relative to the working directory

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
KIND = REPORT_KIND = "report"
MANIFEST_FILE = f"{KIND}{results.RECORD_SUFFIX}"  # the run record
LEGACY_MANIFEST, LEGACY_KIND = "report.json", "evictlab-report"  # before the run record
REPLACED = ("notebooks", "figures", "report.md", "report.html")  # what a rerun may remove
MARKDOWN_FILE = "report.md"
HTML_FILE = "report.html"
NOTEBOOKS_SUBDIR = "notebooks"
FIGURES_SUBDIR = "figures"
FIGURE_SUFFIXES = (".png", ".svg")

#: How the header names the embedded demo: synthetic data, never LongMemEval.
DEMO_LABEL = "embedded demo (synthetic text and ids; fact metadata made by the protocol's rules)"

#: Parameters the report sets itself; ``-p`` may not override them.
RESERVED_PARAMETERS = ("dataset", "allow_unpinned", "preset", "smoke", "figures_dir")

SUCCESS = "success"
ERROR = "error"
RUNNING = "running"
NOT_RUN = "not run"


# --------------------------------------------------------------------------- selection and naming


def default_name(
    preset: str | None = DEFAULT_PRESET, dataset: str | os.PathLike | None = None, smoke: bool = False
) -> str:
    """``report-<preset>``, with ``-demo`` on the embedded dataset and ``-smoke`` for smoke runs.

    The name depends only on the inputs, so rerunning the same command rewrites the same folder.
    """
    name = f"report-{preset or DEFAULT_PRESET}"
    if dataset is None:
        name += "-demo"
    if smoke:
        name += "-smoke"
    return name


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
    error: dict[str, Any] | None = None
    figures: list[Path] = field(default_factory=list)

    def as_record(self, root: Path) -> dict[str, Any]:
        return {
            "name": self.name,
            "input": str(self.input_path),
            "output": _relative(self.output_path, root),
            "status": self.status,
            "duration_seconds": None if self.duration_seconds is None else round(self.duration_seconds, 3),
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
) -> ReportResult:
    """Execute the notebooks and write the report folder; return what happened.

    ``output_dir`` is the whole folder (default ``results/<name>``, ``name`` defaulting to
    :func:`default_name`). ``notebooks`` selects from ``available`` (default
    :data:`NOTEBOOKS`), whose files live in ``notebook_dir``. ``allow_unpinned`` accepts a
    ``dataset`` whose SHA-256 is not the pinned one, for the key tables and every notebook (it
    warns, and the manifest's dataset record says ``"pinned": false``). Notebook failures are
    recorded, not raised; invalid inputs (unknown preset or notebook, unreadable or unpinned
    dataset, a reserved parameter in ``parameters``, a foreign output folder) raise
    :class:`EvictlabError`.
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
    if output_dir is None:
        output_dir = RESULTS_DIR / check_name(name or default_name(preset, dataset, smoke))
    root = Path(output_dir)
    root = root.resolve()
    figures_dir = root / FIGURES_SUBDIR
    notebook_parameters = {
        "dataset": None if dataset_path is None else str(dataset_path),
        "allow_unpinned": bool(allow_unpinned),
        "preset": preset,
        "smoke": bool(smoke),
        "figures_dir": str(figures_dir),
        **parameters,
    }
    runs = [NotebookRun(nb, notebook_dir / nb, root / NOTEBOOKS_SUBDIR / nb) for nb in selected]
    recorded = {**notebook_parameters, "notebooks": selected, "kernel_name": kernel_name}
    with results.run(root, KIND, parameters=recorded, existing="replace", precheck=lambda: check_folder(root)) as run:
        remove_previous_report(run)
        figures_dir.mkdir(parents=True, exist_ok=True)
        (root / NOTEBOOKS_SUBDIR).mkdir(parents=True, exist_ok=True)
        try:
            inputs = describe_inputs(dataset_path, preset, allow_unpinned=allow_unpinned)
            run.record.dataset = inputs.record["dataset"]
            run.record.summary.update({key: value for key, value in inputs.record.items() if key != "dataset"})
            execute_all(runs, notebook_parameters, figures_dir, kernel_name=kernel_name, progress=progress)
        finally:  # what ran is recorded, also when interrupted
            _summarize(run, runs)
        failures = [notebook for notebook in runs if notebook.status != SUCCESS]
        error = "; ".join(describe_failure(notebook) for notebook in failures) or None
        try:
            tables = key_tables(inputs, notebook_parameters)  # the notebooks' parameters, smoke included
        except Exception as table_error:  # noqa: BLE001 - recorded: the notebooks' results still deserve a report
            tables = []
            error = "; ".join(filter(None, [error, f"key tables: {type(table_error).__name__}: {table_error}"]))
        status = ERROR if error else SUCCESS
        document = build_document(root, {**run.record.as_dict(), **inputs.record}, runs, tables, status, error)
        run.write_text(MARKDOWN_FILE, render_markdown(document))
        run.write_text(HTML_FILE, render_html(document, title=f"evictlab report: {root.name}"))
        run.record.summary["files"] = [MARKDOWN_FILE, HTML_FILE]
        if error:
            run.fail(error)
    return ReportResult(root, status, runs, error, tables)


def execute_all(
    runs: Sequence[NotebookRun], parameters: Mapping[str, Any], figures_dir: Path, *, kernel_name: str, progress: bool
) -> None:
    from tqdm.auto import tqdm

    with tqdm(runs, desc="notebooks", unit="notebook", disable=not progress, file=sys.stderr) as bar:
        for notebook in bar:
            bar.set_postfix_str(notebook.name)
            execute(notebook, parameters, figures_dir, kernel_name=kernel_name)


def check_name(name: str) -> str:
    """A report name is one plain folder name: it cannot reach outside the results folder."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise ContractError(
            f"--name {name!r}: expected a plain folder name (no '/', not '..'); use --output-dir for a path"
        )
    return name


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


def check_folder(root: Path) -> None:
    """Refuse a non-empty folder that holds no report (neither a report record nor a report
    manifest of an earlier evictlab): evictlab never writes into a folder it did not make."""
    if results.read_record(root, KIND) is not None:
        return
    entries = [path for path in root.iterdir() if path.name != results.LOCK_FILE]
    if entries and not _legacy_report(root):
        raise OutputExistsError(
            f"{root} is not empty and holds no {MANIFEST_FILE}; refusing to write a report into it"
            " (choose another --output-dir or --name)"
        )


def _legacy_report(root: Path) -> bool:
    try:
        return json.loads((root / LEGACY_MANIFEST).read_bytes()).get("kind") == LEGACY_KIND
    except (OSError, ValueError, AttributeError, RecursionError):
        return False


def remove_previous_report(run: results.Run) -> None:
    """Remove the previous report's notebooks, figures and pages, so nothing stale is linked.

    Only files the previous run record lists, inside this folder and with the SHA-256 it
    recorded, are removed: a forged or edited record cannot make the report delete a file it
    did not write.
    """
    previous = run.previous.outputs if run.previous is not None else {}
    for name, written in previous.items():
        path = run.folder / name
        inside = path.resolve().parent.is_relative_to(run.folder.resolve()) and not path.is_symlink()
        if not (inside and path.is_file() and name.split("/")[0] in REPLACED):
            continue
        if results.file_digest(path) == written:
            path.unlink()


def execute(
    run: NotebookRun, parameters: Mapping[str, Any], figures_dir: Path, *, kernel_name: str = KERNEL_NAME
) -> NotebookRun:
    """Execute one notebook with papermill; record status, duration, error and new figures.

    papermill writes the executed copy cell by cell, so a failed notebook is kept up to and
    including the failing cell, with the exception in its output.
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
            # The kernel's own log (a warning about unencrypted local TCP on every start) is
            # noise here; cell errors reach the executed notebook and this function anyway.
            extra_arguments=["--IPKernelApp.log_level=ERROR"],
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
    after = _snapshot(figures_dir)
    # In the order the notebook saved them (modification time), which is its narrative order.
    changed = [path for path, stamp in after.items() if before.get(path) != stamp]
    run.figures = sorted(changed, key=lambda path: (after[path][1], path.name))
    return run


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
    for name in [*figures, *(_relative(n.output_path, root) for n in runs if n.output_path.is_file())]:
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


def describe_inputs(dataset: Path | None, preset: str, *, allow_unpinned: bool = False) -> Inputs:
    pool_set = workbench.load_pool_set(dataset, preset, allow_unpinned=allow_unpinned)
    protocol = pool_set.protocol
    return Inputs(
        pool_set,
        {
            "dataset": {
                **pool_set.dataset.record(),
                "path": str(pool_set.dataset.path),
                "embedded_demo": dataset is None,
            },
            "protocol": {"protocol_id": protocol.protocol_id, "artifacts": protocol.artifact_hashes()},
            "preset": preset,
            "variant": pool_set.variant.as_dict(),
        },
    )


@dataclass(frozen=True)
class Table:
    title: str
    note: str
    frame: pd.DataFrame


def key_tables(inputs: Inputs, parameters: Mapping[str, Any]) -> list[Table]:
    """Support retention of the run-policy evaluation, the QA statistics of a graded run, the
    policy zoo and the trace-mode capacity curves.

    The QA run is ``parameters["qa_run_dir"]`` when given (the same parameter notebook 06
    reads), else DeerFlow's published v3 run; ``parameters["smoke"]`` shortens the trace workload
    as it shortens notebook 10's.
    """
    return [
        _retention_key_table(inputs),
        *_qa_key_tables(parameters),
        *_zoo_key_tables(inputs.pool_set),
        _trace_key_table(bool(parameters.get("smoke"))),
    ]


def _retention_key_table(inputs: Inputs) -> Table:
    retained = scenario_table(workbench.retention(inputs.pool_set), intervals=True)
    retained.columns = [f"{policy} @ {capacity}" for policy, capacity in retained.columns]
    return Table(
        "Support retention (selector only, no LLM)",
        f"Data: {workbench.data_source(inputs.pool_set)}. Support fact retained / cases per scenario, for each"
        f" policy @ capacity, under preset {inputs.record['preset']} (the numbers 'evictlab run-policy' prints),"
        " each with its 95% Wilson interval in percent.",
        retained,
    )


def _qa_key_tables(parameters: Mapping[str, Any]) -> list[Table]:
    """Paired statistics and accuracy intervals of the QA run that notebook 06 shows."""
    qa_dir = parameters.get("qa_run_dir")
    run = qa_report.load_qa_run(qa_dir) if qa_dir else qa_report.load_reference_run()
    check = qa_report.recompute(run)
    stats = qa_report.stats_frame(check.stats)
    identical = ", ".join(
        f"{name}: {'identical' if same else 'absent' if same is None else 'DIFFERENT'}"
        for name, same in check.identical.items()
    )
    source = f"graded run {run.path}" if qa_dir else f"DeerFlow's published run {run.path.name} ({run.path})"
    # The interval parameters notebook 06 reads, so that the report and the notebook agree.
    method, alpha = parameters.get("interval_method", "wilson"), parameters.get("alpha", qa_report.ALPHA)
    accuracy = qa_report.accuracy_table(
        qa_report.accuracy_frame(qa_report.rows_frame(run.rows), method=method, alpha=alpha)
    )
    accuracy.index = [group for _, group in accuracy.index]
    return [
        Table(
            "Live QA: paired statistics",
            f"Data: {run.source}. From {source}, recomputed from its rows with evictlab.qa.stats; stored files vs"
            f" recomputed: {identical}. Beside the published percentile bootstrap: the Holm-adjusted McNemar p"
            " over the official and synthetic suites and Newcombe's paired interval; suites under 30 pairs carry"
            " a note (notebook 06 adds the minimum detectable effect).",
            qa_report.stats_table(stats),
        ),
        Table(
            f"Live QA: accuracy with {qa_report.interval_label(method, alpha)} intervals",
            f"Data: {run.source}. Correct / cases, accuracy and interval per scenario and suite.",
            accuracy,
        ),
    ]


def _zoo_key_tables(pool_set: PoolSet) -> list[Table]:
    """One table per capacity: support retained by every registered policy (notebook 08)."""
    zoo_table = zoo.zoo_pivot(zoo.zoo_summary(zoo.zoo_rows(pool_set)), scenarios=True)
    return [
        Table(
            f"Policy zoo at capacity {capacity}",
            f"Data: {workbench.data_source(pool_set)}. Support fact retained / cases per scenario for"
            " every registered policy, on the same pools and clock. confidence and hybrid-v1 break"
            " ties by input order (DeerMem's rule);"
            " every other policy reports its exact expectation over random orders of tied facts,"
            " and the tied column counts the decisions a tie at the cut line settled. random is"
            " its exact expectation, memorybank-seeded a mean over 100 seeds, keep-all is"
            " evaluated without a cap (notebook 08 has the figure and explanations).",
            zoo_table[capacity],
        )
        for capacity in zoo_table.columns.get_level_values("capacity").unique()
    ]


def _trace_key_table(smoke: bool) -> Table:
    """Capacity curves of the default generated workload with both bounds (notebook 10)."""
    summary = traces_metrics.default_workload_summary(smoke=smoke)
    gaps = " ".join(traces_metrics.describe_gap(traces_metrics.largest_gap(summary)))
    return Table(
        "Memory over time: capacity curves on the default generated workload",
        "Answerable rate (regret = exact offline optimum - policy) per capacity, replaying the"
        f" {'10-day smoke version of the ' if smoke else ''}default synthetic workload of 'evictlab trace"
        " generate' (seed 0) in DeerMem's update order; keep-all has no cap. Where hybrid-v1 and"
        f" confidence differ most: {gaps}",
        traces_metrics.curve_table(summary),
    )


# --------------------------------------------------------------------------- the document


@dataclass(frozen=True)
class Link:
    text: str
    href: str


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Paragraph:
    parts: tuple[str | Link, ...]


@dataclass(frozen=True)
class Bullets:
    items: tuple[tuple[str | Link, ...], ...]


@dataclass(frozen=True)
class TableBlock:
    frame: pd.DataFrame


@dataclass(frozen=True)
class Image:
    src: str
    alt: str
    svg: str | None


Block = Heading | Paragraph | Bullets | TableBlock | Image


def build_document(
    root: Path,
    manifest: Mapping[str, Any],
    runs: Sequence[NotebookRun],
    tables: Sequence[Table],
    status: str,
    error: str | None,
) -> list[Block]:
    prov = manifest["provenance"]
    git = prov.get("git") or {}
    dataset = manifest.get("dataset", {})
    reserved = (*RESERVED_PARAMETERS, "notebooks", "kernel_name")
    extra = {key: value for key, value in manifest["parameters"].items() if key not in reserved}
    blocks: list[Block] = [Heading(1, f"evictlab report: {root.name}")]
    blocks.append(Paragraph((f"Status: {status}." + (f" {error}" if error else ""),)))
    blocks.append(
        Bullets(
            (
                (f"evictlab {prov.get('evictlab_version')}, git {git.get('head') or 'unknown'}"
                 f"{' (dirty)' if git.get('dirty') else ''}, Python {prov.get('python')}",),
                (f"dataset: {DEMO_LABEL + ' ' if dataset.get('embedded_demo') else ''}{dataset.get('path')},"
                 f" sha256 {dataset.get('sha256')}{'' if dataset.get('pinned', True) else ' (unpinned)'}",),
                (f"preset {manifest.get('preset')}: "
                 + ", ".join(f"{k}={v}" for k, v in (manifest.get("variant") or {}).items()),),
                (f"protocol {manifest.get('protocol', {}).get('protocol_id')}; smoke={manifest['parameters']['smoke']};"
                 f" started {manifest['started_at']}",),
                ("notebook parameters: " + ", ".join(f"{key}={value!r}" for key, value in extra.items())
                 if extra else "no extra notebook parameters",),
                ("manifest: ", Link(MANIFEST_FILE, MANIFEST_FILE)),
            )
        )
    )
    blocks.append(Heading(2, "Notebooks"))
    items = []
    for run in runs:
        duration = "" if run.duration_seconds is None else f" in {run.duration_seconds:.1f} s"
        detail = f": {describe_failure(run)}" if run.status == ERROR else ""
        items.append((Link(run.name, _relative(run.output_path, root)),
                      f" {run.status}{duration}, {len(_pngs(run))} figure(s){detail}"))
    blocks.append(Bullets(tuple(items)))
    for table in tables:
        blocks += [Heading(2, table.title), Paragraph((table.note,)), TableBlock(table.frame)]
    blocks.append(Heading(2, "Figures"))
    for run in runs:
        pngs = _pngs(run)
        if not pngs:
            continue
        blocks.append(Heading(3, Path(run.name).stem))
        for png in pngs:
            svg = png.with_suffix(".svg")
            blocks.append(
                Image(_relative(png, root), figure_caption(png), _relative(svg, root) if svg.exists() else None)
            )
    return blocks


def _pngs(run: NotebookRun) -> list[Path]:
    """The run's figures, one file each: the PNG (its SVG twin, when saved, sits beside it)."""
    return [path for path in run.figures if path.suffix == ".png"]


def figure_caption(png: Path) -> str:
    """The title :func:`evictlab.plots.save` stored in the PNG, else the file stem."""
    from PIL import Image as PILImage

    try:
        with PILImage.open(png) as image:
            title = image.text.get("Title")  # type: ignore[attr-defined]
    except OSError:
        title = None
    # A figure's source line sits under its title; one line reads better in a caption.
    return " — ".join(title.splitlines()) if title else png.stem.replace("_", " ")


def render_markdown(blocks: Sequence[Block]) -> str:
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            lines += ["#" * block.level + " " + block.text, ""]
        elif isinstance(block, Paragraph):
            lines += [_md_inline(block.parts), ""]
        elif isinstance(block, Bullets):
            lines += [f"* {_md_inline(item)}" for item in block.items] + [""]
        elif isinstance(block, TableBlock):
            lines += [*markdown_table(block.frame), ""]
        elif isinstance(block, Image):
            lines.append(f"![{_md_escape(block.alt)}]({block.src})")
            lines += [
                f"*{_md_escape(block.alt)}* ([PNG]({block.src})" + (f", [SVG]({block.svg}))" if block.svg else ")"),
                "",
            ]
    return "\n".join(lines).rstrip("\n") + "\n"


def markdown_table(frame: pd.DataFrame) -> list[str]:
    """A GitHub-flavoured Markdown table of ``frame`` with its index as the first column."""
    index_name = " / ".join(str(n) for n in frame.index.names if n is not None)
    header = [index_name] + [_cell(c) for c in frame.columns]
    rows = [[_cell(i)] + [_cell(v) for v in values] for i, values in zip(frame.index, frame.itertuples(index=False))]
    lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return lines


def _cell(value: Any) -> str:
    if isinstance(value, tuple):
        return " / ".join(map(str, value))
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value)


def _md_cell(text: str) -> str:
    """Table cell text: a bare ``|`` would end the cell, a newline the row."""
    return text.replace("|", "\\|").replace("\n", " ")


def _md_escape(text: str) -> str:
    """Link or image text: brackets would end it early."""
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def _md_inline(parts: Iterable[str | Link]) -> str:
    return "".join(f"[{_md_escape(p.text)}]({p.href})" if isinstance(p, Link) else p for p in parts)


_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-style: italic; color: #444; }
"""


def render_html(blocks: Sequence[Block], *, title: str) -> str:
    """A self-contained HTML page (inline CSS, no scripts); images are linked, not embedded."""
    body: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{_html_inline(block.parts)}</p>")
        elif isinstance(block, Bullets):
            body.append("<ul>" + "".join(f"<li>{_html_inline(item)}</li>" for item in block.items) + "</ul>")
        elif isinstance(block, TableBlock):
            body.append(block.frame.to_html(border=0, na_rep="", escape=True))
        elif isinstance(block, Image):
            links = f'<a href="{html.escape(block.src)}">PNG</a>'
            if block.svg:
                links += f', <a href="{html.escape(block.svg)}">SVG</a>'
            body.append(
                f'<figure><img src="{html.escape(block.src)}" alt="{html.escape(block.alt)}">'
                f"<figcaption>{html.escape(block.alt)} ({links})</figcaption></figure>"
            )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def _html_inline(parts: Iterable[str | Link]) -> str:
    return "".join(
        f'<a href="{html.escape(p.href)}">{html.escape(p.text)}</a>' if isinstance(p, Link) else html.escape(p)
        for p in parts
    )


__all__ = [
    "NOTEBOOKS",
    "NOTEBOOK_DIR",
    "RESULTS_DIR",
    "NotebookRun",
    "ReportResult",
    "default_name",
    "execute",
    "parse_parameter_value",
    "run_report",
    "select_notebooks",
]
