"""Atomic writes and canonical JSON: how every file evictlab writes reaches the disk.

:func:`atomic_write_bytes` puts the bytes in a temporary file in the destination folder and
renames it into place, so a reader never sees a half-written file and an interrupted write
leaves the previous state intact. :mod:`evictlab.readers` reads what these write.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .readers import is_text, printable

#: The names of :func:`atomic_write_bytes`'s temporary files: ".{name}.{8 random characters}.tmp".
TEMP_FILE = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")


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
    except BaseException as error:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(error, OSError) and error.filename is None:  # a full disk: name the file
            raise OSError(error.errno, error.strerror, str(target)) from None
        raise
    return target


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, utf8(text))


def utf8(text: str) -> bytes:
    """``text`` as UTF-8; a lone surrogate (a non-UTF-8 byte of a path or an argument, as Python
    decodes them) is written as its escape, ``\\udcff``."""
    return text.encode("utf-8", "backslashreplace")


def json_document(value: Any) -> str:
    """The file format of every JSON document: 2-space indent, sorted keys, raw non-ASCII, final newline."""
    return _dumps(value, indent=2) + "\n"


def json_line(value: Any) -> str:
    """One JSONL line: compact, sorted keys, Python's default separators, raw non-ASCII."""
    return _dumps(value) + "\n"


def _dumps(value: Any, indent: int | None = None) -> str:
    text = json.dumps(value, indent=indent, sort_keys=True, ensure_ascii=False)
    if text.isascii() or is_text(text):
        return text
    # A string holds a lone surrogate: written as text (``\\udcff``), so that evictlab's strict
    # readers, which refuse lone surrogates, still read the file.
    return json.dumps(_unicode(value), indent=indent, sort_keys=True, ensure_ascii=False)


def _unicode(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, Mapping):
        return {printable(key) if isinstance(key, str) else key: _unicode(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_unicode(item) for item in value]
    return value


def write_json(path: str | os.PathLike, value: Any) -> Path:
    return atomic_write_text(path, json_document(value))


def write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> Path:
    return atomic_write_text(path, "".join(json_line(row) for row in rows))


def file_stamp(path: str | os.PathLike) -> str:
    """``"{inode}:{change time in ns}"`` of a file: which file it is. A copy, an edit or a file
    put in its place has another (and no program can set a change time back), so a record
    cannot vouch for a file that its run did not write."""
    info = os.lstat(path)
    return f"{info.st_ino}:{info.st_ctime_ns}"


def file_digest(path: str | os.PathLike) -> dict[str, Any]:
    """``{"bytes": size, "sha256": hex}`` of a file, read in blocks."""
    with open(path, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256")
        return {"bytes": handle.tell(), "sha256": digest.hexdigest()}
