"""The explorer's text (:class:`evictlab.workbench.widgets.Explorer`): totals, the selected case's
explanation as a table, and the cases whose support was evicted, as HTML.

Statuses, margins and the smallest changes that would have kept a fact come from
:mod:`evictlab.selection.explain`; this module only words and escapes them.
"""

from __future__ import annotations

import html
import math

import pandas as pd

from ..core.pools import PoolSet
from ..selection.explain import Explanation, FactExplanation, at_least


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
    if item.kept:
        return f"support {item.fact_id} {where}"
    text = f"support {item.fact_id} {where}"
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
