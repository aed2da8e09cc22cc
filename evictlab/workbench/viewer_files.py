"""A run folder as ``evictlab view`` reads it: only files inside it, through the bounded, strict readers.

A :class:`RunFolder` opens a file only when its name is relative, stays inside the folder and,
resolved (every symbolic link followed), is a regular file inside the folder's own resolved
path: an output name in a record such as ``/etc/passwd`` or ``../x.csv``, or a table replaced
by a link to a file elsewhere, is refused, naming the file. Each read is bounded before it
starts and strict (:mod:`evictlab.readers`): JSON documents as run markers are, rows files
line by line as graded rows are, CSV through :mod:`csv` with its field limit, Parquet by its
own row count and declared size before any row is decoded. Every error is one
:class:`~evictlab.errors.ContractError` naming the file and, where there is one, the line.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import Any

from ..analysis.qa.stats import json_object
from ..errors import ContractError
from ..readers import (
    MAX_PROTOCOL_FILE_BYTES,
    MAX_ROWS_FILE_BYTES,
    bounded_lines,
    check_size,
    read_bounded,
)
from ..results import RunRecord, record_path


class RunFolder:
    """The files of one run folder, read only from inside it (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        if not path.is_dir():
            raise ContractError(f"{path}: not a folder; evictlab view reads a run folder")
        self.path = path
        self.root = path.resolve()

    def has(self, name: str) -> bool:
        """Whether the folder holds an entry ``name`` (a link counts, wherever it points)."""
        return os.path.lexists(self.path / name)

    def locate(self, name: Any, *, named_in: str | None = None) -> Path:
        """The file ``name`` of the folder, refused unless it is a regular file inside it.

        ``named_in`` says where the name came from (a record's field), for the message.
        """
        source = f"{named_in}: " if named_in else ""
        if not isinstance(name, str) or not name or PurePath(name).is_absolute() or ".." in PurePath(name).parts:
            raise ContractError(f"{source}{name!r} is not a file name inside the run folder {self.path}"
                                " (outside the run folder: evictlab view reads only files inside it)")
        path = self.path / name
        resolved = path.resolve()
        if not resolved.is_relative_to(self.root):
            raise ContractError(f"{path}: links to {resolved}, outside the run folder;"
                                " evictlab view reads only files inside it")
        if not resolved.is_file():
            what = "missing" if not os.path.lexists(path) else "not a regular file"
            raise ContractError(f"{source}{path}: {what}")
        return path

    def json(self, name: str, *, required: bool = False) -> dict[str, Any]:
        """A JSON object file of the folder; ``{}`` when it is absent and not ``required``."""
        if not required and not self.has(name):
            return {}
        path = self.locate(name)
        return json_object(read_bounded(path, MAX_PROTOCOL_FILE_BYTES, what="run file"), str(path))

    def record(self, kind: str) -> RunRecord | None:
        """The folder's run record of ``kind`` (checked as :func:`~evictlab.results.read_record` checks it)."""
        name = record_path(self.path, kind).name
        return RunRecord.from_dict(self.json(name), self.path / name) if self.has(name) else None

    def json_rows(self, name: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(where, row)`` for every line of a JSONL file (``where``: the file and the line);
        blank lines are skipped."""
        path = self.locate(name)
        check_size(path, MAX_ROWS_FILE_BYTES, what="rows file")
        with _opened(path) as handle:
            for number, line in enumerate(bounded_lines(handle, path), start=1):
                if not line.strip():
                    continue
                where = f"{path} line {number}"
                yield where, json_object(line, where)

    def csv_rows(self, name: str, limit: int) -> tuple[list[dict[str, str | None]], bool]:
        """The first ``limit`` rows of a CSV file (missing cells None) and whether there were more."""
        path = self.locate(name)
        check_size(path, MAX_ROWS_FILE_BYTES, what="table")
        rows: list[dict[str, str | None]] = []
        with _opened(path, text=True) as handle:
            reader = csv.reader(handle, strict=True)
            try:
                header = next(reader, [])
                for cells in reader:
                    if len(rows) == limit:
                        return rows, True
                    if len(cells) > len(header):
                        raise ContractError(f"{path} line {reader.line_num}: {len(cells)} cells under a header"
                                            f" of {len(header)}")
                    rows.append(dict(zip(header, [*cells, *[None] * (len(header) - len(cells))], strict=True)))
            except csv.Error as error:
                raise ContractError(f"{path} line {reader.line_num}: not a readable CSV row ({error})") from None
            except UnicodeDecodeError as error:
                raise ContractError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
        return rows, False

    def parquet_rows(self, name: str, limit: int) -> tuple[list[dict[str, Any]], int]:
        """A Parquet table's rows when it holds at most ``limit`` (else ``[]``), and its row count."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = self.locate(name)
        check_size(path, MAX_ROWS_FILE_BYTES, what="table")
        try:
            with pq.ParquetFile(path) as table:
                metadata = table.metadata
                declared = sum(metadata.row_group(index).total_byte_size for index in range(metadata.num_row_groups))
                if metadata.num_rows > limit or declared > MAX_ROWS_FILE_BYTES:
                    return [], metadata.num_rows
                rows = table.read().to_pylist()
        except (pa.ArrowException, OSError, ValueError) as error:
            raise ContractError(f"{path}: not a readable Parquet table ({str(error).splitlines()[0]})") from None
        return rows, len(rows)


def _opened(path: Path, *, text: bool = False) -> Any:
    try:
        return open(path, encoding="utf-8", newline="") if text else open(path, "rb")
    except OSError as error:
        raise ContractError(f"{path}: cannot be read ({error.strerror or error})") from None
