"""Subcommands of the ``evictlab`` command line, one module per area.

Every public module here defines ``register(subparsers)``; :mod:`evictlab.cli` finds them.
:data:`INDEX` names each top-level command's module and one-line help, so that ``evictlab
--help`` (and ``--version``) is built from this table alone and imports none of the modules
that load pandas or numpy; only the module of the command being run is imported. A module
missing from the table still works (it is imported eagerly), and ``tests/test_cli.py`` asks
for its entry.
"""

#: Top-level command -> (module in this package, one-line help shown by ``evictlab --help``).
INDEX: dict[str, tuple[str, str]] = {
    "data": ("data", "the embedded demo dataset and the explicit LongMemEval download"),
    "diff": ("diff", "compare two run specs (protocol variants) on one dataset: pools, kept sets, prompts"),
    "explain": (
        "explain",
        "why each fact of one case was kept or evicted: rank, score, margin, displacer, smallest change",
    ),
    "grade-qa": ("qa_run", "grade a finished run-qa folder and write the paired statistics (no provider calls)"),
    "qa": ("qa", "offline steps of the live QA comparison (see: evictlab qa --help)"),
    "report": ("report", "run the notebooks with papermill and write report.md, report.html and report.run.json"),
    "run-policy": (
        "run_policy",
        "evaluate capacity policies on the 45 pools and write run.json, policy.raw.jsonl, summary.json",
    ),
    "run-qa": ("qa_run", "ask an OpenAI-compatible model the 90 questions (45 cases x 2 policies); resumable"),
    "sweep": ("sweep", "support retention over a grid of weights, half-lives, reservations, capacities and presets"),
    "trace": (
        "trace",
        "memory over time: generate traces, replay capacity curves against the exact optimum, study workloads on Dask",
    ),
    "validate": ("validate", "check a dataset against the pin and the manifest and prepare the 45 cases"),
    "validate-contracts": ("validate", "check the protocol files without a dataset and print their identity hashes"),
    "view": ("view", "one offline HTML page for a run folder, or an A/B comparison of two, case by case"),
}


def summary(command: str) -> str:
    """The one-line help of a top-level command (its ``add_parser(help=...)``)."""
    return INDEX[command][1]
