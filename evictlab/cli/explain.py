"""``evictlab explain``: why one case's facts were kept or evicted by one policy at one capacity."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from ..core.pools import Case, PoolSet, check_capacities
from ..errors import ContractError
from ..policies import PolicyParams, known_policies
from ..selection.explain import (
    CHANGE_FIELDS,
    CONFIDENCE,
    CONFIRMATION,
    Explanation,
    FactExplanation,
    at_least,
    explain,
)
from ._common import (
    POLICY_HELP,
    add_command,
    add_param_option,
    add_pool_options,
    parameter_changes,
    pool_set_from,
    positive_int,
    preset_name,
    with_policy_parameters,
)

FORMATS = ("table", "json")
SCHEMA_VERSION = 1
EXAMPLE = (
    "examples (case ids of the embedded demo dataset):\n"
    "  evictlab explain --case 3d2da0bb --policy confidence --capacity 7\n"
    "  evictlab explain --case 86646649 --policy hybrid-v1 --capacity 5 --format json\n"
    "  evictlab explain --case correction_language --policy 'lru+reserve(correction)' --capacity 7 --preset pr4810-run1"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "explain", raw=True,
        description=(
            "Run one policy on one case's pool at one capacity and print, for every fact in rank\n"
            "order: its rank, score and score components, whether it was kept (or held by a\n"
            "reserved slot), its margin to the cut line (a kept fact: its score minus the best\n"
            "evicted fact's; an evicted fact: its score minus its displacer's) and, for an evicted\n"
            "fact, the kept fact that displaced it and the smallest change of one signal that\n"
            "would have kept it, or 'none' where no change of that signal is enough. The smallest\n"
            "changes are exact: the confidence policy has one signal (confidence), hybrid-v1 three\n"
            "(confidence, confirmation age, access heat); other policies report rank, score,\n"
            "margin and displacer only. The table rounds to 4 decimals (a threshold upwards, or\n"
            "'> x' where it lies a rounding error above x); --format json prints the same as one\n"
            "JSON document (full precision; non-finite numbers as null)."
        ),
        epilog=EXAMPLE,
    )
    parser.add_argument("--case", required=True, metavar="ID", help="case id (see 'evictlab run-policy' rows)")
    parser.add_argument("--policy", required=True, metavar="SPEC",
                        help=f"{POLICY_HELP} (known: {', '.join(known_policies())})")
    parser.add_argument("--capacity", required=True, type=positive_int, metavar="K", help="facts kept of the pool")
    add_param_option(parser)
    parser.add_argument("--seed", type=int, default=0, metavar="N",
                        help="seed of seeded policies such as random (default 0)")
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    add_pool_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # A bad override or policy fails before the pools are built.
    changes = parameter_changes(args.param)
    specs = with_policy_parameters([args.policy], args.param)
    if len(specs) != 1:
        raise ContractError(f"explain takes one policy; --param gives {len(specs)}: {', '.join(specs)}")
    (policy,) = specs
    pool_set = pool_set_from(args)
    case = pool_set.case(args.case)
    check_capacities([args.capacity], len(case.facts), f"case {case.case_id}")
    params = pool_set.protocol.config.hybrid.replace(**changes)
    explanation = explain(
        case.facts,
        args.capacity,
        policy=policy,
        usage=case.usage,
        now=pool_set.protocol.evaluation_time,
        params=params,
        support_fact_ids=case.support_fact_ids,
        seed=args.seed,
    )
    if args.format == "json":
        document = explanation_record(explanation, case, pool_set, preset_name(args), params, args.seed)
        print(json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False))
    else:
        print("\n".join(table_lines(explanation, case, preset_name(args))))
    return 0


# --------------------------------------------------------------------------- the record


def smallest_changes(explanation: Explanation, item: FactExplanation) -> dict[str, Any] | None:
    """The counterfactual field of each signal the policy supports (None inside: no change keeps
    it); None for a kept fact."""
    if item.kept:
        return None
    return {
        CHANGE_FIELDS[signal]: getattr(item, CHANGE_FIELDS[signal]) for signal in explanation.counterfactual_signals
    }


def explanation_record(
    explanation: Explanation, case: Case, pool_set: PoolSet, preset: str, params: PolicyParams, seed: int
) -> dict[str, Any]:
    """The JSON document of ``--format json``."""
    support = set(case.support_fact_ids)
    kept = {item.fact_id for item in explanation.facts if item.kept}
    return {
        "schema_version": SCHEMA_VERSION,
        "case_id": case.case_id,
        "scenario": case.scenario,
        "source": case.source,
        "question_type": case.question_type,
        "loss_rank": case.loss_rank,
        "preset": preset,
        "variant": pool_set.variant.as_dict(),
        "evaluation_time": pool_set.protocol.evaluation_time.isoformat(),
        "policy": explanation.policy,
        "capacity": explanation.capacity,
        "parameters": params.as_dict(),
        "seed": seed,
        "support_fact_ids": list(case.support_fact_ids),
        "support_retained": support <= kept,
        "reserved_slots": explanation.reserved_slots,
        "counterfactual_signals": list(explanation.counterfactual_signals),
        "facts": [
            {
                "rank": item.rank,
                "fact_id": item.fact_id,
                "support": item.fact_id in support,
                "position": item.position,
                "status": item.status,
                "score": _finite(item.score),
                "components": {name: _finite(value) for name, value in item.components.items()},
                "margin": _finite(item.margin),
                "displaced_by": item.displaced_by,
                "smallest_changes": smallest_changes(explanation, item),
            }
            for item in explanation.facts
        ],
    }


def _finite(value: float | None) -> float | None:
    """JSON has no NaN or infinity: such values (and None) become null."""
    if value is None or not math.isfinite(value):
        return None
    return value


# --------------------------------------------------------------------------- the table


def table_lines(explanation: Explanation, case: Case, preset: str) -> list[str]:
    """The human table: a header, one line per fact in rank order, then why each evicted fact went."""
    support = set(case.support_fact_ids)
    kept = sum(item.kept for item in explanation.facts)
    retained = all(item.kept for item in explanation.facts if item.fact_id in support)
    components = list(dict.fromkeys(name for item in explanation.facts for name in item.components))
    width = max([len("fact"), *(len(item.fact_id) + 2 for item in explanation.facts)])
    lines = [
        f"case {case.case_id} ({case.scenario}, loss rank {case.loss_rank}), preset {preset}" if support else
        f"bucket {case.case_id} of an imported store (no support fact), preset {preset}",
        (
            f"{explanation.policy} at capacity {explanation.capacity}: kept {kept} of {len(explanation.facts)}"
            f" ({explanation.reserved_slots} reserved)"
            + (f"; support {'retained' if retained else 'EVICTED'}" if support else "")
        ),
        "",
    ]
    header = [f"{'rank':>4}", f"{'fact':<{width}}", f"{'status':<8}", f"{'score':>10}", f"{'margin':>10}"]
    header += [f"{name:>{max(10, len(name))}}" for name in components]
    lines.append("  ".join(header))
    for item in explanation.facts:
        marker = " *" if item.fact_id in support else ""
        cells = [
            f"{item.rank:>4}",
            f"{item.fact_id + marker:<{width}}",
            f"{item.status:<8}",
            f"{_number(item.score):>10}",
            f"{_signed(item.margin):>10}",
        ]
        cells += [f"{_number(item.components.get(name)):>{max(10, len(name))}}" for name in components]
        lines.append("  ".join(cells))
    lines.append("* support fact. margin: a kept fact's score minus the best evicted fact's; an evicted")
    lines.append("  fact's score minus its displacer's (- when there is none).")
    evicted = [item for item in explanation.facts if not item.kept]
    if evicted:
        lines += ["", "why evicted:"]
        for item in evicted:
            lines.append(f"  {item.fact_id}{' (support)' if item.fact_id in support else ''}")
            if item.displaced_by is None:
                lines.append("    displaced by: none (no kept fact whose place it could take)")
            else:
                lines.append(f"    displaced by: {item.displaced_by} (margin {_signed(item.margin)})")
            lines.append(f"    smallest single-signal change that keeps it: {change_text(explanation, item)}")
    return lines


def change_text(explanation: Explanation, item: FactExplanation) -> str:
    """``"confidence >= 0.83 | confirmed within 41 days | none by access heat"``, or why there is none."""
    if not explanation.counterfactual_signals:
        return f"not computed for {explanation.policy} (only for confidence and hybrid-v1)"
    if item.displaced_by is None:
        return "none (no kept fact to displace)"
    values = {signal: getattr(item, CHANGE_FIELDS[signal]) for signal in explanation.counterfactual_signals}
    parts = []
    for signal, value in values.items():
        if signal == CONFIDENCE:
            parts.append("none by confidence" if value is None else f"confidence {at_least(value)}")
        elif signal == CONFIRMATION:
            parts.append("none by confirmation" if value is None else f"confirmed within {value} days")
        else:
            parts.append("none by access heat" if value is None else f"access heat >= {value} (accessed now)")
    if all(value is None for value in values.values()):
        return "none (" + "; ".join(parts) + ")"
    return " | ".join(parts)


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4f}"


def _signed(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:+.4f}"
