"""The chunked sweep against deciding alone, the same files on Dask, and memory on a huge grid.

1. **Dense grid**, weight step 0.01 (5,151 settings) x 45 cases x capacities 5, 7, 9, both
   DeerMem policies (1,390,770 rows): *deciding alone* (``iter_decisions``' frames of the
   grid, the one decisions path the command writes, nothing written), the selector alone
   (``PreparedCases.select`` per policy, no frame) and the whole ``evictlab sweep`` command run
   in this process (options, pools, grid, decisions, Parquet parts, summaries, run record).
   They run in turn in each of 7 rounds and the fastest of each counts, in wall time. Target:
   the command within 2.5x of deciding alone; the ratio to the selector alone is printed too.
2. **Dask**: weight step 0.02 x confirmation half-lives 30 and 90 (2,652 settings, 716,040
   rows) in chunks of 100,000 rows, in this process and on a local Dask cluster of two
   worker processes (``--workers 2``); every file the two write must be identical, byte for
   byte, and the rows read back equal (the script fails otherwise).
3. **137 M rows**, weight step 0.005 (20,301 triples) x 5 confirmation x 5 access half-lives
   (507,525 settings) x 45 cases x 3 capacities x 2 policies: ``evictlab sweep`` in a child
   process (peak resident memory from ``os.wait4``, target under 1.5 GiB; wall time) against
   deciding the same grid alone in a child process (``iter_decisions``, frames dropped),
   target within 2.5x, one after the other. ``--skip-large`` leaves it out (it takes minutes).

The load average is printed at the start and the end (2 shared cores: a ratio taken under load
says so). The script exits non-zero when a sweep fails or writes another number of rows than
its grid has; a missed target is printed, not failed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evictlab import cli
from evictlab.analysis.sweep import make_grid
from evictlab.analysis.sweep_output import load_sweep
from evictlab.core.pools import open_pools
from evictlab.core.runspec import RunSpec
from evictlab.selection.decisions import iter_decisions
from evictlab.selection.engine import PreparedCases

DENSE = ["--weights-step", "0.01", "--capacities", "5,7,9"]
LARGE = [
    "--weights-step", "0.005", "--confirmation-half-lives", "30,60,90,180,365",
    "--access-half-lives", "7,14,30,60,90", "--capacities", "5,7,9", "--max-settings", "507525",
]  # fmt: skip
GIB = 1 << 30


ROUNDS = 7


def best_seconds(*functions, repeats: int = ROUNDS) -> list[tuple[float, float]]:
    """The least (wall seconds, CPU seconds of this process) of ``repeats`` calls of each
    function, called in turn in every round so that a burst of load falls on all of them
    alike: on a shared machine the other jobs only ever add time, so the least is the closest
    to the cost."""
    walls: list[list[float]] = [[] for _ in functions]
    cpus: list[list[float]] = [[] for _ in functions]
    for _ in range(repeats):
        for at, function in enumerate(functions):
            wall, cpu = time.perf_counter(), time.process_time()
            function()
            walls[at].append(time.perf_counter() - wall)
            cpus[at].append(time.process_time() - cpu)
    return [(min(wall), min(cpu)) for wall, cpu in zip(walls, cpus)]


def command_in_process(argv: list[str], folder: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(["sweep", *argv, "--no-progress", "--output-dir", str(folder)])
    if code != 0:
        raise SystemExit(f"evictlab sweep {' '.join(argv)} exited {code}")


def child(argv: list[str], folder: Path | None = None) -> tuple[float, int]:
    """Run ``evictlab sweep`` (or, without ``folder``, ``DECIDE`` over the grid of ``argv``) in a
    child process: (wall seconds, peak resident bytes)."""
    command = ["-m", "evictlab", "sweep", *argv, "--no-progress", "--output-dir", str(folder)] if folder else [
        "-c", DECIDE, *argv]  # fmt: skip
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, *command], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    error = process.stderr.read().decode() if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command[:3])} {' '.join(argv)} exited {process.returncode}: {error}")
    return seconds, usage.ru_maxrss * 1024  # ru_maxrss is in KiB on Linux


#: Deciding a sweep's grid alone, as a child process: the command's options, pools and grid,
#: then every frame of iter_decisions, dropped (what the command writes, without writing).
DECIDE = """
import sys
from evictlab.cli import build_parser
from evictlab.cli.sweep import request_from
from evictlab.selection.decisions import iter_decisions
args = build_parser("sweep").parse_args(["sweep", *sys.argv[1:], "--output-dir", "unused"])
request = request_from(args)
grid = request.grid
pools = request.opened()
rows = sum(len(frame) for frame in iter_decisions(pools, grid.policies, grid.settings_view, grid.capacities))
assert rows == 2 * grid.size * 45 * len(grid.capacities), rows
"""


def check_rows(folder: Path, expected: int) -> int:
    record = json.loads((folder / "sweep.run.json").read_text())
    rows = record["summary"]["rows"]
    if record["status"] != "success" or rows != expected:
        raise SystemExit(f"{folder}: status {record['status']}, {rows:,} rows, expected {expected:,}")
    return rows


def disk_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def dense(scratch: Path) -> None:
    grid = make_grid(weights_step=0.01, capacities=(5, 7, 9))
    pool_set = open_pools(RunSpec("pr4810-final"))
    rows = 2 * grid.size * len(pool_set.cases) * 3
    print(f"1. dense grid: {grid.size:,} settings x {len(pool_set.cases)} cases x 3 capacities x 2 policies"
          f" = {rows:,} rows")  # fmt: skip

    def selector() -> None:
        cases, settings = PreparedCases.from_pool_set(pool_set), grid.settings_between(0, grid.size)
        for policy in grid.policies:
            cases.select(policy, settings, grid.capacities)

    def decide() -> None:
        cases = {"pr4810-final": PreparedCases.from_pool_set(pool_set)}
        for _ in iter_decisions(cases, grid.policies, grid.settings_view, grid.capacities):
            pass

    runs = iter(range(1000))
    folders = []

    def command() -> None:
        folders.append(scratch / f"dense-{next(runs)}")
        command_in_process(DENSE, folders[-1])

    selector_seconds, decide_seconds, command_seconds = (wall for wall, _ in best_seconds(selector, decide, command))
    check_rows(folders[-1], rows)
    process_seconds, _ = child(DENSE, scratch / "dense-process")
    ratio = command_seconds / decide_seconds
    print(f"   the selector alone (select per policy, no frame): {selector_seconds:7.3f} s wall")
    print(f"   deciding alone (iter_decisions' frames):          {decide_seconds:7.3f} s wall")
    print(f"   evictlab sweep, in this process:                  {command_seconds:7.3f} s wall")
    print(f"   ratio to deciding alone: {ratio:5.2f}x (target <= 2.5x: {'met' if ratio <= 2.5 else 'MISSED'});"
          f" to the selector alone: {command_seconds / selector_seconds:5.2f}x")  # fmt: skip
    print(
        f"   evictlab sweep, a fresh process:                  {process_seconds:7.3f} s wall"
        " (interpreter start and imports included)"
    )
    print(f"   files: {disk_bytes(folders[-1]) / 2**20:.1f} MiB")


def same_on_dask(scratch: Path) -> None:
    argv = ["--weights-step", "0.02", "--confirmation-half-lives", "30,90", "--capacities", "5,7,9",
            "--chunk-rows", "100000"]  # fmt: skip
    here, cluster = scratch / "in-process", scratch / "dask"
    seconds = []
    for folder, extra in ((here, []), (cluster, ["--workers", "2"])):
        start = time.perf_counter()
        command_in_process([*argv, *extra], folder)
        seconds.append(time.perf_counter() - start)
    rows = check_rows(here, 2 * 2652 * 45 * 3)
    check_rows(cluster, rows)
    files = {folder: {path.relative_to(folder): path.read_bytes() for path in sorted(folder.rglob("*.*"))
                      if path.is_file() and path.name != "sweep.run.json"} for folder in (here, cluster)}  # fmt: skip
    if files[here] != files[cluster]:
        differ = sorted(str(name) for name in files[here].keys() | files[cluster].keys()
                        if files[here].get(name) != files[cluster].get(name))  # fmt: skip
        raise SystemExit(f"the Dask run wrote other files than the in-process run: {', '.join(differ)}")
    if not load_sweep(here).rows.equals(load_sweep(cluster).rows):
        raise SystemExit("the Dask run's rows differ from the in-process run's")
    print(f"2. Dask: 2,652 settings x 45 cases x 3 capacities x 2 policies = {rows:,} rows in"
          f" {json.loads((here / 'sweep.run.json').read_text())['summary']['chunks']} chunks")  # fmt: skip
    print(f"   in this process {seconds[0]:6.2f} s wall; on a local cluster of 2 workers {seconds[1]:6.2f} s wall"
          " (its start included)")  # fmt: skip
    print(f"   the same {len(files[here])} files, byte for byte, and the same rows read back: yes")


def large(scratch: Path) -> None:
    rows = 2 * 20_301 * 25 * 45 * 3
    print(f"3. large grid: 507,525 settings x 45 cases x 3 capacities x 2 policies = {rows:,} rows (child processes)")
    folder = scratch / "large"
    decide_seconds, decide_peak = child(LARGE)
    seconds, peak = child(LARGE, folder)
    check_rows(folder, rows)
    verdict = "met" if peak < 1.5 * GIB else "MISSED"
    ratio = seconds / decide_seconds
    print(f"   deciding alone {decide_seconds:7.1f} s wall, peak {decide_peak / GIB:.2f} GiB")
    print(f"   evictlab sweep {seconds:7.1f} s wall, {rows / seconds / 1e6:.2f} M rows/s:"
          f" {ratio:.2f}x deciding alone (target <= 2.5x: {'met' if ratio <= 2.5 else 'MISSED'})")  # fmt: skip
    print(f"   peak resident memory {peak / GIB:.2f} GiB (target < 1.5 GiB: {verdict})")
    print(f"   files: {disk_bytes(folder) / 2**20:.1f} MiB in {len(list((folder / 'rows.parquet').iterdir()))} chunks")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-large", action="store_true", help="leave out the 137 M-row sweep")
    args = parser.parse_args(argv)
    print(f"load average at start: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as scratch:
        dense(Path(scratch))
        same_on_dask(Path(scratch))
        if not args.skip_large:
            large(Path(scratch))
    print(f"load average at end:   {' '.join(f'{value:.2f}' for value in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
