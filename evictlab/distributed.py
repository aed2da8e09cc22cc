"""Running many independent tasks: in-process, on a local Dask cluster, or on any scheduler.

Large jobs (trace studies, big sweeps) split into tasks that each return a small table. This
module holds the plumbing every such job shares, so that a command only chooses *what* a task
computes:

* :func:`dask_client` opens the place the tasks run, from the two options every such command
  takes: ``--workers N`` (``0`` runs everything in this process with no Dask at all; ``N >= 1``
  starts a ``LocalCluster`` of N single-threaded workers) and ``--scheduler ADDRESS`` (connect
  to an existing ``dask.distributed`` scheduler instead);
* :func:`map_tasks` runs ``function(item)`` for every item and returns the results **in item
  order**, whatever order the workers finish in, with a progress bar (tqdm in-process, Dask's
  own progress bar on a cluster); :func:`run_tasks` does the same on a client already open,
  so several maps can share one cluster; :func:`iter_tasks` hands the results over one by
  one as they are ready, with a bounded number of tasks in flight (a sweep's chunks);
* :func:`gather_frame` concatenates the per-task tables into one frame, in item order.

Because results come back in item order and every task is a pure function of its item, the
three ways of running give identical tables; the tests check this with a real
``LocalCluster``. ``function`` must be importable by the workers (a module-level function of
an installed package), and items and results must pickle.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pandas as pd
from tqdm.auto import tqdm

from .errors import ContractError

Item = TypeVar("Item")
Result = TypeVar("Result")

#: ``--workers`` when the option is left out: one worker per core.
DEFAULT_WORKERS = max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class Placement:
    """Where tasks run: ``workers=0`` in-process, else a local cluster, or ``scheduler``."""

    workers: int = DEFAULT_WORKERS
    scheduler: str | None = None
    processes: bool = True  # local cluster workers as processes (True) or threads (False)
    connect_timeout_seconds: float = 10.0  # how long to try reaching ``scheduler``

    def __post_init__(self) -> None:
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0:
            raise ContractError(f"--workers must be an integer >= 0, got {self.workers!r}")
        if self.scheduler is not None and not str(self.scheduler).strip():
            raise ContractError("--scheduler must be a scheduler address such as tcp://host:8786")

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


def add_placement_options(parser: Any, *, default_workers: int = DEFAULT_WORKERS) -> None:
    """The ``--workers`` and ``--scheduler`` options of a command that runs tasks."""
    group = parser.add_argument_group("where tasks run (Dask)")
    default = f"one per core, {DEFAULT_WORKERS}" if default_workers == DEFAULT_WORKERS else str(default_workers)
    group.add_argument(
        "--workers",
        type=int,
        default=default_workers,
        metavar="N",
        help=f"workers of a local Dask cluster (default: {default});"
        " 0 runs everything in this process without Dask",
    )
    group.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="connect to a running dask.distributed scheduler (e.g. tcp://10.0.0.5:8786)"
        " instead of starting a local cluster; --workers is then ignored",
    )


def placement_from(args: Any) -> Placement:
    return Placement(workers=args.workers, scheduler=args.scheduler)


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

    if placement.scheduler is not None:
        try:
            client = Client(placement.scheduler, timeout=placement.connect_timeout_seconds)
        except (OSError, TimeoutError) as error:
            raise ContractError(f"cannot reach Dask scheduler {placement.scheduler}: {error}") from None
        with client:
            yield client
        return
    cluster = LocalCluster(
        n_workers=placement.workers,
        threads_per_worker=1,
        processes=placement.processes,
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    with cluster, Client(cluster) as client:
        yield client


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
    futures = client.map(function, items, pure=False)
    if show:
        from distributed import progress as dask_progress

        dask_progress(futures, notebook=False)
    return client.gather(futures)


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
            result = pending[0].result()
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
