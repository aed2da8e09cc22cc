"""The report's folder: its default name, what it may be written into, and what a rerun removes.

:func:`~evictlab.workbench.report.run_report` writes into ``results/<name>/`` (or
``--output-dir``). A name is one plain folder name, so a report never writes outside
``results/``; a folder that exists, is not empty and holds no report is refused; a rerun
removes exactly the files the previous report's record lists with their SHA-256 unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import results
from ..core.protocol import DEFAULT_PRESET
from ..errors import ContractError, OutputExistsError
from ..locks import is_lock_file
from ..readers import MAX_RECORD_BYTES, parse_json, read_bounded

RESULTS_DIR = Path("results")  # relative to the working directory
KIND = REPORT_KIND = "report"
MANIFEST_FILE = f"{KIND}{results.RECORD_SUFFIX}"  # the run record
LEGACY_MANIFEST, LEGACY_KIND = "report.json", "evictlab-report"  # before the run record
REPLACED = ("notebooks", "figures", "report.md", "report.html")  # what a rerun may remove


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


def check_name(name: str) -> str:
    """A report name is one plain folder name: it cannot reach outside the results folder."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise ContractError(
            f"--name {name!r}: expected a plain folder name (no '/', not '..'); use --output-dir for a path"
        )
    return name


def check_folder(root: Path) -> None:
    """Refuse a non-empty folder that holds no report (neither a report record nor a report
    manifest of an earlier evictlab): evictlab never writes into a folder it did not make."""
    if results.read_record(root, KIND) is not None:
        return
    entries = [path for path in root.iterdir() if not is_lock_file(path.name)]
    if entries and not _legacy_report(root):
        raise OutputExistsError(
            f"{root} is not empty and holds no {MANIFEST_FILE}; refusing to write a report into it"
            " (choose another --output-dir or --name)"
        )


def _legacy_report(root: Path) -> bool:
    try:
        manifest = parse_json(read_bounded(root / LEGACY_MANIFEST, MAX_RECORD_BYTES), where=LEGACY_MANIFEST)
    except ContractError:
        return False
    return isinstance(manifest, dict) and manifest.get("kind") == LEGACY_KIND


def remove_previous_report(run: results.Run) -> None:
    """Remove the previous report's notebooks, figures and pages, so nothing stale is linked.

    Only files the previous run wrote itself are removed: listed in its record, inside this
    folder, and still the very file it wrote (:meth:`~evictlab.results.Run.wrote_before`: the
    file's stamp and SHA-256 as recorded). A forged or edited record cannot make the report
    delete a file it did not write, even one whose hash it copied.
    """
    previous = run.previous.outputs if run.previous is not None else {}
    for name in previous:
        path = run.folder / name
        inside = path.resolve().parent.is_relative_to(run.folder.resolve())
        if inside and name.split("/")[0] in REPLACED and run.wrote_before(name):
            path.unlink()
