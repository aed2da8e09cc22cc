"""The tables of a sweep run folder: what each chunk writes, and how a reader gets the tidy rows back.

A written sweep does not repeat what the grid and the pools already say. Each chunk's part
file of ``rows.parquet/`` holds the keys of a decision and its outputs
(:data:`STORED_ROW_COLUMNS`): the setting as its index into the grid, the case as its index
into the preset's cases. The folder holds the rest once:

* ``settings.parquet``: one row per setting, ``setting`` and the seven parameters
  (:data:`~evictlab.selection.decisions.SETTING_COLUMNS`);
* ``cases.parquet``: one row per preset x case, ``preset``, ``case`` and the case's
  ``case_id``, ``scenario`` and ``source``;
* the run record: each policy's tie-break (``parameters.tie_breaks``), which says what
  ``retention`` counts.

A policy that ignores the setting (``confidence``) makes the same decision under every
setting, so its rows and summary are stored once per preset, under ``setting``
:data:`EVERY_SETTING` (-1): "every setting of the grid".

:func:`tidy_rows` and :func:`with_setting_columns` (after :func:`expand_every_setting`) join
them back into the columns of
:data:`~evictlab.analysis.sweep.ROW_COLUMNS` and :data:`~evictlab.analysis.sweep.SUMMARY_COLUMNS`,
the frames :func:`~evictlab.analysis.sweep.run_sweep` returns in memory. Writing the
parameters of every setting on every row cost more than deciding the rows (the dense grid's
1.4 M rows: 7 columns of constant runs, 3 of case names), which is why they are kept apart.

The scenario summary (``scenario_summary.parquet/``) is small and holds every column but the
setting's parameters (:data:`STORED_SUMMARY_COLUMNS`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import ContractError
from ..policies.ties import EXPECTED, TIE_BREAKS
from ..selection.decisions import SETTING_COLUMNS, case_codes
from ..selection.engine import OUTPUTS, PreparedCases
from ..selection.engine_settings import SettingColumns
from .sweep import ROW_COLUMNS, SUMMARY_COLUMNS

#: The ``setting`` of the stored rows of a policy that ignores the setting: they stand for
#: every setting of the grid (:func:`expand_every_setting` writes them out).
EVERY_SETTING = -1
#: The case columns of a sweep's rows, as ``cases.parquet`` holds them.
CASE_NAMES = ("case_id", "scenario", "source")
STORED_ROW_COLUMNS = ("preset", "policy", "setting", "case", "capacity", *OUTPUTS)
STORED_SUMMARY_COLUMNS = tuple(name for name in SUMMARY_COLUMNS if name not in SETTING_COLUMNS)
#: The stored rows' int32 columns, as int64 again in the rows :func:`tidy_rows` returns.
WIDE_TYPES = dict.fromkeys(("setting", "capacity", "support_rank", "reserved_correction_slots"), np.int64)
#: The dtypes of the tidy rows' non-category columns (an empty read keeps them).
ROW_DTYPES = {
    "setting": np.int64, **dict.fromkeys(SETTING_COLUMNS[:-1], np.float64), SETTING_COLUMNS[-1]: np.int64,
    "capacity": np.int64, "support_retained": bool, "support_rank": np.int64, "reserved_correction_slots": np.int64,
    "support_margin": np.float64, "support_expected": np.float64, "support_tied": bool, "support_near_tie": bool,
    "retention": np.float64,
}  # fmt: skip
#: Columns :func:`parquet_bytes` writes without a dictionary: constant over long runs of rows
#: (which LZ4 compresses as well) or nearly all distinct.
PLAIN_COLUMNS = frozenset(("setting", "case", "capacity", "support_rank", "support_margin", "support_expected"))


@dataclass(frozen=True)
class SweepCategories:
    """The text columns' values, shared by every chunk so that their dictionaries agree: the
    presets and policies of the sweep, and the case names of all presets in order of first
    appearance (as :class:`~evictlab.selection.decisions.DecisionRows` orders them)."""

    presets: tuple[str, ...]
    policies: tuple[str, ...]
    names: Mapping[str, list[str]]  # case column -> its values
    codes: Mapping[str, Mapping[str, np.ndarray]]  # preset -> case column -> each case's code

    @classmethod
    def of(cls, prepared: Mapping[str, PreparedCases], policies: Sequence[str]) -> SweepCategories:
        names, codes = case_codes(prepared, CASE_NAMES)
        return cls(tuple(prepared), tuple(policies), names, codes)

    def dictionary(self, name: str) -> pa.Array:
        values = {"preset": self.presets, "policy": self.policies}.get(name) or self.names[name]
        return pa.array(list(values), pa.string())

    def constant(self, name: str, value: str, count: int) -> pa.DictionaryArray:
        """A column of ``count`` copies of ``value``, dictionary-encoded with all of ``name``'s values."""
        code = (self.presets if name == "preset" else self.policies).index(value)
        return pa.DictionaryArray.from_arrays(pa.array(np.full(count, code, np.int32)), self.dictionary(name))

    def coded(self, name: str, codes: np.ndarray) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32, copy=False)), self.dictionary(name))


# --------------------------------------------------------------------------- writing a chunk


def rows_table(
    categories: SweepCategories, preset: str, policy: str, first_setting: int,
    capacities: Sequence[int], outputs: Mapping[str, np.ndarray],
) -> pa.Table:  # fmt: skip
    """A chunk's part of ``rows.parquet``: ``outputs`` shaped (settings, cases, capacities),
    their settings counted from ``first_setting``."""
    n_settings, n_cases, n_capacities = outputs["support_retained"].shape
    per_setting = n_cases * n_capacities
    count = n_settings * per_setting
    keys = {
        "preset": categories.constant("preset", preset, count),
        "policy": categories.constant("policy", policy, count),
        "setting": pa.array(np.repeat(np.arange(n_settings, dtype=np.int32) + np.int32(first_setting), per_setting)),
        "case": pa.array(np.tile(np.repeat(np.arange(n_cases, dtype=np.int32), n_capacities), n_settings)),
        "capacity": pa.array(np.tile(np.asarray(capacities, dtype=np.int32), n_settings * n_cases)),
    }
    values = {name: pa.array(_narrow(np.ascontiguousarray(outputs[name]).reshape(-1))) for name in OUTPUTS}
    return pa.Table.from_arrays([*keys.values(), *values.values()], names=list(STORED_ROW_COLUMNS))


def _narrow(values: np.ndarray) -> np.ndarray:
    """Integers as int32 (Parquet's own width for them: cheaper to encode than int64)."""
    return values.astype(np.int32) if values.dtype == np.int64 else values


def summary_table(
    categories: SweepCategories, preset: str, policy: str, tie_break: str, first_setting: int,
    capacities: Sequence[int], outputs: Mapping[str, np.ndarray],
) -> pa.Table:  # fmt: skip
    """A chunk's part of ``scenario_summary.parquet``: :func:`evictlab.analysis.sweep.scenario_summary`
    of its rows without the settings' parameters, computed from ``outputs`` (settings, cases,
    capacities).

    Groups are (source, scenario) in order of first appearance among the cases, so the rows
    run settings x groups x capacities, as pandas' unsorted group-by orders them. Counts are
    exact; the one float sum (``support_expected``) runs over the cases in order with the
    compensated (Kahan) summation of pandas' group sums, so it is theirs, bit for bit.
    """
    n_settings, _, n_capacities = outputs["support_retained"].shape
    codes = categories.codes[preset]
    keys = list(zip(codes["source"].tolist(), codes["scenario"].tolist()))
    groups = list(dict.fromkeys(keys))
    group_of = [groups.index(key) for key in keys]
    shape = (n_settings, len(groups), n_capacities)

    def count(name: str) -> np.ndarray:
        return _group_sums(outputs[name], group_of, len(groups), np.int64).reshape(-1)

    expected_sums = _compensated_group_sums(outputs["support_expected"], group_of, len(groups)).reshape(-1)
    retained = count("support_retained")
    cases = np.broadcast_to(np.bincount(group_of)[None, :, None], shape).astype(np.int64).reshape(-1)
    size = retained.size
    group_codes = np.array(groups, dtype=np.int32).reshape(-1, 2)
    group_index = np.tile(np.repeat(np.arange(len(groups)), n_capacities), n_settings)
    columns = {
        "preset": categories.constant("preset", preset, size),
        "policy": categories.constant("policy", policy, size),
        "setting": pa.array(np.repeat(np.arange(n_settings) + first_setting, len(groups) * n_capacities)),
        "source": categories.coded("source", group_codes[group_index, 0]),
        "scenario": categories.coded("scenario", group_codes[group_index, 1]),
        "capacity": pa.array(np.tile(np.asarray(capacities, dtype=np.int64), n_settings * len(groups))),
        "support_retained": pa.array(retained),
        "cases": pa.array(cases),
        "support_retained_rate": pa.array(retained / cases),
        "support_expected": pa.array(expected_sums),
        "ties": pa.array(count("support_tied")),
        "near_ties": pa.array(count("support_near_tie")),
        "retention": pa.array(expected_sums if tie_break == EXPECTED else retained.astype(np.float64)),
    }
    return pa.Table.from_arrays(list(columns.values()), names=list(STORED_SUMMARY_COLUMNS))


def _group_sums(values: np.ndarray, group_of: Sequence[int], groups: int, dtype: Any) -> np.ndarray:
    """(settings, cases, capacities) summed over the cases of each group: (settings, groups,
    capacities), accumulated case by case in ``dtype`` (numpy's own loops, not a BLAS product,
    whose idle threads spin and double the CPU time of a chunk)."""
    totals = np.zeros((groups, values.shape[0], values.shape[2]), dtype=dtype)
    for case, group in enumerate(group_of):
        totals[group] += values[:, case, :]
    return totals.transpose(1, 0, 2)


def _compensated_group_sums(values: np.ndarray, group_of: Sequence[int], groups: int) -> np.ndarray:
    """:func:`_group_sums` of floats, as pandas' group sums make them: Kahan summation over the
    cases in order.

    Where every value summed is a whole number the plain sum is exact, and so equal to the
    compensated one; only the (setting, capacity) columns holding a fraction (a tie's
    expectation, rare) go through the compensated loop."""
    totals = _group_sums(values, group_of, groups, np.float64)
    fractions = np.flatnonzero(values != np.floor(values))
    if not len(fractions):
        return totals
    settings, _, capacities = np.unravel_index(fractions, values.shape)
    flat = np.unique(settings * values.shape[2] + capacities)
    columns = (flat // values.shape[2], flat % values.shape[2])
    picked = values[columns[0], :, columns[1]]  # (columns, cases)
    sums, compensation = np.zeros((groups, len(picked))), np.zeros((groups, len(picked)))
    for case, group in enumerate(group_of):
        term = picked[:, case] - compensation[group]
        running = sums[group] + term
        compensation[group] = (running - sums[group]) - term
        sums[group] = running
    totals = np.ascontiguousarray(totals)
    totals[columns[0], :, columns[1]] = sums.T
    return totals


def parquet_writer(sink: pa.NativeFile, schema: pa.Schema) -> pq.ParquetWriter:
    """A writer of Parquet files the way a sweep writes them: LZ4, min/max statistics only for
    ``setting`` (a reader can skip files and row groups by setting with them; statistics of
    every column cost more than they save here).

    Columns with few distinct values in a chunk are dictionary-encoded; the others
    (:data:`PLAIN_COLUMNS`) are written plain, which is cheaper and, after LZ4, about as
    small. Write to an Arrow buffer, not a Python file object, so that encoding on another
    thread never waits for the GIL."""
    dictionary = [name for name in schema.names if name not in PLAIN_COLUMNS]
    statistics = ["setting"] if "setting" in schema.names else False
    return pq.ParquetWriter(sink, schema, compression="lz4", use_dictionary=dictionary, write_statistics=statistics)


def parquet_bytes(table: pa.Table) -> bytes:
    """``table`` as one Parquet file of :func:`parquet_writer`'s."""
    buffer = pa.BufferOutputStream()
    with parquet_writer(buffer, table.schema) as writer:
        writer.write_table(table)
    return buffer.getvalue().to_pybytes()


def settings_table(settings: SettingColumns, first_setting: int = 0) -> pa.Table:
    """``settings.parquet``: ``setting`` (from ``first_setting``) and the seven parameters."""
    index = np.arange(first_setting, first_setting + len(settings), dtype=np.int64)
    return pa.table({"setting": index, **{name: settings.column(name) for name in SETTING_COLUMNS}})


def cases_table(categories: SweepCategories, prepared: Mapping[str, PreparedCases]) -> pa.Table:
    """``cases.parquet``: each preset's cases in build order, with their names."""
    presets = np.concatenate([np.full(len(cases), at, np.int32) for at, cases in enumerate(prepared.values())])
    columns = {
        "preset": pa.DictionaryArray.from_arrays(pa.array(presets), categories.dictionary("preset")),
        "case": pa.array(np.concatenate([np.arange(len(cases), dtype=np.int32) for cases in prepared.values()])),
    }
    for name in CASE_NAMES:
        codes = np.concatenate([categories.codes[preset][name] for preset in prepared])
        columns[name] = categories.coded(name, codes)
    return pa.table(columns)


# --------------------------------------------------------------------------- reading back


def with_setting_columns(frame: pd.DataFrame, settings: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the seven parameters of each row's ``setting`` inserted after it.

    ``settings`` is ``settings.parquet`` read back, or any frame of settings sorted by their
    ``setting`` index that holds every index ``frame`` names."""
    known, wanted = settings["setting"].to_numpy(), frame["setting"].to_numpy()
    index = np.searchsorted(known, wanted)  # the identity for settings.parquet
    found = index < len(known)
    if not (found.all() and np.array_equal(known[index], wanted)):
        absent = ~found
        absent[found] = known[index[found]] != wanted[found]
        missing = sorted(set(wanted[absent].tolist()))
        raise ContractError(
            f"settings {missing[:5]} are not in the settings table"
            + (f" (setting {EVERY_SETTING} stands for every setting: expand_every_setting first)"
               if EVERY_SETTING in missing else "")
        )  # fmt: skip
    at = frame.columns.get_loc("setting") + 1
    columns = {name: frame[name] for name in frame.columns[:at]}
    columns.update({name: settings[name].to_numpy()[index] for name in SETTING_COLUMNS})
    columns.update({name: frame[name] for name in frame.columns[at:]})
    return pd.DataFrame(columns, index=frame.index)


def expand_every_setting(frame: pd.DataFrame, settings: int | Sequence[int]) -> pd.DataFrame:
    """``frame`` (stored rows or summary rows, in stored order) with each run of rows under
    :data:`EVERY_SETTING` (one preset and policy) written out for each of ``settings`` (a
    count: settings 0 to ``settings - 1``), setting by setting, where the run stood."""
    chosen = np.arange(settings) if isinstance(settings, int) else np.asarray(settings)
    setting = frame["setting"].to_numpy()
    every = setting == EVERY_SETTING
    if not every.any():
        return frame
    # Runs: where the mark, the preset or the policy changes.
    keys = np.stack([every, frame["preset"].cat.codes.to_numpy(), frame["policy"].cat.codes.to_numpy()])
    bounds = [0, *(np.flatnonzero((np.diff(keys, axis=1) != 0).any(axis=0)) + 1), len(frame)]
    positions, settings_column = [], []
    for start, stop in itertools.pairwise(bounds):
        if every[start]:
            positions.append(np.tile(np.arange(start, stop), len(chosen)))
            settings_column.append(np.repeat(chosen.astype(setting.dtype), stop - start))
        else:
            positions.append(np.arange(start, stop))
            settings_column.append(setting[start:stop])
    expanded = frame.take(np.concatenate(positions)).reset_index(drop=True)
    expanded["setting"] = np.concatenate(settings_column)
    return expanded


def tidy_rows(stored: pd.DataFrame, cases: pd.DataFrame, settings: pd.DataFrame,
              tie_breaks: Mapping[str, str]) -> pd.DataFrame:  # fmt: skip
    """The rows of ``rows.parquet`` as :data:`~evictlab.analysis.sweep.ROW_COLUMNS`: the rows of
    a policy that ignores the setting written out for every setting
    (:func:`expand_every_setting`), the case names from ``cases.parquet``, the parameters from
    ``settings.parquet``, and ``tie_break`` and ``retention`` from each policy's tie-break.

    For a part of the rows read with a filter on ``setting``, include ``setting == -1`` (such
    a policy's rows) and pass ``settings.parquet`` cut to the same settings: those rows are
    written out for each setting ``settings`` holds."""
    stored = expand_every_setting(stored, settings["setting"].tolist())
    if stored.empty:
        return pd.DataFrame({name: pd.Series(dtype=ROW_DTYPES.get(name, "category")) for name in ROW_COLUMNS})
    # Presets by name, as cases.parquet orders them; each preset's cases follow the last's.
    labels = cases["preset"].cat.categories
    presets = pd.Categorical(stored["preset"].astype(str), categories=labels).codes.astype(np.int64)
    first_case = np.concatenate([[0], np.cumsum(np.bincount(cases["preset"].cat.codes, minlength=len(labels)))])
    position = first_case[presets] + stored["case"].to_numpy()
    policies = list(stored["policy"].cat.categories)
    breaks = [tie_breaks[policy] for policy in policies]
    policy_codes = stored["policy"].cat.codes.to_numpy()
    expected = np.array([name == EXPECTED for name in breaks])[policy_codes]
    names = {
        name: pd.Categorical.from_codes(cases[name].cat.codes.to_numpy()[position], cases[name].cat.categories)
        for name in CASE_NAMES
    }
    derived = {
        "tie_break": pd.Categorical.from_codes(
            np.array([TIE_BREAKS.index(name) for name in breaks], dtype=np.int32)[policy_codes], list(TIE_BREAKS)
        ),
        "retention": np.where(expected, stored["support_expected"], stored["support_retained"].astype(np.float64)),
    }
    frame = with_setting_columns(stored.drop(columns=["case"]).astype(WIDE_TYPES), settings)
    for name, values in {**names, **derived}.items():
        frame[name] = values
    return frame[list(ROW_COLUMNS)]
