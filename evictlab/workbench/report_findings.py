"""What a report found: findings computed from the run, and the key tables behind them.

:func:`analyse` recomputes, from the report's pools, the numbers its first screen states:

* **retention**: support retained by ``confidence`` and ``hybrid-v1`` at each capacity, with
  the paired difference and a seeded paired-bootstrap interval over the cases;
* **scenarios**: the scenario and capacity where the two policies differ most, and any where
  ``hybrid-v1`` keeps fewer supports;
* **zoo**: the best and worst of the other registered policies at the QA capacity, between the
  random floor and the oracle;
* **variants**: what each step of the preset cascade (run 1 -> run 2 -> final) changes in
  pools, kept sets, prompts and retention;
* **qa**: the live QA comparison of the graded run the report shows (DeerFlow's published run
  unless a ``qa_run_dir`` is given), with its source;
* **traces**: where the two policies differ most over time, on the default generated workload
  replayed in DeerMem's update order (trace mode, notebook 10).

Each finding is one sentence of numbers (``headline``) and one of method and caveats
(``detail``); nothing is hand-written per run. The tables are the ones ``report.md`` shows.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..analysis import zoo
from ..analysis.diff import diff_specs
from ..analysis.qa import report as qa_report
from ..analysis.qa.stats import paired_bootstrap
from ..analysis.traces import metrics as traces_metrics
from ..core.demo import DEMO_PIN
from ..core.pools import PoolSet
from ..core.protocol import PRESETS
from ..core.runspec import RunSpec
from ..selection.decisions import scenario_table
from . import loaders

#: The preset cascade whose steps the variants finding describes, oldest first.
CASCADE = ("pr4810-run1", "pr4810-run2", "pr4810-final")


#: How each topic is labelled in the report.
TOPIC_LABELS = {
    "retention": "Retention",
    "scenarios": "Where they differ",
    "zoo": "Other policies",
    "variants": "Protocol variants",
    "qa": "Live QA",
    "traces": "Memory over time",
    "data": "Data",
}


@dataclass(frozen=True)
class Finding:
    """One finding: ``topic`` (a key of :data:`TOPIC_LABELS`), ``headline`` (numbers) and
    ``detail`` (how it was computed, caveats)."""

    topic: str
    headline: str
    detail: str

    @property
    def label(self) -> str:
        return TOPIC_LABELS.get(self.topic, self.topic)


@dataclass(frozen=True)
class Table:
    title: str
    note: str
    frame: pd.DataFrame


@dataclass(frozen=True)
class Analysis:
    """Everything :func:`analyse` computed: the findings and the key tables."""

    findings: list[Finding]
    tables: list[Table]


def analyse(
    pool_set: PoolSet,
    *,
    preset: str,
    dataset: Path | None,
    allow_unpinned: bool = False,
    parameters: Mapping[str, Any] | None = None,
    smoke: bool = False,
) -> Analysis:
    """Findings and key tables of a report on ``pool_set`` (built from ``dataset`` under ``preset``).

    ``smoke`` replays the quick trace workload of the report's smoke mode.

    ``parameters`` are the notebooks' extra parameters: ``qa_run_dir`` selects the graded QA
    run (default: DeerFlow's published v3 run), ``interval_method`` and ``alpha`` its accuracy
    intervals, as notebook 06 reads them.
    """
    parameters = dict(parameters or {})
    retained = loaders.retention(pool_set)
    zoo_summary = zoo.zoo_summary(zoo.zoo_rows(pool_set))
    qa_dir = parameters.get("qa_run_dir")
    run = qa_report.load_qa_run(qa_dir) if qa_dir else qa_report.load_reference_run()
    check = qa_report.recompute(run)
    traces = traces_metrics.default_workload_summary(smoke=smoke)
    findings = [
        retention_finding(retained),
        scenario_finding(retained),
        zoo_finding(zoo_summary, pool_set.protocol.config.pool.qa_capacity),
        variants_finding(dataset, allow_unpinned=allow_unpinned),
        qa_finding(run, check.stats, reference=not qa_dir),
        traces_finding(traces),
        data_finding(pool_set, preset),
    ]
    tables = [
        retention_key_table(retained, pool_set, preset),
        *qa_key_tables(run, check, parameters),
        *zoo_key_tables(zoo_summary, pool_set),
        trace_key_table(traces, smoke=smoke),
    ]
    return Analysis(findings, tables)


# --------------------------------------------------------------------------- findings


def _counts(frame: pd.DataFrame, policy: str, capacity: int) -> pd.Series:
    """``support_retained`` per case (sorted by case id) of one policy at one capacity."""
    rows = frame[(frame["policy"] == policy) & (frame["capacity"] == capacity)]
    return rows.sort_values("case_id").set_index("case_id")["support_retained"].astype(bool)


def retention_finding(frame: pd.DataFrame, first: str = "confidence", second: str = "hybrid-v1") -> Finding:
    """Retention of both policies per capacity, with the paired difference and its interval."""
    capacities = sorted(frame["capacity"].unique())
    kept: dict[str, list[str]] = {first: [], second: []}
    differences = []
    for capacity in capacities:
        a, b = _counts(frame, first, capacity), _counts(frame, second, capacity)
        interval = paired_bootstrap(list(a), list(b.reindex(a.index)))
        kept[first].append(f"{int(a.sum())}/{len(a)}")
        kept[second].append(f"{int(b.sum())}/{len(b)}")
        differences.append(
            f"{_points(interval.mean_difference)} [{_points(interval.lower)}, {_points(interval.upper)}]"
        )
    listed = ", ".join(str(capacity) for capacity in capacities)
    cases = frame["case_id"].nunique()
    return Finding(
        "retention",
        f"At capacities {listed}, {second} keeps the support fact in {', '.join(kept[second])} cases and {first}"
        f" in {', '.join(kept[first])}: {', '.join(differences)} percentage points (95 % interval).",
        f"The selector alone (no language model), {cases} cases. Interval: seeded paired bootstrap over the"
        " cases (seed 4789, 10,000 draws, as for the QA). The pools are built to show these effects, so it"
        " describes these cases, not a population of memories.",
    )


def scenario_finding(frame: pd.DataFrame, first: str = "confidence", second: str = "hybrid-v1") -> Finding:
    """Where the two policies differ most, and where the second keeps fewer supports."""
    grouped = frame[frame["policy"].isin([first, second])].groupby(["scenario", "capacity", "policy"], sort=False)
    counts = grouped["support_retained"].agg(["sum", "count"]).unstack("policy")
    gap = counts["sum"][second] / counts["count"][second] - counts["sum"][first] / counts["count"][first]
    scenario, capacity = gap.abs().idxmax()
    cell = counts.loc[(scenario, capacity)]
    headline = (
        f"The largest gap is in {scenario} at capacity {capacity}: {first} {int(cell['sum'][first])}/"
        f"{int(cell['count'][first])}, {second} {int(cell['sum'][second])}/{int(cell['count'][second])}."
    )
    worse = [f"{s} at capacity {k}" for (s, k), value in gap.items() if value < 0]
    equal = sorted({s for (s, _), value in gap.items() if value == 0} - {s for (s, _), v in gap.items() if v != 0})
    headline += (
        f" {second} keeps fewer supports than {first} in " + ", ".join(worse) + "."
        if worse else f" {second} never keeps fewer supports than {first} in any scenario."
    )
    return Finding(
        "scenarios",
        headline,
        "Scenarios are the protocol's: the two help scenarios reward the signal hybrid-v1 adds, the controls"
        " check that it costs nothing elsewhere" + (f" (equal in {', '.join(equal)})" if equal else "")
        + "; 10 cases per scenario (5 for the corrections), so one case is 10 (20) points.",
    )


def zoo_finding(summary: pd.DataFrame, capacity: int) -> Finding:
    """The best and worst of the other policies at ``capacity``, between the floor and the ceiling."""
    totals = summary[(summary["scenario"] == zoo.ALL_CASES) & (summary["capacity"] == capacity)]
    totals = totals.set_index("policy")
    others = totals[totals["role"] == "zoo"].sort_values("retained", ascending=False, kind="stable")
    cases = int(totals["cases"].iloc[0])

    def kept(policy: str) -> str:
        return f"{policy} {_count(totals.loc[policy, 'retained'])}/{cases}"

    best, worst = others.index[0], others.index[-1]
    reference = [kept(p) for p in ("confidence", "hybrid-v1", "random", "oracle") if p in totals.index]
    return Finding(
        "zoo",
        f"At capacity {capacity}, of the {len(others)} other registered policies {kept(best)} keeps the most"
        f" supports and {kept(worst)} the fewest; for reference {', '.join(reference)}.",
        "Same pools and clock for every policy; random is the mean over 100 seeds, oracle keeps support facts"
        " first (an upper bound, not a policy). Each policy reads the pools' metadata as its module states"
        " (docs/policies.md).",
    )


def variants_finding(dataset: Path | None, *, allow_unpinned: bool = False) -> Finding:
    """What each step of :data:`CASCADE` changes in pools, kept sets, prompts and retention."""
    steps = []
    for before, after in itertools.pairwise(CASCADE):
        if before not in PRESETS or after not in PRESETS:
            continue
        summary = diff_specs(RunSpec.from_preset(before), RunSpec.from_preset(after), dataset,
                             allow_unpinned=allow_unpinned).summary
        qa = str(summary["qa_capacity"])
        retention = "unchanged" if not any(summary["support_retention_changed"].values()) else "changed"
        steps.append(
            f"{before} to {after} changes {summary['pools_changed']}/{summary['pools_total']} pools,"
            f" {summary['kept_sets_changed'][qa]}/{summary['kept_sets_total'][qa]} kept sets at capacity {qa}"
            f" and {summary['prompts_changed']}/{summary['prompts_total']} prompts, support retention {retention}"
        )
    return Finding(
        "variants",
        "; ".join(steps) + ".",
        "Each step switches the evidence header, the fact ids or the memory joiner (docs/protocol.md,"
        " section 0.4); kept sets are compared at every capacity, prompts at the QA capacity by request"
        " fingerprint (evictlab diff).",
    )


def qa_finding(run: qa_report.QARun, stats: Mapping[str, Any], *, reference: bool) -> Finding:
    """The paired QA result of ``run`` (``stats`` recomputed from its rows): accuracy of both
    policies, exact McNemar p and the paired bootstrap interval, per suite."""
    suites = qa_report.stats_frame(stats).set_index("suite")
    first, second = suites["first_policy"].iloc[0], suites["second_policy"].iloc[0]

    def scores(row: pd.Series) -> str:
        return f"{second} {row['second_correct']}/{row['cases']}, {first} {row['first_correct']}/{row['cases']}"

    lead = suites.loc["overall"] if "overall" in suites.index else suites.iloc[-1]
    others = [f"{suite} {scores(row)} (p = {row['p_value']:.2g})" for suite, row in suites.iterrows()
              if row is not lead and suite != lead.name]
    model = run.info()["model"]
    return Finding(
        "qa",
        f"Questions answered right: {scores(lead)}"
        f" ({_points(lead['mean_difference'])} points, 95 % interval {_points(lead['lower'])} to"
        f" {_points(lead['upper'])}, exact McNemar p = {lead['p_value']:.2g}); " + "; ".join(others)
        + f". Source: {run.label}" + (f", model {model}" if model else "") + ".",
        ("Recomputed from the published rows with evictlab's statistics; the rows come from DeerFlow's run on"
         " the real LongMemEval file, not from this report's dataset." if reference else
         "Recomputed from the run's graded rows with evictlab's statistics.")
        + " One answer per case and policy from one model: the interval covers case sampling only.",
    )


def traces_finding(summary: pd.DataFrame) -> Finding:
    """Where hybrid-v1 and confidence differ most on the default generated workload, per metric."""
    return Finding(
        "traces",
        " ".join(traces_metrics.describe_gap(traces_metrics.largest_gap(summary))),
        "A synthetic workload (the default of 'evictlab trace generate', seed 0) replayed write by write in"
        " DeerMem's update order; the exact offline optimum bounds every policy (notebook 10).",
    )


def data_finding(pool_set: PoolSet, preset: str) -> Finding:
    """Which data the retention findings rest on."""
    loaded = pool_set.dataset
    if loaded.pin == DEMO_PIN:
        what = "the embedded demo dataset (synthetic text generated by evictlab; LongMemEval-shaped)"
        note = ("Retention depends only on fact metadata, which the demo shares with LongMemEval, so the totals"
                " match DeerFlow's published ones; pass --dataset for the real file.")
    else:
        what = f"{loaded.path.name}{'' if loaded.pinned else ' (not the pinned file)'}"
        note = "The dataset is identified by its SHA-256 in report.json."
    return Finding(
        "data",
        f"{what[0].upper()}{what[1:]}, sha256 {loaded.sha256[:12]}…, preset {preset}, {len(pool_set.cases)} cases.",
        note,
    )


def _points(share: float) -> str:
    """A difference of shares as signed percentage points, ``+33.3``."""
    return f"{100 * share:+.1f}"


def _count(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


# --------------------------------------------------------------------------- key tables


def retention_key_table(frame: pd.DataFrame, pool_set: PoolSet, preset: str) -> Table:
    retained = scenario_table(frame, intervals=True)
    retained.columns = [f"{policy} @ {capacity}" for policy, capacity in retained.columns]
    return Table(
        "Support retention (selector only, no LLM)",
        f"Data: {loaders.data_source(pool_set)}. Support fact retained / cases per scenario, for each"
        f" policy @ capacity, under preset {preset} (the numbers 'evictlab run-policy' prints), each with its"
        " 95% Wilson interval in percent.",
        retained,
    )


def qa_key_tables(run: qa_report.QARun, check: qa_report.StatsCheck, parameters: Mapping[str, Any]) -> list[Table]:
    """Paired statistics and accuracy intervals of the QA run that notebook 06 shows."""
    identical = ", ".join(
        f"{name}: {'identical' if same else 'absent' if same is None else 'DIFFERENT'}"
        for name, same in check.identical.items()
    )
    source = run.label
    # The interval parameters notebook 06 reads, so that the report and the notebook agree.
    method, alpha = parameters.get("interval_method", "wilson"), parameters.get("alpha", qa_report.ALPHA)
    accuracy = qa_report.accuracy_table(
        qa_report.accuracy_frame(qa_report.rows_frame(run.rows), method=method, alpha=alpha)
    )
    accuracy.index = pd.Index([group for _, group in accuracy.index], name="group")
    return [
        Table(
            "Live QA: paired statistics",
            f"Data: {run.source}. From {source}, recomputed from its rows with evictlab.analysis.qa.stats;"
            f" stored files vs recomputed: {identical}. Beside the published percentile bootstrap: the Holm-adjusted"
            " McNemar p"
            " over the official and synthetic suites and Newcombe's paired interval; suites under 30 pairs carry"
            " a note (notebook 06 adds the minimum detectable effect).",
            qa_report.stats_table(qa_report.stats_frame(check.stats)),
        ),
        Table(
            f"Live QA: accuracy with {qa_report.interval_label(method, alpha)} intervals",
            f"Data: {run.source}. Correct / cases, accuracy and interval per scenario and suite.",
            accuracy,
        ),
    ]


def trace_key_table(summary: pd.DataFrame, *, smoke: bool = False) -> Table:
    """Capacity curves of the default generated workload with both bounds (notebook 10)."""
    gaps = " ".join(traces_metrics.describe_gap(traces_metrics.largest_gap(summary)))
    return Table(
        "Memory over time: capacity curves on the default generated workload",
        "Answerable rate (regret = exact offline optimum - policy) per capacity, replaying the"
        f" {'10-day smoke version of the ' if smoke else ''}default synthetic workload of 'evictlab trace"
        " generate' (seed 0) in DeerMem's update order; keep-all has no cap. Where hybrid-v1 and"
        f" confidence differ most: {gaps}",
        traces_metrics.curve_table(summary),
    )


def zoo_key_tables(summary: pd.DataFrame, pool_set: PoolSet) -> list[Table]:
    """One table per capacity: support retained by every registered policy (notebook 08)."""
    table = zoo.zoo_pivot(summary, scenarios=True)
    return [
        Table(
            f"Policy zoo at capacity {capacity}",
            f"Data: {loaders.data_source(pool_set)}. Support fact retained / cases per scenario for"
            " every registered policy, on the same pools and clock. confidence and hybrid-v1 break"
            " ties by input order (DeerMem's rule);"
            " every other policy reports its exact expectation over random orders of tied facts,"
            " and the tied column counts the decisions a tie at the cut line settled. random is"
            " its exact expectation, memorybank-seeded a mean over 100 seeds, keep-all is"
            " evaluated without a cap (notebook 08 has the figure and explanations).",
            table[capacity],
        )
        for capacity in table.columns.get_level_values("capacity").unique()
    ]


__all__ = ["CASCADE", "Analysis", "Finding", "Table", "analyse"]
