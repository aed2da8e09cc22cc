"""Fixtures shared across test modules."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import browser
import pytest
from filelock import FileLock
from openai_stub import OpenAIStub
from qa_harness import API_KEY, KEY_ENV, URL_ENV, Responder, demo_pool_set, run_qa_cli

from evictlab.analysis.qa.tasks import build_tasks

#: The suite's longest tests (both lanes), in the order they start. ``make test`` and the slow lane
#: run with ``--maxschedchunk 1``: each worker holds two tests, and a free one takes the next.
#: The smoke report (made by the first, shared by every test that reads it) and the README spec's
#: report run at once on the two workers, beside the gate and the wheel; the short tests then fill
#: both workers to the end. The rest keep their order.
LONGEST_FIRST = (
    "tests/test_report.py::test_report_succeeds_and_executes_every_notebook",
    "tests/test_gate.py::test_every_kept_set_change_of_100_perturbations_fails_and_20_reruns_pass",
    "tests/test_report.py::test_the_readme_example_spec_gives_a_report_of_every_notebook"
    "_and_a_subset_leaves_it_intact",
    "tests/test_wheel.py::test_the_wheel_runs_the_report_in_a_fresh_python_3_12_venv",
    "tests/test_trace_stages.py::test_stage_losses_sum_to_the_total_loss_on_1000_traces",
    "tests/test_browser_lab.py::test_explorer_notebook_runs_and_responds_in_jupyterlab",
    "tests/attacks/test_attack_disk_runs.py::test_a_report_on_a_disk_that_fills_up_ends_error_and_resumes",
    "tests/attacks/test_attack_runs.py::test_report_with_a_forged_legacy_manifest_deletes_nothing",
    "tests/attacks/test_attack_runs.py::test_a_second_run_into_a_busy_folder_is_refused_and_the_first_finishes"
    "_untouched[report]",
    "tests/attacks/test_attack_dask.py::test_ctrl_c_or_sigterm_on_a_local_cluster_prints_no_worker_traceback"
    "[SIGINT-True]",
    "tests/attacks/test_attack_dask.py::test_ctrl_c_or_sigterm_on_a_local_cluster_prints_no_worker_traceback"
    "[SIGTERM-True]",
    "tests/attacks/test_attack_dask.py::test_ctrl_c_or_sigterm_on_a_local_cluster_prints_no_worker_traceback"
    "[SIGTERM-False]",
    "tests/test_trace_golden.py::test_kept_lists_at_every_write_are_todays[0]",
    "tests/test_trace_golden.py::test_kept_lists_at_every_write_are_todays[1]",
    "tests/test_trace_golden.py::test_kept_lists_at_every_write_are_todays[2]",
    "tests/test_report.py::test_key_tables_follow_the_qa_parameters_given_with_p",
    "tests/test_browser_lab.py::test_make_lab_serves_the_notebooks_and_stops",
    "tests/test_notebooks.py::test_a_dataset_the_spec_names_is_named_under_every_figure",
    "tests/test_trace_optimum.py::test_no_policy_beats_the_optimum",
)


def pytest_collection_modifyitems(items):
    rank = {nodeid: index for index, nodeid in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid, len(LONGEST_FIRST)))  # stable


@pytest.fixture
def credentials(monkeypatch):
    """Set the credential variables for a stub: ``credentials(stub)``."""

    def point_at(stub: OpenAIStub) -> None:
        monkeypatch.setenv(KEY_ENV, API_KEY)
        monkeypatch.setenv(URL_ENV, stub.base_url)

    return point_at


@pytest.fixture
def refused_port():
    """A port of 127.0.0.1 where a connection is refused: held bound but not listening for the
    test, so no other process can start listening there meanwhile (a port merely found free
    could be taken by then)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]


@pytest.fixture(scope="module")
def demo_tasks():
    return build_tasks(demo_pool_set())


@pytest.fixture(scope="module")
def answering_stub(demo_tasks):
    """One stub for a whole module, answering as the model, with the credentials set."""
    with OpenAIStub(fallback=Responder(demo_tasks)) as stub, pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, API_KEY)
        patch.setenv(URL_ENV, stub.base_url)
        yield stub


@pytest.fixture(scope="module")
def completed_run(tmp_path_factory, answering_stub):
    """A finished run-qa folder on the demo (all 90 rows answered); copy it before changing it."""
    output = tmp_path_factory.mktemp("qa") / "run"
    assert run_qa_cli(output) == 0
    return output


@pytest.fixture(scope="module")
def chromium():
    """A headless Chromium context (Playwright, Debian's browser) for a module; skipped, with the
    reason, only where no Chromium or no Playwright is installed."""
    reason = browser.unavailable_reason()
    if reason:
        pytest.skip(f"browser test: {reason}")
    with browser.chromium() as context:
        yield context


@dataclass(frozen=True)
class MakeOverrides:
    """Make variables and environment under which ``make lab`` in the checkout touches nothing
    shared: it uses this test run's own venv (``VENV``, ``PYTHON``), counted as installed by a
    stamp newer than pyproject.toml (``STAMP``: nothing is reinstalled or rebuilt), and sees no
    repository (``GIT_DIR``), so its notebook-filter step leaves the checkout's git config alone."""

    variables: list[str]
    environment: dict[str, str]


@pytest.fixture
def make_overrides(tmp_path):
    stamp = tmp_path / "make-stamp"
    stamp.touch()
    return MakeOverrides(
        variables=[f"VENV={sys.prefix}", f"STAMP={stamp}", f"PYTHON={sys.executable}"],
        environment={"GIT_DIR": str(tmp_path / "no-repository")},
    )


@dataclass(frozen=True)
class SmokeReport:
    """``evictlab report --smoke`` on the demo: its exit code, folder and what it printed."""

    code: int
    output: Path
    printed: str


@pytest.fixture(scope="session")
def smoke_report(tmp_path_factory) -> SmokeReport:
    """The smoke report, executed once per test session and shared by every test that reads it
    (under xdist the workers share one, made by whichever asks first, under a lock). Read it,
    never change it: a test that needs to change a report makes its own."""
    from evictlab import cli

    # Under xdist each worker's base folder sits in the session's own: the same for every worker.
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    output, done = shared / "smoke-report", shared / "smoke-report.json"
    with FileLock(str(shared / "smoke-report.lock")):
        if not done.exists():
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                code = cli.main(["report", "--smoke", "--output-dir", str(output), "--no-progress"])
            done.write_text(json.dumps({"code": code, "printed": printed.getvalue()}), encoding="utf-8")
    made = json.loads(done.read_text(encoding="utf-8"))
    return SmokeReport(made["code"], output, made["printed"])
