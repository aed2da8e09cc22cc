"""The vectorised engine against the scalar selector, on the demo's 45 pools.

1. Equivalence and speed: one grid through :meth:`evictlab.selection.engine.PreparedCases.select` and
   through a Python loop over :func:`evictlab.selection.deermem.select_facts_for_capacity`; every kept
   set, support rank and reserved count must be identical (exit status 1 otherwise). Prints
   selections per second of both and their ratio (target: >= 100x).
2. The dense grid: weight step 0.01 (5,151 points) x 45 cases x 3 capacities through the
   engine alone and through a whole ``run_sweep`` (both policies, tidy rows): wall time
   (untraced) and peak memory traced by tracemalloc (numpy's buffers included).
3. Explorer latency: one setting over 45 cases x 3 capacities, with a half-life seen before
   (cached decay tables) and with a new one.

Timings are wall-clock medians of a few repeats on this machine; compare ratios, not seconds.
Run: ``.venv/bin/python benchmarks/bench_engine.py`` (``--quick`` for a smaller first grid).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import tracemalloc
from functools import partial

from evictlab.analysis.sweep import make_grid, run_sweep, simplex_weights
from evictlab.core import demo
from evictlab.core.pools import build_pools
from evictlab.core.protocol import PRESETS, load_protocol
from evictlab.policies import PolicyParams
from evictlab.selection.deermem import select_facts_for_capacity
from evictlab.selection.engine import PreparedCases

CAPACITIES = (5, 7, 9)
TARGET_RATIO = 100


def demo_pools():
    protocol = demo.demo_protocol(load_protocol())
    return build_pools(protocol, demo.load_demo(protocol), PRESETS["pr4810-final"])


def timed(function, repeats):
    """(median seconds, last result) of ``repeats`` calls."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def scalar_decisions(cases, policy, settings, now):
    return [
        [
            [
                select_facts_for_capacity(
                    case.facts, max_facts=capacity, policy=policy, usage=case.usage, now=now, **setting.as_dict()
                )
                for capacity in CAPACITIES
            ]
            for case in cases
        ]
        for setting in settings
    ]


def mismatches(batch, decisions, cases):
    """Number of (setting, case, capacity) whose kept set, support rank or reserved count differ."""
    wrong = 0
    for s, per_setting in enumerate(decisions):
        for c, (case, per_case) in enumerate(zip(cases, per_setting)):
            support = case.fact_ids.index(case.support_fact_ids[0])
            for k, decision in enumerate(per_case):
                same = (
                    set(batch.kept_fact_ids(s, c, k)) == set(decision.kept_ids)
                    and batch.support_rank[s, c, k] == decision.ranking.index(support) + 1
                    and batch.reserved_correction_slots[s, c, k] == decision.reserved_correction_slots
                )
                wrong += not same
    return wrong


def equivalence_and_speed(pool_set, prepared, step):
    settings = [
        PolicyParams(*weights, confirm, access)
        for weights in simplex_weights(step)
        for confirm, access in ((90, 30), (30, 7))
    ]
    selections = len(settings) * len(pool_set.cases) * len(CAPACITIES)
    print(f"1. equivalence and speed: {len(settings)} settings (weight step {step}, 2 half-life pairs)"
          f" x {len(pool_set.cases)} cases x {len(CAPACITIES)} capacities = {selections:,} selections per policy")
    failed = False
    for policy in ("hybrid-v1", "confidence"):
        scalar_seconds, decisions = timed(lambda: scalar_decisions(pool_set.cases, policy, settings, prepared.now), 1)
        engine_seconds, batch = timed(lambda: prepared.select(policy, settings, CAPACITIES, details=True), 5)
        lean_seconds, _ = timed(lambda: prepared.select(policy, settings, CAPACITIES), 5)
        wrong = mismatches(batch, decisions, pool_set.cases)
        failed |= wrong > 0
        ratio = scalar_seconds / engine_seconds
        print(f"   {policy}:")
        print(f"     scalar loop      {selections / scalar_seconds:>14,.0f} selections/s  ({scalar_seconds:.3f} s)")
        print(f"     engine, details  {selections / engine_seconds:>14,.0f} selections/s  ({engine_seconds:.4f} s)")
        print(f"     engine, outputs  {selections / lean_seconds:>14,.0f} selections/s  ({lean_seconds:.4f} s)")
        verdict = "met" if ratio >= TARGET_RATIO else "NOT met"
        print(f"     ratio (details)  {ratio:>14,.0f}x  (target >= {TARGET_RATIO}x: {verdict})")
        print(f"     decisions differing from the scalar selector: {wrong}")
    return failed


def peak_memory(function):
    """(peak traced MiB, result) of one call; timed separately, as tracing slows it down."""
    tracemalloc.start()
    result = function()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20, result


def dense_grid(pool_set, prepared):
    grid = make_grid(weights_step=0.01, capacities=CAPACITIES)
    settings = grid.settings
    decisions = len(settings) * len(prepared) * len(CAPACITIES)
    print(f"2. dense grid: {len(settings):,} settings (weight step 0.01) x {len(prepared)} cases"
          f" x {len(CAPACITIES)} capacities = {decisions:,} decisions per policy")
    engine = partial(prepared.select, "hybrid-v1", settings, CAPACITIES)
    sweep = partial(run_sweep, {"pr4810-final": pool_set}, grid, progress=False)
    seconds, _ = timed(engine, 3)
    peak, _ = peak_memory(engine)
    print(f"   engine, hybrid-v1:            {seconds:7.3f} s, peak traced memory {peak:7.1f} MiB")
    seconds, _ = timed(sweep, 3)
    peak, result = peak_memory(sweep)
    print(f"   run_sweep, both policies:     {seconds:7.3f} s, peak traced memory {peak:7.1f} MiB,"
          f" {len(result.rows):,} rows ({result.rows.memory_usage(deep=True).sum() / 2**20:.1f} MiB)")
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"   process peak resident memory: {max_rss:7.1f} MiB (whole benchmark so far, including part 1's"
          " scalar decisions)")


def explorer_latency(prepared):
    print(f"3. explorer: one setting x {len(prepared)} cases x {len(CAPACITIES)} capacities (median of 200)")
    cached = PolicyParams(0.5, 0.3, 0.2, 90, 30)
    prepared.select("hybrid-v1", [cached], CAPACITIES)
    seconds, _ = timed(lambda: prepared.select("hybrid-v1", [cached], CAPACITIES), 200)
    print(f"   half-lives seen before: {seconds * 1000:6.3f} ms")
    fresh = iter(range(1000, 1300))
    seconds, _ = timed(
        lambda: prepared.select("hybrid-v1", [PolicyParams(0.5, 0.3, 0.2, next(fresh), next(fresh))], CAPACITIES),
        100,
    )
    print(f"   new half-lives:         {seconds * 1000:6.3f} ms")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="weight step 0.25 instead of 0.05 in part 1")
    args = parser.parse_args(argv)
    pool_set = demo_pools()
    seconds, prepared = timed(lambda: PreparedCases.from_pool_set(pool_set), 5)
    print(f"0. PreparedCases for {len(prepared)} cases: {seconds * 1000:.2f} ms (once per pool set)")
    failed = equivalence_and_speed(pool_set, prepared, 0.25 if args.quick else 0.05)
    dense_grid(pool_set, prepared)
    explorer_latency(prepared)
    if failed:
        print("FAILED: the engine and the scalar selector disagree", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
