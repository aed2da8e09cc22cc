"""Answer providers: the OpenAI-compatible chat-completions client (spec 3.4 and 3.5).

Any server that speaks the OpenAI chat-completions API works, hosted or local: llama.cpp's
``llama-server``, vLLM's OpenAI server, or Ollama's ``/v1`` endpoint. For a local server, set
the base-URL variable to the API root, for example ``http://127.0.0.1:8080/v1`` (the client
appends ``/chat/completions``), and the key variable to any non-empty string::

    export DEERMEM_EVAL_ANSWER_BASE_URL=http://127.0.0.1:8080/v1
    export DEERMEM_EVAL_ANSWER_API_KEY=local

The client uses only the standard library (``http.client``; a proxy named by the usual
``https_proxy``/``http_proxy``/``no_proxy`` variables is honoured). Error messages never
contain the API key, request headers or response bodies: at most the HTTP status and a short
reason.

Why not ``httpx``: spec 3.4's timeout bounds a whole attempt, from connecting to the last byte,
however slowly a server sends it, and :meth:`OpenAICompatibleProvider.abort` must cut calls in
flight from another thread. httpx times each read separately (a server trickling its headers
a byte at a time never trips it) and offers no way to shut a call's socket from outside; here
a watchdog shuts the socket down at the deadline, or at once on abort.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...core.protocol import MAX_TIMEOUT_SECONDS
from ...errors import ContractError, EvictlabError
from ...readers import MAX_RESPONSE_BYTES, JSONRefused, decode_json
from .prompt import _is_finite_number

#: Nesting depth of a response body: a chat completion has about five levels.
MAX_BODY_DEPTH = 32


@dataclass(frozen=True)
class Completion:
    """What one successful call yields.

    ``prediction`` is the answer text verbatim (not stripped); ``attempts`` the number of the
    attempt that succeeded; ``response_model`` the body's ``model`` when it is a string;
    ``usage`` the body's integer ``usage`` entries (``{}`` when there are none).
    """

    prediction: str
    attempts: int
    response_model: str | None
    usage: dict[str, int]


class ProviderError(EvictlabError):
    """A provider call failed; the message holds at most an HTTP status and a short reason."""


class _RetryableFailure(Exception):
    """An attempt failed in a way that another attempt may fix (transport, 429, 5xx)."""


class OpenAICompatibleProvider:
    """Client for ``POST {base_url}/chat/completions`` with a bearer key.

    :meth:`complete` makes up to ``max_attempts`` attempts, sleeping ``retry_delay_seconds``
    (fixed, no backoff) before every attempt after the first. Transport errors (timeouts and a
    body cut short of its ``Content-Length`` included), HTTP 429 and statuses >= 500 are
    retried; any other non-200 status (redirects included: they are never followed, so the key
    goes nowhere else) and a 200 whose body is over ``max_response_bytes``, is not strict JSON
    (see :func:`evictlab.readers.decode_json`) or lacks a string ``choices[0].message.content``
    fail at once. ``timeout_seconds`` bounds each whole attempt, from connecting to the last
    byte of the body, however slowly a server sends it. Several threads may call
    :meth:`complete` at once, and :meth:`abort` cuts them all (a call waiting to retry included).
    """

    def __init__(
        self, base_url: str, api_key: str, *, timeout_seconds: float = 120, max_attempts: int = 3,
        retry_delay_seconds: float = 2.0, max_response_bytes: int = MAX_RESPONSE_BYTES,
        sleep: Callable[[float], Any] | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not _is_http_url(base_url):
            raise ContractError("provider base URL must be an http:// or https:// URL with a host")
        if not _is_header_token(api_key):
            raise ContractError("provider API key must be a non-empty printable ASCII string")
        if not (_is_finite_number(timeout_seconds) and 0 < timeout_seconds <= MAX_TIMEOUT_SECONDS):
            raise ContractError(
                f"timeout_seconds must be > 0 and at most {MAX_TIMEOUT_SECONDS:g}, got {timeout_seconds!r}"
            )
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ContractError(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
        if not (_is_finite_number(retry_delay_seconds) and retry_delay_seconds >= 0):
            raise ContractError(f"retry_delay_seconds must be >= 0, got {retry_delay_seconds!r}")
        self.base_url = base_url
        self.url = f"{base_url.rstrip('/')}/chat/completions"
        self.timeout_seconds = timeout_seconds
        self.max_attempts = max_attempts
        self.retry_delay_seconds = retry_delay_seconds
        self.max_response_bytes = max_response_bytes
        self._api_key = api_key
        self._aborted = threading.Event()
        self._sleep = sleep or self._aborted.wait  # a wait that abort() cuts short
        self._lock = threading.Lock()
        self._open: set[http.client.HTTPConnection] = set()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(base_url={self.base_url!r},"
            f" timeout_seconds={self.timeout_seconds!r}, max_attempts={self.max_attempts!r},"
            f" retry_delay_seconds={self.retry_delay_seconds!r})"
        )

    def abort(self) -> None:
        """Cut every call in flight and refuse new ones: each fails with "aborted"."""
        self._aborted.set()
        with self._lock:
            for connection in list(self._open):
                _shut(connection)

    def complete(self, payload: dict[str, Any]) -> Completion:
        """Send ``payload`` as the JSON body and return the answer, or raise ProviderError."""
        # The wire body is the client's own serialisation; the request fingerprint is computed
        # separately from the payload (evictlab.analysis.qa.prompt), so the two never need to agree.
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        last_failure = ""
        for attempt in range(1, self.max_attempts + 1):
            if attempt > 1:
                self._sleep(self.retry_delay_seconds)
            if self._aborted.is_set():
                raise ProviderError("aborted")
            try:
                document = self._post(body)
            except _RetryableFailure as failure:
                last_failure = str(failure)
                continue
            return _completion(document, attempt)
        raise ProviderError(f"failed after {self.max_attempts} attempts (last: {last_failure})")

    def _post(self, body: bytes) -> Any:
        """One attempt: the parsed JSON body of a 200 response, all within ``timeout_seconds``."""
        connection = _connection(self.url, self.timeout_seconds)
        # Socket timeouts bound each read, not the attempt: a server sending a byte a second
        # would never trip them. The watchdog shuts the socket down at the deadline instead.
        expired = threading.Event()
        watchdog = threading.Timer(self.timeout_seconds, _expire, args=(connection, expired))
        watchdog.daemon = True
        with self._lock:
            self._open.add(connection)
        watchdog.start()
        try:
            if self._aborted.is_set():
                raise ProviderError("aborted")
            connection.connect()
            if self._aborted.is_set():
                raise ProviderError("aborted")
            if expired.is_set():
                raise TimeoutError
            connection.request("POST", _request_target(connection, self.url), body=body, headers={
                "Authorization": f"Bearer {self._api_key}",
                "Content-Type": "application/json",
            })  # fmt: skip
            response = connection.getresponse()
            status = response.status
            raw = _read_capped(response, self.max_response_bytes) if status == 200 else b""
            if expired.is_set():
                raise TimeoutError  # the body may look complete: the watchdog closed the socket
        except (OSError, http.client.HTTPException) as error:
            if self._aborted.is_set():
                raise ProviderError("aborted") from None
            raise _RetryableFailure("timed out" if expired.is_set() else _transport_reason(error)) from None
        finally:
            watchdog.cancel()
            with self._lock:
                self._open.discard(connection)
            connection.close()
        if status == 429 or status >= 500:
            raise _RetryableFailure(f"HTTP {status}")
        if status != 200:
            raise ProviderError(f"HTTP {status} (not retryable)")
        try:
            return decode_json(raw, max_depth=MAX_BODY_DEPTH)
        except JSONRefused as refused:
            raise ProviderError(f"HTTP 200 but the body is refused: {refused}") from None


def _connection(url: str, timeout: float) -> http.client.HTTPConnection:
    """A connection to the URL's host, or through the environment's proxy for it."""
    parts = urllib.parse.urlsplit(url)
    host = _host(parts, url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        via = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if parts.scheme == "https":
            connection = kind(_host(via, proxy), via.port or 8080, timeout=timeout)
            connection.set_tunnel(host, parts.port)
            return connection
        connection = http.client.HTTPConnection(_host(via, proxy), via.port or 8080, timeout=timeout)
        connection.via_proxy = True  # type: ignore[attr-defined]
        return connection
    return kind(host, parts.port, timeout=timeout)


def _host(parts: urllib.parse.SplitResult, url: str) -> str:
    if not parts.hostname:
        raise ProviderError(f"{url}: the URL names no host")
    return parts.hostname


def _request_target(connection: http.client.HTTPConnection, url: str) -> str:
    # A plain-HTTP proxy takes the absolute URL; a server (or a tunnel) takes the path.
    if getattr(connection, "via_proxy", False):
        return url
    parts = urllib.parse.urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _expire(connection: http.client.HTTPConnection, expired: threading.Event) -> None:
    expired.set()
    _shut(connection)


def _shut(connection: http.client.HTTPConnection) -> None:
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked on it


def _read_capped(response: http.client.HTTPResponse, limit: int) -> bytes:
    declared = response.getheader("Content-Length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise ProviderError(f"HTTP 200 but the body is {int(declared)} bytes, over the limit of {limit}")
    chunks, size = [], 0
    while chunk := response.read1(1 << 16):
        size += len(chunk)
        if size > limit:
            raise ProviderError(f"HTTP 200 but the body is over the limit of {limit} bytes")
        chunks.append(chunk)
    if response.length:  # the connection closed before the declared Content-Length arrived
        raise http.client.IncompleteRead(b"".join(chunks), response.length)
    return b"".join(chunks)


def _transport_reason(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return "timed out"
    return f"transport error ({type(error).__name__})"


def _completion(document: Any, attempt: int) -> Completion:
    content = _message_content(document)
    model = document.get("model")
    return Completion(
        prediction=content,
        attempts=attempt,
        response_model=model if isinstance(model, str) else None,
        usage=_integer_usage(document.get("usage")),
    )


def _message_content(document: Any) -> str:
    choices = document.get("choices") if isinstance(document, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise ProviderError("HTTP 200 but the body has no string choices[0].message.content")
    return content


def _integer_usage(usage: Any) -> dict[str, int]:
    if not isinstance(usage, dict):
        return {}
    # bool is a subclass of int in Python but true/false are not token counts.
    return {
        key: value
        for key, value in usage.items()
        if isinstance(value, int) and not isinstance(value, bool)
    }


def _is_header_token(api_key: Any) -> bool:
    # The key travels in a header; a space, line break or non-ASCII character would break it
    # (and http.client's complaint would quote the value).
    return (
        isinstance(api_key, str)
        and bool(api_key)
        and api_key.isascii()
        and api_key.isprintable()
        and " " not in api_key
    )


def _is_http_url(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def missing_credentials(
    api_key_env: str, base_url_env: str, *, environ: Mapping[str, str] | None = None
) -> list[str]:
    """Names of the credential variables that are unset or blank once stripped, in order."""
    values = os.environ if environ is None else environ
    return [name for name in (api_key_env, base_url_env) if not values.get(name, "").strip()]


def provider_from_environment(
    api_key_env: str, base_url_env: str, *, environ: Mapping[str, str] | None = None, **options: Any
) -> OpenAICompatibleProvider:
    """A provider from the key and base-URL variables (values stripped).

    Raises :class:`ContractError` naming every missing or blank variable, never a value.
    ``options`` are passed to :class:`OpenAICompatibleProvider`.
    """
    values = os.environ if environ is None else environ
    missing = missing_credentials(api_key_env, base_url_env, environ=values)
    if missing:
        raise ContractError("missing or empty environment variable(s): " + ", ".join(missing))
    return OpenAICompatibleProvider(
        values[base_url_env].strip(), values[api_key_env].strip(), **options
    )
