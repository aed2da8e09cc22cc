"""Dask faults (#26): malformed scheduler addresses, a silent scheduler, workers that all die,
and Ctrl-C or SIGTERM on a local cluster, against real schedulers, workers and signals."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from processes import DEADLINE_SECONDS

from evictlab.distributed import Placement
from evictlab.errors import ContractError

STUDY = ["trace", "study", "--seeds", "400", "--capacities", "3,8", "--no-progress",
         "--horizon-days", "30", "--facts-per-day", "20"]  # fmt: skip


def study(out: Path, *placement: str, **popen) -> subprocess.Popen:
    argv = [sys.executable, "-m", "evictlab", *STUDY, *placement, "--output-dir", str(out)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def record(out: Path) -> dict:
    return json.loads((out / "trace-study.run.json").read_text())


MALFORMED = {
    "foo://10.0.0.5:8786": "unknown address scheme 'foo'",
    "tls://127.0.0.1:8786": "tls:// needs TLS certificates",
    "inproc://": "inproc://",
    "inproc://127.0.0.1/1/1": "only a scheduler inside this process",
    "tcp://": "missing port number",
    "tcp://10.0.0.5:port": "port",
    "tcp://[::1": "ipv6 needs brackets",
    "tcp://10.0.0.5:99999": "port",
    "tcp://:8786": "no host",
}


@pytest.mark.parametrize("address", MALFORMED)
def test_a_malformed_scheduler_address_is_one_line_before_any_folder(address, cli_error, tmp_path):
    code, line = cli_error(*STUDY, "--scheduler", address, "--output-dir", str(tmp_path / "out"))
    assert code == 2 and f"--scheduler {address}" in line and MALFORMED[address] in line, line
    assert not (tmp_path / "out").exists()
    with pytest.raises(ContractError, match="--scheduler"):
        Placement(scheduler=address)


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [("--workers", "100000", "at most 256 local workers"), ("--no-worker-timeout", "nan", "> 0"),
     ("--no-worker-timeout", "0", "> 0"), ("--connect-timeout", "-1", "> 0"), ("--connect-timeout", "inf", "> 0")],
)  # fmt: skip
def test_a_placement_over_its_bounds_is_one_line_before_any_folder(option, value, says, cli_error, tmp_path):
    code, line = cli_error(*STUDY, option, value, "--output-dir", str(tmp_path / "out"))
    assert code == 2 and option in line and says in line, line
    assert not (tmp_path / "out").exists()


@pytest.fixture
def silent_server():
    """A TCP server that accepts every connection and never says a word."""
    server = socket.create_server(("127.0.0.1", 0))
    held, stop = [], threading.Event()

    def serve():
        server.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in [*held, server]:
        connection.close()


@pytest.mark.slow
def test_a_scheduler_that_accepts_but_never_answers_is_an_error_within_the_connect_timeout(silent_server, tmp_path):
    out = tmp_path / "out"
    process = study(out, "--scheduler", silent_server, "--connect-timeout", "2")
    _, err = process.communicate(timeout=120)  # the old code waited here past any limit
    assert process.returncode == 2 and "Traceback" not in err, err
    (line,) = [line for line in err.splitlines() if "error:" in line]
    assert silent_server in line and "did not answer within 4 s" in line
    assert record(out)["status"] == "error"


@pytest.fixture
def scheduler():
    """A real scheduler on TCP with no workers of its own (workers are started by the test)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, protocol="tcp://", host="127.0.0.1",
                      dashboard_address=None) as cluster:  # fmt: skip
        yield cluster


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"never saw {what}")
        time.sleep(0.05)


@pytest.mark.slow
def test_a_study_whose_workers_all_die_ends_within_the_no_worker_timeout(scheduler, tmp_path):
    address = scheduler.scheduler.address
    workers = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--no-nanny",
                                 "--nthreads", "1", "--no-dashboard"], stderr=subprocess.DEVNULL)
               for _ in range(2)]  # fmt: skip
    try:
        wait_for(lambda: len(scheduler.scheduler.workers) == 2, "two workers")
        out = tmp_path / "out"
        process = study(out, "--scheduler", address, "--no-worker-timeout", "3")
        wait_for(lambda: any(task.state == "processing" for task in scheduler.scheduler.tasks.values()),
                 "a task running on a worker")  # fmt: skip
        for worker in workers:
            worker.kill()
        _, err = process.communicate(timeout=120)  # the old code waited for workers forever
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    assert process.returncode == 2 and "Traceback" not in err, err
    (line,) = [line for line in err.splitlines() if "error:" in line]
    assert f"Dask scheduler {address} has had no worker for 3 s" in line and "--no-worker-timeout" in line
    assert record(out)["status"] == "error" and "no worker" in record(out)["error"]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "to_group"), [("SIGINT", True), ("SIGTERM", False), ("SIGTERM", True)])
def test_ctrl_c_or_sigterm_on_a_local_cluster_prints_no_worker_traceback(name, to_group, tmp_path):
    out = tmp_path / "out"
    # A session of its own, so that a signal to its group is what a terminal's Ctrl-C sends.
    process = study(out, "--workers", "2", start_new_session=True)
    main = psutil.Process(process.pid)

    def working() -> bool:  # both workers past their start (imports) and deciding tasks
        busy = 0
        for child in main.children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                busy += "spawn_main" in " ".join(child.cmdline()) and child.cpu_times().user > 2.5
        return busy == 2

    wait_for(working, "two busy workers")
    children = main.children(recursive=True)
    sent = getattr(signal, name)
    if to_group:
        os.killpg(process.pid, sent)
    else:
        process.send_signal(sent)
    _, err = process.communicate(timeout=DEADLINE_SECONDS)
    assert process.returncode == 130, err
    assert err.splitlines() == ["evictlab trace: interrupted"], err
    assert record(out)["status"] == "interrupted"
    _, alive = psutil.wait_procs(children, timeout=DEADLINE_SECONDS)
    assert not alive
