"""Notebook-facing loaders: the pools of a run spec and tidy frames describing them.

Every notebook takes one ``spec`` parameter: a preset name, a SPEC string
``PRESET:KEY=VALUE,...`` or the path of a spec YAML file (:func:`evictlab.core.runspec.parse_spec`),
naming its dataset with ``dataset=PATH`` (else the embedded demo). These functions turn it into
a :class:`~evictlab.core.pools.PoolSet` and into DataFrames, so that a notebook cell is one call
and a display. ``evictlab report`` builds the spec it passes to every notebook with
:func:`spec_text`.
"""

from __future__ import annotations

import datetime as _dt
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ..core.dataset import Dataset
from ..core.demo import DEMO_SHA256
from ..core.pools import PoolSet, open_pools
from ..core.protocol import DEFAULT_PRESET, Protocol
from ..core.runspec import RunSpec, parse_spec
from ..errors import ContractError
from ..policies import DEERMEM_POLICIES
from ..selection.decisions import decide_grid


def run_spec(spec: str | RunSpec = DEFAULT_PRESET) -> RunSpec:
    """A notebook's ``spec`` parameter as a :class:`~evictlab.core.runspec.RunSpec` (checked, so a
    bad spec fails in the loading cell, naming the key or file)."""
    return spec if isinstance(spec, RunSpec) else parse_spec(spec)


def spec_text(
    preset: str = DEFAULT_PRESET, dataset: str | os.PathLike | None = None, allow_unpinned: bool = False
) -> str:
    """The SPEC string of ``preset`` on ``dataset`` (None: the demo): what ``evictlab report
    --preset P --dataset D [--allow-unpinned]`` passes to every notebook.

    The dataset's absolute path goes in, since the notebooks run in another folder. A comma
    ends a SPEC value, so a path holding one is refused with a clear error.
    """
    items = []
    if dataset is not None:
        path = str(Path(dataset).resolve())
        if "," in path or path != path.strip():
            raise ContractError(
                f"{path}: a dataset path passed in a run spec may hold no comma and no leading or trailing"
                " blank; rename the file or link it from a plain path"
            )
        items.append(f"dataset={path}")
    if allow_unpinned:
        items.append("allow_unpinned=true")
    return preset + (":" + ",".join(items) if items else "")


def spec_label(spec: RunSpec) -> str:
    """The spec for titles and printouts: its preset and overrides, without the dataset
    (which :func:`dataset_label` names)."""
    return RunSpec(spec.preset, spec.overrides).label


def load_pool_set(spec: str | RunSpec = DEFAULT_PRESET) -> PoolSet:
    """The 45 prepared cases of ``spec`` (a :func:`run_spec`), through
    :func:`evictlab.core.pools.open_pools`; an unpinned dataset the spec allows warns."""
    return open_pools(run_spec(spec), notice=_warn_unpinned)


def _warn_unpinned(loaded: Dataset, protocol: Protocol) -> None:
    if not loaded.pinned:
        warnings.warn(
            f"{loaded.path} has SHA-256 {loaded.sha256}, not the pinned {protocol.config.dataset.sha256}", stacklevel=4
        )


def dataset_label(pool_set: PoolSet) -> str:
    """The dataset's file name and the first 12 hex digits of its SHA-256 (and "synthetic demo data"
    for the embedded demo), e.g. for a printout or under a figure's title."""
    dataset = pool_set.dataset
    kind = ", synthetic demo data" if dataset.sha256 == DEMO_SHA256 else ""
    return f"{dataset.path.name} (sha256 {dataset.sha256[:12]}{'' if dataset.pinned else ', unpinned'}{kind})"


def data_source(pool_set: PoolSet) -> str:
    """Where a table's pools come from, in words, so that no demo number passes for LongMemEval.

    The embedded demo is synthetic: evictlab's generated text and ids, with fact metadata made
    by the protocol's rules, so selector-only retention (which reads metadata alone) matches the
    published totals while anything that reads the text (QA) does not describe LongMemEval.
    """
    dataset = pool_set.dataset
    if dataset.sha256 == DEMO_SHA256:
        return (
            "evictlab's embedded demo dataset: synthetic text and ids, fact metadata made by the"
            " protocol's rules (retention, which reads metadata only, matches the published totals)"
        )
    return f"the LongMemEval file {dataset_label(pool_set)}"


def retention(
    pool_set: PoolSet, policies: Sequence[str] = DEERMEM_POLICIES, capacities: Sequence[int] | None = None, *,
    tie_break: str | None = None,
) -> pd.DataFrame:
    """The decisions of ``policies`` at ``capacities`` (default: the config's) on ``pool_set``,
    as ``evictlab run-policy`` makes them: :func:`evictlab.selection.decisions.decide_grid`'s frame
    (``tie_break``: as there)."""
    return decide_grid(pool_set, policies, capacities=capacities, tie_break=tie_break)


#: Support retained of the 45 cases per (capacity, policy), spec 2.10: published at capacity 7,
#: derived from the protocol's rules at 5 and 9. They hold on any valid dataset.
PUBLISHED_RETENTION: dict[tuple[int, str], int] = {
    (5, "confidence"): 20,
    (5, "hybrid-v1"): 35,
    (7, "confidence"): 27,
    (7, "hybrid-v1"): 45,
    (9, "confidence"): 35,
    (9, "hybrid-v1"): 45,
}


def retention_check(frame: pd.DataFrame) -> pd.DataFrame:
    """Total support retained per (capacity, policy) of ``frame`` against :data:`PUBLISHED_RETENTION`.

    Columns ``capacity``, ``policy``, ``retained``, ``cases``, ``published`` (``<NA>`` where
    the spec states no number) and ``match``.
    """
    totals = frame.groupby(["capacity", "policy"], sort=True, observed=True)["support_retained"].agg(["sum", "count"])
    records = []
    for (capacity, policy), (retained, cases) in totals.iterrows():
        published = PUBLISHED_RETENTION.get((int(capacity), policy))
        records.append(
            {
                "capacity": int(capacity),
                "policy": policy,
                "retained": int(retained),
                "cases": int(cases),
                "published": published,
                "match": None if published is None else int(retained) == published,
            }
        )
    check = pd.DataFrame.from_records(records)
    check["published"] = check["published"].astype("Int64")
    check["match"] = check["match"].astype("boolean")
    return check


def cases_frame(pool_set: PoolSet) -> pd.DataFrame:
    """One row per case, in build order: identity, scenario, loss rank, offset and support evidence."""
    return pd.DataFrame.from_records(
        [
            {
                "case_id": case.case_id,
                "source": case.source,
                "scenario": case.scenario,
                "question_type": case.question_type,
                "loss_rank": case.loss_rank,
                "outranking_count": case.outranking_count,
                "offset": case.offset,
                "has_question_date": case.question_date is not None,
                "support_fact_id": case.support_fact_ids[0],
                "support_chars": len(next(f for f in case.facts if f["id"] == case.support_fact_ids[0])["content"]),
                "first_distractor": case.distractor_sources[0],
            }
            for case in pool_set.cases
        ]
    )


def facts_frame(pool_set: PoolSet) -> pd.DataFrame:
    """One row per fact of every pool, in build order and fact-id order inside a case.

    ``draw_index`` is the distractor's position in the draw from the bank (``<NA>`` for the
    support); ``created_days_ago`` counts back from the protocol clock; ``heated`` means the
    usage sidecar has an entry with positive access heat for the fact.
    """
    clock = pool_set.protocol.evaluation_time
    records = []
    for case in pool_set.cases:
        draw_of = {source: i for i, source in enumerate(case.distractor_sources)}
        for fact in case.facts:
            support = fact["id"] in case.support_fact_ids
            usage = case.usage.get(fact["id"], {})
            source_record = case.fact_sources.get(fact["id"])
            records.append(
                {
                    "case_id": case.case_id,
                    "source": case.source,
                    "scenario": case.scenario,
                    "loss_rank": case.loss_rank,
                    "fact_id": fact["id"],
                    "role": "support" if support else "distractor",
                    "draw_index": None if support or source_record is None else draw_of.get(source_record),
                    "source_record": source_record,
                    "category": fact["category"],
                    "confidence": fact["confidence"],
                    "created_days_ago": _days_before(clock, fact["createdAt"]),
                    "confirmed": "lastConfirmedAt" in fact,
                    "heated": float(usage.get("accessHeat", 0) or 0) > 0,
                    "content_chars": len(fact["content"]),
                }
            )
    frame = pd.DataFrame.from_records(records)
    frame["draw_index"] = frame["draw_index"].astype("Int64")
    return frame


def bank_frame(pool_set: PoolSet) -> pd.DataFrame:
    """The distractor bank in bank order, with how many pools draw each record."""
    draws: dict[str, int] = {}
    for case in pool_set.cases:
        for source in case.distractor_sources:
            draws[source] = draws.get(source, 0) + 1
    return pd.DataFrame.from_records(
        [
            {
                "position": position,
                "question_id": record.question_id,
                "question_type": record.question_type,
                "evidence_chars": len(record.evidence),
                "pools_drawing": draws.get(record.question_id, 0),
            }
            for position, record in enumerate(pool_set.bank)
        ]
    )


def _days_before(clock: _dt.datetime, stamp: str) -> int:
    moment = _dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return (clock - moment).days
