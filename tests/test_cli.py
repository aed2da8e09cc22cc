"""The command line as a whole: every subcommand has --help, the program has --version."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from evictlab import __version__
from evictlab.cli import build_parser, main


def subcommand_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path, e.g. ("run-policy",), ("qa", "stats")."""
    paths = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                paths.append((*prefix, name))
                paths.extend(subcommand_paths(child, (*prefix, name)))
    return paths


PATHS = subcommand_paths(build_parser())


def test_the_expected_commands_are_registered():
    names = {" ".join(path) for path in PATHS}
    assert {
        "validate-contracts", "validate", "run-policy", "sweep", "diff", "explain", "run-qa",
        "grade-qa", "report", "qa", "qa stats", "data", "data demo", "data fetch",
    } <= names


@pytest.mark.parametrize("path", PATHS, ids=" ".join)
def test_every_subcommand_has_help(path, capsys):
    with pytest.raises(SystemExit) as exited:
        main([*path, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: evictlab {' '.join(path)}")
    assert len(text.splitlines()) > 3


def test_version_and_module_entry_point():
    result = subprocess.run([sys.executable, "-m", "evictlab", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == f"evictlab {__version__}"


def test_no_command_prints_help(capsys):
    assert main([]) == 0
    assert "COMMAND" in capsys.readouterr().out
