"""`make lab` starts JupyterLab on the notebooks, also as root (it adds --allow-root then)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "evictlab-test-token"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("make") is None, reason="needs make on PATH"),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_make_lab_serves_the_notebooks_and_stops(tmp_path):
    port = free_port()
    stamp = tmp_path / "stamp"
    stamp.touch()  # newer than pyproject.toml: make installs nothing
    arguments = f"--no-browser --ip=127.0.0.1 --port={port} --ServerApp.token={TOKEN} --ServerApp.port_retries=0"
    command = ["make", "--no-print-directory", "lab", f"VENV={sys.prefix}", f"STAMP={stamp}",
               f"PYTHON={sys.executable}", f"LAB_ARGS={arguments}"]
    log = (tmp_path / "lab.log").open("w")
    # No repository for make's notebook-filter step: this test must not rewrite the checkout's git config.
    environment = {**os.environ, "GIT_DIR": str(tmp_path / "no-repository")}
    server = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        contents = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and server.poll() is None:
            try:
                url = f"http://127.0.0.1:{port}/api/contents?token={TOKEN}"
                with urllib.request.urlopen(url, timeout=5) as response:
                    contents = json.load(response)
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        log.flush()
        assert contents is not None, (tmp_path / "lab.log").read_text()
        names = {item["name"] for item in contents["content"]}
        assert "07_explorer.ipynb" in names  # the server's root is the notebooks folder
        if os.geteuid() == 0:
            assert "--allow-root" in (tmp_path / "lab.log").read_text()  # the command make echoed
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
        log.close()
    assert server.returncode is not None
