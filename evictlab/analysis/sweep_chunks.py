"""A sweep's chunks: the plan, the deciding and encoding of each chunk, and the running totals.

:class:`SweepPlan` cuts a sweep into chunks (one preset x policy x a run of settings; one chunk
of every setting for a policy that ignores the setting). :func:`decide_chunks` decides a
task's chunks batch by batch and hands each batch's rows and summary to an encoding thread
(:class:`Background`) as row groups of the chunk's two Parquet files; :func:`chunk_files` is
the same as a task for :mod:`evictlab.distributed` (pure, picklable, files as bytes).
:class:`SweepTally` keeps what the command reports from the chunks' summaries.
:mod:`evictlab.analysis.sweep_output` writes the files into the run folder.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..core.pools import PoolSet, check_capacities
from ..errors import ContractError, EvictlabError
from ..policies import resolve_policy
from ..selection.decisions import decide_batches, settings_frame
from ..selection.engine import ENGINE_POLICIES, OUTPUTS, SETTING_FREE_POLICIES, PreparedCases
from ..selection.engine_settings import SettingColumns
from .sweep import SETTING_COLUMNS, SUMMARY_COLUMNS, SweepGrid, default_settings, prepared_cases
from .sweep_tables import (
    EVERY_SETTING,
    SweepCategories,
    parquet_writer,
    rows_table,
    summary_table,
    with_setting_columns,
)

#: The version of the part files' columns, in the plan a resumed sweep must share: 2 since
#: the settings' parameters and the cases' names moved out of the rows, 3 since a policy that
#: ignores the setting is stored once.
ROWS_LAYOUT = 3
#: Rows a chunk is decided and encoded at a time, each batch a row group of its file.
ROW_GROUP_ROWS = 1 << 17
#: Encoding tasks waiting at most: about 16 batches, a batch's rows and its summary (and two
#: closes a chunk); a batch holds the outputs of about ROW_GROUP_ROWS rows, about 4.5 MiB
#: (more when one setting's rows, cases x capacities, are more than that).
ENCODE_QUEUE = 32
EXTREME_KEYS = ("preset", "policy", "scenario")
EXTREME_COLUMNS = (
    "preset", "policy", "scenario", "extreme", "setting", "support_retained", "cases", "tied", "settings",
    *SETTING_COLUMNS,
)  # fmt: skip

# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Chunk:
    """Rows of ``preset`` x ``policy`` x settings ``start`` to ``stop - 1`` (every case and
    capacity): ``rows`` decisions. A policy that ignores the setting has one chunk of every
    setting, whose files hold one setting's rows, under ``setting`` :data:`EVERY_SETTING`."""

    index: int
    preset: str
    policy: str
    start: int
    stop: int
    rows: int

    @property
    def every_setting(self) -> bool:
        return self.policy in SETTING_FREE_POLICIES


@dataclass(frozen=True)
class SweepPlan:
    """Everything a chunk task needs: the prepared pools of every preset, the grid, the chunks."""

    prepared: Mapping[str, PreparedCases] = field(repr=False)
    grid: SweepGrid = field(repr=False)
    chunk_rows: int
    tie_breaks: Mapping[str, str]
    chunks: tuple[Chunk, ...] = field(repr=False)
    categories: SweepCategories = field(repr=False)

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
                # A policy that ignores the setting is decided and stored once, for every setting.
                runs = [0, grid.size] if policy in SETTING_FREE_POLICIES else [*range(0, grid.size, step), grid.size]
                for start, stop in itertools.pairwise(runs):
                    chunks.append(Chunk(len(chunks), preset, policy, start, stop, (stop - start) * per_setting))
        tie_breaks = {name: resolve_policy(name).default_tie_break for name in grid.policies}
        categories = SweepCategories.of(prepared, grid.policies)
        return cls(prepared, grid, chunk_rows, tie_breaks, tuple(chunks), categories)

    @property
    def rows(self) -> int:
        return sum(chunk.rows for chunk in self.chunks)

    def record(self) -> dict[str, Any]:
        return {
            "chunk_rows": self.chunk_rows, "chunks": len(self.chunks), "rows": self.rows, "layout": ROWS_LAYOUT,
            "row_group_rows": ROW_GROUP_ROWS,
        }  # fmt: skip


@dataclass(frozen=True)
class ChunkFiles:
    """A chunk's two Parquet files, as bytes, and its scenario summary as a table (what the
    summary file holds, for the running totals without reading the file back)."""

    rows: bytes
    summary: bytes
    summary_table: pa.Table = field(repr=False)


def task_groups(chunks: Sequence[Chunk]) -> list[tuple[Chunk, ...]]:
    """``chunks`` grouped into tasks: the chunks of every policy over one preset and run of
    settings, which share the settings (built once per task)."""
    groups: dict[tuple[str, int], list[Chunk]] = {}
    for chunk in chunks:
        groups.setdefault((chunk.preset, chunk.start), []).append(chunk)
    return [tuple(group) for group in groups.values()]


def chunk_files(plan: SweepPlan, chunks: Sequence[Chunk]) -> list[ChunkFiles]:
    """Decide chunks of one preset and run of settings and serialise each one's rows and scenario
    summary (a task: pure, picklable; see :func:`decide_chunks`)."""
    with Background("sweep-encode", ENCODE_QUEUE) as encoder:
        return [item.files() for item in decide_chunks(plan, chunks, encoder)]


@dataclass(frozen=True)
class PendingChunk:
    """A decided chunk: its summary table, and its two files as they are being encoded."""

    chunk: Chunk
    rows: Future[bytes]
    summary: Future[bytes]
    summary_table: pa.Table = field(repr=False)

    def files(self) -> ChunkFiles:
        """The files once encoded (waits for them); an error naming the chunk if one failed."""
        return ChunkFiles(_encoded(self.chunk, self.rows), _encoded(self.chunk, self.summary), self.summary_table)


def decide_chunks(plan: SweepPlan, chunks: Sequence[Chunk], encoder: Background) -> list[PendingChunk]:
    """Decide chunks of one preset and run of settings; their files are encoded on ``encoder``.

    A chunk is decided in batches of about :data:`ROW_GROUP_ROWS` rows. Each batch's rows and
    its summary are encoded, as a row group of each of the chunk's files, on the encoding
    thread while this one summarises the batch and decides the next (pyarrow releases the GIL
    while it encodes and compresses); at most :data:`ENCODE_QUEUE` batches wait for it, which
    bounds memory. A row group that fails to encode fails its chunk, with an error naming it."""
    if encoder.threads != 1:
        raise ValueError("a chunk's files are encoded in order, on one thread")
    capacities = plan.grid.capacities
    settings: dict[tuple[int, int], SettingColumns] = {}  # each run of settings built once
    decided = []
    for chunk in chunks:
        head = (plan.categories, chunk.preset, chunk.policy)
        run = (chunk.start, chunk.start + 1 if chunk.every_setting else chunk.stop)
        if run not in settings:
            settings[run] = plan.grid.settings_between(*run)
        rows, summary_file, summaries, stored = _StreamedFile(encoder), _StreamedFile(encoder), [], 0
        for first, outputs in decided_batches(plan, chunk, settings[run]):
            start = EVERY_SETTING if chunk.every_setting else chunk.start + first
            summaries.append(summary_table(*head, plan.tie_breaks[chunk.policy], start, capacities, outputs))
            rows.add(rows_table, *head, start, capacities, outputs)
            summary_file.add(_as_it_is, summaries[-1])
            stored += outputs["support_retained"].size
        summary = pa.concat_tables(summaries)
        decided.append(PendingChunk(chunk, rows.close(stored), summary_file.close(summary.num_rows), summary))
    return decided


def _encoded(chunk: Chunk, data: Future[bytes]) -> bytes:
    """A chunk's file once written; an error naming the chunk if a row group failed
    (an :class:`OSError` or an evictlab error as it is)."""
    try:
        return data.result()
    except (EvictlabError, OSError):
        raise
    except Exception as error:  # e.g. pyarrow's errors, MemoryError: report the chunk, not a traceback
        where = f"{chunk.preset}, {chunk.policy}, settings {chunk.start}-{chunk.stop - 1}"
        raise EvictlabError(f"chunk {chunk.index} ({where}): writing its tables failed: {error!r}") from error


def decided_batches(plan: SweepPlan, chunk: Chunk, settings: SettingColumns):
    """Yield (index of the first setting in ``settings``, outputs shaped (settings, cases,
    capacities)) for runs of about :data:`ROW_GROUP_ROWS` rows of one chunk, in setting order:
    the engine decides a run in one call, the scalar selector one setting at a time."""
    cases, capacities = plan.prepared[chunk.preset], plan.grid.capacities
    step = max(1, ROW_GROUP_ROWS // (len(cases) * len(capacities)))
    if chunk.policy in ENGINE_POLICIES:
        for first in range(0, len(settings), step):
            yield first, cases.select(chunk.policy, settings[first : first + step], capacities).outputs()
        return
    gathered: list[dict[str, np.ndarray]] = []
    for index, outputs, _ in decide_batches(cases, chunk.policy, 0, settings, capacities):
        gathered.append(outputs)
        if len(gathered) == step or index == len(settings) - 1:
            joined = {name: np.concatenate([part[name] for part in gathered]) for name in OUTPUTS}
            yield index + 1 - len(gathered), joined
            gathered = []


class Background:
    """Background work on ``threads`` threads (one: its tasks run one at a time, in the order
    given); at most ``depth`` tasks wait (:meth:`submit` waits for the oldest to end first).

    The encoding thread of :func:`decide_chunks` (one thread: a :class:`_StreamedFile`'s row
    groups and its close must run in order; a failed row group is raised by its file's close),
    shared by every task of an in-process sweep, and the file writers of
    :func:`evictlab.analysis.sweep_output.write_sweep_files` (``raising``: a failed write is
    raised by the next :meth:`submit` or by :meth:`drain`)."""

    def __init__(self, name: str, depth: int, *, raising: bool = False, threads: int = 1) -> None:
        self.threads = threads
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self.depth = depth
        self.raising = raising
        self.pending: deque[Future[Any]] = deque()

    def __enter__(self) -> Background:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        # After an error (or Ctrl-C) here the queued work is of no use: drop it.
        self.pool.shutdown(wait=True, cancel_futures=kind is not None)

    def submit(self, function: Any, *arguments: Any) -> Future[Any]:
        while len(self.pending) >= self.depth:
            self._wait(self.pending.popleft())
        future = self.pool.submit(function, *arguments)
        self.pending.append(future)
        return future

    def drain(self) -> None:
        """Wait for every task submitted (raising the first error, if ``raising``)."""
        while self.pending:
            self._wait(self.pending.popleft())

    def _wait(self, future: Future[Any]) -> None:
        error = future.exception()
        if error is not None and self.raising:
            raise error


def _as_it_is(table: pa.Table) -> pa.Table:
    return table


class _StreamedFile:
    """A Parquet file built a row group at a time on the encoding thread."""

    def __init__(self, encoder: Background) -> None:
        self.encoder = encoder
        self.sink = pa.BufferOutputStream()
        self.writer: pq.ParquetWriter | None = None
        self.writes: list[Future[None]] = []
        self.written = 0

    def add(self, make_table: Any, *arguments: Any) -> None:
        self.writes.append(self.encoder.submit(self._write, make_table, arguments))

    def _write(self, make_table: Any, arguments: tuple[Any, ...]) -> None:
        table = make_table(*arguments)
        if self.writer is None:
            self.writer = parquet_writer(self.sink, table.schema)
        self.writer.write_table(table)
        self.written += table.num_rows

    def close(self, rows: int) -> Future[bytes]:
        """The file's bytes, once every row group is written; the first error of a row group
        if one failed, or an error if the file does not hold ``rows`` rows."""
        return self.encoder.submit(self._close, rows)

    def _close(self, rows: int) -> bytes:
        for write in self.writes:  # each ran before this task, on this thread: done
            write.result()
        if self.writer is None or self.written != rows:
            raise EvictlabError(f"a sweep chunk's file holds {self.written:,} rows, not {rows:,}")
        self.writer.close()
        return self.sink.getvalue().to_pybytes()


# --------------------------------------------------------------------------- running totals


class SweepTally:
    """What the command reports, kept chunk by chunk from the summaries: the best and the
    worst setting per preset x policy x scenario, and the summary rows of DeerMem's default
    settings. Chunks may come in any order."""

    def __init__(self, grid: SweepGrid) -> None:
        self.grid = grid
        self.defaults = sorted(default_settings(grid))
        self.default_rows: list[pa.Table] = []
        self.extremes: dict[tuple[str, ...], dict[str, int]] = {}
        self.categories: dict[str, list[str]] = {}
        self.rows = 0
        self.summary_rows = 0

    def add(self, summary: pa.Table, rows: int) -> None:
        """Count one chunk: its scenario summary (one preset and policy, settings x groups x
        capacities in row order, as
        :func:`~evictlab.analysis.sweep_tables.summary_table` makes it) and its number of rows.

        A summary under :data:`~evictlab.analysis.sweep_tables.EVERY_SETTING` (a policy that
        ignores the setting) counts for every setting of the grid, all of them tied."""
        self.rows += rows
        codes = {}
        for name in EXTREME_KEYS:
            column = summary.column(name).combine_chunks()
            self.categories.setdefault(name, column.dictionary.to_pylist())
            codes[name] = column.indices.to_numpy()
        # The chunk's settings are consecutive, each with the same number of rows.
        settings = summary.column("setting").to_numpy()
        per_setting = int(np.searchsorted(settings, settings[0], side="right"))
        count = len(settings) // per_setting
        first_setting = int(settings[0])
        # Each stored setting stands for ``weight`` settings: the grid's, under EVERY_SETTING.
        every = first_setting == EVERY_SETTING
        weight = self.grid.size if every else 1
        self.summary_rows += len(summary) * weight
        if every:
            at = summary.schema.get_field_index("setting")
            for index in self.defaults:
                column = pa.array(np.full(len(summary), index, dtype=np.int64))
                self.default_rows.append(summary.set_column(at, "setting", column))
        else:
            wanted = [index - first_setting for index in self.defaults if 0 <= index - first_setting < count]
            if wanted:
                picked = np.concatenate([np.arange(at * per_setting, (at + 1) * per_setting) for at in wanted])
                self.default_rows.append(summary.take(pa.array(picked)))
        retained = summary.column("support_retained").to_numpy().reshape(count, per_setting)
        cases = summary.column("cases").to_numpy()[:per_setting]
        scenarios = codes["scenario"][:per_setting]
        first = [0] if every else settings[::per_setting]  # ties go to the first setting
        head = tuple(self.categories[name][codes[name][0]] for name in EXTREME_KEYS[:2])
        for scenario in dict.fromkeys(scenarios.tolist()):
            members = scenarios == scenario
            totals = retained[:, members].sum(axis=1)
            key = (*head, self.categories["scenario"][scenario])
            scenario_cases = int(cases[members].sum())
            for extreme, target in (("best", totals.max()), ("worst", totals.min())):
                hits = np.flatnonzero(totals == target)
                self._merge((*key, extreme), int(target), int(first[hits[0]]), len(hits) * weight, scenario_cases,
                            count * weight)  # fmt: skip

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
        settings = settings_frame([self.grid.setting(index) for index in chosen])
        settings["setting"] = np.array(chosen, dtype=np.int64)
        return frame.merge(settings, on="setting", how="left", validate="many_to_one")

    def default_summary(self) -> pd.DataFrame:
        """The scenario-summary rows of DeerMem's default settings (empty when the grid has none)."""
        if not self.default_rows:
            return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
        frame = pa.concat_tables(self.default_rows).to_pandas()  # one conversion: each costs ms
        # In the summary's order, whatever order the chunks came in: preset, policy (their
        # categories are in grid order), setting; groups and capacities as each chunk has them.
        keys = (frame["setting"].to_numpy(), frame["policy"].cat.codes.to_numpy(), frame["preset"].cat.codes.to_numpy())
        frame = frame.take(np.lexsort(keys)).reset_index(drop=True)  # lexsort is stable
        return with_setting_columns(frame, _setting_lookup(self.grid, frame["setting"]))[list(SUMMARY_COLUMNS)]


def _setting_lookup(grid: SweepGrid, indices: pd.Series) -> pd.DataFrame:
    """A settings table for :func:`with_setting_columns` of just the settings at ``indices``."""
    wanted = sorted(set(indices.tolist()))
    frame = settings_frame([grid.setting(index) for index in wanted])
    frame["setting"] = np.array(wanted, dtype=np.int64)
    return frame
