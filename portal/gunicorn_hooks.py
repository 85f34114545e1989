"""What the web process's gunicorn does besides serving the portal (loaded by ./gunicorn.conf.py, which gunicorn
reads from its working directory however it is started: make run, the image, compose, the manifests).

Each worker imports the URLconf, and with it every view, serializer and form module, before it takes its first
request (`load_views`): otherwise the first request a fresh worker serves pays for those imports, seconds on a busy
machine, and after a restart the first users wait.

gunicorn refuses a request line or headers past its limits (limit_request_line, limit_request_fields,
limit_request_field_size) before the portal sees the request, with an HTML page of its own. API clients read JSON
errors, so those refusals are answered as the API answers, `{"detail": ...}`: the path is not known yet at that point
(it is in the line too long to read), so every such refusal is JSON, which a browser shows as plain text too.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from gunicorn.http.errors import LimitRequestHeaders, LimitRequestLine
from gunicorn.util import write_nonblock


def _refusal(exc: Exception) -> tuple[int, str, str]:
    """(status, reason, detail) of a limit gunicorn met while reading the request."""
    if isinstance(exc, LimitRequestLine):
        return 414, "URI Too Long", (f"The request line is {exc.size} bytes, more than the {exc.max_size} the server "
                                     "reads: put long parameters in the request body, or send fewer.")
    what = ("a header field longer than the server reads" if str(exc).endswith("size") else
            "too many header fields")
    return 431, "Request Header Fields Too Large", f"The request has {what}; send fewer or shorter headers."


def answer_limits_as_json(worker: Any) -> None:
    """Wrap the worker's `handle_error` (every worker class calls it for a request it could not read) so that the
    limit refusals are JSON; every other error keeps gunicorn's own handling."""
    handle_error = worker.handle_error

    def handle(req: Any, client: Any, addr: Any, exc: Exception) -> None:
        if not isinstance(exc, LimitRequestLine | LimitRequestHeaders):
            handle_error(req, client, addr, exc)
            return
        status, reason, detail = _refusal(exc)
        worker.log.warning("Invalid request from ip=%s: %s", (addr or ("",))[0], exc)
        body = json.dumps({"detail": detail}).encode()
        head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
                f"X-Content-Type-Options: nosniff\r\nContent-Length: {len(body)}\r\n\r\n").encode("latin-1")
        with contextlib.suppress(OSError):  # the client went away: nothing to answer
            write_nonblock(client, head + body)

    worker.handle_error = handle


def load_views(worker: Any) -> None:
    """Import every module the URLconf reaches (Django resolves its patterns lazily, at the first request)."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - the attribute's import is the point
    worker.notify()  # alive: the imports took time, not a hang
