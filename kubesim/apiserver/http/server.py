"""The Kubernetes API (plus kubesim's control endpoints) over HTTP in front of a Simulator.

This module is the HTTP/1.1 transport only; the request handling is the rest of kubesim.apiserver.http (routing,
verbs, admission, watch, logs, visibility, control endpoints). Entry points: `KubeHTTPServer(addr, sim)` and
`serve_in_thread(sim)`.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubesim.apiserver.errors import internal
from kubesim.apiserver.http.backend import Backend
from kubesim.apiserver.http.common import Response, Upgrade
from kubesim.apiserver.http.routing import Api

__all__ = ["Api", "Handler", "KubeHTTPServer", "Response", "serve_in_thread"]


class Handler(BaseHTTPRequestHandler):
    """Thin HTTP/1.1 adapter: JSON bodies with Content-Length, chunked newline-delimited JSON for watches."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # header and body go out in separate writes: avoid the 40 ms delayed-ACK stall
    server: KubeHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            resp = self.server.api.handle(self.command, self.path, headers, body)
        except Exception as exc:  # a bug must not kill the connection silently: answer a Status
            resp = Response(500, internal(f"kubesim internal error: {exc!r}").status())
            if self.server.verbose:
                raise
        if resp.upgrade is not None:
            self._switch(resp.upgrade)
            return
        if resp.stream is not None:
            self._stream(resp)
            return
        if isinstance(resp.body, bytes):
            payload = resp.body
        else:
            payload = resp.body.encode() if isinstance(resp.body, str) else json.dumps(resp.body).encode()
        self.send_response(resp.code)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-cache, private")
        for w in resp.warnings:
            self.send_header("Warning", f'299 - "{_escape(w)}"')
        self.end_headers()
        self.wfile.write(payload)

    def _switch(self, upgrade: Upgrade) -> None:
        """101 Switching Protocols, then the connection belongs to the upgraded protocol until it ends."""
        self.send_response(101)
        self.send_header("Connection", "Upgrade")
        self.send_header("Upgrade", upgrade.protocol)
        for name, value in upgrade.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True
        upgrade.run(self.connection, self.rfile)

    def _stream(self, resp: Response) -> None:
        self.send_response(200)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        try:
            for event in resp.stream or ():
                data = event.encode() if isinstance(event, str) else json.dumps(event).encode() + b"\n"
                if not data:
                    continue
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


class KubeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], sim: Backend, verbose: bool = False) -> None:
        super().__init__(addr, Handler)
        self.sim = sim
        self.api = Api(sim)
        self.verbose = verbose

    @property
    def url(self) -> str:
        """http://HOST:PORT of the bound socket (the real port when bound to port 0)."""
        host, port = self.server_address[:2]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{port}"


def serve_in_thread(sim: Backend, host: str = "127.0.0.1", port: int = 0) -> tuple[KubeHTTPServer, threading.Thread]:
    server = KubeHTTPServer((host, port), sim)
    thread = threading.Thread(target=server.serve_forever, name="kubesim-http", daemon=True)
    thread.start()
    return server, thread
