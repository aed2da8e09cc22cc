"""Trace files: seeded generation is byte-stable, both formats round-trip, bad rows are named."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evictlab.analysis.traces import schema
from evictlab.analysis.traces.generate import WorkloadParams, generate, parse_param
from evictlab.analysis.traces.knowledge import knowledge_update_trace
from evictlab.analysis.traces.schema import TraceError, iter_chunks, read_trace, trace_bytes, write_trace
from evictlab.core.demo import load_demo
from evictlab.core.tokens import char_tokens, fact_line
from evictlab.readers import MAX_ROW_LINE_BYTES, MAX_TRACE_BYTES

SMALL = WorkloadParams(horizon_days=8, facts_per_day=5)


def test_same_seed_same_bytes_and_different_seed_differs():
    first, again, other = generate(SMALL, 3), generate(SMALL, 3), generate(SMALL, 4)
    for suffix in (".parquet", ".jsonl"):
        assert trace_bytes(first, suffix) == trace_bytes(again, suffix)
        assert trace_bytes(first, suffix) != trace_bytes(other, suffix)


def test_generated_trace_is_valid_and_round_trips(tmp_path):
    chunk = generate(SMALL, 1)
    assert set(chunk["event"]) == {"add", "search", "confirm", "ask", "tick", "message"}
    assert chunk["time"] == sorted(chunk["time"])
    for suffix in (".parquet", ".jsonl"):
        path = write_trace(tmp_path / f"trace{suffix}", chunk)
        assert read_trace(path) == chunk
    streamed = list(iter_chunks(tmp_path / "trace.parquet", chunk_rows=50))
    assert len(streamed) > 1 and sum(len(part["time"]) for part in streamed) == len(chunk["time"])


def test_a_checked_file_is_not_checked_again_while_unchanged(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"time": "2026-01-01T00:00:00Z", "event": "ask"}\n')  # no fact_id: a bad row
    stat = path.stat()
    with pytest.raises(TraceError, match="required"):
        list(iter_chunks(path))
    assert [chunk["event"] for chunk in iter_chunks(path, checked=stat)] == [["ask"]]
    path.write_text('{"time": "2026-01-01T00:00:00Z", "event": "ask"}\n\n')
    with pytest.raises(TraceError, match="required"):  # changed since: checked again
        list(iter_chunks(path, checked=stat))


def test_lifecycle_columns_come_from_a_second_stream():
    """Tokens, labels, content keys and messages are drawn apart: every other field is as without them."""
    params = SMALL.replace(label_failure_rate=0.5)
    chunk, plain = generate(params, 2), generate(SMALL.replace(label_failure_rate=0.0), 2)
    lifecycle = ("tokens", "content_key", "scope", "durability", "authority", "role", "text")
    kept = [index for index, event in enumerate(chunk["event"]) if event != "message"]
    for name in set(schema.COLUMNS) - set(lifecycle):
        assert [chunk[name][index] for index in kept] == [value for value, event in zip(plain[name], plain["event"])
                                                          if event != "message"]
    adds = [index for index, event in enumerate(chunk["event"]) if event == "add"]
    assert all(chunk["content_key"][index] == chunk["fact_id"][index] for index in adds)
    assert all(chunk["tokens"][index] > chunk["content_length"][index] // 4 for index in adds)
    failing = sum(chunk["scope"][i] != "user" or chunk["durability"][i] != "durable"
                  or chunk["authority"][i] != "descriptive" for i in adds)
    assert 0.3 < failing / len(adds) < 0.7
    confirms = [index for index, event in enumerate(chunk["event"]) if event == "confirm"]
    assert all(chunk["event"][index - 1] == "message" and chunk["time"][index - 1] == chunk["time"][index]
               for index in confirms)
    # re-extractions repeat a current fact's content key under a new id
    repeated = generate(SMALL.replace(reextraction_rate=3.0), 2)
    keys = [(repeated["fact_id"][i], repeated["content_key"][i]) for i, e in enumerate(repeated["event"]) if e == "add"]
    copies = [(fact_id, key) for fact_id, key in keys if fact_id != key]
    assert copies and {key for _, key in copies} <= {fact_id for fact_id, _ in keys}


def test_a_generated_fact_is_costed_as_storage_writes_its_category():
    # spec 1.14: a category outside the nine core values is "rewritten to `other`", and spec 1.13
    # prints `- [<category> | <conf 2dp>] <content>` from the stored document: the default mix's
    # `knowledge` facts cost the line of `other`
    chunk = generate(SMALL, 0)
    adds = [index for index, event in enumerate(chunk["event"]) if event == "add"]
    knowledge = [index for index in adds if chunk["category"][index] == "knowledge"]
    assert knowledge and all(chunk["tokens"][index] == char_tokens(
        "\n" + fact_line("other", chunk["confidence"][index], "x" * chunk["content_length"][index]))
        for index in knowledge)
    preference = [index for index in adds if chunk["category"][index] == "preference"]
    assert preference and all(chunk["tokens"][index] == char_tokens(
        "\n" + fact_line("preference", chunk["confidence"][index], "x" * chunk["content_length"][index]))
        for index in preference)


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
    assert all(chunk["tokens"][index] > 0 and len(chunk["content_key"][index]) == 16 for index in added.values())


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
        ([{"time": "2026-01-01T00:00:00Z", "event": "message", "role": "user", "text": "hi"}],
         "field 'role': must be one of human, ai"),
        ([{"time": "2026-01-01T00:00:00Z", "event": "message", "role": "human"}], "field 'text': required"),
        ([{"time": "2026-01-01T00:00:00Z", "event": "add", "fact_id": "a", "content_length": 1, "confidence": 0.9,
           "category": "x", "expected_valid_days": 0}], "field 'expected_valid_days': must be an integer >= 1"),
        ([{"time": "2026-01-01T00:00:00Z", "event": "ask", "fact_id": "a", "tokens": 3}],
         "field 'tokens': must be empty"),
    ],
)
def test_bad_jsonl_rows_name_file_row_and_field(tmp_path, records, message):
    path = write_lines(tmp_path / "bad.jsonl", records)
    with pytest.raises(TraceError, match=message) as error:
        read_trace(path)
    assert str(path) in str(error.value)


def test_bad_parquet_files(tmp_path):
    path = tmp_path / "bad.parquet"
    times = pa.array([0], pa.timestamp("us", tz="UTC"))
    pq.write_table(pa.table({"time": times, "event": ["tick"], "extra": [1]}), path)
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
    with pytest.raises(TraceError, match=r"\.parquet or \.jsonl"):
        read_trace(write_lines(tmp_path / "trace.csv", []))


def utc_times(values, unit="us"):
    return pa.array(values, pa.timestamp(unit, tz="UTC"))


def test_trace_files_are_held_to_the_readers_limits(tmp_path, monkeypatch):
    # Over the size limit: refused from the file's size, before a byte is read (a sparse file).
    for suffix in (".parquet", ".jsonl"):
        huge = tmp_path / f"huge{suffix}"
        with huge.open("wb") as handle:
            handle.truncate(MAX_TRACE_BYTES + 1)
        with pytest.raises(TraceError, match=f"{huge}: trace file is {MAX_TRACE_BYTES + 1} bytes, over"):
            read_trace(huge)
    # A JSONL line without an end is refused at the line limit, not read whole.
    endless = tmp_path / "endless.jsonl"
    endless.write_bytes(b"{" * (MAX_ROW_LINE_BYTES + 10))
    with pytest.raises(TraceError, match=r"row 0 \(line 1\): longer than evictlab's limit"):
        read_trace(endless)
    # A Parquet row group is held whole while streamed: one over the limit is refused by its metadata.
    grouped = tmp_path / "grouped.parquet"
    pq.write_table(pa.table({"time": utc_times(range(400)), "event": ["tick"] * 400}), grouped, row_group_size=100)
    assert len(read_trace(grouped)["time"]) == 400
    monkeypatch.setattr(schema, "MAX_TRACE_ROW_GROUP_BYTES", 100)
    with pytest.raises(TraceError, match=r"rows 0-99 \(row group 0\) hold \d+ bytes uncompressed, over"):
        read_trace(grouped)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"time": "2026-01-01T00:00:00Z", "event": "add", "fact_id": "a", "content_length": 1, "confidence": '
         + b"9" * 400 + b', "category": "x"}', "row 0, field 'confidence': must be a finite number"),
        (b'{"time": "2026-01-01T00:00:00Z", "event": "tick", "note": "\xff"}', r"row 0 \(line 1\): not UTF-8"),
        (b'{"time": "2026-01-01T00:00:00Z", "time": "2026-01-02T00:00:00Z", "event": "tick"}', "duplicate key 'time'"),
        (b'{"time": "2026-01-01T00:00:00Z", "event": "search", "fact_ids": ' + b"[" * 80 + b"]" * 80 + b"}",
         "nested more than 64 levels"),
        (b'{"time": "2026-01-01T00:00:00Z", "event": "ask", "fact_id": "\\ud800"}', "lone surrogate"),
        (b"[1, 2]", r"row 0 \(line 1\): must be a JSON object"),
    ],
)
def test_strict_json_rules_hold_in_trace_lines(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(line + b"\n")
    with pytest.raises(TraceError, match=message) as error:
        read_trace(path)
    assert str(error.value).startswith(f"{path}: ") and "\n" not in str(error.value)


def test_unreadable_parquet_parts_name_the_file_and_rows(tmp_path):
    far = tmp_path / "far.parquet"
    pq.write_table(pa.table({"time": utc_times([0, 10**15], "s"), "event": ["tick", "tick"]}), far)
    with pytest.raises(TraceError, match=r"row 0, field 'time': outside the range .* \(in rows 0-1\)"):
        read_trace(far)
    # Damaged page bytes inside an intact footer: the read fails mid-stream, named, one line.
    intact = tmp_path / "intact.parquet"
    pq.write_table(pa.table({"time": utc_times(range(5000)), "event": ["tick"] * 5000}), intact)
    data = bytearray(intact.read_bytes())
    for position in range(8, 400):
        data[position] ^= 0x5A
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(bytes(data))
    with pytest.raises(TraceError, match=rf"{damaged}: row 0 onwards: cannot read \(") as error:
        read_trace(damaged)
    assert "\n" not in str(error.value)
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(bytes(data[: len(data) // 2]) + bytes(data[-8:]))
    with pytest.raises(TraceError, match="not a readable Parquet file") as error:
        read_trace(truncated)
    assert "\n" not in str(error.value)


def test_the_fair_knowledge_update_traces():
    from evictlab.analysis.traces.knowledge import knowledge_update_traces
    from evictlab.analysis.traces.metrics import curve_rows

    rows = load_demo().rows
    traces = knowledge_update_traces(rows, seed=0)
    questions = {row["question_id"] for row in rows if row.get("question_type") == "knowledge-update"}
    assert {name for name, _ in traces} < questions and not any(name.endswith("_abs") for name, _ in traces)
    assert knowledge_update_traces(rows, seed=0) == traces and knowledge_update_traces(rows, seed=1) != traces
    # spec 1.14: storage writes `knowledge` as `other`, and that is the line get_context prints (1.13)
    from evictlab.analysis.traces.knowledge import _evidence
    from evictlab.core.tokens import token_counter

    name, chunk = traces[0]
    (row,) = [row for row in rows if row["question_id"] == name]
    first = chunk["event"].index("add")
    content = _evidence(row)[0][2]
    count = token_counter().count
    assert chunk["tokens"][first] == count("\n" + fact_line("other", chunk["confidence"][first], content))
    above = below = recent = 0
    for seed in range(5):
        for name, chunk in knowledge_update_traces(rows, seed=seed):
            (ask,) = [i for i, event in enumerate(chunk["event"]) if event == "ask"]
            added = {chunk["fact_id"][i]: i for i, event in enumerate(chunk["event"]) if event == "add"}
            old, new = added[chunk["supersedes"][ask]], added[chunk["fact_id"][ask]]
            assert old < new < ask and len(added) >= 42 and all(key.startswith(name) for key in added)
            above += chunk["confidence"][new] > chunk["confidence"][old]
            below += chunk["confidence"][new] < chunk["confidence"][old]
            recent += any(chunk["fact_ids"][i] == [chunk["fact_id"][old]] for i in range(new, ask))
    assert above and below and 0 < recent < 5 * len(traces)
    chosen = traces[:3]
    frame = curve_rows([(name, lambda chunk=chunk: [chunk]) for name, chunk in chosen], ["confidence", "lru"], [10])
    assert set(frame["trace"]) == {name for name, _ in chosen} and frame["asks"].max() == 1
