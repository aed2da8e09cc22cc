"""The notebook kernel of ``evictlab report``: which one, its arguments and its sockets."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from ..errors import ContractError

KERNEL_NAME = "python3"
#: Arguments of every notebook kernel. Its own log (start-up notices on every start) is noise
#: here; cell errors reach the executed notebook anyway.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=ERROR", "--HistoryManager.hist_file=:memory:"]


def kernel_config(socket_dir: Path) -> Any:
    """The kernel manager's settings: Unix sockets in ``socket_dir`` instead of local TCP ports.

    Over TCP, jupyter_client picks five free ports and the kernel binds them a moment later;
    a kernel of another process (a second report, a parallel test) can take one in between,
    and the kernel dies at start with "Address already in use". Socket files in a folder of
    this notebook's own cannot clash. Windows has no Unix sockets there, so it keeps TCP.
    """
    from traitlets.config import Config

    if os.name == "nt":
        return Config()
    return Config({"KernelManager": {"transport": "ipc", "ip": str(socket_dir / "kernel")}})


def check_kernel(kernel_name: str) -> None:
    """Refuse a kernel that would not run this interpreter (it would not see this evictlab)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(kernel_name)
    except NoSuchKernel:
        raise ContractError(
            f"no Jupyter kernel {kernel_name!r}; install one with '{sys.executable} -m ipykernel install --sys-prefix'"
        ) from None
    command = spec.argv[0] if spec.argv else ""
    # jupyter_client starts sys.executable for these names (KernelManager.format_kernel_cmd).
    same_interpreter = {"python", f"python{sys.version_info[0]}", f"python{sys.version_info[0]}.{sys.version_info[1]}"}
    if command in same_interpreter or Path(command).absolute() == Path(sys.executable).absolute():
        return
    raise ContractError(
        f"Jupyter kernel {kernel_name!r} ({spec.resource_dir}) runs {command}, not {sys.executable};"
        f" reinstall it with '{sys.executable} -m ipykernel install --sys-prefix'"
    )
