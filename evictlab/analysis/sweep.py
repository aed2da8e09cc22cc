"""Parameter sweeps: grids of settings, run over the engine, as tidy tables and run folders.

A grid is the product weights x confirmation half-lives x access half-lives x reservation
fractions x reservation maxima (the *settings*, in that nesting order), crossed with
capacities, policies and presets. :func:`run_sweep` returns one row per preset x policy x
setting x case x capacity (in that nesting order, cases in build order): the rows of
:func:`evictlab.selection.decisions.decide_grid`. The ``confidence`` policy ignores the
setting, so its rows repeat one decision for every setting: each setting keeps its baseline.

:func:`run_sweep` holds every row in memory, for the grids of the notebooks;
:func:`evictlab.analysis.sweep_output.write_sweep` writes the same rows to a run folder chunk by
chunk (:func:`evictlab.selection.decisions.iter_decisions`), in bounded memory, and resumes an
interrupted one. The summary and the extreme settings are made by the functions here in both.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import Any, cast

import pandas as pd

from ..core.dataset import Dataset
from ..core.pools import PoolSet, check_capacities, open_pools
from ..core.protocol import Protocol
from ..core.runspec import RunSpec
from ..distributed import Placement
from ..errors import ContractError
from ..policies import DEERMEM_POLICIES, PolicyParams, check_capacity_range, resolve_policy
from ..policies.base import WEIGHT_TOLERANCE, is_finite_number
from ..selection.decisions import CHUNK_ROWS, SETTING_COLUMNS, DecisionPlan, distinct, prepared_cases, settings_frame
from ..selection.engine import PreparedCases
from ..selection.engine_settings import SettingColumns
from .sweep_summary import (  # noqa: F401  (re-exported: the sweep's tables)
    EXTREME_COLUMNS,
    SUMMARY_COLUMNS,
    extreme_settings,
    merge_extremes,
    scenario_summary,
    setting_extremes,
)

WEIGHT_COLUMNS = ("confidence_weight", "confirmation_weight", "access_weight")
ROW_COLUMNS = (
    "preset",
    "policy",
    "setting",  # index into the grid's settings
    *SETTING_COLUMNS,
    "case_id",
    "scenario",
    "source",
    "capacity",
    "support_retained",
    "support_rank",
    "reserved_correction_slots",
    "support_margin",
    "support_expected",
    "support_tied",
    "support_near_tie",
    "tie_break",
    "retention",
)
DEERMEM_DEFAULT = PolicyParams()


# --------------------------------------------------------------------------- grids


#: The most settings a grid may have unless the caller lifts it: 0.01-step weights (5,151
#: triples) crossed with 3 x 3 half-lives is 46,359. Memory stays bounded (the rows are written
#: in chunks), but time and the rows on disk grow in proportion.
MAX_SETTINGS = 50_000


def simplex_divisions(step: float) -> int:
    """``1 / step`` as an integer; an error unless ``step`` is a number in (0, 1] dividing 1."""
    if not is_finite_number(step):
        raise ContractError(f"weight step must be a number, got {step!r}")
    if not 0 < step <= 1:
        raise ContractError(f"weight step must be in (0, 1], got {step!r}")
    divisions = round(1 / step)
    if abs(divisions * step - 1) > WEIGHT_TOLERANCE:
        raise ContractError(
            f"weight step {step!r} does not divide 1 (1 / step = {1 / step!r}); use e.g. 0.1, 0.05 or 0.01"
        )
    return divisions


def simplex_size(step: float) -> int:
    """How many triples :func:`simplex_weights` gives for ``step``, without building them."""
    divisions = simplex_divisions(step)
    return (divisions + 1) * (divisions + 2) // 2


def simplex_weights(step: float) -> tuple[tuple[float, float, float], ...]:
    """Every (confidence, confirmation, access) weight triple on the simplex at ``step``.

    ``step`` must divide 1 (within 1e-9): 0.05 gives 231 points, 0.01 gives 5,151. Points are
    built from integer counts, ``i / n``, so each weight is the double nearest the decimal
    value (``13 / 20 == 0.65``) and DeerMem's default lies exactly on the 0.05 grid. Order:
    confidence weight descending, then confirmation weight descending.
    """
    divisions = simplex_divisions(step)
    return tuple(
        (i / divisions, j / divisions, (divisions - i - j) / divisions)
        for i in range(divisions, -1, -1)
        for j in range(divisions - i, -1, -1)
    )


def check_weights(triples: Sequence[Sequence[float]]) -> tuple[tuple[float, float, float], ...]:
    """Explicit weight triples, each on the simplex: three numbers in [0, 1] summing to 1 ± 1e-9."""
    checked = []
    for number, triple in enumerate(triples, start=1):
        values = tuple(triple)
        if len(values) != 3:
            raise ContractError(
                f"weights #{number} {values!r}: expected three numbers (confidence, confirmation, access)"
            )
        for value in values:
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value <= 1:
                raise ContractError(f"weights #{number} {values!r}: each weight must be a number in [0, 1]")
        # Summed left to right, as DeerMem's validator does.
        total = values[0] + values[1] + values[2]
        if abs(total - 1) > WEIGHT_TOLERANCE:
            raise ContractError(
                f"weights #{number} {values!r} are off the simplex: they sum to {total!r}, not 1 within 1e-9"
            )
        confidence, confirmation, access = (float(value) for value in values)
        checked.append((confidence, confirmation, access))
    return tuple(checked)


def parse_weights(text: str) -> tuple[tuple[float, float, float], ...]:
    """``"0.65,0.25,0.10;0.5,0.3,0.2"`` -> two checked triples."""
    triples = []
    for number, item in enumerate((part for part in text.split(";") if part.strip()), start=1):
        try:
            triples.append(tuple(float(value) for value in item.split(",")))
        except ValueError:
            raise ContractError(f"weights #{number} {item.strip()!r}: expected three comma-separated numbers") from None
    if not triples:
        raise ContractError(f"no weights in {text!r}; expected e.g. '0.65,0.25,0.10;0.5,0.3,0.2'")
    return check_weights(triples)


@dataclass(frozen=True)
class SweepGrid:
    """A sweep grid, validated at construction: every list non-empty and repeating no value,
    each value in its range (each weight triple on the simplex), every policy known.
    :func:`make_grid` builds one from a weight step and explicit triples."""

    weights: tuple[tuple[float, float, float], ...]
    confirmation_half_lives: tuple[float, ...]
    access_half_lives: tuple[float, ...]
    reserved_fractions: tuple[float, ...]
    reserved_maxima: tuple[int, ...]
    capacities: tuple[int, ...]
    policies: tuple[str, ...]
    weights_step: float | None = None

    def __post_init__(self) -> None:
        for name in self.policies:
            resolve_policy(name)  # an unknown name fails here, naming the known ones
        checked = {
            "confirmation half-lives": _positive_numbers("confirmation half-lives", self.confirmation_half_lives),
            "access half-lives": _positive_numbers("access half-lives", self.access_half_lives),
            "reserved fractions": _numbers_in("reserved fractions", self.reserved_fractions, 0.0, 1.0),
            "reserved maxima": _counts("reserved maxima", self.reserved_maxima, 0),
            "capacities": check_capacity_range(self.capacities, low=1) if self.capacities else (),
            "policies": tuple(self.policies),
        }
        for (name, values), attribute in zip(checked.items(), _LISTS):  # none empty, none repeating a value
            object.__setattr__(self, attribute, distinct(name, values))
        object.__setattr__(self, "weights", distinct("weights", check_weights(self.weights)))

    @cached_property
    def settings(self) -> tuple[PolicyParams, ...]:
        """Every setting, weights outermost and reservation maximum innermost (for a grid of
        millions, :meth:`settings_between` gives a part as columns, without an object per setting)."""
        return tuple(self.settings_between(0, self.size))

    @property
    def size(self) -> int:
        """How many settings the grid has (without building them)."""
        return math.prod(len(values) for values in self._axes)

    def settings_between(self, start: int, stop: int) -> SettingColumns:
        """Settings ``start`` to ``stop - 1`` in grid order, as columns, built without the others."""
        start, stop = max(start, 0), min(stop, self.size)
        if start >= stop:
            return SettingColumns.of(())
        per_triple = self.size // len(self.weights)
        first, last = start // per_triple, (stop - 1) // per_triple + 1
        block = SettingColumns.product(self.weights[first:last], *self._axes[1:])
        return block[start - first * per_triple : stop - first * per_triple]

    @property
    def settings_view(self) -> GridSettings:
        """Every setting as a sequence built a slice at a time (for a grid of millions)."""
        return GridSettings(self)

    def setting(self, index: int) -> PolicyParams:
        """Setting ``index`` in grid order, as ``settings_between(index, index + 1)[0]`` gives
        it, from the five lists alone."""
        if not 0 <= index < self.size:
            raise IndexError(f"setting {index} of a grid of {self.size:,}")
        picked = []
        for values in reversed(self._axes):
            index, at = divmod(index, len(values))
            picked.append(values[at])
        maximum, fraction, access, confirmation, weights = picked
        # A weight of -0.0 as +0.0, as the columns hold it.
        confidence, confirmed, accessed = (float(weight) + 0.0 for weight in weights)
        return PolicyParams(
            confidence_weight=confidence,
            confirmation_weight=confirmed,
            access_weight=accessed,
            confirmation_half_life_days=float(confirmation),
            access_half_life_days=float(access),
            correction_reserved_fraction=float(fraction),
            correction_reserved_max=int(maximum),
        )

    @property
    def _axes(self) -> tuple[tuple[Any, ...], ...]:
        """The five lists whose product the settings are, outermost first."""
        return (
            self.weights,
            self.confirmation_half_lives,
            self.access_half_lives,
            self.reserved_fractions,
            self.reserved_maxima,
        )

    def settings_frame(self) -> pd.DataFrame:
        """One row per setting: ``setting`` and the seven parameters."""
        return settings_frame(self.settings)

    def as_dict(self) -> dict[str, Any]:
        """The grid for a run record: ``weights`` lists the triples beyond the simplex of
        ``weights_step`` (all of them without a step), ``weight_triples`` counts them all."""
        on_simplex = simplex_size(self.weights_step) if self.weights_step is not None else 0
        return {
            "weights_step": self.weights_step,
            "weights": [list(triple) for triple in self.weights[on_simplex:]],
            "weight_triples": len(self.weights),
            "confirmation_half_lives": list(self.confirmation_half_lives),
            "access_half_lives": list(self.access_half_lives),
            "reserved_fractions": list(self.reserved_fractions),
            "reserved_maxima": list(self.reserved_maxima),
            "capacities": list(self.capacities),
            "policies": list(self.policies),
            "settings": self.size,
        }


#: The grid's fields that :class:`SweepGrid` checks as lists, in its order.
_LISTS = ("confirmation_half_lives", "access_half_lives", "reserved_fractions", "reserved_maxima", "capacities",
          "policies")  # fmt: skip


class GridSettings(Sequence[PolicyParams]):
    """A grid's settings by index: a slice is :meth:`SweepGrid.settings_between`'s columns, an
    item :meth:`SweepGrid.setting`. It pickles as the grid's five lists."""

    def __init__(self, grid: SweepGrid) -> None:
        self.grid = grid

    def __len__(self) -> int:
        return self.grid.size

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            start, stop, _ = index.indices(self.grid.size)
            return self.grid.settings_between(start, stop)
        return self.grid.setting(range(self.grid.size)[index])


def make_grid(
    *,
    weights_step: float | None = None,
    weights: Sequence[Sequence[float]] = (),
    confirmation_half_lives: Sequence[float] = (DEERMEM_DEFAULT.confirmation_half_life_days,),
    access_half_lives: Sequence[float] = (DEERMEM_DEFAULT.access_half_life_days,),
    reserved_fractions: Sequence[float] = (DEERMEM_DEFAULT.correction_reserved_fraction,),
    reserved_maxima: Sequence[int] = (DEERMEM_DEFAULT.correction_reserved_max,),
    capacities: Sequence[int] = (5, 7, 9),
    policies: Sequence[str] = DEERMEM_POLICIES,
    max_settings: int = MAX_SETTINGS,
) -> SweepGrid:
    """The grid of these lists (:class:`SweepGrid` checks them).

    Weights: the simplex at ``weights_step``, then the explicit ``weights`` not already on
    it; DeerMem's (0.65, 0.25, 0.10) when neither is given. Capacities are checked against
    the pools when the sweep runs (:func:`check_pools`). A grid of more than ``max_settings``
    settings is refused before anything is built.
    """
    other_lists = (confirmation_half_lives, access_half_lives, reserved_fractions, reserved_maxima)
    count = (simplex_size(weights_step) if weights_step is not None else 1) + len(weights)
    for values in other_lists:
        count *= max(len(values), 1)
    if count > max_settings:
        raise ContractError(
            f"the grid has about {count:,} settings, over the limit of {max_settings:,}; time and"
            f" rows grow with it. Use a coarser grid, or pass --max-settings {count} to run it"
            " deliberately"
        )
    triples = list(simplex_weights(weights_step)) if weights_step is not None else []
    for triple in check_weights(weights):
        if triple not in triples:
            triples.append(triple)
    if weights_step is None and not weights:
        triples = [DEERMEM_DEFAULT.weights]
    return SweepGrid(
        tuple(triples), tuple(confirmation_half_lives), tuple(access_half_lives), tuple(reserved_fractions),
        tuple(reserved_maxima), tuple(capacities), tuple(policies), weights_step,
    )  # fmt: skip


def _positive_numbers(name: str, values: Sequence[float]) -> tuple[float, ...]:
    for value in values:
        if not is_finite_number(value) or value <= 0:
            raise ContractError(f"{name} must be numbers > 0, got {value!r}")
    return tuple(values)


def _numbers_in(name: str, values: Sequence[float], low: float, high: float) -> tuple[float, ...]:
    for value in values:
        if not is_finite_number(value) or not low <= value <= high:
            raise ContractError(f"{name} must be numbers in [{low:g}, {high:g}], got {value!r}")
    return tuple(values)


def _counts(name: str, values: Sequence[int], low: int) -> tuple[int, ...]:
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise ContractError(f"{name} must be integers >= {low}, got {value!r}")
    return tuple(int(value) for value in values)


# --------------------------------------------------------------------------- running


Inputs = PoolSet | PreparedCases | RunSpec


@dataclass(frozen=True)
class SweepRequest:
    """A sweep into a run folder, resolved and checked once, at the edge.

    ``pools`` maps each preset to its pools, or to the run spec that opens them (under the
    folder's lock, :meth:`opened`); a sequence of run specs is labelled by their presets, each
    once. Making a request checks the grid's capacities against every preset
    (:func:`check_pools`, the one check), before a folder is touched; from there it is handed
    down whole: :func:`evictlab.analysis.sweep_output.write_sweep` plans it into chunks and
    each chunk goes to the selector. ``arguments`` (e.g. the command line's options, as given)
    go into the run record; ``placement`` says where the chunks are decided (default: in this
    process); ``progress`` as :func:`run_sweep`'s; ``notice`` is told which dataset the first
    run spec opened.
    """

    output_dir: Path
    pools: Mapping[str, Inputs] | Sequence[RunSpec] = field(repr=False)
    grid: SweepGrid = field(repr=False)
    chunk_rows: int = CHUNK_ROWS
    placement: Placement = field(default_factory=partial(Placement, workers=0))
    progress: bool | None = None
    arguments: Mapping[str, Any] | None = None
    notice: Callable[[Dataset, Protocol], None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        pools = self.pools
        if isinstance(pools, Mapping):
            pools = dict(pools)  # the request's own: a preset added to the caller's dict later is not checked
        else:
            specs = tuple(pools)
            pools = dict(zip(distinct("presets", tuple(spec.preset for spec in specs)), specs))
        check_pools(pools, self.grid)
        object.__setattr__(self, "output_dir", Path(self.output_dir))
        object.__setattr__(self, "pools", pools)

    def opened(self) -> dict[str, PoolSet | PreparedCases]:
        """Each preset's pools, a run spec opened (:func:`~evictlab.core.pools.open_pools`)."""
        pools = cast(Mapping[str, Inputs], self.pools)  # a mapping once made
        return {str(name): open_pools(item, notice=None if n else self.notice) if isinstance(item, RunSpec) else item
                for n, (name, item) in enumerate(pools.items())}  # fmt: skip


def check_pools(pools: Mapping[str, Inputs], grid: SweepGrid) -> None:
    """The sweep's one capacity check: every capacity in [1, pool size - 1] for each preset,
    against its smallest pool (a run spec: its config's pool size, read without opening it)."""
    if not pools:
        raise ContractError("empty grid: no presets (pools) to sweep")
    for name, item in pools.items():
        if isinstance(item, RunSpec):
            protocol = item.resolved.protocol
            check_capacities(grid.capacities, protocol.config.pool.size, f"config {protocol.files.config}")
        elif isinstance(item, PoolSet):  # its pools' sizes, without preparing the cases the sweep prepares
            item.check_capacities(grid.capacities, f"preset {name}")
        else:  # prepared cases, or an error naming what was given instead
            check_capacities(grid.capacities, int(prepared_cases(item).sizes.min()), f"preset {name}")


@dataclass(frozen=True)
class SweepResult:
    """The tidy rows of a sweep (columns :data:`ROW_COLUMNS`) and the grid that made them."""

    grid: SweepGrid
    presets: tuple[str, ...]
    rows: pd.DataFrame = field(repr=False)

    @cached_property
    def summary(self) -> pd.DataFrame:
        return scenario_summary(self.rows)


def run_sweep(
    pools: Mapping[str, PoolSet | PreparedCases],
    grid: SweepGrid,
    *,
    progress: bool | None = None,
) -> SweepResult:
    """Evaluate ``grid`` on the pools of every preset (mapping preset name -> pools), in memory.

    The rows are :func:`evictlab.selection.decisions.decide_grid`'s, restricted to :data:`ROW_COLUMNS`.
    ``progress``: ``True`` shows a progress bar, ``False`` hides it, ``None`` shows it when
    standard error is a terminal. Raises :class:`ContractError` for a capacity outside
    [1, pool size - 1] (:func:`check_pools`) and for a policy the scalar path cannot rank.
    """
    prepared = {str(name): prepared_cases(item) for name, item in pools.items()}
    check_pools(prepared, grid)
    plan = sweep_plan(prepared, grid)
    rows = pd.concat(list(plan.frames(progress, "sweep")), ignore_index=True)
    return SweepResult(grid, tuple(plan.prepared), rows[list(ROW_COLUMNS)])


def sweep_plan(
    pools: Mapping[str, PoolSet | PreparedCases], grid: SweepGrid, chunk_rows: int = CHUNK_ROWS
) -> DecisionPlan:
    """The sweep's chunks, in memory or into a folder: :class:`~evictlab.selection.decisions.DecisionPlan`
    of the grid on each preset's pools (checked by :func:`check_pools`)."""
    prepared = {str(name): prepared_cases(item) for name, item in pools.items()}
    return DecisionPlan.build(prepared, grid.policies, grid.settings_view, grid.capacities, chunk_rows=chunk_rows)


# --------------------------------------------------------------------------- tables


def default_settings(grid: SweepGrid) -> list[int]:
    """Indices of the settings with DeerMem's weights and half-lives (any reservation)."""
    default = DEERMEM_DEFAULT
    wanted = (default.weights, default.confirmation_half_life_days, default.access_half_life_days)
    reservations = len(grid.reserved_fractions) * len(grid.reserved_maxima)
    axes = (grid.weights, grid.confirmation_half_lives, grid.access_half_lives)
    indices = [0]
    for values, value in zip(axes, wanted):
        indices = [index * len(values) + at for index in indices for at, item in enumerate(values) if item == value]
    return [index * reservations + offset for index in indices for offset in range(reservations)]
