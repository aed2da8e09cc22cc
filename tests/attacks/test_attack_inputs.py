"""Attacks on input files: bombs, oversized and malformed files end in one clean error.

Each test runs the real command line on real files. Items of issue 16: 2 (case-id
collisions), 5 (YAML alias bombs), 9 (whole-file reads), 12 (parse errors), 13 (duplicate keys).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from qa_harness import protocol_copy
from raw_server import RawServer, endless_body

from evictlab.core.demo import DEMO_DATASET
from evictlab.core.protocol import DEFAULT_OFFICIAL_MANIFEST, DEFAULT_SYNTHETIC_MANIFEST
from evictlab.readers import MAX_DATASET_BYTES, MAX_ROWS_FILE_BYTES

# Nine levels of nine aliases: 9**9 (387 million) strings once expanded, 2 KB on disk.
ALIAS_BOMB = 'lol: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + "".join(
    f"l{level}: &{chr(98 + level)} [" + ", ".join([f"*{chr(97 + level)}"] * 9) + "]\n"
    for level in range(8)
)


# --------------------------------------------------------------------------- item 5


def test_alias_bomb_in_config_is_refused(tmp_path, cli_error):
    options = protocol_copy(tmp_path, config_edits={"schema_version: 1\n": "schema_version: 1\n" + ALIAS_BOMB})
    code, line = cli_error("validate-contracts", *options)
    assert code == 2
    assert "aliases expand to more than" in line


def test_alias_bomb_in_run_spec_is_refused(tmp_path, cli_error):
    spec = tmp_path / "bomb.yaml"
    spec.write_text("preset: pr4810-final\nevaluation_time: *i\n".replace("*i", "x") + ALIAS_BOMB)
    code, line = cli_error("diff", "--from", str(spec), "--to", "pr4810-final", "--output-dir", str(tmp_path / "out"))
    assert code == 2
    assert "aliases expand to more than" in line
    assert not (tmp_path / "out").exists()


def test_self_referencing_alias_is_refused(tmp_path, cli_error):
    spec = tmp_path / "loop.yaml"
    spec.write_text("preset: &p [*p]\n")
    code, line = cli_error("diff", "--from", str(spec), "--to", "pr4810-final", "--output-dir", str(tmp_path / "out"))
    assert code == 2
    assert str(spec) in line


# --------------------------------------------------------------------------- item 13


def test_duplicate_key_in_yaml_config_is_refused(tmp_path, cli_error):
    options = protocol_copy(tmp_path, config_edits={"  workers: 3\n": "  workers: 3\n  workers: 64\n"})
    code, line = cli_error("validate-contracts", *options)
    assert code == 2
    assert "duplicate key 'workers'" in line


def test_duplicate_key_in_json_manifest_is_refused(tmp_path, cli_error):
    text = DEFAULT_SYNTHETIC_MANIFEST.read_text(encoding="utf-8")
    manifest = tmp_path / "synthetic.json"
    manifest.write_text(text.replace('"schema_version": 1', '"schema_version": 1, "schema_version": 1', 1))
    code, line = cli_error("validate-contracts", "--synthetic-manifest", str(manifest))
    assert code == 2
    assert f"{manifest}: not valid JSON (duplicate key 'schema_version')" in line


def test_duplicate_key_in_run_spec_is_refused(tmp_path, cli_error):
    spec = tmp_path / "twice.yaml"
    spec.write_text("preset: pr4810-run1\npreset: pr4810-final\n")
    code, line = cli_error("diff", "--from", str(spec), "--to", "pr4810-final", "--output-dir", str(tmp_path / "out"))
    assert code == 2
    assert "duplicate key 'preset'" in line


# --------------------------------------------------------------------------- item 9


def test_dev_zero_as_protocol_file_fails_fast(cli_error):
    code, line = cli_error("validate-contracts", "--config", os.devnull.replace("null", "zero"))
    assert code == 2
    assert "over evictlab's limit" in line


def sparse_file(path: Path, size: int, head: bytes = b"[") -> Path:
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(size)  # a hole: no disk space, but the size a reader would face
    return path


def test_oversized_dataset_is_refused_before_reading(tmp_path, cli_error):
    dataset = sparse_file(tmp_path / "huge.json", MAX_DATASET_BYTES + 1)
    code, line = cli_error("validate", "--dataset", str(dataset), "--allow-unpinned")
    assert code == 2
    assert f"{dataset}: dataset file is {MAX_DATASET_BYTES + 1} bytes, over evictlab's limit" in line


def test_oversized_rows_file_is_refused(tmp_path, cli_error):
    rows = sparse_file(tmp_path / "huge.rows.jsonl", MAX_ROWS_FILE_BYTES + 1, b"{}\n")
    code, line = cli_error("qa", "stats", "--rows", str(rows), "--protocol-id", "p",
                           "--output-dir", str(tmp_path / "o"))
    assert code == 2
    assert "over evictlab's limit" in line
    assert not (tmp_path / "o").exists()


def test_endless_line_in_rows_file_is_refused(tmp_path, cli_error):
    rows = tmp_path / "line.rows.jsonl"
    rows.write_bytes(b'{"a": "' + b"x" * (5 << 20) + b'"}\n')
    code, line = cli_error("qa", "stats", "--rows", str(rows), "--protocol-id", "p",
                           "--output-dir", str(tmp_path / "o"))
    assert code == 2
    assert "a line or the file is over evictlab's limit" in line


# --------------------------------------------------------------------------- item 12


@pytest.mark.parametrize(
    "body, reason",
    [
        ("[" * 200_000 + "]" * 200_000, "nested more than"),
        ("1" * 5000, "an integer has more digits than evictlab reads"),
        ('{"schema_version": NaN}', "NaN is not a JSON number"),
    ],
    ids=["deep nesting", "long integer", "NaN"],
)
def test_unparseable_manifest_gives_a_clean_error(tmp_path, cli_error, body, reason):
    manifest = tmp_path / "official.json"
    manifest.write_text(body)
    code, line = cli_error("validate-contracts", "--official-manifest", str(manifest))
    assert code == 2
    assert f"{manifest}: not valid JSON ({reason}" in line


def test_unparseable_rows_line_gives_a_clean_error(tmp_path, cli_error):
    rows = tmp_path / "deep.rows.jsonl"
    rows.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    code, line = cli_error("qa", "stats", "--rows", str(rows), "--protocol-id", "p",
                           "--output-dir", str(tmp_path / "o"))
    assert code == 2
    assert f"{rows}, line 1: not valid JSON (nested more than" in line


def test_lone_surrogate_in_a_question_id_gives_a_clean_error(tmp_path, cli_error):
    rows = json.loads(DEMO_DATASET.read_text(encoding="utf-8"))
    rows[3]["question_id"] = "a\ud800b"
    dataset = tmp_path / "surrogate.json"
    dataset.write_text(json.dumps(rows))  # ensure_ascii writes the surrogate as \ud800
    code, line = cli_error("validate", "--dataset", str(dataset), "--allow-unpinned")
    assert code == 2
    assert "row 3: question_id must be a non-empty string of Unicode text" in line


def test_lone_surrogate_in_a_manifest_gives_a_clean_error(tmp_path, cli_error):
    text = DEFAULT_SYNTHETIC_MANIFEST.read_text(encoding="utf-8")
    manifest = tmp_path / "synthetic.json"
    manifest.write_text(text.replace('"correction_', '"\\udc00correction_', 1))
    code, line = cli_error("validate-contracts", "--synthetic-manifest", str(manifest))
    assert code == 2
    assert "lone surrogate" in line


@pytest.mark.parametrize(
    "edit, reason",
    [
        ("  workers: 3\n", "  workers: 3" + "0" * 5000 + "\n"),
        ("  workers: 3\n", "  workers: 0x" + "f" * 5000 + "\n"),
        ('evaluation_time: "2026-08-13T00:00:00Z"', "evaluation_time: 2026-13-45"),
    ],
    ids=["long integer", "long hexadecimal integer", "impossible date"],
)
def test_unconvertible_yaml_scalars_give_a_clean_error(tmp_path, cli_error, edit, reason):
    options = protocol_copy(tmp_path, config_edits={edit: reason})
    code, line = cli_error("validate-contracts", *options)
    assert code == 2
    assert "config.yaml: " in line


@pytest.mark.parametrize("clock", ['"0001-01-01T00:00:00+05:00"', "0001-01-01 00:00:00+05:00"])
def test_evaluation_time_in_year_one_gives_a_clean_error(tmp_path, cli_error, clock):
    edits = {'evaluation_time: "2026-08-13T00:00:00Z"': f"evaluation_time: {clock}"}
    options = protocol_copy(tmp_path, config_edits=edits)
    code, line = cli_error("validate-contracts", *options)
    assert code == 2
    assert "evaluation_time: is out of the representable range" in line


def test_evaluation_time_in_year_one_in_a_run_spec_gives_a_clean_error(tmp_path, cli_error):
    out = tmp_path / "out"
    code, line = cli_error("diff", "--from", "pr4810-final:evaluation_time=0001-01-01T00:00:00+05:00",
                           "--to", "pr4810-final", "--output-dir", str(out))  # fmt: skip
    assert code == 2
    assert "evaluation_time" in line


# --------------------------------------------------------------------------- item 2


def test_synthetic_case_id_equal_to_an_official_one_is_refused(tmp_path, cli_error):
    official_id = json.loads(DEFAULT_OFFICIAL_MANIFEST.read_text())["scenarios"]["access_help"][0]
    manifest = json.loads(DEFAULT_SYNTHETIC_MANIFEST.read_text(encoding="utf-8"))
    manifest["cases"][0]["case_id"] = official_id
    path = tmp_path / "synthetic.json"
    path.write_text(json.dumps(manifest))
    code, line = cli_error("validate-contracts", "--synthetic-manifest", str(path),
                           "--official-manifest", str(DEFAULT_OFFICIAL_MANIFEST))  # fmt: skip
    assert code == 2
    assert f"case id(s) {official_id} also appear in the official manifest" in line


@pytest.mark.parametrize(
    "text, reason",
    [
        (b'{"time": "2026-01-01T00:00:00Z", "event": "tick", "event": "ask"}\n', "duplicate key 'event'"),
        (b'{"time": "2026-01-01T00:00:00Z", "event": "tick", "size": 1' + b"0" * 5000 + b"}\n", "more digits"),
        (b'{"time": "2026-01-01T00:00:00Z", "event": "' + b"x" * (5 << 20), "longer than evictlab's limit"),
    ],
    ids=["duplicate key", "long integer", "endless line"],
)
def test_a_hostile_trace_file_gives_a_clean_error(tmp_path, cli_error, text, reason):
    trace = tmp_path / "hostile.jsonl"
    trace.write_bytes(text)
    code, line = cli_error("trace", "replay", "--trace", str(trace), "--output-dir", str(tmp_path / "out"))
    assert code == 2
    assert f"{trace}: row 0 (line 1): " in line and reason in line
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- item 9: downloads


@pytest.mark.parametrize("declared", [True, False], ids=["announced 800 MB", "endless"])
def test_a_hostile_download_never_fills_the_disk(tmp_path, cli_error, monkeypatch, declared):
    import evictlab.core.fetch

    monkeypatch.setattr(evictlab.core.fetch, "MAX_DATASET_BYTES", 1 << 20)  # a small limit keeps the test quick
    headers = b"Content-Length: 800000000\r\n" if declared else b""
    with RawServer(endless_body(headers)) as server:
        target = tmp_path / "oracle.json"
        code, line = cli_error("data", "fetch", "--url", server.base_url + "/oracle.json",
                               "--output", str(target), "--quiet")
    assert code == 2
    assert "evictlab's limit of 1048576" in line
    assert list(tmp_path.iterdir()) == []  # no partial file is left


@pytest.mark.parametrize("name", ["qa_run.json", "qa.summary.json"])
def test_a_forged_run_file_in_a_qa_report_folder_gives_a_clean_error(tmp_path, name):
    from evictlab.analysis.qa.report import load_qa_run, reference_run_dir
    from evictlab.errors import ContractError

    folder = tmp_path / "run"
    shutil.copytree(reference_run_dir("v3"), folder)
    sparse_file(folder / name, 5 << 20, b"{")  # a 5 MiB "JSON object" that never closes
    with pytest.raises(ContractError, match=f"{name}: run file is 5242880 bytes, over evictlab's limit"):
        load_qa_run(folder)
    (folder / name).write_text('{"schema_version": 1, "schema_version": 2}')
    with pytest.raises(ContractError, match="duplicate key 'schema_version'"):
        load_qa_run(folder)
