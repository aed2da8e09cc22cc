"""The ``evictlab`` command line.

Each module in :mod:`evictlab.commands` adds its subcommands through ``register(subparsers)``;
this file only assembles them, so a new command is one new module. A handler returns an exit
code; errors derived from :class:`~evictlab.errors.EvictlabError` are printed as one line and
end the process with that error's exit code.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from . import __version__, commands
from .errors import EvictlabError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evictlab",
        description=(
            "evictlab: rebuild DeerMem's eviction evaluation, compare capacity policies, sweep"
            " their parameters, diff protocol variants and run the live QA comparison."
        ),
        epilog="Run 'evictlab COMMAND --help' for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"evictlab {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if module.name.startswith("_"):
            continue
        importlib.import_module(f"{commands.__name__}.{module.name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
