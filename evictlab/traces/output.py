"""Run folders of ``trace replay`` and ``trace study``: a manifest and tidy tables.

A folder holds ``<kind>.json`` (provenance, parameters, status, outputs with SHA-256) and the
run's tables as Parquet (rows), CSV (summaries) or JSONL (records such as audit events). The
manifest is written first with status
``running`` and rewritten with ``success`` after every table, or with ``error`` and the
message; a folder holding a finished run is never overwritten, an unfinished one is rerun in
place. Every file is written atomically.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import OutputExistsError
from ..results import atomic_write_bytes, json_line, provenance, utc_now_iso, write_json

SCHEMA_VERSION = 1


def manifest_path(output_dir: str | Path, kind: str) -> Path:
    return Path(output_dir) / f"{kind}.json"


def check_output_dir(output_dir: str | Path, kind: str) -> None:
    """Refuse a folder that holds a finished run, or files that are not a run of ``kind``."""
    output = Path(output_dir)
    if output.exists() and not output.is_dir():
        raise OutputExistsError(f"{output}: exists and is not a folder (choose a new --output-dir)")
    if not output.exists() or not any(output.iterdir()):
        return
    manifest = manifest_path(output, kind)
    if not manifest.exists():
        raise OutputExistsError(
            f"{output}: folder is not empty and holds no {manifest.name}; refusing to write into it"
        )
    try:
        status = json.loads(manifest.read_text(encoding="utf-8")).get("status")
    except (OSError, ValueError, AttributeError) as error:
        raise OutputExistsError(f"{manifest}: unreadable ({error}); refusing to overwrite") from None
    if status == "success":
        raise OutputExistsError(f"{manifest}: this folder holds a finished {kind} run; choose a new --output-dir")


def table_bytes(frame: pd.DataFrame | list[dict[str, Any]], file_name: str) -> bytes:
    """Parquet, CSV, or (for a list of records) JSONL bytes, by the file name."""
    if isinstance(frame, list):
        return "".join(json_line(record) for record in frame).encode("utf-8")
    if file_name.endswith(".parquet"):
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return buffer.getvalue()
    return frame.to_csv(index=False, lineterminator="\n").encode("utf-8")


def write_run(
    output_dir: str | Path,
    kind: str,
    parameters: Mapping[str, Any],
    compute: Callable[[], Mapping[str, Any]],
) -> dict[str, Any]:
    """Run ``compute`` (file name -> table or list of records) and write them under a ``kind`` manifest."""
    output = Path(output_dir)
    check_output_dir(output, kind)
    manifest: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "status": "running",
        "error": None,
        "started_at": utc_now_iso(),
        "finished_at": None,
        "elapsed_seconds": None,
        "provenance": provenance(),
        "parameters": dict(parameters),
        "outputs": None,
    }
    path = manifest_path(output, kind)
    write_json(path, manifest)
    started = time.perf_counter()

    def finish(**changes: Any) -> None:
        manifest.update(changes, finished_at=utc_now_iso(), elapsed_seconds=round(time.perf_counter() - started, 6))
        write_json(path, manifest)

    try:
        tables = dict(compute())
        outputs = {}
        for file_name, frame in tables.items():
            data = table_bytes(frame, file_name)
            atomic_write_bytes(output / file_name, data)
            outputs[file_name] = {"rows": len(frame), "sha256": hashlib.sha256(data).hexdigest()}
    except BaseException as error:
        finish(
            status="error",
            error="interrupted" if isinstance(error, KeyboardInterrupt) else f"{type(error).__name__}: {error}",
        )
        raise
    finish(status="success", outputs=outputs)
    return tables


def load_run(output_dir: str | Path, kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A finished run's manifest and tables."""
    manifest = json.loads(manifest_path(output_dir, kind).read_text(encoding="utf-8"))
    tables = {}
    for file_name in manifest.get("outputs") or {}:
        path = Path(output_dir) / file_name
        if file_name.endswith(".jsonl"):
            tables[file_name] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        else:
            tables[file_name] = pd.read_parquet(path) if file_name.endswith(".parquet") else pd.read_csv(path)
    return manifest, tables
