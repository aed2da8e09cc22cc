"""``evictlab import deermem`` and ``evictlab audit``: a DeerMem store, imported and checked."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .. import results
from ..analysis.traces.schema import chunk_from_rows, trace_bytes
from ..core.runspec import coerce_value
from ..core.stores.deermem import PRODUCTION_NOTE, Store, check_problems, read_store
from ..core.stores.imported import (
    AUDIT_FILE,
    FACTS_FILE,
    KIND,
    STORE_FILE,
    USAGE_FILE,
    audit_rows,
    fact_rows,
    load_import,
    store_document,
    trace_file,
    trace_rows,
)
from ..core.tokens import MODES
from ._common import add_command, add_param_option, check_apart, command_group, parameter_changes

if TYPE_CHECKING:
    import pandas as pd

AUDIT_KIND = "store-audit"
CHECKS_FILE, SHADOW_FACTS, SHADOW_SUMMARY, SHADOW_FIGURE = (
    "audit.checks.csv", "shadow.facts.csv", "shadow.summary.json", "figures/shadow")  # fmt: skip


def register(subparsers: argparse._SubParsersAction) -> None:
    commands = command_group(subparsers, "import",
                             "Import a memory store into a run folder that the other commands read.", "FORMAT")
    parser = commands.add_parser(
        "deermem",
        help="a DeerMem file store (spec 1.14): fact files and the .metadata/ sidecars",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Read a DeerMem store (users/<uid>/agents/<agent>/facts/<hh>/<id>.md with the\n"
            "agents/<agent>/.metadata/ usage and audit sidecars) and write a snapshot without the\n"
            f"facts' text to --output-dir: {STORE_FILE}, {FACTS_FILE} (every field the policies read,\n"
            f"and the content's token count by spec 1.13's rule), {USAGE_FILE}, {AUDIT_FILE} and a best-\n"
            "effort trace per bucket under traces/. A fact file DeerMem refuses (no front matter, an\n"
            "id that is not its file name, an unquoted timestamp, any broken field rule) is named\n"
            "with its field; " + PRODUCTION_NOTE + "."
        ),
        epilog="example:\n  evictlab import deermem ~/.deermem --user alice --output-dir results/store-alice",
    )
    parser.add_argument("store", type=Path, metavar="STORE_DIR", help="the store's root (DeerMem's storage_path)")
    parser.add_argument("--output-dir", required=True, type=Path, metavar="DIR", help="folder for the snapshot")
    parser.add_argument("--user", metavar="ID", help="only this user (the raw id, as DeerMem is given it)")
    parser.add_argument("--agent", metavar="NAME", help="only this agent (any case)")
    parser.add_argument("--skip-invalid", action="store_true",
                        help="import the other facts when some files are refused (they are listed and recorded)")
    parser.add_argument("--token-counting", choices=MODES, default=MODES[0],
                        help="DeerMem's token_counting: tiktoken (cl100k_base where it loads offline, else char)"
                        " or char [%(default)s]")
    parser.add_argument("--clock", metavar="ISO",
                        help="the snapshot's time (default: the latest time the store records)")
    parser.set_defaults(handler=run_import)
    _register_audit(subparsers)


def run_import(args: argparse.Namespace) -> int:
    clock = None if args.clock is None else coerce_value("evaluation_time", args.clock, where="--clock")
    check_apart(args.output_dir, args.store, "the store")
    stores: list[Store] = []

    def read() -> None:
        store = read_store(args.store, user=args.user, agent=args.agent, token_counting=args.token_counting,
                           clock=clock)  # fmt: skip
        for line in store.problems:
            print(f"refused: {line}", file=sys.stderr)
        check_problems(store, args.skip_invalid)
        stores.append(store)

    parameters = {"store": str(args.store), "user": args.user, "agent": args.agent, "skip_invalid": args.skip_invalid,
                  "token_counting": args.token_counting, "clock": args.clock}  # fmt: skip
    fixed = [STORE_FILE, FACTS_FILE, USAGE_FILE, AUDIT_FILE]
    with results.run(args.output_dir, KIND, parameters=parameters, outputs=fixed, precheck=read) as current:
        store = stores[0]
        left_out = 0
        for bucket in store.buckets:
            rows, missing = trace_rows(bucket)
            left_out += missing
            current.write_bytes(trace_file(bucket.key), trace_bytes(chunk_from_rows(rows), ".jsonl"))
        current.write_jsonl(FACTS_FILE, fact_rows(store))
        current.write_json(USAGE_FILE, {bucket.key: bucket.usage for bucket in store.buckets})
        current.write_jsonl(AUDIT_FILE, audit_rows(store))
        current.write_json(STORE_FILE, store_document(store))
        current.record.summary = {
            "buckets": len(store.buckets), "facts": sum(len(bucket.facts) for bucket in store.buckets),
            "refused": len(store.problems), "token_counting": store.token_counting,
            "trace_facts_left_out": left_out,
        }  # fmt: skip
    for note in store.notes:
        print(f"note: {note}", file=sys.stderr)
    for bucket in store.buckets:
        print(f"{bucket.key}: {len(bucket.facts)} facts, {len(bucket.usage)} usage entries,"
              f" {len(bucket.audit)} audit events")  # fmt: skip
    refused = f", {len(store.problems)} file(s) refused and left out" if store.problems else ""
    print(f"imported {args.store} at clock {store_document(store)['clock']} (tokens: {store.token_counting}{refused})"
          f" into {args.output_dir}")  # fmt: skip
    return 0


# --------------------------------------------------------------------------- audit


def _register_audit(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "audit", raw=True,
        description=(
            "Check every eviction audit event of an imported store (spec 1.6) against the policy it\n"
            "names: recorded scores recomputed from their components and the weights (--param), the\n"
            "evicted facts against the survivors that were there then and have not changed since,\n"
            "the reserved count. Prints how many events check, cannot be checked (and why) and\n"
            "contradict (and how), then the shadow-mode analysis: how often hybrid-v1 would have\n"
            "evicted differently, which categories it would have saved and lost, the margins and\n"
            f"the rate per month. --output-dir writes {CHECKS_FILE}, {SHADOW_FACTS}, {SHADOW_SUMMARY}\n"
            f"and {SHADOW_FIGURE}.png/.svg with {AUDIT_KIND}.run.json ('evictlab view' shows them).\n"
            "Exit status 1 when an event contradicts its policy."
        ),
        epilog="example:\n  evictlab audit results/store-alice --output-dir results/store-alice-audit",
    )
    parser.add_argument("folder", type=Path, metavar="DIR", help="an 'evictlab import deermem' folder")
    parser.add_argument("--output-dir", type=Path, metavar="DIR", help="also write the tables and the figure here")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="what to print [%(default)s]")
    add_param_option(parser)
    parser.set_defaults(handler=run_audit)


def run_audit(args: argparse.Namespace) -> int:
    from ..analysis.store_audit import CANNOT, CHECKS, CONTRADICTS, check_events, shadow_facts, shadow_summary
    from ..policies import PolicyParams

    params = PolicyParams().replace(**parameter_changes(args.param))
    if args.output_dir is not None:
        check_apart(args.output_dir, args.folder, "the imported store")
    store = load_import(args.folder)
    checks = check_events(store, params)
    facts = shadow_facts(store)
    shadow = shadow_summary(store, checks, facts)
    if args.output_dir is not None:
        from ..workbench import plots

        parameters = {"store": str(args.folder), "policy_parameters": params.as_dict()}
        outputs = [CHECKS_FILE, SHADOW_FACTS, SHADOW_SUMMARY]
        with results.run(args.output_dir, AUDIT_KIND, parameters=parameters, outputs=outputs) as current:
            current.write_text(CHECKS_FILE, checks.to_csv(index=False))
            current.write_text(SHADOW_FACTS, facts.to_csv(index=False))
            current.write_json(SHADOW_SUMMARY, _plain(shadow))
            for path in plots.save(plots.shadow_figure(shadow, facts, source=f"imported store {args.folder}"),
                                   current.path(SHADOW_FIGURE)):  # fmt: skip
                current.add_output(str(path.relative_to(current.folder)))
            current.record.summary = {verdict: int((checks["verdict"] == verdict).sum()) for verdict in
                                      (CHECKS, CANNOT, CONTRADICTS)}  # fmt: skip
    if args.format == "json":
        document = {"events": json.loads(checks.to_json(orient="records")), "shadow": _plain(shadow)}
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        print("\n".join(audit_lines(checks, shadow)))
    return 1 if (checks["verdict"] == CONTRADICTS).any() else 0


def audit_lines(checks: pd.DataFrame, shadow: dict) -> list[str]:
    """The printed audit: counts per verdict, every contradiction, the reasons events cannot be checked, shadow mode."""
    from ..analysis.store_audit import CANNOT, CHECKS, CONTRADICTS

    counts = checks["verdict"].value_counts()
    total = len(checks)
    told = ", ".join(f"{int(counts.get(verdict, 0))} {verdict}" for verdict in (CHECKS, CANNOT, CONTRADICTS))
    lines = [f"{total} audit events: {told}"]
    checkable = total - int(counts.get(CANNOT, 0))
    if checkable:
        lines.append(f"{int(counts.get(CHECKS, 0))} of {checkable} checkable events check; the reserved count is"
                     f" reproduced in {int((checks['reserved'] == 'reproduced').sum())}")  # fmt: skip
    for _, row in checks[checks["verdict"] == CONTRADICTS].iterrows():
        lines.append(f"  contradicts: {row['case_id']} event {row['index']} ({row['occurred_at']}, {row['policy']}):"
                     f" {row['reason']}")  # fmt: skip
    for reason, group in checks[checks["verdict"] == CANNOT].groupby("reason"):
        lines.append(f"  cannot be checked ({len(group)}): {reason}")
    if shadow["events"]:
        lines.append(f"shadow mode: hybrid-v1 would have evicted differently in {shadow['disagreeing']} of"
                     f" {shadow['events']} events ({100 * shadow['rate']:.1f}%, 95% interval"
                     f" {100 * shadow['rate_low']:.1f}-{100 * shadow['rate_high']:.1f}%)")  # fmt: skip
        for item in shadow["categories"]:
            lines.append(f"  {item['category']}: {item['saved']} saved, {item['lost']} lost")
        for month in shadow["months"]:
            lines.append(f"  {month['month']}: {month['disagreeing']} of {month['events']} events disagree")
    else:
        lines.append("shadow mode: no event with a shadow block (fact_eviction_shadow_enabled was off)")
    return lines


def _plain(value: object) -> object:
    """JSON without NaN: an undefined rate or quantile is null."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return None if isinstance(value, float) and math.isnan(value) else value
