"""The ``evictlab`` command line: one module of this package per command or command group.

Each public module here adds its subcommands through ``register(subparsers)``; this file only
assembles them, so a new command is one new module (and its line in :data:`INDEX`, which
``tests/test_cli.py`` asks for). Only the module of the command being run is imported: every
other command is listed from :data:`INDEX`, so ``evictlab --help`` and ``--version`` load no pandas or
numpy. A mistyped command or option is answered with the closest known one. A handler returns
an exit code; errors derived from :class:`~evictlab.errors.EvictlabError`, and operating-system
errors on the files a command reads or writes, are printed as one line and end the process with
a non-zero exit code. A closed output pipe ends it quietly.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import importlib
import os
import pkgutil
import platform
import re
import signal
import sys
from collections.abc import Iterable, MutableMapping, Sequence
from pathlib import Path

from .. import __version__
from ..errors import EvictlabError

#: Top-level command -> (module of this package, one-line help shown by ``evictlab --help``).
INDEX: dict[str, tuple[str, str]] = {
    "audit": ("store", "check an imported DeerMem store's eviction audit against its policy; shadow-mode analysis"),
    "data": ("data", "the embedded demo dataset and the explicit LongMemEval download"),
    "diff": ("diff", "compare two run specs (protocol variants) on one dataset: pools, kept sets, prompts"),
    "explain": (
        "explain",
        "why each fact of one case was kept or evicted: rank, score, margin, displacer, smallest change",
    ),
    "gate": ("gate", "fail a policy change when two run folders differ beyond tolerances, case by case"),
    "grade-qa": ("qa_run", "grade a finished run-qa folder and write the paired statistics (no provider calls)"),
    "import": ("store", "import a DeerMem store (fact files and sidecars) as a snapshot without its text"),
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
    "weights": (
        "weights",
        "which hybrid-v1 weights keep the most supports, ties counted, and what that choice is worth held out",
    ),
}


def summary(command: str) -> str:
    """The one-line help of a top-level command (its ``add_parser(help=...)``)."""
    return INDEX[command][1]


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<choices>.*)\)")


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors suggest the closest command or option."""

    def error(self, message: str) -> None:  # type: ignore[override]
        match = _INVALID_CHOICE.search(message)
        if match:
            choices = re.findall(r"'([^']*)'", match["choices"])
            message += did_you_mean(match["given"], choices)
        super().error(message)

    def reject_unknown(self, extras: Sequence[str]) -> None:
        """Fail on arguments this parser does not know, suggesting its closest options."""
        known = [option for option in self._option_string_actions if option != "--help"]
        hints = "".join(did_you_mean(item.split("=", 1)[0], known) for item in extras if item.startswith("--"))
        super().error(f"unrecognized arguments: {' '.join(extras)}{hints}")

    def unknown_options(self, argv: Sequence[str]) -> list[str]:
        """The ``--name`` items of ``argv`` that no option of this parser takes (nor abbreviates).

        Checked before parsing, so that a mistyped option is named even when argparse would
        first complain about a required option the typo was meant to be.
        """
        unknown = []
        for item in argv:
            if item == "--":
                break
            flag = item.split("=", 1)[0]
            if flag.startswith("--") and not any(option.startswith(flag) for option in self._option_string_actions):
                unknown.append(item)
        return unknown


def did_you_mean(given: str, known: Iterable[str]) -> str:
    """``"; did you mean 'run-policy'?"``, or ``""`` when nothing is close."""
    close = difflib.get_close_matches(given, list(known), n=3, cutoff=0.6)
    if not close:
        return ""
    return f"; did you mean {' or '.join(repr(name) for name in close)}?"


def build_parser(command: str | None = None, *, complete: bool = False) -> Parser:
    """The parser, with the full subparser of ``command`` (every command when ``complete``).

    Commands other than ``command`` are stubs carrying their one-line help, enough for
    ``evictlab --help`` and for suggesting a mistyped command name.
    """
    parser = Parser(
        prog="evictlab",
        description=(
            "evictlab: rebuild DeerMem's eviction evaluation, compare capacity policies, sweep"
            " their parameters, diff protocol variants and run the live QA comparison."
        ),
        epilog="Run 'evictlab COMMAND --help' for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"evictlab {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    indexed = {module for module, _ in INDEX.values()}
    wanted = {module for name, (module, _) in INDEX.items() if complete or name == command}
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module.name.startswith("_") or (module.name in indexed and module.name not in wanted):
            continue
        importlib.import_module(f"{__name__}.{module.name}").register(subparsers)
    for name, (_, summary) in sorted(INDEX.items()):
        if name not in subparsers.choices:
            subparsers.add_parser(name, help=summary, add_help=False)
    return parser


def command_of(argv: Sequence[str]) -> str | None:
    """The command named in ``argv``: its first item that is not an option (the top-level
    parser's only options, ``--help`` and ``--version``, take no value)."""
    return next((item for item in argv if not item.startswith("-")), None)


def chosen_parser(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The innermost subparser ``argv`` names, e.g. ``qa stats``'s for ``evictlab qa stats ...``
    (command groups take no option with a value, so their subcommand is the next non-option).

    A name that is not a command of its group is refused here, before any option is read, so
    that ``evictlab swep --output-dir x`` says the command is unknown rather than the option.
    """
    for item in argv:
        if item == "--":
            break
        if item.startswith("-"):
            continue
        action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if action is None:
            break
        if item not in action.choices:
            hint = did_you_mean(item, action.choices) or f"; '{parser.prog} --help' lists the commands"
            parser.error(f"unknown command {item!r}{hint}")
        parser = action.choices[item]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _run(argv)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's final flush
        return code
    except BrokenPipeError:
        # The reader went away (``evictlab ... | head``): stop quietly, as a SIGPIPE would.
        # Later writes, the interpreter's final flush included, go nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


#: The numpy 2.4 dispatch targets whose float64 exp, log, log1p and power kernels are numpy's own
#: (X86_V4 and the levels above it); earlier numpy builds name those kernels AVX512F and AVX512_SKX.
OWN_MATHS_TARGETS = {(2, 4): "X86_V4 AVX512_ICL AVX512_SPR", (2, 0): "AVX512F AVX512_SKX"}


def library_maths(environ: MutableMapping[str, str] = os.environ) -> None:
    """Ask numpy, before this process imports it, to leave its own AVX512 maths kernels unused.

    Why: without them numpy's float64 ``exp``, ``log``, ``log1p`` and ``power`` call the C
    library's functions, the ones Python's ``math`` calls, so the policies' rank keys take
    :mod:`evictlab.numerics`' vector route (confirmed there at import) instead of calling the
    scalar function once per distinct value: the same doubles, a little less CPU (the
    10,000-event trace curve: 4 % less through the command line on an AVX512 machine,
    benchmarks/README.md). The variable goes to every process the command starts (Dask
    workers, notebook kernels). Nothing is set when numpy is already imported, when the user
    set either of numpy's variables, or off x86.
    """
    if "numpy" in sys.modules or "NPY_DISABLE_CPU_FEATURES" in environ or "NPY_ENABLE_CPU_FEATURES" in environ:
        return
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return
    from importlib import metadata

    try:
        found = re.match(r"(\d+)\.(\d+)", metadata.version("numpy"))
    except metadata.PackageNotFoundError:
        return
    version = (int(found[1]), int(found[2])) if found else (0, 0)
    targets = next((names for since, names in OWN_MATHS_TARGETS.items() if version >= since), None)
    if targets is not None:
        environ["NPY_DISABLE_CPU_FEATURES"] = targets


def _run(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if command_of(argv) is not None:
        library_maths()
    parser = build_parser(command_of(argv))
    chosen = chosen_parser(parser, argv)
    if isinstance(chosen, Parser) and (unknown := chosen.unknown_options(argv)):
        chosen.reject_unknown(unknown)
    args, extras = parser.parse_known_args(argv)
    if extras:
        (chosen if isinstance(chosen, Parser) else parser).reject_unknown(extras)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    try:
        return int(handler(args) or 0)
    except EvictlabError as error:
        print(f"evictlab {args.command}: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print(f"evictlab {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise
    except OSError as error:
        # An output path the system refuses (a file where a folder should be, a read-only or
        # full disk, a name too long). Writes are atomic, so nothing finished was damaged.
        print(f"evictlab {args.command}: error: {_os_error_line(error)}", file=sys.stderr)
        return EvictlabError.exit_code


def _os_error_line(error: OSError) -> str:
    if error.filename is None:
        return str(error.strerror or error)
    path = Path(os.fsdecode(error.filename))
    if error.errno == errno.EEXIST and not path.is_dir():
        return f"{path}: exists and is not a folder"
    return f"{path}: {error.strerror or error}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
