"""Pods that serve HTTP (the HTTP side is kubesim.apiserver.http.proxy), reached through the API server's service proxy
(`/api/v1/namespaces/{ns}/services/{name}[:{port}]/proxy/{path}`), the way `kubectl proxy` users reach them, or on
their container port by `kubectl port-forward` (kubesim.apiserver.http.portforward).

A container that reads `JUPYTER_TOKEN` (the variable the Jupyter docker-stacks images take their token from) is a
Jupyter server: it runs until it is stopped, and on its container port it answers like one, as far as a portal
needs: the landing page (`/lab`, `/tree`, `/`) and `/api/status` (`started`, `last_activity`, `connections`,
`kernels`) only with the token (`Authorization: token ...` or `?token=`), a login page without it. Requests with
the token other than `/api/status` count as activity, as in Jupyter Server; tests also report activity through the
control endpoint `POST /kubesim/v1/servers/{ns}/{pod}/activity` (body: optional `seconds_ago`).

Any other container of a Deployment's pod (owned by a ReplicaSet) or a LeaderWorkerSet's pod that declares a
container port is a stand-in for a model server (vLLM's OpenAI-compatible server, say), on its declared ports:
`GET /health` (200), `GET /v1/models` (one model: the value of a `--model` argument, else the image),
`POST /v1/completions` (the prompt echoed back as the completion). It runs no model and computes nothing: it is
there so that a client can reach a pod of a Deployment or LeaderWorkerSet through the service proxy and see an
answer in the shape a model server gives.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from datetime import datetime
from typing import Any

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


SERVING_OWNERS = frozenset({"ReplicaSet", "LeaderWorkerSet"})  # a Deployment's pods, a LeaderWorkerSet's groups


def is_model_server(pod: dict, container: dict) -> bool:
    """A stand-in model server: a container declaring a port in a Deployment's or LeaderWorkerSet's pod, when it is
    no Jupyter server."""
    served = any(ref.get("kind") in SERVING_OWNERS for ref in pod["metadata"].get("ownerReferences") or [])
    return served and bool(container.get("ports")) and not is_server(container)


def _model_name(container: dict) -> str:
    words = [str(word) for word in (container.get("command") or []) + (container.get("args") or [])]
    for index, word in enumerate(words):
        if word == "--model" and index + 1 < len(words):
            return words[index + 1]
        if word.startswith("--model="):
            return word.partition("=")[2]
    return str(container.get("image", ""))


def model_server_answer(method: str, container: dict, path: str, body: bytes, created: int) -> tuple[int, Any]:
    """(status, JSON body) of the stand-in model server for one request; `created` is the cluster's Unix time."""
    path = "/" + path.strip("/")
    model = _model_name(container)
    if path == "/health" and method in ("GET", "HEAD"):
        return 200, {}
    if path == "/v1/models" and method in ("GET", "HEAD"):
        return 200, {
            "object": "list",
            "data": [{"id": model, "object": "model", "created": created, "owned_by": "kubesim"}],
        }
    if path == "/v1/completions" and method == "POST":
        try:
            request = json.loads(body or b"{}")
        except (ValueError, UnicodeDecodeError):
            return 400, {"object": "error", "message": "the body is not JSON", "type": "BadRequestError", "code": 400}
        prompt = request.get("prompt", "") if isinstance(request, dict) else None
        if not isinstance(prompt, str):
            return 400, {
                "object": "error",
                "message": "prompt must be a string",
                "type": "BadRequestError",
                "code": 400,
            }
        words = len(prompt.split())
        return 200, {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": created,
            "model": request.get("model") or model,
            "choices": [{"index": 0, "text": prompt, "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": words, "completion_tokens": words, "total_tokens": 2 * words},
        }
    if path in ("/health", "/v1/models", "/v1/completions"):
        return 405, {"detail": "Method Not Allowed"}
    return 404, {"detail": "Not Found"}


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
