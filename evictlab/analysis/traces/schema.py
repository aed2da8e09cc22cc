"""The trace format: a time-ordered stream of memory events, one row per event.

A Parquet file, or a JSONL file with the same field names (``time`` as ISO-8601); ids and
metadata only. The columns, their events and meanings, and the reading limits are in
docs/traces.md ("Trace schema"), the one description. A field that does not belong to the
row's event must be empty; reading is strict, and a :class:`TraceError` names the file, the
row (0-based, counted over the whole file) and the field.
"""

from __future__ import annotations

import datetime as _dt
import io
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...errors import EvictlabError
from ...readers import MAX_ROW_LINE_BYTES, MAX_TRACE_BYTES, MAX_TRACE_ROW_GROUP_BYTES, check_size, parse_json
from ...results import atomic_write_bytes, json_line
from ...times import iso_z, read_iso

EVENTS = ("add", "search", "confirm", "ask", "tick", "message")
ADD, SEARCH, CONFIRM, ASK, TICK, MESSAGE = EVENTS
ROLES = ("human", "ai")

SCHEMA = pa.schema(
    [
        ("time", pa.timestamp("us", tz="UTC")),
        ("event", pa.string()),
        ("fact_id", pa.string()),
        ("content_length", pa.int64()),
        ("confidence", pa.float64()),
        ("category", pa.string()),
        ("supersedes", pa.string()),
        ("fact_ids", pa.list_(pa.string())),
        ("scopes", pa.list_(pa.string())),
        ("reinforcement", pa.bool_()),
        ("tokens", pa.int64()),
        ("content_key", pa.string()),
        ("scope", pa.string()),
        ("durability", pa.string()),
        ("authority", pa.string()),
        ("expected_valid_days", pa.int64()),
        ("ask_rate", pa.float64()),
        ("ask_decay_days", pa.float64()),
        ("role", pa.string()),
        ("text", pa.string()),
    ]
)
COLUMNS = tuple(SCHEMA.names)
FIELDS = COLUMNS[2:]  # everything but time and event

#: Fields each event must carry (``required``) and may carry (``optional``); all others are empty.
REQUIRED = {
    ADD: ("fact_id", "content_length", "confidence", "category"),
    SEARCH: ("fact_ids",),
    CONFIRM: ("fact_ids", "reinforcement"),
    ASK: ("fact_id",),
    TICK: (),
    MESSAGE: ("role", "text"),
}
OPTIONAL = {
    ADD: ("supersedes", "tokens", "content_key", "scope", "durability", "authority", "expected_valid_days",
          "ask_rate", "ask_decay_days"),
    SEARCH: (), CONFIRM: ("scopes",), ASK: ("supersedes",), TICK: (), MESSAGE: (),
}

#: Rows per chunk when a trace is streamed.
CHUNK_ROWS = 65_536
MICROSECONDS = 1_000_000
EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


class TraceError(EvictlabError, ValueError):
    """A trace file breaks the schema; the message names the file, row and field."""


Chunk = dict[str, list[Any]]  # column name -> values; ``time`` as integer microseconds (UTC)


def empty_chunk() -> Chunk:
    return {name: [] for name in COLUMNS}


def time_us(moment: _dt.datetime) -> int:
    """Integer microseconds since the Unix epoch of an aware (or naive = UTC) datetime."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * MICROSECONDS + delta.microseconds


def from_us(value: int) -> _dt.datetime:
    return EPOCH + _dt.timedelta(microseconds=value)


def iso(value: int) -> str:
    """A time in microseconds as UTC ISO-8601 with ``Z`` (microseconds only when non-zero)."""
    return iso_z(from_us(value))


# --------------------------------------------------------------------------- updates


class Updates:
    """Which update each row of a trace belongs to, chunk by chunk (an update may span chunks):
    the one grouping of :func:`.replay.replay` and :func:`.optimum.outline`.

    An update (one ``_apply_updates`` call, spec 1.5) is a run of consecutive ``add`` and
    ``confirm`` rows at one time. A ``message`` row is no event but the next update's feed: it
    neither ends nor starts an update at the update's time, and ends it at a later time, as
    every other row does.
    """

    def __init__(self) -> None:
        self.begun = 0  # updates begun so far
        self._last = (0, 0)  # the last row that is not a message: its update (0: none) and time

    def numbers(self, chunk: Chunk) -> np.ndarray:
        """Per row of ``chunk`` (the trace's next), the update left open once the row is read,
        numbered from 1 over the whole trace: an ``add`` or ``confirm`` row's own, a ``message``
        row's at the time of the update before it, else 0."""
        event = np.asarray(chunk["event"], dtype=object)
        time = np.asarray(chunk["time"], dtype=np.int64)
        update, message = (event == ADD) | (event == CONFIRM), event == MESSAGE
        if not len(event):
            return np.zeros(0, dtype=np.int64)
        # Each row's nearest earlier row that is not a message (-1: the last one of earlier chunks).
        seen = np.maximum.accumulate(np.where(message, -1, np.arange(len(event))))
        before = np.concatenate(([-1], seen[:-1]))
        last_update, last_time = self._last
        # A row joins the update of that row when it is an add or confirm of the same time.
        joins = (np.where(before < 0, last_update > 0, update[before])
                 & (time == np.where(before < 0, last_time, time[before])))  # fmt: skip
        begun = self.begun + np.cumsum(update & ~joins)
        numbers = np.where(update | (message & joins), begun, 0)
        self.begun = int(begun[-1])
        if seen[-1] >= 0:
            self._last = (int(numbers[seen[-1]]), int(time[seen[-1]]))
        return numbers


# --------------------------------------------------------------------------- checking rows


class RowChecker:
    """Checks rows one by one, in file order, across chunks (time order and unique adds)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.row = 0
        self.last_time: int | None = None
        self.added: set[str] = set()

    def error(self, field: str, message: str) -> TraceError:
        return TraceError(f"{self.source}: row {self.row}, field {field!r}: {message}")

    def check(self, values: Mapping[str, Any]) -> None:
        """Check one row (``time`` already in microseconds); raises :class:`TraceError`."""
        moment = values.get("time")
        if not isinstance(moment, int) or isinstance(moment, bool):
            raise self.error("time", "missing")
        if self.last_time is not None and moment < self.last_time:
            raise self.error("time", f"{iso(moment)} is earlier than the row before ({iso(self.last_time)})")
        event = values.get("event")
        if event not in EVENTS:
            raise self.error("event", f"must be one of {', '.join(EVENTS)}, got {event!r}")
        allowed = REQUIRED[event] + OPTIONAL[event]
        for name in FIELDS:
            value = values.get(name)
            if value is None:
                if name in REQUIRED[event]:
                    raise self.error(name, f"required for a {event!r} event")
                continue
            if name not in allowed:
                raise self.error(name, f"must be empty for a {event!r} event, got {value!r}")
            self._check_value(name, value)
        if event == CONFIRM and values.get("scopes") is not None and len(values["scopes"]) != len(values["fact_ids"]):
            raise self.error("scopes", "must have one scope per entry of fact_ids")
        if event == ADD:
            fact_id = values["fact_id"]
            if fact_id in self.added:
                raise self.error("fact_id", f"fact {fact_id!r} is added a second time")
            self.added.add(fact_id)
        self.last_time = moment
        self.row += 1

    def _check_value(self, name: str, value: Any) -> None:
        if name in ("fact_id", "supersedes", "category", "content_key", "scope", "durability", "authority", "text"):
            if not isinstance(value, str):
                raise self.error(name, f"must be a string, got {value!r}")
            if name in ("fact_id", "supersedes") and not value.strip():
                raise self.error(name, "must be a non-empty id")
        elif name in ("content_length", "tokens", "expected_valid_days"):
            least = 1 if name == "expected_valid_days" else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise self.error(name, f"must be an integer >= {least}, got {value!r}")
        elif name == "role":
            if value not in ROLES:
                raise self.error(name, f"must be one of {', '.join(ROLES)}, got {value!r}")
        elif name == "confidence":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise self.error(name, f"must be a finite number, got {value!r}")
        elif name in ("ask_rate", "ask_decay_days"):
            positive = name == "ask_decay_days"
            if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                    or value < 0 or (positive and value == 0)):
                raise self.error(name, f"must be a finite number {'>' if positive else '>='} 0, got {value!r}")
        elif name in ("fact_ids", "scopes"):
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                raise self.error(name, f"must be a list of strings, got {value!r}")
        elif name == "reinforcement" and not isinstance(value, bool):
            raise self.error(name, f"must be true or false, got {value!r}")


# --------------------------------------------------------------------------- reading


class _Checked(RowChecker):
    """Counts the rows of a file whose every row was checked before (:func:`iter_chunks`)."""

    def check(self, values: Mapping[str, Any]) -> None:
        self.row += 1


def iter_chunks(
    path: str | os.PathLike, chunk_rows: int = CHUNK_ROWS, *, checked: os.stat_result | None = None
) -> Iterator[Chunk]:
    """The checked rows of a trace file, streamed in chunks of at most ``chunk_rows`` rows.

    ``.parquet`` files are read by row batches, ``.jsonl`` files line by line, so a trace
    larger than memory can be replayed. ``checked``: the file's ``os.stat()`` taken before a
    pass that checked every row; while the file is unchanged (device, inode, size and
    modification time), its rows are not checked again.
    """
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: trace file not found")
    check_size(path, MAX_TRACE_BYTES, what="trace file", error=TraceError)
    now = path.stat()
    same = checked is not None and all(
        getattr(now, name) == getattr(checked, name) for name in ("st_dev", "st_ino", "st_size", "st_mtime_ns")
    )
    checker = (_Checked if same else RowChecker)(str(path))
    if path.suffix == ".parquet":
        yield from _parquet_chunks(path, checker, chunk_rows)
    elif path.suffix == ".jsonl":
        yield from _jsonl_chunks(path, checker, chunk_rows)
    else:
        raise TraceError(f"{path}: a trace must be a .parquet or .jsonl file")


def read_trace(path: str | os.PathLike) -> Chunk:
    """A whole trace file as one chunk (for traces that fit in memory)."""
    whole = empty_chunk()
    for chunk in iter_chunks(path):
        for name in COLUMNS:
            whole[name].extend(chunk[name])
    return whole


def _parquet_chunks(path: Path, checker: RowChecker, chunk_rows: int) -> Iterator[Chunk]:
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as error:
        raise TraceError(f"{path}: not a readable Parquet file ({one_line(error)})") from None
    schema = parquet.schema_arrow
    unknown = [name for name in schema.names if name not in COLUMNS]
    if unknown:
        raise TraceError(f"{path}: unknown column(s) {', '.join(unknown)}; known: {', '.join(COLUMNS)}")
    for name in ("time", "event"):
        if name not in schema.names:
            raise TraceError(f"{path}: required column {name!r} is missing")
    for name in schema.names:
        expected = SCHEMA.field(name).type
        actual = schema.field(name).type
        if name == "time":
            if not pa.types.is_timestamp(actual) or actual.tz is None:
                raise TraceError(f"{path}: column 'time' must be a UTC timestamp, got {actual}")
        elif not _compatible(actual, expected):
            raise TraceError(f"{path}: column {name!r} must be {expected}, got {actual}")
    first = 0
    for group in range(parquet.metadata.num_row_groups):
        meta = parquet.metadata.row_group(group)
        if meta.total_byte_size > MAX_TRACE_ROW_GROUP_BYTES:
            raise TraceError(
                f"{path}: rows {first}-{first + meta.num_rows - 1} (row group {group}) hold"
                f" {meta.total_byte_size} bytes uncompressed, over evictlab's limit of"
                f" {MAX_TRACE_ROW_GROUP_BYTES} bytes per row group; write the trace with smaller row groups"
            )
        first += meta.num_rows
    batches = parquet.iter_batches(batch_size=chunk_rows)
    while True:
        try:
            batch = next(batches, None)
            if batch is None:
                return
            chunk = _batch_chunk(batch, checker)
        except (pa.ArrowException, OSError) as error:
            raise TraceError(f"{path}: row {checker.row} onwards: cannot read ({one_line(error)})") from None
        _check_chunk(chunk, checker)
        yield chunk


def _batch_chunk(batch: pa.RecordBatch, checker: RowChecker) -> Chunk:
    chunk = empty_chunk()
    for name in COLUMNS:
        if name not in batch.schema.names:
            chunk[name] = [None] * batch.num_rows
            continue
        column = batch.column(name)
        if name == "time":
            try:
                column = pc.cast(pc.cast(column, pa.timestamp("us", tz="UTC")), pa.int64())
            except pa.ArrowInvalid:  # e.g. seconds so far out that microseconds overflow 64 bits
                raise checker.error("time", "outside the range of microseconds since 1970 in 64 bits"
                                    f" (in rows {checker.row}-{checker.row + batch.num_rows - 1})") from None
        chunk[name] = column.to_pylist()
    return chunk


def one_line(error: BaseException) -> str:
    """An exception's message on one line (Arrow's messages may span several)."""
    return " ".join(str(error).split()) or type(error).__name__


def _compatible(actual: pa.DataType, expected: pa.DataType) -> bool:
    if actual == expected:
        return True
    if pa.types.is_list(expected):
        return (pa.types.is_list(actual) or pa.types.is_large_list(actual)) and _compatible(
            actual.value_type, expected.value_type
        )
    if pa.types.is_string(expected):
        return pa.types.is_string(actual) or pa.types.is_large_string(actual) or pa.types.is_null(actual)
    if pa.types.is_int64(expected):
        return pa.types.is_integer(actual) or pa.types.is_null(actual)
    if pa.types.is_float64(expected):
        return pa.types.is_floating(actual) or pa.types.is_integer(actual) or pa.types.is_null(actual)
    return pa.types.is_null(actual)


def _check_chunk(chunk: Chunk, checker: RowChecker) -> None:
    rows = len(chunk["time"])
    for index in range(rows):
        checker.check({name: chunk[name][index] for name in COLUMNS})


def _jsonl_chunks(path: Path, checker: RowChecker, chunk_rows: int) -> Iterator[Chunk]:
    chunk = empty_chunk()
    with path.open("rb") as handle:
        # readline with a bound: a file without line breaks is refused, not read whole.
        for line_number, raw in enumerate(iter(lambda: handle.readline(MAX_ROW_LINE_BYTES + 1), b""), start=1):
            where = f"{path}: row {checker.row} (line {line_number})"
            if len(raw) > MAX_ROW_LINE_BYTES:
                raise TraceError(f"{where}: longer than evictlab's limit of {MAX_ROW_LINE_BYTES} bytes")
            if not raw.strip():
                continue
            record = parse_json(raw, where=where, error=TraceError)
            if not isinstance(record, dict):
                raise TraceError(f"{path}: row {checker.row} (line {line_number}): must be a JSON object")
            unknown = sorted(set(record) - set(COLUMNS))
            if unknown:
                raise checker.error(unknown[0], f"unknown field; known: {', '.join(COLUMNS)}")
            values = dict(record)
            values["time"] = _read_time(values.get("time"), checker)
            if isinstance(values.get("confidence"), int) and not isinstance(values["confidence"], bool):
                try:
                    values["confidence"] = float(values["confidence"])
                except OverflowError:
                    message = "must be a finite number, got an integer beyond the double range"
                    raise checker.error("confidence", message) from None
            checker.check(values)
            for name in COLUMNS:
                chunk[name].append(values.get(name))
            if len(chunk["time"]) >= chunk_rows:
                yield chunk
                chunk = empty_chunk()
    if chunk["time"]:
        yield chunk


def _read_time(value: Any, checker: RowChecker) -> int:
    if not isinstance(value, str) or not value.strip():
        raise checker.error("time", f"must be an ISO-8601 timestamp string, got {value!r}")
    moment = read_iso(value)
    if moment is None:
        raise checker.error("time", f"not an ISO-8601 timestamp: {value!r}")
    return time_us(moment)


# --------------------------------------------------------------------------- writing


def chunk_table(chunk: Chunk) -> pa.Table:
    """An Arrow table of ``chunk`` in :data:`SCHEMA` (times from microseconds)."""
    arrays = []
    for field in SCHEMA:
        values = chunk[field.name]
        if field.name == "time":
            arrays.append(pa.array(values, type=pa.int64()).cast(field.type))
        else:
            arrays.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def trace_bytes(chunk: Chunk, suffix: str) -> bytes:
    """The file bytes of a trace: identical rows give identical bytes."""
    if suffix == ".parquet":
        buffer = io.BytesIO()
        pq.write_table(chunk_table(chunk), buffer, compression="zstd", row_group_size=CHUNK_ROWS)
        return buffer.getvalue()
    if suffix == ".jsonl":
        lines = []
        for index in range(len(chunk["time"])):
            record = {"time": iso(chunk["time"][index]), "event": chunk["event"][index]}
            for name in FIELDS:
                value = chunk[name][index]
                if value is not None:
                    record[name] = value
            lines.append(json_line(record))
        return "".join(lines).encode("utf-8")
    raise TraceError(f"a trace must be written as .parquet or .jsonl, not {suffix or 'no suffix'!r}")


def write_trace(path: str | os.PathLike, chunk: Chunk) -> Path:
    """Check ``chunk`` and write it atomically as Parquet or JSONL (by the file suffix)."""
    path = Path(path)
    data = trace_bytes(chunk, path.suffix)  # refuses a wrong suffix before checking rows
    _check_chunk(chunk, RowChecker(f"{path} (being written)"))
    return atomic_write_bytes(path, data)


def rows(chunk: Chunk) -> Iterator[dict[str, Any]]:
    """The rows of a chunk as dicts (for tests and small traces)."""
    for index in range(len(chunk["time"])):
        yield {name: chunk[name][index] for name in COLUMNS}


def chunk_from_rows(records: Sequence[Mapping[str, Any]]) -> Chunk:
    """A chunk from row dicts (missing fields empty; ``time`` as microseconds or a datetime)."""
    chunk = empty_chunk()
    for record in records:
        for name in COLUMNS:
            value = record.get(name)
            if name == "time" and isinstance(value, _dt.datetime):
                value = time_us(value)
            chunk[name].append(value)
    return chunk
