"""The OpenAI-compatible provider against a real scripted server (spec 3.4 and 3.5)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from openai_stub import (
    OpenAIStub,
    answer_reply,
    error_reply,
    json_reply,
    raw_reply,
    redirect_reply,
    stalled_reply,
)

from evictlab.analysis.qa.providers import (
    Completion,
    OpenAICompatibleProvider,
    ProviderError,
    missing_credentials,
    provider_from_environment,
)
from evictlab.errors import ContractError

API_KEY = "sk-evictlab-test-7f3a9c"
RETRY_DELAY = 0.25
PAYLOAD = {
    "model": "stub-model",
    "temperature": 0.0,
    "max_tokens": 2048,
    "stream": False,
    "messages": [
        {"role": "system", "content": "Answer from memory."},
        {"role": "user", "content": "STORED MEMORY:\n[a]\nLe chat dort à Lyon.\n\nQUESTION: Où?"},
    ],
}


class Client:
    """A provider on ``base_url`` plus the sleeps it asked for (recorded, never slept)."""

    def __init__(self, base_url: str, **options):
        self.sleeps: list[float] = []
        options = {"retry_delay_seconds": RETRY_DELAY, "timeout_seconds": 5, **options}
        self.provider = OpenAICompatibleProvider(
            base_url, API_KEY, sleep=self.sleeps.append, **options
        )

    def complete(self, payload=PAYLOAD) -> Completion:
        return self.provider.complete(payload)


def failure(client: Client) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        client.complete()
    assert_no_secret(caught.value)
    return caught.value


def assert_no_secret(error: BaseException) -> None:
    for text in (str(error), repr(error)):
        assert API_KEY not in text
        assert "Bearer" not in text
        assert "scripted error" not in text  # the body of an error reply


# --- success -----------------------------------------------------------------------------


def test_success_returns_the_answer_model_and_integer_usage():
    usage = {
        "prompt_tokens": 120,
        "completion_tokens": 3,
        "total_tokens": 123,
        "prompt_cache_hit_tokens": 0,
        "prompt_tokens_details": {"cached_tokens": 64},
        "estimated": True,
        "cost": 0.5,
        "tier": "free",
        "missing": None,
    }
    with OpenAIStub(answer_reply("Lyon", model="deepseek-v4-flash", usage=usage)) as stub:
        client = Client(stub.base_url)
        completion = client.complete()
    assert completion == Completion(
        prediction="Lyon",
        attempts=1,
        response_model="deepseek-v4-flash",
        usage={
            "prompt_tokens": 120,
            "completion_tokens": 3,
            "total_tokens": 123,
            "prompt_cache_hit_tokens": 0,
        },
    )
    assert client.sleeps == []


def test_prediction_is_kept_verbatim_with_surrounding_whitespace():
    with OpenAIStub(answer_reply("  YES \n\n")) as stub:
        assert Client(stub.base_url).complete().prediction == "  YES \n\n"


@pytest.mark.parametrize(("model", "usage"), [(None, None), (7, "many"), (["x"], [1, 2])])
def test_non_string_model_and_non_object_usage_become_null_and_empty(model, usage):
    document = {"choices": [{"message": {"content": "NO"}}], "model": model, "usage": usage}
    with OpenAIStub(json_reply(document)) as stub:
        completion = Client(stub.base_url).complete()
    assert (completion.response_model, completion.usage) == (None, {})


def test_request_is_a_bearer_post_of_the_payload_as_json():
    with OpenAIStub(answer_reply("ok")) as stub:
        Client(stub.base_url).complete()
        (request,) = stub.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.json == PAYLOAD
    assert json.loads(request.body.decode("utf-8")) == PAYLOAD


def test_trailing_slash_of_the_base_url_is_not_doubled():
    with OpenAIStub(answer_reply("ok")) as stub:
        provider = OpenAICompatibleProvider(stub.base_url + "/", API_KEY)
        provider.complete(PAYLOAD)
        assert [r.path for r in stub.requests] == ["/v1/chat/completions"]


# --- retries -----------------------------------------------------------------------------


def test_429_is_retried_after_the_fixed_delay():
    with OpenAIStub(error_reply(429), answer_reply("Lyon")) as stub:
        client = Client(stub.base_url)
        completion = client.complete()
        assert len(stub.requests) == 2
    assert (completion.prediction, completion.attempts) == ("Lyon", 2)
    assert client.sleeps == [RETRY_DELAY]


def test_three_server_errors_fail_after_three_attempts_without_backoff():
    with OpenAIStub(error_reply(500), error_reply(502), error_reply(500)) as stub:
        client = Client(stub.base_url)
        error = failure(client)
        assert len(stub.requests) == 3
    assert str(error).startswith("failed after 3 attempts")
    assert "HTTP 500" in str(error)
    assert client.sleeps == [RETRY_DELAY, RETRY_DELAY]


def test_success_on_the_last_attempt_reports_it():
    with OpenAIStub(error_reply(503), error_reply(599), answer_reply("NO")) as stub:
        completion = Client(stub.base_url).complete()
    assert completion.attempts == 3


def test_timeout_is_retried_and_then_succeeds():
    # The second attempt must finish within the timeout against a stub sharing this process's
    # GIL, so the timeout leaves room for a loaded machine; the first reply stalls far longer.
    with OpenAIStub(stalled_reply(30), answer_reply("Lyon")) as stub:
        client = Client(stub.base_url, timeout_seconds=2)
        completion = client.complete()
        assert len(stub.requests) == 2
    assert completion.attempts == 2
    assert client.sleeps == [RETRY_DELAY]


def test_timeouts_on_every_attempt_fail():
    with OpenAIStub(stalled_reply(30), stalled_reply(30)) as stub:
        client = Client(stub.base_url, timeout_seconds=0.2, max_attempts=2)
        error = failure(client)
        assert len(stub.requests) == 2
    assert str(error) == "failed after 2 attempts (last: timed out)"


def test_refused_connection_is_a_retried_transport_error(refused_port):
    client = Client(f"http://127.0.0.1:{refused_port}/v1", max_attempts=2)
    error = failure(client)
    assert str(error).startswith("failed after 2 attempts (last: transport error")
    assert client.sleeps == [RETRY_DELAY]


# --- immediate failures ------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_error_statuses_fail_at_once(status):
    with OpenAIStub(error_reply(status), answer_reply("unused")) as stub:
        client = Client(stub.base_url)
        error = failure(client)
        assert len(stub.requests) == 1
    assert str(error) == f"HTTP {status} (not retryable)"
    assert client.sleeps == []


def test_a_2xx_status_other_than_200_fails_at_once():
    with OpenAIStub(json_reply({"choices": [{"message": {"content": "x"}}]}, status=201)) as stub:
        error = failure(Client(stub.base_url))
        assert len(stub.requests) == 1
    assert "HTTP 201" in str(error)


@pytest.mark.parametrize("status", [302, 307])
def test_redirects_are_not_followed_so_the_key_goes_nowhere_else(status):
    with OpenAIStub() as elsewhere:
        target = elsewhere.base_url + "/chat/completions"
        with OpenAIStub(redirect_reply(target, status)) as stub:
            error = failure(Client(stub.base_url))
            assert len(stub.requests) == 1
        assert elsewhere.requests == []
    assert str(error) == f"HTTP {status} (not retryable)"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (raw_reply("<html>bad gateway</html>", content_type="text/html"), "not valid JSON"),
        (raw_reply(b"\xff\xfe{"), "not UTF-8 text"),
        (json_reply({"object": "chat.completion", "model": "m"}), "no string choices"),
        (json_reply({"choices": []}), "no string choices"),
        (json_reply({"choices": [{"message": {"content": None}}]}), "no string choices"),
        (json_reply({"choices": [{"message": {"content": ["Lyon"]}}]}), "no string choices"),
        (json_reply({"choices": {"0": {"message": {"content": "x"}}}}), "no string choices"),
        (json_reply(["not", "an", "object"]), "no string choices"),
    ],
)
def test_malformed_200_body_fails_at_once(reply, reason):
    with OpenAIStub(reply, answer_reply("unused")) as stub:
        client = Client(stub.base_url)
        error = failure(client)
        assert len(stub.requests) == 1
    assert str(error).startswith("HTTP 200 but the body")
    assert reason in str(error)
    assert client.sleeps == []


# --- secrets and options -----------------------------------------------------------------


def test_repr_shows_the_settings_but_not_the_key():
    provider = OpenAICompatibleProvider("http://127.0.0.1:8080/v1", API_KEY, max_attempts=4)
    text = repr(provider)
    assert API_KEY not in text
    assert "http://127.0.0.1:8080/v1" in text and "max_attempts=4" in text


@pytest.mark.parametrize(
    ("base_url", "api_key", "options", "expected"),
    [
        ("127.0.0.1:8080/v1", API_KEY, {}, "base URL"),
        ("http:///v1", API_KEY, {}, "base URL"),
        ("http://127.0.0.1:8080/v1", "", {}, "API key"),
        ("http://127.0.0.1:8080/v1", API_KEY + "\n", {}, "API key"),
        ("http://127.0.0.1:8080/v1", "clé-" + API_KEY, {}, "API key"),
        ("http://127.0.0.1:8080/v1", API_KEY, {"max_attempts": 0}, "max_attempts"),
        ("http://127.0.0.1:8080/v1", API_KEY, {"timeout_seconds": 0}, "timeout_seconds"),
        ("http://127.0.0.1:8080/v1", API_KEY, {"retry_delay_seconds": -1}, "retry_delay"),
    ],
)
def test_invalid_options_are_rejected_without_echoing_the_key(base_url, api_key, options, expected):
    with pytest.raises(ContractError, match=expected) as caught:
        OpenAICompatibleProvider(base_url, api_key, **options)
    assert API_KEY not in str(caught.value)


def test_missing_credentials_names_unset_and_blank_variables_in_order():
    environ = {"KEY": "  \n", "URL": "http://127.0.0.1:8080/v1"}
    assert missing_credentials("KEY", "URL", environ=environ) == ["KEY"]
    assert missing_credentials("KEY", "NOPE", environ={}) == ["KEY", "NOPE"]
    assert missing_credentials("KEY", "URL", environ={"KEY": "k", "URL": "u"}) == []


def test_missing_credentials_read_the_process_environment(monkeypatch):
    monkeypatch.setenv("EVICTLAB_TEST_KEY", "k")
    monkeypatch.delenv("EVICTLAB_TEST_URL", raising=False)
    assert missing_credentials("EVICTLAB_TEST_KEY", "EVICTLAB_TEST_URL") == ["EVICTLAB_TEST_URL"]


def test_provider_from_environment_names_missing_variables_never_values():
    environ = {"DEERMEM_EVAL_ANSWER_API_KEY": API_KEY, "DEERMEM_EVAL_ANSWER_BASE_URL": " "}
    with pytest.raises(ContractError) as caught:
        provider_from_environment(
            "DEERMEM_EVAL_ANSWER_API_KEY", "DEERMEM_EVAL_ANSWER_BASE_URL", environ=environ
        )
    assert str(caught.value) == (
        "missing or empty environment variable(s): DEERMEM_EVAL_ANSWER_BASE_URL"
    )


def test_provider_from_environment_strips_values_and_passes_options():
    with OpenAIStub(error_reply(500), answer_reply("ok")) as stub:
        sleeps: list[float] = []
        environ = {"KEY": f" {API_KEY}\n", "URL": f"  {stub.base_url}\n"}
        provider = provider_from_environment(
            "KEY", "URL", environ=environ, retry_delay_seconds=0.5, sleep=sleeps.append
        )
        assert provider.complete(PAYLOAD).attempts == 2
        assert stub.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    assert sleeps == [0.5]


# --- the stub as other tests use it ------------------------------------------------------


def test_concurrent_calls_are_answered_per_question():
    def by_question(body):
        return body["messages"][1]["content"].upper()

    questions = [f"question {n}" for n in range(9)]
    with OpenAIStub(fallback=by_question) as stub:
        provider = Client(stub.base_url).provider
        payloads = [
            {**PAYLOAD, "messages": [PAYLOAD["messages"][0], {"role": "user", "content": q}]}
            for q in questions
        ]
        with ThreadPoolExecutor(max_workers=3) as pool:
            answers = [c.prediction for c in pool.map(provider.complete, payloads)]
        assert len(stub.requests) == len(questions)
    assert answers == [q.upper() for q in questions]


def test_stub_reports_a_failing_script_function():
    def broken(body):
        raise KeyError("no such question")

    with pytest.raises(AssertionError, match="no such question"), OpenAIStub(fallback=broken) as stub:
        error = failure(Client(stub.base_url))
        assert str(error) == "HTTP 400 (not retryable)"


def test_stub_answers_400_once_its_script_is_used_up():
    with OpenAIStub(answer_reply("first")) as stub:
        client = Client(stub.base_url)
        assert client.complete().prediction == "first"
        assert str(failure(client)) == "HTTP 400 (not retryable)"
