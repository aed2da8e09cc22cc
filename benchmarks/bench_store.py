"""Importing a DeerMem store: 500 fact files through ``read_store`` and the whole command.

The store is written for the benchmark in spec 1.14's layout (invented content, the writer of
``tests/store_fixtures.py``). Reported, each the fastest of ``--rounds`` rounds (medians beside):

1. ``read_store`` on 500 facts, in this process (CPU seconds), against the floor of reading the
   same 500 files and parsing their front matter with PyYAML's C safe loader and nothing else;
2. ``evictlab import deermem`` as a whole process (wall seconds), against ``evictlab --version``
   (the interpreter and package start-up every command pays);
3. ``evictlab trace replay --suite lifecycle-packages`` once, as a whole process (wall seconds;
   needs the two suite packages that ``make setup`` installs).

Targets: the import under 1 s, the suite replay under 30 s. Run: ``.venv/bin/python benchmarks/bench_store.py``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from store_fixtures import SECRET, START, stored_fact, write_fact

from evictlab.core.stores.deermem import read_store

EVICTLAB = Path(sys.executable).with_name("evictlab")


def best(samples: list[float]) -> str:
    return f"{min(samples):.3f} s (median {statistics.median(samples):.3f})"


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def floor(root: Path) -> None:
    for path in sorted(root.glob("**/*.md")):
        text = path.read_text("utf-8")
        yaml.load(text[4 : text.find("\n---\n", 3)], Loader=yaml.CSafeLoader)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    work = Path(tempfile.mkdtemp(prefix="bench-store-"))
    try:
        root = work / "store"
        for index in range(args.facts):
            fact = stored_fact(f"fact_{index:08x}", 0.5 + index / (2 * args.facts), START,
                               lastConfirmedAt="2026-03-02T00:00:00Z", confirmationCount=2)  # fmt: skip
            write_fact(root, fact, f"{SECRET} #{index}")
        reads, floors, commands, starts, command_cpu = [], [], [], [], []
        for round_ in range(args.rounds):
            started = time.process_time()
            store = read_store(root)
            reads.append(time.process_time() - started)
            started = time.process_time()
            floor(root)
            floors.append(time.process_time() - started)
            out = work / f"out-{round_}"
            started, cpu = time.perf_counter(), child_cpu()
            subprocess.run([EVICTLAB, "import", "deermem", root, "--output-dir", out], check=True, capture_output=True)
            commands.append(time.perf_counter() - started)
            command_cpu.append(child_cpu() - cpu)
            started = time.perf_counter()
            subprocess.run([EVICTLAB, "--version"], check=True, capture_output=True)
            starts.append(time.perf_counter() - started)
        assert len(store.buckets[0].facts) == args.facts and not store.problems
        print(f"1. read_store, {args.facts} facts: {best(reads)} CPU; floor (read + YAML only) {best(floors)};"
              f" ratio {min(reads) / min(floors):.2f}x")  # fmt: skip
        print(f"2. evictlab import deermem: {best(commands)} wall; evictlab --version {best(starts)};"
              f" ratio {min(commands) / min(starts):.2f}x")
        print(f"   its CPU time (user + system): {best(command_cpu)}")
        print(f"target, the import under 1 s: {'met' if min(commands) < 1 else 'MISSED'} by wall time,"
              f" {'met' if min(command_cpu) < 1 else 'MISSED'} by CPU time")
        started = time.perf_counter()
        replay = subprocess.run([EVICTLAB, "trace", "replay", "--suite", "lifecycle-packages", "--output-dir",
                                 work / "suite"], capture_output=True, text=True)  # fmt: skip
        took = time.perf_counter() - started
        if replay.returncode == 0:
            print(f"3. evictlab trace replay --suite lifecycle-packages (every policy, capacities 1-80): {took:.1f} s"
                  f" wall, once; target under 30 s: {'met' if took < 30 else 'MISSED'}")  # fmt: skip
        else:
            print(f"3. the suite replay did not run: {replay.stderr.strip().splitlines()[-1]}")
        print(f"load average at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
