"""The vectorised engine against the scalar selector and against a minimal numpy floor.

1. Equivalence and speed on the demo dataset's 45 pools: one grid through
   :meth:`evictlab.selection.engine.PreparedCases.select` and through a Python loop over
   :func:`evictlab.selection.deermem.select_facts_for_capacity`; every kept set, support rank and reserved
   count must be identical (exit status 1 otherwise). Prints selections per second of both and
   their ratio (target: >= 100x).
2. The floor: synthetic pools of 10, 100 and 1,000 facts per case (45 cases; exact score ties
   common), ``hybrid-v1`` over 924 settings (weight step 0.05 x 2 x 2 half-lives) x 3
   capacities (50/70/90 % of the pool). Per selection, on the same rank keys (made untimed,
   :func:`floor_keys`): the floor (:func:`floor_topk`, a bare stable argsort and top-k mask per
   row), the one selector's every output (:func:`selector_outputs`), the engine from the cases'
   fact dicts (the grid built and the cases prepared included) and the scalar loop on a sample.
   Targets: the selector <= 6x the floor, the engine >= 100x the scalar loop. Every sampled
   scalar decision is compared with the engine's (exit status 1 if one differs).
3. The dense grid: weight step 0.01 (5,151 points) x 45 cases x 3 capacities through the
   engine alone and through a whole ``run_sweep`` (both policies, tidy rows): wall time
   (untraced) and peak memory traced by tracemalloc (numpy's buffers included).
4. Explorer latency: one setting over 45 cases x 3 capacities, with a half-life seen before
   (cached decay tables) and with a new one.

Timings are medians of a few repeats on this machine (part 2: the fastest of 7 interleaved
rounds in CPU time, with the ratio of the medians beside it), whose load average is printed at
the start and the end; compare ratios, not seconds.
Run:
``.venv/bin/python benchmarks/bench_engine.py`` (``--quick``: a smaller grid in part 1 and one
round in part 2; ``--parts 2`` runs part 2 only).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import resource
import statistics
import sys
import time
import tracemalloc
from functools import partial
from types import SimpleNamespace

import numpy as np

from evictlab.analysis.sweep import make_grid, run_sweep, simplex_weights
from evictlab.core import demo
from evictlab.core.pools import build_pools
from evictlab.core.protocol import PRESETS, load_protocol
from evictlab.policies import PolicyParams, resolve_policy
from evictlab.policies.arrays import Params
from evictlab.selection.deermem import select_facts_for_capacity
from evictlab.selection.engine import PreparedCases
from evictlab.selection.engine_settings import FIELDS, SettingColumns
from evictlab.selection.selector import ranked_keys, reservation_of, support_outputs

CAPACITIES = (5, 7, 9)
TARGET_RATIO = 100
FLOOR_TARGET = 6
POOL_SIZES = (10, 100, 1000)
FLOOR_CASES = 45
# The synthetic grid: weights at step 0.05 x confirmation half-lives x access half-lives.
FLOOR_GRID = {
    "weights": simplex_weights(0.05),
    "confirmation_half_lives": (90.0, 30.0),
    "access_half_lives": (30.0, 7.0),
    "reserved_fractions": (0.1,),
    "reserved_maxima": (10,),
}
CLOCK = _dt.datetime(2026, 8, 13, tzinfo=_dt.UTC)
# Part 2 is timed in CPU seconds of this process, which other jobs on a shared machine
# disturb far less than wall-clock time (numpy runs these steps on one thread).
CPU = time.process_time


def demo_pools():
    protocol = demo.demo_protocol(load_protocol())
    return build_pools(protocol, demo.load_demo(protocol), PRESETS["pr4810-final"])


def timed(function, repeats, clock=time.perf_counter):
    """(median seconds, last result) of ``repeats`` calls, measured by ``clock``."""
    times, result = [], None
    for _ in range(repeats):
        start = clock()
        result = function()
        times.append(clock() - start)
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
        scalar_seconds, decisions = timed(partial(scalar_decisions, pool_set.cases, policy, settings, prepared.now), 1)
        engine_seconds, batch = timed(partial(prepared.select, policy, settings, CAPACITIES, details=True), 5)
        lean_seconds, _ = timed(partial(prepared.select, policy, settings, CAPACITIES), 5)
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


def iso(days_ago) -> str:
    return (CLOCK - _dt.timedelta(days=int(days_ago))).strftime("%Y-%m-%dT%H:%M:%SZ")


def synthetic_pools(n_facts, n_cases=FLOOR_CASES, seed=0):
    """Cases of ``n_facts`` facts, and the same signals as arrays for the floor.

    Whole-day timestamps, confidences on a 0.05 grid and integer heats make exact score ties
    common; 40 % of the facts were confirmed, 40 % only created, 20 % carry neither; 30 % are
    heated; 10 % are corrections; the support is a random fact.
    """
    rng = np.random.default_rng(seed)
    shape = (n_cases, n_facts)
    signals = {
        "confidence": rng.integers(0, 21, shape) / 20,
        "fresh_days": rng.integers(0, 400, shape).astype(np.float64),
        "kind": rng.choice(3, shape, p=[0.4, 0.4, 0.2]),  # confirmed, created, neither
        "heat": np.where(rng.random(shape) < 0.3, rng.integers(1, 10, shape), 0).astype(np.float64),
        "heat_days": rng.integers(0, 200, shape).astype(np.float64),
        "correction": rng.random(shape) < 0.1,
        "support": rng.integers(0, n_facts, n_cases),
    }
    stamp_field = {0: "lastConfirmedAt", 1: "createdAt"}
    cases = []
    for c in range(n_cases):
        facts, usage = [], {}
        for p in range(n_facts):
            fact = {
                "id": f"f{c}-{p}",
                "confidence": float(signals["confidence"][c, p]),
                "category": "correction" if signals["correction"][c, p] else "preference",
            }
            if signals["kind"][c, p] in stamp_field:
                fact[stamp_field[signals["kind"][c, p]]] = iso(signals["fresh_days"][c, p])
            facts.append(fact)
            if signals["heat"][c, p]:
                heat, accessed = int(signals["heat"][c, p]), iso(signals["heat_days"][c, p])
                usage[fact["id"]] = {"accessHeat": heat, "lastAccessedAt": accessed}
        support = (facts[signals["support"][c]]["id"],)
        cases.append(
            SimpleNamespace(case_id=f"c{c}", scenario="synthetic", source="synthetic", facts=facts, usage=usage,
                            support_fact_ids=support)
        )
    return cases, signals


def floor_keys(cases):
    """hybrid-v1's rank keys for the grid, in the engine's chunks (made untimed), and the cases' signals."""
    prepared, policy = PreparedCases(cases, CLOCK), resolve_policy("hybrid-v1")
    settings, step = SettingColumns.product(**FLOOR_GRID), prepared.chunk_size(1)
    parts = (settings[start : start + step] for start in range(0, len(settings), step))
    params = [Params.columns({name: part.column(name) for name in FIELDS}) for part in parts]
    return prepared, [(ranked_keys(policy, prepared.signals, each), reservation_of(policy, each)) for each in params]


def floor_topk(keys, capacities):
    """The floor: a bare stable argsort of every row's keys and its top-k mask at each capacity."""
    caps = np.asarray(capacities)[:, None, None, None]
    for key, _ in keys:
        order = np.argsort(key.key, axis=-1, kind="stable")
        ranks = np.empty_like(order)
        np.put_along_axis(ranks, order, np.broadcast_to(np.arange(order.shape[-1]), order.shape), axis=-1)
        kept = ranks[None] < caps
    return kept


def selector_outputs(prepared, keys, capacities):
    """The one selector on the floor's keys: every output of every (setting, case, capacity)."""
    caps = np.broadcast_to(np.asarray(capacities), (len(prepared), len(capacities)))
    for key, reservation in keys:
        outputs = support_outputs(key, prepared.signals, prepared.support_positions, reservation, caps)
    return outputs


def engine_decisions(cases, capacities):
    """The engine from the cases' fact dicts: the grid built, the cases prepared, every output decided."""
    settings = SettingColumns.product(**FLOOR_GRID)
    prepared = PreparedCases(cases, CLOCK)
    return prepared.select("hybrid-v1", settings, capacities)


def scalar_sample(cases, settings, capacities, step):
    """(seconds per selection, decisions) of the scalar loop over every ``step``-th setting."""
    sample = settings[::step]
    start = CPU()
    decisions = [
        [
            [
                select_facts_for_capacity(
                    case.facts, max_facts=capacity, policy="hybrid-v1", usage=case.usage, now=CLOCK, **setting.as_dict()
                )
                for capacity in capacities
            ]
            for case in cases
        ]
        for setting in sample
    ]
    return (CPU() - start) / (len(sample) * len(cases) * len(capacities)), decisions


def interleaved(functions, repeats):
    """Per function, (fastest, median) CPU seconds over ``repeats`` rounds, and its last result.

    The functions run in turn within each round, so a burst of load on the shared machine
    falls on all of them alike.
    """
    times = [[] for _ in functions]
    results = [None] * len(functions)
    for _ in range(repeats):
        for index, function in enumerate(functions):
            start = CPU()
            results[index] = function()
            times[index].append(CPU() - start)
    return [(min(each), statistics.median(each)) for each in times], results


def floor_comparison(repeats):
    """Part 2: floor, selector and scalar loop per selection at each pool size; True if a decision differs."""
    n_settings = len(SettingColumns.product(**FLOOR_GRID))
    print(f"2. selector vs. floor vs. scalar loop, hybrid-v1: {n_settings} settings (weight step 0.05 x 2 x 2"
          f" half-lives) x {FLOOR_CASES} synthetic cases x 3 capacities (50/70/90 % of the pool);"
          f" CPU time per selection, fastest of {repeats} rounds (ratio of the medians beside it)")
    print(f"   {'facts':>5}  {'floor':>9}  {'selector':>9}  {'engine':>9}  {'scalar':>10}  {'sel./floor':>10}"
          f"  {'(medians)':>9}  {'scalar/engine':>13}  differing decisions")
    failed = False
    for n_facts in POOL_SIZES:
        cases, signals = synthetic_pools(n_facts)
        capacities = (n_facts // 2, n_facts * 7 // 10, n_facts * 9 // 10)
        selections = n_settings * FLOOR_CASES * len(capacities)
        prepared, keys = floor_keys(cases)
        (floor_time, selector_time, engine_time), (_, _, batch) = interleaved(
            [
                partial(floor_topk, keys, capacities),
                partial(selector_outputs, prepared, keys, capacities),
                partial(engine_decisions, cases, capacities),
            ],
            repeats,
        )
        del keys
        # The scalar loop on a sample of settings and cases; every sampled decision compared.
        step, sample_cases = max(1, n_settings // 4), cases[: max(1, 450 // n_facts)]
        scalar_seconds, decisions = scalar_sample(sample_cases, batch.settings, capacities, step)
        wrong = sum(
            (signals["support"][c] in decision.kept_positions) != batch.support_retained[s * step, c, k]
            or decision.ranking.index(signals["support"][c]) + 1 != batch.support_rank[s * step, c, k]
            or decision.reserved_correction_slots != batch.reserved_correction_slots[s * step, c, k]
            for s, per_setting in enumerate(decisions)
            for c, per_case in enumerate(per_setting)
            for k, decision in enumerate(per_case)
        )
        failed |= wrong > 0
        ratio, median_ratio = selector_time[0] / floor_time[0], selector_time[1] / floor_time[1]
        us = 1e6 / selections
        speed_up = scalar_seconds / (engine_time[0] / selections)
        verdict = "met" if ratio <= FLOOR_TARGET and speed_up >= TARGET_RATIO else "NOT met"
        print(f"   {n_facts:>5}  {floor_time[0] * us:>7.3f}us  {selector_time[0] * us:>7.3f}us"
              f"  {engine_time[0] * us:>7.3f}us  {scalar_seconds * 1e6:>8.1f}us  {ratio:>9.2f}x  {median_ratio:>8.2f}x"
              f"  {speed_up:>12,.0f}x  engine vs. scalar {wrong} of {len(decisions) * len(sample_cases) * 3}"
              f"  (targets <= {FLOOR_TARGET}x the floor, >= {TARGET_RATIO}x the scalar loop: {verdict})")
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
    print(f"3. dense grid: {len(settings):,} settings (weight step 0.01) x {len(prepared)} cases"
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
    print(f"4. explorer: one setting x {len(prepared)} cases x {len(CAPACITIES)} capacities (median of 200)")
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="weight step 0.25 instead of 0.05 in part 1, one round in part 2"
    )
    parser.add_argument("--parts", default="1234", help="which parts to run, e.g. 2 or 24 (default: all)")
    args = parser.parse_args(argv)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"machine: {os.cpu_count()} cores, load average {load} (1, 5, 15 min) at the start")
    pool_set = demo_pools()
    seconds, prepared = timed(lambda: PreparedCases.from_pool_set(pool_set), 5)
    print(f"0. PreparedCases for {len(prepared)} cases: {seconds * 1000:.2f} ms (once per pool set)")
    failed = False
    if "1" in args.parts:
        failed |= equivalence_and_speed(pool_set, prepared, 0.25 if args.quick else 0.05)
    if "2" in args.parts:
        failed |= floor_comparison(1 if args.quick else 7)
    if "3" in args.parts:
        dense_grid(pool_set, prepared)
    if "4" in args.parts:
        explorer_latency(prepared)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"machine: load average {load} (1, 5, 15 min) at the end")
    if failed:
        print("FAILED: the engine and the scalar selector disagree", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
