"""Running many independent tasks: in-process, on a local Dask cluster, or on any scheduler.

Large jobs (trace studies, big sweeps) split into tasks that each return a small table; this
module holds the plumbing they share, so a command only chooses *what* a task computes.
:func:`dask_client` opens the place the tasks run from the options every such command takes
(``--workers``, ``--scheduler``, ``--no-worker-timeout``; docs/traces.md, "Dask options");
:func:`map_tasks` and :func:`run_tasks` return the results **in item order** with a progress
bar, :func:`iter_tasks` hands them over as they are ready with a bounded number in flight (a
sweep's chunks), and :func:`gather_frame` concatenates per-task tables in item order. How an
address is checked and how faults end (one line, never a wait without end or a traceback):
docs/security.md. Every task is a pure function of its item and results come back in item
order, so the three ways of running give identical tables; ``function`` must be importable by
the workers, and items and results must pickle.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import math
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import pandas as pd
from tqdm.auto import tqdm

from .errors import ContractError

Item = TypeVar("Item")
Result = TypeVar("Result")

#: ``--workers`` when the option is left out: one worker per core.
DEFAULT_WORKERS = max(1, os.cpu_count() or 1)
#: ``--workers`` at most (a bigger cluster is started on its own and reached with ``--scheduler``).
MAX_WORKERS = 256
#: ``--no-worker-timeout``: how long a run waits on a scheduler that has no worker.
NO_WORKER_SECONDS = 60.0
#: ``--connect-timeout``: how long to try reaching ``--scheduler`` (a silent one is given up after twice this).
CONNECT_SECONDS = 10.0
POLL_SECONDS = 0.5  # how often a wait looks at the scheduler's workers
_NO_WORKER_LIMIT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # client -> its placement's limit


@dataclass(frozen=True)
class Placement:
    """Where tasks run: ``workers=0`` in-process, else a local cluster, or ``scheduler``."""

    workers: int = DEFAULT_WORKERS
    scheduler: str | None = None
    processes: bool = True  # local cluster workers as processes (True) or threads (False)
    connect_timeout_seconds: float = CONNECT_SECONDS  # how long to try reaching ``scheduler``
    no_worker_seconds: float = NO_WORKER_SECONDS

    def __post_init__(self) -> None:
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0:
            raise ContractError(f"--workers must be an integer >= 0, got {self.workers!r}")
        if self.workers > MAX_WORKERS:
            raise ContractError(f"--workers {self.workers}: at most {MAX_WORKERS} local workers; start a bigger"
                                " cluster on its own and pass --scheduler ADDRESS")  # fmt: skip
        for option, seconds in (("--no-worker-timeout", self.no_worker_seconds),
                                ("--connect-timeout", self.connect_timeout_seconds)):
            if not (math.isfinite(seconds) and seconds > 0):
                raise ContractError(f"{option} must be a number of seconds > 0, got {seconds!r}")
        if self.scheduler is not None and not str(self.scheduler).strip():
            raise ContractError("--scheduler must be a scheduler address such as tcp://host:8786")
        if self.scheduler is not None:
            check_address(self.scheduler)

    @property
    def in_process(self) -> bool:
        return self.scheduler is None and self.workers == 0

    def describe(self) -> str:
        if self.scheduler is not None:
            return f"Dask scheduler {self.scheduler}"
        if self.workers == 0:
            return "in-process (no Dask)"
        kind = "process" if self.processes else "thread"
        return f"local Dask cluster of {self.workers} {kind} worker{'s' if self.workers != 1 else ''}"


def check_address(address: str) -> None:
    """Refuse, in one line naming ``--scheduler``, an address no client of this process can reach."""
    from distributed.comm import parse_address
    from distributed.comm.registry import get_backend

    def refuse(why: object) -> ContractError:
        return ContractError(f"--scheduler {address}: {why}")

    scheme, location = parse_address(address)
    try:
        backend = get_backend(scheme)
    except (ValueError, NotImplementedError, ImportError) as error:
        raise refuse(error or f"scheme {scheme!r} is not available here") from None
    if scheme == "inproc":
        if len(location.split("/")) != 3 or location.split("/")[1] != str(os.getpid()):
            raise refuse("an inproc:// address (inproc://HOST/PID/N) reaches only a scheduler inside this process")
        return
    try:
        host, port = backend.get_address_host_port(location)
    except ValueError as error:
        raise refuse(f"not HOST:PORT ({error})") from None
    if not host:
        raise refuse("no host")
    if not 0 < port < 65536:
        raise refuse(f"port {port} is not between 1 and 65535")
    if scheme in ("tls", "wss") and _connection_args()["ssl_context"] is None:
        raise refuse(f"{scheme}:// needs TLS certificates, set in Dask's configuration (distributed.comm.tls.*);"
                     " none are set")  # fmt: skip


def _connection_args() -> dict[str, Any]:
    from distributed.security import Security

    return Security().get_connection_args("client")


def add_placement_options(parser: Any, *, default_workers: int = DEFAULT_WORKERS) -> None:
    """The ``--workers``, ``--scheduler``, ``--connect-timeout`` and ``--no-worker-timeout`` options of a
    command that runs tasks."""
    group = parser.add_argument_group("where tasks run (Dask)")
    default = f"one per core, {DEFAULT_WORKERS}" if default_workers == DEFAULT_WORKERS else str(default_workers)
    group.add_argument(
        "--workers",
        type=int,
        default=default_workers,
        metavar="N",
        help=f"workers of a local Dask cluster (default: {default}); 0 runs everything in this process without Dask",
    )
    group.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="connect to a running dask.distributed scheduler (e.g. tcp://10.0.0.5:8786)"
        " instead of starting a local cluster; --workers is then ignored",
    )
    group.add_argument(
        "--connect-timeout",
        type=float,
        default=CONNECT_SECONDS,
        metavar="SECONDS",
        help=f"how long to try reaching --scheduler; one that accepts and never answers is given up after"
        f" twice this [{CONNECT_SECONDS:g}]",
    )
    group.add_argument(
        "--no-worker-timeout",
        type=float,
        default=NO_WORKER_SECONDS,
        metavar="SECONDS",
        help=f"end with an error once the scheduler has had no worker this long [{NO_WORKER_SECONDS:g}]",
    )


def placement_from(args: Any) -> Placement:
    return Placement(workers=args.workers, scheduler=args.scheduler, connect_timeout_seconds=args.connect_timeout,
                     no_worker_seconds=args.no_worker_timeout)


@contextlib.contextmanager
def dask_client(placement: Placement) -> Iterator[Any]:
    """A ``distributed.Client`` for ``placement``, or ``None`` when tasks run in-process.

    A local cluster is started with one thread per worker, no dashboard and quiet logs, and
    closed on exit; a remote scheduler is only connected to (and disconnected from).
    """
    if placement.in_process:
        yield None
        return
    from distributed import Client, LocalCluster

    with contextlib.ExitStack() as stack:
        stack.enter_context(_log_levels_restored())  # exits last: after the client and the cluster
        if placement.scheduler is not None:
            _check_answers(placement.scheduler, placement.connect_timeout_seconds)
            try:
                client = stack.enter_context(Client(placement.scheduler, timeout=placement.connect_timeout_seconds))
            except (OSError, TimeoutError) as error:
                raise ContractError(f"cannot reach Dask scheduler {placement.scheduler}: {error}") from None
        else:
            with _sigint_ignored():  # workers started meanwhile ignore SIGINT for good
                cluster = stack.enter_context(LocalCluster(
                    n_workers=placement.workers, threads_per_worker=1, processes=placement.processes,
                    dashboard_address=None, scheduler_kwargs={"dashboard_address": ":0"},  # no port 8787 clash
                    silence_logs=logging.CRITICAL,
                ))  # fmt: skip
                client = stack.enter_context(Client(cluster))
        _NO_WORKER_LIMIT[client] = placement.no_worker_seconds
        stack.enter_context(_silent_when_ending())
        yield client


def _check_answers(address: str, seconds: float) -> None:
    """A handshake bounded in time: ``Client`` waits without end on a server that never answers."""
    if address.startswith("inproc://"):
        return
    from distributed.comm import connect

    async def handshake() -> None:
        comm = await connect(address, timeout=seconds, **_connection_args())
        await comm.close()

    with ThreadPoolExecutor(1) as thread:  # its own event loop, whatever runs in this thread
        try:
            thread.submit(asyncio.run, asyncio.wait_for(handshake(), 2 * seconds)).result()
        except TimeoutError:
            raise ContractError(f"Dask scheduler {address} accepted the connection but did not answer"
                                f" within {2 * seconds:g} s") from None  # fmt: skip
        except OSError as error:
            raise ContractError(f"cannot reach Dask scheduler {address}: {error}") from None


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored meanwhile (in the main thread): processes started now inherit the disposition,
    and Python leaves an ignored SIGINT ignored, so a terminal's Ctrl-C reaches only this process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


_QUIET_LOGGERS = ("distributed", "asyncio", "tornado")


@contextlib.contextmanager
def _log_levels_restored() -> Iterator[None]:
    """The levels of the loggers :func:`_silent_when_ending` silences, put back on exit, so a
    failed run leaves later runs in the same process (a notebook, a test session) their logs."""
    before = {name: logging.getLogger(name).level for name in _QUIET_LOGGERS}
    try:
        yield
    finally:
        for name, level in before.items():
            logging.getLogger(name).setLevel(level)


@contextlib.contextmanager
def _silent_when_ending() -> Iterator[None]:
    """Once a run ends on an error or an interruption, Dask says nothing more while it closes
    (a heartbeat cut short, tasks of a gather never retrieved): the command's line is the message."""
    try:
        yield
    except BaseException:
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        raise


def map_tasks(
    function: Callable[[Item], Result],
    items: Sequence[Item],
    placement: Placement,
    *,
    progress: bool | None = None,
    description: str = "tasks",
) -> list[Result]:
    """``[function(item) for item in items]``, run where ``placement`` says, in item order.

    Opens (and closes) a client for this one map; to run several maps on one cluster, open it
    with :func:`dask_client` and call :func:`run_tasks`.
    """
    with dask_client(placement) as client:
        return run_tasks(client, function, items, progress=progress, description=description)


def run_tasks(
    client: Any,
    function: Callable[[Item], Result],
    items: Sequence[Item],
    *,
    progress: bool | None = None,
    description: str = "tasks",
) -> list[Result]:
    """``[function(item) for item in items]`` on ``client`` (``None``: in this process), in item order.

    ``progress``: ``True`` shows a progress bar, ``False`` hides it, ``None`` shows it when
    stderr is a terminal. A task that raises stops the whole map with that error.
    """
    items = list(items)
    show = sys.stderr.isatty() if progress is None else progress
    if client is None:
        return [function(item) for item in tqdm(items, desc=description, unit="task", disable=not show)]
    # pure=False: equal items are still separate tasks, never merged by Dask's key.
    return gather(client, client.map(function, items, pure=False), show=show, description=description)


def gather(client: Any, futures: list[Any], *, show: bool = False, description: str = "tasks") -> list[Any]:
    """``client.gather(futures)``, ended with an error when the scheduler has had no worker for
    the client's ``--no-worker-timeout`` (Dask itself waits for workers without end)."""
    from distributed import wait
    from distributed.scheduler import KilledWorker

    limit = _NO_WORKER_LIMIT.get(client, NO_WORKER_SECONDS)
    idle_since = None
    with tqdm(total=len(futures), desc=description, unit="task", disable=not show) as bar:
        while True:
            with contextlib.suppress(TimeoutError):
                wait(futures, timeout=POLL_SECONDS)
                break
            bar.update(sum(future.done() for future in futures) - bar.n)
            idle_since = None if client.nthreads() else idle_since or time.monotonic()
            if idle_since is not None and time.monotonic() - idle_since >= limit:
                unfinished = sum(not future.done() for future in futures)
                raise ContractError(
                    f"Dask scheduler {client.scheduler.address} has had no worker for {limit:g} s, with"
                    f" {unfinished:,} of {len(futures):,} task(s) unfinished; start workers and run again,"
                    " or wait longer with --no-worker-timeout SECONDS"
                )
        bar.update(len(futures) - bar.n)
    try:
        return client.gather(futures)
    except KilledWorker as error:
        raise ContractError(f"Dask scheduler {client.scheduler.address}: {error}") from None


def iter_tasks(
    client: Any,
    function: Callable[[Item], Result],
    items: Sequence[Item],
    *,
    ahead: int | None = None,
) -> Iterator[Result]:
    """``function(item)`` for every item on ``client`` (``None``: in this process), yielded
    one by one in item order.

    Unlike :func:`run_tasks`, results are handed over as they are ready instead of all at the
    end, and at most ``ahead`` tasks (default: two per worker) are submitted beyond the one
    awaited, so a long map of large results holds only a few of them at any time. Closing the
    iterator early (an error, Ctrl-C) cancels the tasks still queued.
    """
    items = list(items)
    if client is None:
        for item in items:
            yield function(item)
        return
    if ahead is None:
        ahead = 2 * max(1, len(client.scheduler_info().get("workers", {})))
    queue = iter(items)
    pending: collections.deque = collections.deque()

    def submit() -> None:
        for item in itertools.islice(queue, ahead + 1 - len(pending)):
            pending.append(client.submit(function, item, pure=False))

    try:
        submit()
        while pending:
            (result,) = gather(client, [pending[0]])
            pending.popleft().release()
            submit()
            yield result
    finally:
        if pending:
            client.cancel(list(pending))


def gather_frame(
    function: Callable[[Item], pd.DataFrame],
    items: Sequence[Item],
    placement: Placement,
    *,
    progress: bool | None = None,
    description: str = "tasks",
) -> pd.DataFrame:
    """The tables ``function`` returns for each item, concatenated in item order."""
    frames = map_tasks(function, items, placement, progress=progress, description=description)
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)
