"""``evictlab report``: execute the notebook suite and write a report folder (see :mod:`evictlab.workbench.report`)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from ..core.protocol import DEFAULT_PRESET, PRESETS
from ..errors import ContractError
from ..workbench.report import JOBS, NOTEBOOKS, RESERVED_PARAMETERS, NotebookRun, parse_parameter_value, run_report
from ._common import add_command, parse_csv, positive_int


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "report", raw=True,
        description=(
            textwrap.fill("Notebooks, in order: " + ", ".join(NOTEBOOKS) + ".", width=84) + "\n\n"
            "Execute them with papermill into <folder>/notebooks/ (each also exported to HTML),\n"
            "with their figures (PNG and SVG) in <folder>/figures/ and their key tables (CSV) in\n"
            "<folder>/tables/, then write report.md and report.html (findings read from the saved\n"
            "tables, contents, key tables, every figure with a caption) and the run record\n"
            "report.run.json (provenance, parameters, dataset and protocol hashes, per-notebook\n"
            "status and duration, every file's SHA-256). Notebooks run --jobs at a time, each in\n"
            "its own kernel; a line per notebook (its wall time) is printed as it finishes. A\n"
            "spec or dataset that cannot be loaded leaves no folder behind.\n"
            "\n"
            "The folder is results/<name>/, name defaulting to\n"
            "report-<preset>[-<spec hash>][-demo][-smoke][-nb-<numbers>]: a spec with overrides\n"
            "and a subset of --notebooks each get a folder of their own. NAME is a plain folder\n"
            "name. The folder is locked while the report runs. A rerun of the same report\n"
            "replaces it, deleting only files its record lists with an unchanged SHA-256; a folder\n"
            "holding a report of other notebooks or another spec is refused unless --replace, and\n"
            "a non-empty folder that is not a report always. A failing notebook is kept up to its\n"
            "failing cell, named in the report and the record (status error), and the command\n"
            "exits with status 1."
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
        "--spec",
        metavar="SPEC",
        help="run spec for every notebook: a preset, PRESET:KEY=VALUE,... or a YAML spec file"
        " (e.g. 'pr4810-final:confidence_weight=0.55,confirmation_weight=0.35'); --dataset adds its dataset",
    )
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=None,
        help=f"protocol variant preset, when no --spec is given (default: {DEFAULT_PRESET})",
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
        help="extra notebook parameter, repeatable; VALUE is read as YAML (None, true, 3, [3, 5],"
        " {horizon_days: 90}, else text), e.g. -p capacities '[3, 5]' -p qa_run_dir results/my-qa-run; "
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
    parser.add_argument("--replace", action="store_true",
                        help="replace a report of other notebooks or another spec in the folder")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    if args.spec is not None and args.preset is not None:
        raise ContractError("give --spec or --preset, not both (a spec names its preset)")

    def finished(notebook: NotebookRun) -> None:
        # As each notebook ends, with or without the progress bar (tqdm.write keeps the bar intact).
        took = "" if notebook.duration_seconds is None else f" ({notebook.duration_seconds:.1f} s)"
        tqdm.write(f"{notebook.name}: {notebook.status}{took}", file=sys.stdout)

    result = run_report(
        args.output_dir,
        name=args.name,  # run_report derives the default name from the same inputs
        spec=args.spec,
        dataset=args.dataset,
        allow_unpinned=args.allow_unpinned,
        preset=args.preset,
        smoke=args.smoke,
        parameters={key: parse_parameter_value(value) for key, value in args.parameter},
        notebooks=args.notebooks,
        progress=not args.no_progress,
        on_finish=finished,
        jobs=args.jobs,
        replace=args.replace,
    )
    if not result.ok:
        print(f"evictlab report: error: {result.error}", file=sys.stderr)
        print(f"partial report in {result.output_dir} (executed notebooks kept in notebooks/)", file=sys.stderr)
        return 1
    retention = next((table for table in result.tables if table.name == "02_support_retention"), None)
    if retention is not None:  # as run-policy prints it
        print(f"\n{retention.title}\n{retention.frame.to_string()}\n")
    print(f"report: {result.markdown_path}")
    print(f"        {result.html_path}")
    return 0
