"""The portal's REST API over HTTP, and how its answers become the CLI's exit codes and one-line errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import requests

TIMEOUT = 30

# Exit codes a script can rely on (the README's CLI section lists them).
OK = 0
FAILED = 1  # anything not below (e.g. a workload that failed, for `gpu status --wait`-like checks)
USAGE = 2  # a bad command line (click's own code)
NOT_SIGNED_IN = 3  # no stored token, or the portal answered 401 (expired, revoked, unknown)
FORBIDDEN = 4  # 403: your roles do not allow it
NOT_FOUND = 5  # 404: no such workload, project, template ... or none you may see
REFUSED = 6  # 400, 409, 412, 422: the portal refused the request as it is (its message says why)
UNAVAILABLE = 7  # the portal cannot be reached, or answered 5xx

_BY_STATUS = {401: NOT_SIGNED_IN, 403: FORBIDDEN, 404: NOT_FOUND, 400: REFUSED, 409: REFUSED, 412: REFUSED,
              422: REFUSED, 429: REFUSED}


class CliError(Exception):
    """An error the CLI reports in one line and exits with `code`."""

    def __init__(self, message: str, code: int = FAILED) -> None:
        super().__init__(message)
        self.code = code


def flatten_errors(body: Any, prefix: str = "") -> list[tuple[str, str]]:
    """The API's error shape ({"detail": ...} or field -> messages, nested) as (field path, message) pairs."""
    if isinstance(body, dict):
        if set(body) <= {"detail", "current_version"} and "detail" in body:
            return [(prefix, str(body["detail"]))]
        pairs = []
        for key, value in body.items():
            label = prefix if key in ("non_field_errors", "detail") else (f"{prefix}.{key}" if prefix else str(key))
            pairs.extend(flatten_errors(value, label))
        return pairs
    if isinstance(body, list):
        return [pair for item in body for pair in flatten_errors(item, prefix)]
    return [(prefix, str(body))]


def one_line(body: Any) -> str:
    """Every message on one line, grouped by field: `gpus: At least 1. name: Use a DNS label.`"""
    by_field: dict[str, list[str]] = {}
    for field, message in flatten_errors(body):
        by_field.setdefault(field, []).append(message if message.endswith((".", "!", "?")) else f"{message}.")
    return " ".join(f"{field}: {' '.join(messages)}" if field else " ".join(messages)
                    for field, messages in by_field.items())


def error_from(response: requests.Response) -> CliError:
    try:
        message = one_line(response.json())
    except ValueError:
        message = response.text.strip().splitlines()[0] if response.text.strip() else response.reason
    code = _BY_STATUS.get(response.status_code, UNAVAILABLE if response.status_code >= 500 else FAILED)
    return CliError(f"{message} (HTTP {response.status_code})", code)


class Api:
    def __init__(self, url: str, token: str | None = None) -> None:
        self.base = url.rstrip("/") + "/api/v1/"
        self.session = requests.Session()
        self.session.headers["Accept"] = "application/json"
        if token:
            self.session.headers["Authorization"] = f"Token {token}"

    def request(self, method: str, path: str, *, stream: bool = False, **kwargs: Any) -> requests.Response:
        try:
            # A stream (logs -f) may stay quiet for long: only connecting is bounded.
            response = self.session.request(method, self.base + path.lstrip("/"), stream=stream,
                                            timeout=(TIMEOUT, None) if stream else TIMEOUT, **kwargs)
        except requests.RequestException as error:
            raise CliError(f"cannot reach the portal at {self.base}: {error.__class__.__name__}", UNAVAILABLE) from None
        if response.status_code >= 400:
            raise error_from(response)
        return response

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None}).json()

    def post(self, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        response = self.request("POST", path, json=body, headers=headers or {})
        return response.json() if response.content else None

    def patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, json=body).json()

    def pages(self, path: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Every row of a paginated list, page after page."""
        offset = 0
        while True:
            page = self.get(path, **params, limit=200, offset=offset)
            yield from page["results"]
            offset += len(page["results"])
            if not page.get("next") or not page["results"]:
                return

    def text(self, path: str, **params: Any) -> str:
        return self.request("GET", path, params=params, headers={"Accept": "text/csv, text/plain, */*"}).text

    def lines(self, path: str, **params: Any) -> Iterator[str]:
        """A streamed text answer, line by line as it comes. A stream that breaks off (the portal restarted, a proxy
        cut it, the network went) ends in a CliError: one line saying so, not a traceback."""
        response = self.request("GET", path, params=params, stream=True, headers={"Accept": "text/plain, */*"})
        with response:
            try:
                for line in response.iter_lines(decode_unicode=True):
                    yield line if isinstance(line, str) else line.decode()
            except requests.RequestException as error:
                raise CliError(f"the stream from the portal broke off ({error.__class__.__name__}); run the command "
                               "again to go on", UNAVAILABLE) from None
