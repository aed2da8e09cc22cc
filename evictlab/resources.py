"""Files that ship inside the package, found through :mod:`importlib.resources`.

``evictlab/data/`` holds the protocol files (``protocol/``), the generated demo dataset
(``demo/``), DeerFlow's published QA results (``reference/``) and example run specs
(``specs/``); ``evictlab/notebooks/`` holds the report's notebooks. They travel with the
package, so an installed wheel finds them exactly as a source checkout does.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .errors import EvictlabError


def package_path(*parts: str) -> Path:
    """The file or folder ``evictlab/<parts...>`` on disk.

    evictlab reads its files by path (their SHA-256 and byte-exact contents are part of the
    protocol), so the package must be installed as files, not inside a zip archive.
    """
    root = resources.files(__package__)
    if not isinstance(root, Path):
        raise EvictlabError(f"evictlab is installed at {root}, not as files on disk; reinstall it with pip")
    return root.joinpath(*parts)


DATA_DIR = package_path("data")
NOTEBOOK_DIR = package_path("notebooks")
