"""Every figure function of :mod:`evictlab.workbench.plots` with real inputs, built as the notebooks build them.

``figure_builders(tmp)`` returns ``{name: build}``, each a :func:`functools.partial` of the figure
function on its data (``build.args``, ``build.keywords``: what the title checks compare with);
``build(**options)`` passes its keyword options (``source``, ``size``). The inputs are small (the demo pools, a
coarse lattice, few seeds) so that the whole set builds in a few seconds.
"""

from __future__ import annotations

from functools import partial
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
from evictlab.analysis.traces.study import run_study, study_summary, study_tasks
from evictlab.core.runspec import RunSpec
from evictlab.core.stores.deermem import read_store
from evictlab.distributed import Placement
from evictlab.selection.explain import explain
from evictlab.workbench import loaders, plots

#: A source line as long as the notebooks' (the longest title line a figure carries).
SOURCE = "longmemeval-demo.json (sha256 145cc9337f80, synthetic demo data), spec pr4810-final"

Builder = partial[Figure]


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
    losses = stage_table(trace_rows[trace_rows["lost_evicted"].notna()])
    return {
        "pool_overview": partial(plots.pool_overview, cases),
        "pool_metadata": partial(plots.pool_metadata, facts),
        "evidence_lengths": partial(plots.evidence_lengths, cases, bank, support_limit=limit, bank_limits=(40, 700)),
        "retention_by_scenario": partial(plots.retention_by_scenario, retention),
        "support_rank_distribution": partial(plots.support_rank_distribution, retention),
        "qa_accuracy": partial(plots.qa_accuracy, qa_report.accuracy_frame(qa_rows)),
        "qa_paired": partial(plots.qa_paired, stats),
        "qa_grade_rules": partial(plots.qa_grade_rules, qa_rows),
        "qa_tokens": partial(plots.qa_tokens, qa_rows),
        "weight_simplex_maps": partial(plots.weight_simplex_maps, weights.summary, 5),
        "stability_maps": partial(plots.stability_maps, validation.stability(weights.rows)),
        "half_life_heatmaps": partial(plots.half_life_heatmaps, half_lives, 5),
        "variant_cascade": partial(plots.variant_cascade, plots.cascade_changes(steps), plots.cascade_retention(steps)),
        "explanation_figure": partial(plots.explanation_figure, explanation, policy="hybrid-v1", capacity=5,
                                      support_fact_ids=case.support_fact_ids, case_label=f"case {case.case_id}",
                                      weights=plots.score_weights("hybrid-v1", params)),
        "zoo_heatmap": partial(plots.zoo_heatmap, zoo_summary),
        "capacity_curves": partial(plots.capacity_curves, zoo_summary),
        "robustness_curves": partial(plots.robustness_curves, curves, 7),
        "trace_capacity_curves": partial(plots.trace_capacity_curves, trace_summary),
        "stage_losses": partial(plots.stage_losses, losses),
        "study_advantage": partial(plots.study_advantage, study_summary(study_rows)),
        "loss_map_figure": partial(plots.loss_map_figure, study_rows, *grid),
        "shadow_figure": partial(plots.shadow_figure, shadow, store_facts),
    }
