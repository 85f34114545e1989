"""The API's one error shape, as the OpenAPI schema documents it on every operation.

Every error under /api/ is JSON in DRF's shape, never HTML: a refusal of the request as a whole is
`{"detail": "<message>"}` (401, 403, 404, 405, 406, 409, 412 with `current_version`, 415, 422, 429, 500); a refusal
of its content (400) is `{"<field>": ["<message>", ...]}`, nested by field or row index where the input is nested,
or `{"detail": ...}` when the body could not be parsed at all. `document_errors` (a drf-spectacular postprocessing
hook, SPECTACULAR_SETTINGS) adds these responses to every operation that can give them, with the schemas below, so
clients and schemathesis can check every answer against the schema.
"""

from __future__ import annotations

from typing import Any

ERROR = "Error"
FIELD_ERRORS = "FieldErrors"

SCHEMAS: dict[str, dict[str, Any]] = {
    ERROR: {
        "type": "object",
        "description": "A refusal of the request as a whole, in one sentence a person can act on.",
        "properties": {
            "detail": {"type": "string", "example": "You may not stop this workload."},
            "current_version": {"type": "integer", "description": "412 only: the row's version now (its ETag "
                                                                  "comes with the answer)."},
        },
        "required": ["detail"],
    },
    FIELD_ERRORS: {
        "type": "object",
        "description": (
            "Every refusal at once: field (or header, or query parameter) -> messages; nested objects or lists for "
            "nested input (labels, the rows of a quota table by index); `non_field_errors` for what spans fields. "
            'A body that cannot be parsed answers {"detail": "JSON parse error - ..."} instead.'),
        "additionalProperties": {"anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "object"}]}},
            {"type": "object"},
        ]},
        "example": {"gpus": ["At least 1."], "labels": {"model": ["The model audit label is required."]}},
    },
}

# status -> (description, schema component); 400 is FieldErrors or Error (a body that could not be parsed)
DESCRIPTIONS = {
    "400": "The request was refused as it is (every problem at once, keyed by field); nothing changed.",
    "401": "No valid credentials: send `Authorization: Token <secret>` (see the `WWW-Authenticate` challenge).",
    "403": "Signed in, but your roles do not allow this here.",
    "404": "No such row, or none you may see.",
    "412": "The row changed since the version you sent (If-Match or `version`); nothing changed.",
    "429": "Too many failed sign-ins for this username from this address: locked out for a while.",
    "415": "The body's media type is not one this operation reads (send application/json).",
    "500": "A server error; the request id in the X-Request-ID header finds it in the logs.",
}
NOT_MODIFIED = {"description": "Not modified: the representation still has the ETag sent in If-None-Match."}
WRITE_METHODS = {"post", "put", "patch", "delete"}


def _content(code: str) -> dict[str, Any]:
    error = {"$ref": f"#/components/schemas/{ERROR}"}
    schema = {"anyOf": [{"$ref": f"#/components/schemas/{FIELD_ERRORS}"}, error]} if code == "400" else error
    return {"application/json": {"schema": schema}}


def _error_codes(method: str, operation: dict[str, Any]) -> list[str]:
    parameters = operation.get("parameters", [])
    codes = ["500", "403"]
    if any(requirement for requirement in operation.get("security", [{}])):  # {} alone: no credentials needed
        codes.append("401")
    else:  # signing in: failures count towards the lockout
        codes.append("429")
    if method in WRITE_METHODS or any(p.get("in") in ("query", "header") for p in parameters):
        codes.append("400")
    if "requestBody" in operation:
        codes.append("415")
    if any(p.get("in") == "path" for p in parameters):
        codes.append("404")
    if any(p.get("in") == "header" and p.get("name") == "If-Match" for p in parameters):
        codes.append("412")
    return codes


def require_versions(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """A versioned row's `version` may be sent with a PATCH but not with a create (a new row starts at 1: the server
    refuses it, apps.core.api), and is always answered: the response components (those that are not `...Request`,
    COMPONENT_SPLIT_REQUEST) list it as required, and the request shapes only creates use do not offer it."""
    schemas = result.get("components", {}).get("schemas", {})
    for name, component in schemas.items():
        if name.endswith("Request") or "version" not in component.get("properties", {}):
            continue
        required = component.setdefault("required", [])
        if "version" not in required:
            required.append("version")
    for name in _create_only_request_components(result):
        component = schemas.get(name, {})
        component.get("properties", {}).pop("version", None)
        if "version" in component.get("required", []):
            component["required"].remove("version")
    return result


def _create_only_request_components(result: dict[str, Any]) -> set[str]:
    """The request components that POST operations take and no other method does."""
    by_method: dict[str, set[str]] = {}
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if not isinstance(operation, dict):
                continue
            for media in (operation.get("requestBody") or {}).get("content", {}).values():
                reference = (media.get("schema") or {}).get("$ref", "")
                if reference:
                    by_method.setdefault(reference.rsplit("/", 1)[-1], set()).add(method)
    return {name for name, methods in by_method.items() if methods == {"post"}}


def document_errors(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Add the error responses each operation can give (and 304 to reads), with the shared error schemas; an error
    response an operation documents itself keeps its description."""
    result.setdefault("components", {}).setdefault("schemas", {}).update(SCHEMAS)
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            for code in _error_codes(method, operation):
                responses.setdefault(code, {"description": DESCRIPTIONS[code]})
            for code, response in responses.items():
                if code[0] in "45":  # one shape: an operation's own description stays, its schema is this one
                    response["content"] = _content(code)
            if method == "get":
                responses.setdefault("304", NOT_MODIFIED)
    return result
