"""Sweep run folders, written while the sweep runs: Parquet in chunks, summaries kept as it goes.

A sweep is cut into *chunks*: the rows of one preset x policy x a run of consecutive
settings, with every case and capacity, about ``chunk_rows`` rows each (at least one
setting). Each chunk is decided, written and summarised, then dropped, so memory is bounded
by the chunk size whatever the grid. The folder holds

* ``rows.parquet/``: a Parquet dataset, one file per chunk (``part-000000.parquet``, ... in
  row order) with the columns :data:`~evictlab.analysis.sweep.ROW_COLUMNS`; ``pandas.read_parquet``
  reads the folder whole, ``pyarrow.dataset`` lazily;
* ``scenario_summary.parquet/``: each chunk's scenario summary
  (:data:`~evictlab.analysis.sweep.SUMMARY_COLUMNS`), one file per chunk, the same table as
  :func:`evictlab.analysis.sweep.scenario_summary` of all rows;
* ``extreme_settings.csv`` (small): the best and the worst setting per preset x policy x
  scenario, :func:`evictlab.analysis.sweep.extreme_settings` of the whole summary;
* ``sweep.run.json``: the run record (:func:`evictlab.results.run`) with every file's SHA-256.

A chunk is complete once its summary file exists: its rows file is written first, each
atomically. The run record owns refusal and resumption: a finished sweep is never
overwritten; rerun into the folder of an unfinished one (interrupted by Ctrl-C, SIGTERM or a
kill, or failed) with the same grid, presets, inputs and chunk size, a sweep keeps the
complete chunks, reads their summaries back and computes only the others. With anything
different it starts over.

Chunks are independent: :mod:`evictlab.distributed` runs them in this process or on Dask
workers (``--workers``, ``--scheduler``), one task per preset and run of settings (the chunks
of every policy there, which share the settings). A task returns its chunks' files as bytes
and they are written here, so every placement writes the same bytes.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from .. import results
from ..core.pools import PoolSet, check_capacities
from ..distributed import Placement, dask_client, iter_tasks
from ..errors import ContractError
from ..policies import PolicyParams, resolve_policy
from ..selection.decisions import DecisionRows, decide_batches, settings_frame
from ..selection.engine import PreparedCases
from .sweep import (
    ROW_COLUMNS,
    SETTING_COLUMNS,
    SUMMARY_COLUMNS,
    SweepGrid,
    default_settings,
    prepared_cases,
)

KIND = "sweep"
MANIFEST_FILE = f"{KIND}{results.RECORD_SUFFIX}"  # the run record
ROWS_FILE = "rows.parquet"  # a folder of part files
SUMMARY_FILE = "scenario_summary.parquet"  # a folder of part files
EXTREMES_FILE = "extreme_settings.csv"
OUTPUT_FILES = (ROWS_FILE, SUMMARY_FILE, EXTREMES_FILE)
#: Rows per chunk unless asked otherwise: the whole process peaks at about 0.4 GiB with it
#: (benchmarks/bench_sweep.py, 137 M rows).
CHUNK_ROWS = 1_000_000
EXTREME_KEYS = ("preset", "policy", "scenario")
EXTREME_COLUMNS = (
    "preset", "policy", "scenario", "extreme", "setting", "support_retained", "cases", "tied", "settings",
    *SETTING_COLUMNS,
)  # fmt: skip
#: Columns :func:`parquet_bytes` writes without a dictionary.
PLAIN_COLUMNS = frozenset(("setting", *SETTING_COLUMNS, "capacity", "support_margin"))
_PART = re.compile(r"^part-\d{6}\.parquet$")


def part_name(folder: str, index: int) -> str:
    """``rows.parquet/part-000012.parquet``: chunk ``index``'s file in one of the two datasets."""
    return f"{folder}/part-{index:06d}.parquet"


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Chunk:
    """Rows of ``preset`` x ``policy`` x settings ``start`` to ``stop - 1`` (every case and capacity)."""

    index: int
    preset: str
    policy: str
    start: int
    stop: int
    rows: int


@dataclass(frozen=True)
class SweepPlan:
    """Everything a chunk task needs: the prepared pools of every preset, the grid, the chunks."""

    prepared: Mapping[str, PreparedCases] = field(repr=False)
    grid: SweepGrid = field(repr=False)
    chunk_rows: int
    tie_breaks: Mapping[str, str]
    chunks: tuple[Chunk, ...] = field(repr=False)

    @classmethod
    def build(cls, pools: Mapping[str, PoolSet | PreparedCases], grid: SweepGrid, chunk_rows: int) -> SweepPlan:
        if not pools:
            raise ContractError("empty grid: no presets (pools) to sweep")
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
            raise ContractError(f"chunk rows must be an integer >= 1, got {chunk_rows!r}")
        prepared = {str(name): prepared_cases(item) for name, item in pools.items()}
        for name, cases in prepared.items():
            check_capacities(grid.capacities, int(cases.sizes.min()), f"preset {name}")
        chunks: list[Chunk] = []
        for preset, cases in prepared.items():
            per_setting = len(cases) * len(grid.capacities)
            step = max(1, chunk_rows // per_setting)
            for policy in grid.policies:
                for start in range(0, grid.size, step):
                    stop = min(start + step, grid.size)
                    chunks.append(Chunk(len(chunks), preset, policy, start, stop, (stop - start) * per_setting))
        tie_breaks = {name: resolve_policy(name).default_tie_break for name in grid.policies}
        return cls(prepared, grid, chunk_rows, tie_breaks, tuple(chunks))

    @property
    def rows(self) -> int:
        return sum(chunk.rows for chunk in self.chunks)

    def record(self) -> dict[str, Any]:
        return {"chunk_rows": self.chunk_rows, "chunks": len(self.chunks), "rows": self.rows}


@dataclass(frozen=True)
class ChunkFiles:
    """A chunk's two Parquet files, as bytes."""

    rows: bytes
    summary: bytes


def task_groups(chunks: Sequence[Chunk]) -> list[tuple[Chunk, ...]]:
    """``chunks`` grouped into tasks: the chunks of every policy over one preset and run of
    settings, which share the settings (built once per task)."""
    groups: dict[tuple[str, int], list[Chunk]] = {}
    for chunk in chunks:
        groups.setdefault((chunk.preset, chunk.start), []).append(chunk)
    return [tuple(group) for group in groups.values()]


def chunk_files(plan: SweepPlan, chunks: Sequence[Chunk]) -> list[ChunkFiles]:
    """Decide chunks of one preset and run of settings and serialise each one's rows and scenario
    summary (a task: pure, picklable).

    A chunk's rows are encoded on a second thread while this one decides and summarises the
    next chunk (pyarrow releases the GIL while it encodes and compresses); one chunk at a time
    is encoded, so memory holds two chunks' rows at most."""
    settings = plan.grid.settings_between(chunks[0].start, chunks[0].stop)
    cases, capacities = len(plan.prepared[chunks[0].preset]), len(plan.grid.capacities)
    rows: list[Future[bytes]] = []
    summaries = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweep-encode") as encoder:
        for chunk in chunks:
            columns, categories = _decide_chunk(plan, chunk, settings)
            summaries.append(_table_bytes(chunk_summary(columns, cases, capacities), categories, SUMMARY_COLUMNS))
            if rows:
                rows[-1].result()
            rows.append(encoder.submit(_table_bytes, columns, categories, ROW_COLUMNS))
    return [ChunkFiles(rows=data.result(), summary=summary) for data, summary in zip(rows, summaries)]


def _decide_chunk(
    plan: SweepPlan, chunk: Chunk, settings: Sequence[PolicyParams]
) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    """One chunk's rows as coded columns and their categories (:meth:`DecisionRows.coded`)."""
    grid = plan.grid
    decided = DecisionRows(
        plan.prepared, grid.policies, (0,), settings, grid.capacities,
        tie_breaks=plan.tie_breaks, first_setting=chunk.start, size=chunk.rows,
    )  # fmt: skip
    for first, outputs, _ in decide_batches(plan.prepared[chunk.preset], chunk.policy, 0, settings, grid.capacities):
        decided.add(chunk.preset, chunk.policy, 0, first, outputs)
    return decided.coded()


def _table_bytes(columns: Mapping[str, np.ndarray], categories: Mapping[str, list[str]], names: Sequence[str]) -> bytes:
    return parquet_bytes(arrow_table(columns, categories, names))


def arrow_table(
    columns: Mapping[str, np.ndarray], categories: Mapping[str, list[str]], names: Sequence[str]
) -> pa.Table:
    """The ``names`` columns as an Arrow table; category codes become dictionary columns."""
    arrays = [
        pa.DictionaryArray.from_arrays(pa.array(columns[name], pa.int32()), pa.array(categories[name], pa.string()))
        if name in categories
        else pa.array(columns[name])
        for name in names
    ]
    return pa.Table.from_arrays(arrays, names=list(names))


def parquet_bytes(table: pa.Table) -> bytes:
    """``table`` as a Parquet file: LZ4, min/max statistics only for ``setting`` (a reader can
    skip files by setting with them; statistics of every column would triple the writing time).

    Columns with few distinct values in a chunk are dictionary-encoded; the others
    (:data:`PLAIN_COLUMNS`: constant over long runs of rows, which LZ4 compresses as well,
    or nearly all distinct) are written plain, which is cheaper (the hybrid-v1 dense-grid
    chunk of 695,385 rows: 52 instead of 73 ms CPU, 7 % larger). Written to an Arrow buffer,
    not a Python file object, so that encoding on another thread never waits for the GIL."""
    buffer = pa.BufferOutputStream()
    dictionary = [name for name in table.column_names if name not in PLAIN_COLUMNS]
    pq.write_table(table, buffer, compression="lz4", use_dictionary=dictionary, write_statistics=["setting"])
    return buffer.getvalue().to_pybytes()


def chunk_summary(columns: Mapping[str, np.ndarray], cases: int, capacities: int) -> dict[str, np.ndarray]:
    """:func:`evictlab.analysis.sweep.scenario_summary` of one chunk's coded rows, with numpy.

    The rows are settings x cases x capacities of one preset and policy; groups are (source,
    scenario) in case order. Sums run over the cases in order with the compensated (Kahan)
    summation pandas' group sums use, so the values are those of the pandas summary, bit for bit.
    """
    per_setting = cases * capacities
    settings = len(columns["setting"]) // per_setting
    first = slice(0, per_setting, capacities)  # the first setting's row of each case
    keys = list(zip(columns["source"][first].tolist(), columns["scenario"][first].tolist()))
    groups = list(dict.fromkeys(keys))
    group_of = np.array([groups.index(key) for key in keys])
    shape = (settings, len(groups), capacities)

    def total(name: str) -> np.ndarray:
        # Case-major copies, so that every step below reads and writes contiguous blocks.
        values = np.ascontiguousarray(columns[name].reshape(settings, cases, capacities).transpose(1, 0, 2))
        block = (len(groups), settings, capacities)
        if values.dtype == bool or values.dtype.kind == "i":
            counts = np.zeros(block, dtype=np.int64)
            for case, group in enumerate(group_of):
                counts[group] += values[case]
            return counts.transpose(1, 0, 2)
        out, compensation = np.zeros(block), np.zeros(block)
        for case, group in enumerate(group_of):
            term = values[case] - compensation[group]
            running = out[group] + term
            compensation[group] = (running - out[group]) - term
            out[group] = running
        return out.transpose(1, 0, 2)

    summary = {name: total(name).reshape(-1) for name in ("support_retained", "support_expected", "retention")}
    summary["ties"] = total("support_tied").reshape(-1)
    summary["near_ties"] = total("support_near_tie").reshape(-1)
    summary["cases"] = np.broadcast_to(np.bincount(group_of)[None, :, None], shape).astype(np.int64).reshape(-1)
    summary["support_retained_rate"] = summary["support_retained"] / summary["cases"]
    rows = np.arange(settings)[:, None, None] * per_setting + np.zeros(shape, dtype=np.int64)
    rows += (np.array([keys.index(group) for group in groups]) * capacities)[None, :, None]
    rows += np.arange(capacities)[None, None, :]
    for name in ("preset", "policy", "setting", *SETTING_COLUMNS, "source", "scenario", "capacity"):
        summary[name] = columns[name][rows.reshape(-1)]
    return summary


# --------------------------------------------------------------------------- running totals


class SweepTally:
    """What the command reports, kept chunk by chunk from the summaries: the best and the
    worst setting per preset x policy x scenario, and the summary rows of DeerMem's default
    settings. Chunks may come in any order."""

    def __init__(self, grid: SweepGrid) -> None:
        self.grid = grid
        self.defaults = sorted(default_settings(grid))
        self.default_rows: list[pd.DataFrame] = []
        self.extremes: dict[tuple[str, ...], dict[str, int]] = {}
        self.categories: dict[str, list[str]] = {}
        self.rows = 0
        self.summary_rows = 0

    def add(self, summary: pa.Table, rows: int) -> None:
        """Count one chunk: its scenario summary (one preset and policy, settings x groups x
        capacities in row order, as :func:`chunk_summary` makes it) and its number of rows."""
        self.rows += rows
        self.summary_rows += len(summary)
        codes = {}
        for name in EXTREME_KEYS:
            column = summary.column(name).combine_chunks()
            self.categories.setdefault(name, column.dictionary.to_pylist())
            codes[name] = column.indices.to_numpy()
        settings = summary.column("setting").to_numpy()
        if self.defaults and np.isin(settings, self.defaults).any():
            chosen = pc.is_in(summary.column("setting"), pa.array(self.defaults, pa.int64()))
            self.default_rows.append(summary.filter(chosen).to_pandas())
        count = len(np.unique(settings))
        per_setting = len(settings) // count
        retained = summary.column("support_retained").to_numpy().reshape(count, per_setting)
        cases = summary.column("cases").to_numpy()[:per_setting]
        scenarios = codes["scenario"][:per_setting]
        first = settings[::per_setting]
        head = tuple(self.categories[name][codes[name][0]] for name in EXTREME_KEYS[:2])
        for scenario in dict.fromkeys(scenarios.tolist()):
            members = scenarios == scenario
            totals = retained[:, members].sum(axis=1)
            key = (*head, self.categories["scenario"][scenario])
            scenario_cases = int(cases[members].sum())
            for extreme, target in (("best", totals.max()), ("worst", totals.min())):
                hits = np.flatnonzero(totals == target)
                self._merge((*key, extreme), int(target), int(first[hits[0]]), len(hits), scenario_cases, count)

    def _merge(self, key: tuple[str, ...], retained: int, setting: int, tied: int, cases: int, settings: int) -> None:
        known = self.extremes.get(key)
        sign = 1 if key[-1] == "best" else -1
        if known is None or sign * retained > sign * known["support_retained"]:
            before = known["settings"] if known else 0
            self.extremes[key] = {"setting": setting, "support_retained": retained, "cases": cases, "tied": tied,
                                  "settings": before + settings}  # fmt: skip
            return
        known["settings"] += settings
        if retained == known["support_retained"]:
            known["tied"] += tied
            known["setting"] = min(known["setting"], setting)

    def extreme_settings(self) -> pd.DataFrame:
        """:func:`evictlab.analysis.sweep.extreme_settings` of all the summaries added."""
        position = {name: {value: at for at, value in enumerate(values)} for name, values in self.categories.items()}
        keys = sorted(
            self.extremes,
            key=lambda key: (*(position[name][value] for name, value in zip(EXTREME_KEYS, key)), key[3] != "best"),
        )
        frame = pd.DataFrame.from_records(
            [{**dict(zip((*EXTREME_KEYS, "extreme"), key)), **self.extremes[key]} for key in keys],
            columns=list(EXTREME_COLUMNS[:9]),
        )
        for name in EXTREME_COLUMNS[4:9]:
            frame[name] = frame[name].astype(np.int64)
        chosen = sorted(set(frame["setting"]))
        settings = settings_frame([self.grid.settings_between(index, index + 1)[0] for index in chosen])
        settings["setting"] = np.array(chosen, dtype=np.int64)
        return frame.merge(settings, on="setting", how="left", validate="many_to_one")

    def default_summary(self) -> pd.DataFrame:
        """The scenario-summary rows of DeerMem's default settings (empty when the grid has none)."""
        if not self.default_rows:
            return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
        return pd.concat(self.default_rows, ignore_index=True)


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
    parameters.update(presets=[str(name) for name in pools], inputs=input_record(pools), chunking=plan.record())
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
    ):  # fmt: skip
        for task, task_files in zip(tasks, iter_tasks(client, partial(chunk_files, plan), tasks)):
            for chunk, files in zip(task, task_files):
                run.write_bytes(part_name(ROWS_FILE, chunk.index), files.rows)
                run.write_bytes(part_name(SUMMARY_FILE, chunk.index), files.summary)
                tally.add(pq.read_table(pa.BufferReader(files.summary)), chunk.rows)
                bar.update(chunk.rows)
    extremes = tally.extreme_settings()
    run.write_bytes(EXTREMES_FILE, extremes.to_csv(index=False, lineterminator="\n").encode("utf-8"))
    run.record.summary = {
        "rows": tally.rows, "scenario_summary_rows": tally.summary_rows, "chunks": len(plan.chunks),
        "reused_chunks": len(done), "placement": placement.describe(),
    }  # fmt: skip
    return WrittenSweep(
        grid, tuple(plan.prepared), tally.rows, tally.summary_rows, len(plan.chunks), len(done), extremes,
        tally.default_summary(),
    )


def _complete_chunks(run: results.Run, plan: SweepPlan) -> set[int]:
    """Chunks an unfinished predecessor completed under the same plan; other part files go."""
    for folder in (ROWS_FILE, SUMMARY_FILE):
        if run.path(folder).is_file():  # a single file, as evictlab wrote before sweeps were chunked
            run.path(folder).unlink()
    parts = {folder: _parts(run.path(folder)) for folder in (ROWS_FILE, SUMMARY_FILE)}
    previous = run.previous
    same = previous is not None and all(
        results.json_document(previous.parameters.get(name)) == results.json_document(run.record.parameters[name])
        for name in ("grid", "presets", "inputs", "chunking")
    )
    done = parts[ROWS_FILE] & parts[SUMMARY_FILE] if same else set()
    stale = {folder: found - done for folder, found in parts.items()}
    if any(stale.values()):
        if not same:
            note = "the unfinished sweep here had another grid, inputs or chunk size; starting over"
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
    """Read a finished sweep folder back (``rows=False`` skips the row table, which can be
    large: read parts of it with ``pyarrow.dataset``); an unfinished one is an error naming its status."""
    output = Path(output_dir)
    record = results.read_record(output, KIND)
    if record is None:
        raise ContractError(f"{results.record_path(output, KIND)}: no sweep run record")
    if record.status != results.SUCCESS:
        raise ContractError(
            f"{results.record_path(output, KIND)}: the sweep did not finish (status {record.status!r},"
            f" error {record.error!r})"
        )
    return LoadedSweep(
        record.as_dict(),
        pd.read_parquet(output / ROWS_FILE) if rows else pd.DataFrame(columns=list(ROW_COLUMNS)),
        pd.read_parquet(output / SUMMARY_FILE),
        pd.read_csv(output / EXTREMES_FILE),
    )

