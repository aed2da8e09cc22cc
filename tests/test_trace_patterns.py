"""Spec 1.15: every example of every pattern file classified as the spec says, and the
labelled message set's precision/recall table."""

from __future__ import annotations

import pytest

from evictlab.analysis.traces.patterns import detect_signals, fires, is_trivial, read_labelled, reinforcement_table

EXAMPLES = {
    "correction": (
        ["That's wrong, use uv", "you misunderstood my question", "Please try again", "不对，应该是三点", "改用 Go",
         "对不对？", "不对称", "don't try again"],
        ["That’s wrong", "That was wrong", "redone already", "Let me try it again", "重新开始"],
    ),
    "decision": (
        ["Let's go with Postgres", "I'll use uv for this", "We should pick option B", "I chose to keep it",
         "就用 SQLite 吧", "我选择这个"],
        ["I decided to switch", "Let us use Redis", "Shall we use Go?", "We could use Redis", "决定权在你"],
    ),
    "goal": (
        ["I plan to learn Rust", "My goal is a marathon", "I'm going to refactor this", "Next I'll write tests",
         "我打算明年换工作"],
        ["I wanted to ask something", "Do you plan to?", "我想知道天气", "他打算换工作", "AI want to"],
    ),
    "identity": (
        ["I am an engineer", "I work as a nurse", "I'm a data scientist", "my job is teaching", "我是产品经理",
         "I am going to bed", "我是说"],
        ["I am 30", "I'm ok", "Am I right?", "我们是团队", "I was a teacher"],
    ),
    "preference": (
        ["I prefer uv over pip", "I really like dark mode", "I don't like emojis", "I'd rather use tabs",
         "我不喜欢表情符号"],
        ["Do you prefer X?", "I liked it", "I would rather not", "我们喜欢猫", "I really really like it"],
    ),
    "reinforcement": (
        ["Yes, that's right.", "perfect", "Exactly right, thanks", "对，就是这样。", "以后都保持这样",
         "perfect, exactly right", "Perfect.", "Yes, exactly! That's what I needed.", "完全正确，就是这个意思",
         "对，我就是喜欢简洁回答，以后都保持这样。", "以后保持这样", "今后保持这样。", "很 perfect",
         "不对，就是这样。", "这不完全正确。", "他说的就是这个意思。", "just this once", "yes,perfect"],
        ["对不起，我说错了", "对方就是这样说的", "对啊", "你说的对", "没错", "Perfect, thanks", "That’s right",
         "That's not right", "继续保持联系", "就是这样。", "perfect。", "很perfect"],
    ),
}


@pytest.mark.parametrize("signal", sorted(EXAMPLES))
def test_every_spec_example_is_classified_as_the_spec_says(signal):
    match, no_match = EXAMPLES[signal]
    assert [text for text in match if not fires(signal, text)] == []
    assert [text for text in no_match if fires(signal, text)] == []


def test_trivial_turns():
    for text in ["嗯嗯", "OK.", "谢谢！", "thank you!!", "对", "嗯", "好的", "ok."]:
        assert is_trivial(text), text
    for text in ["ok thanks", "好的，谢谢", "对啊", "明白了", "got  it", "?ok", "Thanks a lot",
                 "use uv to install, ok?"]:
        assert not is_trivial(text), text


def test_the_window_is_the_last_six_messages_human_only():
    messages = [("human", "perfect")] + [("ai", "Done.")] * 5 + [("human", "I prefer tabs")]
    assert detect_signals(messages) == ["preference"]
    assert detect_signals([("ai", "perfect"), ("human", "try again")]) == ["correction"]


def test_the_labelled_set_and_its_table():
    labelled = read_labelled()
    assert len(labelled) >= 300
    assert set(labelled["language"]) == {"en", "zh"} and labelled["language"].value_counts().min() >= 120
    assert labelled["confirms"].sum() >= 100 and (~labelled["confirms"]).sum() >= 150
    assert not labelled["text"].duplicated().any()
    table = reinforcement_table(labelled).set_index("language")
    assert table.loc["all", "messages"] == len(labelled)
    for language in ("all", "en", "zh"):
        assert 0 < table.loc[language, "precision"] < 1 and 0 < table.loc[language, "recall"] < 1
