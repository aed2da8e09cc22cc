"""Run folders: atomic writes, canonical JSON, refusal to overwrite, provenance.

Every file evictlab writes goes through :func:`atomic_write_bytes`: the bytes land in a
temporary file in the destination folder and are renamed into place, so a reader never sees a
half-written file and an interrupted run leaves the previous state intact.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from .errors import OutputExistsError

PROVENANCE_PACKAGES = ("numpy", "pandas", "scipy", "matplotlib", "pyarrow", "papermill")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp creates 0600; results are meant to be shared
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return target


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def json_document(value: Any) -> str:
    """The file format of every JSON document: 2-space indent, sorted keys, raw non-ASCII, final newline."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def json_line(value: Any) -> str:
    """One JSONL line: compact, sorted keys, Python's default separators, raw non-ASCII."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False) + "\n"


def write_json(path: str | os.PathLike, value: Any) -> Path:
    return atomic_write_text(path, json_document(value))


def write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> Path:
    return atomic_write_text(path, "".join(json_line(row) for row in rows))


def refuse_existing(paths: Iterable[str | os.PathLike]) -> None:
    """Raise :class:`OutputExistsError` naming every path that already exists."""
    existing = [str(p) for p in paths if Path(p).exists()]
    if existing:
        raise OutputExistsError(
            "refusing to overwrite existing output: " + ", ".join(existing)
            + " (choose a new --output-dir)"
        )


def utc_now_iso() -> str:
    """Current UTC time as ISO-8601 with a trailing ``Z`` (microseconds when non-zero)."""
    now = _dt.datetime.now(_dt.UTC)
    return now.replace(tzinfo=None).isoformat() + "Z"


def git_state(cwd: str | os.PathLike | None = None) -> dict[str, Any]:
    """``{"head": ..., "dirty": ...}`` of the repository holding evictlab (or ``cwd``)."""
    where = Path(cwd) if cwd is not None else Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=where, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"head": None, "dirty": None}
    return {"head": head, "dirty": bool(status.strip())}


def package_versions(names: Iterable[str] = PROVENANCE_PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def provenance() -> dict[str, Any]:
    """What every run manifest records about the software that produced it."""
    from . import __version__

    return {
        "evictlab_version": __version__,
        "git": git_state(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
    }
