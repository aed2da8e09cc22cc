
"""DeerMem's lifecycle stages (spec 1.9, 1.11a-1.15), each against the spec's vectors and examples."""

from __future__ import annotations

import datetime as _dt

import numpy as np
import pytest

from evictlab.analysis.traces.lifecycle import (
    DAY_US,
    MIDDLEWARE,
    LifecycleConfig,
    NewFact,
    admit,
    contradiction_removals,
    creation_valid_days,
    feed_signal,
    filter_messages,
    first_line_tokens,
    gate_reason,
    guaranteed_pool,
    injected,
    line_tokens,
    parse_stages,
    review_proposals,
    stale_removals,
    staleness_candidates,
    stored_category,
)
from evictlab.analysis.traces.schema import time_us
from evictlab.core.tokens import char_tokens, content_key, fact_line
from evictlab.errors import ContractError
from evictlab.policies.signals import read_confidence
from evictlab.selection.deermem import select_facts_for_capacity

NOW = time_us(_dt.datetime(2026, 8, 13, tzinfo=_dt.UTC))


def days_ago(days: float) -> int:
    return NOW - int(days * DAY_US)


# --------------------------------------------------------------------------- stage names


def test_stage_names_default_is_middleware_mode_without_consolidation():
    assert parse_stages("middleware") == frozenset(MIDDLEWARE)
    assert "consolidation" not in MIDDLEWARE and "injection" in MIDDLEWARE
    assert parse_stages("none") == frozenset()
    assert parse_stages("middleware,-injection") == frozenset(MIDDLEWARE) - {"injection"}
    assert parse_stages("admission, dedup") == {"admission", "dedup"}
    with pytest.raises(ContractError, match="unknown stage 'cache'"):
        parse_stages("cache")
    with pytest.raises(ContractError, match="consolidation is off in production"):
        parse_stages("middleware,consolidation")


# --------------------------------------------------------------------------- admission and dedup (1.12 C5)


def test_scope_gate_stores_only_the_user_durable_descriptive_fact():
    labels = [("user", "durable", "descriptive"), ("thread", "durable", "descriptive"),
              ("user", "temporary", "descriptive"), ("user", "durable", "transactional"), (None, None, None)]
    outcomes, _ = admit([NewFact(f"fact {i}", 0.9, *item) for i, item in enumerate(labels)], [])
    assert outcomes == ["stored", "scope", "durability", "authority", "missing"]
    # missing is checked before the values, labels are stripped and lower-cased
    assert gate_reason("thread", None, "descriptive") == "missing"
    assert gate_reason(" USER ", "Durable", "descriptive ") == ""


def test_confidence_threshold_after_the_gate_and_inclusive():
    outcomes, replacement = admit([NewFact("a", 0.7), NewFact("b", 0.69), NewFact("c", 0.6, "thread"),
                                   NewFact("d", 1.3), NewFact("e", -0.1)], [])
    assert outcomes == ["stored", "confidence", "scope", "stored", "confidence"]
    assert replacement == {0: "a", 3: "d"}
    assert admit([NewFact("b", 0.1, None)], [], gate=False)[0] == ["stored"]  # admission off


def test_duplicates_by_content_key():
    assert content_key("  User prefers Python ") == content_key("user prefers python")
    assert content_key("straße") == content_key("STRASSE")
    assert content_key("user  prefers") != content_key("user prefers")  # inner whitespace kept
    existing = [content_key("User likes Python")]
    outcomes, replacement = admit([NewFact(content_key("User likes Python"), 0.95)], existing)
    assert outcomes == ["duplicate"] and replacement == {0: "user likes python"}  # recorded all the same
    outcomes, _ = admit([NewFact("same", 0.91), NewFact("same", 0.92)], [])
    assert outcomes == ["stored", "duplicate"]  # within one batch the first is kept
    assert admit([NewFact("same", 0.91), NewFact("same", 0.92)], [], dedup=False)[0] == ["stored", "stored"]
    assert admit([NewFact("", 0.9)], [])[0] == ["empty"]


def test_cap_two_after_admission_keeps_python_and_uv():
    stored = [{"id": "py", "content": "User prefers Python", "confidence": 0.95},
              {"id": "dark", "content": "User likes dark mode", "confidence": 0.8}]
    new = [("dark2", "User likes dark mode", 0.9), ("uv", "User uses uv", 0.85), ("logs", "Noisy logs", 0.6)]
    outcomes, _ = admit([NewFact(content_key(text), confidence) for _, text, confidence in new],
                        [content_key(fact["content"]) for fact in stored])
    assert outcomes == ["duplicate", "stored", "confidence"]
    facts = stored + [{"id": fact_id, "confidence": conf} for (fact_id, _, conf), outcome in zip(new, outcomes)
                      if outcome == "stored"]
    decision = select_facts_for_capacity(facts, max_facts=2, policy="confidence")
    assert [fact["id"] for fact in decision.kept] == ["py", "uv"]


def test_new_fact_valid_days_are_capped_at_creation():
    assert creation_valid_days(180) == 180
    assert creation_valid_days(3650) == 1800
    assert creation_valid_days(3650, LifecycleConfig(staleness_max_lifetime_multiplier=3.0)) == 270
    assert creation_valid_days(None) is None and creation_valid_days(0) is None


# --------------------------------------------------------------------------- contradiction (1.12 C7)


def removals(entries, replacement, kept):
    """contradiction_removals on one memory holding ``kept`` ((id, content key) pairs), by ids:
    the removed ids and the entries refused."""
    ids = [fact_id for fact_id, _ in kept]
    codes = {key: code for code, key in enumerate(dict.fromkeys(key for _, key in kept))}
    pairs = [(ids.index(target) if target in ids else None,
              None if index is None else codes.get(replacement.get(index), -1)) for target, index in entries]
    removed, refused = contradiction_removals(pairs, np.array([codes[key] for _, key in kept]),
                                              np.ones(len(kept), dtype=bool))
    return [fact_id for fact_id, gone in zip(ids, removed) if gone], int(refused)


def test_removals_run_for_many_memories_at_once_in_entry_order():
    # positions: a (key 0), b (key 1), c (key 1); memory 0 holds all, memory 1 only a and b
    keys = np.array([0, 1, 1])
    held = np.array([[True, True, True], [True, True, False]])
    # a needs another key-1 fact (both have b); then b needs another key-1 fact: c, only in memory 0
    removed, refused = contradiction_removals([(0, 1), (1, 1)], keys, held)
    assert removed.tolist() == [[True, True, False], [True, False, False]] and refused.tolist() == [0, 1]
    # an earlier removal counts: after b goes, c has no other key-1 fact left
    removed, refused = contradiction_removals([(1, 1), (2, 1)], keys, held[:1])
    assert removed.tolist() == [[False, True, False]] and refused.tolist() == [1]


def test_paired_removal_needs_a_surviving_replacement():
    old = ("fact_vim", content_key("User prefers Vim"))
    code = content_key("User now prefers VS Code")
    # the replacement passed the gates and survived: only it remains
    _outcomes, replacement = admit([NewFact(code, 0.9)], [old[1]])
    removed, refused = removals([("fact_vim", 0)], replacement, [old, ("new", code)])
    assert (removed, refused) == (["fact_vim"], 0)
    # rejected by the scope gate or the threshold: no replacement key, the old fact stays
    for fact in (NewFact(code, 0.9, "thread", "temporary"), NewFact(code, 0.69)):
        _, replacement = admit([fact], [old[1]])
        assert removals([("fact_vim", 0)], replacement, [old]) == ([], 1)
    # cap 1: Vim 0.9 against the replacement 0.8, the replacement is evicted and Vim stays
    decision = select_facts_for_capacity([{"id": "fact_vim", "confidence": 0.9}, {"id": "new", "confidence": 0.8}],
                                         max_facts=1, policy="confidence")
    kept = [(fact["id"], {"fact_vim": old[1], "new": code}[fact["id"]]) for fact in decision.kept]
    assert removals([("fact_vim", 0)], {0: code}, kept) == ([], 1)


def test_paired_removal_edges():
    vim, code = content_key("User prefers Vim"), content_key("User prefers VS Code")
    kept = [("fact_vim", vim), ("fact_code", code)]
    # the replacement is a duplicate of a different existing fact: enough
    assert removals([("fact_vim", 0)], {0: code}, kept)[0] == ["fact_vim"]
    # equal to the target's own content: not enough
    assert removals([("fact_vim", 0)], {0: vim}, kept) == ([], 1)
    # an index pointing at an unlabelled fact: old kept, the other new fact is still stored
    outcomes, replacement = admit([NewFact(code, 0.9, None, None, None), NewFact("other", 0.9)], [vim])
    assert outcomes == ["missing", "stored"]
    assert removals([("fact_vim", 0)], replacement, [*kept, ("o", "other")]) == ([], 1)
    # a pure retraction, and an unknown id (no-op)
    assert removals([("fact_vim", None), ("gone", None)], {}, kept) == (["fact_vim"], 0)


# --------------------------------------------------------------------------- staleness (1.10, 1.12 C3)


def test_review_clock_confirmation_resets_it():
    reference = np.array([days_ago(7), days_ago(400), days_ago(89), days_ago(91), days_ago(100)])
    valid = np.array([90, 90, 0, 0, 120])
    candidates = staleness_candidates(reference, valid, ["context"] * 5, NOW)
    # created 400 days ago with evd 90 but confirmed 7 days ago: not a candidate
    assert candidates.tolist() == [False, True, False, True, False]


def test_protected_categories_match_the_raw_string_exactly():
    categories = ["correction", "Correction", "correction ", "other", None]
    candidates = staleness_candidates(np.full(5, days_ago(400)), np.zeros(5), categories, NOW)
    assert candidates.tolist() == [False, True, True, True, True]


def test_removals_per_cycle_lowest_confidence_first():
    confidence = np.array([0.95, 0.80, 0.70, 0.65, 0.60])
    everything = np.ones(5, dtype=bool)
    removed = stale_removals(everything, everything, confidence, LifecycleConfig(staleness_max_removals_per_cycle=2))
    assert confidence[~removed].tolist() == [0.95, 0.80, 0.70]
    confidence = np.array([read_confidence(value) for value in (None, 0.9, 0.2)])  # null counts as 0.5
    removed = stale_removals(np.ones(3, bool), np.ones(3, bool), confidence,
                             LifecycleConfig(staleness_max_removals_per_cycle=1))
    assert removed.tolist() == [False, False, True]
    # only candidates are removed, whatever is proposed
    assert stale_removals(np.ones(2, bool), np.array([True, False]), np.ones(2)).tolist() == [True, False]


def test_the_prompt_needs_three_candidates():
    superseded = np.array([True, True, False, True])
    assert not review_proposals(np.array([True, True, False, False]), superseded).any()
    assert review_proposals(np.array([True, True, True, False]), superseded).tolist() == [True, True, False, False]


def test_reinforcement_before_staleness_in_one_update():
    """1.11a C7: a fact reinforced in the update is no longer a candidate at apply time."""
    reference = np.array([days_ago(200), days_ago(200), days_ago(200)])
    in_prompt = staleness_candidates(reference, np.zeros(3), ["context"] * 3, NOW)
    proposed = review_proposals(in_prompt, np.ones(3, dtype=bool))
    assert proposed.all()
    stamped = reference.copy()
    stamped[1] = NOW  # lastConfirmedAt = the update's now, before the staleness step
    at_apply = staleness_candidates(stamped, np.zeros(3), ["context"] * 3, NOW)
    assert stale_removals(proposed, at_apply, np.full(3, 0.8)).tolist() == [True, False, True]


# --------------------------------------------------------------------------- storage (1.14, 1.11a C6)


def test_a_correction_stored_as_other_loses_both_protections():
    facts = [{"id": f"p{i}", "confidence": 0.99 - i / 100, "category": "preference"} for i in range(10)]
    creating = [*facts, {"id": "c", "confidence": 0.1, "category": "Correction"}]
    decision = select_facts_for_capacity(creating, max_facts=10, policy="hybrid-v1", now=_dt.datetime(2026, 8, 13))
    assert decision.reserved_correction_slots == 1 and "c" in [fact["id"] for fact in decision.kept]
    stored = stored_category("Correction")
    assert stored == "other" and stored_category("correction") == "correction" and stored_category("") == ""
    later = [*facts[:9], {"id": "c", "confidence": 0.1, "category": stored}, {"id": "p9", "confidence": 0.9}]
    decision = select_facts_for_capacity(later, max_facts=10, policy="hybrid-v1", now=_dt.datetime(2026, 8, 13))
    assert decision.reserved_correction_slots == 0 and "c" not in [fact["id"] for fact in decision.kept]
    assert staleness_candidates(np.array([days_ago(400)]), np.zeros(1), [stored], NOW).tolist() == [True]
    assert injected(guaranteed_pool([stored]), np.array([0.1]), np.array([10]), np.array([10]),
                    config=LifecycleConfig(max_injection_tokens=1 + 5)).tolist() == []


# --------------------------------------------------------------------------- reinforcement (1.9, 1.12 A)


def test_feed_signal_window_and_filtering():
    assert feed_signal([("human", "Yes, that's right."), ("ai", "Noted.")])
    assert not feed_signal([("ai", "Perfect.")])  # human messages only
    assert not feed_signal([("human", "对不起，我说错了"), ("human", "对啊")])  # traps
    assert feed_signal([("human", "不对，就是这样。")])  # the known false positive: no negation handling
    old = [("human", "perfect")] + [("human", f"message {i}") for i in range(6)]
    assert not feed_signal(old)  # outside the last six
    # trivial turns and their replies are dropped before the window is taken
    assert feed_signal([("human", "perfect"), *[("human", "OK."), ("ai", "...")] * 5])
    assert filter_messages([("human", "ok"), ("ai", "reply"), ("tool", "x"), ("ai", "next")]) == [("ai", "next")]
    # upload blocks are stripped; an upload-only turn goes with its reply
    upload = "<uploaded_files>a.txt</uploaded_files>\n"
    feed = [("human", upload), ("ai", "r"), ("human", upload + " Perfect. ")]
    assert filter_messages(feed) == [("human", "Perfect.")]


def test_uploads_are_filtered_before_trivial_turns_each_dropping_its_own_reply():
    # spec 1.12 A2 then A3: the upload-only turn takes a1 (A2); "ok" then takes the next reply
    # left, a2 (A3), so the six-message window still holds "Perfect."
    feed = [("human", "Perfect."), ("human", "<uploaded_files>a.txt</uploaded_files>"), ("human", "ok"),
            ("ai", "a1"), ("ai", "a2"), *[("ai", f"m{i}") for i in range(5)]]
    assert filter_messages(feed) == [("human", "Perfect."), *[("ai", f"m{i}") for i in range(5)]]
    assert feed_signal(feed)


# --------------------------------------------------------------------------- injection (1.13)


def spec_facts():
    lines = [fact_line("correction", 0.6, "Never force-push main", "Agent force-pushed"),
             fact_line("preference", 0.9, "Prefers tabs"), fact_line("context", 0.8, "Lives in Lisbon")]
    first = np.array([char_tokens(line) for line in lines])
    later = np.array([char_tokens("\n" + line) for line in lines])
    return ["correction", "preference", "context"], np.array([0.6, 0.9, 0.8]), first, later


def test_computed_vectors_of_spec_1_13():
    categories, confidence, first, later = spec_facts()
    preceding = char_tokens("User Context:\n- Work: Builds compilers")
    assert (preceding, char_tokens("Facts:\n"), first[0], later[1], later[2]) == (9, 1, 17, 8, 8)
    for max_tokens, shown in ((2000, [0, 1, 2]), (25, [0]), (20, [0]), (12, [0]), (5, [0])):
        config = LifecycleConfig(max_injection_tokens=max_tokens, guaranteed_token_budget=50)
        pool = guaranteed_pool(categories, config)
        assert injected(pool, confidence, first, later, config=config, preceding_tokens=9).tolist() == shown
    config = LifecycleConfig(max_injection_tokens=20, guaranteed_categories=())
    pool = guaranteed_pool(categories, config)
    assert injected(pool, confidence, first, later, config=config, preceding_tokens=9).tolist() == [1]


def shown(categories, confidence, sizes, **settings):
    """Injected positions with line counts in characters, as DeerFlow's tests count them."""
    config = LifecycleConfig(**settings)
    sizes = np.array(sizes)
    return injected(guaranteed_pool(categories, config), np.array(confidence), sizes, sizes, config=config).tolist()


def test_deerflow_injection_vectors():
    # facts are ordered by confidence; a long 0.95 line blocks the shorter 0.50 one (strict)
    assert shown(["context"] * 2, [0.95, 0.5], [100, 9], max_injection_tokens=70) == []
    assert shown("abc", [0.3, 0.9, 0.6], [1, 1, 1]) == [1, 2, 0]
    # a correction at 0.7 appears under max 200 / guaranteed 100 beside three long facts
    long_facts = ["context"] * 3 + ["correction"]
    assert shown(long_facts, [0.95, 0.9, 0.85, 0.7], [190, 190, 190, 20], max_injection_tokens=200,
                 guaranteed_token_budget=100) == [3]
    # guaranteed 80: only CorrA of three corrections fits, the regular fact still appears
    corrections = ["correction"] * 3 + ["context"]
    assert shown(corrections, [0.9, 0.8, 0.7, 0.5], [60, 60, 60, 30], guaranteed_token_budget=80) == [0, 3]
    # a fact without category does not enter a ["context"] guaranteed pool; unusable confidence sorts as 0.0
    assert shown([None, " context "], [0.9, 0.1], [60, 10], guaranteed_categories=("context",),
                 guaranteed_token_budget=50) == [1, 0]
    assert shown("ab", [float("nan"), 0.1], [1, 1]) == [1, 0]


def test_fact_lines_and_generated_token_counts():
    assert fact_line(" preference ", "0.915", "a < b & c") == "- [preference | 0.92] a &lt; b &amp; c"
    assert fact_line(None, None, 'say "hi"') == '- [context | 0.00] say "hi"'
    assert fact_line("preference", 0.9, "x", "ignored") == "- [preference | 0.90] x"
    assert line_tokens("preference", 0.9, 80) == char_tokens("\n- [preference | 0.90] " + "x" * 80) == 25


def test_a_generated_line_is_costed_with_the_category_storage_writes():
    # spec 1.14's table: `category` is "one of `preference, correction, context, goal, behavior,
    # identity, constraint, decision, other`, otherwise rewritten to `other`", and spec 1.13's line
    # `- [<category> | <conf 2dp>] <content>` is printed from the stored document get_context reads:
    # a trace's question comes after the update that stored the fact, so `knowledge` prints as `other`
    assert line_tokens("knowledge", 0.9, 80) == char_tokens("\n- [other | 0.90] " + "x" * 80) == 24
    assert line_tokens(" Preference ", 0.9, 80) == line_tokens("other", 0.9, 80)
    assert line_tokens(" preference ", 0.9, 80) == line_tokens("preference", 0.9, 80)
    assert line_tokens("", 0.9, 80) == line_tokens("context", 0.9, 80)  # the parser's default (1.12 B7)


def test_a_first_line_is_counted_alone():
    # spec 1.13: "The first line is counted alone and each later one as `\\n` + line"; under the
    # character rule the `\\n` adds a token when the line's length is 3 mod 4
    line = "- [preference | 0.95] " + "x" * 21  # 43 characters
    assert (first_line_tokens("preference", 0.95, 21), line_tokens("preference", 0.95, 21)) == (
        char_tokens(line), char_tokens("\n" + line)) == (10, 11)
    assert first_line_tokens("preference", 0.95, 20) == line_tokens("preference", 0.95, 20) == 10
    assert first_line_tokens("knowledge", 0.95, 21) == char_tokens("- [other | 0.95] " + "x" * 21)
    # from a trace's `tokens` (a later line's count): less what the `\\n` adds to the ASCII line
    assert first_line_tokens("preference", 0.95, 21, 11) == 10
    assert first_line_tokens("preference", 0.95, 21, 2000) == 1999
    assert first_line_tokens("preference", 0.95, 20, 2000) == 2000
    assert first_line_tokens("preference", 0.95, 21, 0) == 0
