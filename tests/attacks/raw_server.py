"""A raw TCP server on 127.0.0.1 for attack tests: each connection runs a scripted behaviour.

Unlike :mod:`openai_stub`, a behaviour writes bytes itself, so it can trickle a response,
stream one without end or lie about its length. The server stops with its ``with`` block;
behaviours should return when ``stop`` is set or the client goes away (a send fails).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

Behaviour = Callable[[socket.socket, threading.Event], Any]


class RawServer:
    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.connections = 0
        self.stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self._threads: list[threading.Thread] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def __enter__(self) -> RawServer:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        for thread in list(self._threads):
            thread.join(timeout=5)
        self._listener.close()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(connection,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            try:
                read_request(connection)
                self.behaviour(connection, self.stop)
            except OSError:
                pass  # the client hung up, which is what these tests provoke


def read_request(connection: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
        0,
    )
    while len(body) < length:
        body += connection.recv(65536)
    return body


def trickle(data: bytes, every: float) -> Behaviour:
    """Send ``data`` one byte at a time, one every ``every`` seconds."""

    def behaviour(connection: socket.socket, stop: threading.Event) -> None:
        for byte in data:
            if stop.wait(every):
                return
            connection.sendall(bytes([byte]))

    return behaviour


def endless_body(headers: bytes = b"") -> Behaviour:
    """A 200 whose JSON string body never ends (no Content-Length unless ``headers`` says one)."""

    def behaviour(connection: socket.socket, stop: threading.Event) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + headers + b"\r\n")
        connection.sendall(b'{"choices": [{"message": {"content": "')
        block = b"x" * 65536
        while not stop.is_set():
            connection.sendall(block)

    return behaviour
