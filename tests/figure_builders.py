"""Every figure function of :mod:`evictlab.workbench.plots` with real inputs, built as the notebooks build them.

``figure_builders(tmp)`` returns ``{name: build}``; ``build(**options)`` passes the figure
function's keyword options (``source``, ``size``). The inputs are small (the demo pools, a
coarse lattice, few seeds) so that the whole set builds in a few seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from matplotlib.figure import Figure
from store_fixtures import replayed_store

from evictlab.analysis import robustness, validation, zoo
from evictlab.analysis.diff import diff_specs
from evictlab.analysis.qa import report as qa_report
from evictlab.analysis.store_audit import check_events, shadow_facts, shadow_summary
from evictlab.analysis.sweep import make_grid, run_sweep
from evictlab.analysis.traces.generate import WorkloadParams, generate
from evictlab.analysis.traces.lifecycle import MIDDLEWARE
from evictlab.analysis.traces.metrics import curve_rows, curve_summary
from evictlab.analysis.traces.stages import stage_table
from evictlab.analysis.traces.study import loss_map, run_study, study_summary, study_tasks
from evictlab.core.runspec import RunSpec
from evictlab.core.stores.deermem import read_store
from evictlab.distributed import Placement
from evictlab.selection.explain import explain
from evictlab.workbench import loaders, plots

#: A source line as long as the notebooks' (the longest title line a figure carries).
SOURCE = "longmemeval-demo.json (sha256 145cc9337f80, synthetic demo data), spec pr4810-final"

Builder = Callable[..., Figure]


def figure_builders(tmp: Path) -> dict[str, Builder]:
    pool_set = loaders.load_pool_set()
    retention = loaders.retention(pool_set)
    cases, facts, bank = loaders.cases_frame(pool_set), loaders.facts_frame(pool_set), loaders.bank_frame(pool_set)
    reference = qa_report.load_reference_run()
    qa_rows = qa_report.rows_frame(reference.rows)
    stats = qa_report.stats_frame(reference.stats)
    limit = pool_set.protocol.official.selection.evidence_max_chars
    weights = run_sweep({"pr4810-final": pool_set}, make_grid(weights_step=0.25, capacities=(5, 7),
                                                             policies=["hybrid-v1"]), progress=False)
    half_lives = run_sweep({"pr4810-final": pool_set}, make_grid(
        confirmation_half_lives=[2, 30, 90], access_half_lives=[30, 90], capacities=[5], policies=["hybrid-v1"]),
        progress=False).summary
    steps = [diff_specs(RunSpec.from_preset(a), RunSpec.from_preset(b)).summary
             for a, b in (("pr4810-run1", "pr4810-run2"), ("pr4810-run2", "pr4810-final"))]
    case = pool_set.case("correction_language")
    params = pool_set.protocol.config.hybrid
    explanation = explain(case.facts, 5, policy="hybrid-v1", usage=case.usage,
                          now=pool_set.protocol.evaluation_time, params=params).to_frame()
    zoo_summary = zoo.zoo_summary(zoo.zoo_rows(pool_set, capacities=(5, 7, 9), seeds=range(3)))
    curves = robustness.robustness_curves(pool_set, None, capacities=[7], seeds=2)  # all five, as notebook 09
    workload = WorkloadParams().replace(horizon_days=10.0)
    traces = [(f"seed-{seed}", generate(workload, seed)) for seed in range(2)]
    policies = ["confidence", "hybrid-v1", "fifo", "lru"]
    trace_rows = curve_rows([(name, lambda chunk=chunk: [chunk]) for name, chunk in traces], policies, [10, 50],
                            lifecycle=frozenset(MIDDLEWARE))
    trace_summary = curve_summary(trace_rows)
    grid = {"confidence_noise": [0.1, 0.3], "question_delay_days": [3.0, 14.0]}
    study_rows = run_study(study_tasks(grid, 1, base=workload, policies=policies, capacities=[20]),
                           Placement(workers=0), progress=False)
    replayed_store(tmp / "store", "confidence", shadow=True, updates=50)
    store = read_store(tmp / "store")
    store_facts = shadow_facts(store)
    shadow = shadow_summary(store, check_events(store), store_facts)
    return {
        "pool_overview": lambda **o: plots.pool_overview(cases, **o),
        "pool_metadata": lambda **o: plots.pool_metadata(facts, **o),
        "evidence_lengths": lambda **o: plots.evidence_lengths(cases, bank, support_limit=limit,
                                                               bank_limits=(40, 700), **o),
        "retention_by_scenario": lambda **o: plots.retention_by_scenario(retention, **o),
        "support_rank_distribution": lambda **o: plots.support_rank_distribution(retention, **o),
        "qa_accuracy": lambda **o: plots.qa_accuracy(qa_report.accuracy_frame(qa_rows), **o),
        "qa_paired": lambda **o: plots.qa_paired(stats, **o),
        "qa_grade_rules": lambda **o: plots.qa_grade_rules(qa_rows, **o),
        "qa_tokens": lambda **o: plots.qa_tokens(qa_rows, **o),
        "weight_simplex_maps": lambda **o: plots.weight_simplex_maps(weights.summary, 5, **o),
        "stability_maps": lambda **o: plots.stability_maps(validation.stability(weights.rows), **o),
        "half_life_heatmaps": lambda **o: plots.half_life_heatmaps(half_lives, 5, **o),
        "variant_cascade": lambda **o: plots.variant_cascade(plots.cascade_changes(steps),
                                                             plots.cascade_retention(steps), **o),
        "explanation_figure": lambda **o: plots.explanation_figure(
            explanation, policy="hybrid-v1", capacity=5, support_fact_ids=case.support_fact_ids,
            weights=plots.score_weights("hybrid-v1", params), case_label=f"case {case.case_id}", **o),
        "zoo_heatmap": lambda **o: plots.zoo_heatmap(zoo_summary, **o),
        "capacity_curves": lambda **o: plots.capacity_curves(zoo_summary, **o),
        "robustness_curves": lambda **o: plots.robustness_curves(curves, 7, **o),
        "trace_capacity_curves": lambda **o: plots.trace_capacity_curves(trace_summary, **o),
        "stage_losses": lambda **o: plots.stage_losses(stage_table(trace_rows[trace_rows["lost_evicted"].notna()]),
                                                       **o),
        "study_advantage": lambda **o: plots.study_advantage(study_summary(study_rows), **o),
        "loss_map_figure": lambda **o: plots.loss_map_figure(loss_map(study_rows, *grid), **o),
        "shadow_figure": lambda **o: plots.shadow_figure(shadow, store_facts, **o),
    }
