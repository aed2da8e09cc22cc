"""The embedded demo dataset: determinism, pin, traps, variant behaviour and retention (spec 0.3, 2.3-2.10)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections import Counter

import pytest

from evictlab import cli
from evictlab.core import demo, demo_generator
from evictlab.core.dataset import answer_text, build_bank, exclusion_reason, render_evidence, select_official
from evictlab.core.pools import build_pools
from evictlab.core.protocol import PRESETS, load_protocol, sha256_file
from evictlab.errors import DatasetError, OutputExistsError
from evictlab.policies import select

HEX8 = re.compile(r"[0-9a-f]{8}")


@pytest.fixture(scope="module")
def protocol():
    return demo.demo_protocol(load_protocol())


@pytest.fixture(scope="module")
def dataset(protocol):
    return demo.load_demo(protocol)


@pytest.fixture(scope="module")
def roles():
    return demo_generator.trap_catalogue()


@pytest.fixture(scope="module")
def pools(protocol, dataset):
    return {name: build_pools(protocol, dataset, variant) for name, variant in PRESETS.items()}


def selection(dataset, protocol, header="session"):
    return select_official(dataset, protocol.official, header)


def kept_sources(protocol, case, policy, capacity):
    decision = select(
        policy, case.facts, capacity, usage=case.usage, now=protocol.evaluation_time,
        params=protocol.config.hybrid, support_fact_ids=case.support_fact_ids,
    )
    return decision, frozenset(case.fact_sources[fact_id] for fact_id in decision.kept_ids)


# --------------------------------------------------------------------------- files and pin


def test_regenerating_gives_the_committed_bytes():
    assert demo_generator.dataset_bytes() == demo.DEMO_DATASET.read_bytes()
    manifest = demo_generator.derive_manifest(load_protocol())
    assert demo_generator.manifest_bytes(manifest) == demo.DEMO_MANIFEST.read_bytes()
    assert demo_generator.committed_problems(load_protocol()) == []


def test_generation_does_not_depend_on_the_hash_seed():
    script = "import sys, evictlab.core.demo_generator as d; sys.stdout.buffer.write(d.dataset_bytes())"
    for seed in ("0", "12345"):
        result = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, check=True, env={"PYTHONHASHSEED": seed},
        )
        assert result.stdout == demo.DEMO_DATASET.read_bytes()


def test_committed_file_has_the_pinned_hash_and_a_well_formed_pin():
    pin = demo.DEMO_PIN
    assert sha256_file(demo.DEMO_DATASET) == pin.sha256 == demo.DEMO_SHA256
    assert pin.repository == "evictlab/demo"
    assert pin.filename == demo.DEMO_DATASET.name
    assert re.fullmatch(r"[0-9a-f]{40}", pin.revision)
    assert pin.revision == hashlib.sha256(demo.GENERATOR_VERSION.encode()).hexdigest()[:40]
    assert demo.DEMO_DATASET.stat().st_size < 200_000


def test_committed_manifest_has_the_protocol_schema_and_id():
    own = json.loads(load_protocol().files.official_manifest.read_bytes())
    manifest = json.loads(demo.DEMO_MANIFEST.read_bytes())
    assert list(manifest) == list(own)
    assert manifest["protocol_id"] == own["protocol_id"]
    assert manifest["scenario_order"] == own["scenario_order"]
    assert manifest["loss_ranks"] == own["loss_ranks"]


def test_rows_have_the_longmemeval_shape(protocol):
    pilot_ids = protocol.official.selection.excluded_pilot_ids
    rows = json.loads(demo.DEMO_DATASET.read_bytes())
    ids = [row["question_id"] for row in rows]
    assert len(set(ids)) == len(ids)
    for row in rows:
        assert list(row)[:8] == [
            "question_id", "question_type", "question", "answer", "question_date",
            "haystack_session_ids", "haystack_dates", "haystack_sessions",
        ]
        assert isinstance(row["question"], str) and isinstance(row["question_date"], str)
        lengths = {len(row[key]) for key in ("haystack_session_ids", "haystack_dates", "haystack_sessions")}
        assert len(lengths) == 1
        qid = row["question_id"]
        assert HEX8.fullmatch(qid) or qid in pilot_ids or qid.endswith("_abs") or qid.startswith("gpt4_"), qid
    assert Counter(row["question_type"] for row in rows) == {
        "knowledge-update": 32, "temporal-reasoning": 28, "single-session-user": 30,
        "single-session-preference": 16, "multi-session": 2, "single-session-assistant": 1,
    }


# --------------------------------------------------------------------------- selection traps

EXPECTED_REASONS = {
    "pilot": r"pilot id",
    "abstention": r"abstention id \(_abs\)",
    "answer-too-long": r"answer length 1\d\d outside 1\.\.100",
    "answer-blank": r"answer length 0 outside 1\.\.100",
    "answer-only-mentioned": r"answer contains 'only mentioned'",
    "answer-not-enough": r"answer contains 'not enough'",
    "evidence-empty": r"evidence length 0 outside 1\.\.2000",
    "evidence-too-long": r"evidence length 2\d\d\d outside 1\.\.2000",
}


@pytest.mark.parametrize("header", ["session", "bracket"])
def test_every_trap_is_excluded_for_its_reason_and_would_otherwise_be_selected(dataset, protocol, roles, header):
    chosen = selection(dataset, protocol, header)
    reasons = {item.question_id: (item.question_type, item.reason) for item in chosen.exclusions}
    assert len(roles["pilot"]) == 8 and set(roles["pilot"]) == set(protocol.official.selection.excluded_pilot_ids)
    expected_ids = {qid for role in EXPECTED_REASONS for qid in roles[role]}
    assert set(reasons) == expected_ids
    for role, pattern in EXPECTED_REASONS.items():
        for qid in roles[role]:
            kind, reason = reasons[qid]
            assert re.fullmatch(pattern, reason), (qid, reason)
            # Without its exclusion the trap would be among the first 20 of its type.
            assert sorted(chosen.by_type[kind] + (qid,)).index(qid) < 20, qid


def test_the_answer_not_enough_trap_is_matched_regardless_of_case(dataset, roles):
    (qid,) = roles["answer-not-enough"]
    answer = dataset.by_id[qid]["answer"]
    assert "not enough" not in answer and "not enough" in answer.lower()


def test_null_answer_passes_the_filters_but_sorts_after_the_selection(dataset, protocol, roles):
    chosen = selection(dataset, protocol)
    (qid,) = roles["answer-null"]
    row = dataset.by_id[qid]
    assert row["answer"] is None and answer_text(row) == "null"
    assert exclusion_reason(row, protocol.official.selection) is None
    for extra in roles["extra-eligible"] + [qid]:
        kind = dataset.by_id[extra]["question_type"]
        assert extra not in chosen.by_type[kind]
        assert extra > chosen.by_type[kind][-1]


def test_selection_is_the_same_under_both_headers_and_matches_the_manifest(dataset, protocol, roles):
    session = selection(dataset, protocol, "session")
    assert session.by_type == selection(dataset, protocol, "bracket").by_type
    assert set(session.by_type["knowledge-update"]) == set(roles["ku-selected"])
    assert set(session.by_type["temporal-reasoning"]) == set(roles["tr-selected"])
    assert session.scenarios == {name: tuple(ids) for name, ids in protocol.official.scenarios.items()}
    # gpt4_ ids sort after hex ids; the twentieth temporal-reasoning case is one.
    assert session.by_type["temporal-reasoning"][-1].startswith("gpt4_")


def test_rendering_traps_reach_selected_cases(dataset, roles):
    found = Counter()
    for qid in roles["ku-selected"] + roles["tr-selected"]:
        row = dataset.by_id[qid]
        evidence = render_evidence(row)
        if isinstance(row["answer"], int):
            found["integer answer"] += 1
        for session in row["haystack_sessions"]:
            marked = [t for t in session if t.get("has_answer") is True and isinstance(t.get("content"), str)]
            users = [t for t in session if t.get("role") == "user" and isinstance(t.get("content"), str)]
            if not marked and users:
                found["user-turn fallback"] += 1
                assert all(f"USER: {t['content']}" in evidence for t in users)
            if not marked and not users:
                found["skipped session"] += 1
            for turn in session:
                content = turn.get("content")
                if content is None:
                    found["null content"] += 1
                    continue
                if turn.get("has_answer") is True and turn.get("role") == "assistant":
                    found["assistant evidence"] += 1
                    assert f"ASSISTANT: {content}" in evidence
                if turn.get("has_answer") is False:
                    found["has_answer false"] += 1
                if "\u2028" in content:
                    found["line separator"] += 1
                    assert content in evidence
                if re.search(r"[\u4e00-\u9fff]", content):
                    found["CJK"] += 1
                if re.search(r"[\U0001F300-\U0001FAFF]", content):
                    found["emoji"] += 1
                if re.search(r"[\u00c0-\u017f]", content):
                    found["accent"] += 1
    assert set(found) == {
        "integer answer", "user-turn fallback", "skipped session", "null content", "assistant evidence",
        "has_answer false", "line separator", "CJK", "emoji", "accent",
    }


def test_other_question_types_are_ignored(dataset, protocol, roles):
    chosen = selection(dataset, protocol)
    bank = build_bank(dataset, protocol.config.pool)
    listed = {qid for ids in chosen.by_type.values() for qid in ids} | {e.question_id for e in chosen.exclusions}
    for qid in roles["ignored-type"]:
        assert qid not in listed and qid not in {record.question_id for record in bank}


# --------------------------------------------------------------------------- distractor bank


def bank_ids(dataset, protocol, header):
    return [record.question_id for record in build_bank(dataset, protocol.config.pool, header)]


def test_bank_boundaries_are_inclusive(dataset, protocol, roles):
    bank = bank_ids(dataset, protocol, "session")
    candidates = sorted(
        row["question_id"] for row in dataset.rows if row["question_type"] in protocol.config.pool.distractor_types
    )
    for role, length, kept in [("bank-40", 40, True), ("bank-700", 700, True),
                               ("bank-39", 39, False), ("bank-701", 701, False)]:
        (qid,) = roles[role]
        assert len(render_evidence(dataset.by_id[qid])) == length
        assert (qid in bank) is kept, role
        # Each sorts among the bank's ids, so only its length decides.
        assert qid < bank[-1]
    (wide,) = roles["bank-700"]
    assert len(render_evidence(dataset.by_id[wide]).encode("utf-8")) > 700
    for role in ("bank-empty", "bank-too-long"):
        (qid,) = roles[role]
        assert qid not in bank and qid < bank[-1]
    (abstention,) = roles["bank-abstention"]
    assert abstention.endswith("_abs") and abstention in bank
    assert len(candidates) == 46 and len(bank) == 40


def test_the_crossing_record_leaves_the_bracket_bank_and_the_surplus_enters(dataset, protocol, roles):
    (crossing,) = roles[demo_generator.BANK_CROSSING_ROLE]
    row = dataset.by_id[crossing]
    assert (len(render_evidence(row, "session")), len(render_evidence(row, "bracket"))) == (697, 704)
    session = bank_ids(dataset, protocol, "session")
    bracket = bank_ids(dataset, protocol, "bracket")
    assert crossing in session and crossing not in bracket
    first_surplus, second_surplus = roles["bank-surplus"]
    assert set(session) - set(bracket) == {crossing, roles["bank-700"][0]}
    assert set(bracket) - set(session) == {roles["bank-39"][0], first_surplus}
    assert second_surplus not in session and second_surplus not in bracket


def test_official_evidence_is_seven_characters_longer_per_session_under_bracket(dataset, protocol):
    for qid in protocol.official.case_ids:
        row = dataset.by_id[qid]
        session, bracket = render_evidence(row, "session"), render_evidence(row, "bracket")
        assert len(bracket) - len(session) == 7 * session.count("\nSESSION ") + 7 > 0


def test_the_bracket_bank_shifts_the_draws_of_most_pools(pools):
    final, run1 = pools["pr4810-final"], pools["pr4810-run1"]
    changed = [a.case_id for a, b in zip(final.cases, run1.cases) if a.distractor_sources != b.distractor_sources]
    assert len(changed) == 45


# --------------------------------------------------------------------------- pools and retention

# (source, scenario) -> supports retained out of the group, per capacity and policy (spec 2.10).
EXPECTED_RETENTION = {
    5: {"confidence": {"confirmation_help": 0, "access_help": 0, "confidence_control": 10,
                       "noisy_signal_control": 10, "correction_reserve": 0},
        "hybrid-v1": {"confirmation_help": 10, "access_help": 0, "confidence_control": 10,
                      "noisy_signal_control": 10, "correction_reserve": 5}},
    7: {"confidence": {"confirmation_help": 3, "access_help": 3, "confidence_control": 10,
                       "noisy_signal_control": 10, "correction_reserve": 1},
        "hybrid-v1": {"confirmation_help": 10, "access_help": 10, "confidence_control": 10,
                      "noisy_signal_control": 10, "correction_reserve": 5}},
    9: {"confidence": {"confirmation_help": 6, "access_help": 6, "confidence_control": 10,
                       "noisy_signal_control": 10, "correction_reserve": 3},
        "hybrid-v1": {"confirmation_help": 10, "access_help": 10, "confidence_control": 10,
                      "noisy_signal_control": 10, "correction_reserve": 5}},
}
EXPECTED_TOTALS = {5: (20, 35), 7: (27, 45), 9: (35, 45)}


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_support_retention_matches_the_spec_for_every_preset(pools, protocol, preset):
    pool_set = pools[preset]
    assert len(pool_set.cases) == 45
    for capacity, by_policy in EXPECTED_RETENTION.items():
        totals = []
        for policy, expected in by_policy.items():
            retained = Counter()
            for case in pool_set.cases:
                decision, _ = kept_sources(protocol, case, policy, capacity)
                retained[case.scenario] += all(s in decision.kept_ids for s in case.support_fact_ids)
            assert {name: retained[name] for name in expected} == expected, (preset, capacity, policy)
            totals.append(sum(retained.values()))
        assert tuple(totals) == EXPECTED_TOTALS[capacity]


def test_raw_fact_ids_change_two_confidence_kept_sets_at_capacity_7(pools, protocol):
    # Both pools wrap past the end of the bank, and tied 0.70 distractors straddle the cut:
    # with raw ids the wrapped (smallest) source ids win the tie, with gold_/d_ ids draw order wins.
    final, run2 = pools["pr4810-final"], pools["pr4810-run2"]
    differing = {}
    for policy in ("confidence", "hybrid-v1"):
        for a, b in zip(final.cases, run2.cases):
            if kept_sources(protocol, a, policy, 7)[1] != kept_sources(protocol, b, policy, 7)[1]:
                differing[a.case_id] = (policy, a.scenario, a.offset)
    assert differing == {
        "cb2f905c": ("confidence", "confidence_control", 33),
        "dfffed0b": ("confidence", "noisy_signal_control", 37),
    }
    for _, _, offset in differing.values():
        assert offset + protocol.config.pool.distractors > len(final.bank)


# --------------------------------------------------------------------------- writing and loading


def test_write_demo_is_idempotent_and_refuses_a_different_file(tmp_path):
    target = tmp_path / "demo.json"
    demo_generator.write_demo(target)
    assert target.read_bytes() == demo.DEMO_DATASET.read_bytes()
    demo_generator.write_demo(target)  # same bytes: nothing to do
    target.write_bytes(b"[]\n")
    with pytest.raises(OutputExistsError, match="refusing to overwrite"):
        demo_generator.write_demo(target)
    assert target.read_bytes() == b"[]\n"
    demo_generator.write_demo(target, force=True)
    assert sha256_file(target) == demo.DEMO_SHA256


def test_load_demo_rejects_a_changed_copy(tmp_path):
    copy = tmp_path / demo.DEMO_DATASET.name
    copy.write_bytes(demo.DEMO_DATASET.read_bytes().replace(b"Carcassonne", b"Catan"))
    with pytest.raises(DatasetError, match="is not the pinned"):
        demo.load_demo(path=copy)


def test_load_demo_checks_the_manifest_it_is_given():
    with pytest.raises(DatasetError, match="disagrees with the selection"):
        demo.load_demo(load_protocol())  # the LongMemEval manifest, not the demo's


def test_committed_problems_reports_a_stale_file(tmp_path, monkeypatch):
    stale = tmp_path / "stale.json"
    stale.write_bytes(demo.DEMO_DATASET.read_bytes().replace(b"Carcassonne", b"Catan"))
    monkeypatch.setattr(demo, "DEMO_DATASET", stale)
    monkeypatch.setattr(demo, "DEMO_MANIFEST", tmp_path / "missing.json")
    problems = demo_generator.committed_problems(load_protocol())
    assert any("differs from the generator output" in p for p in problems)
    assert any("missing.json: missing" in p for p in problems)


# --------------------------------------------------------------------------- command line


def test_cli_data_demo_verifies_the_committed_files(capsys):
    assert cli.main(["data", "demo"]) == 0
    out = capsys.readouterr().out
    assert str(demo.DEMO_DATASET) in out and demo.DEMO_SHA256 in out
    assert "both files match the generator" in out


def test_cli_data_demo_fails_when_the_committed_file_is_stale(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "stale.json"
    stale.write_bytes(b"[]\n")
    monkeypatch.setattr(demo, "DEMO_DATASET", stale)
    assert cli.main(["data", "demo"]) != 0
    assert "do not match the generator" in capsys.readouterr().err


def test_cli_data_demo_writes_copies_and_refuses_to_replace_other_files(tmp_path, capsys):
    data, manifest = tmp_path / "d.json", tmp_path / "m.json"
    assert cli.main(["data", "demo", "--output", str(data), "--manifest-output", str(manifest)]) == 0
    assert data.read_bytes() == demo.DEMO_DATASET.read_bytes()
    assert manifest.read_bytes() == demo.DEMO_MANIFEST.read_bytes()
    manifest.write_text("{}\n")
    assert cli.main(["data", "demo", "--manifest-output", str(manifest)]) != 0
    assert "refusing to overwrite" in capsys.readouterr().err
    assert manifest.read_text() == "{}\n"
