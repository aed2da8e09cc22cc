"""Notebook kernels for :func:`evictlab.workbench.report.run_report`: each one warm before its notebook.

A kernel takes a few seconds to start and to import pandas, matplotlib and evictlab; run one
after another, eight notebooks wait for that eight times. :class:`WarmKernels` starts each
notebook's kernel while the notebook before it runs, so on a machine with a spare core the
start-up overlaps the work. papermill runs a notebook on a kernel it is given (its ``km``
argument) and leaves that kernel, and the client it opened on it, to the caller, which shuts
both down here.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

#: Arguments of every notebook kernel. Its own log (a warning about unencrypted local TCP on
#: every start) is noise here; cell errors reach the executed notebook anyway.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=ERROR", "--HistoryManager.hist_file=:memory:"]

#: Imported by a warm kernel before its notebook runs (every notebook needs them).
WARM_IMPORTS = ("evictlab.workbench.plots", "evictlab.workbench.loaders")


class WarmKernels:
    """A fresh kernel per notebook, each started while the notebook before it runs.

    Starting a kernel and importing pandas, matplotlib and evictlab costs a few seconds per
    notebook; :meth:`take` hands out the kernel started earlier and starts the next one, which
    then boots and runs its imports (silently: no execution count, no names defined) in its own
    process while the current notebook executes. Every kernel is shut down when it has served
    or when the context ends, also on an interruption.
    """

    def __init__(self, kernel_name: str, count: int) -> None:
        self.kernel_name = kernel_name
        self.remaining = count
        self.current: Any = None
        self.next: Any = None

    def __enter__(self) -> WarmKernels:
        self.next = self._start()
        return self

    def _start(self) -> Any:
        if self.remaining <= 0:
            return None
        self.remaining -= 1
        manager = _tracking_kernel_manager()(kernel_name=self.kernel_name)
        manager.start_kernel(extra_arguments=KERNEL_ARGUMENTS)
        client = manager.client()
        # The shell channel is all a silent execute needs. A heartbeat channel started and
        # stopped at once races its own thread, which then fails to open its socket on the
        # closed context and prints a traceback (seen at the start of `make report`).
        client.start_channels(iopub=False, stdin=False, hb=False, control=False)
        modules = ", ".join(repr(name) for name in WARM_IMPORTS)
        client.execute(f"[__import__('importlib').import_module(m) for m in ({modules},)]", silent=True)
        client.stop_channels()
        return manager

    def take(self) -> Any:
        """The kernel for the next notebook (shutting down the previous one); starts another."""
        self._stop(self.current)
        self.current, self.next = self.next, None
        self.next = self._start()
        return self.current

    def __exit__(self, *exc: object) -> None:
        self._stop(self.current)
        self._stop(self.next)

    @staticmethod
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


@functools.cache
def _tracking_kernel_manager() -> type:
    """A :class:`jupyter_client.KernelManager` that remembers the clients it hands out."""
    from jupyter_client.manager import KernelManager

    class TrackingKernelManager(KernelManager):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.clients: list[Any] = []

        def client(self, **kwargs: Any) -> Any:
            created = super().client(**kwargs)
            self.clients.append(created)
            return created

    return TrackingKernelManager
