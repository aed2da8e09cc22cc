"""Trace files: seeded generation is byte-stable, both formats round-trip, bad rows are named."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evictlab.demo import load_demo
from evictlab.traces.generate import WorkloadParams, generate, knowledge_update_trace, parse_param
from evictlab.traces.schema import TraceError, iter_chunks, read_trace, trace_bytes, write_trace

SMALL = WorkloadParams(horizon_days=8, facts_per_day=5)


def test_same_seed_same_bytes_and_different_seed_differs():
    first, again, other = generate(SMALL, 3), generate(SMALL, 3), generate(SMALL, 4)
    for suffix in (".parquet", ".jsonl"):
        assert trace_bytes(first, suffix) == trace_bytes(again, suffix)
        assert trace_bytes(first, suffix) != trace_bytes(other, suffix)


def test_generated_trace_is_valid_and_round_trips(tmp_path):
    chunk = generate(SMALL, 1)
    assert set(chunk["event"]) == {"add", "search", "confirm", "ask", "tick"}
    assert chunk["time"] == sorted(chunk["time"])
    for suffix in (".parquet", ".jsonl"):
        path = write_trace(tmp_path / f"trace{suffix}", chunk)
        assert read_trace(path) == chunk
    streamed = list(iter_chunks(tmp_path / "trace.parquet", chunk_rows=50))
    assert len(streamed) > 1 and sum(len(part["time"]) for part in streamed) == len(chunk["time"])


def test_parameters_are_named_and_checked():
    assert parse_param("facts-per-day=12") == ("facts_per_day", 12.0)
    assert parse_param("category_mix=a=1,b=3") == ("category_mix", (("a", 1.0), ("b", 3.0)))
    with pytest.raises(ValueError, match="horizon_days"):
        WorkloadParams(horizon_days=0)
    with pytest.raises(ValueError, match="NAME one of"):
        parse_param("speed=3")


def test_knowledge_update_trace_from_the_demo():
    chunk = knowledge_update_trace(load_demo().rows, seed=0)
    asks = [index for index, event in enumerate(chunk["event"]) if event == "ask"]
    assert asks and all(chunk["supersedes"][index] for index in asks)
    added = {chunk["fact_id"][index]: index for index, event in enumerate(chunk["event"]) if event == "add"}
    for index in asks:  # the question comes after both the old value and its update
        assert added[chunk["fact_id"][index]] < index and added[chunk["supersedes"][index]] < index
    assert knowledge_update_trace(load_demo().rows, seed=0) == chunk


def write_lines(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([{"time": "2026-01-01T00:00:00Z", "event": "add", "fact_id": "a", "confidence": 0.9, "category": "x"}],
         "row 0, field 'content_length': required"),
        ([{"time": "2026-01-01T00:00:00Z", "event": "tick", "fact_id": "a"}], "row 0, field 'fact_id': must be empty"),
        ([{"time": "2026-01-02T00:00:00Z", "event": "tick"}, {"time": "2026-01-01T00:00:00Z", "event": "tick"}],
         "row 1, field 'time': 2026-01-01T00:00:00Z is earlier"),
        ([{"time": "2026-01-01T00:00:00Z", "event": "jump"}], "row 0, field 'event': must be one of"),
        ([{"time": "2026-01-01T00:00:00Z", "event": "search", "fact_ids": "a"}], "field 'fact_ids': must be a list"),
        ([{"time": "2026-01-01T00:00:00Z", "event": "tick", "colour": 1}], "field 'colour': unknown field"),
        ([{"time": "yesterday", "event": "tick"}], "field 'time': not an ISO-8601"),
        ([{"time": "2026-01-01T00:00:00Z", "event": "confirm", "fact_ids": ["a"], "reinforcement": True,
           "scopes": []}], "field 'scopes': must have one scope"),
    ],
)
def test_bad_jsonl_rows_name_file_row_and_field(tmp_path, records, message):
    path = write_lines(tmp_path / "bad.jsonl", records)
    with pytest.raises(TraceError, match=message) as error:
        read_trace(path)
    assert str(path) in str(error.value)


def test_bad_parquet_files(tmp_path):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"time": pa.array([0], pa.timestamp("us", tz="UTC")), "event": ["tick"], "extra": [1]}), path)
    with pytest.raises(TraceError, match="unknown column"):
        read_trace(path)
    pq.write_table(pa.table({"time": pa.array([0], pa.timestamp("us")), "event": ["tick"]}), path)
    with pytest.raises(TraceError, match="UTC timestamp"):
        read_trace(path)
    chunk = generate(SMALL, 1)
    duplicated = {name: values + values[:1] for name, values in chunk.items()}
    duplicated["time"][-1] = duplicated["time"][-2]
    with pytest.raises(TraceError, match="added a second time"):
        write_trace(tmp_path / "dup.parquet", duplicated)
    assert not (tmp_path / "dup.parquet").exists()
    (tmp_path / "text.parquet").write_text("not parquet")
    with pytest.raises(TraceError, match="not a readable Parquet file"):
        read_trace(tmp_path / "text.parquet")
    with pytest.raises(TraceError, match=".parquet or .jsonl"):
        read_trace(write_lines(tmp_path / "trace.csv", []))
