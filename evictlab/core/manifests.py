"""The two case manifests: the official LongMemEval selection and the synthetic corrections (spec 2.2, 2.3).

Parsed strictly like the config (:mod:`evictlab.core.protocol` reads the files and checks them
against each other): unknown keys, wrong types and inconsistent values are errors naming the
file and the key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from .schema import Section

SCENARIO_ORDER = ("confirmation_help", "access_help", "confidence_control", "noisy_signal_control")
SYNTHETIC_SCENARIO = "correction_reserve"
#: Every scenario in display order: the four official ones, then the synthetic one.
SCENARIOS: tuple[str, ...] = (*SCENARIO_ORDER, SYNTHETIC_SCENARIO)
ELIGIBLE_TYPES = ("knowledge-update", "temporal-reasoning")


def in_known_order(values: Iterable[str], known: Sequence[str]) -> list[str]:
    """The distinct ``values``: those in ``known`` in its order, then any others sorted."""
    present = set(values)
    return [value for value in known if value in present] + sorted(present - set(known))


def scenario_order(values: Iterable[str]) -> list[str]:
    """The distinct scenarios in ``values``: :data:`SCENARIOS` order first, unknown ones sorted after."""
    return in_known_order(values, SCENARIOS)


@dataclass(frozen=True)
class SelectionRule:
    """The parameters of the official case selection (spec 2.3), read from the manifest.

    Lengths are Unicode code-point counts; ``answer_excluded_substrings`` match ignoring case.
    """

    eligible_question_types: tuple[str, ...]
    excluded_pilot_ids: tuple[str, ...]
    exclude_abstention_suffix: str
    answer_min_chars: int
    answer_max_chars: int
    answer_excluded_substrings: tuple[str, ...]
    evidence_min_chars: int
    evidence_max_chars: int
    take_per_question_type: int
    cases_per_type_per_scenario: int

    def as_dict(self) -> dict[str, Any]:
        return {
            f.name: list(value) if isinstance(value := getattr(self, f.name), tuple) else value
            for f in fields(self)
        }


@dataclass(frozen=True)
class OfficialManifest:
    protocol_id: str
    scenario_order: tuple[str, ...]
    loss_ranks: tuple[int, ...]
    scenarios: dict[str, tuple[str, ...]]
    selection: SelectionRule

    @property
    def case_ids(self) -> list[str]:
        return [case_id for name in self.scenario_order for case_id in self.scenarios[name]]


def parse_official_manifest(data: Any, *, file: str, pool_size: int) -> OfficialManifest:
    root = Section(data, file=file)
    root.expect_keys({"schema_version", "protocol_id", "selection", "scenario_order", "loss_ranks", "scenarios"})
    root.literal("schema_version", 1)
    order = root.string_list("scenario_order")
    if order != SCENARIO_ORDER:
        raise root.error(f"must be {list(SCENARIO_ORDER)}, got {list(order)}", "scenario_order")
    selection = _parse_selection(root.section("selection"), len(order))
    loss_ranks = root.integer_list("loss_ranks", 1, pool_size, unique=False)
    scenarios = root.section("scenarios")
    scenarios.expect_keys(set(order))
    lists = {name: scenarios.string_list(name) for name in order}
    per_scenario = len(selection.eligible_question_types) * selection.cases_per_type_per_scenario
    for name, ids in lists.items():
        if len(ids) != len(loss_ranks):
            raise scenarios.error(f"must list {len(loss_ranks)} case ids (one per loss rank), got {len(ids)}", name)
        if len(ids) != per_scenario:
            raise scenarios.error(
                f"must list {per_scenario} case ids (selection: {len(selection.eligible_question_types)}"
                f" types x cases_per_type_per_scenario), got {len(ids)}",
                name,
            )
    all_ids = [case_id for ids in lists.values() for case_id in ids]
    if len(set(all_ids)) != len(all_ids):
        raise scenarios.error("a case id appears in more than one scenario")
    return OfficialManifest(root.string("protocol_id"), order, loss_ranks, lists, selection)


def _parse_selection(section: Section, scenario_count: int) -> SelectionRule:
    section.expect_keys(
        {"eligible_question_types", "excluded_pilot_ids", "exclude_abstention_suffix",
         "answer_min_chars", "answer_max_chars", "answer_excluded_substrings",
         "evidence_min_chars", "evidence_max_chars", "take_per_question_type",
         "cases_per_type_per_scenario"}
    )
    types = section.string_list("eligible_question_types")
    for kind in types:
        if kind not in ELIGIBLE_TYPES:
            raise section.error(
                f"values must be {' or '.join(ELIGIBLE_TYPES)}, got {kind!r}", "eligible_question_types"
            )
    bounds = {}
    for name in ("answer", "evidence"):
        low = section.integer(f"{name}_min_chars", 0)
        high = section.integer(f"{name}_max_chars", 1)
        if low > high:
            raise section.error(f"must be >= {name}_min_chars ({low}), got {high}", f"{name}_max_chars")
        bounds[name] = (low, high)
    take = section.integer("take_per_question_type", 1)
    per_scenario = section.integer("cases_per_type_per_scenario", 1)
    if take != scenario_count * per_scenario:
        raise section.error(
            f"must equal {scenario_count} scenarios x cases_per_type_per_scenario"
            f" = {scenario_count * per_scenario}, got {take}",
            "take_per_question_type",
        )
    return SelectionRule(
        eligible_question_types=types,
        excluded_pilot_ids=section.string_list("excluded_pilot_ids", non_empty=False),
        exclude_abstention_suffix=section.string("exclude_abstention_suffix"),
        answer_min_chars=bounds["answer"][0],
        answer_max_chars=bounds["answer"][1],
        answer_excluded_substrings=section.string_list("answer_excluded_substrings", non_empty=False),
        evidence_min_chars=bounds["evidence"][0],
        evidence_max_chars=bounds["evidence"][1],
        take_per_question_type=take,
        cases_per_type_per_scenario=per_scenario,
    )


@dataclass(frozen=True)
class SyntheticCase:
    case_id: str
    support_fact: str
    question: str
    answer: str
    loss_rank: int


@dataclass(frozen=True)
class SyntheticManifest:
    protocol_id: str
    scenario: str
    cases: tuple[SyntheticCase, ...]


def parse_synthetic_manifest(data: Any, *, file: str, pool_size: int) -> SyntheticManifest:
    root = Section(data, file=file)
    root.expect_keys({"schema_version", "protocol_id", "scenario", "cases"})
    root.literal("schema_version", 1)
    scenario = root.string("scenario")
    if scenario != SYNTHETIC_SCENARIO:
        raise root.error(f"must be {SYNTHETIC_SCENARIO!r}, got {scenario!r}", "scenario")
    raw_cases = root.raw("cases")
    if not isinstance(raw_cases, list) or len(raw_cases) != 5:
        raise root.error("must be a list of exactly 5 cases", "cases")
    cases = []
    for index, item in enumerate(raw_cases):
        case = Section(item, file=file, path=f"cases[{index}]")
        case.expect_keys({"case_id", "support_fact", "question", "answer", "loss_rank"})
        cases.append(
            SyntheticCase(
                case_id=case.string("case_id"),
                support_fact=case.string("support_fact"),
                question=case.string("question"),
                answer=case.string("answer"),
                loss_rank=case.integer("loss_rank", 1, pool_size),
            )
        )
    ids = [case.case_id for case in cases]
    if len(set(ids)) != len(ids):
        raise root.error(f"case ids must be unique, got {ids}", "cases")
    return SyntheticManifest(root.string("protocol_id"), scenario, tuple(cases))
