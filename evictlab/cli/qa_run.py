"""``evictlab run-qa`` and ``evictlab grade-qa``: the live QA comparison (spec 3.4-3.8)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..analysis.qa.grade import GRADED_FILES, grade_run
from ..analysis.qa.providers import provider_from_environment
from ..analysis.qa.runner import MARKER_FILE, RESPONSES_DIR, run_qa
from ..analysis.qa.stats import suite_report_lines
from ._common import (
    add_bootstrap_limit_option,
    add_command,
    add_pool_options,
    check_config_bootstrap,
    non_negative_float,
    pool_set_from,
    positive_int,
    preset_name,
    protocol_from,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    run = add_command(
        subparsers, "run-qa",
        description=(
            "Evaluate both policies at the QA capacity, render the answer prompt and call the"
            " chat-completions endpoint named by the config's environment variables (API key and"
            f" base URL). Writes {MARKER_FILE} and one {RESPONSES_DIR}/ROW_ID.json per answered row"
            " into --output-dir. Running again resumes: stored rows that grade-qa would accept are"
            " reused, the others are called again (and named, with the reason); a changed protocol"
            " file, dataset or run marker is refused. Ctrl-C starts no new call, gives those in"
            " flight 5 s to finish and be stored and aborts the rest (a second Ctrl-C at once); a"
            " full disk stops the run with every answer received stored. Exits 1 when any row failed."
        ),
    )
    run.add_argument("--output-dir", required=True, type=Path, metavar="DIR", help="folder of the run (created)")
    run.add_argument(
        "--workers", type=positive_int, default=None, metavar="N",
        help="concurrent calls (default: the config's qa.workers)",
    )  # fmt: skip
    run.add_argument(
        "--retry-delay", type=non_negative_float, default=2.0, metavar="SECONDS",
        help="fixed pause before each retry of a call (default: %(default)s)",
    )  # fmt: skip
    add_pool_options(run)
    run.set_defaults(handler=run_command)

    grade = add_command(
        subparsers, "grade-qa",
        description=(
            "Recompute the 90 tasks, check the run marker and every stored row against them,"
            " grade each prediction with the deterministic grader and write "
            + ", ".join(GRADED_FILES)
            + " into --output-dir (refusing to overwrite any of them)."
        ),
    )
    grade.add_argument("--output-dir", required=True, type=Path, metavar="DIR", help="folder of a run-qa run")
    add_bootstrap_limit_option(grade)
    add_pool_options(grade)
    grade.set_defaults(handler=grade_command)


def run_command(args: argparse.Namespace) -> int:
    protocol = protocol_from(args)
    qa = protocol.config.qa
    # Credentials first: a missing variable must fail before the dataset is even opened.
    provider = provider_from_environment(
        qa.api_key_env,
        qa.base_url_env,
        timeout_seconds=qa.timeout_seconds,
        max_attempts=qa.max_attempts,
        retry_delay_seconds=args.retry_delay,
    )
    pool_set = pool_set_from(args)
    report = run_qa(pool_set, provider, args.output_dir, workers=args.workers, preset=preset_name(args))
    print(report.summary_line)
    for line in report.failure_lines:
        print(line, file=sys.stderr)
    return 1 if report.failures else 0


def grade_command(args: argparse.Namespace) -> int:
    protocol = protocol_from(args)
    check_config_bootstrap(protocol, args.max_bootstrap_iterations)
    result = grade_run(pool_set_from(args), args.output_dir)
    for line in suite_report_lines(result.stats):
        print(line)
    print(f"graded {len(result.rows)} rows to {args.output_dir}")
    return 0
