"""The CLI's HTTP client where the portal lets it down: a followed stream that breaks off (a restarted web process, a
proxy cutting it) ends in one line on stderr and exit code 7, never a traceback. The portal here is a socket that
starts a chunked answer and drops it half-way, as a killed worker does."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from portal_cli import config

ROOT = Path(__file__).resolve().parents[2]


def serve_a_stream_that_breaks(listener: socket.socket) -> None:
    connection, _ = listener.accept()
    with connection:
        request = b""
        while b"\r\n\r\n" not in request:
            request += connection.recv(4096)
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n"
                           b"7\r\nstep 1\n\r\n7\r\nstep 2\n\r\n"
                           b"20\r\nstep 3 is cut")  # a chunk of 32 bytes announced, 13 sent, then the end


def test_a_follow_that_breaks_off_ends_in_one_line(tmp_path, monkeypatch):
    listener = socket.create_server(("127.0.0.1", 0))
    portal = threading.Thread(target=serve_a_stream_that_breaks, args=(listener,), daemon=True)
    portal.start()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("GPU_PORTAL_URL", raising=False)
    monkeypatch.delenv("GPU_PORTAL_TOKEN", raising=False)
    config.save(config.Credentials(url=f"http://127.0.0.1:{listener.getsockname()[1]}", token="a-token"))
    env = dict(os.environ)
    with listener:
        follower = subprocess.run([sys.executable, "-m", "portal_cli", "logs", "7", "-f"], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=60, check=False)
    portal.join(timeout=10)
    assert follower.stdout.splitlines() == ["step 1", "step 2"]
    assert follower.stderr.splitlines() == [
        "gpu: the stream from the portal broke off (ChunkedEncodingError); run the command again to go on"]
    assert follower.returncode == 7
