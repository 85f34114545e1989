"""Request helpers every app's views share: typed requests, strict id parsing and conditional (ETag/304) polling."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.cache import patch_vary_headers
from django.utils.http import parse_etags, quote_etag

from .actors import Actor

if TYPE_CHECKING:
    from django_htmx.middleware import HtmxDetails

MAX_ID = 2**63 - 1


class HtmxRequest(HttpRequest):
    """For annotations only: the request as HtmxMiddleware leaves it (`request.htmx`)."""

    htmx: HtmxDetails


class AuthenticatedRequest(HtmxRequest):
    """For annotations only: the request of a login_required view, whose `request.user` is a signed-in Actor."""

    user: Actor


def parse_int(value: Any) -> int | None:
    """A non-negative integer from a query or form value, or None. Only ASCII digits count: '²'.isdigit() is true
    but int('²') raises, and an Arabic-Indic one would silently read as 1."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.isascii() and value.isdigit():
        number = int(value)
    else:
        return None
    return number if 0 <= number <= MAX_ID else None


def parse_id(value: Any) -> int | None:
    """A database id (a positive integer) from a query or form value, or None."""
    number = parse_int(value)
    return number if number else None


def reference_lookup(value: Any, *, name_field: str | None) -> dict[str, Any] | None:
    """How a reference names a row: `{"pk": n}` for ASCII digits, `{name_field: text}` for other text, or None when
    it can name nothing (digits out of range, a NUL, no name field, not text). The one reading of "id or name"
    (filters, report scopes, API references, URLs): a Unicode digit such as '²' or U+0661 is a name, never an id."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value or "\x00" in value:
        return None
    if value.isascii() and value.isdigit():
        number = parse_id(value)
        return None if number is None else {"pk": number}
    return None if name_field is None else {name_field: value}


def holds_nul(value: Any) -> bool:
    """Whether a NUL character is anywhere in a parsed JSON value (keys too): PostgreSQL stores none in text or
    jsonb, so such input is refused before it gets there."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(holds_nul(key) or holds_nul(item) for key, item in value.items())
    return isinstance(value, list) and any(holds_nul(item) for item in value)


def poll_etag(*parts: Any) -> str:
    """A strong tag for a poll's answer, from whatever decides its body (viewer, scope, change marker)."""
    return quote_etag(hashlib.sha256("|".join(str(part) for part in parts).encode()).hexdigest()[:32])


def not_modified(request: HttpRequest, etag: str) -> bool:
    return etag in parse_etags(request.headers.get("If-None-Match", ""))


def conditional(response: HttpResponse, etag: str | None) -> HttpResponse:
    """Tag a poll's answer: revalidated on every poll (private, no-cache), one tag per body (HX-Request varies it)."""
    if etag:
        response["ETag"] = etag
    response["Cache-Control"] = "private, no-cache"
    patch_vary_headers(response, ["HX-Request", "Cookie"])
    return response


def conditional_poll(request: HttpRequest, etag: str, render: Any) -> HttpResponse:
    """304 when the client holds `etag`, else `render()`; either way tagged for the next conditional poll."""
    response = HttpResponseNotModified() if not_modified(request, etag) else render()
    return conditional(response, etag)
