"""Attacks on ``evictlab view``: a run folder that points outside itself, tampered rows, and
strings that try to break the page's embedded data.

Issue 26, "the viewer reads outside its folder and trusts every field". Every folder is a real
one written by the real command, then tampered with as an attacker would. The page's embedded
data is read back with an HTML5 parser (html5lib, which follows the WHATWG tokenizer, script
data escape states included), not with a regular expression.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evictlab.cli import main
from evictlab.workbench.viewer import load_run, render

SECRET = "SECRET-OUTSIDE-THE-FOLDER"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """One real folder of each kind the viewer reads (copy one before tampering with it)."""
    root = tmp_path_factory.mktemp("view-attacks")
    commands = {
        "policy": ["run-policy", "--policies", "confidence"],
        "diff": ["diff", "--from", "pr4810-run2", "--to", "pr4810-final"],
        "sweep": ["sweep", "--weights-step", "0.5", "--capacities", "5", "--no-progress"],
        "trace": ["trace", "replay", "--seeds", "1", "--policies", "confidence", "--capacities", "5"],
    }
    for name, argv in commands.items():
        assert main([*argv, "--output-dir", str(root / name)]) == 0
    qa = root / "qa"
    qa.mkdir()
    (qa / "qa.rows.jsonl").write_text(json.dumps(QA_ROW) + "\n")
    return {name: root / name for name in [*commands, "qa"]}


QA_ROW = {"case_id": "c1", "policy": "hybrid-v1", "capacity": 7, "scenario": "access_help", "grade_correct": True,
          "grade_rule": "token-f1", "request_fingerprint": "ab12", "prediction": "an answer",
          "kept_fact_ids": ["f1"], "usage": {"prompt_tokens": 12}}


@pytest.fixture
def folder(folders, tmp_path):
    """``folder(kind)``: a fresh copy of the real folder of ``kind``, beside a file holding a secret."""
    (tmp_path / "secret.csv").write_text(f"policy,capacity\n{SECRET},5\n")

    def copy(kind: str) -> Path:
        return Path(shutil.copytree(folders[kind], tmp_path / kind))

    return copy


def refused(cli_error, run_dir: Path, *fragments: str) -> str:
    """The one error line of ``evictlab view RUN_DIR``, which must name every fragment; no page written."""
    code, line = cli_error("view", str(run_dir), "--output", str(run_dir.parent / "page.html"))
    assert code == 2
    for fragment in fragments:
        assert fragment in line, line
    assert not (run_dir.parent / "page.html").exists()
    assert SECRET not in line
    return line


def edit_record(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def edit_line(path: Path, number: int, change) -> None:
    lines = path.read_text().splitlines()
    row = json.loads(lines[number - 1])
    change(row)
    lines[number - 1] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------- outside the folder


@pytest.mark.parametrize("name", ["ABSOLUTE", "../secret.csv", "./../secret.csv",
                                  "curve.rows.parquet/../../secret.csv"])
def test_a_record_naming_an_output_outside_the_folder_is_refused(folder, cli_error, name):
    run_dir = folder("trace")
    name = str(run_dir.parent / "secret.csv") if name == "ABSOLUTE" else name
    # First among the outputs: the page would embed it as the run's summary table.
    edit_record(run_dir / "trace-replay.run.json",
                lambda record: record.update(outputs={name: {"bytes": 1, "sha256": "0" * 64}, **record["outputs"]}))
    refused(cli_error, run_dir, "trace-replay.run.json", "outputs", "outside the run folder")


@pytest.mark.parametrize(("kind", "name"), [
    ("trace", "curve.summary.csv"), ("trace", "curve.rows.parquet"), ("trace", "trace-replay.run.json"),
    ("sweep", "extreme_settings.csv"), ("sweep", "sweep.run.json"),
    ("policy", "policy.raw.jsonl"), ("policy", "summary.json"), ("policy", "run.json"),
    ("diff", "diff.cases.jsonl"), ("diff", "diff.summary.json"), ("qa", "qa.rows.jsonl"),
])
def test_a_file_replaced_by_a_link_to_outside_the_folder_is_refused(folder, cli_error, kind, name):
    run_dir = folder(kind)
    outside = run_dir.parent / f"outside-{name}"
    shutil.copy(run_dir / name, outside)  # a valid file of the right kind: only its place is wrong
    if name.endswith((".csv", ".jsonl", ".json")):
        outside.write_text(outside.read_text().replace("confidence", SECRET, 1).replace("c1", SECRET, 1))
    (run_dir / name).unlink()
    (run_dir / name).symlink_to(outside)
    refused(cli_error, run_dir, str(run_dir / name), "outside the run folder")


def test_a_link_inside_the_folder_and_a_linked_folder_are_read(folder, tmp_path):
    run_dir = folder("trace")
    (run_dir / "curve.summary.csv").rename(run_dir / "kept.csv")
    (run_dir / "curve.summary.csv").symlink_to("kept.csv")
    (tmp_path / "alias").symlink_to(run_dir)
    assert main(["view", str(tmp_path / "alias"), "--output", str(tmp_path / "page.html")]) == 0


# --------------------------------------------------------------------------- tampered fields

DEEP = "[" * 100_000 + "]" * 100_000

POLICY_EDITS = {
    "kept_fact_ids": (lambda row: row.update(kept_fact_ids=7), "kept_fact_ids"),
    "kept_fact_ids as text": (lambda row: row.update(kept_fact_ids="d_1"), "kept_fact_ids"),
    "support_fact_ids": (lambda row: row.update(support_fact_ids=[1, 2]), "support_fact_ids"),
    "scores as text": (lambda row: row.update(scores="high"), "scores"),
    "a score as a list": (lambda row: next(iter(row["scores"].values())).update(value=[0.5]), "value"),
    "a score entry as a number": (lambda row: row["scores"].update({next(iter(row["scores"])): 3}), "scores"),
    "a component as text": (lambda row: next(iter(row["scores"].values())).update(components="x"), "components"),
    "capacity as a list": (lambda row: row.update(capacity=[5]), "capacity"),
    "capacity as a boolean": (lambda row: row.update(capacity=True), "capacity"),
    "policy as a mapping": (lambda row: row.update(policy={"name": "x"}), "policy"),
    "reserved slots as text": (lambda row: row.update(reserved_correction_slots="2"), "reserved_correction_slots"),
    "evicted as text": (lambda row: row.update(evicted="all"), "evicted"),
    "an evicted entry as a number": (lambda row: row.update(evicted=[4]), "evicted"),
}


@pytest.mark.parametrize("edit", sorted(POLICY_EDITS))
def test_a_tampered_policy_row_is_refused_naming_its_line_and_field(folder, cli_error, edit):
    run_dir = folder("policy")
    change, field = POLICY_EDITS[edit]
    edit_line(run_dir / "policy.raw.jsonl", 3, change)
    refused(cli_error, run_dir, "policy.raw.jsonl line 3", field)


QA_EDITS = {
    "grade_correct as text": (lambda row: row.update(grade_correct="no"), "grade_correct"),
    "kept_fact_ids as a number": (lambda row: row.update(kept_fact_ids=5), "kept_fact_ids"),
    "usage as text": (lambda row: row.update(usage="many"), "usage"),
    "capacity as text": (lambda row: row.update(capacity="7"), "capacity"),
    "case_id as a list": (lambda row: row.update(case_id=["c1"]), "case_id"),
}


@pytest.mark.parametrize("edit", sorted(QA_EDITS))
def test_a_tampered_qa_row_is_refused_naming_its_line_and_field(folder, cli_error, edit):
    run_dir = folder("qa")
    change, field = QA_EDITS[edit]
    edit_line(run_dir / "qa.rows.jsonl", 1, change)
    refused(cli_error, run_dir, "qa.rows.jsonl line 1", field)


DIFF_EDITS = {
    "capacities as text": (lambda row: row.update(capacities="5,7"), "capacities"),
    "a capacity block as a number": (lambda row: row["capacities"].update({"5": 3}), "capacities.5"),
    "entered as text": (lambda row: row["capacities"]["5"].update(entered="d_1"), "entered"),
    "case_id as a mapping": (lambda row: row.update(case_id={"id": 1}), "case_id"),
}


@pytest.mark.parametrize("edit", sorted(DIFF_EDITS))
def test_a_tampered_diff_row_is_refused_naming_its_line_and_field(folder, cli_error, edit):
    run_dir = folder("diff")
    change, field = DIFF_EDITS[edit]
    edit_line(run_dir / "diff.cases.jsonl", 2, change)
    refused(cli_error, run_dir, "diff.cases.jsonl line 2", field)


@pytest.mark.parametrize(("kind", "name", "content", "fragment"), [
    ("policy", "policy.raw.jsonl", DEEP + "\n", "line 1"),
    ("qa", "qa.rows.jsonl", DEEP + "\n", "line 1"),
    ("diff", "diff.cases.jsonl", DEEP + "\n", "line 1"),
    ("policy", "policy.raw.jsonl", '{"case_id": "a", "case_id": "b"}\n', "duplicate key"),
    ("policy", "policy.raw.jsonl", "[1, 2]\n", "line 1"),
    ("policy", "summary.json", DEEP, "nested"),
    ("policy", "summary.json", '{"groups": "all"}', "groups"),
    ("policy", "summary.json", '{"groups": [1, 2]}', "groups"),
    ("policy", "run.json", "[]", "run.json"),
    ("diff", "diff.summary.json", '{"pools_total": NaN}', "NaN"),
    ("qa", "qa.summary.json", '{"groups": {"a": 1}}', "groups"),
    ("sweep", "extreme_settings.csv", "preset,policy\n" + "x" * 200_000 + ",a\n", "line 2"),
    ("sweep", "extreme_settings.csv", b"preset,policy\n\xff\xfe,a\n", "UTF-8"),
    ("trace", "curve.summary.csv", "policy,capacity\n" + "x" * 200_000 + ",5\n", "line 2"),
    ("trace", "curve.rows.parquet", b"PAR1 not a parquet file", "curve.rows.parquet"),
    ("trace", "curve.summary.csv", b"\x00\x01\x02", "curve.summary.csv"),
])
def test_a_tampered_file_is_refused_naming_it(folder, cli_error, kind, name, content, fragment):
    run_dir = folder(kind)
    path = run_dir / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    refused(cli_error, run_dir, str(path), fragment)


RECORD_EDITS = {
    "summary rows as a list": (lambda record: record["summary"].update(rows=[3, 3]), "summary"),
    "a row count as text": (lambda record: record["summary"]["rows"].update({"curve.rows.parquet": "3"}), "rows"),
    "an output that is missing": (lambda record: record["outputs"].update({"gone.csv": {}}), "gone.csv"),
    "an output name that is not text": (lambda record: record.update(outputs={"": {}}), "outputs"),
}


@pytest.mark.parametrize("edit", sorted(RECORD_EDITS))
def test_a_tampered_trace_record_is_refused_naming_the_field(folder, cli_error, edit):
    run_dir = folder("trace")
    change, fragment = RECORD_EDITS[edit]
    edit_record(run_dir / "trace-replay.run.json", change)
    refused(cli_error, run_dir, "trace-replay.run.json", fragment)


def test_a_row_table_larger_than_its_record_says_is_not_embedded_whole(folder, tmp_path):
    import pandas as pd

    run_dir = folder("trace")
    rows = pd.read_parquet(run_dir / "curve.rows.parquet")
    pd.concat([rows] * 4_000, ignore_index=True).to_parquet(run_dir / "curve.rows.parquet", index=False)
    run = load_run(run_dir)  # the record still says len(rows) rows: the file's own row count decides
    assert run.cases == [] and any(f"{4_000 * len(rows):,} rows" in note for note in run.notes)


@pytest.mark.parametrize(("kind", "name"), [("policy", "policy.raw.jsonl"), ("policy", "summary.json"),
                                            ("sweep", "extreme_settings.csv"), ("trace", "trace-replay.run.json"),
                                            ("qa", "qa.rows.jsonl")])
def test_a_2_gb_file_is_refused_at_once_under_a_memory_cap(folder, kind, name):
    run_dir = folder(kind)
    with open(run_dir / name, "r+b") as handle:
        handle.truncate(2 << 30)  # sparse: 2 GB to read, nothing on disk

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    result = subprocess.run([sys.executable, "-m", "evictlab", "view", str(run_dir)], capture_output=True,
                            text=True, preexec_fn=cap, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{run_dir / name}:" in result.stderr and "limit" in result.stderr, result.stderr


# --------------------------------------------------------------------------- the embedded data

HOSTILE = ["<!--<script>", "<!--<script>x</script>-->", "</script><script>alert(1)</script>", "<!--", "-->",
           "</SCRIPT >", "<script>", "<\\/script>", "]]>", "&lt;&amp;", "\u2028\u2029", "<!-- </script",
           "\\u003c!--", "a\x00b", "'\"`"]


def embedded(page: str) -> tuple[object, list[str]]:
    """The page's embedded data as an HTML5 parser reads it, and the text of every script element."""
    html5lib = pytest.importorskip("html5lib")
    document = html5lib.parse(page, namespaceHTMLElements=False)
    scripts = document.findall(".//script")
    data = [script for script in scripts if script.get("id") == "evictlab-data"]
    assert len(data) == 1 and len(scripts) == 2, [script.get("id") for script in scripts]
    return json.loads(data[0].text), [script.text or "" for script in scripts]


def qa_folder(root: Path, value: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    # Names must be non-empty text: a prefix keeps them so whatever the string.
    row = {**QA_ROW, "case_id": f"c{value}", "policy": f"p{value}", "kept_fact_ids": [f"f{value}"], "scenario": value,
           "extra": value}
    (root / "qa.rows.jsonl").write_text(json.dumps(row) + "\n")
    (root / "qa.summary.json").write_text(json.dumps({"groups": [{"policy": value, "note": value}]}))
    return root


def check_page_survives(root: Path, value: str) -> None:
    run = load_run(qa_folder(root, value))
    page = render([run])
    data, scripts = embedded(page)
    case = data["runs"][0]["cases"][0]
    shown = (case["case_id"], case["policy"], case["scenario"], case["extra"])
    assert shown == (f"c{value}", f"p{value}", value, value)
    assert data["runs"][0]["summary"] == [{"policy": value, "note": value}]
    assert scripts[1].rstrip().endswith("tabs();")  # the page's own script is whole


@pytest.mark.parametrize("value", HOSTILE)
def test_the_embedded_data_survives_a_hostile_string(tmp_path, value):
    check_page_survives(tmp_path / "run", value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["<!--", "-->", "<script", "</script", "<SCRIPT", "</", ">", " ", "/", "\\", "&"])
                | st.text(max_size=3), max_size=8).map(lambda parts: "".join(map(str, parts))))
def test_the_embedded_data_survives_any_string(tmp_path, value):
    check_page_survives(tmp_path / "run", value)


def test_a_hostile_folder_name_stays_text_in_the_title(folder, tmp_path):
    run_dir = folder("policy").rename(tmp_path / "<!--<script>&amp;<b>x")  # no "/" in a name
    page = tmp_path / "page.html"
    assert main(["view", str(run_dir), "--output", str(page)]) == 0
    html5lib = pytest.importorskip("html5lib")
    document = html5lib.parse(page.read_text(encoding="utf-8"), namespaceHTMLElements=False)
    assert document.find(".//title").text == f"evictlab view: {run_dir.name}"
    assert document.find(".//h1").text == f"evictlab view: {run_dir.name}"
    data, _ = embedded(page.read_text(encoding="utf-8"))
    assert data["runs"][0]["label"] == run_dir.name
