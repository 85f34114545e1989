"""Pods that serve HTTP (the HTTP side is kubesim.apiserver.http.proxy), reached through the API server's service proxy
(`/api/v1/namespaces/{ns}/services/{name}[:{port}]/proxy/{path}`), the way `kubectl proxy` users reach them, or on
their container port by `kubectl port-forward` (kubesim.apiserver.http.portforward).

A container that reads `JUPYTER_TOKEN` (the variable the Jupyter docker-stacks images take their token from) is a
Jupyter server: it runs until it is stopped, and on its container port it answers like one, as far as a portal
needs: the landing page (`/lab`, `/tree`, `/`) and `/api/status` (`started`, `last_activity`, `connections`,
`kernels`) only with the token (`Authorization: token ...` or `?token=`), a login page without it. Requests with
the token other than `/api/status` count as activity, as in Jupyter Server; tests also report activity through the
control endpoint `POST /kubesim/v1/servers/{ns}/{pod}/activity` (body: optional `seconds_ago`).
"""

from __future__ import annotations

import base64
import threading
from datetime import datetime

from kubesim.kernel.clock import parse_rfc3339
from kubesim.kernel.store import Store

TOKEN_ENV = "JUPYTER_TOKEN"  # noqa: S105 - the name of the variable, not a token


def is_server(container: dict) -> bool:
    return any(isinstance(e, dict) and e.get("name") == TOKEN_ENV for e in container.get("env") or [])


def server_token(store: Store, namespace: str, container: dict) -> str | None:
    """The token a server container reads: a literal value, or the key of a Secret in its namespace."""
    for env in container.get("env") or []:
        if not isinstance(env, dict) or env.get("name") != TOKEN_ENV:
            continue
        if "value" in env:
            return str(env["value"])
        ref = ((env.get("valueFrom") or {}).get("secretKeyRef")) or {}
        secret = store.get("secrets", namespace, str(ref.get("name", "")), copy=False)
        raw = ((secret or {}).get("data") or {}).get(ref.get("key", ""))
        if raw is None:
            return None
        try:
            return base64.b64decode(raw).decode()
        except (ValueError, UnicodeDecodeError):
            return None
    return None


class ServerActivity:
    """Last activity per server pod (by uid); a pod nobody used reports its start time, as Jupyter does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, datetime] = {}

    def touch(self, uid: str, at: datetime) -> None:
        with self._lock:
            self._last[uid] = max(at, self._last.get(uid, at))

    def last(self, pod: dict) -> datetime | None:
        with self._lock:
            seen = self._last.get(pod["metadata"]["uid"])
        started = (pod.get("status") or {}).get("startTime")
        start = parse_rfc3339(started) if started else None
        return seen or start
