"""``evictlab import deermem`` and ``evictlab audit``: a DeerMem store, imported and checked."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
    store_document,
    trace_file,
    trace_rows,
)
from ..core.tokens import MODES
from . import summary
from ._common import help_handler


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser(
        "import",
        help=summary("import"),
        description="Import a memory store into a run folder that the other commands read.",
    )
    group.set_defaults(handler=help_handler(group))
    commands = group.add_subparsers(dest="import_command", metavar="FORMAT")
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


def run_import(args: argparse.Namespace) -> int:
    clock = None if args.clock is None else coerce_value("evaluation_time", args.clock, where="--clock")
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
