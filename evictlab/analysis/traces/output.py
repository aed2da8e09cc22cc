"""Run folders of ``trace replay`` and ``trace study``: a run record and tidy tables.

Each run goes through :func:`evictlab.results.run`: the folder is locked, the record
``<kind>.run.json`` (provenance, parameters, status, every output with its SHA-256) is
written with status ``running`` first and rewritten at the end; a folder holding a finished
run is refused, an unfinished one is rerun in place. The tables are Parquet (rows), CSV
(summaries) or JSONL (records such as audit events), each written atomically; the record's
``summary`` holds each table's row count.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ... import results
from ...errors import ContractError
from ...results import json_line


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
    files: Sequence[str],
    compute: Callable[[], Mapping[str, Any]],
) -> dict[str, Any]:
    """Run ``compute`` (file name -> table or list of records) as a ``kind`` run and write its tables.

    ``files`` names every file the run may write, so that a folder holding such files without
    a record is refused before anything is computed.
    """
    with results.run(output_dir, kind, parameters=parameters, outputs=files) as current:
        tables = dict(compute())
        for file_name, frame in tables.items():
            current.write_bytes(file_name, table_bytes(frame, file_name))
            current.record.summary.setdefault("rows", {})[file_name] = len(frame)
    return tables


def load_run(output_dir: str | Path, kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A finished run's record (as a dict) and its tables."""
    record = results.read_record(output_dir, kind)
    if record is None:
        raise ContractError(f"{output_dir}: no {kind} run record ({results.record_path(output_dir, kind).name})")
    tables: dict[str, Any] = {}
    for file_name in record.outputs:
        path = Path(output_dir) / file_name
        if file_name.endswith(".jsonl"):
            tables[file_name] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        elif file_name.endswith(".parquet"):
            tables[file_name] = pd.read_parquet(path)
        else:
            tables[file_name] = pd.read_csv(path)
    return record.as_dict(), tables
