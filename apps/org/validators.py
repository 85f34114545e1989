"""Name rules shared by models, forms, the API and the worker: what Kubernetes accepts, and which namespaces a
project may have."""

from __future__ import annotations

import re

from django.conf import settings
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


def validate_extended_resource_name(value: str) -> None:
    """A Kubernetes extended resource name, as the API server checks it (IsExtendedResourceName): a qualified name
    with a domain prefix (`vendor.tld/name`) outside the kubernetes.io namespace, also valid as a quota's
    `requests.<name>`."""
    domain, slash, name = (value or "").partition("/")
    example = "use a domain-prefixed name such as nvidia.com/gpu or nvidia.com/mig-3g.40gb"
    if not slash or not domain:
        raise ValidationError(f"{value!r} is not an extended resource name: {example}.", code="extended_resource")
    if "kubernetes.io/" in value:
        raise ValidationError(f"{value!r} is not an extended resource name: the kubernetes.io namespace is "
                              f"Kubernetes' own; {example}.",
                              code="extended_resource_native")
    if not LABEL_KEY.match(value) or len(name) > 63 or len(f"requests.{domain}") > 253:
        raise ValidationError(
            f"{value!r} is not a valid extended resource name (a DNS domain, '/', then at most 63 letters, digits, "
            f"'-', '_' or '.', starting and ending alphanumeric); {example}.", code="extended_resource")


# --- project namespaces -----------------------------------------------------------------------------------------

SYSTEM_NAMESPACE_PREFIX = "kube-"
SYSTEM_NAMESPACES = frozenset({"default"})


def project_namespace_rule() -> str:
    """The rule in words, as every refusal starts."""
    return f"Project namespaces start with '{settings.KUEUE_PROJECT_PREFIX}' (or are on the approved list)"


def project_namespace_error(namespace: str) -> str | None:
    """Why `namespace` may not be a project's namespace, or None when it may.

    Namespaces are the portal's own: a project namespace starts with settings.KUEUE_PROJECT_PREFIX or is on the
    admins' list settings.PORTAL_EXTRA_PROJECT_NAMESPACES, and is never a system namespace (kube-*, default) nor
    the portal's own (settings.PORTAL_NAMESPACE), whatever the list says. Services refuse such a namespace on
    create; the reconcile skips (and reports) projects that still have one. Another project's namespace is the
    services' part of the rule (it needs the database). Pure apart from settings; no queries.
    """
    if not namespace:
        return None
    rule = project_namespace_rule()
    if namespace in SYSTEM_NAMESPACES or namespace.startswith(SYSTEM_NAMESPACE_PREFIX):
        return f"{rule}; '{namespace}' is a system namespace."
    if settings.PORTAL_NAMESPACE and namespace == settings.PORTAL_NAMESPACE:
        return f"{rule}; '{namespace}' is the portal's own namespace."
    prefix = settings.KUEUE_PROJECT_PREFIX
    if (namespace.startswith(prefix) and len(namespace) > len(prefix)) or (
        namespace in settings.PORTAL_EXTRA_PROJECT_NAMESPACES
    ):
        return None
    return f"{rule}; '{namespace}' does not start with '{prefix}' and is not on the approved list."
