"""The Kubernetes API over HTTP (plus kubesim's control endpoints) in front of a Simulator."""

from __future__ import annotations

import base64
import copy
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubesim import builtin, corevalidation, discovery, tables, validation
from kubesim.clock import rfc3339
from kubesim.errors import APIError, already_exists, bad_request, conflict, internal, invalid, not_found
from kubesim.kubelet import pod_log
from kubesim.patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from kubesim.resources import RESOURCES, VISIBILITY_GROUP, Resource, lookup
from kubesim.selectors import SelectorError, parse_field_selector, parse_label_selector
from kubesim.sim import Simulator
from kubesim.store import AlreadyExists, Conflict, NotFound, WatchEvent
from kubesim.validation import Cause

CONTROL_PREFIX = "/kubesim/v1/"
DEFAULT_WATCH_TIMEOUT = 1800.0
JOB_ORPHAN_WARNING = (
    "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them "
    "or set propagationPolicy=Orphan to suppress this warning"
)


@dataclass
class Response:
    """A plain response, or a watch stream when `stream` is set."""

    code: int = 200
    body: Any = None
    content_type: str = "application/json"
    warnings: list[str] = field(default_factory=list)
    stream: Iterator[dict] | Iterator[str] | None = None  # watch events (JSON lines) or text (followed logs)


@dataclass
class Target:
    """A parsed resource path."""

    res: Resource
    namespace: str | None
    name: str | None
    sub: str | None


def _q(query: dict[str, list[str]], key: str, default: str | None = None) -> str | None:
    vals = query.get(key)
    return vals[0] if vals else default


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes")


class Api:
    """HTTP-agnostic request handling: method + path + query + body -> Response."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.store = sim.store

    # ---- entry -------------------------------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> Response:
        url = urlsplit(raw_path)
        path = url.path.rstrip("/") or "/"
        query = parse_qs(url.query, keep_blank_values=True)
        try:
            if path.startswith(CONTROL_PREFIX.rstrip("/")):
                return self._control(method, path[len(CONTROL_PREFIX) :], body)
            return self._kube(method, path, query, headers, body)
        except APIError as exc:
            return Response(exc.code, exc.status())

    def _kube(self, method: str, path: str, query: dict, headers: dict[str, str], body: bytes) -> Response:
        static = discovery.static(path)
        if static is not None:
            if method != "GET":
                raise APIError(405, f"the server does not allow this method on the requested resource ({method})")
            return Response(200, static[1], content_type=static[0])
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 3 and parts[0] == "apis" and parts[1] == VISIBILITY_GROUP:
            if self.sim.faults.inject("get", "pendingworkloads"):
                raise internal("kubesim: injected fault on get pendingworkloads")
            return self._visibility(method, parts[3:], query)
        target, watch_path = self._parse(parts)
        verb = self._verb(method, target, query, watch_path)
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
            return self._watch(target, query, headers)
        handler = {
            "get": self._get,
            "list": self._list,
            "create": self._create,
            "update": self._update,
            "patch": self._patch,
            "delete": self._delete,
            "deletecollection": self._delete_collection,
        }[verb]
        return handler(target, query, headers, body)

    def _parse(self, parts: list[str]) -> tuple[Target, bool]:
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise APIError(404, "the server could not find the requested resource", "NotFound")
        watch_path = bool(rest) and rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        if not rest:
            raise APIError(404, "the server could not find the requested resource", "NotFound")
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            candidate = lookup(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        res = lookup(group, version, rest[0])
        if res is None or len(rest) > 3 or (res.namespaced and namespace is None and len(rest) > 1):
            raise APIError(404, "the server could not find the requested resource", "NotFound")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in res.subresources and not (res.plural == "namespaces" and sub == "finalize"):
            raise APIError(404, "the server could not find the requested resource", "NotFound")
        return Target(res, namespace, name, sub), watch_path

    def _verb(self, method: str, t: Target, query: dict, watch_path: bool) -> str:
        if t.sub == "log" and method != "GET":
            raise APIError(405, f"the server does not allow this method on the requested resource ({method})")
        if method == "GET":
            if watch_path or _truthy(_q(query, "watch")):
                return "watch"
            return "get" if t.name else "list"
        table = {
            "POST": ("create", None),
            "PUT": (None, "update"),
            "PATCH": (None, "patch"),
            "DELETE": ("deletecollection", "delete"),
        }
        if method not in table:
            raise APIError(405, f"the server does not allow this method on the requested resource ({method})")
        verb = table[method][1 if t.name else 0]
        if verb is None:
            raise APIError(405, f"the server does not allow this method on the requested resource ({method})")
        return verb

    # ---- helpers -----------------------------------------------------------------------------------------
    def _json(self, body: bytes) -> Any:
        try:
            return json.loads(body or b"null")
        except ValueError as exc:
            raise bad_request(f"the request body is not valid JSON: {exc}") from exc

    def _existing(self, t: Target, name: str | None = None) -> dict:
        obj = self.store.get(t.res.plural, t.namespace, name or t.name or "")
        if obj is None:
            raise not_found(t.res, name or t.name or "")
        return obj

    def _require_namespace(self, t: Target, creating: bool) -> None:
        if not t.res.namespaced:
            return
        ns = self.store.get("namespaces", None, t.namespace or "")
        if ns is None:
            raise not_found(RESOURCES["namespaces"], t.namespace or "")
        if creating and ns["metadata"].get("deletionTimestamp"):
            raise APIError(
                403,
                f"{t.res.plural} is forbidden: unable to create new content in namespace {t.namespace} "
                "because it is being terminated",
                "Forbidden",
            )

    def _check_identity(self, t: Target, obj: Any) -> dict:
        if not isinstance(obj, dict):
            raise bad_request("the request body must be a JSON object")
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version and api_version != t.res.api_version:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({t.res.api_version})"
            )
        if kind and kind != t.res.kind:
            raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({t.res.kind})")
        md = obj.setdefault("metadata", {})
        if not isinstance(md, dict):
            raise bad_request("metadata must be an object")
        if t.res.namespaced:
            if md.get("namespace") and md["namespace"] != t.namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            md["namespace"] = t.namespace
        if t.name and md.get("name") and md["name"] != t.name:
            raise bad_request(f"the name of the object ({md['name']}) does not match the name on the URL ({t.name})")
        if t.name:
            md["name"] = t.name
        obj["apiVersion"], obj["kind"] = t.res.api_version, t.res.kind
        return obj

    def _admit(self, t: Target, obj: dict, old: dict | None, query: dict, status_only: bool) -> list[str]:
        """Defaulting, webhook mutation, schema+CEL+built-in validation, webhook validation. Mutates obj."""
        plural = t.res.plural
        problem = corevalidation.decode_error(plural, obj)
        if problem:  # kube fails to decode the body into its Go type: 400 before admission
            kind = t.res.kind
            raise bad_request(f'{kind} in version "{t.res.version}" cannot be handled as a {kind}: {problem}')
        unknown = validation.default_and_prune(plural, obj)
        mode = _q(query, "fieldValidation", "Warn")
        if mode not in ("Strict", "Warn", "Ignore"):
            raise bad_request(f'fieldValidation must be one of "Ignore", "Warn", or "Strict", got "{mode}"')
        if unknown and mode == "Strict":
            fields = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise bad_request(f"strict decoding error: {fields}")
        warnings = [f'unknown field "{u}"' for u in unknown] if mode == "Warn" else []
        operation = "UPDATE" if old is not None else "CREATE"
        hook_resource = f"{plural}/status" if status_only else plural
        if not status_only:
            builtin.apply_defaults(plural, obj, old)
        if plural == "jobs" and old is None:
            obj["metadata"]["uid"] = str(uuid.uuid4())
            builtin.label_job(obj)
        for hook in self.sim.webhooks:
            obj = _replace(obj, hook.mutate(hook_resource, operation, obj, old, self.store))
        causes = validation.validate(plural, obj, old)
        if not any(c.reason == "FieldValueTypeInvalid" for c in causes):  # kube fails such bodies at decoding
            causes += builtin.validate(plural, obj, old)
        name = obj["metadata"].get("name") or obj["metadata"].get("generateName", "")
        if causes:
            raise invalid(t.res, name, causes)
        for hook in self.sim.webhooks:
            for fld, message in hook.validate(hook_resource, operation, obj, old, self.store) or []:
                causes.append(Cause(fld, "FieldValueInvalid", message))
        if causes:
            raise invalid(t.res, name, causes)
        return warnings

    def _settled(self, code: int, obj: dict, warnings: list[str]) -> Response:
        self.sim.after_write()
        return Response(code, obj, warnings=warnings)

    # ---- verbs -------------------------------------------------------------------------------------------
    def _get(self, t: Target, query: dict, headers: dict, body: bytes) -> Response:
        if t.sub == "log":
            return self._log(t, query)
        obj = self._existing(t)
        if t.sub is None and tables.wants_table(headers.get("accept", "")):
            meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
            return Response(200, tables.table(t.res, [obj], self.sim.clock.now(), meta, _q(query, "includeObject", "")))
        return Response(200, obj)

    def _log(self, t: Target, query: dict) -> Response:
        pod = self._existing(t)
        container = _q(query, "container")
        names = [c["name"] for c in pod["spec"].get("containers") or []]
        if container and container not in names:
            raise bad_request(f"container {container} is not valid for pod {t.name}")
        if not container and len(names) > 1:
            raise bad_request(
                f"a container name must be specified for pod {t.name}, choose one of: [{' '.join(names)}]"
            )
        if not (pod.get("status") or {}).get("startTime"):
            raise bad_request(
                f'container "{container or names[0]}" in pod "{t.name}" is waiting to start: ContainerCreating'
            )
        tail = _q(query, "tailLines")
        timestamps = _truthy(_q(query, "timestamps"))
        now = self.sim.clock.now()
        text = pod_log(pod, now, self.sim.default_run_seconds, container, int(tail) if tail else None, timestamps)
        if _truthy(_q(query, "follow")):
            sent = pod_log(pod, now, self.sim.default_run_seconds, container, None, timestamps).count("\n")
            follow = self._follow(t, container, timestamps, sent)
            return Response(200, content_type="text/plain", stream=itertools.chain([text], follow))
        return Response(200, text, content_type="text/plain")

    def _follow(self, t: Target, container: str | None, timestamps: bool, sent: int) -> Iterator[str]:
        """follow=true: new log lines as emulated time passes, until the container ends or the pod goes."""
        store, stop_at = self.store, time.monotonic() + DEFAULT_WATCH_TIMEOUT
        epoch = self.sim.faults.watch_epoch
        while time.monotonic() < stop_at and self.sim.faults.watch_epoch == epoch:
            with store.lock:
                store.changed.wait(timeout=0.25)
                pod = store.get("pods", t.namespace, t.name or "", copy=False)
                now = self.sim.clock.now()
            if pod is None:
                return
            lines = pod_log(pod, now, self.sim.default_run_seconds, container, None, timestamps).splitlines(True)
            if len(lines) > sent:
                yield "".join(lines[sent:])
                sent = len(lines)
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                return

    def _matchers(self, query: dict) -> tuple[Callable[[dict], bool], Callable[[dict], bool]]:
        try:
            return parse_label_selector(_q(query, "labelSelector")), parse_field_selector(_q(query, "fieldSelector"))
        except SelectorError as exc:
            raise bad_request(str(exc)) from exc

    def _list(self, t: Target, query: dict, headers: dict, body: bytes) -> Response:
        labels, fields = self._matchers(query)
        with self.store.lock:
            items = [o for o in self.store.list(t.res.plural, t.namespace, copy=False) if labels(o) and fields(o)]
            rv = self.store.resource_version
        token = _q(query, "continue")
        if token:
            try:
                start = json.loads(base64.urlsafe_b64decode(token.encode()))
                last = (start["ns"], start["name"])
            except (ValueError, KeyError, TypeError) as exc:
                raise bad_request("continue key is not valid") from exc
            items = [o for o in items if (o["metadata"].get("namespace") or "", o["metadata"]["name"]) > last]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        limit = _q(query, "limit")
        if limit and int(limit) > 0 and len(items) > int(limit):
            rest = len(items) - int(limit)
            items = items[: int(limit)]
            lmd = items[-1]["metadata"]
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"ns": lmd.get("namespace") or "", "name": lmd["name"], "rv": rv}).encode()
            ).decode()
            meta["remainingItemCount"] = rest
        if tables.wants_table(headers.get("accept", "")):
            return Response(200, tables.table(t.res, items, self.sim.clock.now(), meta, _q(query, "includeObject", "")))
        return Response(
            200, {"kind": f"{t.res.kind}List", "apiVersion": t.res.api_version, "metadata": meta, "items": items}
        )

    def _create(self, t: Target, query: dict, headers: dict, body: bytes) -> Response:
        obj = self._check_identity(t, self._json(body))
        for dropped in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation"):
            obj["metadata"].pop(dropped, None)
        with self.store.lock:
            self._require_namespace(t, creating=True)
            warnings = self._admit(t, obj, None, query, status_only=False)
            if not obj["metadata"].get("name"):
                obj["metadata"]["name"] = self.store.free_name(
                    t.res.plural, t.namespace, obj["metadata"]["generateName"]
                )
            if _dry_run(query):
                if self.store.get(t.res.plural, t.namespace, obj["metadata"]["name"]) is not None:
                    raise already_exists(t.res, obj["metadata"]["name"])
                md = obj["metadata"]
                md.setdefault("uid", str(uuid.uuid4()))
                md.update(generation=1, creationTimestamp=rfc3339(self.sim.clock.now()))
                return Response(201, obj, warnings=warnings)
            try:
                created = self.store.create(t.res.plural, obj)
            except AlreadyExists as exc:
                raise already_exists(t.res, obj["metadata"]["name"]) from exc
            return self._settled(201, created, warnings)

    def _write(self, t: Target, old: dict, new: dict, query: dict) -> Response:
        """Shared tail of update and patch: admission then store write; status kept or replaced per path."""
        status_only = t.sub == "status"
        if t.sub not in (None, "status", "finalize"):
            raise APIError(405, f"the server does not allow this method on the requested resource ({t.sub})")
        if status_only:
            final = copy.deepcopy(old)
            final["status"] = new.get("status")
            if final["status"] is None:
                final.pop("status")
            final["metadata"]["resourceVersion"] = new["metadata"].get("resourceVersion")
        else:
            final = new
            if "status" in t.res.subresources:
                final.pop("status", None)
                if "status" in old:
                    final["status"] = copy.deepcopy(old["status"])
        warnings = self._admit(t, final, old, query, status_only)
        if _dry_run(query):
            rv = final["metadata"].get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise conflict(
                    t.res,
                    t.name or "",
                    "the object has been modified; please apply your changes to the latest version and try again",
                )
            final["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            return Response(200, final, warnings=warnings)
        try:
            if status_only:
                saved = self.store.update_status(t.res.plural, final)
            else:
                saved = self.store.update(t.res.plural, final)
        except Conflict as exc:
            raise conflict(t.res, t.name or "", str(exc)) from exc
        except NotFound as exc:
            raise not_found(t.res, t.name or "") from exc
        return self._settled(200, saved, warnings)

    def _update(self, t: Target, query: dict, headers: dict, body: bytes) -> Response:
        obj = self._check_identity(t, self._json(body))
        with self.store.lock:
            self._require_namespace(t, creating=False)
            old = self._existing(t)
            return self._write(t, old, obj, query)

    def _patch(self, t: Target, query: dict, headers: dict, body: bytes) -> Response:
        ctype = headers.get("content-type", "").split(";")[0].strip()
        patch = self._json(body)
        accepted = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        if (ctype == "application/strategic-merge-patch+json" and t.res.crd) or ctype not in (
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
        ):
            if not t.res.crd:
                accepted += ", application/strategic-merge-patch+json"
            raise APIError(
                415,
                f"the body of the request was in an unknown format - accepted media types include: {accepted}",
                "UnsupportedMediaType",
            )
        with self.store.lock:
            old = self._existing(t)
            try:
                if ctype == "application/json-patch+json":
                    new = json_patch(old, patch)
                elif ctype == "application/merge-patch+json":
                    new = merge_patch(old, patch)
                else:
                    new = strategic_merge_patch(old, patch)
            except PatchError as exc:
                raise APIError(422, str(exc), "Invalid") from exc
            if not isinstance(patch, list) and not (
                isinstance(patch, dict) and "resourceVersion" in (patch.get("metadata") or {})
            ):
                new.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
            new = self._check_identity(t, new)
            return self._write(t, old, new, query)

    def _delete_options(self, query: dict, body: bytes) -> dict:
        opts = self._json(body) if body else None
        opts = opts if isinstance(opts, dict) else {}
        if _q(query, "propagationPolicy"):
            opts["propagationPolicy"] = _q(query, "propagationPolicy")
        if opts.get("orphanDependents") is not None and "propagationPolicy" not in opts:
            opts["propagationPolicy"] = "Orphan" if opts["orphanDependents"] else "Background"
        policy = opts.get("propagationPolicy")
        if policy is not None and policy not in ("Orphan", "Background", "Foreground"):
            message = f'Unsupported value: "{policy}": supported values: "Foreground", "Background", "Orphan", "nil"'
            cause = Cause("propagationPolicy", "FieldValueNotSupported", message)
            raise APIError(
                422,
                f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: {message}',
                "Invalid",
                {"kind": "DeleteOptions", "group": "meta.k8s.io", "causes": [cause.as_dict()]},
            )
        return opts

    def _delete(self, t: Target, query: dict, headers: dict, body: bytes) -> Response:
        if t.sub is not None:
            raise APIError(405, "the server does not allow this method on the requested resource")
        opts = self._delete_options(query, body)
        warnings = []
        policy = opts.get("propagationPolicy")
        if policy is None:
            # batch/v1 Jobs keep the legacy orphan default (kubectl sets Background explicitly).
            policy = "Orphan" if t.res.plural == "jobs" else "Background"
            if t.res.plural == "jobs":
                warnings.append(JOB_ORPHAN_WARNING)
        with self.store.lock:
            old = self._existing(t)
            pre = opts.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise conflict(
                    t.res,
                    t.name or "",
                    f"Precondition failed: UID in precondition: {pre['uid']}, "
                    f"UID in object meta: {old['metadata']['uid']}",
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise conflict(
                    t.res,
                    t.name or "",
                    "Precondition failed: ResourceVersion in precondition: "
                    f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                    f"{old['metadata']['resourceVersion']}",
                )
            if _dry_run(query):
                return Response(200, old, warnings=warnings)
            try:
                result = self.store.delete(t.res.plural, t.namespace, t.name or "", policy)
            except NotFound as exc:
                raise not_found(t.res, t.name or "") from exc
            return self._settled(200, result, warnings)

    def _delete_collection(self, t: Target, query: dict, headers: dict, body: bytes) -> Response:
        labels, fields = self._matchers(query)
        opts = self._delete_options(query, body)
        policy = opts.get("propagationPolicy") or ("Orphan" if t.res.plural == "jobs" else "Background")
        with self.store.lock:
            items = [o for o in self.store.list(t.res.plural, t.namespace) if labels(o) and fields(o)]
            deleted = []
            for o in items:
                md = o["metadata"]
                try:
                    deleted.append(self.store.delete(t.res.plural, md.get("namespace"), md["name"], policy))
                except NotFound:
                    continue
            self.sim.after_write()
            return Response(
                200,
                {
                    "kind": f"{t.res.kind}List",
                    "apiVersion": t.res.api_version,
                    "metadata": {"resourceVersion": str(self.store.resource_version)},
                    "items": deleted,
                },
            )

    # ---- watch -------------------------------------------------------------------------------------------
    def _watch(self, t: Target, query: dict, headers: dict) -> Response:
        labels, fields = self._matchers(query)
        if t.name:
            by_name = parse_field_selector(f"metadata.name={t.name}")
            fields = (lambda f: lambda o: f(o) and by_name(o))(fields)
        rv_param = _q(query, "resourceVersion", "") or ""
        timeout = float(_q(query, "timeoutSeconds", "") or DEFAULT_WATCH_TIMEOUT)
        bookmarks = _truthy(_q(query, "allowWatchBookmarks"))
        try:
            start = int(rv_param) if rv_param not in ("", "0") else None
        except ValueError as exc:
            raise bad_request(f'invalid resource version "{rv_param}"') from exc
        events = self._watch_events(t, labels, fields, start, timeout, bookmarks)
        if tables.wants_table(headers.get("accept", "")):
            events = self._as_tables(t, events, _q(query, "includeObject", ""))
        return Response(200, stream=events)

    def _as_tables(self, t: Target, events: Iterator[dict], include: str) -> Iterator[dict]:
        """kubectl get -w asks for Tables: each event carries a one-row Table (BOOKMARK and ERROR as they are)."""
        for ev in events:
            if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                meta = {"resourceVersion": ev["object"]["metadata"]["resourceVersion"]}
                ev = {
                    "type": ev["type"],
                    "object": tables.table(t.res, [ev["object"]], self.sim.clock.now(), meta, include),
                }
            yield ev

    def _watch_events(
        self,
        t: Target,
        labels: Callable[[dict], bool],
        fields: Callable[[dict], bool],
        start: int | None,
        timeout: float,
        bookmarks: bool,
    ) -> Iterator[dict]:
        store, res = self.store, t.res
        epoch = self.sim.faults.watch_epoch
        deadline = time.monotonic() + timeout

        def selected(obj: dict | None) -> bool:
            if obj is None:
                return False
            if t.namespace is not None and obj["metadata"].get("namespace") != t.namespace:
                return False
            return labels(obj) and fields(obj)

        def translate(ev: WatchEvent) -> dict | None:
            """Kubernetes' cacher semantics: an object entering the selector is ADDED, leaving it DELETED."""
            if ev.resource != res.plural:
                return None
            now_in, was_in = selected(ev.obj), selected(ev.prev)
            if ev.type == "MODIFIED":
                if now_in and not was_in:
                    return {"type": "ADDED", "object": ev.obj}
                if was_in and not now_in:
                    return {"type": "DELETED", "object": ev.obj}
                return {"type": "MODIFIED", "object": ev.obj} if now_in else None
            if ev.type == "DELETED":
                return {"type": "DELETED", "object": ev.obj} if was_in or now_in else None
            return {"type": ev.type, "object": ev.obj} if now_in else None

        with store.lock:
            if start is None:
                initial = [o for o in store.list(res.plural, t.namespace, copy=False) if labels(o) and fields(o)]
                start = store.resource_version
            elif start < store.compacted_rv:
                initial = None
            else:
                initial = []
        if initial is None:
            yield _gone(start, store.compacted_rv)
            return
        for obj in initial:
            yield {"type": "ADDED", "object": obj}
        next_bookmark = time.monotonic() + self.sim.bookmark_interval
        while True:
            now = time.monotonic()
            if now >= deadline or self.sim.faults.watch_epoch != epoch:
                return
            with store.lock:
                if start < store.compacted_rv:
                    events = None
                else:
                    events = store.events_since(start)
                    if not events:
                        store.changed.wait(timeout=max(0.0, min(deadline - now, next_bookmark - now, 0.25)))
                        events = store.events_since(start)
            if events is None:
                yield _gone(start, store.compacted_rv)
                return
            for ev in events:
                start = ev.rv
                out = translate(ev)
                if out is not None:
                    yield out
            if bookmarks and time.monotonic() >= next_bookmark:
                next_bookmark = time.monotonic() + self.sim.bookmark_interval
                yield {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": res.kind,
                        "apiVersion": res.api_version,
                        "metadata": {"resourceVersion": str(start)},
                    },
                }

    # ---- visibility --------------------------------------------------------------------------------------
    def _visibility(self, method: str, rest: list[str], query: dict) -> Response:
        if method != "GET":
            raise APIError(405, f"the server does not allow this method on the requested resource ({method})")
        kwargs: dict[str, Any]
        if len(rest) == 3 and rest[0] == "clusterqueues" and rest[2] == "pendingworkloads":
            kwargs = {"cluster_queue": rest[1]}
            if self.store.get("clusterqueues", None, rest[1]) is None:
                raise not_found(RESOURCES["clusterqueues"], rest[1])
        elif len(rest) == 5 and rest[0] == "namespaces" and rest[2] == "localqueues" and rest[4] == "pendingworkloads":
            kwargs = {"namespace": rest[1], "local_queue": rest[3]}
            if self.store.get("localqueues", rest[1], rest[3]) is None:
                raise not_found(RESOURCES["localqueues"], rest[3])
        else:
            raise APIError(404, "the server could not find the requested resource", "NotFound")
        if self.sim.kueue is None:
            raise APIError(503, "the visibility API needs kubesim.kueue", "ServiceUnavailable")
        try:
            limit = int(_q(query, "limit", "1000") or 1000)
            offset = int(_q(query, "offset", "0") or 0)
        except ValueError as exc:
            raise bad_request("limit and offset must be integers") from exc
        with self.store.lock:
            summary = self.sim.kueue.visibility(self.store, limit=limit, offset=offset, **kwargs)
        return Response(200, summary)

    # ---- control -----------------------------------------------------------------------------------------
    def _control(self, method: str, path: str, body: bytes) -> Response:
        data = self._json(body) if body else {}
        data = data if isinstance(data, dict) else {}
        sim = self.sim
        if path == "healthz" and method == "GET":
            return Response(200, self._health())
        if path == "stats" and method == "GET":
            return Response(200, {"controllers": sim.stats_report(), "objects": self._counts()})
        if path == "clock" and method == "GET":
            return Response(200, {"time": sim.clock.now().isoformat(), "mode": sim.clock.mode})
        if path == "clock/advance" and method == "POST":
            try:
                now = sim.advance(float(data.get("seconds", 0)))
            except (TypeError, ValueError) as exc:
                raise bad_request(str(exc)) from exc
            return Response(200, {"time": now.isoformat(), "resourceVersion": str(self.store.resource_version)})
        if path == "faults" and method == "POST":
            try:
                cfg = sim.faults.set(data)
            except (TypeError, ValueError) as exc:
                raise bad_request(str(exc)) from exc
            sim.settle()
            return Response(200, cfg.as_dict())
        if path == "faults" and method == "DELETE":
            sim.faults.clear()
            sim.settle()
            return Response(200, sim.faults.config.as_dict())
        if path == "settle" and method == "POST":
            sim.settle()
            return Response(200, self._health())
        if path == "reset" and method == "POST":
            sim.reset()
            return Response(200, self._health())
        if path == "config" and method == "POST":
            if "watch_history" in data:
                self.store.set_history_size(int(data["watch_history"]))
            if "bookmark_interval" in data:
                sim.bookmark_interval = float(data["bookmark_interval"])
            sim.settle()
            return Response(200, {"watch_history": self.store.history_size, "bookmark_interval": sim.bookmark_interval})
        raise APIError(404, f"unknown kubesim control endpoint {method} /kubesim/v1/{path}", "NotFound")

    def _counts(self) -> dict[str, int]:
        with self.store.lock:
            return {r: len(self.store.list(r, copy=False)) for r in RESOURCES}

    def _health(self) -> dict:
        with self.store.lock:
            return {
                "ok": True,
                "time": self.sim.clock.now().isoformat(),
                "clock": self.sim.clock.mode,
                "resourceVersion": str(self.store.resource_version),
                "kueue": self.sim.kueue is not None,
            }


def _dry_run(query: dict) -> bool:
    """dryRun=All: full admission, nothing stored."""
    values = query.get("dryRun") or []
    if any(v != "All" for v in values):
        raise bad_request(f"Invalid dryRun value {values}: the only supported value is All")
    return bool(values)


def _replace(obj: dict, mutated: dict | None) -> dict:
    return obj if mutated is None else mutated


def _gone(start: int, compacted: int) -> dict:
    return {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {start} ({compacted + 1})",
            "reason": "Expired",
            "code": 410,
        },
    }


class Handler(BaseHTTPRequestHandler):
    """Thin HTTP/1.1 adapter: JSON bodies with Content-Length, chunked newline-delimited JSON for watches."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # header and body go out in separate writes: avoid the 40 ms delayed-ACK stall
    server: KubeHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            resp = self.server.api.handle(self.command, self.path, headers, body)
        except Exception as exc:  # a bug must not kill the connection silently: answer a Status
            resp = Response(500, internal(f"kubesim internal error: {exc!r}").status())
            if self.server.verbose:
                raise
        if resp.stream is not None:
            self._stream(resp)
            return
        payload = resp.body.encode() if isinstance(resp.body, str) else json.dumps(resp.body).encode()
        self.send_response(resp.code)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-cache, private")
        for w in resp.warnings:
            self.send_header("Warning", f'299 - "{_escape(w)}"')
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, resp: Response) -> None:
        self.send_response(200)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        try:
            for event in resp.stream or ():
                data = event.encode() if isinstance(event, str) else json.dumps(event).encode() + b"\n"
                if not data:
                    continue
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


class KubeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], sim: Simulator, verbose: bool = False) -> None:
        super().__init__(addr, Handler)
        self.sim = sim
        self.api = Api(sim)
        self.verbose = verbose


def serve_in_thread(sim: Simulator, host: str = "127.0.0.1", port: int = 0) -> tuple[KubeHTTPServer, threading.Thread]:
    server = KubeHTTPServer((host, port), sim)
    thread = threading.Thread(target=server.serve_forever, name="kubesim-http", daemon=True)
    thread.start()
    return server, thread
