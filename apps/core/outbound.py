"""Requests the portal sends to addresses its users give (notification webhooks), guarded against server-side request
forgery (docs/architecture.md, Notification channels).

A user who may name a URL the worker then calls could otherwise make the worker reach what only it can reach: the
cluster's API, a metadata service on a link-local address, a database on loopback. So:

- **Shape.** Only `http` and `https`, a host, no user name or password in the URL (credentials in a URL end up in
  logs and pages; a receiver that needs them takes the channel's secret instead).
- **Where it resolves.** Every address the host resolves to must be public: loopback, private and carrier-grade NAT
  addresses are refused unless `settings.NOTIFICATIONS_ALLOW_PRIVATE` (on in the embedded demo, off in production)
  allows them; link-local (a cloud's metadata service at 169.254.169.254 hands out the machine's credentials),
  multicast, reserved and unspecified addresses always, since no receiver lives there.
- **Checked twice.** When the channel is saved (a 400 naming the field) and again when each request is sent, and
  the request then goes to the very address that was checked (the connection is pinned to it, with the URL's host
  name still sent as Host and TLS server name), so a DNS answer that changes in between cannot redirect it.
  Redirects are never followed.
- **One deadline.** A request takes at most its `timeout` in all, not per socket operation: a receiver that answers a
  byte at a time (or stalls a TLS handshake) would otherwise hold a worker process until Celery's time limit, and a
  user may point a channel at such a receiver and then cause events at will. At the deadline the socket is shut down
  and the request ends as a `TimeoutError`.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import socket
import ssl
import threading
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from django.conf import settings

SCHEMES = {"http": 80, "https": 443}
MAX_URL_LENGTH = 2000
RESPONSE_PEEK = 500  # bytes of a refused answer kept for the delivery log
ALWAYS_REFUSED = frozenset({"link-local", "not a unicast"})  # whatever NOTIFICATIONS_ALLOW_PRIVATE says


class OutboundRefused(Exception):
    """The URL may not be called: its shape, or where its host resolves."""


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    body: str


def url_shape_errors(url: str) -> list[str]:
    """What is wrong with the URL's shape (scheme, host, credentials), without resolving it."""
    if len(url) > MAX_URL_LENGTH:
        return [f"Give a URL of at most {MAX_URL_LENGTH} characters."]
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number or out of range
    except ValueError:
        return ["Give a valid http or https URL."]
    errors = []
    if parts.scheme.lower() not in SCHEMES:
        errors.append(f"Only http and https URLs are allowed, not {parts.scheme or 'one without a scheme'}.")
    if not parts.hostname:
        errors.append("Give the receiver's host name.")
    if parts.username is not None or parts.password is not None:
        errors.append("Leave credentials out of the URL (no user:password@); a webhook signs with its secret.")
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        errors.append("A URL has no spaces or control characters.")
    return errors


def _refused_reason(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast or address.is_unspecified or address.is_reserved:
        return "not a unicast"
    if address.is_private or not address.is_global:
        return "private"
    return None


def resolve(url: str) -> tuple[SplitResult, str]:
    """The URL's parts and the one address to connect to; OutboundRefused when the shape is wrong, the host does not
    resolve, or any of its addresses is not public (unless the setting allows private ones)."""
    errors = url_shape_errors(url)
    if errors:
        raise OutboundRefused(" ".join(errors))
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or SCHEMES[parts.scheme.lower()]
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise OutboundRefused(f"The host {host} does not resolve ({exc}).") from exc
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    if not addresses:
        raise OutboundRefused(f"The host {host} does not resolve.")
    for text in addresses:
        reason = _refused_reason(ipaddress.ip_address(text.split("%", 1)[0]))
        if reason in ALWAYS_REFUSED:
            raise OutboundRefused(f"{host} resolves to {text}, a {reason} address; the portal never calls those.")
        if reason is not None and not settings.NOTIFICATIONS_ALLOW_PRIVATE:
            raise OutboundRefused(
                f"{host} resolves to {text}, a {reason} address; the portal only calls public addresses "
                "(an admin may allow private ones with NOTIFICATIONS_ALLOW_PRIVATE).")
    return parts, addresses[0]


def url_errors(url: str) -> list[str]:
    """Every reason the URL may not be called (shape first; where it resolves only once the shape is right)."""
    errors = url_shape_errors(url)
    if errors:
        return errors
    try:
        resolve(url)
    except OutboundRefused as exc:
        return [str(exc)]
    return []


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to an address checked beforehand, the certificate checked against the URL's host name."""

    def __init__(self, address: str, port: int, *, server_name: str, timeout: float) -> None:
        super().__init__(address, port, timeout=timeout, context=ssl.create_default_context())
        self._server_name = server_name

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.raw_sock = sock  # the deadline can cut a handshake that stalls
        self.sock = self._context.wrap_socket(sock, server_hostname=self._server_name)  # type: ignore[attr-defined]


class _Deadline:
    """Shuts the connection's socket down when `seconds` have passed: a read or write blocked on it then returns or
    fails at once, whatever its own timeout, and `passed` says why."""

    def __init__(self, connection: http.client.HTTPConnection, seconds: float) -> None:
        self.connection = connection
        self.passed = threading.Event()
        self.timer = threading.Timer(seconds, self._cut)
        self.timer.daemon = True

    def _cut(self) -> None:
        self.passed.set()
        for sock in (getattr(self.connection, "raw_sock", None), self.connection.sock):
            if sock is not None:
                with contextlib.suppress(OSError):  # not connected yet or closed: connect() checks `passed` itself
                    sock.shutdown(socket.SHUT_RDWR)


def post(url: str, body: bytes, *, headers: dict[str, str], timeout: float) -> Answer:
    """POST `body` to `url` at the address `resolve` checked, all within `timeout` seconds; raises OutboundRefused
    before connecting, OSError (TimeoutError at the deadline) on the way. Never follows a redirect: a 3xx is an
    answer like any other."""
    parts, address = resolve(url)
    host = parts.hostname or ""
    scheme = parts.scheme.lower()
    port = parts.port or SCHEMES[scheme]
    connection: http.client.HTTPConnection
    if scheme == "https":
        connection = _PinnedHTTPSConnection(address, port, server_name=host, timeout=timeout)
    else:
        connection = http.client.HTTPConnection(address, port, timeout=timeout)
    target = parts.path or "/"
    if parts.query:
        target = f"{target}?{parts.query}"
    host_header = host if parts.port is None else f"{host}:{parts.port}"
    if ":" in host and not host.startswith("["):
        host_header = f"[{host}]" if parts.port is None else f"[{host}]:{parts.port}"
    deadline = _Deadline(connection, timeout)
    deadline.timer.start()
    try:
        connection.connect()
        if deadline.passed.is_set():
            raise TimeoutError
        connection.request("POST", target, body=body, headers={
            **headers, "Host": host_header, "Content-Length": str(len(body)), "User-Agent": "gpu-portal"})
        response = connection.getresponse()
        peek = response.read(RESPONSE_PEEK).decode("utf-8", "replace")  # cut short at the deadline: the status stands
        return Answer(status=response.status, reason=response.reason, body=peek)
    except (OSError, http.client.HTTPException) as exc:
        if deadline.passed.is_set():
            raise TimeoutError(f"no whole answer within {timeout:g} s") from exc
        raise
    finally:
        deadline.timer.cancel()
        connection.close()
