"""Trace replay: fast memories against straightforward loops, a capacity curve, a study, streaming.

1. **Fast vs. reference, identical kept lists.** A 100,000-event generated trace at capacity
   100 under ``hybrid-v1`` (and ``confidence``): :class:`~evictlab.analysis.traces.memory.FastMemory`
   against :class:`~evictlab.analysis.traces.memory.ReferenceMemory` set to call
   :func:`evictlab.selection.deermem.select_facts_for_capacity` on every write. The kept list after every
   write is compared (a digest per write); any difference exits with status 1. Prints both
   times and the ratio (target: >= 20x).
2. **The zoo's fast paths.** Every other policy of the curve on the first ``--zoo-events``
   events at capacity 100: :class:`~evictlab.analysis.traces.zoo_memory.ZooMemory` against the loop that
   calls the policy's own ``select`` on every write; kept lists compared as in part 1.
3. **A full capacity curve**, as ``evictlab trace replay`` computes it
   (:func:`~evictlab.analysis.traces.metrics.curve_rows`): capacities 10, 20, 50, 100, 200, 500 x every
   default policy, the exact optimum and keep-all, on the whole trace, in this one process
   (target: under 5 minutes on 2 cores).
4. **A study** of 1,000 generated workloads (:data:`STUDY_GRID` x 10 seeds, ``trace study``'s
   default policies and capacities) on a 2-worker Dask ``LocalCluster`` (target: under 10
   minutes); the first workloads are also run in this process, as the per-workload reference
   and to check that the cluster's rows are identical.
5. **Streaming.** A 1,000,000-event trace written as Parquet (ten generated parts with their
   own ids, one after the other), replayed by a child process that reads it in chunks; its
   peak resident memory is reported (target: < 2 GiB).

Times in parts 1 and 2 are CPU seconds of this process (``time.process_time``), which a
machine shared with other jobs disturbs far less than wall-clock time; parts 3-5 report wall
time as well, and the load average is printed beside them.

Run: ``.venv/bin/python benchmarks/bench_traces.py`` (``--quick``: a 20,000-event trace, a
40-workload study and no streaming part; ``--parts 3,4``: only those parts).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from evictlab.analysis.traces.generate import WorkloadParams, generate
from evictlab.analysis.traces.memory import FastMemory, ReferenceMemory
from evictlab.analysis.traces.metrics import DEFAULT_CAPACITIES, curve_rows, default_policies
from evictlab.analysis.traces.replay import make_memory, replay
from evictlab.analysis.traces.schema import chunk_table, iter_chunks
from evictlab.analysis.traces.study import run_study, run_task, study_tasks
from evictlab.distributed import Placement, dask_client, run_tasks
from evictlab.policies import DEERMEM_POLICIES

TARGET_RATIO = 20
CURVE_BUDGET_SECONDS = 300
STUDY_BUDGET_SECONDS = 600
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


def digests(memory, chunk) -> tuple[list[int], float]:
    kept: list[int] = []
    start = time.process_time()
    replay([chunk], memory, on_write=lambda index, state: kept.append(hash(tuple(state.kept_ids()))))
    return kept, time.process_time() - start


def timed_replay(memory, chunk) -> float:
    start = time.process_time()
    replay([chunk], memory)
    return time.process_time() - start


def equivalence(chunk: dict, capacity: int) -> bool:
    print(f"1. fast vs. reference: {len(chunk['time']):,} events, capacity {capacity}")
    same = True
    for policy in ("hybrid-v1", "confidence"):
        fast_kept, _ = digests(FastMemory(policy, capacity), chunk)
        fast_seconds = min(timed_replay(FastMemory(policy, capacity), chunk) for _ in range(2))
        reference = ReferenceMemory(policy, capacity)
        reference.select_every_write = True
        reference_kept, _ = digests(reference, chunk)
        reference = ReferenceMemory(policy, capacity)
        reference.select_every_write = True
        reference_seconds = timed_replay(reference, chunk)  # timed without the digests, as the fast one
        differing = sum(a != b for a, b in zip(fast_kept, reference_kept)) + abs(len(fast_kept) - len(reference_kept))
        ratio = reference_seconds / fast_seconds
        met = "met" if ratio >= TARGET_RATIO else "NOT met"
        print(f"   {policy}:")
        print(f"     reference loop (select_facts_for_capacity on every write) {reference_seconds:8.2f} s")
        print(f"     fast memory                                              {fast_seconds:8.2f} s")
        print(f"     ratio {ratio:,.1f}x (target >= {TARGET_RATIO}x: {met});"
              f" writes compared {len(fast_kept):,}, differing kept lists {differing}")
        same &= differing == 0
    return same


def zoo_equivalence(chunk: dict, capacity: int) -> bool:
    """Every other policy's fast memory against the loop that calls its ``select`` on every write."""
    print(f"2. zoo fast paths vs. their select on every write: {len(chunk['time']):,} events, capacity {capacity}")
    same = True
    for policy in default_policies():
        if policy in DEERMEM_POLICIES:
            continue
        fast = make_memory(policy, capacity)
        fast_kept, fast_seconds = digests(fast, chunk)
        reference = ReferenceMemory(policy, capacity)
        reference.select_every_write = True
        reference_kept, reference_seconds = digests(reference, chunk)
        differing = sum(a != b for a, b in zip(fast_kept, reference_kept)) + abs(len(fast_kept) - len(reference_kept))
        print(f"   {policy:<40} reference {reference_seconds:7.2f} s, {type(fast).__name__} {fast_seconds:6.2f} s:"
              f" {reference_seconds / fast_seconds:6.1f}x; differing kept lists {differing} of {len(fast_kept):,}")
        same &= differing == 0
    return same


def capacity_curve(chunk: dict) -> None:
    """The whole curve as ``trace replay`` computes it: every policy, both bounds, six capacities."""
    policies = default_policies()
    print(f"3. full capacity curve: {len(chunk['time']):,} events, capacities {','.join(map(str, DEFAULT_CAPACITIES))},"
          f" {len(policies)} policies and the bounds; load average before {load()}")
    spent: dict[str, float] = defaultdict(float)
    current = {"step": "", "since": time.process_time()}

    def stamp(trace: str, policy: str, capacity: int | None) -> None:
        now = time.process_time()
        spent[current["step"]] += now - current["since"]
        current.update(step=policy, since=now)

    wall, cpu = time.perf_counter(), time.process_time()
    rows = curve_rows([("bench", lambda: [chunk])], policies, DEFAULT_CAPACITIES, progress=stamp)
    stamp("", "", None)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    for policy, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        if policy:
            print(f"   {policy:<40} {seconds:8.2f} s")
    # One process on one core: its CPU time is its wall time on a core nothing else wants.
    met = "met" if cpu <= CURVE_BUDGET_SECONDS else "NOT met"
    print(f"   whole curve ({len(rows):,} rows) in one process: {cpu:.1f} s CPU (budget {CURVE_BUDGET_SECONDS} s on"
          f" 2 cores: {met} on one free core), {wall:.1f} s wall here; load average after {load()}")


def study(workloads: int, sample: int) -> bool:
    """A study of ``workloads`` generated workloads on a 2-worker LocalCluster, against in-process."""
    seeds = workloads // len(list(itertools.product(*STUDY_GRID.values())))
    tasks = study_tasks(STUDY_GRID, max(1, seeds))[:workloads]
    print(f"4. study: {len(tasks):,} workloads (grid {', '.join(f'{k}={v}' for k, v in STUDY_GRID.items())},"
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


def load() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def _in_part(part: int, ids: list[str | None]) -> list[str | None]:
    """``ids`` prefixed with their part, so the parts of one file share no fact id."""
    return [None if value is None else f"p{part}-{value}" for value in ids]


def write_million(path: Path, parts: int = 10) -> int:
    """``parts`` 100,000-event traces one after the other (2,600 days apart), own fact ids each."""
    writer, total = None, 0
    for part in range(parts):
        began = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(days=2600 * part)
        chunk = generate(LONG.replace(start=began.isoformat()), seed=part)
        chunk = {name: values[:100_000] for name, values in chunk.items()}
        for name in ("fact_id", "supersedes"):
            chunk[name] = _in_part(part, chunk[name])
        chunk["fact_ids"] = [None if ids is None else _in_part(part, ids) for ids in chunk["fact_ids"]]
        table = chunk_table(chunk)
        writer = writer or pq.ParquetWriter(path, table.schema, compression="zstd")
        writer.write_table(table, row_group_size=65_536)
        total += table.num_rows
    writer.close()
    return total


def streaming() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "million.parquet"
        events = write_million(path)
        print(f"5. streaming: {events:,} events, {path.stat().st_size / 1e6:.1f} MB of Parquet")
        start = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--replay-file", str(path)], check=True)
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        met = "met" if peak < MEMORY_BUDGET_BYTES else "NOT met"
        print(f"   hybrid-v1 at capacity 100, streamed in chunks: {seconds:.1f} s,"
              f" peak resident memory {peak / 2**20:,.0f} MiB (budget 2,048 MiB: {met})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 20,000-event trace, a small study, no streaming")
    parser.add_argument("--zoo-events", type=int, default=10_000,
                        help="events replayed per zoo policy in part 2 [10000]")
    parser.add_argument("--parts", default="1,2,3,4,5", help="the parts to run [1,2,3,4,5]")
    parser.add_argument("--replay-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replay_file:  # the child process of part 5
        counts = replay(iter_chunks(args.replay_file), FastMemory("hybrid-v1", 100))
        print(f"   replayed {counts.events:,} events: answerable rate {counts.answerable / counts.asks:.3f}")
        return 0
    parts = {int(part) for part in args.parts.split(",")}
    chunk = trace_of(20_000 if args.quick else 100_000)
    same = True
    if 1 in parts:
        same &= equivalence(chunk, 100)
    if 2 in parts:
        same &= zoo_equivalence({name: values[: args.zoo_events] for name, values in chunk.items()}, 100)
    if 3 in parts:
        capacity_curve(chunk)
    if 4 in parts:
        same &= study(40 if args.quick else 1000, 10 if args.quick else 20)
    if 5 in parts and not args.quick:
        streaming()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
