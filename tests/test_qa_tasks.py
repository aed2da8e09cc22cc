"""The 90 answer tasks on the embedded demo dataset (spec 3.2-3.4)."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json

import pytest

from evictlab.analysis.evaluate import evaluate
from evictlab.analysis.qa.prompt import parse_answer_template
from evictlab.analysis.qa.tasks import build_tasks
from evictlab.cli._common import add_pool_options, pool_set_from

POLICIES = ("confidence", "hybrid-v1")


def demo_pool_set(*options: str):
    parser = argparse.ArgumentParser()
    add_pool_options(parser)
    return pool_set_from(parser.parse_args(list(options)))


@pytest.fixture(scope="module")
def pool_set():
    return demo_pool_set()


@pytest.fixture(scope="module")
def tasks(pool_set):
    return build_tasks(pool_set)


def test_tasks_come_in_case_order_then_policy(pool_set, tasks):
    expected = [(case.case_id, policy) for case in pool_set.cases for policy in POLICIES]
    assert [(task.case.case_id, task.policy) for task in tasks] == expected
    assert len(tasks) == 90
    assert [task.row_id for task in tasks] == [f"{case_id}__{policy}" for case_id, policy in expected]
    assert {task.capacity for task in tasks} == {pool_set.protocol.config.pool.qa_capacity} == {7}


def test_kept_facts_are_the_selector_output_at_the_qa_capacity(pool_set, tasks):
    rows = evaluate(pool_set, POLICIES, [7])
    assert [list(task.kept_fact_ids) for task in tasks] == [row["kept_fact_ids"] for row in rows]
    assert [task.support_all_retained for task in tasks] == [row["support_all_retained"] for row in rows]
    assert [task.support_recall for task in tasks] == [row["support_recall"] for row in rows]
    retained = {policy: sum(t.support_all_retained for t in tasks if t.policy == policy) for policy in POLICIES}
    assert retained == {"confidence": 27, "hybrid-v1": 45}  # spec 0.3


def test_payload_holds_the_config_settings_and_two_messages(pool_set, tasks):
    qa = pool_set.protocol.config.qa
    template = parse_answer_template(pool_set.protocol.answer_prompt)
    for task in tasks:
        payload = task.payload
        assert list(payload) == ["model", "temperature", "max_tokens", "stream", "messages"]
        assert (payload["model"], payload["max_tokens"], payload["stream"]) == (qa.model, qa.max_tokens, qa.stream)
        assert payload["temperature"] == 0.0 and isinstance(payload["temperature"], float)
        system, user = payload["messages"]
        assert system == {"role": "system", "content": template.system}
        assert user["role"] == "user"
        assert user["content"].endswith(f"QUESTION: {task.case.question}")
        assert user["content"].startswith(
            f"CURRENT DATE: {task.case.question_date}\n" if task.case.question_date else "STORED MEMORY:\n"
        )


def test_user_message_shows_exactly_the_kept_facts_sorted_by_id(tasks):
    for task in tasks:
        content = task.payload["messages"][1]["content"]
        by_id = {fact["id"]: fact for fact in task.case.facts}
        shown = [fact_id for fact_id in by_id if f"[{fact_id}]\n" in content]
        assert sorted(shown) == sorted(task.kept_fact_ids)
        positions = [content.index(f"[{fact_id}]\n{by_id[fact_id]['content']}") for fact_id in sorted(shown)]
        assert positions == sorted(positions)
        blocks = "\n\n".join(f"[{fact_id}]\n{by_id[fact_id]['content']}" for fact_id in sorted(shown))
        assert f"STORED MEMORY:\n{blocks}\n\nQUESTION: " in content


def test_fingerprint_is_the_hash_of_the_canonical_payload(tasks):
    for task in tasks:
        text = json.dumps(task.payload, sort_keys=True, ensure_ascii=False)
        assert task.request_fingerprint == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_same_kept_set_means_same_fingerprint(tasks):
    pairs = list(zip(tasks[::2], tasks[1::2]))
    for confidence, hybrid in pairs:
        same_set = sorted(confidence.kept_fact_ids) == sorted(hybrid.kept_fact_ids)
        assert (confidence.request_fingerprint == hybrid.request_fingerprint) == same_set
    assert len({task.request_fingerprint for task in tasks}) == 90 - sum(
        sorted(c.kept_fact_ids) == sorted(h.kept_fact_ids) for c, h in pairs
    )


def test_memory_joiner_changes_every_fingerprint_but_no_kept_set(tasks):
    newline = build_tasks(demo_pool_set("--variant", "memory_joiner=newline"))
    assert [t.kept_fact_ids for t in newline] == [t.kept_fact_ids for t in tasks]
    assert all(a.request_fingerprint != b.request_fingerprint for a, b in zip(newline, tasks))
    content = newline[0].payload["messages"][1]["content"]
    assert "\n\n[" not in content.split("QUESTION: ")[0]


def test_hybrid_parameters_change_only_hybrid_tasks(pool_set, tasks):
    params = pool_set.protocol.config.hybrid.replace(
        confidence_weight=1.0, confirmation_weight=0.0, access_weight=0.0, correction_reserved_max=0
    )
    changed = build_tasks(pool_set, params=params)
    for before, after in zip(tasks, changed):
        if before.policy == "confidence":
            assert after == before
    hybrid_retained = sum(t.support_all_retained for t in changed if t.policy == "hybrid-v1")
    assert hybrid_retained == 27  # pure confidence ranking with no reservation


def test_building_is_deterministic_and_pure(pool_set, tasks):
    facts_before = [json.dumps(case.facts, sort_keys=True) for case in pool_set.cases]
    again = build_tasks(pool_set)
    assert again == tasks
    assert [t.payload for t in again] == [t.payload for t in tasks]
    assert [json.dumps(case.facts, sort_keys=True) for case in pool_set.cases] == facts_before


def test_tasks_are_frozen_and_their_repr_holds_no_private_text(tasks):
    task = tasks[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.policy = "other"  # type: ignore[misc]
    text = repr(task)
    assert task.row_id in text and task.request_fingerprint in text
    assert task.case.question not in text
    assert all(fact["content"] not in text for fact in task.case.facts)
