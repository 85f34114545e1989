"""The service proxy: `/api/v1/namespaces/{ns}/services/{name}[:{port}]/proxy/{path}` answered by the Running pod
behind the Service when it is a server kubesim emulates (kubesim.apiserver.nodes.servers: a Jupyter server, or the
stand-in model server of a Deployment's pod), the
same server reached on the pod's port by a connection of its own (`ServiceProxy.connect`, what port forwarding
bridges to), and the control endpoint tests use to report activity on one."""

from __future__ import annotations

import hmac
import json
import socket
import threading
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler
from socketserver import BaseServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubesim.apiserver.errors import APIError
from kubesim.apiserver.http.common import Response
from kubesim.apiserver.nodes.servers import (
    ServerActivity,
    is_model_server,
    is_server,
    model_server_answer,
    server_token,
)
from kubesim.apiserver.storage.store import ObjectStore
from kubesim.kernel.clock import parse_rfc3339

PROXY_SUBRESOURCE = "proxy"


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat().replace("+00:00", "Z")


def _no_endpoints(name: str) -> APIError:
    return APIError(503, f'no endpoints available for service "{name}"', "ServiceUnavailable")


def _target_port(service: dict, port: str | None) -> Any:
    ports = (service.get("spec") or {}).get("ports") or []
    chosen = None
    for p in ports:
        if port is None or str(p.get("port")) == port or p.get("name") == port:
            chosen = p
            break
    if chosen is None:
        raise APIError(503, f'no endpoints available for service "{service["metadata"]["name"]}"', "ServiceUnavailable")
    return chosen.get("targetPort", chosen.get("port"))


def _serving_container(pod: dict, target: Any) -> dict | None:
    for container in pod["spec"].get("containers") or []:
        for p in container.get("ports") or []:
            if target in (p.get("containerPort"), p.get("name")):
                return container
    return None


def _emulated(pod: dict, container: dict | None) -> bool:
    return container is not None and (is_server(container) or is_model_server(pod, container))


def _listening(pod: dict, port: int) -> dict | None:
    """The emulated server container of the pod that declares `port` (the port it listens on), if any."""
    container = _serving_container(pod, port)
    return container if container is not None and _emulated(pod, container) else None


def _running(pod: dict | None) -> bool:
    return (
        pod is not None
        and (pod.get("status") or {}).get("phase") == "Running"
        and not pod["metadata"].get("deletionTimestamp")
    )


class PortClosed(Exception):
    """Nothing in the pod listens on the port (or the pod no longer runs); the message says which."""


def _matches(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


class ServiceProxy:
    """Answers requests to `services/{name}[:{port}]/proxy/...` from the Running pod behind the Service."""

    def __init__(self, store: ObjectStore, activity: ServerActivity) -> None:
        self.store = store
        self.activity = activity

    def handle(
        self,
        method: str,
        namespace: str,
        service_port: str,
        rest: list[str],
        query: dict[str, list[str]],
        headers: dict[str, str],
        body: bytes = b"",
    ) -> Response:
        name, _, port = service_port.partition(":")
        with self.store.lock:
            service = self.store.get("services", namespace, name, copy=False)
            if service is None:
                raise APIError(404, f'services "{name}" not found', "NotFound", {"name": name, "kind": "services"})
            target = _target_port(service, port or None)
            selector = (service.get("spec") or {}).get("selector") or {}
            pods = [
                p
                for p in self.store.list("pods", namespace, copy=False)
                if _matches(selector, p["metadata"].get("labels") or {})
                and (p.get("status") or {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")
            ]
            for pod in pods:
                container = _serving_container(pod, target)
                if container is not None and _emulated(pod, container):
                    return self._answer(method, namespace, pod, container, "/" + "/".join(rest), query, headers, body)
            if pods:
                raise APIError(
                    502,
                    f"error trying to reach service: dial tcp {pods[0]['status'].get('podIP')}:"
                    f"{target}: connect: connection refused",
                    "ServiceUnavailable",
                )
            raise _no_endpoints(name)

    def connect(self, namespace: str, pod_name: str, port: int) -> socket.socket:
        """A connection to `port` inside the pod, as a process in the pod would dial it: one end of a socket pair
        whose other end a thread serves as the pod's emulated server (HTTP/1.1, keep-alive) until either closes.
        Raises PortClosed when the pod does not run or no emulated server of it listens on the port."""
        with self.store.lock:
            pod = self.store.get("pods", namespace, pod_name, copy=False)
            if not _running(pod):
                raise PortClosed(f"pod {namespace}/{pod_name} is not running")
            assert pod is not None
            if _listening(pod, port) is None:
                servers = sorted(
                    p["containerPort"]
                    for c in pod["spec"].get("containers") or []
                    if _emulated(pod, c)
                    for p in c.get("ports") or []
                    if isinstance(p.get("containerPort"), int)
                )
                hint = (
                    f"kubesim emulates the pod's server on port {', '.join(map(str, servers))} only"
                    if servers
                    else "kubesim emulates no server in this pod"
                )
                raise PortClosed(f"failed to connect to localhost:{port} inside the pod: connection refused ({hint})")
        ours, theirs = socket.socketpair()
        endpoint = _Endpoint(self, namespace, pod_name, port)
        threading.Thread(
            target=_serve_connection, args=(theirs, endpoint), name="kubesim-pod-server", daemon=True
        ).start()
        return ours

    def answer_on_port(
        self,
        method: str,
        namespace: str,
        pod_name: str,
        port: int,
        target: str,
        headers: dict[str, str],
        body: bytes = b"",
    ) -> Response | None:
        """What the pod's emulated server on `port` answers to a request for `target` (path and query); None when
        the pod stopped running or serving the port since the connection opened (the connection then drops)."""
        url = urlsplit(target)
        query = parse_qs(url.query, keep_blank_values=True)
        with self.store.lock:
            pod = self.store.get("pods", namespace, pod_name, copy=False)
            if not _running(pod):
                return None
            assert pod is not None
            container = _listening(pod, port)
            if container is None:
                return None
            return self._answer(method, namespace, pod, container, url.path or "/", query, headers, body)

    def _answer(
        self,
        method: str,
        namespace: str,
        pod: dict,
        container: dict,
        path: str,
        query: dict[str, list[str]],
        headers: dict[str, str],
        body: bytes,
    ) -> Response:
        """The emulated server's answer: Jupyter's, or the stand-in model server's (kubesim.apiserver.nodes.servers)."""
        if is_server(container):
            return self._jupyter(method, pod, server_token(self.store, namespace, container), path, query, headers)
        code, answer = model_server_answer(method, container, path, body, int(self.store.now().timestamp()))
        return Response(code, answer)

    def _jupyter(
        self, method: str, pod: dict, token: str | None, path: str, query: dict[str, list[str]], headers: dict[str, str]
    ) -> Response:
        given = (query.get("token") or [""])[0]
        auth = headers.get("authorization", "")
        if auth.lower().startswith("token "):
            given = auth[6:].strip()
        authorized = bool(token) and hmac.compare_digest(given.encode(), (token or "").encode())
        if path.rstrip("/") == "/api":
            return Response(200, {"version": "2.14.2"})
        if path.startswith("/api/"):
            if not authorized:
                return Response(403, {"message": "Forbidden", "reason": None})
            if path.rstrip("/") == "/api/status":
                started = (pod.get("status") or {}).get("startTime")
                return Response(
                    200,
                    {
                        "started": started and _iso(parse_rfc3339(started)),
                        "last_activity": _iso(self.activity.last(pod)),
                        "connections": 0,
                        "kernels": 0,
                    },
                )
            self.activity.touch(pod["metadata"]["uid"], self.store.now())
            return Response(200, {})
        if not authorized:
            return Response(
                403,
                _page(
                    "Jupyter Server", "<h1>Jupyter Server</h1><p>Password or token: this server needs its token.</p>"
                ),
                content_type="text/html",
            )
        self.activity.touch(pod["metadata"]["uid"], self.store.now())
        name = pod["metadata"]["name"]
        body = (
            f'<h1>JupyterLab</h1><p class="jupyter-server">Jupyter server in pod {name} '
            f"({pod['metadata']['namespace']}), serving {path}.</p>"
        )
        return Response(200, _page("JupyterLab", body), content_type="text/html")

    def report_activity(self, namespace: str, pod_name: str, body: dict[str, Any]) -> Response:
        """The control endpoint: someone used this server `seconds_ago` seconds ago (default: now)."""
        with self.store.lock:
            pod = self.store.get("pods", namespace, pod_name, copy=False)
            if pod is None:
                raise APIError(404, f'pods "{pod_name}" not found', "NotFound", {"name": pod_name, "kind": "pods"})
            try:
                seconds = float(body.get("seconds_ago", 0))
            except (TypeError, ValueError) as exc:
                raise APIError(400, "seconds_ago must be a number", "BadRequest") from exc
            at = self.store.now() - timedelta(seconds=max(0.0, seconds))
            self.activity.touch(pod["metadata"]["uid"], at)
            return Response(200, {"pod": pod_name, "last_activity": _iso(self.activity.last(pod))})


class _Endpoint(BaseServer):
    """What a connection to a pod's port reaches: the proxy that answers for the pod's server, and where (a server
    without a socket of its own: it serves the connections handed to it)."""

    def __init__(self, proxy: ServiceProxy, namespace: str, pod_name: str, port: int) -> None:
        super().__init__(("127.0.0.1", port), _PodConnection)
        self.proxy, self.namespace, self.pod_name, self.port = proxy, namespace, pod_name, port


def _serve_connection(sock: socket.socket, endpoint: _Endpoint) -> None:
    try:
        endpoint.finish_request(sock, ("127.0.0.1", 0))  # serves the connection until it closes
    except OSError:
        pass
    finally:
        sock.close()


class _PodConnection(BaseHTTPRequestHandler):
    """One connection to a pod's emulated server, served as HTTP/1.1 until the client closes it."""

    protocol_version = "HTTP/1.1"
    server_version = "TornadoServer/6.4.2"  # what a Jupyter server names itself
    sys_version = ""
    server: _Endpoint

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.send_error(400, "Bad Content-Length")
            return
        sent = self.rfile.read(length) if length > 0 else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        end = self.server
        resp = end.proxy.answer_on_port(self.command, end.namespace, end.pod_name, end.port, self.path, headers, sent)
        if resp is None:
            self.close_connection = True
            return
        body = resp.body if isinstance(resp.body, str) else json.dumps(resp.body)
        payload = body.encode()
        self.send_response(resp.code)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


def _page(title: str, body: str) -> str:
    return f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title></head><body>{body}</body></html>'


def proxy_path(parts: list[str]) -> tuple[str, str, list[str]] | None:
    """(namespace, service[:port], rest) when `parts` is a service proxy path, else None."""
    if (
        len(parts) >= 7
        and parts[:3] == ["api", "v1", "namespaces"]
        and parts[4] == "services"
        and parts[6] == PROXY_SUBRESOURCE
    ):
        return parts[3], parts[5], parts[7:]
    return None
