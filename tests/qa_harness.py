"""Shared harness of the QA end-to-end tests: a scripted model, CLI shortcuts, tampering.

The stub server plays a model that reads only its prompt: it answers the case's reference
answer (in swapped letter case, which the grader accepts) when the case's support fact is
shown and ``INSUFFICIENT`` otherwise. The fixtures built on it live in ``conftest.py``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path

from openai_stub import OpenAIStub, Reply

from evictlab.analysis.qa.prompt import request_fingerprint
from evictlab.analysis.qa.runner import response_path
from evictlab.analysis.qa.tasks import QATask
from evictlab.cli import main
from evictlab.cli._common import add_pool_options, pool_set_from
from evictlab.core.protocol import DEFAULT_CONFIG, sha256_file
from evictlab.results import json_document

API_KEY = "sk-test-SECRET"
KEY_ENV = "DEERMEM_EVAL_ANSWER_API_KEY"
URL_ENV = "DEERMEM_EVAL_ANSWER_BASE_URL"
PROMPT = DEFAULT_CONFIG.parent.parent / "prompts" / "answer-v1.txt"


def demo_pool_set(*options: str):
    parser = argparse.ArgumentParser()
    add_pool_options(parser)
    return pool_set_from(parser.parse_args(list(options)))


def model_answer(task: QATask, user_content: str) -> str:
    """What the scripted model says: the reference (case swapped) iff the support fact is shown."""
    shown = all(f"[{fact_id}]\n" in user_content for fact_id in task.case.support_fact_ids)
    return task.case.answer.swapcase() if shown else "INSUFFICIENT"


class Responder:
    """The stub's answer function: scripted faults per request fingerprint first, then the model.

    The fingerprint is recomputed from the JSON body that arrived, so a body that is not the
    task's payload finds no task and the stub reports the failure when it stops.
    """

    def __init__(self, tasks: Iterable[QATask], faults: Mapping[str, Iterable[Reply]] = ()) -> None:
        self.tasks = {task.request_fingerprint: task for task in tasks}
        self.faults = {fingerprint: deque(replies) for fingerprint, replies in dict(faults).items()}
        self.lock = threading.Lock()

    def __call__(self, body) -> Reply | str:
        fingerprint = request_fingerprint(body)
        with self.lock:
            queue = self.faults.get(fingerprint)
            if queue:
                return queue.popleft()
        return model_answer(self.tasks[fingerprint], body["messages"][1]["content"])


def fingerprints_of(stub: OpenAIStub, since: int = 0) -> list[str]:
    return [request_fingerprint(request.json) for request in stub.requests[since:]]


def run_qa_cli(output_dir: Path, *options: str) -> int:
    return main(["run-qa", "--output-dir", str(output_dir), "--retry-delay", "0", *options])


def grade_cli(output_dir: Path, *options: str) -> int:
    return main(["grade-qa", "--output-dir", str(output_dir), *options])


def protocol_copy(
    folder: Path, *, config_edits: Mapping[str, str] = (), prompt_edits: Mapping[str, str] = ()
) -> list[str]:
    """A copy of the config (and prompt) with text replacements; returns the CLI options for it.

    The copied prompt's hash is written into the copied config, so the pair loads.
    """
    folder.mkdir(parents=True, exist_ok=True)
    prompt = folder / "answer.txt"
    prompt.write_bytes(_edited(PROMPT.read_text(encoding="utf-8"), prompt_edits).encode("utf-8"))
    config_text = _edited(DEFAULT_CONFIG.read_text(encoding="utf-8"), config_edits)
    config_text = config_text.replace(sha256_file(PROMPT), sha256_file(prompt))
    config = folder / "config.yaml"
    config.write_text(config_text, encoding="utf-8")
    return ["--config", str(config), "--answer-prompt", str(prompt)]


def _edited(text: str, edits: Mapping[str, str]) -> str:
    for old, new in dict(edits).items():
        assert old in text, f"{old!r} not found"
        text = text.replace(old, new)
    return text


def copy_run(source: Path, destination: Path) -> Path:
    shutil.copytree(source, destination)
    return destination


def unique_tasks(tasks: list[QATask]) -> list[QATask]:
    """Tasks whose fingerprint no other task shares (confidence and hybrid keep different facts)."""
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.request_fingerprint] = counts.get(task.request_fingerprint, 0) + 1
    return [task for task in tasks if counts[task.request_fingerprint] == 1]


def private_texts(tasks: Iterable[QATask]) -> set[str]:
    """Questions, reference answers and memory contents that must never be written or printed.

    Reference answers without letters (e.g. "12") cannot be told apart from a correct
    prediction, which is stored by design; they are left out, as are very short ones.
    """
    texts = set()
    for task in tasks:
        texts.add(task.case.question)
        texts.update(fact["content"] for fact in task.case.facts)
        if task.case.answer != task.case.answer.swapcase() and len(task.case.answer) >= 4:
            texts.add(task.case.answer)
    return texts


def assert_nothing_private(folder: Path, tasks: Iterable[QATask], *outputs: str) -> None:
    texts = private_texts(tasks) | {API_KEY}
    files = [path for path in folder.rglob("*") if path.is_file()]
    assert files
    for path in files:
        content = path.read_text(encoding="utf-8")
        leaked = [text for text in texts if text in content]
        assert not leaked, f"{path} contains private text {leaked[:1]!r}"
    for output in outputs:
        assert not [text for text in texts if text in output]


REUSE_TAMPERING = {
    "row_id": lambda row: row["row_id"].replace("__confidence", "__hybrid-v1"),
    "policy": lambda row: "hybrid-v1",
    "capacity": lambda row: 5,
    "kept_fact_ids": lambda row: list(reversed(row["kept_fact_ids"])),
    "request_fingerprint": lambda row: "0" * 64,
}
IDENTITY_TAMPERING = {
    "case_id": lambda row: "someone_else",
    "source": lambda row: "synthetic" if row["source"] == "longmemeval" else "longmemeval",
    "scenario": lambda row: "access_help" if row["scenario"] != "access_help" else "confirmation_help",
}
TAMPERING = {**REUSE_TAMPERING, **IDENTITY_TAMPERING}


def tamper(output: Path, task: QATask, name: str) -> None:
    path = response_path(output, task.row_id)
    row = json.loads(path.read_text(encoding="utf-8"))
    row[name] = TAMPERING[name](row)
    path.write_text(json_document(row), encoding="utf-8")


def tampered_task(tasks: list[QATask]) -> QATask:
    """A confidence row that lost its support fact, so its kept set is its own."""
    return next(task for task in unique_tasks(tasks) if task.policy == "confidence")
