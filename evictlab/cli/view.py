"""``evictlab view``: a self-contained HTML page for a run folder, or an A/B comparison of two."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import add_command, add_dataset_options


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "view",
        description=(
            "Write one HTML file (inline CSS and JavaScript, no network access) that shows a run folder"
            " written by run-policy, grade-qa, diff, sweep, audit or trace replay/study: every case with its facts,"
            " scores, score components, margins, kept or evicted and a one-line explanation, with filters."
            " Given a second run folder of the same kind, the page also pairs their cases and lists those"
            " that disagree."
            " Questions, reference answers and memory text are never in a run folder; a QA row's model"
            " answer is left out unless --include-private-text is given."
        ),
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder (A)")
    parser.add_argument("run_dir_b", type=Path, nargs="?", metavar="RUN_DIR_B",
                        help="a second run folder to compare (B)")
    parser.add_argument(
        "--output", type=Path, metavar="FILE",
        help="the HTML file to write (default: RUN_DIR/view.html, or RUN_DIR/view-vs-NAME.html with RUN_DIR_B);"
        " an existing file is replaced only if it is an earlier evictlab view page",
    )
    parser.add_argument(
        "--include-private-text", action="store_true",
        help="include QA model answers, and each case's question, reference answer and memory text from the"
        " run's dataset (the demo, or --dataset) under the run's preset: a page to keep locally",
    )
    add_dataset_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..workbench.viewer import add_private_text, check_output, compare, load_run, render
    from ..writers import atomic_write_text

    runs = [load_run(folder, include_private_text=args.include_private_text)
            for folder in (args.run_dir, args.run_dir_b) if folder is not None]
    if args.include_private_text:
        from ..core.protocol import DEFAULT_PRESET
        from ..core.runspec import RunSpec
        from ..workbench.loaders import load_pool_set

        for run_folder in runs:
            spec = RunSpec(run_folder.manifest.get("preset") or DEFAULT_PRESET, dataset=args.dataset,
                           allow_unpinned=args.allow_unpinned)
            add_private_text(run_folder, load_pool_set(spec))
    comparison = compare(*runs) if len(runs) == 2 else None
    default = "view.html" if args.run_dir_b is None else f"view-vs-{args.run_dir_b.resolve().name}.html"
    output = args.output or args.run_dir / default
    check_output(output)
    atomic_write_text(output, render(runs, comparison))
    counts = f"; {len(comparison['disagreeing'])} of {comparison['pairs']} paired cases disagree" if comparison else ""
    print(f"wrote {output} ({output.stat().st_size / 1e6:.2f} MB){counts}")
    return 0
