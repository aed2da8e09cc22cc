"""Attacks by a hostile answer server: every fault is a failed attempt, never a traceback.

Issue 16 item 3: lone surrogates, deep JSON, endless bodies and trickling servers. The
servers are real, on 127.0.0.1.
"""

from __future__ import annotations

import json
import time

import pytest
from openai_stub import OpenAIStub, answer_reply, raw_reply
from qa_harness import Responder, run_qa_cli, unique_tasks
from raw_server import RawServer, endless_body, trickle

from evictlab.analysis.qa.providers import OpenAICompatibleProvider, ProviderError
from evictlab.analysis.qa.runner import response_path

PAYLOAD = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
SURROGATE_BODY = b'{"choices": [{"message": {"content": "a\\ud800b"}}]}'
DEEP_BODY = b"[" * 200_000 + b"]" * 200_000
RESPONSE = json.dumps({"choices": [{"message": {"content": "Lyon"}}]}).encode()
HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(RESPONSE)


def provider(base_url: str, **options) -> OpenAICompatibleProvider:
    options.setdefault("retry_delay_seconds", 0)
    return OpenAICompatibleProvider(base_url, "sk-attack", **options)


@pytest.mark.parametrize(
    "body, reason",
    [(SURROGATE_BODY, "lone surrogate"), (DEEP_BODY, "nested more than"), (b"[1" + b"0" * 5000 + b"]", "more digits")],
    ids=["lone surrogate", "deep JSON", "long integer"],
)
def test_a_malformed_200_body_fails_the_call_at_once(body, reason):
    with OpenAIStub(raw_reply(body), answer_reply("unused")) as stub:
        with pytest.raises(ProviderError, match=reason) as caught:
            provider(stub.base_url).complete(PAYLOAD)
        assert len(stub.requests) == 1  # a 200 with a refused body is not retried (spec 3.4)
    assert str(caught.value).startswith("HTTP 200 but the body is refused")


def test_an_endless_body_is_cut_at_the_size_limit():
    with RawServer(endless_body()) as server, pytest.raises(ProviderError, match="over the limit of 1048576 bytes"):
        provider(server.base_url, max_response_bytes=1 << 20).complete(PAYLOAD)


def test_a_declared_800_mb_body_is_refused_before_reading():
    with (
        RawServer(endless_body(b"Content-Length: 800000000\r\n")) as server,
        pytest.raises(ProviderError, match="800000000 bytes, over the limit"),
    ):
        provider(server.base_url).complete(PAYLOAD)


@pytest.mark.parametrize("part", ["headers", "body"])
def test_a_trickling_server_is_cut_off_at_the_timeout(part):
    # One byte every 0.3 s never trips a per-read timeout of 2 s; only a deadline stops it.
    data = HEADERS + RESPONSE
    with RawServer(trickle(data if part == "headers" else data[len(HEADERS) :], 0.3)) as server:
        if part == "body":
            server.behaviour = _headers_then(server.behaviour)
        started = time.monotonic()
        with pytest.raises(ProviderError, match=r"failed after 1 attempts \(last: timed out\)"):
            provider(server.base_url, timeout_seconds=2, max_attempts=1).complete(PAYLOAD)
        elapsed = time.monotonic() - started
    # The upper bound only has to tell a deadline from none: the trickled reply would take
    # 14 s (body) to 35 s (headers and body) to finish, and a loaded 2-core CI machine can
    # stall this process for a second or more.
    assert 2.0 <= elapsed <= 6.0, f"cut off after {elapsed:.2f} s, not between 2 s and 6 s"


def _headers_then(rest):
    def behaviour(connection, stop):
        connection.sendall(HEADERS)
        rest(connection, stop)

    return behaviour


def test_trickling_attempts_are_retried_by_the_rules():
    with RawServer(trickle(HEADERS + RESPONSE, 0.3)) as server:
        with pytest.raises(ProviderError, match=r"failed after 2 attempts \(last: timed out\)"):
            provider(server.base_url, timeout_seconds=0.5, max_attempts=2).complete(PAYLOAD)
        assert server.connections == 2


def test_run_qa_stores_every_good_answer_and_reports_the_bad_ones(tmp_path, capsys, demo_tasks, credentials):
    first, second = unique_tasks(demo_tasks)[:2]
    hostile = {
        first.request_fingerprint: [raw_reply(SURROGATE_BODY)],
        second.request_fingerprint: [raw_reply(DEEP_BODY)],
    }
    with OpenAIStub(fallback=Responder(demo_tasks, hostile)) as stub:
        credentials(stub)
        code = run_qa_cli(tmp_path / "run", "--workers", "3")
    captured = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in captured.err
    failed = {first.row_id, second.row_id}
    for task in demo_tasks:
        assert response_path(tmp_path / "run", task.row_id).exists() == (task.row_id not in failed)
    assert f"{first.row_id}: HTTP 200 but the body is refused" in captured.err
