"""The 45 prepared cases: pools of 10 facts with scenario metadata (spec 2.4, 2.7-2.9, 7).

A case's pool is its support fact plus 9 distractors drawn from the bank at an offset derived
from the case id. Metadata (confidence, timestamps, confirmations, access heat) follows the
scenario tables of spec 2.9; confidences are computed in doubles exactly as written there.
Facts are sorted by id before they reach a selector, so the selector's tie-break by input
position is a tie-break by fact id.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ContractError, DatasetError
from ..policies import check_capacity_range
from ..times import iso_z
from .dataset import BankRecord, Dataset, answer_text, build_bank, check_selection, render_evidence, select_official
from .demo import open_dataset
from .protocol import Protocol, Variant

if TYPE_CHECKING:
    from .runspec import RunSpec

CONFIRMED_DAYS_AGO = 7
OLD_DAYS = 180
RECENT_DAYS = 30
ACCESS_HEAT = 8.0
ACCESS_COUNT = 8
FACT_SOURCE_PREFIX = "deermem-eviction-eval:"
SYNTHETIC_QUESTION_TYPE = "synthetic-correction"


def offset_for(namespace: str, case_id: str, bank_size: int) -> int:
    """First 4 bytes of SHA-256 of ``{namespace}:{case_id}``, big-endian, modulo the bank size."""
    digest = hashlib.sha256(f"{namespace}:{case_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % bank_size


def draw(bank: tuple[Any, ...], offset: int, count: int) -> list[Any]:
    """``bank[(offset + i) mod len(bank)]`` for i = 0..count-1, in draw order."""
    return [bank[(offset + i) % len(bank)] for i in range(count)]


@dataclass(frozen=True)
class Case:
    """One prepared case: the question, its reference answer and the 10-fact pool."""

    case_id: str
    source: str  # "longmemeval" or "synthetic"
    scenario: str
    question_type: str
    question: str
    answer: str  # the reference answer, stringified, not stripped
    question_date: str | None
    loss_rank: int
    offset: int
    facts: tuple[dict[str, Any], ...]  # sorted by id
    usage: dict[str, dict[str, Any]]
    support_fact_ids: tuple[str, ...]
    distractor_sources: tuple[str, ...]  # source question ids in draw order
    fact_sources: dict[str, str] = field(repr=False, default_factory=dict)  # fact id -> source record id

    @property
    def outranking_count(self) -> int:
        return self.loss_rank - 1

    @property
    def fact_ids(self) -> list[str]:
        return [fact["id"] for fact in self.facts]


@dataclass(frozen=True)
class FactSpec:
    """A fact's scenario metadata before it gets an id and content."""

    confidence: float
    created_days_ago: int = OLD_DAYS
    confirmed: bool = False
    heated: bool = False


def support_spec(scenario: str) -> FactSpec:
    return {
        "confirmation_help": FactSpec(0.70, confirmed=True),
        "access_help": FactSpec(0.70, heated=True),
        "confidence_control": FactSpec(0.95, created_days_ago=RECENT_DAYS),
        "noisy_signal_control": FactSpec(0.90),
        "correction_reserve": FactSpec(0.65),
    }[scenario]


def distractor_spec(scenario: str, i: int, k: int) -> FactSpec:
    """Metadata of distractor ``i`` (draw order) with ``k`` = loss rank - 1 outrankers (spec 2.9)."""
    if scenario in ("confirmation_help", "access_help"):
        return FactSpec(0.94 - 0.02 * i if i < k else 0.68 - 0.02 * (i - k))
    if scenario == "confidence_control":
        if i < 5:
            return FactSpec(0.94 - 0.02 * i)
        return FactSpec(0.70, confirmed=i % 2 == 1, heated=i % 2 == 0)
    if scenario == "noisy_signal_control":
        noisy = i < k
        return FactSpec(0.70, confirmed=noisy and i % 2 == 1, heated=noisy and i % 2 == 0)
    if scenario == "correction_reserve":
        return FactSpec(0.90 - 0.03 * i if i < k else 0.60 - 0.02 * (i - k))
    raise DatasetError(f"unknown scenario {scenario!r}")


def build_fact(
    fact_id: str, content: str, category: str, spec: FactSpec, source_id: str, clock: _dt.datetime
) -> dict[str, Any]:
    fact: dict[str, Any] = {
        "id": fact_id,
        "content": content,
        "category": category,
        "confidence": spec.confidence,
        "createdAt": iso_z(clock - _dt.timedelta(days=spec.created_days_ago), seconds=True),
        "source": FACT_SOURCE_PREFIX + source_id,
    }
    if spec.confirmed:
        fact["lastConfirmedAt"] = iso_z(clock - _dt.timedelta(days=CONFIRMED_DAYS_AGO), seconds=True)
        fact["confirmationCount"] = 1
    return fact


def usage_entry(clock: _dt.datetime) -> dict[str, Any]:
    # Accessed exactly at the clock, so the heat is not decayed at scoring time.
    return {"accessHeat": ACCESS_HEAT, "accessCount": ACCESS_COUNT, "lastAccessedAt": iso_z(clock, seconds=True)}


def fact_ids_for(case_id: str, draws: list[BankRecord], scheme: str) -> tuple[str, list[str]]:
    """Support and distractor ids: ``gold_``/``d_`` (``protocol``) or the source ids (``raw``)."""
    if scheme == "protocol":
        return f"gold_{case_id}", [f"d_{case_id}_{i}_{record.question_id}" for i, record in enumerate(draws)]
    return case_id, [record.question_id for record in draws]


@dataclass(frozen=True)
class CaseSource:
    """What a case takes from the dataset or the synthetic manifest, before its pool is drawn."""

    case_id: str
    source: str
    scenario: str
    question_type: str
    question: str
    answer: str
    question_date: str | None
    loss_rank: int
    support_content: str
    support_category: str


def build_case(item: CaseSource, bank: tuple[BankRecord, ...], protocol: Protocol, variant: Variant) -> Case:
    """Draw the case's 9 distractors and give all 10 facts their ids and scenario metadata."""
    pool = protocol.config.pool
    clock = protocol.evaluation_time
    case_id, scenario = item.case_id, item.scenario
    offset = offset_for(pool.offset_namespace, case_id, len(bank))
    draws = draw(bank, offset, pool.distractors)
    sources = [case_id] + [record.question_id for record in draws]
    if len(set(sources)) != len(sources):
        raise DatasetError(f"case {case_id}: the pool would contain a source record twice: {sources}")
    support_id, distractor_ids = fact_ids_for(case_id, draws, variant.fact_ids)
    support = support_spec(scenario)
    facts = [build_fact(support_id, item.support_content, item.support_category, support, case_id, clock)]
    usage = {support_id: usage_entry(clock)} if support.heated else {}
    fact_sources = {support_id: case_id}
    for i, (fact_id, record) in enumerate(zip(distractor_ids, draws)):
        spec = distractor_spec(scenario, i, item.loss_rank - 1)
        category = "preference" if record.question_type == "single-session-preference" else "context"
        facts.append(build_fact(fact_id, record.evidence, category, spec, record.question_id, clock))
        fact_sources[fact_id] = record.question_id
        if spec.heated:
            usage[fact_id] = usage_entry(clock)
    if len({fact["id"] for fact in facts}) != len(facts):
        raise DatasetError(f"case {case_id}: fact ids are not unique under fact_ids={variant.fact_ids}")
    facts.sort(key=lambda fact: fact["id"])
    return Case(
        case_id=case_id,
        source=item.source,
        scenario=scenario,
        question_type=item.question_type,
        question=item.question,
        answer=item.answer,
        question_date=item.question_date,
        loss_rank=item.loss_rank,
        offset=offset,
        facts=tuple(facts),
        usage=usage,
        support_fact_ids=(support_id,),
        distractor_sources=tuple(record.question_id for record in draws),
        fact_sources=fact_sources,
    )


@dataclass(frozen=True)
class PoolSet:
    """The prepared cases of one (protocol, dataset, variant), in build order, and the bank they drew from."""

    protocol: Protocol
    dataset: Dataset
    variant: Variant
    bank: tuple[BankRecord, ...]
    cases: tuple[Case, ...]

    def case(self, case_id: str) -> Case:
        for case in self.cases:
            if case.case_id == case_id:
                return case
        raise DatasetError(f"no case {case_id!r}; known cases: {', '.join(c.case_id for c in self.cases)}")

    def check_capacities(self, capacities: Sequence[int], where: str) -> None:
        """:func:`check_capacities` against the smallest pool of the set."""
        check_capacities(capacities, min(len(case.facts) for case in self.cases), where)


def check_capacities(capacities: Sequence[int], pool_size: int, where: str) -> None:
    """Every capacity must leave something to evict and keep something: 1 <= k <= pool size - 1."""
    check_capacity_range(capacities, low=1, high=pool_size - 1, where=f"pool size {pool_size}, {where}")


def build_pools(protocol: Protocol, dataset: Dataset, variant: Variant) -> PoolSet:
    """Recompute the selection, check it against the manifest and build all cases in build order."""
    check_clock(protocol)
    header = variant.evidence_header
    selection = select_official(dataset, protocol.official, header)
    check_selection(selection, protocol.official, protocol.files.official_manifest)
    bank = build_bank(dataset, protocol.config.pool, header)
    items = official_sources(protocol, dataset, header) + synthetic_sources(protocol)
    return PoolSet(protocol, dataset, variant, bank, tuple(build_case(item, bank, protocol, variant) for item in items))


def check_clock(protocol: Protocol) -> None:
    """The facts are dated up to :data:`OLD_DAYS` days before the clock: it must leave them a date."""
    clock = protocol.evaluation_time
    if clock - _dt.datetime.min.replace(tzinfo=clock.tzinfo) < _dt.timedelta(days=OLD_DAYS):
        raise ContractError(
            f"evaluation_time {iso_z(clock)} (the run's clock) is too early: the pools date facts"
            f" up to {OLD_DAYS} days before it, and no date comes before the year 1"
        )


def official_sources(protocol: Protocol, dataset: Dataset, header: str) -> list[CaseSource]:
    """Scenarios in manifest order; inside one, ids sorted by (question_type, id) get the loss ranks."""
    items = []
    for scenario in protocol.official.scenario_order:
        rows = sorted(
            (dataset.by_id[case_id] for case_id in protocol.official.scenarios[scenario]),
            key=lambda row: (row["question_type"], row["question_id"]),
        )
        for row, loss_rank in zip(rows, protocol.official.loss_ranks):
            items.append(
                CaseSource(
                    case_id=row["question_id"],
                    source="longmemeval",
                    scenario=scenario,
                    question_type=row["question_type"],
                    question=row["question"],
                    answer=answer_text(row),
                    question_date=row.get("question_date") or None,
                    loss_rank=loss_rank,
                    support_content=render_evidence(row, header),
                    support_category="context",
                )
            )
    return items


def synthetic_sources(protocol: Protocol) -> list[CaseSource]:
    """The correction guards in manifest order: no question date, support category ``correction``."""
    return [
        CaseSource(
            case_id=item.case_id,
            source="synthetic",
            scenario=protocol.synthetic.scenario,
            question_type=SYNTHETIC_QUESTION_TYPE,
            question=item.question,
            answer=item.answer,
            question_date=None,
            loss_rank=item.loss_rank,
            support_content=item.support_fact,
            support_category="correction",
        )
        for item in protocol.synthetic.cases
    ]


def open_pools(spec: RunSpec, *, notice: Callable[[Dataset, Protocol], None] | None = None) -> PoolSet:
    """The 45 pools a run spec describes: the one way from a spec to pools.

    The spec is resolved (:func:`~evictlab.core.runspec.resolve`, once per spec), then its
    protocol (its parameters and clock in the config), its dataset (the embedded demo, with the
    demo's own official manifest unless the spec names one, when the spec has none) and its
    variant make the pools. The command line builds a :class:`~evictlab.core.runspec.RunSpec`
    from its flags, the notebooks from their ``spec`` parameter, ``diff`` from two SPEC
    strings. ``notice`` is told which dataset was opened before the pools are built (the
    command line names the demo or warns about an unpinned file there). A dataset that is an
    ``evictlab import deermem`` folder gives that store's buckets as the cases
    (:func:`~evictlab.core.stores.imported.store_pool_set`).
    """
    from .stores.imported import is_import, store_pool_set  # the stores build on this module

    if spec.dataset is not None and is_import(spec.dataset):
        return store_pool_set(spec.dataset, spec)
    resolved = spec.resolved
    protocol, dataset = open_dataset(
        resolved.load_protocol(),
        spec.dataset,
        allow_unpinned=spec.allow_unpinned,
        keep_official_manifest=spec.names_official_manifest,
    )
    if notice is not None:
        notice(dataset, protocol)
    return build_pools(protocol, dataset, resolved.variant)
