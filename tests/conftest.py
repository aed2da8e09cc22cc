"""Fixtures shared across test modules."""

from __future__ import annotations

import socket
import sys
from dataclasses import dataclass

import browser
import pytest
from openai_stub import OpenAIStub
from qa_harness import API_KEY, KEY_ENV, URL_ENV, Responder, demo_pool_set, run_qa_cli

from evictlab.analysis.qa.tasks import build_tasks


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
