"""Sweep run folders: every chunk of decisions written as it comes, each part vouched for by the record.

A sweep is the frames of :func:`evictlab.selection.decisions.iter_decisions`. Each chunk's rows
(:data:`STORED_ROW_COLUMNS`, in ``rows.parquet/``) and its scenario summary (in
``scenario_summary.parquet/``) are written as one Parquet part each, and dropped, so memory is
bounded by a chunk; ``settings.parquet``, ``extreme_settings.csv`` (merged chunk by chunk) and
``sweep.run.json`` (saved after each chunk, every part's size and SHA-256) complete the folder.
What each file holds, how an unfinished sweep resumes (a chunk is kept only when both its parts
are the regular files the record lists) and how :func:`load_sweep` checks the parts it reads:
docs/sweeps.md. Chunks are decided in this process or on Dask workers
(:mod:`evictlab.distributed`), whose tasks return the files as bytes: every placement writes
the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from .. import results
from ..core.pools import PoolSet
from ..distributed import dask_client, iter_tasks
from ..errors import ContractError
from ..policies.ties import EXPECTED, TIE_BREAKS
from ..selection.decisions import SETTING_COLUMNS, DecisionChunk, DecisionPlan, settings_frame
from ..selection.engine import PreparedCases
from .sweep import (
    ROW_COLUMNS,
    SweepGrid,
    SweepRequest,
    default_settings,
    merge_extremes,
    scenario_summary,
    setting_extremes,
    sweep_plan,
)

KIND = "sweep"
MANIFEST_FILE = f"{KIND}{results.RECORD_SUFFIX}"  # the run record
ROWS_FILE = "rows.parquet"  # a folder of part files
SUMMARY_FILE = "scenario_summary.parquet"  # a folder of part files
SETTINGS_FILE = "settings.parquet"
EXTREMES_FILE = "extreme_settings.csv"
OUTPUT_FILES = (ROWS_FILE, SUMMARY_FILE, SETTINGS_FILE, EXTREMES_FILE)
PART_FOLDERS = (ROWS_FILE, SUMMARY_FILE)
#: The version of the folder's files, part of the plan a resumed sweep must share. 5: the
#: tidy rows of ``iter_decisions`` less what the record and ``settings.parquet`` say once
#: (the settings' parameters, each policy's tie-break and so ``retention``), integers as
#: int32. Layout 1 (tidy rows whole) is read too; layouts 2-4 are refused.
LAYOUT = 5
READABLE_LAYOUTS = (1, LAYOUT)
STORED_ROW_COLUMNS = tuple(name for name in ROW_COLUMNS if name not in (*SETTING_COLUMNS, "tie_break", "retention"))
#: The integer columns, stored as int32 (Parquet's own width; int64 again when read).
NARROW = dict.fromkeys(("setting", "capacity", "support_rank", "reserved_correction_slots"), np.int32)


def part_name(folder: str, index: int) -> str:
    """``rows.parquet/part-000012.parquet``: chunk ``index``'s file in one of the two datasets."""
    return f"{folder}/part-{index:06d}.parquet"


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    """``frame`` as a Parquet file the way a sweep writes them: LZ4, dictionaries for the text
    columns only, statistics for ``setting`` only (a reader can skip parts by setting)."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    text = [name for name in table.column_names if pa.types.is_dictionary(table.schema.field(name).type)]
    statistics = ["setting"] if "setting" in table.column_names else False
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="lz4", use_dictionary=text, write_statistics=statistics)
    return sink.getvalue().to_pybytes()


# --------------------------------------------------------------------------- one chunk


@dataclass(frozen=True)
class ChunkFiles:
    """A chunk's two files as bytes, and what the totals need of its summary."""

    rows: bytes
    summary: bytes
    summary_rows: int
    extremes: pd.DataFrame = field(repr=False)
    defaults: pd.DataFrame = field(repr=False)


def chunk_files(plan: DecisionPlan, defaults: tuple[int, ...], chunk: DecisionChunk) -> ChunkFiles:
    """Decide one chunk and encode its files (a task: pure, picklable)."""
    rows = plan.decide(chunk)[list(ROW_COLUMNS)]
    summary = scenario_summary(rows)
    stored = rows[list(STORED_ROW_COLUMNS)].astype(NARROW)
    return ChunkFiles(parquet_bytes(stored), parquet_bytes(summary), len(summary), *_totals(summary, defaults))


def _totals(summary: pd.DataFrame, defaults: tuple[int, ...]) -> tuple[pd.DataFrame, pd.DataFrame]:
    return setting_extremes(summary), summary[summary["setting"].isin(defaults)]


# --------------------------------------------------------------------------- run folders


@dataclass(frozen=True)
class WrittenSweep:
    """What a written sweep reports: its size, the best and worst settings, DeerMem's default."""

    grid: SweepGrid = field(repr=False)
    presets: tuple[str, ...]
    rows: int
    summary_rows: int
    chunks: int
    reused_chunks: int
    extremes: pd.DataFrame = field(repr=False)
    defaults: pd.DataFrame = field(repr=False)


def input_record(pools: Mapping[str, PoolSet | PreparedCases]) -> dict[str, Any]:
    """What the manifest records about each preset's pools: protocol, dataset and hashes."""
    record: dict[str, Any] = {}
    for name, item in pools.items():
        if isinstance(item, PoolSet):
            protocol = item.protocol
            record[str(name)] = {
                "protocol_id": protocol.protocol_id,
                "evaluation_time": protocol.evaluation_time.isoformat(),
                "dataset": item.dataset.record(),
                "artifacts": protocol.artifact_hashes(),
                "variant": item.variant.as_dict(),
                "cases": len(item.cases),
            }
        else:
            record[str(name)] = {"evaluation_time": item.now.isoformat(), "cases": len(item)}
    return record


def write_sweep(request: SweepRequest) -> WrittenSweep:
    """Run ``request``'s sweep into its folder (see the module docstring).

    Runs inside :func:`evictlab.results.run` (kind ``sweep``): a finished sweep is refused, an
    unfinished one with the same plan continues from the chunks its record vouches for. Under
    the folder's lock, before the record, the folder is checked, the run specs are opened and
    the grid is planned: bad input leaves no folder. ``sweep.run.json`` records the grid,
    presets, inputs, chunking and the request's ``arguments``, the status and every file's SHA-256.
    """
    planned: list[tuple[dict[str, PoolSet | PreparedCases], DecisionPlan]] = []

    def inputs() -> None:
        results.check_output(request.output_dir, KIND, OUTPUT_FILES)
        pools = request.opened()
        planned.append((pools, sweep_plan(pools, request.grid, request.chunk_rows)))

    arguments = dict(request.arguments) if request.arguments is not None else None
    with results.run(request.output_dir, KIND, parameters={"grid": request.grid.as_dict(), "arguments": arguments},
                     outputs=OUTPUT_FILES, existing="resume", precheck=inputs) as run:  # fmt: skip
        pools, plan = planned[0]
        chunking = {"chunk_rows": plan.chunk_rows, "chunks": len(plan.chunks), "rows": plan.rows, "layout": LAYOUT}
        run.record.parameters.update(presets=list(plan.prepared), inputs=input_record(pools), chunking=chunking,
                                     tie_breaks=dict(plan.tie_breaks))  # fmt: skip
        datasets = [item.dataset.record() for item in pools.values() if isinstance(item, PoolSet)]
        run.record.dataset = datasets[0] if datasets else None
        run.save()  # the plan on disk before any chunk, so a killed run can be resumed
        # A full disk mid-sweep still ends in a record saying error: results.run holds back its room.
        return _write_chunks(run, request, plan)


def _write_chunks(run: results.Run, request: SweepRequest, plan: DecisionPlan) -> WrittenSweep:
    grid, placement = request.grid, request.placement
    defaults = tuple(default_settings(grid))
    kept = _kept_chunks(run, plan)
    extremes: list[pd.DataFrame] = []
    default_rows: dict[int, pd.DataFrame] = {}
    summary_rows = 0
    for index, summary in kept.items():
        part, rows = _totals(summary, defaults)
        extremes.append(part)
        default_rows[index] = rows
        summary_rows += len(summary)
    todo = [chunk for chunk in plan.chunks if chunk.index not in kept]
    settings = parquet_bytes(settings_frame(grid.settings_view[0 : grid.size]))
    run.write_bytes(SETTINGS_FILE, settings)
    show = sys.stderr.isatty() if request.progress is None else request.progress
    with (
        tqdm(total=plan.rows, initial=plan.rows - sum(chunk.rows for chunk in todo), desc="sweep",
             unit=" decisions", unit_scale=True, leave=False, disable=not show) as bar,
        dask_client(placement) as client,
    ):  # fmt: skip
        for chunk, files in zip(todo, iter_tasks(client, partial(chunk_files, plan, defaults), todo)):
            run.write_bytes(part_name(ROWS_FILE, chunk.index), files.rows)
            run.write_bytes(part_name(SUMMARY_FILE, chunk.index), files.summary)
            run.save()  # the record vouches for the chunk's two parts from here on
            extremes.append(files.extremes)
            default_rows[chunk.index] = files.defaults
            summary_rows += files.summary_rows
            bar.update(chunk.rows)
    merged = merge_extremes(extremes)
    run.write_bytes(EXTREMES_FILE, merged.to_csv(index=False, lineterminator="\n").encode("utf-8"))
    run.record.summary = {
        "rows": plan.rows, "scenario_summary_rows": summary_rows, "chunks": len(plan.chunks),
        "reused_chunks": len(kept), "placement": placement.describe(),
    }  # fmt: skip
    defaults_frame = pd.concat([default_rows[index] for index in sorted(default_rows)], ignore_index=True)
    return WrittenSweep(
        grid, tuple(plan.prepared), plan.rows, summary_rows, len(plan.chunks), len(kept), merged, defaults_frame
    )


# --------------------------------------------------------------------------- resuming and reading


def _kept_chunks(run: results.Run, plan: DecisionPlan) -> dict[int, pd.DataFrame]:
    """The chunks of an unfinished predecessor with the same plan whose two parts are those its
    record lists (chunk index -> its summary); every other part file goes."""
    previous = run.previous
    same = previous is not None and all(
        results.json_document(previous.parameters.get(name)) == results.json_document(run.record.parameters[name])
        for name in ("grid", "presets", "inputs", "chunking", "tie_breaks")
    )
    listed = previous.outputs if same and previous is not None else {}
    linked = False
    for name in PART_FOLDERS:  # a part folder that is a link or a file is never read or written through
        path = run.path(name)
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            path.unlink()
            linked = True
    kept: dict[int, pd.DataFrame] = {}
    redone = 0
    for chunk in plan.chunks if listed else ():
        names = [part_name(folder, chunk.index) for folder in PART_FOLDERS]
        if not any(name in listed for name in names):
            continue
        rows, summary = (_vouched(run.folder, name, listed) for name in names)
        if rows is None or summary is None:
            redone += 1
            continue
        kept[chunk.index] = pq.read_table(pa.BufferReader(summary)).to_pandas()
        for name in names:
            run.record.outputs[name] = listed[name]
    found = _clear_parts(run.folder, {part_name(folder, index) for index in kept for folder in PART_FOLDERS}) or linked
    notes = []
    if found and not same:
        notes.append("the unfinished sweep here had another grid, inputs, chunk size or file layout; starting over")
    if redone:
        notes.append(f"{redone:,} chunk(s) of the unfinished sweep here differ from its record; deciding them again")
    if kept:
        notes.append(f"kept {len(kept):,} of {len(plan.chunks):,} chunks of the unfinished sweep here")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
        run.record.notes.append(note)
    return kept


def _vouched(folder: Path, name: str, outputs: Mapping[str, Any]) -> bytes | None:
    """The bytes of ``folder / name`` if it is a regular file with the size and SHA-256 that
    ``outputs`` lists for it, else None."""
    path, listed = folder / name, outputs.get(name)
    try:
        if listed is None or not stat.S_ISREG(path.lstat().st_mode) or path.lstat().st_size != listed.get("bytes"):
            return None
        data = path.read_bytes()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == listed.get("sha256") else None


def _clear_parts(folder: Path, keep: set[str]) -> bool:
    """Remove every entry of the part folders but ``keep``; True if any was found."""
    found = False
    for name in PART_FOLDERS:
        path = folder / name
        if not path.is_dir():
            continue
        for entry in path.iterdir():
            if f"{name}/{entry.name}" in keep:
                continue
            found = True
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    return found


@dataclass(frozen=True)
class LoadedSweep:
    manifest: dict[str, Any]
    rows: pd.DataFrame = field(repr=False)
    summary: pd.DataFrame = field(repr=False)
    extremes: pd.DataFrame = field(repr=False)


def load_sweep(output_dir: str | Path, *, rows: bool = True) -> LoadedSweep:
    """Read a finished sweep folder back, as :func:`evictlab.analysis.sweep.run_sweep` holds it:
    rows (:data:`~evictlab.analysis.sweep.ROW_COLUMNS`, the settings' parameters joined back)
    and scenario summary (:data:`~evictlab.analysis.sweep.SUMMARY_COLUMNS`). Only the parts the
    record lists are read, each checked against its size and SHA-256 there. ``rows=False``
    skips the row table, which can be large (read parts of ``rows.parquet/`` with
    ``pyarrow.dataset`` instead). An unfinished sweep, a part that does not match the record
    and a folder of an earlier layout are errors naming the file."""
    output = Path(output_dir)
    where = results.record_path(output, KIND)
    record = results.read_record(output, KIND)
    if record is None:
        raise ContractError(f"{where}: no sweep run record")
    if record.status != results.SUCCESS:
        raise ContractError(f"{where}: the sweep did not finish (status {record.status!r}, error {record.error!r})")
    layout = record.parameters.get("chunking", {}).get("layout", 1)
    if layout not in READABLE_LAYOUTS:
        raise ContractError(
            f"{where}: written in sweep layout {layout} by an earlier evictlab, which this version does not"
            " read; run the sweep again into a new folder"
        )
    summary = _read_parts(output, SUMMARY_FILE, record)
    extremes = pd.read_csv(io.BytesIO(_checked(output, EXTREMES_FILE, record)))
    table = pd.DataFrame(columns=list(ROW_COLUMNS))
    if rows:
        table = _read_parts(output, ROWS_FILE, record)
        if layout == LAYOUT:
            table = _tidy(table, output, record)
        table = table[list(ROW_COLUMNS)]
    return LoadedSweep(record.as_dict(), table, summary, extremes)


def _tidy(stored: pd.DataFrame, output: Path, record: results.RunRecord) -> pd.DataFrame:
    """Stored rows with what the folder says once joined back: the settings' parameters, each
    policy's tie-break and the ``retention`` it counts."""
    settings = pd.read_parquet(io.BytesIO(_checked(output, SETTINGS_FILE, record)))
    parameters = settings.set_index("setting").loc[stored["setting"], list(SETTING_COLUMNS)]
    rows = stored.astype(dict.fromkeys(NARROW, np.int64))
    breaks = [record.parameters["tie_breaks"][str(policy)] for policy in rows["policy"].cat.categories]
    codes = np.array([TIE_BREAKS.index(name) for name in breaks], dtype=np.int8)[rows["policy"].cat.codes]
    expected = codes == TIE_BREAKS.index(EXPECTED)
    retained = rows["support_retained"].to_numpy()
    return rows.assign(
        **{name: parameters[name].to_numpy() for name in SETTING_COLUMNS},
        tie_break=pd.Categorical.from_codes(codes, list(TIE_BREAKS)),
        retention=np.where(expected, rows["support_expected"].to_numpy(), retained.astype(np.float64)),
    )


def _read_parts(output: Path, folder: str, record: results.RunRecord) -> pd.DataFrame:
    """The parts of ``folder`` the record lists, in order, as one frame; an error naming a part
    the record does not list or that does not match it."""
    listed = sorted(name for name in record.outputs if name.startswith(f"{folder}/"))
    on_disk = {f"{folder}/{path.name}" for path in (output / folder).iterdir()} if (output / folder).is_dir() else set()
    for name in sorted(on_disk - set(listed)):
        raise ContractError(f"{output / name}: not listed in {MANIFEST_FILE}; refusing to read this sweep")
    tables = [pq.read_table(pa.BufferReader(_checked(output, name, record))) for name in listed]
    return pa.concat_tables(tables).to_pandas()


def _checked(output: Path, name: str, record: results.RunRecord) -> bytes:
    data = _vouched(output, name, record.outputs)
    if data is None:
        raise ContractError(
            f"{output / name}: missing, or not the file {MANIFEST_FILE} lists (size or SHA-256 differ);"
            " refusing to read this sweep"
        )
    return data
