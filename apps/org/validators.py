"""Name rules shared by models, forms and the API: what Kubernetes accepts."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Slugs end up inside longer Kubernetes names (proj-<slug>-<pool>-guaranteed, label values <= 63).
SLUG_MAX_LENGTH = 40


def validate_dns_label(value: str) -> None:
    """A DNS-1123 label: lower-case letters, digits and '-', starting and ending alphanumeric."""
    if not DNS1123_LABEL.match(value or ""):
        raise ValidationError(
            "Use lower-case letters, digits and '-', starting and ending with a letter or digit "
            "(a Kubernetes DNS-1123 label).",
            code="dns1123",
        )
    if len(value) > 63:
        raise ValidationError("At most 63 characters (a Kubernetes DNS-1123 label).", code="dns1123_length")


def validate_slug(value: str) -> None:
    validate_dns_label(value)
    if len(value) > SLUG_MAX_LENGTH:
        raise ValidationError(
            f"At most {SLUG_MAX_LENGTH} characters: it becomes part of longer Kubernetes names.", code="slug_length"
        )


LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def validate_label_key(key: str) -> None:
    name = key.rsplit("/", 1)[-1]
    prefix = key[: -len(name) - 1] if "/" in key else ""
    if not LABEL_KEY.match(key) or len(name) > 63 or len(prefix) > 253:
        raise ValidationError(f"{key!r} is not a valid Kubernetes label key.", code="label_key")


def validate_label_value(value: str) -> None:
    if len(value) > 63 or not LABEL_VALUE.match(value):
        raise ValidationError(
            f"{value!r} is not a valid Kubernetes label value (at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending alphanumeric).",
            code="label_value",
        )
