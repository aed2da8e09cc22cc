"""Sweep run folders, written while the sweep runs: Parquet in chunks, summaries kept as it goes.

A sweep is cut into *chunks* (:mod:`evictlab.analysis.sweep_chunks`): the rows of one preset x
policy x a run of consecutive settings, with every case and capacity, about ``chunk_rows``
rows each (at least one setting; a policy that ignores the setting has one chunk of every
setting, stored once). Each chunk is decided in batches (row groups of its files), written
and summarised, then dropped, so memory is bounded by a few batches and chunks' files
whatever the grid. The folder holds

* ``rows.parquet/``: a Parquet dataset, one file per chunk (``part-000000.parquet``, ... in
  row order) with each decision's keys and outputs
  (:data:`~evictlab.analysis.sweep_tables.STORED_ROW_COLUMNS`); ``pandas.read_parquet`` reads
  the folder whole, ``pyarrow.dataset`` lazily;
* ``settings.parquet`` and ``cases.parquet``: each setting's parameters and each case's names,
  written once (see :mod:`evictlab.analysis.sweep_tables`); :func:`load_sweep` joins them
  back into the rows of :func:`evictlab.analysis.sweep.run_sweep`;
* ``scenario_summary.parquet/``: each chunk's scenario summary, one file per chunk, the same
  table as :func:`evictlab.analysis.sweep.scenario_summary` of all rows (the settings'
  parameters joined on read, too);
* ``extreme_settings.csv`` (small): the best and the worst setting per preset x policy x
  scenario, :func:`evictlab.analysis.sweep.extreme_settings` of the whole summary;
* ``sweep.run.json``: the run record (:func:`evictlab.results.run`) with every file's SHA-256.

A chunk is complete once its summary file exists: its rows file is written first, each
atomically. The run record owns refusal and resumption: a finished sweep is never
overwritten; rerun into the folder of an unfinished one (interrupted by Ctrl-C, SIGTERM or a
kill, or failed) with the same grid, presets, inputs and chunk size, a sweep keeps the
complete chunks, reads their summaries back and computes only the others. With anything
different it starts over.

Chunks are independent: they are decided in this process, or by :mod:`evictlab.distributed`
on Dask workers (``--workers``, ``--scheduler``), one task per preset and run of settings (the
chunks of every policy there). A task returns its chunks' files as bytes and they are written
here, on two writer threads (each chunk's rows file before its summary file), so every
placement writes the same bytes.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from .. import results
from ..core.pools import PoolSet
from ..distributed import Placement, dask_client, iter_tasks
from ..errors import ContractError
from ..selection.engine import PreparedCases
from .sweep import (
    ROW_COLUMNS,
    SUMMARY_COLUMNS,
    SweepGrid,
)
from .sweep_chunks import (
    ENCODE_QUEUE,
    Background,
    Chunk,
    PendingChunk,
    SweepPlan,
    SweepTally,
    chunk_files,
    decide_chunks,
    task_groups,
)
from .sweep_tables import (
    cases_table,
    expand_every_setting,
    parquet_bytes,
    settings_table,
    tidy_rows,
    with_setting_columns,
)

KIND = "sweep"
MANIFEST_FILE = f"{KIND}{results.RECORD_SUFFIX}"  # the run record
ROWS_FILE = "rows.parquet"  # a folder of part files
SUMMARY_FILE = "scenario_summary.parquet"  # a folder of part files
SETTINGS_FILE = "settings.parquet"
CASES_FILE = "cases.parquet"
EXTREMES_FILE = "extreme_settings.csv"
OUTPUT_FILES = (ROWS_FILE, SUMMARY_FILE, SETTINGS_FILE, CASES_FILE, EXTREMES_FILE)
#: Chunks waiting for their files to be written at most (each a chunk's rows and summary, as bytes).
WRITE_QUEUE = 8
#: Rows per chunk unless asked otherwise: the whole process peaks at about 0.6 GiB with it
#: (benchmarks/bench_sweep.py, 137 M rows).
CHUNK_ROWS = 1_000_000
_PART = re.compile(r"^part-\d{6}\.parquet$")


def part_name(folder: str, index: int) -> str:
    """``rows.parquet/part-000012.parquet``: chunk ``index``'s file in one of the two datasets."""
    return f"{folder}/part-{index:06d}.parquet"


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


def check_output_dir(output_dir: str | Path) -> None:
    """Refuse a folder that holds a finished sweep (or files evictlab cannot account for)."""
    results.check_output(output_dir, KIND, OUTPUT_FILES)


def run_parameters(grid: SweepGrid, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """The record's parameters before the pools are built (:func:`write_sweep_files` adds them)."""
    return {"grid": grid.as_dict(), "arguments": dict(arguments) if arguments is not None else None}


def open_sweep(output_dir: str | Path, grid: SweepGrid, arguments: Mapping[str, Any] | None = None):
    """:func:`evictlab.results.run` for a sweep into ``output_dir``: refuses a finished sweep,
    continues an unfinished one (:func:`write_sweep_files` decides what it keeps)."""
    return results.run(
        output_dir, KIND, parameters=run_parameters(grid, arguments), outputs=OUTPUT_FILES, existing="resume",
        precheck=lambda: check_output_dir(output_dir),
    )  # fmt: skip


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


def write_sweep(
    output_dir: str | Path,
    pools: Mapping[str, PoolSet | PreparedCases],
    grid: SweepGrid,
    *,
    progress: bool | None = None,
    arguments: Mapping[str, Any] | None = None,
    chunk_rows: int = CHUNK_ROWS,
    placement: Placement | None = None,
) -> WrittenSweep:
    """Run the sweep into ``output_dir`` (see the module docstring).

    Runs inside :func:`evictlab.results.run` (kind ``sweep``): ``sweep.run.json`` records the
    grid, presets, inputs, chunking and ``arguments`` (e.g. the command line's options, as
    given), the status and every file's SHA-256. ``placement`` says where the chunks are
    decided (default: in this process).
    """
    with open_sweep(output_dir, grid, arguments) as run:
        return write_sweep_files(run, pools, grid, progress=progress, chunk_rows=chunk_rows, placement=placement)


def write_sweep_files(
    run: results.Run,
    pools: Mapping[str, PoolSet | PreparedCases],
    grid: SweepGrid,
    *,
    progress: bool | None = None,
    chunk_rows: int = CHUNK_ROWS,
    placement: Placement | None = None,
) -> WrittenSweep:
    """Sweep into an open ``sweep`` run (:func:`open_sweep`), keeping the complete chunks of
    an unfinished predecessor with the same plan."""
    placement = placement or Placement(workers=0)
    plan = SweepPlan.build(pools, grid, chunk_rows)
    parameters = run.record.parameters
    parameters.update(
        presets=[str(name) for name in pools], inputs=input_record(pools), chunking=plan.record(),
        tie_breaks=dict(plan.tie_breaks),
    )  # fmt: skip
    datasets = [item.dataset.record() for item in pools.values() if isinstance(item, PoolSet)]
    run.record.dataset = datasets[0] if datasets else None
    run.save()  # the plan on disk before any chunk, so a killed run can be resumed
    done = _complete_chunks(run, plan)
    tally = SweepTally(grid)
    for chunk in plan.chunks:
        if chunk.index in done:
            for folder in (ROWS_FILE, SUMMARY_FILE):
                run.add_output(part_name(folder, chunk.index))
            tally.add(pq.read_table(run.path(part_name(SUMMARY_FILE, chunk.index))), chunk.rows)
    tasks = task_groups([chunk for chunk in plan.chunks if chunk.index not in done])
    pending = sum((chunk.rows for task in tasks for chunk in task), 0)
    show = sys.stderr.isatty() if progress is None else progress
    with (
        tqdm(total=plan.rows, initial=plan.rows - pending, desc="sweep", unit=" decisions", unit_scale=True,
             leave=False, disable=not show) as bar,
        dask_client(placement) as client,
        # Files are written (and synced) on threads of their own while the next task runs, two
        # chunks at a time; a chunk's rows file is on disk before its summary file marks it complete.
        Background("sweep-write", WRITE_QUEUE, raising=True, threads=2) as writer,
        # In-process, one encoding thread serves every task (it starts only when used).
        Background("sweep-encode", ENCODE_QUEUE) as encoder,
    ):  # fmt: skip
        settings = settings_table(grid.settings_between(0, grid.size))
        writer.submit(run.write_bytes, SETTINGS_FILE, parquet_bytes(settings))
        writer.submit(run.write_bytes, CASES_FILE, parquet_bytes(cases_table(plan.categories, plan.prepared)))
        # A chunk is counted as soon as it is decided and written once it is encoded (the
        # writer waits for that), so the next task and the totals go on meanwhile.
        for item in _decided_chunks(plan, tasks, client, encoder):
            writer.submit(_write_chunk, run, item)
            tally.add(item.summary_table, item.chunk.rows)
            bar.update(item.chunk.rows)
        # The tables of the totals while the last files are written.
        extremes, defaults = tally.extreme_settings(), tally.default_summary()
        extremes_csv = extremes.to_csv(index=False, lineterminator="\n").encode("utf-8")
        writer.drain()
    run.write_bytes(EXTREMES_FILE, extremes_csv)
    run.record.summary = {
        "rows": tally.rows, "scenario_summary_rows": tally.summary_rows, "chunks": len(plan.chunks),
        "reused_chunks": len(done), "placement": placement.describe(),
    }  # fmt: skip
    return WrittenSweep(
        grid, tuple(plan.prepared), tally.rows, tally.summary_rows, len(plan.chunks), len(done), extremes, defaults
    )


def _decided_chunks(
    plan: SweepPlan, tasks: Sequence[tuple[Chunk, ...]], client: Any, encoder: Background
) -> Iterator[PendingChunk]:
    """Every task's chunks, decided in this process on ``encoder`` (``client`` None) or on
    Dask, whose tasks return their files finished."""
    if client is None:
        for task in tasks:
            yield from decide_chunks(plan, task, encoder)
        return
    for task, task_files in zip(tasks, iter_tasks(client, partial(chunk_files, plan), tasks)):
        for chunk, files in zip(task, task_files):
            yield PendingChunk(chunk, _settled(files.rows), _settled(files.summary), files.summary_table)


def _settled(value: bytes) -> Future[bytes]:
    future: Future[bytes] = Future()
    future.set_result(value)
    return future


def _write_chunk(run: results.Run, item: PendingChunk) -> None:
    """A chunk's two files once encoded, rows first: its summary file marks it complete."""
    files = item.files()
    run.write_bytes(part_name(ROWS_FILE, item.chunk.index), files.rows)
    run.write_bytes(part_name(SUMMARY_FILE, item.chunk.index), files.summary)


def _complete_chunks(run: results.Run, plan: SweepPlan) -> set[int]:
    """Chunks an unfinished predecessor completed under the same plan; other part files go."""
    for folder in (ROWS_FILE, SUMMARY_FILE):
        if run.path(folder).is_file():  # a single file, as evictlab wrote before sweeps were chunked
            run.path(folder).unlink()
    parts = {folder: _parts(run.path(folder)) for folder in (ROWS_FILE, SUMMARY_FILE)}
    previous = run.previous
    same = previous is not None and all(
        results.json_document(previous.parameters.get(name)) == results.json_document(run.record.parameters[name])
        for name in ("grid", "presets", "inputs", "chunking", "tie_breaks")
    )
    done = parts[ROWS_FILE] & parts[SUMMARY_FILE] if same else set()
    stale = {folder: found - done for folder, found in parts.items()}
    if any(stale.values()):
        if not same:
            note = (
                "the unfinished sweep here had another grid, inputs, chunk size or file layout"
                " (an earlier evictlab's); starting over"
            )
            print(f"note: {note}", file=sys.stderr)
            run.record.notes.append(note)
        for folder, indices in stale.items():
            for index in indices:
                run.path(part_name(folder, index)).unlink()
    if done:
        note = f"kept {len(done):,} of {len(plan.chunks):,} chunks of the unfinished sweep here"
        print(f"note: {note}", file=sys.stderr)
        run.record.notes.append(note)
    return done


def _parts(folder: Path) -> set[int]:
    if not folder.is_dir():
        return set()
    return {int(path.name[5:11]) for path in folder.iterdir() if _PART.match(path.name)}


@dataclass(frozen=True)
class LoadedSweep:
    manifest: dict[str, Any]
    rows: pd.DataFrame = field(repr=False)
    summary: pd.DataFrame = field(repr=False)
    extremes: pd.DataFrame = field(repr=False)


def load_sweep(output_dir: str | Path, *, rows: bool = True) -> LoadedSweep:
    """Read a finished sweep folder back, as :func:`evictlab.analysis.sweep.run_sweep` holds it:
    rows (:data:`~evictlab.analysis.sweep.ROW_COLUMNS`) and scenario summary
    (:data:`~evictlab.analysis.sweep.SUMMARY_COLUMNS`) with the settings' parameters and the
    cases' names joined in. ``rows=False`` skips the row table, which can be large: read parts
    of ``rows.parquet/`` with ``pyarrow.dataset`` and join them with :func:`tidy_rows` (a filter
    on ``setting`` must keep ``setting == -1``, the rows of a policy that ignores the setting,
    stored once for every setting). An
    unfinished sweep is an error naming its status."""
    output = Path(output_dir)
    record = results.read_record(output, KIND)
    if record is None:
        raise ContractError(f"{results.record_path(output, KIND)}: no sweep run record")
    if record.status != results.SUCCESS:
        raise ContractError(
            f"{results.record_path(output, KIND)}: the sweep did not finish (status {record.status!r},"
            f" error {record.error!r})"
        )
    summary, extremes = pd.read_parquet(output / SUMMARY_FILE), pd.read_csv(output / EXTREMES_FILE)
    if record.parameters.get("chunking", {}).get("layout", 1) < 2:  # rows written whole, as before
        table = pd.read_parquet(output / ROWS_FILE) if rows else pd.DataFrame(columns=list(ROW_COLUMNS))
        return LoadedSweep(record.as_dict(), table, summary, extremes)
    for name in (SETTINGS_FILE, CASES_FILE):
        if not (output / name).is_file():
            raise ContractError(f"{output / name}: missing; the sweep's rows name their settings and cases by index")
    settings = pd.read_parquet(output / SETTINGS_FILE)
    table = pd.DataFrame(columns=list(ROW_COLUMNS))
    if rows:
        stored, cases = pd.read_parquet(output / ROWS_FILE), pd.read_parquet(output / CASES_FILE)
        table = tidy_rows(stored, cases, settings, record.parameters["tie_breaks"])
    summary = with_setting_columns(expand_every_setting(summary, len(settings)), settings)[list(SUMMARY_COLUMNS)]
    return LoadedSweep(record.as_dict(), table, summary, extremes)
