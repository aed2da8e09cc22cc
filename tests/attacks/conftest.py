"""Fixtures shared by the attack tests."""

from __future__ import annotations

import pytest

from evictlab.cli import main


@pytest.fixture
def cli_error(capsys):
    """``cli_error(*argv)``: run the command line in this process and return its exit code and
    its one error line, asserting there is exactly one such line and no traceback."""

    def run(*argv: str) -> tuple[int, str]:
        code = main(list(argv))
        err = capsys.readouterr().err
        assert "Traceback" not in err
        errors = [line for line in err.splitlines() if "error:" in line]
        assert len(errors) == 1, err
        return code, errors[0]

    return run
