"""Notebook kernels for :func:`evictlab.workbench.report.run_report`: each one warm before its notebook.

A kernel takes a few seconds to start and to import pandas, matplotlib, evictlab and what its
notebook needs. :class:`WarmKernels` starts the kernels of the next notebooks while earlier ones
run, and each warm kernel imports its notebook's modules (:func:`notebook_imports`) in its own
process, so the start-up overlaps the work. papermill runs a notebook on a kernel it is given
(its ``km`` argument) and leaves that kernel, and the client it opened on it, to the caller,
which shuts both down here.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import json
import os
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Arguments of every notebook kernel. Its own log (a warning about unencrypted local TCP on
#: every start) is noise here; cell errors reach the executed notebook anyway.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=ERROR", "--HistoryManager.hist_file=:memory:"]

#: Imported by every warm kernel before its notebook runs (``%matplotlib inline`` needs the last two).
WARM_IMPORTS = (
    "evictlab.workbench.plots", "evictlab.workbench.loaders", "matplotlib.pyplot", "matplotlib_inline.backend_inline",
)


#: How long a kernel may take to answer and to run its warm imports.
WARM_UP_SECONDS = 120.0


@dataclass(frozen=True)
class KernelPlan:
    """What one notebook's kernel gets: extra environment variables and the modules to warm."""

    env: Mapping[str, str] = field(default_factory=dict)
    imports: tuple[str, ...] = WARM_IMPORTS


def notebook_imports(path: str | os.PathLike) -> tuple[str, ...]:
    """:data:`WARM_IMPORTS` plus every module a notebook's import statements name.

    ``from evictlab import plots`` names both ``evictlab`` and ``evictlab.plots``; the kernel
    imports each one it can and skips the rest. Lines of IPython magics read as ``pass``; a
    cell that does not parse, or a notebook that cannot be read, adds nothing.
    """
    modules = dict.fromkeys(WARM_IMPORTS)
    try:
        cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return tuple(modules)
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        lines = [line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!")) else line
                 for line in source.splitlines()]
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules.update(dict.fromkeys(alias.name for alias in node.names))
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules[node.module] = None
                modules.update(dict.fromkeys(f"{node.module}.{alias.name}" for alias in node.names))
    return tuple(modules)


def warm_code(modules: Sequence[str]) -> str:
    """Code that imports ``modules`` in a kernel, skipping those that are not modules."""
    return (
        "def _evictlab_warm(names):\n"
        "    import importlib\n"
        "    for name in names:\n"
        "        try:\n"
        "            importlib.import_module(name)\n"
        "        except Exception:\n"
        "            pass\n"
        f"_evictlab_warm({tuple(modules)!r})\n"
        "del _evictlab_warm"
    )


class WarmKernels:
    """A fresh kernel per notebook, each started ``ahead`` notebooks before it is taken.

    ``plans[i]`` is the kernel of the i-th notebook to run. :meth:`take` hands out kernel ``i``
    (starting it if it is not yet) and starts the next ones up to ``i + ahead``, which boot and,
    from a thread of their own (:func:`_warm`), run their imports (silently: no execution
    count, no names left behind) in their own processes while earlier notebooks execute;
    :meth:`release` shuts a kernel down when it has served. Safe to use from several threads.
    Every kernel still running is shut down when the context ends, also on an interruption.
    """

    def __init__(self, kernel_name: str, plans: Sequence[KernelPlan], *, ahead: int = 1) -> None:
        self.kernel_name = kernel_name
        self.plans = list(plans)
        self.ahead = max(1, ahead)
        self.started: dict[int, Any] = {}
        self._next = 0  # the first plan not started yet
        self._lock = threading.Lock()

    def __enter__(self) -> WarmKernels:
        with self._lock:
            self._start_until(self.ahead - 1)
        return self

    def _start_until(self, last: int) -> None:
        while self._next <= min(last, len(self.plans) - 1):
            self.started[self._next] = self._start(self.plans[self._next])
            self._next += 1

    def _start(self, plan: KernelPlan) -> Any:
        manager = _tracking_kernel_manager()(kernel_name=self.kernel_name)
        manager.start_kernel(extra_arguments=KERNEL_ARGUMENTS, env={**os.environ, **plan.env})
        manager.warm_up = threading.Thread(target=_warm, args=(manager, plan.imports), daemon=True,
                                           name="report-kernel-warm-up")
        manager.warm_up.start()
        return manager

    def take(self, index: int) -> Any:
        """The kernel for plan ``index``, once its imports are done; starts the kernels of the
        next ``ahead`` plans."""
        with self._lock:
            self._start_until(index + self.ahead)
            if index not in self.started:
                raise KeyError(f"kernel {index} was already released")
            manager = self.started[index]
        # Its notebook would wait for the same imports; a kernel that never answers is left
        # to papermill, which reports it as that notebook's failure.
        manager.warm_up.join(timeout=WARM_UP_SECONDS)
        return manager

    def release(self, index: int) -> None:
        """Shut kernel ``index`` down (and close its clients)."""
        with self._lock:
            manager = self.started.pop(index, None)
        _stop(manager)

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            managers, self.started = list(self.started.values()), {}
            self._next = len(self.plans)  # nothing starts after this
        for manager in managers:
            _stop(manager)


def cpu_seconds(manager: Any) -> float | None:
    """User plus system CPU time a kernel's process (and its children) has used so far; None
    when the process cannot be read (it died, or this platform hides it)."""
    import psutil

    try:
        times = psutil.Process(manager.provisioner.pid).cpu_times()
    except (AttributeError, psutil.Error):
        return None
    return times.user + times.system + times.children_user + times.children_system


def _warm(manager: Any, modules: Sequence[str]) -> None:
    """Wait until the kernel answers, then run its imports and wait for them to finish.

    Only a kernel that answered gets the request: one sent while it still boots is sometimes
    neither run nor answered, and the kernel then ignores the next client too. No heartbeat
    channel: one started and stopped at once races its own thread, which then prints a
    traceback. Errors end the warm-up quietly; the notebook's own run reports a dead kernel.
    """
    client = manager.client()
    try:
        client.start_channels(stdin=False, hb=False, control=False)
        client.wait_for_ready(timeout=WARM_UP_SECONDS)
        request = client.execute(warm_code(modules), silent=True)
        deadline = time.monotonic() + WARM_UP_SECONDS
        while time.monotonic() < deadline and manager.is_alive():
            try:
                reply = client.get_shell_msg(timeout=1)
            except queue.Empty:
                continue
            if reply["parent_header"].get("msg_id") == request:
                break
    except Exception:  # noqa: BLE001 - see above
        pass
    finally:
        with contextlib.suppress(Exception):
            client.stop_channels()


def _stop(manager: Any) -> None:
    if manager is None:
        return
    # papermill leaves the client of a kernel it did not start open: close every client's
    # sockets and heartbeat thread, or a long session runs out of file descriptors.
    for client in manager.clients:
        with contextlib.suppress(Exception):
            client.stop_channels()
    # A kernel that died on its own needs no shutdown.
    with contextlib.suppress(Exception):
        manager.shutdown_kernel(now=True)
    manager.warm_up.join(timeout=WARM_UP_SECONDS)  # ends soon once the kernel is gone


@functools.cache
def _tracking_kernel_manager() -> type:
    """A :class:`jupyter_client.KernelManager` that remembers the clients it hands out."""
    from jupyter_client.manager import KernelManager

    class TrackingKernelManager(KernelManager):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.clients: list[Any] = []
            self.warm_up: threading.Thread | None = None

        def client(self, **kwargs: Any) -> Any:
            created = super().client(**kwargs)
            self.clients.append(created)
            return created

    return TrackingKernelManager
