"""``evictlab diff``: what changes between two run specs (protocol variants) on one dataset."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import results
from ..analysis.diff import (
    CASES_FILE,
    DIFF_FILES,
    KIND,
    OUTPUT_FILES,
    RUN_FILE,
    SUMMARY_FILE,
    DiffResult,
    diff_dataset,
    diff_pool_sets,
    run_parameters,
    summary_lines,
    write_diff_files,
)
from ..core.pools import open_pools
from ..core.protocol import PRESETS
from ..core.runspec import CLOCK_KEY, DATASET_KEYS, FILE_KEYS, PARAM_KEYS, VARIANT_KEYS, check_same_dataset, parse_spec
from ..results import check_output
from ._common import DEMO_NOTICE, add_command, add_dataset_options


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "diff", raw=True,
        description=(
            "Build the 45 pools under two run specs on the same dataset and report what\n"
            "changed: the distractor bank, each pool's source records and their metadata,\n"
            "the records each policy keeps at every capacity, support retention, and the\n"
            "answer requests at the QA capacity (by request fingerprint). Writes\n"
            f"{', '.join(DIFF_FILES)}\n"
            "to --output-dir and never overwrites them.\n"
            "\n"
            "SPEC is PRESET[:KEY=VALUE,...] or a YAML spec file (FILE.yaml[:KEY=VALUE,...]):\n"
            f"  presets:     {', '.join(PRESETS)}\n"
            f"  files:       {', '.join(FILE_KEYS)}\n"
            f"  variant:     {', '.join(VARIANT_KEYS)}\n"
            f"  parameters:  {', '.join(PARAM_KEYS[:3])},\n"
            f"               {', '.join(PARAM_KEYS[3:5])},\n"
            f"               {', '.join(PARAM_KEYS[5:])}\n"
            f"  clock:       {CLOCK_KEY}\n"
            f"  dataset:     {', '.join(DATASET_KEYS)} (--dataset, when given, wins)\n"
            "examples:\n"
            "  pr4810-final:confidence_weight=0.55,confirmation_weight=0.35\n"
            "  pr4810-run2:fact_ids=protocol\n"
            "  data/specs/confidence-heavy.yaml"
        ),
        epilog="example: evictlab diff --from pr4810-run1 --to pr4810-run2 --output-dir results/diff-run1-run2",
    )
    parser.add_argument("--from", dest="from_spec", required=True, metavar="SPEC", help="the spec before")
    parser.add_argument("--to", dest="to_spec", required=True, metavar="SPEC", help="the spec after")
    parser.add_argument("--output-dir", required=True, type=Path, metavar="DIR",
                        help=f"folder for {CASES_FILE}, {SUMMARY_FILE} and {RUN_FILE}")
    add_dataset_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    check_output(args.output_dir, KIND, OUTPUT_FILES)  # before any work
    before, after = parse_spec(args.from_spec), parse_spec(args.to_spec)
    # Before the folder is made:
    check_same_dataset([before, after])
    dataset_path, allow_unpinned = diff_dataset(before, after, args.dataset, args.allow_unpinned)
    parameters = run_parameters({"from": before, "to": after})
    diffs: list[DiffResult] = []

    def read_inputs() -> None:  # under the lock, before the record: bad input leaves no folder
        if dataset_path is None:
            print(DEMO_NOTICE, file=sys.stderr)
        pools = [open_pools(spec.on_dataset(dataset_path, allow_unpinned=allow_unpinned)) for spec in (before, after)]
        diffs.append(diff_pool_sets(*pools, specs=(before, after)))  # refuses pools it cannot compare

    # The folder is locked from here on: a second run into it is refused at once.
    with results.run(
        args.output_dir, KIND, parameters=parameters, outputs=OUTPUT_FILES, precheck=read_inputs
    ) as current:
        (result,) = diffs
        dataset = result.summary["dataset"]
        if dataset.get("pinned") is False:
            print(
                f"warning: {dataset_path} has SHA-256 {dataset['sha256']}, not the pinned one; continuing"
                ' because of --allow-unpinned (recorded as "pinned": false)',
                file=sys.stderr,
            )
        write_diff_files(current, result)
    for line in summary_lines(result.summary):
        print(line)
    print(f"wrote {len(result.cases)} case rows to {args.output_dir}")
    return 0
