"""The command line as a whole: every subcommand has --help, the program has --version, the
parser loads no heavy module, mistyped names get suggestions."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from evictlab import __version__
from evictlab.cli import INDEX, build_parser, main


def subcommand_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path, e.g. ("run-policy",), ("qa", "stats")."""
    paths = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                paths.append((*prefix, name))
                paths.extend(subcommand_paths(child, (*prefix, name)))
    return paths


PATHS = subcommand_paths(build_parser(complete=True))


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


HEAVY = ("pandas", "numpy", "matplotlib", "scipy", "pyarrow", "papermill")


@pytest.mark.parametrize("argv", [[], ["--help"], ["--version"]], ids=["build", "--help", "--version"])
def test_the_top_level_parser_imports_no_heavy_module(argv):
    code = (
        "import sys\n"
        "from evictlab.cli import build_parser\n"
        "parser = build_parser()\n"
        f"try:\n    parser.parse_args({argv!r})\nexcept SystemExit:\n    pass\n"
        f"print('heavy:', *(name for name in {HEAVY!r} if name in sys.modules), file=sys.stderr)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stderr.strip() == "heavy:"


def test_the_index_lists_every_command_with_its_own_help():
    """evictlab --help is built from INDEX: it must name each command's module and help exactly."""
    registered = {}
    for action in build_parser(complete=True)._subparsers._group_actions:
        registered = {choice.dest: choice.help for choice in action._choices_actions}
    assert registered == {name: help_text for name, (_, help_text) in INDEX.items()}
    for name, (module, _) in INDEX.items():
        only = build_parser(name)._subparsers._group_actions[0].choices[name]
        assert only.add_help, f"{name}: module {module} did not register it"


def test_top_level_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for name, (_, help_text) in INDEX.items():
        assert name in out and help_text.split()[0] in out


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["run-polcy"], "did you mean 'run-policy'?"),
        (["qa", "stat"], "did you mean 'stats'?"),
        # a mistyped command given with options is named, not its options
        (["swep", "--output-dir", "OUT"], "unknown command 'swep'; did you mean 'sweep'?"),
        (["qa", "stat", "--rows", "x"], "unknown command 'stat'; did you mean 'stats'?"),
        (["run-policy", "--polices", "x", "--output-dir", "OUT"], "did you mean '--policies'?"),
        # the typo is named although argparse would first miss the required --capacity
        (["explain", "--case", "x", "--policy", "lru", "--capcity", "3"], "did you mean '--capacity'?"),
        (["--verison"], "did you mean '--version'?"),
    ],
)
def test_mistyped_commands_and_options_get_a_suggestion(argv, suggestion, capsys, tmp_path):
    with pytest.raises(SystemExit) as exited:
        main([str(tmp_path / "out") if item == "OUT" else item for item in argv])
    assert exited.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith(suggestion), error
    assert not (tmp_path / "out").exists()
