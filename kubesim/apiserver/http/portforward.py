"""A pod's `portforward` subresource (`kubectl port-forward`) as the kubelet serves it, over SPDY/3.1 (.spdy).

The upgrade (as client-go's SPDY dialer asks for it): `Connection: Upgrade`, `Upgrade: SPDY/3.1` and the stream
protocol `X-Stream-Protocol-Version: portforward.k8s.io`, answered 101 with the protocol chosen. A WebSocket tunnel
request (kubectl 1.32 asks for one first, subprotocol `SPDY/3.1+portforward.k8s.io`: its PortForwardWebsockets
feature) is refused with 400: any answer other than 101 is an upgrade failure to client-go, which then falls back to
SPDY.

On the connection, as the kubelet's port-forward handler does it: the client opens two streams per local connection,
`streamType: error` and `streamType: data`, both with the `port` and the same `requestID` header (an older client sends
no requestID: the data stream's id is then the error stream's plus 2). Once both are open, the data stream is bridged
to the pod's port (kubesim.apiserver.http.proxy: the emulated server on it), both streams half-closed when the
server closes the connection; when nothing listens there, the error stream carries the reason (kubectl prints it and
exits, "lost connection to pod") and both streams close. Learned from the kubelet's streaming server and client-go's
port forwarder (kubernetes), and moby/spdystream.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from io import BufferedIOBase

from kubesim.apiserver.errors import APIError, bad_request
from kubesim.apiserver.http import spdy
from kubesim.apiserver.http.common import Response, Upgrade
from kubesim.apiserver.http.proxy import PortClosed, ServiceProxy

PROTOCOL_V1 = "portforward.k8s.io"
STREAM_PROTOCOL_HEADER = "x-stream-protocol-version"
STREAM_TYPE, PORT, REQUEST_ID = "streamtype", "port", "requestid"  # SPDY header names are lower case
ERROR_STREAM, DATA_STREAM = "error", "data"


def upgrade(proxy: ServiceProxy, pod: dict, headers: dict[str, str]) -> Response:
    """101 to SPDY/3.1 with the port-forward protocol for the (existing, bound) pod; 400 for any other upgrade."""
    wanted = headers.get("upgrade", "").lower()
    if "websocket" in wanted:
        raise bad_request(
            "kubesim serves port forwarding over SPDY/3.1 only, not tunneled through a WebSocket "
            f"(ask with Upgrade: {spdy.PROTOCOL})"
        )
    if spdy.PROTOCOL.lower() not in wanted or "upgrade" not in headers.get("connection", "").lower():
        raise bad_request(f"unable to upgrade connection: the request asks for no upgrade to {spdy.PROTOCOL}")
    offered = [p.strip() for p in headers.get(STREAM_PROTOCOL_HEADER, "").split(",") if p.strip()]
    if offered and PROTOCOL_V1 not in offered:
        raise APIError(
            403,
            f"unable to upgrade connection: unable to negotiate protocol: client supports {offered}, "
            f"server supports [{PROTOCOL_V1}]",
        )
    md = pod["metadata"]
    session = _Session(proxy, md["namespace"], md["name"], md.get("uid", ""))
    reply = {"X-Stream-Protocol-Version": PROTOCOL_V1} if offered else {}
    return Response(101, upgrade=Upgrade(spdy.PROTOCOL, reply, session.run))


class _Bridge(spdy.Sink):
    """A data stream's incoming bytes, written to the connection into the pod."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def data(self, chunk: bytes) -> None:
        with contextlib.suppress(OSError):
            self.sock.sendall(chunk)

    def finished(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def reset(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


class _Session:
    """One upgraded connection of `kubectl port-forward`: pairs each local connection's streams and bridges them."""

    def __init__(self, proxy: ServiceProxy, namespace: str, pod_name: str, uid: str) -> None:
        self.proxy = proxy
        self.namespace, self.pod_name, self.uid = namespace, pod_name, uid
        self.pairs: dict[str, dict[str, spdy.Stream]] = {}

    def run(self, sock: socket.socket, rfile: BufferedIOBase) -> None:
        spdy.ServerConnection(sock, rfile, self._opened).serve()

    def _opened(self, conn: spdy.ServerConnection, stream: spdy.Stream) -> None:
        kind, port = stream.headers.get(STREAM_TYPE), stream.headers.get(PORT)
        if kind not in (ERROR_STREAM, DATA_STREAM) or not port:
            conn.reset(stream, spdy.REFUSED_STREAM)
            return
        request_id = stream.headers.get(REQUEST_ID) or str(stream.id if kind == ERROR_STREAM else stream.id - 2)
        pair = self.pairs.setdefault(request_id, {})
        if kind in pair:
            conn.reset(stream, spdy.PROTOCOL_ERROR)
            return
        conn.reply(stream)
        pair[kind] = stream
        if len(pair) == 2:
            del self.pairs[request_id]
            self._forward(conn, pair[ERROR_STREAM], pair[DATA_STREAM])

    def _forward(self, conn: spdy.ServerConnection, error: spdy.Stream, data: spdy.Stream) -> None:
        """Runs in the reading thread, so the data stream's bridge is in place before its first DATA frame."""
        raw = data.headers.get(PORT, "")
        try:
            port = int(raw)
            if not 0 < port < 65536:
                raise ValueError(raw)
            into_pod = self.proxy.connect(self.namespace, self.pod_name, port)
        except ValueError:
            self._fail(conn, error, data, f'invalid port "{raw}"')
            return
        except PortClosed as exc:
            self._fail(conn, error, data, f"{exc}", port)
            return
        data.sink = _Bridge(into_pod)
        threading.Thread(
            target=self._pump, args=(conn, into_pod, error, data), name="kubesim-port-forward", daemon=True
        ).start()

    def _fail(
        self, conn: spdy.ServerConnection, error: spdy.Stream, data: spdy.Stream, why: str, port: int | None = None
    ) -> None:
        message = (
            why
            if port is None
            else (f"error forwarding port {port} to pod {self.namespace}/{self.pod_name}, uid {self.uid}: {why}")
        )
        conn.send(error, message.encode(), fin=True)
        conn.send(data, b"", fin=True)

    @staticmethod
    def _pump(conn: spdy.ServerConnection, into_pod: socket.socket, error: spdy.Stream, data: spdy.Stream) -> None:
        """What the pod's server sends, onto the data stream until it closes; then both streams end cleanly."""
        try:
            while chunk := into_pod.recv(spdy.MAX_DATA):
                conn.send(data, chunk)
        except OSError:
            pass
        finally:
            into_pod.close()
            conn.send(data, b"", fin=True)
            conn.send(error, b"", fin=True)
