"""What every webhook module here shares: the answer types, field.Error's message bodies (`Invalid value: "1": ...`,
`Duplicate value: ...`, `Unsupported value: ...`, `Required value: ...`, `Forbidden: ...`, `Not found: ...`),
apimachinery's label and annotation rules as webhook errors, the resource-in-use finalizer of the ClusterQueue and
ResourceFlavor defaulters, and the admission-gated-by annotation that both Workloads and the jobs that make them carry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from decimal import Decimal

from kubesim.kernel.metadata import (
    DNS1123_SUBDOMAIN,
    SUBDOMAIN_ERROR,
    Cause,
    annotation_causes,
    label_causes,
    qualified_name_errors,
)
from kubesim.kernel.protocols import WebhookErrored
from kubesim.kernel.quantity import QUANTITY_ERROR, QuantityError, decimal_value
from kubesim.kueue import constants as C

Error = tuple[str, str] | tuple[str, str, str]
Errors = list[Error]

ADMISSION_GATED_BY = "kueue.x-k8s.io/admission-gated-by"
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"
IMMUTABLE = "field is immutable"
NEGATIVE = "must be greater than or equal to 0"
MAX_GATE_NAME = 63


def _shown(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _invalid(value: object, message: str) -> str:
    """k8s field.Invalid detail: `Invalid value: "1": must be ...`."""
    return f"Invalid value: {_shown(value)}: {message}"


def invalid(path: str, value: object, message: str) -> Error:
    return (path, _invalid(value, message), "FieldValueInvalid")


def duplicate(path: str, value: object, detail: str = "") -> Error:
    return (path, f"Duplicate value: {_shown(value)}" + (f": {detail}" if detail else ""), "FieldValueDuplicate")


def not_supported(path: str, value: object, valid: list[str]) -> Error:
    allowed = ", ".join(_shown(v) for v in valid)
    detail = f": supported values: {allowed}" if valid else ""
    return (path, f"Unsupported value: {_shown(value)}{detail}", "FieldValueNotSupported")


def required(path: str, detail: str = "") -> Error:
    return (path, "Required value" + (f": {detail}" if detail else ""), "FieldValueRequired")


def forbidden(path: str, detail: str) -> Error:
    return (path, f"Forbidden: {detail}", "FieldValueForbidden")


def not_found(path: str, value: object) -> Error:
    return (path, f"Not found: {_shown(value)}", "FieldValueNotFound")


def _from_causes(causes: list[Cause]) -> Errors:
    return [(c.field, c.message, c.reason) for c in causes]


def label_errors(labels: object, path: str) -> Errors:
    return _from_causes(label_causes(labels, path)) if isinstance(labels, dict) else []


def annotation_errors(annotations: object, path: str) -> Errors:
    return _from_causes(annotation_causes(annotations, path)) if isinstance(annotations, dict) else []


def label_name_errors(name: object, path: str) -> Errors:
    """metav1validation.ValidateLabelName: a qualified name."""
    if not isinstance(name, str):
        return []
    return [invalid(path, name, m) for m in qualified_name_errors(name)]


def quantity_value(value: object) -> Decimal | None:
    try:
        return decimal_value(value)
    except QuantityError:
        return None  # schema validation (or decoding) reports malformed quantities before webhooks run


def decode_quantities(webhook: str, values: Iterable[object]) -> None:
    """Kueue's webhooks decode the request's object into its Go type before anything else; a value there that
    resource.Quantity's UnmarshalJSON cannot read (null reads as zero, a string is trimmed of spaces, a number
    read as its text) fails the decoding, which controller-runtime answers Errored(400): the API server relays it
    under the webhook's name."""
    for value in values:
        if value is None:
            continue
        text = value.strip() if isinstance(value, str) else value
        if isinstance(value, bool) or not isinstance(text, str | int | float):
            raise WebhookErrored(webhook, 400, QUANTITY_ERROR)
        try:
            decimal_value(text)
        except QuantityError as exc:
            raise WebhookErrored(webhook, 400, str(exc)) from exc


def resource_group_quantities(spec: dict) -> Iterator[object]:
    """The quantities of a ClusterQueue's or Cohort's spec: quotas and limits, the fair-sharing weight."""
    for group in as_list(spec.get("resourceGroups")):
        for flavor in as_list(as_dict(group).get("flavors")):
            for resource in as_list(as_dict(flavor).get("resources")):
                resource = as_dict(resource)
                yield from (resource.get(k) for k in ("nominalQuota", "borrowingLimit", "lendingLimit"))
    yield as_dict(spec.get("fairSharing")).get("weight")


def pod_spec_quantities(spec: object) -> Iterator[object]:
    """A PodSpec's quantities: overhead, and every container's limits and requests."""
    spec = as_dict(spec)
    yield from as_dict(spec.get("overhead")).values()
    for field_name in ("initContainers", "containers"):
        for container in as_list(spec.get(field_name)):
            resources = as_dict(as_dict(container).get("resources"))
            for kind in ("limits", "requests"):
                yield from as_dict(resources.get(kind)).values()


def as_list(value: object) -> list:
    return value if isinstance(value, list) else []


def as_dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def toleration_key_errors(tolerations: object, path: str) -> Errors:
    errors: Errors = []
    for i, toleration in enumerate(as_list(tolerations)):
        key = as_dict(toleration).get("key")
        if key:
            errors += label_name_errors(key, f"{path}[{i}].key")
    return errors


def add_in_use_finalizer(obj: dict) -> None:
    """The ClusterQueue and ResourceFlavor defaulters: the resource-in-use finalizer, in the create's answer already."""
    finalizers = obj.setdefault("metadata", {}).setdefault("finalizers", [])
    if C.RESOURCE_IN_USE_FINALIZER not in finalizers:
        finalizers.append(C.RESOURCE_IN_USE_FINALIZER)


_GATE_PATH = f"metadata.annotations[{ADMISSION_GATED_BY}]"
_PATH_CHARS = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")


def _gates(value: str) -> list[str]:
    return [g.strip() for g in value.split(",")]


def gated_by_format_errors(value: str) -> Errors:
    """validateAdmissionGatedByAnnotationFormat: distinct domain-prefixed paths of at most 63 characters."""
    if not value:
        return []
    errors: Errors = []
    seen: set[str] = set()
    for gate in _gates(value):
        if not gate:
            errors.append(invalid(_GATE_PATH, value, "cannot contain empty gate names"))
            continue
        if gate in seen:
            errors.append(invalid(_GATE_PATH, value, f"duplicate gate name: {gate}"))
            continue
        seen.add(gate)
        host, slash, rest = gate.partition("/")
        if not slash:
            errors.append(invalid(_GATE_PATH, gate, 'must be a domain-prefixed path (such as "acme.io/foo")'))
        else:
            if len(host) > 253 or not DNS1123_SUBDOMAIN.match(host):
                errors.append(invalid(_GATE_PATH, host, SUBDOMAIN_ERROR))
            if not _PATH_CHARS.match(rest):
                errors.append(invalid(_GATE_PATH, rest, "Invalid path"))
        if len(gate) > MAX_GATE_NAME:
            errors.append((_GATE_PATH, f"Too long: may not be more than {MAX_GATE_NAME} bytes", "FieldValueTooLong"))
    return errors


def gated_by_update_errors(old: str | None, new: str | None) -> Errors:
    """ValidateAdmissionGatedByAnnotationOnUpdate: gates may only be removed."""
    errors: Errors = []
    if not old and new:
        errors.append(forbidden(_GATE_PATH, "cannot add admission gate after creation"))
    if old and new and any(g not in _gates(old) for g in _gates(new)):
        errors.append(forbidden(_GATE_PATH, "can only remove gates, not add new ones"))
    return errors + gated_by_format_errors(new or "")
