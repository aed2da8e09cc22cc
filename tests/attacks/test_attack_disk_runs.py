"""A disk that fills up in the middle of run-policy, diff, qa stats, run-qa, grade-qa and report
(issue 26, "Full disks"; the harness is test_attack_disk.full_disk_attack).

Each run is a real process caught just after its ``running`` record, the real tmpfs filled to
the last block, then given its space back: one error line naming the path, a record ``error``,
no finished row lost, and the same command resuming to the files a clean run writes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from openai_stub import OpenAIStub
from qa_harness import API_KEY, KEY_ENV, URL_ENV, Responder
from test_attack_disk import full_disk_attack, tmpfs  # noqa: F401 - tmpfs is a fixture

from evictlab.cli import main
from evictlab.results import record_path

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_ID = "deermem-hybrid-v1-pr4789-reproduction-v1"
V3 = ROOT / "data" / "reference" / "deerflow-pr4810" / "v3"
COMMANDS = {
    "run-policy": ["run-policy"],
    "diff": ["diff", "--from", "pr4810-run1", "--to", "pr4810-final"],
    "qa-stats": ["qa", "stats", "--rows", str(V3 / "qa.rows.jsonl"), "--protocol-id", PROTOCOL_ID],
}
#: Files that record when they were made (DeerFlow's run.json: created_at), so no two runs share them.
STAMPED = {"run.json"}


def same_outputs(folder: Path, clean: Path, kind: str) -> None:
    """Every output of the resumed run is byte for byte a clean run's."""
    outputs, expected = (json.loads(record_path(where, kind).read_text())["outputs"] for where in (folder, clean))
    assert set(outputs) == set(expected)
    assert {name: digest for name, digest in outputs.items() if name not in STAMPED} == {
        name: digest for name, digest in expected.items() if name not in STAMPED
    }


@pytest.mark.parametrize("kind", sorted(COMMANDS))
def test_a_run_on_a_disk_that_fills_up_ends_error_and_the_same_command_resumes(kind, tmpfs, tmp_path):  # noqa: F811
    disk = tmpfs("4m")
    full_disk_attack(disk, COMMANDS[kind], disk / "out", kind)
    assert main([*COMMANDS[kind], "--output-dir", str(tmp_path / "clean")]) == 0
    same_outputs(disk / "out", tmp_path / "clean", kind)


@pytest.fixture
def stub_env(demo_tasks):
    with OpenAIStub(fallback=Responder(demo_tasks)) as stub:
        yield {**os.environ, KEY_ENV: API_KEY, URL_ENV: stub.base_url}


def test_run_qa_on_a_disk_that_fills_up_keeps_every_answer_and_resumes(tmpfs, stub_env):  # noqa: F811
    disk = tmpfs("4m")
    argv = ["run-qa", "--retry-delay", "0", "--workers", "1"]
    full_disk_attack(disk, argv, disk / "run", "run-qa", env=stub_env)
    rows = sorted((disk / "run" / "responses").glob("*.json"))
    assert len(rows) == 90 and all(json.loads(path.read_text())["prediction"] for path in rows)


def test_grade_qa_on_a_disk_that_fills_up_ends_error_and_resumes(tmpfs, stub_env, tmp_path):  # noqa: F811
    disk = tmpfs("4m")
    answered = tmp_path / "answered"
    env = os.environ.copy()
    try:
        os.environ.update(stub_env)
        assert main(["run-qa", "--output-dir", str(answered), "--retry-delay", "0"]) == 0
    finally:
        os.environ.clear()
        os.environ.update(env)
    shutil.copytree(answered, disk / "run")
    full_disk_attack(disk, ["grade-qa"], disk / "run", "grade-qa")
    assert main(["grade-qa", "--output-dir", str(answered)]) == 0
    same_outputs(disk / "run", answered, "grade-qa")


@pytest.mark.slow
def test_a_report_on_a_disk_that_fills_up_ends_error_and_resumes(tmpfs):  # noqa: F811
    disk = tmpfs("64m")
    full_disk_attack(disk, ["report", "--smoke", "--notebooks", "05", "--no-progress"], disk / "out", "report")
