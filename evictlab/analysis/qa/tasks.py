"""The 90 answer tasks of the live QA comparison (spec 3.2, 3.3 and 3.4).

A task is one case answered under one policy: the policy keeps ``qa_capacity`` facts of the
case's pool, the kept facts are rendered into the answer prompt, and the resulting request
payload is identified by its ``request_fingerprint``. ``run-qa`` sends the payloads,
``grade-qa`` checks stored rows against freshly built tasks, and a protocol diff compares the
fingerprints of two variants. Building tasks reads no files and calls no provider.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...core.pools import Case, PoolSet
from ...policies import DEERMEM_POLICIES, PolicyParams
from ..evaluate import decide
from .prompt import build_payload, parse_answer_template, render_messages, request_fingerprint, row_id


@dataclass(frozen=True)
class QATask:
    """One answer row to be produced: a case, a policy and the request it leads to.

    ``kept_fact_ids`` are in selector order (rank order), as stored in response rows; the
    prompt renders the same facts sorted by id. ``case`` and ``payload`` hold private text
    (question, reference answer, memory) and are therefore left out of ``repr``.
    """

    row_id: str
    case: Case = field(repr=False)
    policy: str
    capacity: int
    kept_fact_ids: tuple[str, ...]
    payload: dict[str, Any] = field(repr=False, compare=False)
    request_fingerprint: str

    @property
    def support_all_retained(self) -> bool:
        return all(fact_id in self.kept_fact_ids for fact_id in self.case.support_fact_ids)

    @property
    def support_recall(self) -> float:
        retained = sum(fact_id in self.kept_fact_ids for fact_id in self.case.support_fact_ids)
        return retained / len(self.case.support_fact_ids)


def build_tasks(pool_set: PoolSet, *, params: PolicyParams | None = None) -> list[QATask]:
    """Every task in task order: cases in build order, then ``confidence`` before ``hybrid-v1``.

    Each policy is evaluated at the config's ``pool.qa_capacity`` with ``params`` (default:
    the config's hybrid parameters; ignored by ``confidence``); messages use the protocol's
    answer prompt and the variant's memory joiner, the payload the config's ``qa`` settings.
    """
    protocol = pool_set.protocol
    qa = protocol.config.qa
    capacity = protocol.config.pool.qa_capacity
    params = params or protocol.config.hybrid
    template = parse_answer_template(protocol.answer_prompt, source=str(protocol.files.answer_prompt))
    tasks = []
    for case in pool_set.cases:
        for policy in DEERMEM_POLICIES:
            decision = decide(case, policy, capacity, params, protocol.evaluation_time)
            messages = render_messages(
                template,
                question=case.question,
                question_date=case.question_date,
                facts=decision.kept,
                memory_joiner=pool_set.variant.memory_joiner,
            )
            payload = build_payload(
                messages, model=qa.model, temperature=qa.temperature, max_tokens=qa.max_tokens, stream=qa.stream
            )
            tasks.append(
                QATask(
                    row_id=row_id(case.case_id, policy),
                    case=case,
                    policy=policy,
                    capacity=capacity,
                    kept_fact_ids=tuple(decision.kept_ids),
                    payload=payload,
                    request_fingerprint=request_fingerprint(payload),
                )
            )
    return tasks
