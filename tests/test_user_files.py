"""A memory engineer's own files through the installed command: stores DeerMem reads, folders that
overlap, runs that did not finish. Each case is a real file and a real ``python -m evictlab``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from store_fixtures import START, bucket_dir, replayed_store, stored_fact, write_fact

from evictlab.analysis.evaluate import write_run
from evictlab.core.pools import open_pools
from evictlab.core.runspec import RunSpec
from evictlab.core.stores.deermem import METADATA, shard

AUDIT_SIDECAR, USAGE_SIDECAR = "eviction-audit.json", "fact-usage.json"


def evictlab(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evictlab", *map(str, args)], capture_output=True, text=True)


def tree(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("store")
    replayed_store(root, "confidence", shadow=True, seed=1, updates=30)
    return root


def copy_store(store: Path, tmp_path: Path) -> Path:
    subprocess.run(["cp", "-r", str(store), str(tmp_path / "store")], check=True)
    return tmp_path / "store"


def sidecar(root: Path, name: str) -> Path:
    return bucket_dir(root, "demo-user", "__default__") / METADATA / name


# --------------------------------------------------------------------------- sidecars as DeerMem reads them


def test_a_usage_sidecar_with_nan_infinity_or_a_repeated_key_is_read_as_python_json_reads_it(store, tmp_path):
    # DeerMem reads its sidecars with Python's json: NaN, Infinity, 1e400 and a repeated key (the
    # last wins) load, and only that entry's heat reads as 0 (spec 1.3). The import keeps every
    # other entry and writes the non-finite numbers as null, so its own folder reads back.
    root = copy_store(store, tmp_path)
    path = sidecar(root, USAGE_SIDECAR)
    usage = json.loads(path.read_text())
    ids = sorted(usage)
    text = path.read_text()
    for fact_id, value in zip(ids, ("NaN", "Infinity", "1e400"), strict=False):
        text = text.replace(json.dumps(usage[fact_id]["accessHeat"]), value, 1)
    text = text.replace('"accessCount": ', '"accessCount": 99, "accessCount": ', 1)
    path.write_text(text)
    result = evictlab("import", "deermem", root, "--output-dir", tmp_path / "import")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "read as empty" not in result.stderr
    imported = json.loads((tmp_path / "import" / "usage.json").read_text())["demo-user/__default__"]
    assert sorted(imported) == ids
    assert [imported[fact_id]["accessHeat"] for fact_id in ids[:3]] == [None, None, None]
    assert [imported[fact_id]["accessHeat"] for fact_id in ids[3:]] == [usage[fact_id]["accessHeat"]
                                                                        for fact_id in ids[3:]]  # fmt: skip
    assert "non-finite" in result.stderr and str(path) in result.stderr
    audit = evictlab("audit", tmp_path / "import")
    assert audit.returncode == 0, audit.stderr
    assert "26 audit events" in audit.stdout


def test_an_audit_sidecar_with_a_nan_score_keeps_its_other_events(store, tmp_path):
    root = copy_store(store, tmp_path)
    path = sidecar(root, AUDIT_SIDECAR)
    events = json.loads(path.read_text())
    score = json.dumps(events[0]["evicted"][0]["score"])
    path.write_text(path.read_text().replace(f'"score": {score}', '"score": NaN', 1))
    result = evictlab("import", "deermem", root, "--output-dir", tmp_path / "import")
    assert result.returncode == 0, result.stderr
    assert f"{len(events)} audit events" in result.stdout
    audit = evictlab("audit", tmp_path / "import")
    assert audit.returncode == 0, audit.stderr
    assert f"{len(events)} audit events: {len(events) - 1} checks, 1 cannot be checked, 0 contradicts" in audit.stdout


def test_a_front_matter_with_a_repeated_key_loads_with_the_last_value_as_yaml_safe_load_does(tmp_path):
    root = tmp_path / "store"
    path = write_fact(root, stored_fact("fact_aaaa0001", 0.9, START), "Invented content one")
    write_fact(root, stored_fact("fact_aaaa0002", 0.5, START), "Invented content two")
    path.write_text(path.read_text().replace("confidence: 0.9\n", "confidence: 0.9\nconfidence: 0.3\n"))
    result = evictlab("import", "deermem", root, "--output-dir", tmp_path / "import")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (tmp_path / "import" / "facts.jsonl").read_text().splitlines()]
    assert {row["id"]: row["confidence"] for row in rows} == {"fact_aaaa0001": 0.3, "fact_aaaa0002": 0.5}
    assert f"{path}: front matter repeats key 'confidence'" in result.stderr


# --------------------------------------------------------------------------- output folders over input folders


@pytest.mark.parametrize("inside", [".", "users", f"users/demo-user/agents/__default__/facts/{shard('fact_x')}"])
def test_import_refuses_to_write_into_the_store_it_reads(store, tmp_path, inside):
    root = copy_store(store, tmp_path)
    before = tree(root)
    result = evictlab("import", "deermem", root, "--output-dir", root / inside)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "inside the store" in result.stderr and str(root) in result.stderr
    assert tree(root) == before and sorted(path.name for path in root.iterdir()) == ["users"]


def test_import_refuses_an_output_folder_that_holds_the_store(store, tmp_path):
    root = copy_store(store, tmp_path)
    result = evictlab("import", "deermem", root, "--output-dir", tmp_path)
    assert result.returncode == 2 and "holds the store" in result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["store"]


@pytest.mark.parametrize("inside", [".", "traces"])
def test_audit_refuses_to_write_into_the_import_it_reads(store, tmp_path, inside):
    assert evictlab("import", "deermem", store, "--output-dir", tmp_path / "import").returncode == 0
    before = tree(tmp_path / "import")
    result = evictlab("audit", tmp_path / "import", "--output-dir", tmp_path / "import" / inside)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "inside the imported store" in result.stderr
    assert tree(tmp_path / "import") == before


@pytest.mark.parametrize("command", [("run-policy", "--dataset"), ("trace", "replay", "--trace")])
@pytest.mark.parametrize("inside", [".", "traces"])
def test_run_policy_and_trace_replay_refuse_to_write_into_the_import_they_read(store, tmp_path, command, inside):
    assert evictlab("import", "deermem", store, "--output-dir", tmp_path / "import").returncode == 0
    before = tree(tmp_path / "import")
    result = evictlab(*command, tmp_path / "import", "--capacities", "5", "--output-dir", tmp_path / "import" / inside)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "inside the imported store" in result.stderr
    assert tree(tmp_path / "import") == before


def test_a_file_put_among_an_imports_traces_later_is_not_replayed_as_one(store, tmp_path):
    # Only the traces the import's record lists are the store's; a stray JSONL file (here a
    # run-policy output written there before the refusal above existed) is no trace of it.
    assert evictlab("import", "deermem", store, "--output-dir", tmp_path / "import").returncode == 0
    (tmp_path / "import" / "traces" / "policy.raw.jsonl").write_text('{"capacity": 5}\n')
    result = evictlab("trace", "replay", "--trace", tmp_path / "import", "--capacities", "5", "--output-dir",
                      tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert "policy.raw.jsonl" not in (tmp_path / "out" / "trace-replay.run.json").read_text()


# --------------------------------------------------------------------------- the gate on unfinished runs


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("runs") / "base"
    write_run(folder, open_pools(RunSpec()), ["hybrid-v1"], [7])
    return folder


@pytest.mark.parametrize("status", ["running", "interrupted", "error"])
@pytest.mark.parametrize("side", ["--baseline", "--candidate"])
def test_the_gate_refuses_a_run_that_did_not_finish(finished_run, tmp_path, status, side):
    unfinished = tmp_path / "unfinished"
    subprocess.run(["cp", "-r", str(finished_run), str(unfinished)], check=True)
    record = unfinished / "run-policy.run.json"
    record.write_text(record.read_text().replace('"status": "success"', f'"status": "{status}"', 1))
    sides = {"--baseline": finished_run, "--candidate": finished_run, side: unfinished}
    result = evictlab("gate", *[item for pair in sides.items() for item in pair])
    assert result.returncode == 2, result.stdout
    assert f"{record}: the run-policy run is {status}" in result.stderr
    assert "passed" not in result.stdout


def test_the_gate_refuses_an_unreadable_record_and_passes_a_finished_rerun(finished_run, tmp_path):
    broken = tmp_path / "broken"
    subprocess.run(["cp", "-r", str(finished_run), str(broken)], check=True)
    (broken / "run-policy.run.json").write_text("{")
    result = evictlab("gate", "--baseline", finished_run, "--candidate", broken)
    assert result.returncode == 2 and "unreadable run record" in result.stderr
    result = evictlab("gate", "--baseline", finished_run, "--candidate", finished_run)
    assert result.returncode == 0 and "passed" in result.stdout
