"""Evidence rendering, exclusion rules, selection and the distractor bank (spec 2.3, 2.5, 2.6)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from evictlab.core.dataset import (
    answer_text,
    build_bank,
    check_selection,
    exclusion_reason,
    load_dataset,
    render_evidence,
    select_official,
)
from evictlab.core.manifests import OfficialManifest
from evictlab.core.protocol import DatasetPin, load_protocol, sha256_file
from evictlab.errors import DatasetError

RULE = load_protocol().official.selection  # DeerFlow's values (spec 2.3)
ORDER = ("confirmation_help", "access_help", "confidence_control", "noisy_signal_control")


def manifest(scenarios=None, rule=RULE, order=ORDER):
    """An official manifest object around ``rule`` (scenario lists only matter to check_selection)."""
    scenarios = scenarios if scenarios is not None else dict.fromkeys(order, ())
    return OfficialManifest("p", order, (6,) * 10, scenarios, rule)


def row(question_id, *, kind="knowledge-update", answer="blue", sessions=None, **extra):
    if sessions is None:
        sessions = [[{"role": "user", "content": "My bike is blue.", "has_answer": True}]]
    base = {
        "question_id": question_id,
        "question_type": kind,
        "question": f"What about {question_id}?",
        "answer": answer,
        "question_date": "2023/05/20 (Sat) 02:21",
        "haystack_session_ids": [f"s{i}" for i in range(len(sessions))],
        "haystack_dates": [f"2023/05/{10 + i:02d} (Wed) 10:00" for i in range(len(sessions))],
        "haystack_sessions": sessions,
    }
    base.update(extra)
    return base


def write_rows(tmp_path, rows):
    path = tmp_path / "data.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def pin_for(path):
    return DatasetPin("test/repo", "0" * 40, path.name, sha256_file(path))


def test_render_evidence_spec_vector():
    sessions = [
        [
            {"role": "user", "content": "ignore unmarked", "has_answer": False},
            {"role": "assistant", "content": "marked answer", "has_answer": True},
        ],
        [
            {"role": "user", "content": "fallback user"},
            {"role": "assistant", "content": "ignore fallback assistant"},
        ],
    ]
    record = row("x", sessions=sessions, haystack_dates=["2026/01/01", "2026/01/02"])
    assert render_evidence(record) == (
        "SESSION s0 AT 2026/01/01\nASSISTANT: marked answer\n\nSESSION s1 AT 2026/01/02\nUSER: fallback user"
    )


def test_bracket_header_is_seven_characters_longer_per_session():
    record = row("x", sessions=[[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]])
    session = render_evidence(record, "session")
    bracket = render_evidence(record, "bracket")
    assert bracket.startswith("[session_id=s0 date=2023/05/10 (Wed) 10:00]\nUSER: a")
    assert len(bracket) - len(session) == 14


def test_sessions_without_usable_turns_are_skipped_and_roles_default():
    sessions = [
        [{"role": "assistant", "content": "no user here"}],
        [{"content": "no role", "has_answer": True}, {"role": "user", "content": 5}],
        ["not a turn", {"role": "user"}],
    ]
    text = render_evidence(row("x", sessions=sessions))
    assert text == "SESSION s1 AT 2023/05/11 (Wed) 10:00\nUNKNOWN: no role"


def test_has_answer_must_be_exactly_true():
    sessions = [[{"role": "user", "content": "u"}, {"role": "assistant", "content": "a", "has_answer": 1}]]
    assert render_evidence(row("x", sessions=sessions)).endswith("USER: u")


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("haystack_dates", None, "haystack_dates"),
        ("haystack_dates", ["d1", "d2"], "equal length"),
        ("haystack_sessions", ["oops"], r"haystack_sessions\[0\]"),
    ],
)
def test_malformed_haystack_names_question_and_field(field, value, message):
    record = row("q-bad")
    record[field] = value
    with pytest.raises(DatasetError, match=message) as caught:
        render_evidence(record)
    assert "q-bad" in str(caught.value)


def test_answer_text_stringifies_non_strings_as_json():
    assert answer_text({"answer": "  7 "}) == "  7 "
    assert answer_text({"answer": 3}) == "3"
    assert answer_text({}) == "null"
    assert answer_text({"answer": {"b": 1, "a": "é"}}) == '{"a": "é", "b": 1}'


def evidence_row(question_id, answer, evidence_chars):
    """A row whose rendered evidence is exactly ``evidence_chars`` code points (0: no usable turn)."""
    header = "SESSION s0 AT d\nUSER: "
    if evidence_chars == 0:
        sessions = [[{"role": "assistant", "content": "skipped"}]]
    else:
        sessions = [[{"role": "user", "content": "文" * (evidence_chars - len(header))}]]
    return row(question_id, answer=answer, sessions=sessions, haystack_dates=["d"])


@pytest.mark.parametrize(
    "question_id, answer, evidence_chars, reason",
    [
        ("0f05491a", "x", 50, "pilot"),
        ("gpt4_af6db32f", "x", 50, "pilot"),
        ("abc_abs", "x", 50, "_abs"),
        ("q", "   ", 50, "answer length 0"),
        ("q", "é" * 101, 50, "answer length 101"),
        ("q", "There is NOT ENOUGH information", 50, "not enough"),
        ("q", "It was only mentioned once", 50, "only mentioned"),
        ("q", "x", 0, "evidence length 0"),
        ("q", "x", 2001, "evidence length 2001"),
    ],
)
def test_exclusion_rules(question_id, answer, evidence_chars, reason):
    assert reason in exclusion_reason(evidence_row(question_id, answer, evidence_chars), RULE)


def test_lengths_are_code_points_at_the_bounds():
    assert exclusion_reason(evidence_row("q", "é" * 100, 2000), RULE) is None
    assert exclusion_reason(evidence_row("q", None, 50), RULE) is None  # "null" passes


def test_id_exclusions_come_before_rendering():
    broken = row("0f05491a", haystack_dates=None)  # would not render
    assert exclusion_reason(broken, RULE) == "pilot id"
    with pytest.raises(DatasetError, match="haystack_dates"):
        exclusion_reason(dict(broken, question_id="q"), RULE)


def test_rows_with_a_non_string_type_are_skipped(tmp_path):
    rows = [*make_selection_rows(), row("a-odd", kind=["knowledge-update"])]
    path = write_rows(tmp_path, rows)
    selection = select_official(load_dataset(path, pin_for(path)), manifest())
    assert "a-odd" not in selection.by_type["knowledge-update"]


def test_deeply_nested_json_is_a_clear_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(DatasetError, match="not valid JSON"):
        load_dataset(path, pin_for(path))


def make_selection_rows():
    rows = []
    for kind, prefix in (("knowledge-update", "a"), ("temporal-reasoning", "b")):
        for i in range(22):
            rows.append(row(f"{prefix}{i:03d}", kind=kind))
    rows.append(row("a000_abs"))
    rows.append(row("0f05491a"))
    rows.append(row("zz-other", kind="multi-session"))
    for i in range(45):
        text = "I like green tea in the morning with a slice of lemon." * (1 + i % 3)
        kind = "single-session-preference" if i % 2 else "single-session-user"
        rows.append(row(f"c{i:03d}", kind=kind, sessions=[[{"role": "user", "content": text}]]))
    return rows


def test_selection_takes_first_twenty_sorted_ids_per_type(tmp_path):
    rows = make_selection_rows()
    rows.reverse()  # file order must not matter
    path = write_rows(tmp_path, rows)
    dataset = load_dataset(path, pin_for(path))
    selection = select_official(dataset, manifest())
    assert selection.by_type["knowledge-update"] == tuple(f"a{i:03d}" for i in range(20))
    assert selection.scenarios["access_help"] == tuple(
        [f"a{i:03d}" for i in range(5, 10)] + [f"b{i:03d}" for i in range(5, 10)]
    )
    reasons = {item.question_id: item.reason for item in selection.exclusions}
    assert reasons == {"a000_abs": "abstention id (_abs)", "0f05491a": "pilot id"}
    check_selection(selection, manifest(dict(selection.scenarios)), "m.json")
    wrong = dict(selection.scenarios, access_help=("a005",) * 10)
    with pytest.raises(DatasetError, match="access_help: manifest-only"):
        check_selection(selection, manifest(wrong), "m.json")


def test_not_enough_eligible_rows(tmp_path):
    rows = [r for r in make_selection_rows() if r["question_id"] not in {"a000", "a001", "a002"}]
    path = write_rows(tmp_path, rows)
    with pytest.raises(DatasetError, match="not enough eligible knowledge-update rows: 19"):
        select_official(load_dataset(path, pin_for(path)), manifest())


# Each parameter of the manifest's selection block, changed alone, changes the selection:
# (changed parameters, edits to a few default rows, the id now excluded, its reason).
LONG_TEXT = "My bike is blue, and it has been blue since the spring I bought it."
DEFAULT_EVIDENCE = len(render_evidence(row("x")))
PARAMETER_CHANGES = {
    "excluded_pilot_ids": ({"excluded_pilot_ids": (*RULE.excluded_pilot_ids, "a003")}, {}, "a003", "pilot id"),
    "answer_min_chars": ({"answer_min_chars": 3}, {"a005": {"answer": "no"}}, "a005", "answer length 2 outside 3..100"),
    "answer_max_chars": (
        {"answer_max_chars": 10}, {"a006": {"answer": "a long answer"}}, "a006", "answer length 13 outside 1..10",
    ),
    "answer_excluded_substrings": (
        {"answer_excluded_substrings": ("not enough", "RED")}, {"a007": {"answer": "a red one"}}, "a007",
        "answer contains 'RED'",
    ),
    "evidence_min_chars": (
        {"evidence_min_chars": DEFAULT_EVIDENCE},
        {"a008": {"haystack_sessions": [[{"role": "user", "content": "Blue."}]]}},
        "a008",
        f"evidence length {DEFAULT_EVIDENCE - 11} outside {DEFAULT_EVIDENCE}..2000",
    ),
    "evidence_max_chars": (
        {"evidence_max_chars": DEFAULT_EVIDENCE},
        {"a009": {"haystack_sessions": [[{"role": "user", "content": LONG_TEXT}]]}},
        "a009",
        f"evidence length {DEFAULT_EVIDENCE + len(LONG_TEXT) - 16} outside 1..{DEFAULT_EVIDENCE}",
    ),
}


@pytest.mark.parametrize("name", sorted(PARAMETER_CHANGES))
def test_each_exclusion_parameter_of_the_manifest_changes_the_selection(tmp_path, name):
    changes, edits, excluded, reason = PARAMETER_CHANGES[name]
    rows = make_selection_rows()
    for item in rows:
        item.update(edits.get(item["question_id"], {}))
    path = write_rows(tmp_path, rows)
    dataset = load_dataset(path, pin_for(path))
    before = select_official(dataset, manifest())
    after = select_official(dataset, manifest(rule=dataclasses.replace(RULE, **changes)))
    assert excluded in before.by_type["knowledge-update"]
    # The excluded id leaves; the 21st eligible id moves up.
    assert after.by_type["knowledge-update"] == tuple(
        sorted(set(before.by_type["knowledge-update"]) - {excluded} | {"a020"})
    )
    assert (excluded, "knowledge-update", reason) in {
        (item.question_id, item.question_type, item.reason) for item in after.exclusions
    }


def test_another_abstention_suffix_excludes_other_ids_and_readmits_abs(tmp_path):
    path = write_rows(tmp_path, make_selection_rows())
    dataset = load_dataset(path, pin_for(path))
    assert "a000_abs" not in select_official(dataset, manifest()).by_type["knowledge-update"]
    after = select_official(dataset, manifest(rule=dataclasses.replace(RULE, exclude_abstention_suffix="04")))
    assert after.by_type["knowledge-update"] == ("a000", "a000_abs", *(f"a{i:03d}" for i in range(1, 20) if i != 4))
    assert ("a004", "abstention id (04)") in {(item.question_id, item.reason) for item in after.exclusions}


def test_take_and_cases_per_scenario_come_from_the_manifest(tmp_path):
    path = write_rows(tmp_path, make_selection_rows())
    dataset = load_dataset(path, pin_for(path))
    rule = dataclasses.replace(RULE, take_per_question_type=8, cases_per_type_per_scenario=2)
    selection = select_official(dataset, manifest(rule=rule))
    assert selection.by_type["temporal-reasoning"] == tuple(f"b{i:03d}" for i in range(8))
    assert selection.scenarios["confirmation_help"] == ("a000", "a001", "b000", "b001")
    assert selection.scenarios["noisy_signal_control"] == ("a006", "a007", "b006", "b007")
    rule = dataclasses.replace(RULE, take_per_question_type=23, cases_per_type_per_scenario=5)
    with pytest.raises(DatasetError, match="not enough eligible knowledge-update rows: 22 of 23 needed"):
        select_official(dataset, manifest(rule=rule))


def test_the_type_order_of_the_manifest_orders_each_scenario(tmp_path):
    path = write_rows(tmp_path, make_selection_rows())
    dataset = load_dataset(path, pin_for(path))
    rule = dataclasses.replace(RULE, eligible_question_types=("temporal-reasoning", "knowledge-update"))
    selection = select_official(dataset, manifest(rule=rule))
    assert selection.scenarios["access_help"] == tuple(
        [f"b{i:03d}" for i in range(5, 10)] + [f"a{i:03d}" for i in range(5, 10)]
    )
    only_tr = dataclasses.replace(RULE, eligible_question_types=("temporal-reasoning",))
    assert set(select_official(dataset, manifest(rule=only_tr)).by_type) == {"temporal-reasoning"}


def test_bank_bounds_sort_and_size(tmp_path):
    rows = make_selection_rows()
    rows.append(row("c000a", kind="single-session-user", sessions=[[{"role": "assistant", "content": "x"}]]))
    path = write_rows(tmp_path, rows)
    pool = load_protocol().config.pool
    bank = build_bank(load_dataset(path, pin_for(path)), pool)
    assert [record.question_id for record in bank] == [f"c{i:03d}" for i in range(40)]
    assert all(40 <= len(record.evidence) <= 700 for record in bank)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda rows: rows[0].update(question=""), "field question"),
        (lambda rows: rows[0].update(question_date=5), "field question_date"),
        (lambda rows: rows[-1].pop("haystack_dates"), "haystack_dates"),
    ],
)
def test_candidate_row_errors_name_question_and_field(tmp_path, mutate, message):
    rows = make_selection_rows()
    mutate(rows)
    path = write_rows(tmp_path, rows)
    dataset = load_dataset(path, pin_for(path))
    with pytest.raises(DatasetError, match=message):
        select_official(dataset, manifest())
        build_bank(dataset, load_protocol().config.pool)


def test_wrong_hash_is_rejected_before_parsing(tmp_path):
    path = tmp_path / "data.json"
    path.write_text("[ truncated", encoding="utf-8")
    pin = DatasetPin("r", "0" * 40, "f", "1" * 64)
    with pytest.raises(DatasetError, match="not the pinned"):
        load_dataset(path, pin)
    with pytest.raises(DatasetError, match="not valid JSON"):
        load_dataset(path, pin, allow_unpinned=True)


def test_unpinned_dataset_is_recorded(tmp_path):
    path = write_rows(tmp_path, [row("a")])
    dataset = load_dataset(path, DatasetPin("r", "0" * 40, "f", "1" * 64), allow_unpinned=True)
    assert dataset.pinned is False
    assert dataset.record() == {
        "repository": "r", "revision": "0" * 40, "filename": "f", "sha256": sha256_file(path), "pinned": False,
    }


@pytest.mark.parametrize(
    "rows, message",
    [
        ({"question_id": "a"}, "root must be a JSON array"),
        ([row("a"), row("a")], "duplicate question_id 'a'"),
        ([row("a"), {"question_id": ""}], "row 1: question_id"),
        ([row("a"), "text"], "row 1: must be an object"),
    ],
)
def test_root_and_id_checks(tmp_path, rows, message):
    path = write_rows(tmp_path, rows)
    with pytest.raises(DatasetError, match=message):
        load_dataset(path, pin_for(path))
