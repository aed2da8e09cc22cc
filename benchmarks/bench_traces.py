"""Trace replay on the one selector: against the scalar loop, a curve through the CLI, scaling,
libCacheSim and an OrderedDict loop, a study, streaming.

1. **The one path vs. the scalar loop, identical kept lists.** Every default policy at capacity
   100 on the first ``--reference-events`` events of a 100,000-event generated trace, all in one
   :class:`~evictlab.analysis.traces.memory.Lockstep`, against
   :class:`~evictlab.analysis.traces.reference.ReferenceMemory` set to call its selector (DeerMem's
   ``select_facts_for_capacity`` or the policy's ``select``) on every write. The kept list after
   every write is compared (a digest per write); any difference exits with status 1.
2. **A full capacity curve through the CLI**: ``evictlab trace replay --trace FILE`` on the
   100,000-event trace written as Parquet (capacities 10, 20, 50, 100, 200, 500 x every default
   policy, keep-all and the exact optimum), in a child process, in that one process and with
   ``--workers 2`` (the policies shared out over two Dask tasks); wall and CPU time (target: under
   60 s on 2 cores), and the two row files must be identical.
3. **Linear in the trace, bounded by the cap**: ``keep-all`` and ``lru`` at capacity 100 on
   10^5 and 10^6 events (ten generated parts with their own ids); the time ratio (linear: about
   10x) and the fact table's rows at the end against the facts added.
4. **lru and fifo per event against libCacheSim and an OrderedDict loop** on the same 10^6-event
   trace at capacity 100: the replay (one memory), libCacheSim's C loop (``process_trace`` over
   an oracleGeneral file of the same requests: every add, every id a search returned) and a plain
   Python ``OrderedDict`` loop over the events. Needs the ``bench`` extra (``pip install -e
   '.[bench]'``); skipped with a note without it.
5. **A study** of 1,000 generated workloads (:data:`STUDY_GRID` x 10 seeds, ``trace study``'s
   default policies and capacities) on a 2-worker Dask ``LocalCluster`` (target: under 10
   minutes); the first workloads are also run in this process, as the per-workload reference
   and to check that the cluster's rows are identical.
6. **Streaming.** The 1,000,000-event trace written as Parquet, replayed by a child process
   that reads it in chunks; its peak resident memory is reported (target: < 2 GiB).

7. **Issue #23's two figures.** A study of every default replay policy: ``evictlab trace study
   --seeds 20 --policies P,P,... --workers 2`` with the specs of ``metrics.default_policies()``
   (20 generated default workloads x those 14 policies x the 6 default capacities, DeerMem's
   middleware stages; ``trace study``'s own default is 4 policies), in a child process: wall and CPU time (target:
   under 5 minutes on 2 cores). The exact optimum of the 10^6-event trace of parts 3, 4 and 6
   at capacity 10 (:func:`~evictlab.analysis.traces.optimum.offline_optimum`: outline, network
   and solver; target: under 10 s).

Times are CPU seconds of the process (``time.process_time``; a child's from ``RUSAGE_CHILDREN``)
beside wall time; the load average is printed beside each part.

Run: ``.venv/bin/python benchmarks/bench_traces.py`` (``--quick``: 20,000 events, 2 x 10^5 for
the scaling parts and part 7's optimum, a 40-workload study, no streaming; ``--parts 2,3``: only
those parts).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from evictlab.analysis.traces.generate import WorkloadParams, generate
from evictlab.analysis.traces.memory import Lockstep, MemorySpec
from evictlab.analysis.traces.metrics import default_policies
from evictlab.analysis.traces.optimum import offline_optimum
from evictlab.analysis.traces.reference import ReferenceMemory
from evictlab.analysis.traces.replay import make_memory, replay, returned_ids
from evictlab.analysis.traces.schema import chunk_table, iter_chunks, write_trace
from evictlab.analysis.traces.study import run_study, run_task, study_tasks
from evictlab.distributed import Placement, dask_client, run_tasks

CURVE_BUDGET_SECONDS = 60
STUDY_BUDGET_SECONDS = 600
STUDY_DEFAULT_BUDGET_SECONDS, OPTIMUM_BUDGET_SECONDS = 300, 10
#: 100 grid points; with 10 seeds, 1,000 workloads.
STUDY_GRID = {
    "confidence_noise": [0.0, 0.15, 0.3, 0.6, 1.0],
    "correction_rate": [0.25, 0.5, 1.0, 2.0],
    "search_rate": [5.0, 10.0, 20.0, 40.0, 80.0],
}
MEMORY_BUDGET_BYTES = 2 * 1024**3
# About 40 events a day with the default rates: 2,500 days give a little over 100,000.
LONG = WorkloadParams(horizon_days=2500)


def trace_of(events: int, seed: int = 1) -> dict:
    """The first ``events`` events of a long generated workload."""
    chunk = generate(LONG.replace(horizon_days=2500 * events / 100_000 + 1), seed)
    return {name: values[:events] for name, values in chunk.items()}


def write_digests(memories, chunk) -> list[list[int]]:
    """A digest of every memory's kept list after every write, by memory."""
    kept: list[list[int]] = [[] for _ in range(len(memories))]

    def record(index, state) -> None:
        for memory, digests in enumerate(kept):
            digests.append(hash(tuple(state.kept_ids(memory))))

    replay([chunk], memories, on_write=record)
    return kept


def equivalence(chunk: dict, capacity: int) -> bool:
    policies = default_policies()
    print(f"1. the one path vs. the scalar loop: {len(chunk['time']):,} events, capacity {capacity},"
          f" {len(policies)} policies; load average before {load()}")
    start = time.process_time()
    found = write_digests(Lockstep([MemorySpec.of(policy, capacity) for policy in policies]), chunk)
    lockstep_seconds = time.process_time() - start
    same, reference_seconds = True, 0.0
    for policy, digests in zip(policies, found):
        reference = ReferenceMemory(policy, capacity)
        reference.select_every_write = True
        start = time.process_time()
        (expected,) = write_digests(reference, chunk)
        seconds = time.process_time() - start
        reference_seconds += seconds
        differing = sum(a != b for a, b in zip(digests, expected)) + abs(len(digests) - len(expected))
        print(f"   {policy:<40} scalar loop {seconds:7.2f} s; differing kept lists {differing} of {len(digests):,}")
        same &= differing == 0
    print(f"   every policy in one lockstep {lockstep_seconds:.2f} s against {reference_seconds:.2f} s of scalar loops:"
          f" {reference_seconds / lockstep_seconds:.1f}x")
    return same


def child_times(command: list[str]) -> tuple[float, float]:
    """Wall seconds of a child process, and the CPU seconds of it and the processes it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def cli_curve(chunk: dict) -> bool:
    """``evictlab trace replay`` on the trace as a file, in a child process: in that one process,
    then on 2 Dask workers (the policies shared out over two tasks); the rows must be identical."""
    with tempfile.TemporaryDirectory() as folder:
        path = write_trace(Path(folder) / "trace.parquet", chunk)
        print(f"2. full capacity curve through the CLI: {len(chunk['time']):,} events, {len(default_policies())}"
              f" policies x 6 capacities, keep-all and both bounds")
        for workers in (0, 2):
            command = [sys.executable, "-m", "evictlab", "trace", "replay", "--trace", str(path), "--output-dir",
                       str(Path(folder) / f"out-{workers}"), "--no-progress", "--workers", str(workers)]
            print(f"   {'in one process' if workers == 0 else 'on 2 Dask workers'}; load average before {load()}")
            timed_child(command, CURVE_BUDGET_SECONDS, "" if workers == 0 else " of the waited-for processes")
        rows = [(Path(folder) / f"out-{workers}" / "curve.rows.parquet").read_bytes() for workers in (0, 2)]
        print(f"   curve.rows.parquet {'identical' if rows[0] == rows[1] else 'DIFFERS'} on both placements")
        return rows[0] == rows[1]


def timed(memories, chunk) -> float:
    start = time.process_time()
    replay([chunk], memories)
    return time.process_time() - start


def scaling(short: dict, long: dict) -> None:
    print(f"3. linear in the trace, bounded by the cap: {len(short['time']):,} against {len(long['time']):,} events;"
          f" load average before {load()}")
    for policy in ("keep-all", "lru"):
        times, rows = [], []
        for chunk in (short, long):
            memory = make_memory(policy, 100)
            times.append(timed(memory, chunk))
            rows.append((memory.table.size, chunk["event"].count("add")))
        print(f"   {policy:<9} {times[0]:7.2f} s and {times[1]:7.2f} s: {times[1] / times[0]:5.1f}x for"
              f" {len(long['time']) / len(short['time']):.0f}x the events; fact table {rows[1][0]:,} rows for"
              f" {rows[1][1]:,} facts added")


def requests_of(chunk: dict) -> list[str]:
    """The cache requests of a trace: each added fact, each id a search returned (in order)."""
    found = []
    for event, fact_id, fact_ids in zip(chunk["event"], chunk["fact_id"], chunk["fact_ids"]):
        if event == "add":
            found.append(fact_id)
        elif event == "search":
            found += returned_ids(fact_ids)
    return found


def ordered_dict_loop(chunk: dict, capacity: int, recency: bool) -> float:
    """A plain OrderedDict loop over the events: LRU (``recency``) or FIFO, asks looked up."""
    start = time.process_time()
    memory: OrderedDict[str, None] = OrderedDict()
    answered = 0
    for event, fact_id, fact_ids in zip(chunk["event"], chunk["fact_id"], chunk["fact_ids"]):
        if event == "add":
            memory[fact_id] = None
            if len(memory) > capacity:
                memory.popitem(last=False)
        elif event == "search" and recency:
            for found in fact_ids:
                if found in memory:
                    memory.move_to_end(found)
        elif event == "ask":
            answered += fact_id in memory
    return time.process_time() - start


def libcachesim_loop(requests: list[str], capacity: int, name: str, folder: Path) -> float:
    """libCacheSim's C loop over the requests as an oracleGeneral trace (object size 1)."""
    import libcachesim as lcs

    numbers: dict[str, int] = {}
    path = folder / "requests.oracleGeneral"
    with path.open("wb") as handle:
        for position, fact_id in enumerate(requests):
            handle.write(struct.pack("<IQIq", position, numbers.setdefault(fact_id, len(numbers) + 1), 1, -1))
    reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
    cache = {"lru": lcs.LRU, "fifo": lcs.FIFO}[name](capacity)
    start = time.process_time()
    cache.process_trace(reader)
    return time.process_time() - start


def against_caches(chunk: dict, capacity: int) -> None:
    events = len(chunk["time"])
    print(f"4. lru and fifo per event against libCacheSim and an OrderedDict loop: {events:,} events, capacity"
          f" {capacity}; load average before {load()}")
    try:
        import libcachesim  # noqa: F401
    except ImportError:
        print("   libcachesim is not installed (pip install -e '.[bench]'): libCacheSim's column skipped")
        libcachesim_ok = False
    else:
        libcachesim_ok = True
    requests = requests_of(chunk)
    with tempfile.TemporaryDirectory() as folder:
        for name in ("lru", "fifo"):
            ours = timed(make_memory(name, capacity), chunk)
            plain = ordered_dict_loop(chunk, capacity, recency=name == "lru")
            line = (f"   {name:<4} replay {ours / events * 1e6:7.2f} us/event; OrderedDict loop"
                    f" {plain / events * 1e6:6.3f} us/event ({ours / plain:6.1f}x)")
            if libcachesim_ok:
                theirs = libcachesim_loop(requests, capacity, name, Path(folder))
                line += f"; libCacheSim {theirs / events * 1e6:6.3f} us/event ({ours / theirs:6.1f}x)"
            print(line + f" [{len(requests):,} cache requests]")


def study(workloads: int, sample: int) -> bool:
    """A study of ``workloads`` generated workloads on a 2-worker LocalCluster, against in-process."""
    seeds = workloads // len(list(itertools.product(*STUDY_GRID.values())))
    tasks = study_tasks(STUDY_GRID, max(1, seeds))[:workloads]
    print(f"5. study: {len(tasks):,} workloads (grid {', '.join(f'{k}={v}' for k, v in STUDY_GRID.items())},"
          f" {max(1, seeds)} seeds), policies {','.join(tasks[0].policies)}, capacities"
          f" {','.join(map(str, tasks[0].capacities))}; load average before {load()}")
    start = time.process_time()
    in_process = run_study(tasks[:sample], Placement(workers=0), progress=False)
    per_task = (time.process_time() - start) / sample
    print(f"   in this process: {sample} workloads, {per_task:.3f} CPU s each"
          f" ({per_task * len(tasks):.0f} CPU s for all {len(tasks):,} on one core)")
    start = time.perf_counter()
    with dask_client(Placement(workers=2)) as client:
        started = time.perf_counter() - start
        before = client.run(time.process_time)
        on_cluster = pd.concat(run_tasks(client, run_task, tasks, progress=False), ignore_index=True)
        worker_cpu = {worker: seconds - before[worker] for worker, seconds in client.run(time.process_time).items()}
    wall = time.perf_counter() - start
    same = on_cluster.iloc[: len(in_process)].reset_index(drop=True).equals(in_process)
    met = "met" if wall <= STUDY_BUDGET_SECONDS else "NOT met"
    busiest = max(worker_cpu.values())
    print(f"   2-worker LocalCluster: {wall:.1f} s wall including {started:.1f} s to start it, {len(on_cluster):,} rows"
          f" (budget {STUDY_BUDGET_SECONDS} s: {met}); load average after {load()}")
    print(f"   worker CPU: {' + '.join(f'{seconds:.1f}' for seconds in worker_cpu.values())} s (the busier worker's"
          f" {busiest:.1f} s is the wall time on 2 otherwise idle cores); first {sample} workloads identical to"
          f" in-process: {same}")
    return same


def timed_child(command: list[str], budget: float, cpu_note: str = "") -> None:
    """Run ``command`` in a child process and print its wall and CPU time against ``budget`` seconds."""
    wall, cpu = child_times(command)
    met = "met" if wall <= budget else "NOT met"
    print(f"   {wall:.1f} s wall, {cpu:.1f} s CPU{cpu_note} (budget {budget} s: {met}); load average after {load()}")


def issue_23_figures(parts: list[dict]) -> None:
    """Part 7: the default study through the CLI on 2 workers, and the 10^6-event optimum at capacity 10."""
    policies = default_policies()
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "evictlab", "trace", "study", "--seeds", "20", "--policies",
                   ",".join(policies), "--workers", "2", "--no-progress", "--output-dir", str(Path(folder) / "out")]
        print(f"7. a study of every default replay policy: 20 seeds x {len(policies)} policies x 6 capacities,"
              " middleware stages, 2 workers;"
              f" load average before {load()}")
        timed_child(command, STUDY_DEFAULT_BUDGET_SECONDS, " of the waited-for processes")
    trace = joined(parts)
    start, cpu_start = time.perf_counter(), time.process_time()
    best = offline_optimum([trace], 10)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    met = "met" if wall <= OPTIMUM_BUDGET_SECONDS else "NOT met"
    print(f"   optimum of {len(trace['time']):,} events at capacity 10: {best.answerable:,} of {best.asks:,} questions;"
          f" {wall:.1f} s wall, {cpu:.1f} s CPU (budget {OPTIMUM_BUDGET_SECONDS} s: {met}); load average {load()}")


def load() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def _in_part(part: int, ids: list[str | None]) -> list[str | None]:
    """``ids`` prefixed with their part, so the parts of one file share no fact id."""
    return [None if value is None else f"p{part}-{value}" for value in ids]


def long_parts(parts: int = 10) -> list[dict]:
    """``parts`` 100,000-event traces one after the other (2,600 days apart), own fact ids each."""
    found = []
    for part in range(parts):
        began = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(days=2600 * part)
        chunk = generate(LONG.replace(start=began.isoformat()), seed=part)
        chunk = {name: values[:100_000] for name, values in chunk.items()}
        for name in ("fact_id", "supersedes"):
            chunk[name] = _in_part(part, chunk[name])
        chunk["fact_ids"] = [None if ids is None else _in_part(part, ids) for ids in chunk["fact_ids"]]
        found.append(chunk)
    return found


def joined(parts: list[dict]) -> dict:
    return {name: [value for part in parts for value in part[name]] for name in parts[0]}


def write_parts(path: Path, parts: list[dict]) -> int:
    writer, total = None, 0
    for chunk in parts:
        table = chunk_table(chunk)
        writer = writer or pq.ParquetWriter(path, table.schema, compression="zstd")
        writer.write_table(table, row_group_size=65_536)
        total += table.num_rows
    assert writer is not None
    writer.close()
    return total


def streaming(parts: list[dict]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "million.parquet"
        events = write_parts(path, parts)
        print(f"6. streaming: {events:,} events, {path.stat().st_size / 1e6:.1f} MB of Parquet")
        start = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--replay-file", str(path)], check=True)
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        met = "met" if peak < MEMORY_BUDGET_BYTES else "NOT met"
        print(f"   hybrid-v1 at capacity 100, streamed in chunks: {seconds:.1f} s,"
              f" peak resident memory {peak / 2**20:,.0f} MiB (budget 2,048 MiB: {met})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small traces and study, no streaming")
    parser.add_argument("--reference-events", type=int, default=10_000,
                        help="events compared with the scalar loop in part 1 [10000]")
    parser.add_argument("--parts", default="1,2,3,4,5,6,7", help="the parts to run [1,2,3,4,5,6,7]")
    parser.add_argument("--replay-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replay_file:  # the child process of part 6
        (counts,) = replay(iter_chunks(args.replay_file), make_memory("hybrid-v1", 100))
        print(f"   replayed {counts.events:,} events: answerable rate {counts.answerable / counts.asks:.3f}")
        return 0
    parts = {int(part) for part in args.parts.split(",")}
    chunk = trace_of(20_000 if args.quick else 100_000)
    same = True
    if 1 in parts:
        same &= equivalence({name: values[: args.reference_events] for name, values in chunk.items()}, 100)
    if 2 in parts:
        same &= cli_curve(chunk)
    long = long_parts(2 if args.quick else 10) if parts & {3, 4, 6, 7} else []
    if 3 in parts:
        scaling(long[0], joined(long))
    if 4 in parts:
        against_caches(joined(long), 100)
    if 5 in parts:
        same &= study(40 if args.quick else 1000, 10 if args.quick else 20)
    if 6 in parts and not args.quick:
        streaming(long)
    if 7 in parts:
        issue_23_figures(long)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
