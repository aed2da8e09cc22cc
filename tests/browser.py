"""Headless Chromium and a throwaway JupyterLab, for the browser tests and benchmarks.

Both drive what a person uses: Debian's Chromium (``apt-get install chromium``, never a
browser build downloaded by Playwright) through Playwright, and a real JupyterLab server on
a port of 127.0.0.1 that it picks itself, with its own token and its own settings, workspace
and runtime folders, stopped afterwards. It is test tooling, kept with the tests
(``import browser``; pytest puts ``tests/`` on the path, the benchmark adds it); Playwright is a
development dependency and is imported only when a browser is started.

* :func:`find_chromium` says where Chromium is (``EVICTLAB_CHROMIUM``, ``/usr/bin/chromium``,
  or ``chromium`` on ``PATH``), or None.
* :func:`chromium` starts it headless with a fresh profile and yields a Playwright browser
  context; :class:`ConsoleLog` records a page's console errors.
* :class:`JupyterLab` starts ``jupyter lab`` (``--allow-root`` when running as root) and
  waits until it answers; leaving the ``with`` block stops it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: Chromium's flags for a headless run as root in a container. Without the background-networking
#: flags Chromium's own connections (updates, sync, field trials) are refused and logged.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
DEFAULT_CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1400, "height": 1000}


def find_chromium() -> str | None:
    """The Chromium executable to drive, or None when none is installed."""
    for candidate in (os.environ.get("EVICTLAB_CHROMIUM"), DEFAULT_CHROMIUM, shutil.which("chromium")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def unavailable_reason() -> str | None:
    """Why no browser can be driven here (no Playwright, no Chromium), or None when one can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install -e '.[dev]')"
    if find_chromium() is None:
        return f"no Chromium at {DEFAULT_CHROMIUM} or on PATH (apt-get install chromium)"
    return None


@contextmanager
def chromium(*, viewport: Any = None) -> Iterator[Any]:
    """A Playwright ``BrowserContext`` in headless Chromium with a fresh, temporary profile;
    ``viewport``: ``{"width": ..., "height": ...}`` in CSS pixels (default :data:`VIEWPORT`)."""
    from playwright.sync_api import ViewportSize, sync_playwright

    size = viewport or VIEWPORT
    executable = find_chromium()
    if executable is None:
        raise RuntimeError(unavailable_reason())
    with tempfile.TemporaryDirectory(prefix="evictlab-chromium-") as profile, sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            profile, executable_path=executable, headless=True, args=list(CHROMIUM_ARGS),
            viewport=ViewportSize(width=size["width"], height=size["height"]),
        )
        try:
            yield context
        finally:
            context.close()


class ConsoleLog:
    """Every console message and uncaught page error of one page; ``errors`` are the failures."""

    def __init__(self, page: Any) -> None:
        self.messages: list[str] = []
        self.errors: list[str] = []
        page.on("console", self._on_console)
        page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))

    def _on_console(self, message: Any) -> None:
        text = f"{message.type}: {message.text}"
        self.messages.append(text)
        if message.type == "error":
            self.errors.append(text)


def served_port(runtime_dir: str | os.PathLike) -> int | None:
    """The port of the Jupyter server whose runtime folder (``JUPYTER_RUNTIME_DIR``) is
    ``runtime_dir``, read from the ``jpserver-<pid>.json`` file it writes once it has chosen its
    port; None while there is no such file yet (or it is still being written)."""
    for path in Path(runtime_dir).glob("jpserver-*.json"):
        try:
            return int(json.loads(path.read_text(encoding="utf-8"))["port"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


class JupyterLab:
    """A JupyterLab server over ``root_dir`` (default: the current folder) on 127.0.0.1, for one
    ``with`` block.

    ``token``: the server's token (a random one by default; ``""`` for a token-less server).
    ``command``: what to run instead of ``python -m jupyter lab ROOT [--allow-root]`` (e.g.
    ``make lab``), run in ``cwd`` with ``env`` added to the environment.
    Address, port and token reach the server through its config folder (``JUPYTER_CONFIG_DIR``),
    which, with its settings, workspaces and runtime files, is a temporary folder: a run
    neither reads nor leaves a user's JupyterLab state. The server is given port 0: it asks
    the system for a free port itself and binds it moments later in the same process, a far
    narrower window for another process to take it than a port chosen seconds earlier
    elsewhere (narrower, not closed: losing that race ends the server, and the start fails
    with its log). :attr:`port` is read back from its runtime file. Output goes to
    :attr:`log_path`, which :meth:`log` reads.
    """

    def __init__(
        self,
        root_dir: str | os.PathLike | None = None,
        *,
        token: str | None = None,
        command: Sequence[str] | None = None,
        cwd: str | os.PathLike | None = None,
        env: Mapping[str, str] | None = None,
        startup_seconds: float = 90.0,
    ) -> None:
        self.root_dir = root_dir
        self.token = secrets.token_hex(16) if token is None else token
        self.port: int | None = None  # known once the server has started
        self.command = list(command) if command else [sys.executable, "-m", "jupyter", "lab", *self.options()]
        self.cwd = cwd
        self.env = dict(env or {})
        self.startup_seconds = startup_seconds
        self._state = tempfile.TemporaryDirectory(prefix="evictlab-lab-")
        self.log_path = Path(self._state.name) / "server.log"
        self.process: subprocess.Popen | None = None
        self.returncode: int | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("the JupyterLab server has not started; use it in a with block")
        return f"http://127.0.0.1:{self.port}"

    def page_url(self, path: str = "lab") -> str:
        """The URL of ``path`` on the server, carrying the token when there is one."""
        return f"{self.url}/{path.lstrip('/')}" + (f"?token={self.token}" if self.token else "")

    def options(self) -> list[str]:
        """The command-line options of the default command (the rest is in :meth:`_write_config`)."""
        root = [f"--ServerApp.root_dir={self.root_dir}"] if self.root_dir is not None else []
        return [*root, *(["--allow-root"] if is_root() else [])]

    def environment(self) -> dict[str, str]:
        state = Path(self._state.name)
        return {
            **os.environ,
            **self.env,
            "JUPYTER_CONFIG_DIR": str(state / "config"),
            "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
            "IPYTHONDIR": str(state / "ipython"),
            "JUPYTER_PLATFORM_DIRS": "1",
        }

    def _write_config(self) -> None:
        """Address, token and state folders in the server's own config folder, so that a command
        given whole (``make lab``) serves where the test looks; and the settings a person would
        click through once: start the notebook's kernel without asking, fetch no news (the
        machine is offline, and the toast would cover the page). Kernels talk over Unix sockets."""
        state = Path(self._state.name)
        config = {
            "ServerApp": {"ip": "127.0.0.1", "port": 0, "port_retries": 0, "open_browser": False,
                          "password": ""},
            "IdentityProvider": {"token": self.token},
            # Kernels over Unix sockets beside their connection files: no local TCP port to lose
            # to another process between its choice and the kernel's bind (see evictlab.workbench.notebook_kernel).
            "KernelManager": {"transport": "ipc"},
            "LabApp": {"user_settings_dir": str(state / "settings"), "workspaces_dir": str(state / "workspaces"),
                       "check_for_updates_class": "jupyterlab.NeverCheckForUpdate"},
        }
        (state / "config").mkdir()
        for name in ("jupyter_server_config.json", "jupyter_lab_config.json"):
            (state / "config" / name).write_text(json.dumps(config))
        for plugin, values in (("notebook-extension/tracker", {"autoStartDefaultKernel": True}),
                               ("apputils-extension/notification", {"fetchNews": "false"})):
            path = state / "settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))

    def __enter__(self) -> JupyterLab:
        self._write_config()
        with open(self.log_path, "wb") as log:
            # A session of its own, so that stopping it also stops what it started (kernels, make's child).
            self.process = subprocess.Popen(self.command, cwd=self.cwd, env=self.environment(), stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_seconds
        runtime = Path(self._state.name) / "runtime"
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.process.returncode}:\n{self.log()}")
            if self.port is None:
                self.port = served_port(runtime)
            if self.port is not None and self._answers():
                return
            time.sleep(0.25)
        where = "no port yet" if self.port is None else f"on {self.url}"
        raise RuntimeError(f"jupyter lab did not answer ({where}) within {self.startup_seconds:g} s:\n{self.log()}")

    def _answers(self) -> bool:
        status = f"{self.url}/api/status" + (f"?token={self.token}" if self.token else "")
        try:
            with urllib.request.urlopen(status, timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def stop(self) -> int | None:
        """Stop the server (and its kernels) and return its exit code (:attr:`returncode`)."""
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            self.returncode = process.returncode
            # Kernels live in the same session: end any the server left behind.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        return self.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def close(self) -> None:
        self.stop()
        self._state.cleanup()
