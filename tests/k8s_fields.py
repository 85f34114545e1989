"""Check that a manifest uses only field names the Kubernetes API knows, using the official client's models."""

from __future__ import annotations

from typing import Any

from kubernetes import client

PRIMITIVES = {"str", "int", "bool", "float", "object", "datetime", "date"}


def unknown_fields(value: Any, type_name: str, path: str = "") -> list[str]:
    """Every key of `value` that the model `type_name` (e.g. "V1Job") does not define, as dotted paths."""
    if type_name in PRIMITIVES or value is None:
        return []
    if type_name.startswith(("list[", "List[")):
        inner = type_name[5:-1]
        return [problem for index, item in enumerate(value) for problem in unknown_fields(item, inner,
                                                                                           f"{path}[{index}]")]
    if type_name.startswith(("dict(", "Dict[")):
        inner = type_name[5:-1].split(", ", 1)[1]
        return [problem for key, item in value.items() for problem in unknown_fields(item, inner, f"{path}.{key}")]
    model = getattr(client, type_name)
    by_json_name = {json_name: attr for attr, json_name in model.attribute_map.items()}
    problems = []
    for key, item in value.items():
        attr = by_json_name.get(key)
        if attr is None:
            problems.append(f"{path}.{key}".lstrip("."))
            continue
        problems += unknown_fields(item, model.openapi_types[attr], f"{path}.{key}")
    return problems
