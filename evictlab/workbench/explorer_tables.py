"""The explorer's tables (:class:`evictlab.workbench.widgets.Explorer`): one row per case
(:func:`decisions_for`) on pools prepared once per preset (:class:`PoolCache`), the totals per
scenario (:func:`retention_summary`), and its text as HTML: totals, the selected case's
explanation as a table, and the cases whose support was evicted.

Statuses, margins and the smallest changes that would have kept a fact come from
:mod:`evictlab.selection.explain`; this module only counts, words and escapes them.
"""

from __future__ import annotations

import html
import math
import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..core.pools import PoolSet
from ..core.protocol import PRESETS
from ..core.runspec import RunSpec
from ..errors import ContractError
from ..policies import PolicyParams
from ..policies.hybrid import CORRECTION
from ..policies.signals import fact_key, is_category
from ..selection.decisions import OUTPUT_DTYPES, decide_grid
from ..selection.engine import PreparedCases
from ..selection.explain import Explanation, FactExplanation, at_least
from .loaders import load_pool_set
from .plots import ALL_CASES

CAPACITY_RANGE = (1, 9)
REFERENCE_POLICIES = ("hybrid-v1", "confidence")


@dataclass
class PresetPools:
    """One preset's pools, prepared once, and the DeerMem reference retention at every capacity."""

    preset: str
    pool_set: PoolSet
    prepared: PreparedCases
    reference: pd.DataFrame = field(repr=False)  # scenario group x capacity x policy


class PoolCache:
    """Pools per preset, each built on first use from one run spec under that preset.

    ``spec`` (default: the protocol's own files on ``dataset``, None being the embedded demo)
    brings its dataset, protocol files, parameters, clock and variant overrides to every preset.
    """

    def __init__(
        self, dataset: str | os.PathLike | None = None, *, allow_unpinned: bool = False, spec: RunSpec | None = None
    ) -> None:
        self.spec = spec if spec is not None else RunSpec().on_dataset(dataset, allow_unpinned=allow_unpinned)
        self._entries: dict[str, PresetPools] = {}

    def get(self, preset: str) -> PresetPools:
        if preset not in PRESETS:
            raise ContractError(f"unknown preset {preset!r}; known presets: {', '.join(PRESETS)}")
        if preset not in self._entries:
            pool_set = load_pool_set(self.spec.with_preset(preset))
            prepared = PreparedCases.from_pool_set(pool_set)
            defaults = pool_set.protocol.config.hybrid
            capacities = range(CAPACITY_RANGE[0], CAPACITY_RANGE[1] + 1)
            frames = [
                retention_summary(decisions_for(prepared, policy, defaults, capacity)).assign(
                    policy=policy, capacity=capacity
                )
                for policy in REFERENCE_POLICIES
                for capacity in capacities
            ]
            self._entries[preset] = PresetPools(preset, pool_set, prepared, pd.concat(frames, ignore_index=True))
        return self._entries[preset]


def decisions_for(prepared: PreparedCases, policy: str, params: PolicyParams, capacity: int) -> pd.DataFrame:
    """One row per case: the explorer's view of :func:`~evictlab.selection.decisions.decide_grid`.

    Columns: ``case_id``, ``scenario``, ``source``, ``support_fact_id``, ``kept_fact_ids``, the
    decision outputs, ``support_status`` (the support's
    :attr:`~evictlab.selection.explain.FactExplanation.status`: ``kept``, ``reserved`` or
    ``evicted``) and ``kept_by_reservation`` (held by a reserved correction slot).
    """
    decisions = decide_grid(prepared, [policy], [params], [capacity], details=True)
    supports = [str(case.support_fact_ids[0]) for case in prepared.cases]
    frame = pd.DataFrame(
        {
            "case_id": prepared.case_ids,
            "scenario": prepared.scenarios,
            "source": prepared.sources,
            "support_fact_id": supports,
            "kept_fact_ids": decisions["kept_fact_ids"].to_numpy(),
            **{name: decisions[name].to_numpy() for name in OUTPUT_DTYPES},
        }
    )
    frame["support_status"] = [
        support_status(kept, support, corrections, int(slots))
        for kept, support, corrections, slots in zip(frame["kept_fact_ids"], supports, correction_ids(prepared),
                                                     frame["reserved_correction_slots"])
    ]
    frame["kept_by_reservation"] = frame["support_status"] == "reserved"
    return frame


def support_status(kept_fact_ids: Sequence[str], support: str, corrections: frozenset[str], reserved_slots: int) -> str:
    """The support's :attr:`~evictlab.selection.explain.FactExplanation.status` from a kept list in rank order.

    The reserved slots go to the best-ranked corrections (:class:`evictlab.policies.ties.CutLine`),
    and those are all kept: a kept correction holds one exactly when fewer than
    ``reserved_slots`` corrections are kept above it.
    """
    if support not in kept_fact_ids:
        return "evicted"
    if support in corrections:
        above = kept_fact_ids[: list(kept_fact_ids).index(support)]
        if sum(fact_id in corrections for fact_id in above) < reserved_slots:
            return "reserved"
    return "kept"


def correction_ids(prepared: PreparedCases) -> tuple[frozenset[str], ...]:
    """The ids of each case's facts of the reserved category (``correction``), computed once per pool set."""
    cached = _CORRECTIONS.get(prepared)
    if cached is None:
        cached = _CORRECTIONS[prepared] = tuple(
            frozenset(fact_key(fact, index) for index, fact in enumerate(case.facts) if is_category(fact, CORRECTION))
            for case in prepared.cases
        )
    return cached


_CORRECTIONS: weakref.WeakKeyDictionary[PreparedCases, tuple[frozenset[str], ...]] = weakref.WeakKeyDictionary()


def retention_summary(results: pd.DataFrame) -> pd.DataFrame:
    """Supports retained per scenario (in case order) and over all cases: ``scenario``, ``retained``, ``cases``.

    The explorer holds one decision per case (seeded policies at seed 0), so these are
    :func:`evictlab.selection.decisions.retention_counts` as plain sums, counted with numpy: a slider
    move cannot afford the grouped frame's 5-10 ms.
    """
    codes, scenarios = pd.factorize(results["scenario"], sort=False)
    retained = np.bincount(codes, weights=results["support_retained"].to_numpy(dtype=float), minlength=len(scenarios))
    cases = np.bincount(codes, minlength=len(scenarios))
    return pd.DataFrame({
        "scenario": [*map(str, scenarios), ALL_CASES],
        "retained": np.append(retained, retained.sum()).astype(np.int64),
        "cases": np.append(cases, cases.sum()).astype(np.int64),
    })


def details_html(pool_set: PoolSet, results: pd.DataFrame, explanation: Explanation, case_id: str, policy: str,
                 capacity: int) -> str:
    """The explorer's text: totals, the selected case's explanation table, the evicted supports."""
    case = pool_set.case(case_id)
    retained = int(results["support_retained"].sum())
    support = set(case.support_fact_ids)
    facts = [item for item in explanation.facts if item.fact_id in support]
    lines = [
        (
            f"<p><b>{html.escape(policy)}</b> at capacity {capacity}: support retained in {retained} of"
            f" {len(results)} cases.</p>"
        ),
        f"<p><b>case {html.escape(case_id)}</b> ({html.escape(case.scenario)}, loss rank {case.loss_rank}): "
        + "; ".join(html.escape(_support_sentence(item, explanation)) for item in facts)
        + "</p>",
        explanation_table_html(explanation, support),
    ]
    lost = results[~results["support_retained"]]
    if len(lost):
        listed = ", ".join(f"{row.case_id} ({row.scenario}, rank {row.support_rank})" for row in lost.itertuples())
        lines.append(f"<p>support evicted in {len(lost)} cases: {html.escape(listed)}</p>")
    return "\n".join(lines)


def explanation_table_html(explanation: Explanation, support: set[str]) -> str:
    """Every fact in rank order: status, score, components, margin, displacer and, for the
    signals the policy has them, the smallest changes that would have kept an evicted fact."""
    components = list(dict.fromkeys(name for item in explanation.facts for name in item.components))
    changes = {"confidence": ("min_confidence", "kept if confidence"),
               "confirmation": ("confirm_within_days", "kept if confirmed within (days)"),
               "access": ("min_access_heat", "kept if access heat >=")}
    shown = [changes[signal] for signal in explanation.counterfactual_signals]
    header = ["rank", "fact", "status", "score", *components, "margin", "displaced by", *(label for _, label in shown)]
    rows = []
    for item in explanation.facts:
        name = f"<b>{html.escape(item.fact_id)}</b> (support)" if item.fact_id in support else html.escape(item.fact_id)
        tied = _tied_at_cut(item)
        cells = [str(item.rank), name, item.status + (" (tie)" if tied else ""), _number(item.score)]
        cells += [_number(item.components.get(component)) for component in components]
        cells += ["tie" if tied else _number(item.margin, signed=True), html.escape(item.displaced_by or "")]
        for field_name, _ in shown:
            value = getattr(item, field_name)
            text = at_least(value) if field_name == "min_confidence" and value is not None else repr(value)
            cells.append("" if item.kept else ("none" if value is None else html.escape(text)))
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    head = "<tr>" + "".join(f"<th>{html.escape(label)}</th>" for label in header) + "</tr>"
    return f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def _number(value: float | None, *, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def _tied_at_cut(item: FactExplanation) -> bool:
    """The fact scores exactly what the fact across the cut line scores: the policy's tie-break
    (for DeerMem's policies, the earlier input position), not the score, put it on its side."""
    return item.margin == 0


def _tie_phrase(item: FactExplanation, explanation: Explanation) -> str:
    tied = sum(other.score == item.score for other in explanation.facts)
    if tied == len(explanation.facts):
        return f"by the tie-break: all {tied} facts score {item.score:.4f} (an all-way tie)"
    return f"by the tie-break: {tied} facts score {item.score:.4f}"


def _support_sentence(item: FactExplanation, explanation: Explanation) -> str:
    tie = _tied_at_cut(item)
    margin = "" if item.margin is None or tie else f", margin {item.margin:+.4f}"
    where = f"{item.status} at rank {item.rank}" + (f" {_tie_phrase(item, explanation)}" if tie else margin)
    text = f"support {item.fact_id} {where}"
    if item.kept:
        return text
    if item.displaced_by is not None:
        text += f", displaced by {item.displaced_by}"
    changes = []
    if item.min_confidence is not None:
        changes.append(f"confidence {at_least(item.min_confidence)}")
    if item.confirm_within_days is not None:
        changes.append(f"confirmed within {item.confirm_within_days} days")
    if item.min_access_heat is not None:
        changes.append(f"access heat >= {item.min_access_heat}")
    if changes:
        text += "; kept if " + " or ".join(changes)
    elif explanation.counterfactual_signals:
        text += "; no single-signal change keeps it"
    return text


__all__ = ["details_html", "explanation_table_html"]
