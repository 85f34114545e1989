"""Request routing: method + path + query + body -> Response. Control endpoints, discovery, the visibility API, and
the Kubernetes resource paths, each Kubernetes request resolved to a verb and handed to its handler."""

from __future__ import annotations

import dataclasses
import json
from urllib.parse import parse_qs, urlsplit

import yaml

from kubesim.apiserver.auth.rbac import ADMIN_GROUP, ADMIN_USER, Attributes, User
from kubesim.apiserver.errors import APIError, bad_request, internal
from kubesim.apiserver.http import k8sproto, metrics
from kubesim.apiserver.http.access import Access
from kubesim.apiserver.http.admission import Admission
from kubesim.apiserver.http.backend import Backend
from kubesim.apiserver.http.common import (
    Query,
    Response,
    Target,
    method_not_allowed,
    not_found_path,
    q,
    truthy,
)
from kubesim.apiserver.http.control import CONTROL_PREFIX, Control
from kubesim.apiserver.http.logs import PodLogs
from kubesim.apiserver.http.proxy import ServiceProxy, proxy_path
from kubesim.apiserver.http.streams import connect
from kubesim.apiserver.http.verbs import Verbs
from kubesim.apiserver.http.visibility import Visibility
from kubesim.apiserver.http.watch import Watches
from kubesim.apiserver.registry import conversion, discovery, openapi
from kubesim.apiserver.registry.resources import (
    AUTHENTICATION_GROUP,
    AUTHORIZATION_GROUP,
    STREAMS,
    VISIBILITY_GROUP,
    Resource,
    lookup,
)
from kubesim.apiserver.validation import schema

# HTTP method -> (verb without a name in the path, verb with one)
_VERBS: dict[str, tuple[str | None, str | None]] = {
    "POST": ("create", None),
    "PUT": (None, "update"),
    "PATCH": (None, "patch"),
    "DELETE": ("deletecollection", "delete"),
}


class Api:
    """HTTP-agnostic request handling: method + path + query + body -> Response."""

    def __init__(self, sim: Backend) -> None:
        self.sim = sim
        self.store = sim.store
        self.control = Control(sim)
        self.visibility = Visibility(sim)
        self.logs = PodLogs(sim)
        self.watches = Watches(sim)
        self.verbs = Verbs(sim, Admission(sim))
        self.access = Access(sim)
        self.metrics = metrics.Metrics(sim)
        self.service_proxy = ServiceProxy(sim.store, sim.server_activity)

    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> Response:
        url = urlsplit(raw_path)
        path = url.path.rstrip("/") or "/"
        query = parse_qs(url.query, keep_blank_values=True)
        try:
            if path.startswith(CONTROL_PREFIX.rstrip("/")):
                return self.control.handle(method, path[len(CONTROL_PREFIX) :], body, headers.get("host", ""))
            return _as_protobuf(headers, self._kube(method, path, query, headers, body))
        except APIError as exc:
            return Response(exc.code, exc.status())

    def _kube(self, method: str, path: str, query: Query, headers: dict[str, str], body: bytes) -> Response:
        user, requester = self._impersonated(self.sim.rbac.authenticate(headers), headers)
        body = _protobuf_as_json(headers, body)
        static = discovery.static(path)
        if static is not None:
            if method != "GET":
                raise method_not_allowed(method)
            self._authorize(user, Attributes("get", path=path))
            return Response(200, static[1], content_type=static[0])
        if path == "/metrics":
            if method != "GET":
                raise method_not_allowed(method)
            self._authorize(user, Attributes("get", path=path))
            return Response(200, self.metrics.render(), content_type=metrics.CONTENT_TYPE)
        if path.startswith("/openapi/"):
            doc = openapi.document(path)
            if doc is None:
                raise not_found_path()
            if method != "GET":
                raise method_not_allowed(method)
            self._authorize(user, Attributes("get", path=path))
            return Response(200, doc)
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["apis", AUTHORIZATION_GROUP] and parts[3:] == ["selfsubjectaccessreviews"]:
            if method != "POST":
                raise method_not_allowed(method)
            return self.access.review(user, body)
        if parts[:2] == ["apis", AUTHORIZATION_GROUP] and parts[3:] == ["selfsubjectrulesreviews"]:
            if method != "POST":
                raise method_not_allowed(method)
            return self.access.rules_review(user, body)
        if parts[:2] == ["apis", AUTHENTICATION_GROUP] and parts[3:] == ["selfsubjectreviews"]:
            if method != "POST":
                raise method_not_allowed(method)
            return self.access.whoami(user)
        if len(parts) >= 3 and parts[0] == "apis" and parts[1] == VISIBILITY_GROUP:
            self._authorize(user, _visibility_attributes(parts[3:]))
            if self.sim.faults.inject("get", "pendingworkloads"):
                raise internal("kubesim: injected fault on get pendingworkloads")
            return self.visibility.get(method, parts[2], parts[3:], query)
        if (proxied := proxy_path(parts)) is not None:
            namespace, service, rest = proxied
            verb = {"GET": "get", "HEAD": "get"}.get(method, "create")
            self._authorize(user, Attributes(verb, "", "services/proxy", namespace, service.partition(":")[0]))
            return self.service_proxy.handle(method, namespace, service, rest, query, headers, body)
        target, watch_path = self._parse(parts)
        target = dataclasses.replace(target, requester=requester)
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
        if target.served_version:
            return self._converted(verb, target, query, headers, body)
        return self._dispatch(verb, target, query, headers, body)

    def _converted(self, verb: str, target: Target, query: Query, headers: dict[str, str], body: bytes) -> Response:
        """A request to a deprecated version: its body up to the stored version, the answer back down."""
        kind = target.res.kind
        ctype = headers.get("content-type", "").split(";")[0].strip()
        if body and ctype != "application/json-patch+json":
            try:
                decoded = yaml.safe_load(body) if ctype == "application/apply-patch+yaml" else json.loads(body)
            except (ValueError, yaml.YAMLError) as exc:
                raise bad_request(f"the request body could not be decoded: {exc}") from exc
            unknown = self._old_version_unknown(verb, target, query, ctype, decoded)
            body = json.dumps(conversion.to_storage(kind, decoded)).encode()
        else:
            unknown = []
        try:
            resp = self._dispatch(verb, target, query, headers, body)
        except APIError as exc:  # a refusal names the fields of the request's version
            status = conversion.response_from_storage(kind, exc.status())
            raise APIError(exc.code, status["message"], exc.reason, status.get("details")) from exc
        resp.body = conversion.response_from_storage(kind, resp.body)
        if resp.stream is not None:
            resp.stream = (conversion.response_from_storage(kind, event) for event in resp.stream)
        resp.warnings = [*resp.warnings, *(f'unknown field "{u}"' for u in unknown), conversion.warning(target.res)]
        return resp

    @staticmethod
    def _old_version_unknown(verb: str, target: Target, query: Query, ctype: str, decoded: object) -> list[str]:
        """Fields of a whole object sent to a deprecated version that its schema does not know (a v1beta2-only field
        such as spec.cohortName): dropped before conversion, 400 under fieldValidation=Strict, warned under Warn."""
        if verb not in ("create", "update") or ctype not in ("", "application/json") or not isinstance(decoded, dict):
            return []
        unknown = schema.prune_unknown(target.res.plural, decoded, target.served_version)
        mode = q(query, "fieldValidation") or "Warn"
        if unknown and mode == "Strict":
            raise bad_request("strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown))
        return unknown if mode == "Warn" else []

    def _dispatch(self, verb: str, target: Target, query: Query, headers: dict[str, str], body: bytes) -> Response:
        if verb == "watch":
            return self.watches.watch(target, query, headers)
        if verb == "get" and target.sub == "log":
            return self.logs.get(target, query)
        if target.sub in STREAMS:
            return connect(self.store, self.service_proxy, target, query, headers)
        if target.sub == "token":
            return self.access.token_request(target, body)
        if target.sub == "scale":
            return self.verbs.scale(verb, target, query, headers, body)
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

    def _impersonated(self, user: User | None, headers: dict[str, str]) -> tuple[User | None, User]:
        """(the user to authorize, who asks) after `Impersonate-User` / `Impersonate-Group` (kubectl --as, --as-group):
        the caller must be allowed to impersonate that user (the admin may); without RBAC anyone may, and the
        identity only reaches admission (request.userInfo)."""
        as_user = headers.get("impersonate-user", "")
        if not as_user:
            return user, user or User(ADMIN_USER, (ADMIN_GROUP, "system:authenticated"))
        self._authorize(user, Attributes("impersonate", "", "users", "", as_user))
        groups = [g for g in [headers.get("impersonate-group", "")] if g]
        for group in groups:
            self._authorize(user, Attributes("impersonate", "", "groups", "", group))
        impersonated = User(as_user, (*groups, "system:authenticated"))
        return (None if user is None else impersonated), impersonated

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
            candidate = _served(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        res = _served(group, version, rest[0])
        if res is None or len(rest) > 3 or (res.namespaced and namespace is None and len(rest) > 1):
            raise not_found_path()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in res.subresources and not (res.plural == "namespaces" and sub == "finalize"):
            raise not_found_path()
        return Target(res, namespace, name, sub, None if version == res.version else version), watch_path

    def _verb(self, method: str, t: Target, query: Query, watch_path: bool) -> str:
        if (t.sub == "log" and method != "GET") or (t.sub == "token" and method != "POST"):
            raise method_not_allowed(method)
        if t.sub == "token" or t.sub in STREAMS:  # a connect request is authorized as create, its upgrade GET too
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


def _served(group: str, version: str, plural: str) -> Resource | None:
    """The resource a path names: a served version, or a deprecated one converted to the stored version."""
    return lookup(group, version, plural) or conversion.old_version_resource(group, version, plural)


def _as_protobuf(headers: dict[str, str], resp: Response) -> Response:
    """A successful single-object answer in protobuf for a client that prefers it, when kubesim has the kind's
    message; lists, tables, Status and everything else stay JSON (the client accepts JSON too)."""
    if resp.stream is not None or resp.code >= 300 or not isinstance(resp.body, dict):
        return resp
    if not k8sproto.wants_protobuf(headers.get("accept", "")):
        return resp
    encoded = k8sproto.encode(resp.body)
    if encoded is not None:
        resp.body, resp.content_type = encoded, k8sproto.MEDIA_TYPE
    return resp


def _protobuf_as_json(headers: dict[str, str], body: bytes) -> bytes:
    """A protobuf body (kubectl's generator commands) re-encoded as JSON; headers then say JSON."""
    if not body or headers.get("content-type", "").split(";")[0].strip() != k8sproto.MEDIA_TYPE:
        return body
    try:
        obj = k8sproto.decode(body)
    except k8sproto.ProtobufError as exc:
        raise APIError(415, f"the body of the request could not be decoded: {exc}", "UnsupportedMediaType") from exc
    headers["content-type"] = "application/json"
    return json.dumps(obj).encode()


def _visibility_attributes(rest: list[str]) -> Attributes:
    """rest: the path after /apis/visibility.kueue.x-k8s.io/<version>/."""
    if len(rest) == 5 and rest[0] == "namespaces":
        return Attributes("get", VISIBILITY_GROUP, f"{rest[2]}/{rest[4]}", rest[1], rest[3])
    if len(rest) == 3:
        return Attributes("get", VISIBILITY_GROUP, f"{rest[0]}/{rest[2]}", "", rest[1])
    return Attributes("get", VISIBILITY_GROUP, "/".join(rest[:1]), "", "")
