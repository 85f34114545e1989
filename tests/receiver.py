"""A local HTTP receiver for notification tests: answers each POST with the next scripted status and records what
it got (headers and raw body), on 127.0.0.1 at a free port; slow if asked (`delay` seconds before answering, or the
answer's bytes `drip` seconds apart)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    statuses: list[int] = field(default_factory=list)  # answered in turn; 200 once they run out
    received: list[Received] = field(default_factory=list)


@contextmanager
def receiver(*statuses: int, delay: float = 0.0, drip: float = 0.0) -> Iterator[Receiver]:
    state = Receiver(url="", statuses=list(statuses))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state.received.append(Received(path=self.path, headers=dict(self.headers.items()), body=body))
            status = state.statuses.pop(0) if state.statuses else 200
            answer = b"ok" if status < 400 else b"receiver trouble"
            time.sleep(delay)
            if drip:
                whole = f"HTTP/1.1 {status} OK\r\nContent-Length: {len(answer)}\r\n\r\n".encode() + answer
                for index in range(len(whole)):
                    time.sleep(drip)
                    try:
                        self.wfile.write(whole[index:index + 1])
                        self.wfile.flush()
                    except OSError:
                        return  # the client gave up
                return
            self.send_response(status)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
