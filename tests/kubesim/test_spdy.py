"""Port forwarding's wire protocol against a served kubesim, without kubectl: the SPDY/3.1 upgrade, the stream pair
of one forwarded connection, and the refusals (the kubectl end to end is tests/kubesim/test_port_forward.py).

The client half here is written from the SPDY/3 draft (frame layout, header blocks, the zlib dictionary), not with
kubesim's own framing code; only the dictionary bytes are shared, and their Adler-32 is pinned to the spec's.
"""

from __future__ import annotations

import json
import socket
import struct
import zlib
from collections.abc import Iterator
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

from kubesim.apiserver.http.spdy import DICTIONARY
from kubesim.testing import InProcessKubesim

NOTEBOOK = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "nb"},
    "spec": {
        "containers": [
            {
                "name": "notebook",
                "image": "quay.io/jupyter/base-notebook",
                "env": [{"name": "JUPYTER_TOKEN", "value": "t0ken"}],
                "ports": [{"containerPort": 8888}],
            }
        ]
    },
}
PATH = "/api/v1/namespaces/wire/pods/nb/portforward"


@pytest.fixture(scope="module")
def pod(ks: InProcessKubesim, api: SimpleNamespace) -> str:
    api.core.create_namespace({"metadata": {"name": "wire"}})
    api.core.create_namespaced_pod("wire", NOTEBOOK)
    ks.settle()
    return urlsplit(ks.url).netloc


class Client:
    """A SPDY/3.1 client on an upgraded connection: one compression context per direction."""

    def __init__(self, sock: socket.socket, rest: bytes) -> None:
        self.sock, self.buffer = sock, rest
        self.deflate = zlib.compressobj(zdict=DICTIONARY)
        self.inflate = zlib.decompressobj(zdict=DICTIONARY)

    def syn_stream(self, stream_id: int, headers: dict[str, str], fin: bool = False) -> None:
        block = struct.pack(">I", len(headers))
        for name, value in headers.items():
            block += struct.pack(">I", len(name)) + name.encode() + struct.pack(">I", len(value)) + value.encode()
        compressed = self.deflate.compress(block) + self.deflate.flush(zlib.Z_SYNC_FLUSH)
        payload = struct.pack(">IIH", stream_id, 0, 0) + compressed
        self.sock.sendall(struct.pack(">HHI", 0x8003, 1, (int(fin) << 24) | len(payload)) + payload)

    def data(self, stream_id: int, data: bytes, fin: bool = False) -> None:
        self.sock.sendall(struct.pack(">II", stream_id, (int(fin) << 24) | len(data)) + data)

    def ping(self, ping_id: int) -> None:
        self.sock.sendall(struct.pack(">HHII", 0x8003, 6, 4, ping_id))

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            assert chunk, "connection closed"
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def frames(self) -> Iterator[tuple]:
        """("control", type, flags, payload) or ("data", stream id, flags, data), as they arrive."""
        while True:
            first, second = struct.unpack(">II", self._read(8))
            payload = self._read(second & 0xFFFFFF)
            if first & 0x80000000:
                assert (first >> 16) & 0x7FFF == 3
                yield "control", first & 0xFFFF, second >> 24, payload
            else:
                yield "data", first, second >> 24, payload

    def headers_of(self, block: bytes) -> int:
        """The pair count of a compressed header block (kubesim replies with none)."""
        return struct.unpack(">I", self.inflate.decompress(block)[:4])[0]


def _upgrade(host: str, *headers: str, method: str = "POST") -> tuple[socket.socket, bytes, bytes]:
    sock = socket.create_connection(tuple(host.rsplit(":", 1)))  # type: ignore[arg-type]
    sock.settimeout(10)
    request = f"{method} {PATH} HTTP/1.1\r\nHost: {host}\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n"
    sock.sendall(request.encode())
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = sock.recv(65536)
        assert chunk, raw
        raw += chunk
    head, _, rest = raw.partition(b"\r\n\r\n")
    return sock, head, rest


SPDY_UPGRADE = ("Connection: Upgrade", "Upgrade: SPDY/3.1", "X-Stream-Protocol-Version: portforward.k8s.io")


def test_the_header_dictionary_is_the_spdy3_one():
    assert len(DICTIONARY) == 1423
    assert zlib.adler32(DICTIONARY) == 0xE3C6A7C2
    assert DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert DICTIONARY.endswith(b"charset=iso-8859-1,utf-,*,enq=0.")


def test_a_forwarded_connection_reaches_the_pods_server_and_both_streams_end_cleanly(pod: str):
    sock, head, rest = _upgrade(pod, *SPDY_UPGRADE)
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 101 Switching Protocols"
    assert {"Connection: Upgrade", "Upgrade: SPDY/3.1", "X-Stream-Protocol-Version: portforward.k8s.io"} <= set(lines)
    client = Client(sock, rest)
    common = {"port": "8888", "requestid": "0"}
    client.syn_stream(1, {"streamtype": "error", **common})
    client.data(1, b"", fin=True)  # kubectl never writes to the error stream
    client.syn_stream(3, {"streamtype": "data", **common})
    client.data(3, b"GET /api HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", fin=True)
    client.ping(1)
    replies, pinged, data, fins = [], False, b"", set()
    for kind, what, flags, payload in client.frames():
        if kind == "control" and what == 2:
            replies.append(struct.unpack(">I", payload[:4])[0])
            assert client.headers_of(payload[4:]) == 0
        elif kind == "control" and what == 6:
            pinged = struct.unpack(">I", payload)[0] == 1
        elif kind == "data":
            if what == 3:
                data += payload
            else:
                assert payload == b"", payload  # the error stream stays empty on success
            if flags & 1:
                fins.add(what)
        if fins == {1, 3} and pinged:
            break
    sock.close()
    assert replies == [1, 3]
    status, _, body = data.partition(b"\r\n\r\n")
    assert status.split(b"\r\n")[0] == b"HTTP/1.1 200 OK"
    assert json.loads(body) == {"version": "2.14.2"}


def test_a_port_nothing_listens_on_is_reported_on_the_error_stream(pod: str, api: SimpleNamespace):
    sock, head, rest = _upgrade(pod, *SPDY_UPGRADE)
    assert head.startswith(b"HTTP/1.1 101 ")
    client = Client(sock, rest)
    client.syn_stream(1, {"streamtype": "error", "port": "9000", "requestid": "7"}, fin=True)
    client.syn_stream(3, {"streamtype": "data", "port": "9000", "requestid": "7"})
    error, fins = b"", set()
    for kind, what, flags, payload in client.frames():
        if kind == "data":
            error += payload if what == 1 else b""
            if flags & 1:
                fins.add(what)
        if fins == {1, 3}:
            break
    sock.close()
    uid = api.core.read_namespaced_pod("nb", "wire").metadata.uid
    assert error.decode() == (
        f"error forwarding port 9000 to pod wire/nb, uid {uid}: failed to connect to localhost:9000 inside the pod: "
        "connection refused (kubesim emulates the pod's server on port 8888 only)"
    )


@pytest.mark.parametrize(
    ("headers", "method", "status", "says"),
    [
        (
            ("Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io"),
            "GET",
            400,
            "kubesim serves port forwarding over SPDY/3.1 only, not tunneled through a WebSocket",
        ),
        ((), "POST", 400, "unable to upgrade connection: the request asks for no upgrade to SPDY/3.1"),
        (
            ("Connection: Upgrade", "Upgrade: SPDY/3.1", "X-Stream-Protocol-Version: v4.channel.k8s.io"),
            "POST",
            403,
            "unable to negotiate protocol: client supports ['v4.channel.k8s.io'], server supports [portforward.k8s.io]",
        ),
    ],
    ids=["websocket", "no-upgrade", "other-protocol"],
)
def test_other_upgrades_are_refused_with_a_status(pod: str, headers: tuple, method: str, status: int, says: str):
    sock, head, rest = _upgrade(pod, *headers, "Content-Length: 0", method=method)
    lines = head.decode().split("\r\n")
    length = int(next(line.split(":")[1] for line in lines if line.lower().startswith("content-length")))
    body = rest
    while len(body) < length:
        body += sock.recv(65536)
    sock.close()
    assert lines[0].startswith(f"HTTP/1.1 {status} ")
    answer = json.loads(body)
    assert (answer["kind"], answer["code"]) == ("Status", status)
    assert says in answer["message"]
