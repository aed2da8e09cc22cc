"""evictlab's pipeline against DeerFlow's published row-level results, on a reconstructed dataset.

The pinned LongMemEval file is not available, so this module rebuilds, in a temporary folder,
a dataset with the same *structure* (``reconstruction.py`` says how each piece is derived from
the published data): the official ids and types of the manifest, the 40-record SESSION bank
revealed by the v3 fact ids, and the one record (``35a27287``, 697 vs 704 code points) that the
bracket header pushes out of the bank in favour of ``60d45044``. The text is synthetic.

Why the checks mean something: kept sets, retention and the cascade counts depend only on the
bank's ids and order, the offsets and the scenario metadata, never on the text. The bank is
taken from the v3 rows only; the v1 and v2 rows (raw ids, and for v1 another bank) and the
review's cascade numbers are independent evidence, which evictlab's real selection, bank,
pool, selector, diff and prompt code must reproduce. A wrong bank shift, fact-id scheme,
tie-break, header length or offset changes the ordered kept ids of some row.
"""

from __future__ import annotations

import pytest
from reconstruction import (
    BANK_MAX_CHARS,
    BANK_MIN_CHARS,
    BANK_SIZE,
    BRACKET_ADMITTED,
    BRACKET_DROPPED,
    D_FACT,
    DRAWS,
    DROPPED_BRACKET_CHARS,
    DROPPED_SESSION_CHARS,
    PRESET_VERSIONS,
    bracket_bank,
    offset,
    published_rows,
    reconstruct,
    reveal_session_bank,
)

from evictlab.analysis.diff import diff_pool_sets
from evictlab.analysis.evaluate import evaluate
from evictlab.analysis.qa.tasks import build_tasks
from evictlab.core.dataset import load_dataset, render_evidence, select_official
from evictlab.core.manifests import ELIGIBLE_TYPES
from evictlab.core.pools import build_pools
from evictlab.core.protocol import PRESETS, load_protocol

QA_CAPACITY = 7
POLICIES = ("confidence", "hybrid-v1")


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def protocol():
    return load_protocol()


@pytest.fixture(scope="module")
def official_by_type(protocol):
    """The manifest's 20 ids per eligible type: each scenario lists 5 KU ids, then 5 TR ids."""
    by_type = {kind: [] for kind in ELIGIBLE_TYPES}
    for scenario in protocol.official.scenario_order:
        ids = protocol.official.scenarios[scenario]
        by_type[ELIGIBLE_TYPES[0]].extend(ids[:5])
        by_type[ELIGIBLE_TYPES[1]].extend(ids[5:])
    return by_type


@pytest.fixture(scope="module")
def rebuilt(official_by_type):
    return reconstruct(official_by_type)


@pytest.fixture(scope="module")
def dataset(protocol, rebuilt, tmp_path_factory):
    path = rebuilt.write(tmp_path_factory.mktemp("reconstruction") / "longmemeval_oracle.json")
    loaded = load_dataset(path, protocol.config.dataset, allow_unpinned=True)
    assert not loaded.pinned  # a stand-in, never mistaken for the pinned file
    return loaded


@pytest.fixture(scope="module")
def pool_sets(protocol, dataset):
    return {preset: build_pools(protocol, dataset, PRESETS[preset]) for preset in PRESET_VERSIONS}


@pytest.fixture(scope="module")
def published():
    return {version: published_rows(version) for version in PRESET_VERSIONS.values()}


def by_row(rows):
    return {(row["case_id"], row["policy"]): row for row in rows}


def source_of(fact_id: str, case_id: str) -> str:
    """The source record of a published fact id under either id scheme."""
    if fact_id in (case_id, f"gold_{case_id}"):
        return case_id
    match = D_FACT.fullmatch(fact_id)
    return match["source"] if match else fact_id


# --------------------------------------------------------------------------- the reconstruction


def test_v3_rows_reveal_the_whole_session_bank_consistently(published, rebuilt):
    """Every one of the 40 bank positions is revealed by some kept ``d_`` fact, always with
    the same id, and the revealed ids are sorted by position as a sorted bank must be: no
    position had to be invented."""
    revealed = reveal_session_bank(published["v3"])
    assert sorted(revealed) == list(range(BANK_SIZE))
    assert rebuilt.invented_positions == []
    assert rebuilt.session_bank == [revealed[p] for p in range(BANK_SIZE)]
    assert rebuilt.session_bank == sorted(rebuilt.session_bank)
    assert rebuilt.session_bank[22] == BRACKET_DROPPED
    assert rebuilt.session_bank[-1] < BRACKET_ADMITTED


def test_v1_rows_drew_from_the_shifted_bracket_bank(published, rebuilt):
    """Independent of how the bank was derived: v1's raw distractor ids are exactly what the
    shifted bank gives at the published offsets, never ``35a27287``, sometimes ``60d45044``."""
    bank = bracket_bank(rebuilt.session_bank)
    kept_sources = set()
    for row in published["v1"]:
        base = offset(row["case_id"])
        draws = {bank[(base + i) % BANK_SIZE] for i in range(DRAWS)}
        distractors = set(row["kept_fact_ids"]) - {row["case_id"]}
        assert distractors <= draws, row["row_id"]
        kept_sources |= distractors
    assert BRACKET_DROPPED not in kept_sources
    assert BRACKET_ADMITTED in kept_sources


def test_rebuilt_dataset_has_the_published_structure(protocol, dataset, rebuilt, official_by_type):
    """evictlab's renderer, selection and bank on the rebuilt file: 697/704 code points for
    ``35a27287``, the manifest's 40 ids (every decoy excluded or sorted after the 20th), the
    revealed SESSION bank and the review's bracket bank."""
    dropped = dataset.by_id[BRACKET_DROPPED]
    assert len(render_evidence(dropped, "session")) == DROPPED_SESSION_CHARS
    assert len(render_evidence(dropped, "bracket")) == DROPPED_BRACKET_CHARS
    admitted = dataset.by_id[BRACKET_ADMITTED]
    for header in ("session", "bracket"):
        assert BANK_MIN_CHARS <= len(render_evidence(admitted, header)) <= BANK_MAX_CHARS

    for header in ("session", "bracket"):
        selection = select_official(dataset, protocol.official, header)
        assert {kind: list(ids) for kind, ids in selection.by_type.items()} == official_by_type
        assert {name: list(ids) for name, ids in selection.scenarios.items()} == {
            name: list(ids) for name, ids in protocol.official.scenarios.items()
        }
        excluded = {item.question_id for item in selection.exclusions}
        assert {"0f05491a", "gpt4_85da3956", "00abc123_abs", "00b00001", "00b00002", "00c00001"} <= excluded

    session = build_pools(protocol, dataset, PRESETS["pr4810-run2"])
    bracket = build_pools(protocol, dataset, PRESETS["pr4810-run1"])
    assert [record.question_id for record in session.bank] == rebuilt.session_bank
    assert [record.question_id for record in bracket.bank] == bracket_bank(rebuilt.session_bank)
    assert [record.question_id for record in bracket.bank][22:] == [*rebuilt.session_bank[23:], BRACKET_ADMITTED]


# --------------------------------------------------------------------------- 1. kept fact ids


@pytest.mark.parametrize("preset", list(PRESET_VERSIONS))
def test_capacity_7_kept_fact_ids_equal_the_published_rows(preset, pool_sets, published):
    """All 90 rows: evictlab's ordered kept fact ids at capacity 7 equal the published ones
    exactly (rank order, id scheme included), and so does each row's support retention;
    totals 27/45 (confidence) vs 45/45 (hybrid-v1)."""
    rows = evaluate(pool_sets[preset], capacities=[QA_CAPACITY])
    mine = by_row(rows)
    theirs = by_row(published[PRESET_VERSIONS[preset]])
    assert len(theirs) == len(mine) == 90
    mismatched = [key for key, row in theirs.items() if mine[key]["kept_fact_ids"] != row["kept_fact_ids"]]
    assert mismatched == []
    assert all(mine[key]["support_all_retained"] == row["support_all_retained"] for key, row in theirs.items())
    retained = {
        policy: sum(row["support_all_retained"] for row in rows if row["policy"] == policy) for policy in POLICIES
    }
    assert retained == {"confidence": 27, "hybrid-v1": 45}


# --------------------------------------------------------------------------- 2. the cascade


def published_kept_changes(before, after) -> set[tuple[str, str]]:
    """Rows whose kept *source records* differ between two published versions."""
    old, new = by_row(before), by_row(after)
    return {
        key for key in old
        if {source_of(f, key[0]) for f in old[key]["kept_fact_ids"]}
        != {source_of(f, key[0]) for f in new[key]["kept_fact_ids"]}
    }


def test_cascade_run1_to_run2_matches_the_review(pool_sets, published):
    """The #4810 review: the bracket header changed 33/45 pools, 65/90 capacity-7 kept sets
    and all 90 prompts. The published rows agree on the kept sets and the fingerprints."""
    result = diff_pool_sets(pool_sets["pr4810-run1"], pool_sets["pr4810-run2"])
    summary = result.summary
    assert (summary["pools_changed"], summary["pools_total"]) == (33, 45)
    assert (summary["kept_sets_changed"]["7"], summary["kept_sets_total"]["7"]) == (65, 90)
    assert (summary["prompts_changed"], summary["prompts_total"]) == (90, 90)
    assert summary["bank_records_out"] == [BRACKET_ADMITTED]  # "from" is the bracket bank
    assert summary["bank_records_in"] == [BRACKET_DROPPED]
    # The review says 264 fact-metadata assignments changed; evictlab counts 265 here
    # (summary["metadata_assignments_changed"]), a known difference in how they are counted.
    changed = {(row["case_id"], row["policy"]) for row in result.cases if row["capacities"]["7"]["kept_changed"]}
    assert changed == published_kept_changes(published["v1"], published["v2"])
    before, after = by_row(published["v1"]), by_row(published["v2"])
    assert sum(before[k]["request_fingerprint"] != after[k]["request_fingerprint"] for k in before) == 90


def test_cascade_run2_to_final_changes_two_kept_sets(pool_sets, published):
    """Switching to ``gold_``/``d_`` ids leaves every pool alone and moves the support's tie
    position: exactly 2 of 90 capacity-7 kept sets change, both rows of ``41698283``."""
    result = diff_pool_sets(pool_sets["pr4810-run2"], pool_sets["pr4810-final"])
    summary = result.summary
    assert summary["pools_changed"] == 0
    assert summary["metadata_assignments_changed"] == 0
    assert (summary["kept_sets_changed"]["7"], summary["kept_sets_total"]["7"]) == (2, 90)
    changed = {(row["case_id"], row["policy"]) for row in result.cases if row["capacities"]["7"]["kept_changed"]}
    assert changed == {("41698283", policy) for policy in POLICIES}
    assert changed == published_kept_changes(published["v2"], published["v3"])
    # Every prompt names its fact ids, so all 90 requests change; so did the published ones.
    assert summary["prompts_changed"] == 90
    before, after = by_row(published["v2"]), by_row(published["v3"])
    assert sum(before[k]["request_fingerprint"] != after[k]["request_fingerprint"] for k in before) == 90


# --------------------------------------------------------------------------- 3. fingerprints


@pytest.mark.parametrize("preset", list(PRESET_VERSIONS))
def test_shared_fingerprints_are_the_cases_with_equal_kept_sets(preset, pool_sets, published):
    """Same kept set <=> same request for both policies: 13 of 45 cases, 77 distinct
    fingerprints, in the published version and in evictlab's run (the same 13 cases; the
    fingerprint values differ because the texts do)."""
    shared, same_kept, distinct = set(), set(), set()
    tasks = build_tasks(pool_sets[preset])
    by_case = {}
    for task in tasks:
        by_case.setdefault(task.case.case_id, []).append(task)
        distinct.add(task.request_fingerprint)
    for case_id, (first, second) in by_case.items():
        if first.request_fingerprint == second.request_fingerprint:
            shared.add(case_id)
        if set(first.kept_fact_ids) == set(second.kept_fact_ids):
            same_kept.add(case_id)
    assert len(shared) == 13
    assert shared == same_kept
    assert len(distinct) == 77

    rows = published[PRESET_VERSIONS[preset]]
    theirs = by_row(rows)
    published_shared = {
        case_id for case_id, _ in theirs
        if theirs[(case_id, POLICIES[0])]["request_fingerprint"]
        == theirs[(case_id, POLICIES[1])]["request_fingerprint"]
    }
    assert len(published_shared) == 13
    assert len({row["request_fingerprint"] for row in rows}) == 77
    assert shared == published_shared
