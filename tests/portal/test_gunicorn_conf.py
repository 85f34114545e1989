"""gunicorn as every start of the web process runs it (from the repository's root, so it reads ./gunicorn.conf.py):
a request gunicorn refuses before the portal sees it (414, 431) is answered as JSON, as every API error is."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def gunicorn():
    """One sync worker, started as the launcher starts it; stopped by the pid recorded here."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        cwd=ROOT, env={**os.environ, "PORTAL_MODE": "embedded"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError as refused:
                if process.poll() is not None or time.monotonic() > deadline:
                    why = process.stderr.read().decode() if process.stderr else "no gunicorn"
                    raise AssertionError(why) from refused
                time.sleep(0.1)
        yield port
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


def raw(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def test_a_request_line_past_gunicorns_limit_is_answered_as_json(gunicorn):
    status, headers, body = raw(gunicorn, f"GET /api/v1/workloads/?q={'x' * 5000} HTTP/1.1\r\nHost: localhost\r\n\r\n"
                                .encode())
    assert status == 414
    assert headers["content-type"] == "application/json" and headers["x-content-type-options"] == "nosniff"
    assert json.loads(body) == {"detail": "The request line is 5034 bytes, more than the 4094 the server reads: put "
                                          "long parameters in the request body, or send fewer."}


@pytest.mark.parametrize(("headers", "what"), [
    ("".join(f"X-Filler-{i}: {i}\r\n" for i in range(120)), "too many header fields"),
    (f"X-Big: {'y' * 9000}\r\n", "a header field longer than the server reads"),
])
def test_headers_past_gunicorns_limits_are_answered_as_json(gunicorn, headers, what):
    status, answer_headers, body = raw(
        gunicorn, f"GET /api/v1/workloads/ HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n".encode())
    assert status == 431 and answer_headers["content-type"] == "application/json"
    assert json.loads(body) == {"detail": f"The request has {what}; send fewer or shorter headers."}
