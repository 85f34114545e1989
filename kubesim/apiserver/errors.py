"""Kubernetes Status errors."""

from __future__ import annotations

from kubesim.apiserver.registry.resources import Resource
from kubesim.kernel.metadata import Cause

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    500: "InternalError",
}


class APIError(Exception):
    """An error the API answers with a Status object."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> dict:
        out = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:
            del out["reason"]
        if self.details is not None:
            out["details"] = self.details
        return out


def qualified(res: Resource) -> str:
    """pods, jobs.batch, clusterqueues.kueue.x-k8s.io: how Status messages name a resource."""
    return f"{res.plural}.{res.group}" if res.group else res.plural


def _details(res: Resource, name: str) -> dict:
    out = {"name": name, "kind": res.plural}
    if res.group:
        out["group"] = res.group
    return out


def not_found(res: Resource, name: str) -> APIError:
    return APIError(404, f'{qualified(res)} "{name}" not found', "NotFound", _details(res, name))


def already_exists(res: Resource, name: str) -> APIError:
    return APIError(409, f'{qualified(res)} "{name}" already exists', "AlreadyExists", _details(res, name))


def conflict(res: Resource, name: str, why: str) -> APIError:
    return APIError(
        409, f'Operation cannot be fulfilled on {qualified(res)} "{name}": {why}', "Conflict", _details(res, name)
    )


def aggregate(causes: list[Cause]) -> str:
    """field.ErrorList.ToAggregate().Error(): each distinct error once, one bare, several as "[a, b]"."""
    parts = list(dict.fromkeys(f"{c.field}: {c.message}" if c.field else c.message for c in causes))
    return parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"


def invalid(res: Resource, name: str, causes: list[Cause]) -> APIError:
    kind = f"{res.kind}.{res.group}" if res.group else res.kind
    body = aggregate(causes)
    details = {"name": name, "kind": res.kind, "causes": [c.as_dict() for c in causes]}
    if res.group:
        details["group"] = res.group
    return APIError(422, f'{kind} "{name}" is invalid: {body}', "Invalid", details)


def denied(webhook: str, causes: list[Cause]) -> APIError:
    """A validating webhook's refusal: Kueue's validators return a field.ErrorList aggregate, which
    controller-runtime answers as Denied(err.Error()) (403 Forbidden) and the API server words as
    `admission webhook "<name>" denied the request: <aggregate>`, with no details or causes."""
    return APIError(403, f'admission webhook "{webhook}" denied the request: {aggregate(causes)}', "Forbidden")


def errored(webhook: str, code: int, message: str) -> APIError:
    """A webhook that failed to handle the request (controller-runtime's Errored, e.g. when it cannot decode the
    object into its Go type): the API server relays its code and message under its name (ToStatusErr), and, as
    Errored gives none, no reason."""
    err = APIError(max(code, 400), f'admission webhook "{webhook}" denied the request: {message}')
    err.reason = ""
    return err


def bad_request(message: str) -> APIError:
    return APIError(400, message, "BadRequest")


def internal(message: str) -> APIError:
    return APIError(500, message, "InternalError", {"causes": [{"message": message}]})


def number_param(name: str, value: object, *, minimum: float = 0, maximum: float = 10**9,
                 integer: bool = False) -> float:
    """A query or control value as a finite number from `minimum` to `maximum` (an int with `integer`), else the 400
    Status the API server answers for a bad parameter (never a 500)."""
    try:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError
        number = float(value) if not integer else int(value)
        if integer and isinstance(value, float) and value != number:
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise bad_request(f"{name}: invalid value {value!r}: expected a number") from None
    if not minimum <= number <= maximum:  # NaN and the infinities too
        raise bad_request(f"{name}: invalid value {value!r}: expected a number from {minimum:g} to {maximum:g}")
    return number
