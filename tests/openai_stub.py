"""A scripted OpenAI-compatible chat-completions server for tests.

A real HTTP server on 127.0.0.1 (port chosen by the system) runs in a background thread for
the length of a ``with`` block. Each request to ``POST /v1/chat/completions`` is answered by
the next item of the script, then by ``fallback`` once the script is used up::

    with OpenAIStub(error_reply(429), answer_reply("Paris")) as stub:
        provider = OpenAICompatibleProvider(stub.base_url, "test-key", retry_delay_seconds=0)
        ...
        assert stub.requests[0].json["model"] == "m"

A script item (or the fallback) is either a :class:`Reply` or a function of the parsed JSON
request body that returns a :class:`Reply` or a string (answered as with
:func:`answer_reply`), so an end-to-end test can answer per question::

    OpenAIStub(fallback=lambda body: "YES" if "Lyon" in body["messages"][1]["content"] else "NO")

Every request is recorded (:attr:`OpenAIStub.requests`) before it is answered. When the script
is used up and there is no fallback, or a request goes to another path, the stub answers 400
(not retryable, so the client fails at once). A script function that raises is answered with
400 too, and the error is raised again when the ``with`` block ends.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
DEFAULT_USAGE = {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42}


@dataclass(frozen=True)
class Reply:
    """One scripted response; ``delay_seconds`` stalls before it is sent (for timeouts)."""

    status: int
    body: bytes
    content_type: str = "application/json"
    delay_seconds: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()


ScriptItem = Reply | Callable[[Any], Reply | str]


def json_reply(document: Any, status: int = 200) -> Reply:
    """Any JSON document as the body, for example one without ``choices``."""
    return Reply(status, json.dumps(document, ensure_ascii=False).encode("utf-8"))


def answer_reply(content: Any, *, model: Any = "stub-model", usage: Any = DEFAULT_USAGE) -> Reply:
    """A 200 chat completion whose first choice says ``content``; ``usage=None`` omits usage."""
    document: dict[str, Any] = {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }
    if usage is not None:
        document["usage"] = usage
    return json_reply(document)


def error_reply(status: int, message: str = "scripted error") -> Reply:
    """A non-200 status with an OpenAI-style error body."""
    return json_reply({"error": {"message": message, "code": status}}, status=status)


def raw_reply(
    body: bytes | str, status: int = 200, content_type: str = "application/json"
) -> Reply:
    """Exact body bytes, for example text that is not JSON."""
    data = body.encode("utf-8") if isinstance(body, str) else body
    return Reply(status, data, content_type)


def stalled_reply(seconds: float, then: Reply | None = None) -> Reply:
    """Wait ``seconds`` (cut short when the stub stops) before sending ``then``."""
    reply = then if then is not None else answer_reply("too late")
    return replace(reply, delay_seconds=seconds)


def redirect_reply(location: str, status: int = 307) -> Reply:
    """A redirect to ``location`` (a client must not follow it with the key)."""
    return Reply(status, b"", headers=(("Location", location),))


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the stub saw it; header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any


class OpenAIStub:
    """Context manager running the scripted server; thread-safe."""

    def __init__(self, *script: ScriptItem, fallback: ScriptItem | None = None) -> None:
        self._script: deque[ScriptItem] = deque(script)
        self._fallback = fallback
        self._requests: list[RecordedRequest] = []
        self._errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The API root to give a client, ending in ``/v1``."""
        if self._server is None:
            raise RuntimeError("the stub is not running; use it in a with block")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the requests received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def __enter__(self) -> OpenAIStub:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.stub = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        self._stopping.set()  # release stalled replies so closing does not wait for them
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        if exc_type is None and self._errors:
            raise AssertionError(f"a stub script function failed: {self._errors[0]!r}")

    def _reply_for(self, recorded: RecordedRequest) -> Reply:
        with self._lock:
            self._requests.append(recorded)
            if recorded.method != "POST" or recorded.path != CHAT_COMPLETIONS_PATH:
                return error_reply(400, f"the stub serves only POST {CHAT_COMPLETIONS_PATH}")
            item = self._script.popleft() if self._script else self._fallback
        if item is None:
            return error_reply(400, "the stub script is used up")
        if isinstance(item, Reply):
            return item
        try:
            result = item(recorded.json)
        except Exception as error:  # noqa: BLE001 - raised again when the with block ends
            with self._lock:
                self._errors.append(error)
            return error_reply(400, "a stub script function failed")
        return answer_reply(result) if isinstance(result, str) else result


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self._answer()

    def do_GET(self) -> None:
        self._answer()

    def _answer(self) -> None:
        stub: OpenAIStub = self.server.stub  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        recorded = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
            json=parsed,
        )
        reply = stub._reply_for(recorded)
        if reply.delay_seconds:
            stub._stopping.wait(reply.delay_seconds)
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)
        except OSError:
            pass  # the client gave up (a timeout test); nobody is listening any more

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean
