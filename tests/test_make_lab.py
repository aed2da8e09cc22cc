"""`make lab` starts JupyterLab on the notebooks, also as root (it adds --allow-root then)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from browser import served_port

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "evictlab-test-token"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("make") is None, reason="needs make on PATH"),
]


def test_make_lab_serves_the_notebooks_and_stops(tmp_path, make_overrides):
    # Port 0: the server binds a port the system gives it, read back from its runtime folder.
    arguments = f"--no-browser --ip=127.0.0.1 --port=0 --ServerApp.token={TOKEN} --ServerApp.port_retries=0"
    command = ["make", "--no-print-directory", "lab", *make_overrides.variables, f"LAB_ARGS={arguments}"]
    log = (tmp_path / "lab.log").open("w")
    runtime = tmp_path / "runtime"
    environment = {**os.environ, **make_overrides.environment, "JUPYTER_RUNTIME_DIR": str(runtime)}
    server = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        contents = None
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and server.poll() is None:
            port = served_port(runtime)
            try:
                if port is not None:
                    url = f"http://127.0.0.1:{port}/api/contents?token={TOKEN}"
                    with urllib.request.urlopen(url, timeout=5) as response:
                        contents = json.load(response)
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
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
