"""The report's folder: its default name, what it may be written into, and what a rerun removes.

:func:`~evictlab.workbench.report.run_report` writes into ``results/<name>/`` (or
``--output-dir``). A name is one plain folder name, so a report never writes outside
``results/``; a folder that exists, is not empty and holds no report is refused; a rerun
removes exactly the files the previous report's record lists with their SHA-256 unchanged.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .. import results
from ..core.protocol import DEFAULT_PRESET
from ..errors import ContractError, OutputExistsError
from ..locks import is_lock_file

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
