"""An imported store's folder: what ``evictlab import deermem`` writes and everything else reads.

=====================  =====================================================================
file                   holds
=====================  =====================================================================
``store.json``         the source folder, clock, token counting rule, buckets, refused
                       files and notes
``facts.jsonl``        one fact per line: ``case_id`` (the bucket) and the kept fields
                       (:data:`~.deermem.KEPT`, ``content_tokens``, ``content_length``)
``usage.json``         ``{case_id: the usage sidecar}`` (spec 1.7)
``audit.jsonl``        one audit event per line (spec 1.6): ``case_id``, ``index`` and the
                       event as stored
``traces/<case>.jsonl``  a best-effort trace per bucket (:func:`trace_rows`)
=====================  =====================================================================

:func:`load_import` reads a finished import back and checks every file against the SHA-256
its run record lists, so an edited snapshot is refused rather than audited.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...errors import ContractError
from ...policies import check_capacity_range
from ...policies.signals import parse_timestamp, read_number
from ...readers import MAX_ROWS_FILE_BYTES, parse_json, read_bounded
from ...results import SUCCESS, file_digest, read_record
from ...times import iso_z
from ..dataset import Dataset
from ..pools import Case, PoolSet
from ..protocol import DatasetPin
from ..runspec import CLOCK_KEY, RunSpec
from .deermem import Bucket, Store

KIND = "import-deermem"
STORE_FILE, FACTS_FILE, USAGE_FILE, AUDIT_FILE = "store.json", "facts.jsonl", "usage.json", "audit.jsonl"
SCHEMA_VERSION = 1


def trace_file(case_id: str) -> str:
    return f"traces/{case_id}.jsonl"


def store_document(store: Store) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "format": "deermem-file-storage-v2",
        "store": str(store.root),
        "clock": iso_z(store.clock),
        "token_counting": store.token_counting,
        "buckets": [
            {"case_id": bucket.key, "user_dir": bucket.user_dir, "user_id": bucket.user_id, "agent": bucket.agent,
             "facts": len(bucket.facts), "usage_entries": len(bucket.usage), "audit_events": len(bucket.audit)}
            for bucket in store.buckets
        ],
        "refused": store.problems,
        "notes": store.notes,
    }


def fact_rows(store: Store) -> list[dict[str, Any]]:
    return [{"case_id": bucket.key, **fact} for bucket in store.buckets for fact in bucket.facts]


def audit_rows(store: Store) -> list[dict[str, Any]]:
    return [{"case_id": bucket.key, "index": index, "event": event}
            for bucket in store.buckets for index, event in enumerate(bucket.audit)]  # fmt: skip


def trace_rows(bucket: Bucket) -> tuple[list[dict[str, Any]], int]:
    """A best-effort trace of a bucket (rows for :mod:`evictlab.analysis.traces.schema`) and how
    many facts it leaves out (no readable ``createdAt``).

    Each fact is an ``add`` at its ``createdAt`` with its injection line's ``tokens`` and its
    ``content_key`` (absent in an import made before they were counted), its last confirmation a ``confirm`` at
    ``lastConfirmedAt``, and its usage entry ``round(accessHeat)`` (at least one) ``search``
    rows at ``lastAccessedAt``. Earlier confirmations and accesses left no time, and evicted
    facts no creation time, so they are not in it.
    """
    rows: list[tuple[_dt.datetime, int, dict[str, Any]]] = []
    left_out = 0
    present = set()
    for fact in bucket.facts:
        created = parse_timestamp(fact.get("createdAt"))
        if created is None:
            left_out += 1
            continue
        present.add(fact["id"])
        rows.append((created, 2, {"event": "add", "fact_id": fact["id"], "content_length": fact["content_length"],
                                  "confidence": fact["confidence"], "category": fact.get("category", ""),
                                  "tokens": fact.get("line_tokens"), "content_key": fact.get("content_key")}))
        confirmed = parse_timestamp(fact.get("lastConfirmedAt"))
        if confirmed is not None:
            rows.append((max(confirmed, created), 3, {"event": "confirm", "fact_ids": [fact["id"]],
                                                      "reinforcement": True}))
    for fact_id, entry in bucket.usage.items():
        accessed = parse_timestamp(entry.get("lastAccessedAt")) if isinstance(entry, dict) else None
        if accessed is None or fact_id not in present:
            continue
        heat = read_number(entry.get("accessHeat")) or 0.0
        rows += [(accessed, 4, {"event": "search", "fact_ids": [fact_id]})] * max(1, round(min(heat, 1e6)))
    rows.sort(key=lambda row: (row[0], row[1]))
    return [{"time": moment, **row} for moment, _, row in rows], left_out


# --------------------------------------------------------------------------- reading it back


def store_traces(folder: str | Path) -> list[Path]:
    """The trace files of an imported store, one per bucket, checked against the import's record.

    They are the ``traces/`` files the record lists, not whatever lies there: a file written
    there later (another command's output) is no trace of the store.
    """
    load_import(folder)
    record = read_record(Path(folder), KIND)
    assert record is not None  # load_import checked it
    return sorted(Path(folder) / name for name in record.outputs if name.startswith("traces/"))


def is_import(folder: str | Path) -> bool:
    """Whether ``folder`` holds an ``import deermem`` run (finished or not)."""
    return (Path(folder) / f"{KIND}.run.json").is_file()


def load_import(folder: str | Path) -> Store:
    """The store an ``import deermem`` folder holds, every file checked against its record."""
    folder = Path(folder)
    record = read_record(folder, KIND)
    if record is None:
        raise ContractError(f"{folder}: not an imported store (no {KIND}.run.json; run 'evictlab import deermem')")
    if record.status != SUCCESS:
        raise ContractError(f"{folder}: the import ended {record.status}; import the store again")
    for name, listed in record.outputs.items():
        path = folder / name
        if not path.is_file() or file_digest(path)["sha256"] != listed["sha256"]:
            raise ContractError(f"{path}: missing or changed since the import (SHA-256 differs from {KIND}.run.json)")
    document = _json(folder / STORE_FILE)
    usage = _json(folder / USAGE_FILE)
    buckets = {item["case_id"]: Bucket(item["user_dir"], item["user_id"], item["agent"], usage=usage[item["case_id"]])
               for item in document["buckets"]}  # fmt: skip
    for row in _jsonl(folder / FACTS_FILE):
        buckets[row.pop("case_id")].facts.append(row)
    for row in _jsonl(folder / AUDIT_FILE):
        buckets[row["case_id"]].audit.append(row["event"])
    clock = parse_timestamp(document["clock"])
    assert clock is not None  # written by store_document
    return Store(Path(document["store"]), list(buckets.values()), clock, document["token_counting"],
                 document["refused"], document["notes"])  # fmt: skip


def store_pool_set(folder: str | Path, spec: RunSpec) -> PoolSet:
    """An imported store as pools: one case per bucket (its facts sorted by id, its usage, no
    support fact), under ``spec``'s protocol and parameters, at the store's clock unless the
    spec sets ``evaluation_time``. ``run-policy``, ``explain`` and ``gate`` read it as they read
    the 45 pools."""
    folder = Path(folder)
    store = load_import(folder)
    resolved = spec.resolved
    protocol = resolved.load_protocol()
    if CLOCK_KEY not in spec.settings:
        protocol = replace(protocol, config=replace(protocol.config, evaluation_time=store.clock))
    record = read_record(folder, KIND)
    digest = record.outputs[FACTS_FILE]["sha256"] if record is not None else ""
    pin = DatasetPin(repository="deermem-store", revision=store.token_counting, filename=str(folder), sha256=digest)
    dataset = Dataset(folder, digest, True, pin, (), {})
    cases = tuple(
        Case(case_id=bucket.key, source="deermem-store", scenario="store", question_type="", question="",
             answer="", question_date=None, loss_rank=0, offset=0, facts=tuple(bucket.facts), usage=bucket.usage,
             support_fact_ids=(), distractor_sources=())
        for bucket in store.buckets
    )  # fmt: skip
    return StorePoolSet(protocol, dataset, resolved.variant, (), cases)


class StorePoolSet(PoolSet):
    """The pools of an imported store: buckets of any size, so any capacity >= 1 is asked
    (at or above a bucket's size it keeps every fact, as DeerMem does)."""

    def check_capacities(self, capacities: Sequence[int], where: str) -> None:
        check_capacity_range(capacities, low=1, where=where)


def _json(path: Path) -> Any:
    return parse_json(read_bounded(path, MAX_ROWS_FILE_BYTES, what="imported store file"), where=str(path))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    data = read_bounded(path, MAX_ROWS_FILE_BYTES, what="imported store file")
    return [parse_json(line, where=f"{path}: line {number}")
            for number, line in enumerate(data.splitlines(), start=1) if line.strip()]  # fmt: skip


