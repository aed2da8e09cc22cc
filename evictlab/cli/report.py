"""``evictlab report``: execute the notebook suite and write a report folder (see :mod:`evictlab.workbench.report`)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from ..core.protocol import DEFAULT_PRESET, PRESETS
from ..workbench.report import JOBS, NOTEBOOKS, RESERVED_PARAMETERS, NotebookRun, parse_parameter_value, run_report
from . import summary
from ._common import parse_csv, positive_int


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help=summary("report"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            textwrap.fill("Notebooks, in order: " + ", ".join(NOTEBOOKS) + ".", width=84) + "\n\n"
            "Execute them with papermill into <folder>/notebooks/ (each also exported to HTML),\n"
            "with their figures (PNG and SVG) in <folder>/figures/, then write report.md and\n"
            "report.html (findings computed from the run, contents, key tables, every figure\n"
            "with a caption) and the run record report.run.json (provenance, parameters,\n"
            "dataset and protocol hashes, per-notebook status and duration, every file's\n"
            "SHA-256). Notebooks run --jobs at a time, each in its own kernel; a line per\n"
            "notebook (wall and CPU time) is printed as it finishes. A dataset that cannot be\n"
            "loaded leaves no folder behind.\n"
            "\n"
            "The folder is results/<name>/, name defaulting to report-<preset>[-demo][-smoke];\n"
            "NAME is a plain folder name. The folder is locked while the report runs. A rerun\n"
            "replaces the previous report in that folder, deleting only files its record lists\n"
            "with an unchanged SHA-256; a non-empty folder that is not a report is refused. A\n"
            "failing notebook is kept up to its failing cell, named in the report and the record\n"
            "(status error), and the command exits with status 1."
        ),
        epilog="example: evictlab report --smoke --notebooks 01,02 --output-dir /tmp/report",
    )
    parser.add_argument(
        "--dataset",
        metavar="PATH",
        help="LongMemEval oracle JSON file (default: the embedded demo dataset)",
    )
    parser.add_argument(
        "--allow-unpinned",
        action="store_true",
        help="accept a dataset whose SHA-256 is not the pinned one, in the key tables and every"
        " notebook (warns; recorded as pinned: false)",
    )
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=DEFAULT_PRESET,
        help=f"protocol variant preset, passed to every notebook in its spec parameter with --dataset and"
        f" --allow-unpinned (default: {DEFAULT_PRESET})",
    )
    parser.add_argument("--output-dir", type=Path, metavar="DIR", help="the whole report folder (overrides --name)")
    parser.add_argument("--name", metavar="NAME", help="report folder name under results/ (default: see above)")
    parser.add_argument("--smoke", action="store_true", help="run every notebook in its quick smoke mode")
    parser.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="extra notebook parameter, repeatable (VALUE: None, True, False, a number or text),"
        " e.g. -p qa_run_dir results/my-qa-run; "
        + ", ".join(RESERVED_PARAMETERS) + " are set by the options above",
    )
    parser.add_argument(
        "--notebooks",
        type=parse_csv,
        default=None,
        metavar="A,B,...",
        help="run only these notebooks, by number, stem or file name (e.g. 01,02)",
    )
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=JOBS,
        metavar="N",
        help=f"notebooks executed at once, each in its own kernel (default: {JOBS}; 1 runs them one by one)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    def finished(notebook: NotebookRun) -> None:
        # As each notebook ends, with or without the progress bar (tqdm.write keeps the bar intact).
        times = [f"{seconds:.1f} s{kind}" for seconds, kind in ((notebook.duration_seconds, ""),
                                                                (notebook.cpu_seconds, " CPU")) if seconds is not None]
        took = f" ({', '.join(times)})" if times else ""
        tqdm.write(f"{notebook.name}: {notebook.status}{took}", file=sys.stdout)

    result = run_report(
        args.output_dir,
        name=args.name,  # run_report derives the default name from the same inputs
        dataset=args.dataset,
        allow_unpinned=args.allow_unpinned,
        preset=args.preset,
        smoke=args.smoke,
        parameters={key: parse_parameter_value(value) for key, value in args.parameter},
        notebooks=args.notebooks,
        progress=not args.no_progress,
        on_finish=finished,
        jobs=args.jobs,
    )
    if not result.ok:
        print(f"evictlab report: error: {result.error}", file=sys.stderr)
        print(f"partial report in {result.output_dir} (executed notebooks kept in notebooks/)", file=sys.stderr)
        return 1
    if result.tables:  # the support-retention table, as run-policy prints it
        retention = result.tables[0]
        print(f"\n{retention.title}\n{retention.frame.to_string()}\n")
    print(f"report: {result.markdown_path}")
    print(f"        {result.html_path}")
    return 0
