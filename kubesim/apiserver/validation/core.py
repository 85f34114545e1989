"""kube-apiserver's hand-written validation of core and batch kinds (pkg/apis/core/validation and
pkg/apis/batch/validation), for the rules a structural schema cannot express: names, env vars, ports,
resource quantities and their request/limit relations, Job counts, Service ports and selectors.

Paths and messages follow kube's field.ErrorList so clients see the same 422 causes as on a real cluster.
"""

from __future__ import annotations

import re
from typing import Any, TypeGuard

from kubesim.kernel.metadata import (
    DNS1123_LABEL,
    DNS1123_LABEL_ERROR,
    LABEL_VALUE,
    LABEL_VALUE_ERROR,
    Cause,
    annotation_causes,
    label_causes,
    qualified_name_errors,
)
from kubesim.kernel.quantity import Quantity, QuantityError, parse_quantity
from kubesim.kernel.selectors import selector_matches

_STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}
_OTHER_STANDARD_RESOURCES = {
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
}
_PORT_NAME_CHARS = re.compile(r"^[-a-z0-9]+$")
ENV_NAME_MSG = "a valid environment variable name must consist only of printable ASCII characters other than '='"
PORT_RANGE_MSG = "must be between 1 and 65535, inclusive"
NONNEGATIVE_MSG = "must be greater than or equal to 0"


# ---- quantities ------------------------------------------------------------------------------------------
def _quantity_or_none(value: Any) -> Quantity | None:
    """The quantity of a JSON string or number; None when it does not parse (decode_error reports those)."""
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def decode_error(resource: str, obj: dict) -> str | None:
    """A malformed quantity in a core kind's pod spec fails kube's JSON decoding (400 BadRequest) before any
    validation runs. (A custom resource is decoded untyped: its quantities are the CRD schema's and its webhooks'.)"""
    if resource not in ("pods", "jobs"):
        return None
    for _path, value in pod_quantities(resource, obj):
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            try:
                parse_quantity(value)
            except QuantityError as exc:
                return str(exc)
    return None


def pod_quantities(resource: str, obj: dict) -> list[tuple[str, object]]:
    """(field path, value) of every quantity in the object's pod specs: overhead, containers' and init containers'
    limits and requests."""
    out = []
    for base, spec in _pod_specs(resource, obj):
        overhead = spec.get("overhead")
        if isinstance(overhead, dict):
            out += [(f"{base}.overhead.{k}", v) for k, v in overhead.items()]
        for field_name in ("initContainers", "containers"):
            containers = spec.get(field_name)
            for i, c in enumerate(containers if isinstance(containers, list) else []):
                resources = _dict(_dict(c).get("resources"))
                for kind in ("limits", "requests"):
                    values = resources.get(kind)
                    if isinstance(values, dict):
                        out += [(f"{base}.{field_name}[{i}].resources.{kind}.{k}", v) for k, v in values.items()]
    return out


def _pod_specs(resource: str, obj: dict) -> list[tuple[str, dict]]:
    """(field path, pod spec) of a Pod, a Job's template, a Workload's pod sets' templates."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    if resource == "pods":
        return [("spec", spec)]
    if resource == "jobs":
        return _template_specs([("spec", spec)])
    if resource == "workloads":
        podsets = spec.get("podSets")
        holders = [(f"spec.podSets[{i}]", ps) for i, ps in enumerate(podsets if isinstance(podsets, list) else [])]
        return _template_specs([(path, ps) for path, ps in holders if isinstance(ps, dict)])
    return []


def _template_specs(holders: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The pod specs under holder.template.spec (a Job's spec, a Workload's podSets)."""
    out = []
    for path, holder in holders:
        template = holder.get("template")
        tspec = template.get("spec") if isinstance(template, dict) else None
        if isinstance(tspec, dict):
            out.append((f"{path}.template.spec", tspec))
    return out


def _containers(spec: dict) -> list[dict]:
    out = []
    for key in ("initContainers", "containers"):
        items = spec.get(key)
        out += [c for c in items if isinstance(c, dict)] if isinstance(items, list) else []
    return out


# ---- entry point -------------------------------------------------------------------------------------------
def validate(resource: str, obj: dict, old: dict | None) -> list[Cause]:
    """Causes kube's type-specific validation adds for Pods (on create), Jobs and Services."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    if resource == "pods" and old is None:
        causes = pod_spec(spec, "spec", template=False)
        if spec.get("schedulingGates") and spec.get("nodeName"):
            causes.append(
                Cause(
                    "spec.nodeName",
                    "FieldValueForbidden",
                    "Forbidden: cannot be set until all schedulingGates have been cleared",
                )
            )
        return causes
    if resource == "jobs":
        return job_spec(spec)
    if resource == "services":
        return service_spec(spec)
    return []


def job_spec(spec: dict) -> list[Cause]:
    causes = [
        _invalid(f"spec.{key}", spec[key], NONNEGATIVE_MSG)
        for key in (
            "parallelism",
            "completions",
            "activeDeadlineSeconds",
            "backoffLimit",
            "ttlSecondsAfterFinished",
            "backoffLimitPerIndex",
            "maxFailedIndexes",
        )
        if isinstance(spec.get(key), int) and not isinstance(spec[key], bool) and spec[key] < 0
    ]
    template = _dict(spec.get("template"))
    tmd = _dict(template.get("metadata"))
    causes += label_causes(tmd.get("labels") or {}, "spec.template.metadata.labels")
    causes += annotation_causes(tmd.get("annotations") or {}, "spec.template.metadata.annotations")
    causes += _job_selector(spec.get("selector"), tmd.get("labels") or {})
    if isinstance(template.get("spec"), dict):
        causes += pod_spec(template["spec"], "spec.template.spec", template=True)
    return causes


def _job_selector(selector: Any, labels: dict) -> list[Cause]:
    """Manual or generated, a Job's selector must be set and match the pods it will produce."""
    if selector is None:
        return [_required("spec.selector")]
    if not isinstance(selector, dict) or selector_matches(selector, labels):
        return []
    shown = ", ".join(f'"{k}":"{v}"' for k, v in sorted(labels.items()))
    return [
        Cause(
            "spec.template.metadata.labels",
            "FieldValueInvalid",
            f"Invalid value: map[string]string{{{shown}}}: `selector` does not match template `labels`",
        )
    ]


# ---- pod spec ------------------------------------------------------------------------------------------------
def pod_spec(spec: dict, path: str, *, template: bool) -> list[Cause]:
    """ValidatePodSpec's share kubesim covers: volumes, containers, nodeSelector, tolerations, deadlines."""
    causes, volumes = _volumes(spec.get("volumes") or [], f"{path}.volumes")
    if spec.get("containers") == []:
        causes.append(_required(f"{path}.containers"))
    names: set[str] = set()
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or []):
            if isinstance(c, dict):
                causes += _container(c, f"{path}.{key}[{i}]", names, volumes, template)
    if isinstance(spec.get("nodeSelector"), dict):
        causes += label_causes(spec["nodeSelector"], f"{path}.nodeSelector")
    for i, toleration in enumerate(spec.get("tolerations") or []):
        if isinstance(toleration, dict):
            causes += _toleration(toleration, f"{path}.tolerations[{i}]")
    causes += scheduling_gates(spec.get("schedulingGates"), f"{path}.schedulingGates")
    deadline = spec.get("activeDeadlineSeconds")
    if _is_int(deadline) and not 1 <= deadline <= 2**31 - 1:
        causes.append(
            _invalid(f"{path}.activeDeadlineSeconds", deadline, "must be between 1 and 2147483647, inclusive")
        )
    return causes


def scheduling_gates(gates: Any, path: str) -> list[Cause]:
    """validatePodSchedulingGates: each gate a qualified name, none twice."""
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, gate in enumerate(gates if isinstance(gates, list) else []):
        name = str(_dict(gate).get("name", ""))
        causes += [_invalid(f"{path}[{i}]", name, message) for message in qualified_name_errors(name)]
        if name in seen:
            causes.append(Cause(f"{path}[{i}]", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
        seen.add(name)
    return causes


def _volumes(volumes: list, path: str) -> tuple[list[Cause], set[str]]:
    """Volume names: DNS-1123 labels, unique; returns the causes and the names mounts may refer to."""
    causes: list[Cause] = []
    names: set[str] = set()
    for i, volume in enumerate(volumes):
        name = volume.get("name") if isinstance(volume, dict) else None
        if not isinstance(name, str):
            continue
        if not name:
            causes.append(_required(f"{path}[{i}].name"))
        elif name in names:
            causes.append(Cause(f"{path}[{i}].name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
        else:
            causes += _dns_label(name, f"{path}[{i}].name")
        names.add(name)
    return causes, names


def _volume_mounts(mounts: list, path: str, volumes: set[str]) -> list[Cause]:
    causes: list[Cause] = []
    paths: set[str] = set()
    for i, mount in enumerate(mounts):
        if not isinstance(mount, dict):
            continue
        name, mount_path = mount.get("name"), mount.get("mountPath")
        if name == "":
            causes.append(_required(f"{path}[{i}].name"))
        if isinstance(name, str) and name not in volumes:
            causes.append(Cause(f"{path}[{i}].name", "FieldValueNotFound", f'Not found: "{name}"'))
        if mount_path == "":
            causes.append(_required(f"{path}[{i}].mountPath"))
        if isinstance(mount_path, str) and mount_path in paths:
            causes.append(_invalid(f"{path}[{i}].mountPath", mount_path, "must be unique"))
        if isinstance(mount_path, str):
            paths.add(mount_path)
    return causes


def _toleration(toleration: dict, path: str) -> list[Cause]:
    """ValidateTolerations: key, operator/value agreement, tolerationSeconds only with NoExecute."""
    causes: list[Cause] = []
    key, operator, value = toleration.get("key", ""), toleration.get("operator", "Equal"), toleration.get("value", "")
    if isinstance(key, str) and key:
        causes += [_invalid(f"{path}.key", key, msg) for msg in qualified_name_errors(key)]
    elif operator != "Exists":
        causes.append(
            _invalid(
                f"{path}.operator",
                operator,
                'operator must be Exists when `key` is empty, which means "match all values and all keys"',
            )
        )
    if toleration.get("tolerationSeconds") is not None and toleration.get("effect") != "NoExecute":
        causes.append(
            _invalid(
                f"{path}.effect",
                toleration.get("effect", ""),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            )
        )
    if operator == "Exists" and value:
        causes.append(_invalid(f"{path}.operator", value, "value must be empty when `operator` is 'Exists'"))
    elif operator == "Equal" and isinstance(value, str) and (len(value) > 63 or not LABEL_VALUE.match(value)):
        causes.append(_invalid(f"{path}.operator", value, LABEL_VALUE_ERROR))
    return causes


def _container(c: dict, path: str, names: set[str], volumes: set[str], template: bool) -> list[Cause]:
    causes: list[Cause] = []
    name = c.get("name")
    if isinstance(name, str):
        if not name:
            causes.append(_required(f"{path}.name"))
        elif name in names:
            causes.append(Cause(f"{path}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
        else:
            causes += _dns_label(name, f"{path}.name")
        names.add(name)
    image = c.get("image")
    if image == "":
        causes.append(_required(f"{path}.image"))
    elif isinstance(image, str) and not template and image != image.strip():
        causes.append(_invalid(f"{path}.image", image, "must not have leading or trailing whitespace"))
    for i, env in enumerate(c.get("env") or []):
        env_name = env.get("name") if isinstance(env, dict) else None
        if env_name == "":
            causes.append(_required(f"{path}.env[{i}].name"))
        elif isinstance(env_name, str) and any(ch == "=" or not " " <= ch <= "~" for ch in env_name):
            causes.append(_invalid(f"{path}.env[{i}].name", env_name, ENV_NAME_MSG))
        if isinstance(env, dict) and isinstance(env.get("valueFrom"), dict):
            causes += _env_source(env, f"{path}.env[{i}].valueFrom")
    causes += _container_ports(c.get("ports") or [], f"{path}.ports")
    causes += _volume_mounts(c.get("volumeMounts") or [], f"{path}.volumeMounts", volumes)
    if isinstance(c.get("resources"), dict):
        causes += _resources(c["resources"], f"{path}.resources")
    return causes


def _env_source(env: dict, path: str) -> list[Cause]:
    """validateEnvVarValueFrom: exactly one source, and no literal value beside it."""
    sources = [
        k for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef") if env["valueFrom"].get(k)
    ]
    if not sources:
        return [
            _invalid(
                path, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
            )
        ]
    if env.get("value"):
        return [_invalid(path, "", "may not be specified when `value` is not empty")]
    if len(sources) > 1:
        return [_invalid(path, "", "may not have more than one field specified at a time")]
    return []


def _container_ports(ports: list, path: str) -> list[Cause]:
    causes: list[Cause] = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        if not isinstance(port, dict):
            continue
        p = f"{path}[{i}]"
        name = port.get("name")
        if isinstance(name, str) and name:
            msgs = port_name_errors(name)
            causes += [_invalid(f"{p}.name", name, msg) for msg in msgs]
            if not msgs and name in names:
                causes.append(Cause(f"{p}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
            names.add(name)
        number = port.get("containerPort")
        if number == 0:
            causes.append(_required(f"{p}.containerPort"))
        elif _is_int(number) and not 1 <= number <= 65535:
            causes.append(_invalid(f"{p}.containerPort", number, PORT_RANGE_MSG))
        host = port.get("hostPort")
        if _is_int(host) and host != 0 and not 1 <= host <= 65535:
            causes.append(_invalid(f"{p}.hostPort", host, PORT_RANGE_MSG))
    return causes


def _resources(resources: dict, path: str) -> list[Cause]:
    """validateResourceRequirements: names, non-negative (integer for extended) values, requests vs limits."""
    causes: list[Cause] = []
    raw_limits = _dict(resources.get("limits"))
    raw_requests = _dict(resources.get("requests"))
    limits: dict[str, Quantity] = {}
    for name, raw in sorted(raw_limits.items()):
        qty = _quantity_or_none(raw)
        causes += _resource_name(name, f"{path}.limits[{name}]")
        if qty is not None:
            causes += _quantity_value(name, qty, f"{path}.limits[{name}]")
            limits[name] = qty
    for name, raw in sorted(raw_requests.items()):
        qty = _quantity_or_none(raw)
        causes += _resource_name(name, f"{path}.requests[{name}]")
        if qty is None:
            continue
        causes += _quantity_value(name, qty, f"{path}.requests[{name}]")
        limit = limits.get(name)
        if limit is not None:
            if qty.value != limit.value and not _overcommit_allowed(name):
                causes.append(_invalid(f"{path}.requests", str(qty), f"must be equal to {name} limit of {limit}"))
            elif qty.value > limit.value:
                causes.append(
                    _invalid(f"{path}.requests", str(qty), f"must be less than or equal to {name} limit of {limit}")
                )
        elif name not in raw_limits and not _overcommit_allowed(name):
            causes.append(
                Cause(
                    f"{path}.limits",
                    "FieldValueRequired",
                    "Required value: Limit must be set for non overcommitable resources",
                )
            )
    return causes


def _quantity_value(name: str, qty: Quantity, path: str) -> list[Cause]:
    causes = []
    if qty.value < 0:
        causes.append(_invalid(path, str(qty), NONNEGATIVE_MSG))
    if _is_extended(name) and qty.value != qty.value.to_integral_value():
        causes.append(_invalid(path, str(qty), "must be an integer"))
    return causes


def _resource_name(name: str, path: str) -> list[Cause]:
    """validateContainerResourceName: a qualified name, standard when unprefixed, extended-resource style else."""
    causes = [_invalid(path, name, msg) for msg in qualified_name_errors(name)]
    if causes:
        if "/" not in name:
            causes.append(_invalid(path, name, "must be a standard resource for containers"))
        return causes
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            if name not in _OTHER_STANDARD_RESOURCES:
                causes.append(_invalid(path, name, "must be a standard resource type or fully qualified"))
            causes.append(_invalid(path, name, "must be a standard resource for containers"))
    elif not _is_native(name) and not _is_extended(name):
        causes.append(_invalid(path, name, "doesn't follow extended resource name standard"))
    return causes


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended(name: str) -> bool:
    return not _is_native(name) and not name.startswith("requests.") and not qualified_name_errors("requests." + name)


def _overcommit_allowed(name: str) -> bool:
    return _is_native(name) and not name.startswith("hugepages-")


# ---- services ------------------------------------------------------------------------------------------------
def service_spec(spec: dict) -> list[Cause]:
    """ValidateService's port and selector basics."""
    causes: list[Cause] = []
    ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)]
    headless = spec.get("clusterIP") == "None"
    if not ports and spec.get("type") != "ExternalName" and not headless:
        causes.append(_required("spec.ports"))
    names: set[str] = set()
    seen: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ports):
        p = f"spec.ports[{i}]"
        name = port.get("name")
        if len(ports) > 1 and not name:
            causes.append(_required(f"{p}.name"))
        elif isinstance(name, str) and name:
            causes += _dns_label(name, f"{p}.name")
            if name in names:
                causes.append(Cause(f"{p}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
            names.add(name)
        number = port.get("port")
        if _is_int(number) and not 1 <= number <= 65535:
            causes.append(_invalid(f"{p}.port", number, PORT_RANGE_MSG))
        target = port.get("targetPort")
        if _is_int(target) and target != 0 and not 1 <= target <= 65535:
            causes.append(_invalid(f"{p}.targetPort", target, PORT_RANGE_MSG))
        elif isinstance(target, str) and target:
            causes += [_invalid(f"{p}.targetPort", target, msg) for msg in port_name_errors(target)]
        key = (repr(number), repr(port.get("protocol", "TCP")))
        if key in seen:
            protocol = port.get("protocol", "TCP")
            causes.append(Cause(p, "FieldValueDuplicate", f"Duplicate value: {{port: {number}, protocol: {protocol}}}"))
        seen.add(key)
    if isinstance(spec.get("selector"), dict):
        causes += label_causes(spec["selector"], "spec.selector")
    return causes


# ---- shared formats ------------------------------------------------------------------------------------------
def port_name_errors(name: str) -> list[str]:
    """IsValidPortName: an IANA service name."""
    errors = []
    if len(name) > 15:
        errors.append("must be no more than 15 characters")
    if not _PORT_NAME_CHARS.match(name):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search(r"[a-z]", name):
        errors.append("must contain at least one letter (a-z)")
    if "--" in name:
        errors.append("must not contain consecutive hyphens")
    if name.startswith("-") or name.endswith("-"):
        errors.append("must not begin or end with a hyphen")
    return errors


def _dns_label(value: str, path: str) -> list[Cause]:
    causes = []
    if len(value) > 63:
        causes.append(_invalid(path, value, "must be no more than 63 characters"))
    if not DNS1123_LABEL.match(value):
        causes.append(_invalid(path, value, DNS1123_LABEL_ERROR))
    return causes


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _dict(value: Any) -> dict:
    """value when it is a JSON object, else an empty one (validation reports wrong types elsewhere)."""
    return value if isinstance(value, dict) else {}


def _required(path: str) -> Cause:
    return Cause(path, "FieldValueRequired", "Required value")


def _invalid(path: str, value: Any, message: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    return Cause(path, "FieldValueInvalid", f"Invalid value: {shown}: {message}")
