"""Request routing: method + path + query + body -> Response. Control endpoints, discovery, the visibility API, and
the Kubernetes resource paths, each Kubernetes request resolved to a verb and handed to its handler."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from kubesim import discovery
from kubesim.apiserver.access import Access
from kubesim.apiserver.admission import Admission
from kubesim.apiserver.common import (
    Query,
    Response,
    Target,
    method_not_allowed,
    not_found_path,
    q,
    truthy,
)
from kubesim.apiserver.control import CONTROL_PREFIX, Control
from kubesim.apiserver.logs import PodLogs
from kubesim.apiserver.verbs import Verbs
from kubesim.apiserver.visibility import Visibility
from kubesim.apiserver.watch import Watches
from kubesim.errors import APIError, internal
from kubesim.rbac import Attributes, User
from kubesim.resources import AUTHORIZATION_GROUP, VISIBILITY_GROUP, lookup
from kubesim.sim import Simulator

# HTTP method -> (verb without a name in the path, verb with one)
_VERBS: dict[str, tuple[str | None, str | None]] = {
    "POST": ("create", None),
    "PUT": (None, "update"),
    "PATCH": (None, "patch"),
    "DELETE": ("deletecollection", "delete"),
}


class Api:
    """HTTP-agnostic request handling: method + path + query + body -> Response."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.store = sim.store
        self.control = Control(sim)
        self.visibility = Visibility(sim)
        self.logs = PodLogs(sim)
        self.watches = Watches(sim)
        self.verbs = Verbs(sim, Admission(sim))
        self.access = Access(sim)

    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> Response:
        url = urlsplit(raw_path)
        path = url.path.rstrip("/") or "/"
        query = parse_qs(url.query, keep_blank_values=True)
        try:
            if path.startswith(CONTROL_PREFIX.rstrip("/")):
                return self.control.handle(method, path[len(CONTROL_PREFIX) :], body, headers.get("host", ""))
            return self._kube(method, path, query, headers, body)
        except APIError as exc:
            return Response(exc.code, exc.status())

    def _kube(self, method: str, path: str, query: Query, headers: dict[str, str], body: bytes) -> Response:
        user = self.sim.rbac.authenticate(headers)
        static = discovery.static(path)
        if static is not None:
            if method != "GET":
                raise method_not_allowed(method)
            self._authorize(user, Attributes("get", path=path))
            return Response(200, static[1], content_type=static[0])
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["apis", AUTHORIZATION_GROUP] and parts[3:] == ["selfsubjectaccessreviews"]:
            if method != "POST":
                raise method_not_allowed(method)
            return self.access.review(user, body)
        if len(parts) >= 3 and parts[0] == "apis" and parts[1] == VISIBILITY_GROUP:
            self._authorize(user, _visibility_attributes(parts[3:]))
            if self.sim.faults.inject("get", "pendingworkloads"):
                raise internal("kubesim: injected fault on get pendingworkloads")
            return self.visibility.get(method, parts[3:], query)
        target, watch_path = self._parse(parts)
        verb = self._verb(method, target, query, watch_path)
        resource = f"{target.res.plural}/{target.sub}" if target.sub else target.res.plural
        self._authorize(user, Attributes(verb, target.res.group, resource, target.namespace or "", target.name or ""))
        ctype = headers.get("content-type", "application/json").split(";")[0].strip()
        if body and method in ("POST", "PUT") and ctype not in ("application/json", "*/*", ""):
            raise APIError(
                415,
                f"the body of the request was in an unknown format - accepted media types include: application/json, "
                f'got "{ctype}"',
                "UnsupportedMediaType",
            )
        if self.sim.faults.inject(verb, target.res.plural):
            raise internal(f"kubesim: injected fault on {verb} {target.res.plural}")
        if verb == "watch":
            return self.watches.watch(target, query, headers)
        if verb == "get" and target.sub == "log":
            return self.logs.get(target, query)
        if target.sub == "token":
            return self.access.token_request(target, body)
        handler = {
            "get": self.verbs.get,
            "list": self.verbs.list,
            "create": self.verbs.create,
            "update": self.verbs.update,
            "patch": self.verbs.patch,
            "delete": self.verbs.delete,
            "deletecollection": self.verbs.delete_collection,
        }[verb]
        return handler(target, query, headers, body)

    def _authorize(self, user: User | None, attrs: Attributes) -> None:
        with self.store.lock:
            self.sim.rbac.authorize(self.store, user, attrs)

    def _parse(self, parts: list[str]) -> tuple[Target, bool]:
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise not_found_path()
        watch_path = bool(rest) and rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        if not rest:
            raise not_found_path()
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            candidate = lookup(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        res = lookup(group, version, rest[0])
        if res is None or len(rest) > 3 or (res.namespaced and namespace is None and len(rest) > 1):
            raise not_found_path()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in res.subresources and not (res.plural == "namespaces" and sub == "finalize"):
            raise not_found_path()
        return Target(res, namespace, name, sub), watch_path

    def _verb(self, method: str, t: Target, query: Query, watch_path: bool) -> str:
        if (t.sub == "log" and method != "GET") or (t.sub == "token" and method != "POST"):
            raise method_not_allowed(method)
        if t.sub == "token":
            return "create"
        if method == "GET":
            if watch_path or truthy(q(query, "watch")):
                return "watch"
            return "get" if t.name else "list"
        if method not in _VERBS:
            raise method_not_allowed(method)
        verb = _VERBS[method][1 if t.name else 0]
        if verb is None:
            raise method_not_allowed(method)
        return verb


def _visibility_attributes(rest: list[str]) -> Attributes:
    """rest: the path after /apis/visibility.kueue.x-k8s.io/<version>/."""
    if len(rest) == 5 and rest[0] == "namespaces":
        return Attributes("get", VISIBILITY_GROUP, f"{rest[2]}/{rest[4]}", rest[1], rest[3])
    if len(rest) == 3:
        return Attributes("get", VISIBILITY_GROUP, f"{rest[0]}/{rest[2]}", "", rest[1])
    return Attributes("get", VISIBILITY_GROUP, "/".join(rest[:1]), "", "")
