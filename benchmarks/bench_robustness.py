"""Robustness curves on the engine against the scalar selector, on the demo's 45 pools.

1. The study of notebook 09's headline: confidence noise at 5 levels x 200 seeds x 3
   capacities x 2 policies (``confidence``, ``hybrid-v1``) through
   ``evictlab.analysis.robustness.robustness_curves``: 270,000 decisions, timed end to end (perturbing
   the pools included).
2. The reference, measured in the same run: the same perturbed copies of one level for a
   share of the seeds decided one by one with ``evictlab.policies.select``, scaled to the
   whole study; the ratio is what to compare across machines. Every scalar decision is checked
   against the engine's; exit status 1 if one differs.

Run: ``.venv/bin/python benchmarks/bench_robustness.py`` (``--reference-seeds N``, default 10).
"""

from __future__ import annotations

import argparse
import sys
import time

from evictlab.analysis.robustness import PERTURBATIONS, perturb_cases, robustness_curves
from evictlab.policies import select
from evictlab.selection.engine import PreparedCases
from evictlab.workbench import loaders

SEEDS = 200
CAPACITIES = (5, 7, 9)
POLICIES = ("confidence", "hybrid-v1")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference-seeds", type=int, default=10)
    args = parser.parse_args()
    pool_set = loaders.load_pool_set()
    now, params = pool_set.protocol.evaluation_time, pool_set.protocol.config.hybrid
    levels = PERTURBATIONS["confidence_noise"].levels

    start = time.perf_counter()
    curves = robustness_curves(pool_set, ["confidence_noise"], seeds=SEEDS, capacities=CAPACITIES)
    engine_seconds = time.perf_counter() - start
    decisions = int((curves["seeds"] * curves["cases"]).sum())
    print(f"1. engine: {decisions:,} decisions (5 levels x {SEEDS} seeds x 45 cases x 3 capacities x 2 policies)"
          f" in {engine_seconds:.2f} s")

    copies = perturb_cases(pool_set.cases, "confidence_noise", levels[-1], range(args.reference_seeds), now)
    batch = {
        policy: PreparedCases(copies, now).select(policy, [params], CAPACITIES, details=True) for policy in POLICIES
    }
    start = time.perf_counter()
    kept = {
        (policy, c, k): tuple(select(policy, case.facts, capacity, usage=case.usage, now=now, params=params).kept_ids)
        for policy in POLICIES
        for c, case in enumerate(copies)
        for k, capacity in enumerate(CAPACITIES)
    }
    scalar_seconds = (time.perf_counter() - start) * (len(levels) * SEEDS / args.reference_seeds)
    differing = sum(batch[policy].kept_fact_ids(0, c, k) != ids for (policy, c, k), ids in kept.items())
    print(f"2. scalar selector, {len(kept):,} decisions scaled to the study: {scalar_seconds:.2f} s;"
          f" engine speed-up {scalar_seconds / engine_seconds:.1f}x; {differing} differing decisions")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
