"""Trace replay: the fast memory against a straightforward loop, a capacity curve, streaming.

1. **Fast vs. reference, identical kept lists.** A 100,000-event generated trace at capacity
   100 under ``hybrid-v1`` (and ``confidence``): :class:`~evictlab.traces.memory.FastMemory`
   against :class:`~evictlab.traces.memory.ReferenceMemory` set to call
   :func:`evictlab.deermem.select_facts_for_capacity` on every write. The kept list after every
   write is compared (a digest per write); any difference exits with status 1. Prints both
   times and the ratio (target: >= 20x).
2. **A capacity curve.** Capacities 10, 20, 50, 100, 200, 500 on the same trace: DeerMem's two
   policies, keep-all and the exact optimum in full; every other policy on the first
   ``--zoo-events`` events, with its time scaled linearly to the whole trace and printed as an
   extrapolation (those policies run on the reference path).
3. **Streaming.** A 1,000,000-event trace written as Parquet (ten generated parts with their
   own ids, one after the other), replayed by a child process that reads it in chunks; its
   peak resident memory is reported (target: < 2 GiB).

Times are CPU seconds of this process (``time.process_time``), which a machine shared with
other jobs disturbs far less than wall-clock time; part 3 reports wall-clock time.

Run: ``.venv/bin/python benchmarks/bench_traces.py`` (``--quick``: a 20,000-event trace and no
streaming part).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from evictlab.traces.generate import WorkloadParams, generate
from evictlab.traces.memory import FastMemory, ReferenceMemory
from evictlab.traces.metrics import DEFAULT_CAPACITIES, default_policies
from evictlab.traces.optimum import offline_optimum, outline
from evictlab.traces.replay import replay, replay_policy
from evictlab.traces.schema import chunk_table, iter_chunks

TARGET_RATIO = 20
CURVE_BUDGET_SECONDS = 300
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


def capacity_curve(chunk: dict, zoo_events: int) -> None:
    print(f"2. capacity curve, capacities {','.join(map(str, DEFAULT_CAPACITIES))}")
    start = time.process_time()
    shape = outline([chunk])
    for capacity in DEFAULT_CAPACITIES:
        offline_optimum(shape, capacity)
    replay_policy([chunk], "keep-all", None)
    bounds = time.process_time() - start
    print(f"   optimum (6 capacities) and keep-all: {bounds:8.2f} s")
    total = bounds
    for policy in ("hybrid-v1", "confidence"):
        start = time.process_time()
        for capacity in DEFAULT_CAPACITIES:
            replay_policy([chunk], policy, capacity)
        seconds = time.process_time() - start
        total += seconds
        print(f"   {policy:<40} {seconds:8.2f} s (measured)")
    prefix = {name: values[:zoo_events] for name, values in chunk.items()}
    scale = len(chunk["time"]) / len(prefix["time"])
    extrapolated = 0.0
    for policy in default_policies():
        if policy in ("hybrid-v1", "confidence"):
            continue
        start = time.process_time()
        for capacity in DEFAULT_CAPACITIES:
            replay_policy([prefix], policy, capacity)
        seconds = (time.process_time() - start) * scale
        extrapolated += seconds
        print(f"   {policy:<40} {seconds:8.2f} s (extrapolated from {len(prefix['time']):,} events)")
    whole = total + extrapolated
    met = "met" if whole / 2 <= CURVE_BUDGET_SECONDS else "NOT met"
    print(f"   whole curve: {total:.1f} s measured + {extrapolated:.1f} s extrapolated = {whole:.1f} s on one core,"
          f" {whole / 2:.1f} s on 2 cores if perfectly split (budget {CURVE_BUDGET_SECONDS} s: {met})")


def write_million(path: Path, parts: int = 10) -> int:
    """``parts`` 100,000-event traces one after the other (2,600 days apart), own fact ids each."""
    writer, total = None, 0
    for part in range(parts):
        began = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(days=2600 * part)
        chunk = generate(LONG.replace(start=began.isoformat()), seed=part)
        chunk = {name: values[:100_000] for name, values in chunk.items()}
        rename = lambda value: None if value is None else f"p{part}-{value}"  # noqa: E731
        for name in ("fact_id", "supersedes"):
            chunk[name] = [rename(value) for value in chunk[name]]
        chunk["fact_ids"] = [None if ids is None else [rename(value) for value in ids] for ids in chunk["fact_ids"]]
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
        print(f"3. streaming: {events:,} events, {path.stat().st_size / 1e6:.1f} MB of Parquet")
        start = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--replay-file", str(path)], check=True)
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        met = "met" if peak < MEMORY_BUDGET_BYTES else "NOT met"
        print(f"   hybrid-v1 at capacity 100, streamed in chunks: {seconds:.1f} s,"
              f" peak resident memory {peak / 2**20:,.0f} MiB (budget 2,048 MiB: {met})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 20,000-event trace, no streaming part")
    parser.add_argument("--zoo-events", type=int, default=10_000, help="events replayed per zoo policy [10000]")
    parser.add_argument("--replay-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replay_file:  # the child process of part 3
        counts = replay(iter_chunks(args.replay_file), FastMemory("hybrid-v1", 100))
        print(f"   replayed {counts.events:,} events: answerable rate {counts.answerable / counts.asks:.3f}")
        return 0
    chunk = trace_of(20_000 if args.quick else 100_000)
    same = equivalence(chunk, 100)
    capacity_curve(chunk, min(args.zoo_events, len(chunk["time"])))
    if not args.quick:
        streaming()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
