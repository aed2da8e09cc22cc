"""Error types shared by every layer.

Each error carries a message that names what was wrong and where (file, row, field), so the
command line can print it as it is and exit non-zero.
"""

from __future__ import annotations


class EvictlabError(Exception):
    """Base class for every error evictlab reports to a user."""

    exit_code = 2


class ContractError(EvictlabError, ValueError):
    """A protocol file, parameter object or option breaks its contract."""


class DatasetError(EvictlabError, ValueError):
    """The dataset file is missing, unpinned, malformed or disagrees with the manifest."""


class OutputExistsError(EvictlabError, FileExistsError):
    """An output file already exists; evictlab never overwrites finished results."""


class UnknownPolicyError(EvictlabError, ValueError):
    """A policy name that no registered policy answers to."""
