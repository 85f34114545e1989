"""Conditional reads of the API: every successful GET under /api/ carries an ETag and answers 304 to a matching
If-None-Match (RFC 9110 sections 8.8.3 and 13.1.2).

A versioned row keeps the ETag its view gave it (`W/"<version>"`, which If-Match takes back on a PATCH); any other
read gets a tag of its body's digest, `W/"c-<digest>"`, which never reads as a version (sent as If-Match it matches
no row: 412, never an unconditional write). The 304 is decided after the view ran: it saves the transfer, not the work.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.cache import patch_vary_headers
from django.utils.http import parse_etags

from .views import API_PREFIX


def content_etag(content: bytes) -> str:
    return f'W/"c-{hashlib.sha256(content).hexdigest()[:32]}"'


def _weak_match(etag: str, header: str) -> bool:
    if header.strip() == "*":
        return True
    opaque = etag.removeprefix("W/")
    return any(tag.removeprefix("W/") == opaque for tag in parse_etags(header))


class ConditionalApiReadMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (request.method not in ("GET", "HEAD") or not request.path_info.startswith(API_PREFIX)
                or response.status_code != 200 or response.streaming):
            return response
        # The same URL answers each user their own rows: a shared cache must not hand one user's body to another.
        patch_vary_headers(response, ("Authorization", "Cookie"))
        etag = response.get("ETag") or content_etag(response.content)
        response["ETag"] = etag
        if _weak_match(etag, request.headers.get("If-None-Match", "")):
            not_modified = HttpResponseNotModified()
            for header in ("ETag", "Vary", "Cache-Control", "X-Request-ID"):
                if header in response:
                    not_modified[header] = response[header]
            return not_modified
        return response
