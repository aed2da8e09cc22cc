"""``evictlab run-policy``: offline support retention of capacity policies on the 45 pools."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import results
from ..analysis.evaluate import (
    KIND,
    OUTPUT_FILES,
    RUN_FILES,
    evaluate,
    run_parameters,
    run_record,
    summarize,
    write_run,
)
from ..analysis.store_audit import is_correction
from ..core.stores.imported import is_import
from ..errors import ContractError
from ..policies import DEERMEM_POLICIES, known_policies
from ..policies.ties import TIE_BREAKS
from ..selection.decisions import distinct, scenario_table
from ._common import (
    POLICY_HELP,
    add_command,
    add_param_option,
    add_pool_options,
    check_apart,
    parameter_changes,
    parse_csv,
    pool_set_from,
    preset_name,
    report_dataset,
    spec_from,
    with_policy_parameters,
)

RETENTION_NOTE = (
    "retention.json holds these cells with both numbers; summary.json and policy.raw.jsonl"
    " (DeerFlow's format) hold the input-order decision"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "run-policy",
        description=(
            "Build the 45 pools, decide each policy at each capacity once and write "
            + ", ".join(OUTPUT_FILES)
            + " to --output-dir (refusing to overwrite any of them), then print support"
            " retention per scenario, capacity and policy. run.json, policy.raw.jsonl and"
            " summary.json are DeerFlow's files (ties broken by input order); retention.json"
            " holds the printed cells, each with its tie-break, its input-order count and its"
            " tie-neutral expectation, and policy.decisions.jsonl the same per row."
        ),
    )
    parser.add_argument("--output-dir", required=True, type=Path, metavar="DIR", help="folder for the run files")
    parser.add_argument(
        "--policies",
        type=lambda text: parse_csv(text),
        default=list(DEERMEM_POLICIES),
        metavar="A,B,...",
        help=f"policies to evaluate, each {POLICY_HELP} (default: {','.join(DEERMEM_POLICIES)};"
        f" known: {', '.join(known_policies())})",
    )
    parser.add_argument(
        "--capacities",
        type=lambda text: parse_csv(text, int),
        default=None,
        metavar="K,K,...",
        help="capacities (default: the config's, 5,7,9)",
    )
    parser.add_argument(
        "--tie-break",
        choices=TIE_BREAKS,
        default=None,
        help="how the printed table and retention.json count a support tied at the cut line: input-order (the"
        " decision as made) or expected (its exact expectation over random orders of the tied"
        " facts); default: input-order for confidence and hybrid-v1, expected for the others."
        " keep-all runs uncapped and random is its exact expectation",
    )
    add_param_option(parser)
    add_pool_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # A bad override or policy fails before anything is read.
    changes = parameter_changes(args.param)
    if args.dataset is not None and is_import(args.dataset):
        check_apart(args.output_dir, args.dataset, "the imported store")
        return run_store(args, changes)
    policies = with_policy_parameters(args.policies, args.param)
    spec = spec_from(args)
    params = spec.resolved.protocol.config.hybrid.replace(**changes)
    decisions, rows = write_run(args.output_dir, spec, policies, args.capacities, preset=preset_name(args),
                                params=params, tie_break=args.tie_break, notice=report_dataset)  # fmt: skip
    print(scenario_table(decisions).to_string())
    ties = decisions.groupby("policy", sort=False, observed=True)["support_tied"].sum()
    print("decisions settled by a tie at the cut line: " + ", ".join(f"{p} {int(n)}" for p, n in ties.items()))
    breaks = decisions.groupby("tie_break", sort=False, observed=True)["policy"].unique()
    print("counted " + "; ".join(f"{name}: {', '.join(map(str, names))}" for name, names in breaks.items())
          + f" (input-order: the decision as made; expected: over random orders of tied facts);"
          f" {RETENTION_NOTE}")  # fmt: skip
    print(f"wrote {len(rows)} rows to {args.output_dir}")
    return 0


def run_store(args: argparse.Namespace, changes: dict) -> int:
    """run-policy on an imported store (``--dataset IMPORT_DIR``): DeerFlow's three files over its
    buckets, and a table of what each policy keeps at each capacity."""
    if not args.capacities:
        raise ContractError("an imported store needs --capacities (DeerMem's max_facts, 100 by default)")
    policies = distinct("policies", tuple(with_policy_parameters(args.policies, args.param)))
    pool_set = pool_set_from(args)
    params = pool_set.protocol.config.hybrid.replace(**changes)
    parameters = run_parameters(policies, args.capacities, preset_name(args), params)
    with results.run(args.output_dir, KIND, parameters=parameters, outputs=RUN_FILES) as current:
        current.record.dataset = pool_set.dataset.record()
        rows = evaluate(pool_set, policies, args.capacities, params)
        current.write_jsonl("policy.raw.jsonl", rows)
        current.write_json("summary.json", summarize(rows, pool_set.protocol.protocol_id))
        current.write_json("run.json", run_record(pool_set, policies, args.capacities, preset=preset_name(args),
                                                  params=params))  # fmt: skip
    facts = {case.case_id: case.facts for case in pool_set.cases}
    for row in rows:
        corrections = {fact["id"] for fact in facts[row["case_id"]] if is_correction(fact)}
        print(f"{row['case_id']} at {row['capacity']}, {row['policy']}: kept {len(row['kept_fact_ids'])} of"
              f" {len(facts[row['case_id']])}, corrections {len(corrections & set(row['kept_fact_ids']))} of"
              f" {len(corrections)}, {row['reserved_correction_slots']} reserved")  # fmt: skip
    print(f"wrote {len(rows)} rows to {args.output_dir} (clock {pool_set.protocol.evaluation_time.isoformat()};"
          " 'evictlab explain --dataset' says why a fact went, 'evictlab gate' compares two such runs)")
    return 0
