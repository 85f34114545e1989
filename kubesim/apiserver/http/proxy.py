"""The service proxy: `/api/v1/namespaces/{ns}/services/{name}[:{port}]/proxy/{path}` answered by the Running pod
behind the Service when it is a server kubesim emulates (kubesim.apiserver.nodes.servers: a Jupyter server), and the
control endpoint tests use to report activity on one."""

from __future__ import annotations

import hmac
from datetime import datetime, timedelta
from typing import Any

from kubesim.apiserver.errors import APIError
from kubesim.apiserver.http.common import Response
from kubesim.apiserver.nodes.servers import ServerActivity, is_server, server_token
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
                if container is not None and is_server(container):
                    token = server_token(self.store, namespace, container)
                    return self._jupyter(method, pod, token, "/" + "/".join(rest), query, headers)
            if pods:
                raise APIError(
                    502,
                    f"error trying to reach service: dial tcp {pods[0]['status'].get('podIP')}:"
                    f"{target}: connect: connection refused",
                    "ServiceUnavailable",
                )
            raise _no_endpoints(name)

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
