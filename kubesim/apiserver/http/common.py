"""What every part of the API server shares: the parsed request target, the response, query and body helpers."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from io import BufferedIOBase
from typing import Any

from kubesim.apiserver.auth.rbac import User
from kubesim.apiserver.errors import APIError, aggregate, bad_request, not_found
from kubesim.apiserver.registry.resources import Resource
from kubesim.apiserver.storage.selectors import SelectorError, parse_field_selector, parse_label_selector
from kubesim.apiserver.storage.store import ObjectStore
from kubesim.kernel.metadata import Cause

Query = dict[str, list[str]]
Matcher = Callable[[dict], bool]
DEFAULT_WATCH_TIMEOUT = 1800.0  # seconds a watch or a followed log stays open without timeoutSeconds
DRY_RUN_VALUES = ("All",)
FIELD_VALIDATION_VALUES = ("", "Ignore", "Strict", "Warn")  # "" is the default, Warn


@dataclass
class Upgrade:
    """A switch of protocols (101): the `Upgrade` header's value, further headers, and what then runs on the
    connection (its socket and the buffered reader the request came from) until it ends."""

    protocol: str
    headers: dict[str, str]
    run: Callable[[socket.socket, BufferedIOBase], None]


@dataclass
class Response:
    """A plain response, a watch stream when `stream` is set, or a protocol switch when `upgrade` is."""

    code: int = 200
    body: Any = None
    content_type: str = "application/json"
    warnings: list[str] = field(default_factory=list)
    stream: Iterator[dict] | Iterator[str] | None = None  # watch events (JSON lines) or text (followed logs)
    upgrade: Upgrade | None = None


@dataclass
class Target:
    """A parsed resource path."""

    res: Resource
    namespace: str | None
    name: str | None
    sub: str | None
    # a deprecated version the request is converted from/to (kubesim.apiserver.registry.conversion)
    served_version: str | None = None
    # who asks (after impersonation): admission policies read it as request.userInfo; None is the admin
    requester: User | None = None


def q(query: Query, key: str, default: str | None = None) -> str | None:
    """The first value of a query parameter."""
    vals = query.get(key)
    return vals[0] if vals else default


def truthy(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes")


def method_not_allowed(what: str | None) -> APIError:
    suffix = f" ({what})" if what else ""
    return APIError(405, f"the server does not allow this method on the requested resource{suffix}")


def not_found_path() -> APIError:
    return APIError(404, "the server could not find the requested resource", "NotFound")


def read_json(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from exc


def options_invalid(kind: str, causes: list[Cause]) -> APIError:
    """A request's options failing apimachinery's meta/v1 validation: 422 naming the options kind, every problem a
    cause (`DeleteOptions.meta.k8s.io "" is invalid: ...`)."""
    return APIError(
        422,
        f'{kind}.meta.k8s.io "" is invalid: {aggregate(causes)}',
        "Invalid",
        {"kind": kind, "group": "meta.k8s.io", "causes": [c.as_dict() for c in causes]},
    )


def _not_supported(field: str, shown: str, supported: tuple[str, ...]) -> Cause:
    allowed = ", ".join(json.dumps(v) for v in supported)
    return Cause(field, "FieldValueNotSupported", f"Unsupported value: {shown}: supported values: {allowed}")


def dry_run_problems(values: object) -> list[Cause]:
    """ValidateDryRun: every dryRun value must be All; the offending list is shown as Go prints a []string."""
    if isinstance(values, list) and all(v in DRY_RUN_VALUES for v in values):
        return []
    items = values if isinstance(values, list) else [values]
    shown = "[]string{" + ", ".join(json.dumps(str(v), ensure_ascii=False) for v in items) + "}"
    return [_not_supported("dryRun", shown, DRY_RUN_VALUES)]


def write_options(kind: str, query: Query, *, apply: bool = False) -> bool:
    """A create's, update's or patch's query options checked as kube-apiserver checks them before it reads the body
    (ValidateCreateOptions, ValidateUpdateOptions, ValidatePatchOptions); True for a dry run."""
    causes = []
    if kind == "PatchOptions" and not apply and "force" in query:
        causes.append(Cause("force", "FieldValueForbidden", "Forbidden: may not be specified for non-apply patch"))
    if kind == "PatchOptions" and apply and not q(query, "fieldManager"):
        causes.append(Cause("fieldManager", "FieldValueRequired", "Required value: is required for apply patch"))
    dry = query.get("dryRun") or []
    causes += dry_run_problems(dry)
    mode = q(query, "fieldValidation", "") or ""
    if mode not in FIELD_VALIDATION_VALUES:
        causes.append(_not_supported("fieldValidation", json.dumps(mode, ensure_ascii=False), FIELD_VALIDATION_VALUES))
    if causes:
        raise options_invalid(kind, causes)
    return bool(dry)


def existing(store: ObjectStore, t: Target, name: str | None = None) -> dict:
    """The stored object the request names (a copy); 404 when there is none."""
    obj = store.get(t.res.plural, t.namespace, name or t.name or "")
    if obj is None:
        raise not_found(t.res, name or t.name or "")
    return obj


def matchers(query: Query) -> tuple[Matcher, Matcher]:
    """(labelSelector, fieldSelector) of a list, watch or deletecollection as predicates."""
    try:
        return parse_label_selector(q(query, "labelSelector")), parse_field_selector(q(query, "fieldSelector"))
    except SelectorError as exc:
        raise bad_request(str(exc)) from exc
