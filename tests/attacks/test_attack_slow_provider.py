"""Attacks by a slow or lying answer server (issue 26, "Provider").

A 200 whose body stops short of its ``Content-Length`` is a transport error, retried (a
regression: it failed the row as a refused body); Ctrl-C against a provider that answers after
a minute ends the run within a bound, not after the minute; "interrupted after N new row(s)"
counts the rows of the calls in flight that were stored. Real servers on 127.0.0.1, a real
``python -m evictlab`` process and a real SIGINT.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from openai_stub import OpenAIStub, answer_reply, stalled_reply
from qa_harness import API_KEY, KEY_ENV, URL_ENV
from raw_server import RawServer

from evictlab.analysis.qa.providers import OpenAICompatibleProvider, ProviderError
from evictlab.analysis.qa.runner import INTERRUPT_GRACE_SECONDS

PAYLOAD = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
BODY = json.dumps({"choices": [{"message": {"content": "Lyon"}}]}).encode()
HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY)
WAIT_SECONDS = 300  # a bound on starting a run on a loaded machine, not a measurement


def test_a_200_cut_short_of_its_content_length_is_retried_as_a_transport_error():
    def behaviour(connection, stop):
        if server.connections == 1:
            connection.sendall(HEADERS + BODY[: len(BODY) // 2])  # then the connection closes
        else:
            connection.sendall(HEADERS + BODY)

    with RawServer(behaviour) as server:
        completion = OpenAICompatibleProvider(server.base_url, "sk-attack", retry_delay_seconds=0).complete(PAYLOAD)
        assert (completion.prediction, completion.attempts, server.connections) == ("Lyon", 2, 2)


def start_run(folder, stub, err_path) -> subprocess.Popen:
    env = {**os.environ, KEY_ENV: API_KEY, URL_ENV: stub.base_url}
    with open(err_path, "wb") as sink:
        return subprocess.Popen([sys.executable, "-m", "evictlab", "run-qa", "--output-dir", str(folder)],
                                stdout=subprocess.DEVNULL, stderr=sink, env=env)  # fmt: skip


def wait_for_calls(stub, process, count: int) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while len(stub.requests) < count:
        assert process.poll() is None, f"run-qa ended (exit {process.returncode}) before {count} calls"
        assert time.monotonic() < deadline, f"fewer than {count} calls within {WAIT_SECONDS} s"
        time.sleep(0.05)


def test_ctrl_c_against_a_provider_that_answers_after_a_minute_ends_the_run_within_the_grace(tmp_path):
    err = tmp_path / "stderr.txt"
    with OpenAIStub(fallback=stalled_reply(60)) as stub:
        process = start_run(tmp_path / "run", stub, err)
        try:
            wait_for_calls(stub, process, 3)  # the three workers' calls are in flight
            interrupted = time.monotonic()
            process.send_signal(signal.SIGINT)
            # The bound tells a grace from waiting out the minute; a loaded machine is slow to exit.
            assert process.wait(timeout=INTERRUPT_GRACE_SECONDS + 25) == 130
            assert time.monotonic() - interrupted >= INTERRUPT_GRACE_SECONDS - 0.5  # they were given the grace
        finally:
            process.kill()
            process.wait()
    text = err.read_text()
    assert "aborting 3 call(s) still in flight after 5 s" in text and "Traceback" not in text
    assert "interrupted after 0 new row(s)" in text
    assert list((tmp_path / "run" / "responses").glob("*.json")) == []


def test_the_interrupted_count_includes_the_rows_of_the_calls_in_flight_that_were_stored(tmp_path):
    err = tmp_path / "stderr.txt"
    with OpenAIStub(fallback=stalled_reply(2.0, answer_reply("Lyon"))) as stub:
        process = start_run(tmp_path / "run", stub, err)
        try:
            wait_for_calls(stub, process, 3)
            process.send_signal(signal.SIGINT)  # the three calls answer within the grace
            assert process.wait(timeout=WAIT_SECONDS) == 130
        finally:
            process.kill()
            process.wait()
    stored = len(list((tmp_path / "run" / "responses").glob("*.json")))
    counted = re.search(r"interrupted after (\d+) new row\(s\)", err.read_text())
    assert counted is not None, err.read_text()
    assert stored >= 3 and int(counted[1]) == stored
    record = json.loads((tmp_path / "run" / "run-qa.run.json").read_text())
    assert record["status"] == "interrupted"


def test_abort_cuts_a_call_waiting_to_retry(refused_port):
    provider = OpenAICompatibleProvider(f"http://127.0.0.1:{refused_port}/v1", "sk-attack",
                                        retry_delay_seconds=30, max_attempts=2)  # fmt: skip
    started = time.monotonic()
    threading.Timer(0.5, provider.abort).start()
    with pytest.raises(ProviderError, match="aborted"):
        provider.complete(PAYLOAD)  # the first attempt is refused, then it waits 30 s to retry
    assert time.monotonic() - started < 15
