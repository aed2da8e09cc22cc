"""The explorer of notebook 07: every setting of a capacity policy, one slider move at a time.

:class:`Explorer` shows, for the 45 pools of one preset, how many supports a policy keeps per
scenario at one capacity, where every support ranks, and why the facts of one selected case
were kept or evicted. Its controls: three weight sliders that stay on the simplex
(:func:`rescale_weights`; three coupled sliders rather than two and a derived third, so every
weight can be moved and the rule treats them alike), two half-lives on logarithmic sliders
over DeerMem's bounds (1 to 3,650 days), capacity 1 to 9, policy, preset and case. Weights and
half-lives are hybrid-v1's parameters, disabled while the policy ignores them
(:attr:`evictlab.policies.Policy.reads_params`); seeded policies are shown at seed 0.

A change decides every case through :func:`~evictlab.selection.decisions.decide_grid` on pools
prepared once per preset (:class:`PoolCache`), explains the selected case
(:func:`~evictlab.selection.explain.explain`) and updates one
:class:`~evictlab.workbench.plots.ExplorerFigure` in place, shown as one image under the title
as page text, with the tables of :mod:`evictlab.workbench.explorer_tables` below.
``benchmarks/bench_explorer.py`` measures a change in Python and in a real browser. Tests and
notebooks drive it with :meth:`Explorer.set` and read :attr:`Explorer.results` (one row per
case), :attr:`Explorer.summary` and :attr:`Explorer.explanation`.
"""

from __future__ import annotations

import functools
import html
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import ipywidgets as w
import pandas as pd

from ..analysis.sweep import check_weights
from ..core.pools import PoolSet
from ..core.protocol import DEFAULT_PRESET, PRESETS
from ..core.runspec import RunSpec, parse_spec
from ..errors import ContractError
from ..policies import PolicyParams, check_capacity_range, get_policy, known_policies
from ..policies.base import WEIGHT_TOLERANCE, is_finite_number
from ..selection.engine import vectorised
from ..selection.explain import Explanation, explain
from .explorer_tables import CAPACITY_RANGE, PoolCache, PresetPools, decisions_for, details_html, retention_summary
from .loaders import dataset_label
from .plots import ExplorerFigure

HALF_LIFE_RANGE_DAYS = (1.0, 3650.0)  # DeerMem's configuration bounds
WEIGHT_NAMES = ("confidence_weight", "confirmation_weight", "access_weight")
HALF_LIFE_NAMES = ("confirmation_half_life_days", "access_half_life_days")
CONTROL_NAMES = (*WEIGHT_NAMES, *HALF_LIFE_NAMES, "capacity", "policy", "preset", "case_id")
_SCALAR_CACHE_SIZE = 256


# --------------------------------------------------------------------------- the simplex rule


def rescale_weights(weights: Sequence[float], index: int, value: float) -> tuple[float, float, float]:
    """Set weight ``index`` to ``value`` and rescale the other two so that the three sum to 1.

    The others keep their proportions; when both are 0 they share the rest equally. The last
    one is computed as the remainder, so the sum is 1 up to one rounding.
    """
    if not 0.0 <= value <= 1.0:
        raise ContractError(f"a weight must be in [0, 1], got {value!r}")
    others = [i for i in range(3) if i != index]
    first, second = (float(weights[i]) for i in others)
    rest = 1.0 - value
    # The proportion first: it is in [0, 1] even for tiny weights, so the share never exceeds the rest.
    share = rest * (first / (first + second)) if first + second > 0 else rest / 2
    result = [0.0, 0.0, 0.0]
    result[index] = float(value)
    result[others[0]] = share
    result[others[1]] = max(0.0, rest - share)
    return (result[0], result[1], result[2])


# --------------------------------------------------------------------------- the explorer


class Explorer:
    """Sliders over a policy's settings, one persistent figure and the selected case's explanation.

    ``dataset``: a LongMemEval file, or None for the embedded demo. ``params``: the starting
    hybrid-v1 parameters (default: the protocol's, i.e. DeerMem's). ``case_id``: the case to
    explain (default: the first case whose support the starting setting evicts, else the
    first case). ``pools`` lets several explorers share one :class:`PoolCache`.
    """

    def __init__(
        self, dataset: str | os.PathLike | None = None, *, preset: str = DEFAULT_PRESET, policy: str = "hybrid-v1",
        capacity: int = 7, params: PolicyParams | None = None, case_id: str | None = None, allow_unpinned: bool = False,
        pools: PoolCache | None = None,
    ) -> None:
        self.pools = pools or PoolCache(dataset, allow_unpinned=allow_unpinned)
        entry = self.pools.get(preset)
        base = params or entry.pool_set.protocol.config.hybrid
        self._base_params = base
        self._quiet_depth = 0
        # mmr has no rank keys: its scalar decisions are memoised per setting.
        self._scalar = functools.lru_cache(_SCALAR_CACHE_SIZE)(
            lambda preset, policy, params, capacity: decisions_for(self.pools.get(preset).prepared, policy, params,
                                                                    capacity))
        self.updates = 0
        self.controls = self._make_controls(entry, base, preset, policy, capacity)
        self.results = self._decide(entry, policy, base, capacity)
        self.controls["case_id"].value = self._check_case(entry, case_id) if case_id else self._first_evicted()
        self.summary = retention_summary(self.results)
        self.explanation = self._explain(entry)
        self._figure = ExplorerFigure(*self._view(entry), **self._view_options(entry),
                                      pool_size=int(entry.prepared.sizes.max()))
        # The title as page text (it wraps, never clipped), the figure below it as one image.
        width = f"{72 * self._figure.figure.get_figwidth():.0f}px"  # a CSS pixel per point
        self.title = w.HTML(value=title_html(self._figure.title_lines))
        self.title.add_class("evictlab-explorer-title")
        self.image = w.Image(value=self._figure.frame_jpeg(), format="jpeg", layout=w.Layout(width="100%", margin="0"))
        self.image.add_class("evictlab-explorer-figure")
        self.details = w.HTML(value=self._details_html(entry))
        self._enable_parameters()
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        figure = w.VBox([self.title, self.image], layout=w.Layout(width=width, max_width="100%"))
        self.widget = w.VBox([self._control_panel(), figure, self.details])

    @classmethod
    def from_spec(cls, spec: str | RunSpec, *, pools: PoolCache | None = None, **options: Any) -> Explorer:
        """An explorer starting at ``spec``'s preset (a preset, SPEC string or spec file, as a
        notebook's ``spec`` parameter), its pools built from the spec under every preset it
        shows; ``options`` as for the constructor (policy, capacity, case_id)."""
        spec = parse_spec(spec) if isinstance(spec, str) else spec
        return cls(preset=spec.preset, pools=pools or PoolCache(spec=spec), **options)

    # ------------------------------------------------------------------ state

    @property
    def params(self) -> PolicyParams:
        """The current hybrid-v1 parameters (reservation settings as given at construction)."""
        values = {name: float(self.controls[name].value) for name in (*WEIGHT_NAMES, *HALF_LIFE_NAMES)}
        return self._base_params.replace(**values)

    @property
    def weights(self) -> tuple[float, float, float]:
        return tuple(float(self.controls[name].value) for name in WEIGHT_NAMES)  # type: ignore[return-value]

    @property
    def policy(self) -> str:
        return self.controls["policy"].value

    @property
    def preset(self) -> str:
        return self.controls["preset"].value

    @property
    def capacity(self) -> int:
        return int(self.controls["capacity"].value)

    @property
    def case_id(self) -> str:
        return self.controls["case_id"].value

    @property
    def figure(self) -> Any:
        """The one matplotlib Figure the explorer draws into (the same object after every change)."""
        return self._figure.figure

    @property
    def pool_set(self) -> PoolSet:
        return self.pools.get(self.preset).pool_set

    @property
    def case_frame(self) -> pd.DataFrame:
        """The selected case's explanation, one row per fact in rank order."""
        return self.explanation.to_frame()

    # ------------------------------------------------------------------ changing it

    def set(self, **values: Any) -> Explorer:
        """Set controls by name (:data:`CONTROL_NAMES`) as a user would, then refresh once.

        Weights: all three are taken as given (they must sum to 1); two fix the third; one is
        set and the others rescaled by :func:`rescale_weights`. Values are checked before any
        control moves, so a rejected call changes nothing.
        """
        unknown = sorted(set(values) - set(CONTROL_NAMES))
        if unknown:
            raise ContractError(f"unknown explorer control(s) {', '.join(unknown)}; known: {', '.join(CONTROL_NAMES)}")
        updates = self._checked(values)
        with self._quiet():
            for name, value in updates.items():
                self.controls[name].value = value
        self.refresh()
        return self

    def _checked(self, values: Mapping[str, Any]) -> dict[str, Any]:
        updates: dict[str, Any] = {**self._checked_weights(values)}
        for name in HALF_LIFE_NAMES:
            if name in values:
                value = values[name]
                low, high = HALF_LIFE_RANGE_DAYS
                if not is_finite_number(value) or not low <= value <= high:
                    raise ContractError(f"{name} must be a number of days in [{low:g}, {high:g}], got {value!r}")
                updates[name] = float(value)
        if "capacity" in values:
            updates["capacity"] = _checked_capacity(values["capacity"])
        if "policy" in values:
            updates["policy"] = _checked_policy(values["policy"])
        if "preset" in values:
            entry = self.pools.get(values["preset"])  # an unknown preset fails here
            updates["preset"] = entry.preset
        else:
            entry = self.pools.get(self.preset)
        if "case_id" in values:
            updates["case_id"] = self._check_case(entry, values["case_id"])
        return updates

    def _checked_weights(self, values: Mapping[str, Any]) -> dict[str, float]:
        """All three weights from the one, two or three given (none given: no change)."""
        updates: dict[str, float] = {}
        given = {name: values[name] for name in WEIGHT_NAMES if name in values}
        for name, value in given.items():
            if not is_finite_number(value) or not 0 <= value <= 1:
                raise ContractError(f"{name} must be a number in [0, 1], got {value!r}")
        if len(given) == 3:
            updates.update(zip(WEIGHT_NAMES, check_weights([[given[name] for name in WEIGHT_NAMES]])[0]))
        elif len(given) == 2:
            missing = next(name for name in WEIGHT_NAMES if name not in given)
            rest = 1.0 - sum(float(v) for v in given.values())
            if rest < -WEIGHT_TOLERANCE:
                raise ContractError(f"{' + '.join(given)} = {1 - rest!r} exceeds 1; {missing} cannot make the sum 1")
            updates.update({name: float(value) for name, value in given.items()}, **{missing: max(0.0, rest)})
        elif len(given) == 1:
            (name, value), = given.items()
            updates.update(zip(WEIGHT_NAMES, rescale_weights(self.weights, WEIGHT_NAMES.index(name), float(value))))
        return updates

    def refresh(self) -> None:
        """Recompute the current setting and show it: results, summary, figure, explanation, tables.

        The figure does not need the explanation, so its layer is sent to the page first and
        the selected case's explanation (about a third of a move's time) follows with the tables.
        """
        entry = self.pools.get(self.preset)
        self.results = self._decide(entry, self.policy, self.params, self.capacity)
        self.summary = retention_summary(self.results)
        self._figure.update(*self._view(entry), **self._view_options(entry))
        self.image.value = self._figure.frame_jpeg()
        self.title.value = title_html(self._figure.title_lines)
        self.explanation = self._explain(entry)
        self.details.value = self._details_html(entry)
        self._enable_parameters()
        self.updates += 1

    def _enable_parameters(self) -> None:
        """Weights and half-lives respond only for policies that read them."""
        ignored = not get_policy(self.policy).reads_params
        for name in (*WEIGHT_NAMES, *HALF_LIFE_NAMES):
            self.controls[name].disabled = ignored

    def _on_change(self, change: Mapping[str, Any]) -> None:
        if self._quiet_depth:
            return
        name = next(key for key, control in self.controls.items() if control is change["owner"])
        if name in WEIGHT_NAMES:
            current = list(self.weights)
            current[WEIGHT_NAMES.index(name)] = float(change["old"])  # the others' proportions
            rescaled = rescale_weights(current, WEIGHT_NAMES.index(name), float(change["new"]))
            with self._quiet():
                for other, value in zip(WEIGHT_NAMES, rescaled):
                    self.controls[other].value = value
        self.refresh()

    @contextmanager
    def _quiet(self) -> Iterator[None]:
        """Move controls without their observers recomputing (one refresh follows)."""
        self._quiet_depth += 1
        try:
            yield
        finally:
            self._quiet_depth -= 1

    # ------------------------------------------------------------------ computing

    def _decide(self, entry: PresetPools, policy: str, params: PolicyParams, capacity: int) -> pd.DataFrame:
        if vectorised(policy):
            return decisions_for(entry.prepared, policy, params, capacity)
        return self._scalar(entry.preset, policy, params, capacity)

    def _explain(self, entry: PresetPools) -> Explanation:
        case = entry.pool_set.case(self.case_id)
        return explain(
            case.facts,
            self.capacity,
            policy=self.policy,
            usage=case.usage,
            now=entry.pool_set.protocol.evaluation_time,
            params=self.params,
            support_fact_ids=case.support_fact_ids,
        )

    def _first_evicted(self) -> str:
        evicted = self.results.loc[~self.results["support_retained"], "case_id"]
        return str(evicted.iloc[0] if len(evicted) else self.results["case_id"].iloc[0])

    @staticmethod
    def _check_case(entry: PresetPools, case_id: str) -> str:
        entry.pool_set.case(case_id)  # an unknown id fails here, listing the known ones
        return case_id

    # ------------------------------------------------------------------ showing

    def _view(self, entry: PresetPools) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        reference = entry.reference[entry.reference["capacity"] == self.capacity]
        cases = pd.DataFrame(
            {
                "scenario": self.results["scenario"],
                "support_rank": self.results["support_rank"],
                "support_retained": self.results["support_retained"],
                "reserved": self.results["kept_by_reservation"],
                "selected": self.results["case_id"] == self.case_id,
            }
        )
        return self.summary, reference, cases

    def _view_options(self, entry: PresetPools) -> dict[str, Any]:
        weights = ", ".join(f"{value:.2f}" for value in self.weights)
        params = self.params
        return {
            "policy": self.policy,
            "capacity": self.capacity,
            "subtitle": (
                f"{self.policy} at capacity {self.capacity}, preset {entry.preset}\nhybrid-v1 weights ({weights}),"
                f" half-lives {params.confirmation_half_life_days:.3g} / {params.access_half_life_days:.3g} days"
            ),
            "source": dataset_label(entry.pool_set),
        }

    def _details_html(self, entry: PresetPools) -> str:
        return details_html(entry.pool_set, self.results, self.explanation, self.case_id, self.policy, self.capacity)

    def _control_panel(self) -> w.Widget:
        c = self.controls
        return w.HBox(
            [
                w.VBox([w.HTML("<b>weights</b> (sum 1; hybrid-v1 and oracle read them)"),
                        *(c[name] for name in WEIGHT_NAMES),
                        w.HTML("<b>half-lives</b> (days, log scale)"), *(c[name] for name in HALF_LIFE_NAMES)]),
                w.VBox([w.HTML("<b>decision</b>"), c["capacity"], c["policy"], c["preset"], c["case_id"]]),
            ],
            layout=w.Layout(flex_flow="row wrap"),
        )

    @staticmethod
    def _make_controls(entry: PresetPools, params: PolicyParams, preset: str, policy: str,
                       capacity: int) -> dict[str, w.ValueWidget]:
        policy, capacity = _checked_policy(policy), _checked_capacity(capacity)
        # Wide tracks (over 300 px): about 3 px or more per 0.01 of weight, so a weight can be set
        # to the step by hand.
        slider = {"style": {"description_width": "8em"}, "layout": w.Layout(width="42em"), "continuous_update": False}
        other = {"style": {"description_width": "8em"}, "layout": w.Layout(width="24em")}
        low, high = (math.log10(days) for days in HALF_LIFE_RANGE_DAYS)
        cases = [(f"{case.scenario} · {case.case_id}", case.case_id) for case in entry.pool_set.cases]
        return {
            **{name: w.FloatSlider(value=value, min=0.0, max=1.0, step=0.01, readout_format=".2f", description=label,
                                   **slider)
               for name, value, label in zip(WEIGHT_NAMES, params.weights, ("confidence", "confirmation", "access"))},
            **{name: w.FloatLogSlider(value=float(getattr(params, name)), base=10, min=low, max=high, step=0.01,
                                      readout_format=".1f", description=label, **slider)
               for name, label in zip(HALF_LIFE_NAMES, ("confirmation", "access"))},
            "capacity": w.IntSlider(value=capacity, min=CAPACITY_RANGE[0], max=CAPACITY_RANGE[1],
                                    continuous_update=False, description="capacity", **other),
            "policy": w.Dropdown(options=known_policies(), value=policy, description="policy",
                                 **other),
            "preset": w.Dropdown(options=list(PRESETS), value=preset, description="preset", **other),
            "case_id": w.Dropdown(options=cases, value=cases[0][1], description="case", **other),
        }  # fmt: skip

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def title_html(lines: Sequence[str]) -> str:
    """The explorer's title lines as page text: the setting in bold, the data's origin below."""
    first, *rest = [html.escape(line) for line in lines] or [""]
    return '<div style="line-height: 1.4">' + "<br>".join([f"<b>{first}</b>", *rest]) + "</div>"


def _checked_policy(policy: Any) -> str:
    if policy not in known_policies():
        raise ContractError(f"unknown policy {policy!r}; known: {', '.join(known_policies())}")
    return policy


def _checked_capacity(capacity: Any) -> int:
    low, high = CAPACITY_RANGE
    return check_capacity_range([capacity], low=low, high=high)[0]


