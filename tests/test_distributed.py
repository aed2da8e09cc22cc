"""The Dask plumbing: in-process, a real LocalCluster and a scheduler address give the same results."""

from __future__ import annotations

import argparse
import logging

import pandas as pd
import pytest

from evictlab.distributed import (
    Placement,
    add_placement_options,
    dask_client,
    gather_frame,
    iter_tasks,
    map_tasks,
    placement_from,
    run_tasks,
)
from evictlab.errors import ContractError


def square_table(item: int) -> pd.DataFrame:
    """A module-level task (workers import it by name)."""
    return pd.DataFrame({"item": [item, item], "value": [item * item, -item]})


def fail_on_three(item: int) -> int:
    if item == 3:
        raise ValueError("task three failed")
    return item


def test_in_process_keeps_item_order():
    assert map_tasks(lambda item: item * 2, [3, 1, 2], Placement(workers=0), progress=False) == [6, 2, 4]
    seen = []
    results = iter_tasks(None, lambda item: seen.append(item) or item * 2, [3, 1, 2])
    assert next(results) == 6 and seen == [3]  # one at a time, as the caller asks
    assert list(results) == [2, 4]


def test_placement_options_and_checks():
    parser = argparse.ArgumentParser()
    add_placement_options(parser)
    assert placement_from(parser.parse_args(["--workers", "0"])).in_process
    remote = placement_from(parser.parse_args(["--scheduler", "tcp://127.0.0.1:1"]))
    assert not remote.in_process and remote.describe() == "Dask scheduler tcp://127.0.0.1:1"
    with pytest.raises(ContractError, match="--workers"):
        Placement(workers=-1)
    with pytest.raises(ContractError, match="--scheduler"):
        Placement(scheduler="  ")


def test_unreachable_scheduler_is_a_clear_error():
    with (
        pytest.raises(ContractError, match=r"cannot reach Dask scheduler tcp://127\.0\.0\.1:9"),
        dask_client(Placement(scheduler="tcp://127.0.0.1:9", connect_timeout_seconds=0.5)),
    ):
        pass


def test_local_cluster_and_scheduler_address_match_in_process():
    items = list(range(12))
    expected = gather_frame(square_table, items, Placement(workers=0), progress=False)
    assert expected["item"].tolist() == [item for item in items for _ in range(2)]
    with dask_client(Placement(workers=2, processes=False)) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        on_cluster = pd.concat(run_tasks(client, square_table, items, progress=True), ignore_index=True)
        streamed = pd.concat(iter_tasks(client, square_table, items, ahead=1), ignore_index=True)
        with pytest.raises(ValueError, match="task three failed"):
            list(iter_tasks(client, fail_on_three, [1, 3, 5]))
        address = client.scheduler.address
        # A second client on the same scheduler, as --scheduler ADDRESS would connect.
        remote = gather_frame(square_table, items, Placement(scheduler=address), progress=False)
        with pytest.raises(ValueError, match="task three failed"):
            run_tasks(client, fail_on_three, [1, 3], progress=False)
    pd.testing.assert_frame_equal(on_cluster, expected)
    pd.testing.assert_frame_equal(streamed, expected)
    pd.testing.assert_frame_equal(remote, expected)


def test_a_failed_run_leaves_the_log_levels_as_they_were():
    # Importing distributed sets its loggers' levels (its config): levels are read after that,
    # so the test holds whichever test ran first on this worker.
    import distributed  # noqa: F401

    names = ("distributed", "asyncio", "tornado")
    before = [logging.getLogger(name).level for name in names]
    with pytest.raises(ValueError, match="task three failed"):
        map_tasks(fail_on_three, [1, 3], Placement(workers=1, processes=False), progress=False)
    assert [logging.getLogger(name).level for name in names] == before
