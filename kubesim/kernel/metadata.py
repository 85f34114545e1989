"""apimachinery's validation that both halves apply to object metadata: names (RFC 1123 / 1035, qualified names),
label values, labels and annotations, with kube's messages; and the StatusCause they report a problem as.

The API server half validates every object's metadata with these; Kueue's webhooks check the labels and
annotations Kueue reads with the same rules, as Kueue calls apimachinery's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
ANNOTATIONS_LIMIT = 256 * 1024  # TotalAnnotationSizeLimitB


@dataclass(frozen=True)
class Cause:
    """One StatusCause: reason (FieldValueInvalid, ...), message, field path."""

    field: str
    reason: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}


def field_value(value: Any) -> str:
    """A value as field.Error prints it in `Invalid value: <value>: ...` (objects and lists by their type)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    return json.dumps(value)


def _regex_error(message: str, regex: str, *examples: str) -> str:
    """apimachinery's RegexError: the rule, examples and the regular expression."""
    shown = "',  or '".join(examples)
    return f"{message} (e.g. '{shown}', regex used for validation is '{regex}')"


QUALIFIED_NAME_ERROR = _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
    "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]",
    "MyName",
    "my.name",
    "123-abc",
)
DNS1123_LABEL_ERROR = _regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character",
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?",
    "my-name",
    "123-abc",
)
DNS1035_LABEL_ERROR = _regex_error(
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, "
    "and end with an alphanumeric character",
    "[a-z]([-a-z0-9]*[a-z0-9])?",
    "my-name",
    "abc-123",
)
SUBDOMAIN_ERROR = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character",
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
    "example.com",
)
LABEL_VALUE_ERROR = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character",
    "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
    "MyValue",
    "my_value",
    "12345",
)


def qualified_name_errors(value: str) -> list[str]:
    """IsQualifiedName: an optional DNS-subdomain prefix and '/', then a name of at most 63 characters."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            f"a qualified name {QUALIFIED_NAME_ERROR} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    errors: list[str] = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errors.append("prefix part must be no more than 253 characters")
            if not DNS1123_SUBDOMAIN.match(prefix):
                errors.append(f"prefix part {SUBDOMAIN_ERROR}")
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not QUALIFIED_NAME.match(name):
        errors.append(f"name part {QUALIFIED_NAME_ERROR}")
    return errors


def label_causes(labels: dict, path: str) -> list[Cause]:
    """ValidateLabels: qualified-name keys and label values, for metadata, pod templates and selectors."""
    causes: list[Cause] = []
    for key, value in labels.items():
        causes += [
            Cause(path, "FieldValueInvalid", f"Invalid value: {field_value(key)}: {m}")
            for m in qualified_name_errors(key)
        ]
        if not isinstance(value, str):
            continue  # the schema reports the type
        if len(value) > 63:
            causes.append(
                Cause(
                    path,
                    "FieldValueInvalid",
                    f"Invalid value: {field_value(value)}: must be no more than 63 characters",
                )
            )
        if not LABEL_VALUE.match(value):
            causes.append(Cause(path, "FieldValueInvalid", f"Invalid value: {field_value(value)}: {LABEL_VALUE_ERROR}"))
    return causes


def annotation_causes(annotations: dict, path: str) -> list[Cause]:
    """ValidateAnnotations: qualified-name keys and at most 256 KiB of keys plus values in all."""
    causes: list[Cause] = []
    for key in annotations:
        causes += [
            Cause(path, "FieldValueInvalid", f"Invalid value: {field_value(key)}: {m}")
            for m in qualified_name_errors(key.lower())
        ]
    size = sum(len(k.encode()) + len(str(v).encode()) for k, v in annotations.items())
    if size > ANNOTATIONS_LIMIT:
        causes.append(Cause(path, "FieldValueTooLong", f"Too long: may not be more than {ANNOTATIONS_LIMIT} bytes"))
    return causes
