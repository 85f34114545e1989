"""The server side of SPDY/3.1, as much of it as kubectl's port forwarding speaks over an upgraded HTTP connection.

Learned from the protocol's own description ("SPDY Protocol - Draft 3", published by the Chromium project, the same
text as the IETF draft draft-mbelshe-httpbis-spdy-00; SPDY/3.1 adds only the session-level WINDOW_UPDATE) and from
how moby/spdystream, the SPDY library client-go and the kubelet use, reads and writes frames.

Frames: a control frame starts with the control bit, the version (3) and a 16-bit type, then 8 bits of flags and a
24-bit payload length; a DATA frame starts with a 31-bit stream id, then flags and length. Header blocks (SYN_STREAM,
SYN_REPLY, HEADERS) are a count and length-prefixed name/value pairs, zlib-compressed with the protocol's dictionary
and one compression context per direction for the whole connection, each block ending in a sync flush.

What kubesim does with them: the client opens streams (SYN_STREAM, odd ids), `on_stream` answers each with SYN_REPLY
(`reply`) or refuses it (`reset`); DATA frames go to the stream's `sink`, FIN half-closes, RST_STREAM resets; PINGs
the client starts are echoed; SETTINGS and WINDOW_UPDATE are read and ignored (spdystream enforces no flow-control
window, and kubesim sends at most 32 KiB per frame); GOAWAY or end of input ends the session. kubesim never opens a
stream itself.
"""

from __future__ import annotations

import socket
import struct
import threading
import zlib
from collections.abc import Callable
from io import BufferedIOBase

VERSION = 3
PROTOCOL = "SPDY/3.1"  # the Upgrade header's value

SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
# RST_STREAM status codes
PROTOCOL_ERROR, INVALID_STREAM, REFUSED_STREAM, UNSUPPORTED_VERSION, CANCEL = 1, 2, 3, 4, 5
GOAWAY_OK, GOAWAY_PROTOCOL_ERROR = 0, 1
MAX_DATA = 32 * 1024  # bytes of one DATA frame kubesim sends (the frame format allows 2^24 - 1)

# The header compression dictionary of SPDY/3 (section 2.6.10.1 of the draft): each of these words preceded by its
# length as a 32-bit big-endian integer, then the tail as it is. Protocol data: both ends must use it byte for byte
# (zlib checks its Adler-32 checksum, 0xe3c6a7c2, in the stream header).
_DICTIONARY_WORDS = (
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
)
_DICTIONARY_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _DICTIONARY_WORDS) + _DICTIONARY_TAIL.encode()


class ProtocolError(Exception):
    """The peer sent something SPDY/3 does not allow; the session ends with GOAWAY PROTOCOL_ERROR."""


def encode_headers(headers: dict[str, str]) -> bytes:
    """An uncompressed header block: the pair count, then each lower-case name and its value, length-prefixed."""
    out = [struct.pack(">I", len(headers))]
    for name, value in headers.items():
        n, v = name.lower().encode(), value.encode()
        out += [struct.pack(">I", len(n)), n, struct.pack(">I", len(v)), v]
    return b"".join(out)


def decode_headers(block: bytes) -> dict[str, list[str]]:
    """An uncompressed header block; a value holding NULs is several values of one name."""
    headers: dict[str, list[str]] = {}
    try:
        (count,) = struct.unpack_from(">I", block, 0)
        at = 4
        for _ in range(count):
            (n,) = struct.unpack_from(">I", block, at)
            name = block[at + 4 : at + 4 + n].decode().lower()
            at += 4 + n
            (v,) = struct.unpack_from(">I", block, at)
            value = block[at + 4 : at + 4 + v].decode()
            at += 4 + v
            if at > len(block):
                raise ProtocolError("header block shorter than its lengths")
            headers.setdefault(name, []).extend(value.split("\0"))
    except (struct.error, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed header block: {exc}") from exc
    return headers


class Sink:
    """Where a stream's incoming DATA goes; the default drops it."""

    def data(self, chunk: bytes) -> None:
        """Bytes the client sent on the stream."""

    def finished(self) -> None:
        """The client half-closed the stream (FIN): it sends no more."""

    def reset(self) -> None:
        """The client reset the stream, or the session ended: nothing more is read or written on it."""


class Stream:
    """A stream the client opened: its id and headers (first value of each name), and where its DATA goes."""

    def __init__(self, stream_id: int, headers: dict[str, list[str]], remote_fin: bool) -> None:
        self.id = stream_id
        self.headers = {name: values[0] for name, values in headers.items() if values}
        self.sink: Sink = Sink()
        self.remote_closed = remote_fin
        self.local_closed = False
        self.reset_done = False


class ServerConnection:
    """One SPDY/3.1 session on an upgraded connection: `serve()` reads frames until GOAWAY or end of input.

    `on_stream(connection, stream)` runs in the reading thread for each SYN_STREAM and must `reply` or `reset` it;
    the DATA frames that follow go to `stream.sink`. Writing methods may be called from any thread.
    """

    def __init__(
        self, sock: socket.socket, rfile: BufferedIOBase, on_stream: Callable[[ServerConnection, Stream], None]
    ) -> None:
        self.sock = sock
        self.rfile = rfile
        self.on_stream = on_stream
        self.streams: dict[int, Stream] = {}
        self._write_lock = threading.Lock()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(zdict=DICTIONARY)
        self._last_stream = 0
        self.closed = False

    # --- reading

    def serve(self) -> None:
        try:
            while self._read_frame():
                pass
        except ProtocolError:
            self._send_control(GOAWAY, 0, struct.pack(">II", self._last_stream, GOAWAY_PROTOCOL_ERROR))
        except OSError:
            pass
        finally:
            self.closed = True
            for stream in list(self.streams.values()):
                stream.reset_done = True
                stream.sink.reset()
            self.streams.clear()

    def _read_exactly(self, n: int) -> bytes | None:
        data = self.rfile.read(n) if n else b""
        return data if data is not None and len(data) == n else None

    def _read_frame(self) -> bool:
        head = self._read_exactly(8)
        if head is None:
            return False
        first, second = struct.unpack(">II", head)
        flags, length = second >> 24, second & 0xFFFFFF
        payload = self._read_exactly(length)
        if payload is None:
            return False
        if not first & 0x80000000:
            self._data(first & 0x7FFFFFFF, flags, payload)
            return True
        version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
        if version != VERSION:
            raise ProtocolError(f"SPDY version {version}, kubesim speaks {VERSION}")
        if kind == SYN_STREAM:
            self._syn_stream(flags, payload)
        elif kind == RST_STREAM:
            self._rst_stream(payload)
        elif kind == PING:
            self._ping(payload)
        elif kind == GOAWAY:
            return False
        elif kind in (SYN_REPLY, HEADERS):
            self._header_block(payload[4:])  # keeps the decompression context in step; kubesim opens no streams
        # SETTINGS, WINDOW_UPDATE and unknown control frames: read and ignored
        return True

    def _header_block(self, compressed: bytes) -> dict[str, list[str]]:
        try:
            block = self._inflate.decompress(compressed)
        except zlib.error as exc:
            raise ProtocolError(f"header block does not decompress: {exc}") from exc
        return decode_headers(block)

    def _syn_stream(self, flags: int, payload: bytes) -> None:
        if len(payload) < 10:
            raise ProtocolError("SYN_STREAM too short")
        stream_id = struct.unpack_from(">I", payload, 0)[0] & 0x7FFFFFFF
        headers = self._header_block(payload[10:])
        if stream_id == 0 or stream_id % 2 == 0 or stream_id <= self._last_stream:
            raise ProtocolError(f"stream id {stream_id} out of order")
        self._last_stream = stream_id
        stream = Stream(stream_id, headers, bool(flags & FLAG_FIN))
        self.streams[stream_id] = stream
        self.on_stream(self, stream)

    def _data(self, stream_id: int, flags: int, payload: bytes) -> None:
        stream = self.streams.get(stream_id)
        if stream is None or stream.remote_closed:
            return
        if payload:
            stream.sink.data(payload)
        if flags & FLAG_FIN:
            stream.remote_closed = True
            stream.sink.finished()
            self._forget_if_done(stream)

    def _rst_stream(self, payload: bytes) -> None:
        if len(payload) < 8:
            raise ProtocolError("RST_STREAM too short")
        stream = self.streams.pop(struct.unpack_from(">I", payload, 0)[0] & 0x7FFFFFFF, None)
        if stream is not None:
            stream.reset_done = True
            stream.sink.reset()

    def _ping(self, payload: bytes) -> None:
        if len(payload) != 4:
            raise ProtocolError("PING payload is not 4 bytes")
        if struct.unpack(">I", payload)[0] % 2 == 1:  # the client's (odd) ids are answered with the same frame
            self._send_control(PING, 0, payload)

    def _forget_if_done(self, stream: Stream) -> None:
        if stream.remote_closed and stream.local_closed:
            self.streams.pop(stream.id, None)

    # --- writing

    def reply(self, stream: Stream, headers: dict[str, str] | None = None) -> None:
        """Accept the stream (SYN_REPLY)."""
        with self._write_lock:
            block = self._deflate.compress(encode_headers(headers or {})) + self._deflate.flush(zlib.Z_SYNC_FLUSH)
            self._write(_control(SYN_REPLY, 0, struct.pack(">I", stream.id) + block))

    def reset(self, stream: Stream, status: int = CANCEL) -> None:
        """RST_STREAM: refuse or abandon the stream."""
        if stream.reset_done:
            return
        stream.reset_done = stream.local_closed = True
        self.streams.pop(stream.id, None)
        self._send_control(RST_STREAM, 0, struct.pack(">II", stream.id, status))

    def send(self, stream: Stream, data: bytes, fin: bool = False) -> None:
        """DATA on the stream (in frames of at most MAX_DATA bytes); `fin` half-closes kubesim's side after it."""
        if stream.local_closed or stream.reset_done:
            return
        chunks = [data[i : i + MAX_DATA] for i in range(0, len(data), MAX_DATA)] or [b""]
        for i, chunk in enumerate(chunks):
            last = fin and i == len(chunks) - 1
            if not chunk and not last:
                continue
            head = struct.pack(">II", stream.id, ((FLAG_FIN if last else 0) << 24) | len(chunk))
            with self._write_lock:
                self._write(head + chunk)
        if fin:
            stream.local_closed = True
            self._forget_if_done(stream)

    def _send_control(self, kind: int, flags: int, payload: bytes) -> None:
        with self._write_lock:
            self._write(_control(kind, flags, payload))

    def _write(self, frame: bytes) -> None:
        try:
            self.sock.sendall(frame)
        except OSError:
            self.closed = True


def _control(kind: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload
