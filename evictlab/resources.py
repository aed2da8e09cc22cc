"""Files that ship with the package, found through :mod:`importlib.resources`.

``data/`` holds the protocol files (``protocol/``), the generated demo dataset (``demo/``),
DeerFlow's published QA results (``reference/``) and example run specs (``specs/``);
``notebooks/`` holds the report's notebooks. In a source checkout both sit at the top level,
beside ``evictlab/``; the wheel installs them inside the package as ``evictlab/data/`` and
``evictlab/notebooks/`` (setup.py maps them), so an installed wheel finds them exactly as a
source checkout (or the editable install of ``make setup``) does.
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


def shipped_folder(name: str) -> Path:
    """``evictlab/<name>`` of an installed wheel, else ``<name>`` beside ``evictlab/`` in a source checkout."""
    installed = package_path(name)
    return installed if installed.is_dir() else installed.parent.parent / name


DATA_DIR = shipped_folder("data")
NOTEBOOK_DIR = shipped_folder("notebooks")
