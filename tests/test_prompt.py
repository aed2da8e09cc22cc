"""Answer prompt parsing, message rendering, payload and fingerprint (spec 3.1 to 3.3)."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evictlab.analysis.qa.prompt import (
    MEMORY_JOINERS,
    AnswerTemplate,
    build_payload,
    canonical_payload_json,
    parse_answer_template,
    render_messages,
    request_fingerprint,
    row_id,
)
from evictlab.errors import ContractError

# The shape of spec 3.1 (8 lines, LF, final newline) with a stand-in system sentence.
SYSTEM_SENTENCE = "Use only the memory below. Say INSUFFICIENT when it does not answer."
TEMPLATE_TEXT = (
    "SYSTEM:\n"
    f"{SYSTEM_SENTENCE}\n"
    "\n"
    "USER:\n"
    "{{CURRENT_DATE_SECTION}}STORED MEMORY:\n"
    "{{STORED_MEMORY}}\n"
    "\n"
    "QUESTION: {{QUESTION}}\n"
)
TEMPLATE = parse_answer_template(TEMPLATE_TEXT)

VECTOR_FACTS = [
    {"id": "fact-b", "content": "The cat sleeps in the study."},
    {"id": "fact-a", "content": "The user moved to Lyon."},
]
VECTOR_DATE = "2023/05/20 (Sat) 02:21"
VECTOR_QUESTION = "Where does the user live?"

FINGERPRINT_SETTINGS = {
    "model": "deepseek-v4-flash", "temperature": 0.0, "max_tokens": 2048, "stream": False
}
SIMPLE_TEXT = (
    '{"max_tokens": 2048, "messages": [{"content": "s", "role": "system"}, {"content": "u",'
    ' "role": "user"}], "model": "deepseek-v4-flash", "stream": false, "temperature": 0.0}'
)
SIMPLE_DIGEST = "9f48fc4d2898201ef7f8c2b09e0b11ba9602083a0837e650806e0eb1a52d2f1b"
CHINESE_USER = 'STORED MEMORY:\n[gold_x]\n对，就是这样 "q"\n\nQUESTION: Q?'
CHINESE_DIGEST = "d342d719fa6aed0a7d62f6e3cfd3645441a6ad1943d756028d5d0809b0bd44cb"


def payload_for(system: str, user: str) -> dict:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return build_payload(messages, **FINGERPRINT_SETTINGS)


# --- template ----------------------------------------------------------------------------


def test_template_parts_are_split_and_stripped_of_newlines():
    assert AnswerTemplate(
        system=SYSTEM_SENTENCE,
        user="{{CURRENT_DATE_SECTION}}STORED MEMORY:\n{{STORED_MEMORY}}\n\nQUESTION: {{QUESTION}}",
    ) == TEMPLATE


def test_extra_blank_lines_around_the_parts_are_stripped():
    text = TEMPLATE_TEXT.replace("SYSTEM:\n", "SYSTEM:\n\n").replace("USER:\n", "USER:\n\n") + "\n"
    assert parse_answer_template(text) == TEMPLATE


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (TEMPLATE_TEXT.replace("SYSTEM:\n", "System:\n"), "must start with 'SYSTEM:'"),
        ("\n" + TEMPLATE_TEXT, "must start with 'SYSTEM:'"),
        (TEMPLATE_TEXT.replace("\n\nUSER:\n", "\nUSER:\n"), "missing the separator"),
        (TEMPLATE_TEXT.replace("USER:\n", "USER: "), "missing the separator"),
        (TEMPLATE_TEXT.replace("{{QUESTION}}", "{{Q}}"), "lacks placeholder(s) {{QUESTION}}"),
        (
            TEMPLATE_TEXT.replace("{{CURRENT_DATE_SECTION}}", "").replace("{{STORED_MEMORY}}", ""),
            "lacks placeholder(s) {{CURRENT_DATE_SECTION}}, {{STORED_MEMORY}}",
        ),
    ],
)
def test_template_violations_name_the_source_and_the_problem(text, expected):
    with pytest.raises(ContractError) as caught:
        parse_answer_template(text, source="prompts/answer-v1.txt")
    assert "prompts/answer-v1.txt" in str(caught.value)
    assert expected in str(caught.value)


def test_placeholders_in_the_system_part_do_not_count():
    text = "SYSTEM:\n{{CURRENT_DATE_SECTION}}{{STORED_MEMORY}}{{QUESTION}}\n\nUSER:\nhello\n"
    with pytest.raises(ContractError, match="USER part lacks"):
        parse_answer_template(text)


def test_crlf_template_is_rejected_with_a_line_ending_hint():
    with pytest.raises(ContractError, match="LF, not CRLF"):
        parse_answer_template(TEMPLATE_TEXT.replace("\n", "\r\n"))


# --- messages ----------------------------------------------------------------------------


def test_spec_vector_renders_the_published_user_content():
    messages = render_messages(
        TEMPLATE, question=VECTOR_QUESTION, question_date=VECTOR_DATE, facts=VECTOR_FACTS
    )
    assert messages == [
        {"role": "system", "content": SYSTEM_SENTENCE},
        {
            "role": "user",
            "content": "\n".join(
                [
                    "CURRENT DATE: 2023/05/20 (Sat) 02:21",
                    "STORED MEMORY:",
                    "[fact-a]",
                    "The user moved to Lyon.",
                    "",
                    "[fact-b]",
                    "The cat sleeps in the study.",
                    "",
                    "QUESTION: Where does the user live?",
                ]
            ),
        },
    ]


def test_newline_joiner_puts_blocks_on_consecutive_lines():
    user = render_messages(
        TEMPLATE,
        question=VECTOR_QUESTION,
        question_date=VECTOR_DATE,
        facts=VECTOR_FACTS,
        memory_joiner="newline",
    )[1]["content"]
    assert "STORED MEMORY:\n[fact-a]\nThe user moved to Lyon.\n[fact-b]\nThe cat" in user


def test_joiners_are_the_two_published_variants():
    assert MEMORY_JOINERS == {"blank-line": "\n\n", "newline": "\n"}


@pytest.mark.parametrize("question_date", [None, ""])
def test_without_a_question_date_the_user_message_starts_with_stored_memory(question_date):
    user = render_messages(
        TEMPLATE, question="Q?", question_date=question_date, facts=VECTOR_FACTS[:1]
    )[1]["content"]
    assert user == "STORED MEMORY:\n[fact-b]\nThe cat sleeps in the study.\n\nQUESTION: Q?"


def test_memory_blocks_follow_plain_string_order_of_ids():
    facts = [{"id": i, "content": i.upper()} for i in ("gold_2", "gold_10", "d_9", "Z")]
    user = render_messages(TEMPLATE, question="Q?", question_date=None, facts=facts)[1]["content"]
    ids_in_order = [line for line in user.splitlines() if line.startswith("[")]
    assert ids_in_order == ["[Z]", "[d_9]", "[gold_10]", "[gold_2]"]


@settings(deadline=None)
@given(st.permutations(["gold_1", "gold_2", "d_3", "d_10", "x"]))
def test_input_order_of_the_kept_facts_does_not_change_the_messages(ids):
    facts = [{"id": fact_id, "content": f"content of {fact_id}"} for fact_id in ids]
    reference = [{"id": fact_id, "content": f"content of {fact_id}"} for fact_id in sorted(ids)]
    assert render_messages(
        TEMPLATE, question="Q?", question_date="d", facts=facts
    ) == render_messages(TEMPLATE, question="Q?", question_date="d", facts=reference)


def test_replacement_order_is_date_then_memory_then_question():
    # A fact that contains a placeholder is substituted by the later steps only.
    facts = [{"id": "a", "content": "{{CURRENT_DATE_SECTION}} and {{QUESTION}}"}]
    user = render_messages(TEMPLATE, question="Q?", question_date="D", facts=facts)[1]["content"]
    assert user == (
        "CURRENT DATE: D\nSTORED MEMORY:\n[a]\n{{CURRENT_DATE_SECTION}} and Q?\n\nQUESTION: Q?"
    )


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        ([], "at least one kept fact"),
        ([{"id": "a", "content": "x"}, {"id": "a", "content": "y"}], "duplicate fact id 'a'"),
        ([{"id": 1, "content": "x"}], "position 0: 'id' must be a string"),
        ([{"id": "a", "content": "x"}, {"id": "b"}], "position 1: 'content' must be a string"),
        (["a"], "position 0 must be a mapping"),
    ],
)
def test_invalid_kept_facts_are_rejected(facts, expected):
    with pytest.raises(ContractError) as caught:
        render_messages(TEMPLATE, question="Q?", question_date=None, facts=facts)
    assert expected in str(caught.value)


def test_unknown_joiner_names_the_known_ones():
    expected = "unknown memory_joiner 'tab'; known: blank-line, newline"
    with pytest.raises(ContractError, match=expected):
        render_messages(
            TEMPLATE, question="Q?", question_date=None, facts=VECTOR_FACTS, memory_joiner="tab"
        )


def test_row_id_joins_case_and_policy_with_a_double_underscore():
    assert row_id("01493427", "hybrid-v1") == "01493427__hybrid-v1"


# --- payload and fingerprint -------------------------------------------------------------


def test_payload_has_exactly_the_five_keys_and_a_float_temperature():
    payload = build_payload(
        [{"role": "system", "content": "s", "name": "ignored"}, {"role": "user", "content": "u"}],
        model="m",
        temperature=0,
        max_tokens=16,
        stream=False,
    )
    assert payload == {
        "model": "m",
        "temperature": 0.0,
        "max_tokens": 16,
        "stream": False,
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
    }
    assert isinstance(payload["temperature"], float)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"model": ""}, "model"),
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": True}, "temperature"),
        ({"max_tokens": 2048.0}, "max_tokens"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"stream": 0}, "stream"),
    ],
)
def test_payload_settings_are_validated(override, expected):
    settings = {**FINGERPRINT_SETTINGS, **override}
    with pytest.raises(ContractError, match=expected):
        build_payload([{"role": "user", "content": "u"}], **settings)


def test_first_fingerprint_vector_is_byte_exact():
    payload = payload_for("s", "u")
    assert canonical_payload_json(payload) == SIMPLE_TEXT
    assert request_fingerprint(payload) == SIMPLE_DIGEST


def test_second_fingerprint_vector_is_byte_exact():
    payload = payload_for("s", CHINESE_USER)
    text = canonical_payload_json(payload)
    assert text == SIMPLE_TEXT.replace(
        '"u"', '"STORED MEMORY:\\n[gold_x]\\n对，就是这样 \\"q\\"\\n\\nQUESTION: Q?"'
    )
    assert request_fingerprint(payload) == CHINESE_DIGEST


def test_second_vector_through_template_and_rendering():
    template = parse_answer_template(TEMPLATE_TEXT.replace(SYSTEM_SENTENCE, "s"))
    messages = render_messages(
        template,
        question="Q?",
        question_date=None,
        facts=[{"id": "gold_x", "content": '对，就是这样 "q"'}],
    )
    assert request_fingerprint(build_payload(messages, **FINGERPRINT_SETTINGS)) == CHINESE_DIGEST


def test_fingerprint_ignores_key_order_of_the_payload_and_messages():
    shuffled = {
        "messages": [{"content": "s", "role": "system"}, {"content": "u", "role": "user"}],
        "temperature": 0.0,
        "stream": False,
        "model": "deepseek-v4-flash",
        "max_tokens": 2048,
    }
    assert request_fingerprint(shuffled) == SIMPLE_DIGEST


def test_string_escaping_follows_python_json_with_raw_non_ascii():
    content = 'a\u2028b\u2029c\u001fd\te\\f/g"\b\f\r\x7fé'
    text = canonical_payload_json(payload_for("s", content))
    assert '"a\u2028b\u2029c\\u001fd\\te\\\\f/g\\"\\b\\f\\r\x7fé"' in text
    assert request_fingerprint(payload_for("s", content)) == hashlib.sha256(
        text.encode("utf-8")
    ).hexdigest()


def test_the_joiner_changes_the_fingerprint_and_equal_kept_sets_share_it():
    def fingerprint(facts, joiner):
        messages = render_messages(
            TEMPLATE, question="Q?", question_date=None, facts=facts, memory_joiner=joiner
        )
        return request_fingerprint(build_payload(messages, **FINGERPRINT_SETTINGS))

    reversed_facts = list(reversed(VECTOR_FACTS))
    assert fingerprint(VECTOR_FACTS, "blank-line") == fingerprint(reversed_facts, "blank-line")
    assert fingerprint(VECTOR_FACTS, "blank-line") != fingerprint(VECTOR_FACTS, "newline")


def test_lone_surrogate_is_a_contract_error():
    with pytest.raises(ContractError, match="lone surrogate"):
        request_fingerprint(payload_for("s", "\ud800"))
