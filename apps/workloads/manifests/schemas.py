"""The kinds a manifest may be, and each kind's real schema, checked strictly (unknown fields refused by path).

Custom resources are checked against the CRD schemas their projects publish (copies in crds/, SOURCES.md), made
strict the way an API server with fieldValidation=Strict is: an object schema that lists its properties accepts no
other key unless it preserves unknown fields. Built-in kinds (batch/v1 Job, v1 Pod) are checked against the models of
the official Kubernetes client, which are generated from the API server's own OpenAPI document.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apps.workloads.models import Kind

if TYPE_CHECKING:
    import jsonschema

CRD_DIR = Path(__file__).resolve().parent / "crds"


@dataclass(frozen=True)
class ManifestKind:
    """A kind the portal submits: its API version and resource, and where its schema comes from."""

    kind: Kind
    api_version: str
    name: str  # the object's kind, as Kubernetes spells it
    plural: str
    crd: str = ""  # the CRD schema file in crds/ (custom resources)
    model: str = ""  # the Kubernetes client's model (built-in kinds)

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def collection_path(self, namespace: str) -> str:
        root = f"/apis/{self.api_version}" if self.group else f"/api/{self.api_version}"
        return f"{root}/namespaces/{namespace}/{self.plural}"


# Every kind the portal observes under Kueue (worker/outside_work.py OWNER_KINDS), at the version it watches.
MANIFEST_KINDS: dict[str, ManifestKind] = {entry.name: entry for entry in (
    ManifestKind(Kind.JOB, "batch/v1", "Job", "jobs", model="V1Job"),
    ManifestKind(Kind.POD, "v1", "Pod", "pods", model="V1Pod"),
    ManifestKind(Kind.JOBSET, "jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", crd="jobsets.json"),
    ManifestKind(Kind.TRAINJOB, "trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", crd="trainjobs.json"),
    ManifestKind(Kind.PYTORCHJOB, "kubeflow.org/v1", "PyTorchJob", "pytorchjobs", crd="pytorchjobs.json"),
    ManifestKind(Kind.RAYJOB, "ray.io/v1", "RayJob", "rayjobs", crd="rayjobs.json"),
    ManifestKind(Kind.RAYCLUSTER, "ray.io/v1", "RayCluster", "rayclusters", crd="rayclusters.json"),
    ManifestKind(Kind.LEADERWORKERSET, "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets",
                 crd="leaderworkersets.json"),
)}
MANIFEST_KIND_VALUES = frozenset(entry.kind.value for entry in MANIFEST_KINDS.values())


def manifest_kind_of(value: str) -> ManifestKind | None:
    """The manifest kind of a workload's `kind` value (jobset -> JobSet), if it is one."""
    return next((entry for entry in MANIFEST_KINDS.values() if entry.kind == value), None)


def _strict(schema: Any) -> Any:
    """The CRD's schema as the API server applies it: unknown fields refused, and a required field that has a default
    not required of the manifest (the server defaults it before it validates, e.g. a RayCluster worker group's
    minReplicas and maxReplicas)."""
    if isinstance(schema, dict):
        schema = {key: _strict(value) for key, value in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema and not schema.get(
                "x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
        properties = schema.get("properties")
        if isinstance(properties, dict) and isinstance(schema.get("required"), list):
            required = [name for name in schema["required"] if "default" not in (properties.get(name) or {})]
            if required:
                schema["required"] = required
            else:
                del schema["required"]
        return schema
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    return schema


@functools.cache
def _crd_validator(file_name: str) -> jsonschema.Draft7Validator:
    import jsonschema  # loaded at the first check, as the client's models below

    crd = json.loads((CRD_DIR / file_name).read_text())
    schema = _strict(crd["schema"])
    # The object's own metadata is the API server's to check (and the portal's: checks.metadata_errors).
    schema["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema)


def path_text(parts: Any) -> str:
    """["spec", "containers", 0, "name"] -> spec.containers[0].name"""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".")


def _crd_errors(entry: ManifestKind, obj: dict[str, Any]) -> list[str]:
    found = []
    for error in _crd_validator(entry.crd).iter_errors(obj):
        where = list(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = set((error.schema or {}).get("properties") or {})
            found += [f"{path_text([*where, key])}: unknown field." for key in error.instance if key not in known]
        else:
            found.append(f"{path_text(where) or '(the object)'}: {error.message}.")
    return sorted(set(found))


_PRIMITIVES = {"str": (str,), "int": (int,), "bool": (bool,), "float": (int, float), "datetime": (str,),
               "date": (str,), "object": (object,)}
_EXPECTED = {"str": "a string", "int": "an integer", "bool": "true or false", "float": "a number"}
_QUANTITY_MAPS = {"requests", "limits", "overhead", "capacity", "allocatable", "hard"}


def _model_errors(value: Any, type_name: str, path: str, *, quantity: bool = False) -> list[str]:
    """Every unknown field and wrongly typed value of `value` as the client's model `type_name` defines it."""
    if value is None:
        return []
    if type_name in _PRIMITIVES:
        allowed = (str, int, float) if quantity else _PRIMITIVES[type_name]
        if type_name != "object" and (not isinstance(value, allowed) or (
                isinstance(value, bool) and type_name != "bool")):
            expected = "a quantity" if quantity else _EXPECTED.get(type_name, f"a {type_name}")
            return [f"{path}: expected {expected}, got {json.dumps(value)[:40]}."]
        return []
    if type_name.startswith(("list[", "List[")):
        if not isinstance(value, list):
            return [f"{path}: expected a list."]
        inner = type_name[5:-1]
        return [problem for index, item in enumerate(value) for problem in _model_errors(item, inner,
                                                                                          f"{path}[{index}]")]
    if type_name.startswith(("dict(", "Dict[")):
        if not isinstance(value, dict):
            return [f"{path}: expected a mapping."]
        inner = type_name[5:-1].split(", ", 1)[1]
        is_quantity = path.rpartition(".")[2] in _QUANTITY_MAPS
        return [problem for key, item in value.items()
                for problem in _model_errors(item, inner, f"{path}.{key}", quantity=is_quantity)]
    if not isinstance(value, dict):
        return [f"{path}: expected an object."]
    model = getattr(_client_models(), type_name)
    by_json_name = {json_name: attr for attr, json_name in model.attribute_map.items()}
    problems = []
    for key, item in value.items():
        attr = by_json_name.get(key)
        where = f"{path}.{key}".lstrip(".")
        if attr is None:
            problems.append(f"{where}: unknown field.")
            continue
        problems += _model_errors(item, model.openapi_types[attr], where)
    return problems


@functools.cache
def _client_models() -> Any:
    """The official client's models, imported at the first check of a built-in kind rather than with this module:
    every web process imports it, few ever check a manifest, and the client with its models holds some 30 MiB of a
    process (docs/architecture.md, The stack)."""
    from kubernetes import client

    return client


def schema_errors(entry: ManifestKind, obj: dict[str, Any]) -> list[str]:
    """Every way `obj` departs from its kind's schema, each message led by its field path."""
    if entry.crd:
        return _crd_errors(entry, obj)
    rest = {key: value for key, value in obj.items() if key != "metadata"}
    return sorted(set(_model_errors(rest, entry.model, "")))
