"""Run every ``bench_*.py`` script in this folder, one after another, each in its own process.

Scripts are found by name, so a new benchmark is one new file. Each runs with the same Python
as this script, from the project root; its output passes straight through. The exit status is
0 only if every script exited 0.

Usage: ``python benchmarks/run_all.py [NAME ...]`` (names select scripts by substring, e.g.
``engine``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT_ROOT = HERE.parent


def discover(names: list[str]) -> list[Path]:
    scripts = sorted(HERE.glob("bench_*.py"))
    if names:
        scripts = [script for script in scripts if any(name in script.stem for name in names)]
    return scripts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run every benchmarks/bench_*.py script.")
    parser.add_argument("names", nargs="*", help="run only the scripts whose name contains one of these")
    args = parser.parse_args(argv)
    scripts = discover(args.names)
    if not scripts:
        print(f"no benchmark scripts match {args.names} in {HERE}", file=sys.stderr)
        return 2
    results = []
    for script in scripts:
        print(f"=== {script.name}", flush=True)
        start = time.perf_counter()
        code = subprocess.call([sys.executable, str(script)], cwd=PROJECT_ROOT)
        results.append((script.name, code, time.perf_counter() - start))
        print(flush=True)
    print("=== summary")
    for name, code, seconds in results:
        print(f"{name:<32} {'ok' if code == 0 else f'FAILED (exit {code})':<16} {seconds:8.1f} s")
    return 0 if all(code == 0 for _, code, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
