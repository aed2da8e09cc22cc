"""The report's inputs and folder: which notebooks and spec, its default name, what it may be
written into, and what a rerun removes.

:func:`~evictlab.workbench.report.run_report` writes into ``results/<name>/`` (or
``--output-dir``). A name is one plain folder name, so a report never writes outside
``results/``; a folder that exists, is not empty and holds no report is refused, and so is
one holding a report of another notebook set or spec (unless ``--replace``); a rerun removes
exactly the files the previous report's record lists with their SHA-256 unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import results
from ..core.demo import DEMO_PIN
from ..core.pools import PoolSet
from ..core.protocol import DEFAULT_PRESET
from ..core.runspec import RunSpec, parse_spec
from ..errors import ContractError, OutputExistsError
from ..locks import is_lock_file
from ..readers import MAX_RECORD_BYTES, parse_json, read_bounded
from . import loaders

RESULTS_DIR = Path("results")  # relative to the working directory
KIND = REPORT_KIND = "report"
MANIFEST_FILE = f"{KIND}{results.RECORD_SUFFIX}"  # the run record
LEGACY_MANIFEST, LEGACY_KIND = "report.json", "evictlab-report"  # before the run record
TABLES_SUBDIR = "tables"
REPLACED = ("notebooks", "figures", TABLES_SUBDIR, "report.md", "report.html", "report.pdf")  # what a rerun may remove
#: What makes two reports the same report: a rerun with other values is refused unless replaced.
IDENTITY = ("spec", "notebooks", "smoke")


def select_notebooks(selection: Iterable[str] | None, available: Sequence[str]) -> list[str]:
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
    """A ``-p NAME VALUE`` value, read as YAML (as papermill's own ``-y`` reads it): ``[3, 5]``,
    ``{horizon_days: 90}``, ``true``, ``None``, numbers; anything else is the text itself."""
    import yaml

    if text in ("None", "none"):
        return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def notebook_spec(spec: str | None, preset: str | None, dataset: Path | None, allow_unpinned: bool) -> str:
    """The SPEC text every notebook gets: ``spec`` (a SPEC string or a YAML file), else ``preset``,
    with ``dataset`` and ``allow_unpinned`` added as its dataset keys. An invalid spec fails here,
    naming the text, before anything runs."""
    if spec is None:
        text = loaders.spec_text(preset or DEFAULT_PRESET, dataset, allow_unpinned)
    else:
        text = spec.strip()
        extra = loaders.spec_text(DEFAULT_PRESET, dataset, allow_unpinned).partition(":")[2]
        if extra:
            text += ("," if ":" in text else ":") + extra
    parse_spec(text)
    return text


def default_name(spec: RunSpec, smoke: bool = False, subset: Sequence[str] | None = None) -> str:
    """``report-<preset>``, then ``-<8 hex>`` of a spec with overrides (its identity), ``-demo`` on
    the embedded dataset, ``-smoke`` for smoke runs and ``-nb-02-08`` for a subset of notebooks.

    The name depends only on the inputs, so rerunning the same command rewrites the same folder,
    and a subset or another spec never lands in the full report's folder.
    """
    name = f"report-{spec.preset}"
    if spec.overrides:
        name += "-" + hashlib.sha256(spec.identity.encode()).hexdigest()[:8]
    if spec.dataset is None:
        name += "-demo"
    if smoke:
        name += "-smoke"
    if subset:
        name += "-nb-" + "-".join(Path(notebook).stem.split("_")[0] for notebook in subset)
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


def _described(parameters: Mapping[str, Any]) -> str:
    notebooks = parameters.get("notebooks")
    listed = ", ".join(Path(str(n)).stem.split("_")[0] for n in notebooks) if isinstance(notebooks, list) else "?"
    return f"notebooks {listed} on spec {parameters.get('spec')!r}{' (smoke)' if parameters.get('smoke') else ''}"


def check_same_report(root: Path, parameters: Mapping[str, Any]) -> None:
    """Refuse to replace a report of another notebook set or spec, naming both."""
    previous = results.read_record(root, KIND)
    if previous is None:
        return
    before = previous.parameters if isinstance(previous.parameters, dict) else {}
    if any(before.get(key) != parameters.get(key) for key in IDENTITY):
        raise OutputExistsError(
            f"{root} holds a report of {_described(before)}; this one is {_described(parameters)}."
            " Pass --replace to replace it, or choose another --name or --output-dir"
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
