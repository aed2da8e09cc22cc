"""Key tables a notebook saves for its report, and reads back.

A notebook that computes a table the report needs saves it with :func:`save_table` into its
``tables_dir`` parameter (``<report>/tables/`` when ``evictlab report`` runs it; ``None`` in
JupyterLab, where it only displays). Each table is two files: ``<name>.csv`` (the frame, its
index as the first columns) and ``<name>.json`` (title, note, how many index columns, whether
the report shows it or only reads it). The report renders its findings from these files, so
every number it states is one a notebook computed and saved (:func:`read_tables`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import ContractError
from ..results import atomic_write_text

TABLE_SUFFIX, META_SUFFIX = ".csv", ".json"


@dataclass(frozen=True)
class Table:
    """A saved table: ``frame`` with its ``title``, ``note`` (what it shows, its data) and
    whether the report shows it (``shown``) or only reads its numbers."""

    name: str
    title: str
    note: str
    frame: pd.DataFrame
    shown: bool = True


def _flat(label: Any) -> str:
    return " @ ".join(map(str, label)) if isinstance(label, tuple) else str(label)


def save_table(
    frame: pd.DataFrame,
    tables_dir: str | os.PathLike | None,
    name: str,
    *,
    title: str,
    note: str = "",
    shown: bool = True,
) -> pd.DataFrame:
    """Write ``frame`` as ``tables_dir/<name>.csv`` with its title and note beside it; return
    ``frame`` so that a notebook cell still displays it. Nothing is written when ``tables_dir``
    is None. Column labels of several levels are joined with `` @ `` (``hybrid-v1 @ 7``)."""
    if tables_dir is None:
        return frame
    if not name or Path(name).name != name:
        raise ContractError(f"table name {name!r}: expected a plain file stem")
    folder = Path(tables_dir)
    folder.mkdir(parents=True, exist_ok=True)
    flat = frame.copy()
    flat.columns = [_flat(column) for column in flat.columns]
    keep_index = not isinstance(flat.index, pd.RangeIndex)
    if keep_index:  # an unnamed level is called "index" (its first column would have no name)
        flat.index.names = [level or ("index" if flat.index.nlevels == 1 else f"index_{i}")
                            for i, level in enumerate(flat.index.names)]
    atomic_write_text(folder / f"{name}{TABLE_SUFFIX}", flat.to_csv(index=keep_index))
    meta = {"title": title, "note": note, "index_columns": flat.index.nlevels if keep_index else 0, "shown": shown}
    atomic_write_text(folder / f"{name}{META_SUFFIX}", json.dumps(meta, indent=1) + "\n")
    return frame


def read_table(path: str | os.PathLike) -> Table:
    """The table saved as ``path`` (its ``.csv``; the ``.json`` beside it gives the rest)."""
    path = Path(path).with_suffix(TABLE_SUFFIX)
    try:
        meta = json.loads(path.with_suffix(META_SUFFIX).read_text(encoding="utf-8"))
        levels = int(meta.get("index_columns", 0))
        frame = pd.read_csv(path, index_col=list(range(levels)) if levels else None, keep_default_na=True)
        return Table(path.stem, str(meta["title"]), str(meta.get("note", "")), frame, bool(meta.get("shown", True)))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ContractError(f"{path}: not a saved table ({type(error).__name__}: {error})") from None


def read_tables(tables_dir: str | os.PathLike) -> dict[str, Table]:
    """Every table saved in ``tables_dir``, by name, in name order (so notebook order)."""
    folder = Path(tables_dir)
    if not folder.is_dir():
        return {}
    return {path.stem: read_table(path) for path in sorted(folder.glob(f"*{TABLE_SUFFIX}"))}


__all__ = ["Table", "read_table", "read_tables", "save_table"]
