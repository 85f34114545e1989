"""What every part of the API server shares: the parsed request target, the response, query and body helpers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kubesim.apiserver.errors import APIError, bad_request, not_found
from kubesim.apiserver.registry.resources import Resource
from kubesim.apiserver.storage.selectors import SelectorError, parse_field_selector, parse_label_selector
from kubesim.apiserver.storage.store import ObjectStore

Query = dict[str, list[str]]
Matcher = Callable[[dict], bool]
DEFAULT_WATCH_TIMEOUT = 1800.0  # seconds a watch or a followed log stays open without timeoutSeconds


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
    # a deprecated version the request is converted from/to (kubesim.apiserver.registry.conversion)
    served_version: str | None = None


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


def dry_run(query: Query) -> bool:
    """dryRun=All: full admission, nothing stored."""
    values = query.get("dryRun") or []
    if any(v != "All" for v in values):
        raise bad_request(f"Invalid dryRun value {values}: the only supported value is All")
    return bool(values)


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
