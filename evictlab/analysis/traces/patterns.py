# ruff: noqa: RUF001  (full-width punctuation is what the spec's Chinese patterns match)
"""DeerMem's message patterns (spec 1.15), written for evictlab from the spec's description.

Six signals (``correction``, ``reinforcement``, ``preference``, ``identity``, ``goal``,
``decision``) fire when any of their patterns *searches* true in one of the last six filtered
messages that are human (:func:`detect_signals`); ``trivial`` turns are dropped before that
(:func:`is_trivial`: a full match after the trailing punctuation of spec 1.12 A3 is stripped).
English patterns are case-insensitive and word-bounded (``\\b`` is Unicode-aware, so a CJK
ideograph is a word character); Chinese patterns are plain substrings, and only
``reinforcement`` adds an end condition. Only ``reinforcement`` feeds the 1.9 gate; the others
are here so that every example of spec 1.15 can be checked.

:func:`reinforcement_table` measures the reinforcement signal on the labelled message set
shipped in ``data/messages/reinforcement.tsv`` (written for this project): precision and recall
of "the signal fired" against "the message confirms", overall and per language.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ...errors import ContractError
from ...resources import DATA_DIR

IGNORE = re.IGNORECASE
_VERB = r"(?:go with|use|pick|choose)"
_NAME_TAIL = r"[a-z][a-z \-]{2,}\b"
_END_EN = r"(?=[.!?]|$)"  # ASCII terminators or end of text (spec 1.11a C5)
_END_ZH = r"(?=[。！？!?.]|$)"

#: Per signal: the compiled patterns, English first (case-insensitive), then Chinese.
PATTERNS: dict[str, tuple[re.Pattern[str], ...]] = {
    "correction": (
        re.compile(r"\bthat(?:'s| is) (?:wrong|incorrect)\b", IGNORE),
        re.compile(r"\byou misunderstood\b", IGNORE),
        re.compile(r"\btry again\b", IGNORE),
        re.compile(r"\bredo\b", IGNORE),
        *(re.compile(text) for text in ("不对", "你理解错了", "你理解有误", "重试", "重新来", "换一种", "改用")),
    ),
    "decision": (
        re.compile(rf"\blet.s {_VERB}\b", IGNORE),
        re.compile(rf"\bI.ll {_VERB}\b", IGNORE),
        re.compile(rf"\bwe (?:should|will) {_VERB}\b", IGNORE),
        re.compile(r"\bI (?:decide|chose|selected) to\b", IGNORE),
        *(re.compile(text) for text in ("就用", "决定用", "决定采用", "我们选", "我选", "就采用")),
    ),
    "goal": (
        re.compile(r"\bI (?:plan to|want to|am going to|aim to|intend to)\b", IGNORE),
        re.compile(r"\bmy goal is\b", IGNORE),
        re.compile(r"\bI.m going to\b", IGNORE),
        re.compile(r"\bnext I.ll\b", IGNORE),
        *(re.compile(text) for text in ("我的目标是", "我打算", "我准备", "接下来我要", "接下来我打算", "我想做")),
    ),
    "identity": (
        re.compile(rf"\bI am (?:an? )?{_NAME_TAIL}", IGNORE),
        re.compile(r"\bI work as\b", IGNORE),
        re.compile(rf"\bI.m (?:an? )?{_NAME_TAIL}", IGNORE),
        re.compile(r"\bmy job is\b", IGNORE),
        *(re.compile(text) for text in ("我是", "我的职业是", "我的工作是", "我担任", "我是一名")),
    ),
    "preference": (
        re.compile(r"\bI (?:really )?(?:prefer|like|love|enjoy|favor)\b", IGNORE),
        re.compile(r"\bI (?:really )?(?:hate|dislike|don.t like|cannot stand)\b", IGNORE),
        re.compile(r"\bmy favorite\b", IGNORE),
        re.compile(r"\bI.d rather\b", IGNORE),
        *(re.compile(text) for text in ("我喜欢", "我偏好", "我更喜欢", "我偏爱", "我讨厌", "我不喜欢", "我钟爱",
                                        "我最喜欢")),
    ),
    "reinforcement": (
        re.compile(r"\byes[,.]?\s+(?:exactly|perfect|that(?:'s| is) (?:right|correct|it))\b", IGNORE),
        re.compile(rf"\bperfect{_END_EN}", IGNORE),
        re.compile(r"\bexactly\s+(?:right|correct)\b", IGNORE),
        re.compile(r"\bthat(?:'s| is)\s+(?:exactly\s+)?(?:right|correct|what i (?:wanted|needed|meant))\b", IGNORE),
        re.compile(r"\bkeep\s+(?:doing\s+)?that\b", IGNORE),
        re.compile(r"\bjust\s+(?:like\s+)?(?:that|this)\b", IGNORE),
        re.compile(rf"\bthis is (?:great|helpful){_END_EN}", IGNORE),
        re.compile(rf"\bthis is what i wanted{_END_EN}", IGNORE),
        re.compile(rf"对[，,]?\s*就是这样{_END_ZH}"),
        re.compile(rf"完全正确{_END_ZH}"),
        re.compile(rf"(?:对[，,]?\s*)?就是这个意思{_END_ZH}"),
        re.compile(rf"正是我想要的{_END_ZH}"),
        re.compile(rf"继续保持{_END_ZH}"),
        re.compile(rf"(?:以后|今后)(?:都|一直)?保持这样{_END_ZH}"),
    ),
}
#: Signal names in the order DeerMem reports them (spec 1.12 A5).
SIGNALS = ("correction", "reinforcement", "preference", "identity", "goal", "decision")
TRIVIAL = (
    re.compile(r"(?:ok|okay|got it|thanks|thank you|cheers)", IGNORE),
    *(re.compile(text) for text in ("嗯+", "好", "好的", "好呀", "好的呢", "谢谢", "感谢", "多谢", "对", "是的", "收到",
                                    "明白", "了解", "知道了")),
)
TRAILING = " \t\r\n.。,，!！?？;；"
WINDOW = 6
LABELLED_SET = DATA_DIR / "messages" / "reinforcement.tsv"


def fires(signal: str, text: str) -> bool:
    """Whether ``signal``'s patterns search true in one message (stripped first)."""
    if signal not in PATTERNS:
        raise ContractError(f"unknown signal {signal!r}; known: {', '.join(SIGNALS)}")
    stripped = text.strip()
    return any(pattern.search(stripped) for pattern in PATTERNS[signal])


def is_trivial(text: str) -> bool:
    """A trivial turn (spec 1.12 A3): stripped, cleared of trailing punctuation, then a full match."""
    cleared = text.strip().rstrip(TRAILING)
    return any(pattern.fullmatch(cleared) for pattern in TRIVIAL)


def detect_signals(messages: Sequence[tuple[str, str]]) -> list[str]:
    """The signals of a filtered message list of ``(role, text)`` pairs: the last six messages,
    human ones only, in DeerMem's order."""
    window = [text for role, text in messages[-WINDOW:] if role == "human"]
    return [signal for signal in SIGNALS if any(fires(signal, text) for text in window)]


def read_labelled(path: str | Path = LABELLED_SET) -> pd.DataFrame:
    """The labelled messages: columns ``language`` (en/zh), ``confirms`` (bool), ``kind``, ``text``."""
    path = Path(path)
    records = []
    with path.open(encoding="utf-8", newline="") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE), start=1):
            if not row or row[0].startswith("#"):
                continue
            if len(row) != 4 or row[0] not in ("en", "zh") or row[1] not in ("yes", "no"):
                raise ContractError(f"{path}: line {number}: expected LANGUAGE<TAB>yes|no<TAB>KIND<TAB>TEXT")
            records.append({"language": row[0], "confirms": row[1] == "yes", "kind": row[2], "text": row[3]})
    return pd.DataFrame(records)


def reinforcement_table(labelled: pd.DataFrame | None = None) -> pd.DataFrame:
    """Precision and recall of the reinforcement signal on the labelled set, overall and per language."""
    frame = read_labelled() if labelled is None else labelled
    fired = frame["text"].map(lambda text: fires("reinforcement", text))
    rows = []
    parts = [("all", frame.index), *((lang, frame.index[frame["language"] == lang]) for lang in ("en", "zh"))]
    for name, part in parts:
        truth, said = frame.loc[part, "confirms"], fired.loc[part]
        hits = int((truth & said).sum())
        rows.append({
            "language": name, "messages": len(part), "confirmations": int(truth.sum()), "fired": int(said.sum()),
            "true_positives": hits, "precision": hits / said.sum() if said.sum() else float("nan"),
            "recall": hits / truth.sum() if truth.sum() else float("nan"),
        })
    return pd.DataFrame(rows)

