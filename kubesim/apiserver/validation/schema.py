"""Structural-schema defaulting, pruning and validation plus CEL rules, as kube-apiserver applies them.

The Kueue kinds use their vendored CRD schemas; the core and batch kinds use the hand-written schemas in
kubesim.apiserver.registry.coreschemas. Both go through the same walker, so error messages and causes look alike.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from kubesim.apiserver.registry.coreschemas import CORE_SCHEMAS, METADATA
from kubesim.apiserver.registry.resources import RESOURCES, crd_schema
from kubesim.apiserver.registry.workloadschemas import SCHEMAS as WORKLOAD_SCHEMAS
from kubesim.apiserver.validation import cel
from kubesim.apiserver.validation.core import pod_quantities
from kubesim.kernel.metadata import (
    DNS1035_LABEL,
    DNS1035_LABEL_ERROR,
    DNS1123_LABEL,
    DNS1123_LABEL_ERROR,
    DNS1123_SUBDOMAIN,
    SUBDOMAIN_ERROR,
    Cause,
    annotation_causes,
    field_value,
    label_causes,
)
from kubesim.kernel.quantity import OPENAPI_PATTERN, QuantityError, parse_quantity

LABEL_NAMED = {"namespaces", "services"}  # these names must be RFC 1123 labels, the rest subdomains
_INLINE_FLAGS = re.compile(r"\(\?([imsU]+)\)")


@cache
def go_regex(pattern: str) -> re.Pattern[str]:
    """A schema pattern (Go RE2 syntax) compiled for Python. RE2 lets `(?i)` appear anywhere, applying to the rest of
    its group (Kueue's AdmissionCheck parameters kind: `^(?i)[a-z]...$`); Python wants global flags first, so a
    top-level one becomes a scoped group `(?i:...)` running to the end."""
    depth, out, closers, i = 0, [], 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":  # a class: its parentheses are characters
            end = pattern.find("]", i + 2)
            end = len(pattern) - 1 if end < 0 else end
            out.append(pattern[i : end + 1])
            i = end + 1
            continue
        m = _INLINE_FLAGS.match(pattern, i)
        if m and depth == 0 and i > 0:
            out.append(f"(?{m.group(1).replace('U', '')}:")
            closers += 1
            i = m.end()
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        out.append(c)
        i += 1
    return re.compile("".join(out) + ")" * closers)


def schema_for(resource: str, version: str | None = None) -> dict:
    if RESOURCES[resource].crd:
        return crd_schema(resource, version)
    return WORKLOAD_SCHEMAS.get(resource) or CORE_SCHEMAS[resource]


def _go_map(value: dict) -> str:
    """Go's %#v of a map[string]interface{} (a list-map key), as kube prints a duplicate one."""
    inner = ", ".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in sorted(value.items()))
    return "map[string]interface {}{" + inner + "}"


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# ---- defaulting and pruning ------------------------------------------------------------------------------
def default_and_prune(resource: str, obj: dict) -> list[str]:
    """Apply schema defaults and drop unknown fields in place; return the unknown field paths."""
    unknown: list[str] = []
    schema = schema_for(resource)
    body = {k: v for k, v in obj.items() if k != "metadata"}
    _walk_defaults(schema, body, "", unknown, top=True)
    if isinstance(obj.get("metadata"), dict):
        _walk_defaults(METADATA, obj["metadata"], "metadata", unknown)
    for k in list(obj):
        if k != "metadata" and k not in body:
            del obj[k]
    obj.update(body)
    return unknown


def prune_unknown(resource: str, obj: dict, version: str | None = None) -> list[str]:
    """Drop the fields a version's schema does not know, in place, without defaulting; return their paths (a
    request to a deprecated version, before it is converted)."""
    unknown: list[str] = []
    body = {k: v for k, v in obj.items() if k != "metadata"}
    _walk_defaults(schema_for(resource, version), body, "", unknown, top=True, defaults=False)
    for k in list(obj):
        if k != "metadata" and k not in body:
            del obj[k]
    obj.update(body)
    return unknown


def _walk_defaults(
    schema: dict, value: Any, path: str, unknown: list[str], top: bool = False, defaults: bool = True
) -> None:
    if isinstance(value, dict) and _type_ok(schema, "object"):
        props = schema.get("properties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        for key in list(value):
            if value[key] is None and not schema.get("nullable"):
                sub = (props or {}).get(key, {})
                if not sub.get("nullable"):
                    del value[key]
                    continue
        if props is not None:
            for key, sub in props.items():
                if defaults and key not in value and "default" in sub and not (top and key == "metadata"):
                    value[key] = copy.deepcopy(sub["default"])
            extra = schema.get("additionalProperties")
            for key in list(value):
                if key in props:
                    _walk_defaults(props[key], value[key], _join(path, key), unknown, defaults=defaults)
                elif isinstance(extra, dict):
                    _walk_defaults(extra, value[key], _join(path, key), unknown, defaults=defaults)
                elif not preserve and extra is not True and not (top and key in ("apiVersion", "kind")):
                    unknown.append(_join(path, key))
                    del value[key]
        elif isinstance(schema.get("additionalProperties"), dict):
            for key in value:
                _walk_defaults(schema["additionalProperties"], value[key], _join(path, key), unknown, defaults=defaults)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _walk_defaults(schema["items"], item, f"{path}[{i}]", unknown, defaults=defaults)


def _type_ok(schema: dict, typ: str) -> bool:
    return schema.get("type") in (None, typ)


# ---- validation --------------------------------------------------------------------------------------------
def validate(resource: str, obj: dict, old: dict | None, version: str | None = None) -> list[Cause]:
    """Schema, CEL and metadata checks; returns the causes of a 422 (empty when valid). `version`: a served older
    version of a CRD whose schema judges obj and old (both in that version's form)."""
    md = obj.get("metadata") or {}
    causes: list[Cause] = []
    _check(METADATA, md, None, "metadata", causes)
    if not causes:  # the name and label checks need well-typed metadata
        causes = validate_metadata(resource, md)
    body, old_body = _rule_view(obj), _rule_view(old) if old is not None else None
    schema = schema_for(resource, version)
    found = _Causes(causes)
    _check(schema, body, old_body, "", found, top=True)
    # kube-apiserver runs a CRD's CEL rules only on an object of the right shape (customresource strategy's
    # hasBlockingErr): a type, required, enum or size violation skips them all, with one error saying so.
    if not any(c.reason in _BLOCKING for c in found):
        return [*found, *found.cel]
    if _has_rules(schema):
        return [*found, Cause("<nil>", "FieldValueInvalid", f'Invalid value: "null": {_RULES_NOT_CHECKED}')]
    return list(found)


def _rule_view(obj: dict) -> dict:
    """The object as a CRD's schema and root CEL rules see it: metadata reduced to name and generateName, the only
    metadata fields kube-apiserver exposes to rules (TrainJob's root rules check metadata.name)."""
    md = obj.get("metadata") or {}
    body = {k: v for k, v in obj.items() if k != "metadata"}
    view = {k: md[k] for k in ("name", "generateName") if isinstance(md, dict) and k in md}
    return {**body, "metadata": view} if view else body


_BLOCKING = frozenset(
    {"FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong", "FieldValueTooMany", "FieldValueTypeInvalid"}
)
_RULES_NOT_CHECKED = (
    "some validation rules were not checked because the object was invalid; correct the existing errors to complete "
    "validation"
)


class _Causes(list):
    """Causes of the schema walk, with the CEL rules' failures kept apart (`.cel`): kube reports them after the
    schema's, and not at all when the schema's block them."""

    def __init__(self, initial: list[Cause]) -> None:
        super().__init__(initial)
        self.cel: list[Cause] = []


def _has_rules(schema: dict) -> bool:
    return bool(known_rules(schema))


def validate_metadata(resource: str, md: dict) -> list[Cause]:
    causes: list[Cause] = []
    name = md.get("name", "")
    if not name and not md.get("generateName"):
        causes.append(Cause("metadata.name", "FieldValueRequired", "Required value: name or generateName is required"))
    elif name:
        if resource == "services":  # Service names become DNS names: RFC 1035 labels
            ok, message = DNS1035_LABEL.match(name), DNS1035_LABEL_ERROR
        elif resource in LABEL_NAMED:
            ok, message = DNS1123_LABEL.match(name), DNS1123_LABEL_ERROR
        else:
            ok, message = DNS1123_SUBDOMAIN.match(name), SUBDOMAIN_ERROR
        limit = 63 if resource in LABEL_NAMED or resource == "jobs" else 253  # Job names become pod label values
        if len(name) > limit:
            causes.append(
                Cause(
                    "metadata.name",
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": must be no more than {limit} characters',
                )
            )
        if not ok:
            causes.append(Cause("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": {message}'))
    causes += label_causes(md.get("labels") or {}, "metadata.labels")
    causes += annotation_causes(md.get("annotations") or {}, "metadata.annotations")
    return causes


def _check(schema: dict, value: Any, old: Any, path: str, causes: list[Cause], top: bool = False) -> None:
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            causes.append(_type_cause(path, value, "string"))
            return
        if isinstance(value, str) and schema.get("pattern") and not go_regex(schema["pattern"]).search(value):
            causes.append(
                Cause(
                    path,
                    "FieldValueInvalid",
                    f"Invalid value: {field_value(value)}: {path} in body should match '{schema['pattern']}'",
                )
            )
        elif schema.get("pattern") == OPENAPI_PATTERN:  # the pattern admits a few non-quantities (`1e1.5`)
            _check_quantity(value, path, causes)
        _rules(schema, value, old, path, causes)
        return
    typ = schema.get("type")
    actual = _type_of(value)
    if typ and actual != typ and not (typ == "number" and actual == "integer"):
        causes.append(_type_cause(path, value, typ))
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(field_value(v) for v in schema["enum"])
        causes.append(
            Cause(
                path, "FieldValueNotSupported", f"Unsupported value: {field_value(value)}: supported values: {allowed}"
            )
        )
    if actual in ("integer", "number"):
        _check_number(schema, value, path, causes)
    elif actual == "string":
        _check_string(schema, value, path, causes)
    elif actual == "array":
        _check_array(schema, value, old, path, causes)
    elif actual == "object":
        _check_object(schema, value, old, path, causes, top)
    _rules(schema, value, old, path, causes)


def _type_cause(path: str, value: Any, typ: str) -> Cause:
    actual = _type_of(value)
    return Cause(
        path, "FieldValueTypeInvalid", f'Invalid value: "{actual}": {path} in body must be of type {typ}: "{actual}"'
    )


def _check_number(schema: dict, value: float, path: str, causes: list[Cause]) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        causes.append(
            Cause(
                path,
                "FieldValueInvalid",
                f"Invalid value: {value}: {path} in body should be greater than or equal to {schema['minimum']}",
            )
        )
    if "maximum" in schema and value > schema["maximum"]:
        causes.append(
            Cause(
                path,
                "FieldValueInvalid",
                f"Invalid value: {value}: {path} in body should be less than or equal to {schema['maximum']}",
            )
        )
    if schema.get("format") == "int32" and not -(2**31) <= value < 2**31:
        causes.append(
            Cause(path, "FieldValueInvalid", f"Invalid value: {value}: {path} in body must be a 32-bit integer")
        )


def _check_string(schema: dict, value: str, path: str, causes: list[Cause]) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        causes.append(Cause(path, "FieldValueTooLong", f"Too long: may not be more than {schema['maxLength']} bytes"))
    if "minLength" in schema and len(value) < schema["minLength"]:
        causes.append(
            Cause(
                path,
                "FieldValueInvalid",
                f"Invalid value: {field_value(value)}: "
                f"{path} in body should be at least {schema['minLength']} chars long",
            )
        )
    if "pattern" in schema and not go_regex(schema["pattern"]).search(value):
        causes.append(
            Cause(
                path,
                "FieldValueInvalid",
                f"Invalid value: {field_value(value)}: {path} in body should match '{schema['pattern']}'",
            )
        )
    if schema.get("format") == "date-time":
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            causes.append(
                Cause(
                    path,
                    "FieldValueInvalid",
                    f"Invalid value: {field_value(value)}: {path} in body must be of type date-time",
                )
            )
    if schema.get("format") == "quantity":
        _check_quantity(value, path, causes)


@dataclass(frozen=True)
class UndecodableQuantity(Cause):
    """A value the OpenAPI Quantity pattern admits but resource.Quantity's parser refuses (`1e1.5`). kube-apiserver
    checks the pattern only; the webhooks that decode the object into Go types refuse it (the API server's
    admission answers their error), and kubesim refuses it where no webhook does, so that it is never stored."""


_QUANTITY_FIELD = {"x-kubernetes-int-or-string": True, "pattern": OPENAPI_PATTERN}


def pod_template_causes(resource: str, obj: dict) -> list[Cause]:
    """A Workload's pod templates as its CRD's schema judges them (kubesim's Workload schema leaves them open, the
    CRD spells out PodTemplateSpec): every quantity an int-or-string matching the Quantity pattern."""
    if resource != "workloads":
        return []
    causes: list[Cause] = []
    for path, value in pod_quantities(resource, obj):
        _check(_QUANTITY_FIELD, value, None, path, causes)
    return causes


def _check_quantity(value: Any, path: str, causes: list[Cause]) -> None:
    try:
        parse_quantity(value)
    except QuantityError as exc:
        causes.append(UndecodableQuantity(path, "FieldValueInvalid", f"Invalid value: {field_value(value)}: {exc}"))


def _check_array(schema: dict, value: list, old: Any, path: str, causes: list[Cause]) -> None:
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        causes.append(
            Cause(path, "FieldValueTooMany", f"Too many: {len(value)}: must have at most {schema['maxItems']} items")
        )
    if "minItems" in schema and len(value) < schema["minItems"]:
        causes.append(
            Cause(
                path,
                "FieldValueInvalid",
                f"Invalid value: {len(value)}: {path} in body should have at least {schema['minItems']} items",
            )
        )
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map":  # kube's validateListMap: the second item of each repeated key, at its index
        keys = schema.get("x-kubernetes-list-map-keys") or []
        counts: dict[str, int] = {}
        for i, item in enumerate(value):
            if isinstance(item, dict):
                key = {k: item[k] for k in keys if k in item}
                dumped = json.dumps(key, sort_keys=True)
                counts[dumped] = counts.get(dumped, 0) + 1
                if counts[dumped] == 2:
                    causes.append(Cause(f"{path}[{i}]", "FieldValueDuplicate", f"Duplicate value: {_go_map(key)}"))
    elif list_type == "set":  # validateListSet: the second appearance of each repeated value
        seen_count: dict[str, int] = {}
        for i, item in enumerate(value):
            dumped = json.dumps(item, sort_keys=True)
            seen_count[dumped] = seen_count.get(dumped, 0) + 1
            if seen_count[dumped] == 2:
                causes.append(Cause(f"{path}[{i}]", "FieldValueDuplicate", f"Duplicate value: {dumped}"))
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _check(items, item, _correlated(schema, item, old), f"{path}[{i}]", causes)


def _correlated(schema: dict, item: Any, old: Any) -> Any:
    """The old item a transition rule compares with: in a list-map, the old entry with the same keys (kube correlates
    only list-maps; other lists' items have no oldSelf)."""
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old, list) or not isinstance(item, dict):
        return None
    keys = schema.get("x-kubernetes-list-map-keys") or []
    wanted = [item.get(k) for k in keys]
    return next((o for o in old if isinstance(o, dict) and [o.get(k) for k in keys] == wanted), None)


def _check_object(schema: dict, value: dict, old: Any, path: str, causes: list[Cause], top: bool) -> None:
    old = old if isinstance(old, dict) else None
    for req in schema.get("required") or []:
        if req not in value and not (top and req == "metadata"):
            causes.append(Cause(_join(path, req), "FieldValueRequired", "Required value"))
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        causes.append(
            Cause(
                path, "FieldValueTooMany", f"Too many: {len(value)}: must have at most {schema['maxProperties']} items"
            )
        )
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key, sub in value.items():
        sub_schema = props.get(key) or (extra if isinstance(extra, dict) else None)
        if sub_schema is not None:
            _check(sub_schema, sub, old.get(key) if old else None, _join(path, key), causes)


@cache
def _compiled(rule: str) -> tuple:
    node = cel.compile_rule(rule)
    return node, cel.uses_old_self(node)


def known_rules(schema: dict) -> list[str]:
    """Every CEL rule text in a schema (the test checks they all compile)."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            out.extend(v["rule"] for v in node.get("x-kubernetes-validations") or [])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    return out


def _rules(schema: dict, value: Any, old: Any, path: str, causes: list[Cause]) -> None:
    for rule in schema.get("x-kubernetes-validations") or []:
        node, transition = _compiled(rule["rule"])
        if transition and old is None:
            continue  # transition rules only run on updates where the old value exists
        env = {"self": value, "oldSelf": old}
        try:
            ok = cel.evaluate(node, env) is True
        except cel.CELError:
            ok = False
        if not ok:
            field = path + rule.get("fieldPath", "")
            field = field or "<nil>"  # what kube-apiserver prints for a rule on the root of the schema
            message = rule.get("message") or f"failed rule: {rule['rule']}"
            # kube's CEL validator reports the schema's type as the bad value ("object", "string", ...)
            cause = Cause(field, "FieldValueInvalid", f"Invalid value: {json.dumps(schema.get('type', ''))}: {message}")
            (causes.cel if isinstance(causes, _Causes) else causes).append(cause)
