"""``evictlab qa ...``: offline steps of the live QA comparison.

The ``qa`` group is shared: another command module adds a subcommand to it with
``qa_subparsers(subparsers).add_parser(NAME, ...)`` inside its own ``register``. The group is
created by whichever module asks first, so module import order does not matter.
"""

from __future__ import annotations

import argparse
import weakref

from .. import results
from ..analysis.qa.grading import GRADER_VERSION
from ..analysis.qa.stats import (
    ALPHA,
    BOOTSTRAP_ITERATIONS,
    BOOTSTRAP_SEED,
    QA_CAPACITY,
    STATS_FILE,
    SUMMARY_FILE,
    check_bootstrap_work,
    load_graded_rows,
    stats_documents,
    suite_report_lines,
    write_stats_files,
)
from ..errors import ContractError
from ..intervals import POWER
from ._common import add_bootstrap_limit_option, command_group, parse_csv, positive_int

STATS_KIND = "qa-stats"  # its run record: qa-stats.run.json

# The group's sub-subparsers, per top-level subparsers object (cli builds a fresh parser per run).
_GROUPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def qa_subparsers(subparsers: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """The subparsers of the ``qa`` group under ``subparsers``, creating the group once."""
    if subparsers not in _GROUPS:
        _GROUPS[subparsers] = command_group(
            subparsers, "qa", "Offline steps of the live QA comparison between confidence and hybrid-v1."
        )
    return _GROUPS[subparsers]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = qa_subparsers(subparsers).add_parser(
        "stats",
        help=f"recompute {SUMMARY_FILE} and {STATS_FILE} from graded rows",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            f"Recompute {SUMMARY_FILE} (accuracy per source, scenario and policy) and\n"
            f"{STATS_FILE} (exact McNemar test and seeded paired bootstrap of the accuracy\n"
            "difference hybrid-v1 - confidence, for the official, synthetic and overall\n"
            "suites) from a graded qa.rows.jsonl file. No provider and no dataset are needed.\n"
            "\n"
            "Each row needs case_id, source, scenario, policy and grade_correct; every case\n"
            "needs one confidence and one hybrid-v1 row, and both sources (longmemeval and\n"
            "synthetic) need at least one case: a suite without cases is refused, as in the\n"
            "reference implementation. The folder is locked while the files are written and\n"
            f"{STATS_KIND}.run.json records the run; a finished run is never overwritten."
        ),
        epilog=(
            "example: evictlab qa stats \\\n"
            "  --rows data/reference/deerflow-pr4810/v3/qa.rows.jsonl \\\n"
            "  --protocol-id deermem-hybrid-v1-pr4789-reproduction-v1 --output-dir results/v3-stats"
        ),
    )
    parser.add_argument("--rows", required=True, metavar="FILE", help="graded rows (JSONL)")
    parser.add_argument("--protocol-id", required=True, metavar="ID", help="protocol id written into both files")
    parser.add_argument("--output-dir", required=True, metavar="DIR", help="folder for the two files (created)")
    parser.add_argument("--grader-version", default=GRADER_VERSION, metavar="V",
                        help="grader version the rows were graded with (default: %(default)s)")
    parser.add_argument("--qa-capacity", type=positive_int, default=QA_CAPACITY, metavar="N",
                        help="capacity the rows were answered at (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=BOOTSTRAP_SEED, metavar="N",
                        help="bootstrap seed (default: %(default)s)")
    parser.add_argument("--iterations", type=positive_int, default=BOOTSTRAP_ITERATIONS, metavar="N",
                        help="bootstrap iterations (default: %(default)s)")
    parser.add_argument("--alpha", type=_open_unit_interval, default=ALPHA, metavar="A",
                        help="two-sided level of the bootstrap interval (default: %(default)s)")
    add_bootstrap_limit_option(parser)
    parser.set_defaults(handler=run_stats)
    _register_power(subparsers)


def _register_power(subparsers: argparse._SubParsersAction) -> None:
    parser = qa_subparsers(subparsers).add_parser(
        "power",
        help="minimum detectable accuracy difference of the exact McNemar test for the suite sizes",
        description=(
            "Print, for each suite size, the smallest accuracy difference hybrid-v1 - confidence"
            " that the exact two-sided McNemar test detects with the given power, under several"
            " assumed shares of discordant pairs ('minimal': every discordant pair favours the"
            " better policy, the most favourable case). 'none' means no difference is"
            " detectable at all. Computed exactly, no sampling; no dataset is needed."
        ),
    )
    parser.add_argument("--cases", type=lambda text: parse_csv(text, int), default=None, metavar="N,N,...",
                        help="suite sizes (default: the protocol's official 40, synthetic 5, overall 45)")
    parser.add_argument(
        "--discordance",
        type=_discordances,
        default=None,
        metavar="D,D,...",
        help="assumed shares of discordant pairs, each in (0, 1], or 'minimal' (default: minimal,0.3,0.5)",
    )
    parser.add_argument("--power", type=_open_unit_interval, default=POWER, metavar="P",
                        help="target power (default: %(default)s)")
    parser.add_argument("--alpha", type=_open_unit_interval, default=ALPHA, metavar="A",
                        help="two-sided level of the test (default: %(default)s)")
    parser.set_defaults(handler=run_power)


def run_power(args: argparse.Namespace) -> int:
    """``evictlab qa power``: print the minimum detectable effect per suite size and discordance."""
    from ..analysis.qa.report import DISCORDANCES, SUITE_SIZES, power_frame, power_table

    if args.cases is not None and any(n < 1 for n in args.cases):
        raise ContractError(f"--cases: every suite size must be >= 1, got {args.cases}")
    sizes = SUITE_SIZES if args.cases is None else {str(n): n for n in args.cases}
    frame = power_frame(sizes, args.discordance or DISCORDANCES, power=args.power, alpha=args.alpha)
    print(
        f"minimum detectable difference in accuracy (exact McNemar, two-sided alpha {args.alpha:g},"
        f" power {args.power:g})"
    )
    print(power_table(frame).to_string())
    return 0


def _discordances(text: str) -> list[float | None]:
    return [None if item == "minimal" else 1.0 if item == "1" else _open_unit_interval(item)
            for item in parse_csv(text)]


def run_stats(args: argparse.Namespace) -> int:
    """``evictlab qa stats``: read the rows, write both files under one run record, print one line per suite.

    Everything is computed before the folder is touched, so bad rows leave no folder behind.
    """
    check_bootstrap_work(args.iterations, args.max_bootstrap_iterations, where="--iterations")
    rows = load_graded_rows(args.rows)
    parameters = {
        "rows": str(args.rows), "protocol_id": args.protocol_id, "grader_version": args.grader_version,
        "seed": args.seed, "iterations": args.iterations, "alpha": args.alpha, "qa_capacity": args.qa_capacity,
    }  # fmt: skip
    try:
        summary, stats = stats_documents(rows, **{name: value for name, value in parameters.items() if name != "rows"})
    except ContractError as error:
        # Row errors say "row N", which is line N of the file.
        raise ContractError(f"{args.rows}: {error}") from None
    with results.run(args.output_dir, STATS_KIND, parameters=parameters, outputs=(SUMMARY_FILE, STATS_FILE)) as run:
        write_stats_files(run, summary, stats)
        run.record.summary = {"rows": len(rows)}
    for line in suite_report_lines(stats):
        print(line)
    print(f"wrote {SUMMARY_FILE} and {STATS_FILE} to {args.output_dir}")
    return 0


def _open_unit_interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number strictly between 0 and 1, got {value}")
    return value
