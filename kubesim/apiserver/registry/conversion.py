"""Kueue's deprecated kueue.x-k8s.io/v1beta1, served by converting to and from the stored v1beta2, as Kueue's
conversion webhook does (Kueue 0.19/0.20 still serve it; every v1beta1 response carries the CRD's deprecation
warning). The conversions are Kueue's documented field renames (Kueue's 0.15 release notes):

| kind | v1beta1 | v1beta2 |
| --- | --- | --- |
| ClusterQueue | `spec.cohort` | `spec.cohortName` |
| ClusterQueue | `spec.admissionChecks: [name]` | `spec.admissionChecksStrategy.admissionChecks: [{name}]` |
| ClusterQueue | flavorFungibility `Borrow` / `Preempt` (aliases; `MayStopSearch` is kept both ways) | `MayStopSearch` |
| Workload | `spec.priorityClassName` + `spec.priorityClassSource` | `spec.priorityClassRef {group, kind, name}` |
| LocalQueue | `status.flavorUsage` | `status.flavorsUsage` |
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from kubesim.apiserver.registry.resources import CRD_DIR, KUEUE_GROUP, RESOURCES, Resource, crd_schema

STORAGE = "v1beta2"
OLD = "v1beta1"
DEPRECATION_WARNING = "This version is deprecated. Use v1beta2 instead."
_SOURCES = {
    "kueue.x-k8s.io/workloadpriorityclass": (KUEUE_GROUP, "WorkloadPriorityClass"),
    "scheduling.k8s.io/priorityclass": ("scheduling.k8s.io", "PriorityClass"),
}


def old_version_resource(group: str, version: str, plural: str) -> Resource | None:
    """The stored resource behind a path of a deprecated version kubesim converts (None for anything else)."""
    if group != KUEUE_GROUP or version != OLD:
        return None
    r = RESOURCES.get(plural)
    return r if r is not None and r.group == KUEUE_GROUP else None


def old_versions() -> list[Resource]:
    """The v1beta1 face of every Kueue kind, for discovery and OpenAPI."""
    return [dataclasses.replace(r, version=OLD) for r in RESOURCES.values() if r.group == KUEUE_GROUP]


def to_storage(kind: str, obj: Any) -> Any:
    """A v1beta1 object (or patch) as v1beta2."""
    if not isinstance(obj, dict):
        return obj
    out = copy.deepcopy(obj)
    if out.get("apiVersion") == f"{KUEUE_GROUP}/{OLD}":
        out["apiVersion"] = f"{KUEUE_GROUP}/{STORAGE}"
    spec = out.get("spec") if isinstance(out.get("spec"), dict) else None
    status = out.get("status") if isinstance(out.get("status"), dict) else None
    if kind == "ClusterQueue" and spec is not None:
        _rename(spec, "cohort", "cohortName")
        checks = spec.pop("admissionChecks", None)
        if checks:
            strategy = spec.setdefault("admissionChecksStrategy", {})
            strategy.setdefault("admissionChecks", []).extend({"name": c} for c in checks)
        fungibility = spec.get("flavorFungibility")
        if isinstance(fungibility, dict):
            for field, old in (("whenCanBorrow", "Borrow"), ("whenCanPreempt", "Preempt")):
                if fungibility.get(field) == old:
                    fungibility[field] = "MayStopSearch"
    if kind == "Workload" and spec is not None and "priorityClassName" in spec:
        name = spec.pop("priorityClassName")
        source = spec.pop("priorityClassSource", "") or "kueue.x-k8s.io/workloadpriorityclass"
        if name:
            group, ref_kind = _SOURCES.get(source, _SOURCES["kueue.x-k8s.io/workloadpriorityclass"])
            spec["priorityClassRef"] = {"group": group, "kind": ref_kind, "name": name}
    if kind == "LocalQueue" and status is not None:
        _rename(status, "flavorUsage", "flavorsUsage")
        status.pop("flavors", None)
    return out


def from_storage(kind: str, obj: Any) -> Any:
    """A stored v1beta2 object as v1beta1."""
    if not isinstance(obj, dict) or obj.get("kind") not in (kind, None):
        return obj
    out = copy.deepcopy(obj)
    if out.get("apiVersion") == f"{KUEUE_GROUP}/{STORAGE}":
        out["apiVersion"] = f"{KUEUE_GROUP}/{OLD}"
    spec = out.get("spec") if isinstance(out.get("spec"), dict) else None
    status = out.get("status") if isinstance(out.get("status"), dict) else None
    if kind == "ClusterQueue" and spec is not None:  # MayStopSearch stays: v1beta1 has it too (Borrow is its alias)
        _rename(spec, "cohortName", "cohort")
    if kind == "Workload" and spec is not None and isinstance(spec.get("priorityClassRef"), dict):
        ref = spec.pop("priorityClassRef")
        source = next((s for s, gk in _SOURCES.items() if gk == (ref.get("group"), ref.get("kind"))), "")
        spec["priorityClassName"] = ref.get("name")
        spec["priorityClassSource"] = source
    if kind == "LocalQueue" and status is not None:
        _rename(status, "flavorsUsage", "flavorUsage")
    return out


# Field paths of a refusal that name a renamed field: a v1beta1 request is validated against v1beta1's schema.
_OLD_PATHS = {
    "ClusterQueue": (("spec.cohortName", "spec.cohort"),),
    "LocalQueue": (("status.flavorsUsage", "status.flavorUsage"),),
}


def _status_from_storage(kind: str, body: dict) -> dict:
    renames = _OLD_PATHS.get(kind, ())
    causes = (body.get("details") or {}).get("causes")
    if not renames or not isinstance(causes, list):
        return body
    out = copy.deepcopy(body)
    for new, old in renames:
        for cause in out["details"]["causes"]:
            f = cause.get("field", "")
            if f == new or f.startswith((f"{new}.", f"{new}[")):
                cause["field"] = old + f[len(new) :]
        out["message"] = str(out.get("message", "")).replace(f"{new}:", f"{old}:").replace(f"{new}.", f"{old}.")
    return out


def response_from_storage(kind: str, body: Any) -> Any:
    """A response body (object, list, watch event) as v1beta1; Tables pass unchanged, a Status's causes name
    v1beta1's fields."""
    if not isinstance(body, dict):
        return body
    if body.get("kind") == "Status":
        return _status_from_storage(kind, body)
    if "items" in body and str(body.get("kind", "")).endswith("List"):
        return {**body, "apiVersion": f"{KUEUE_GROUP}/{OLD}", "items": [from_storage(kind, i) for i in body["items"]]}
    if "type" in body and isinstance(body.get("object"), dict):  # a watch event
        return {**body, "object": from_storage(kind, body["object"])}
    return from_storage(kind, body)


def schema(r: Resource) -> dict:
    """The v1beta1 structural schema of a Kueue kind: the CRD's own (vendored), else derived from the stored
    version's."""
    if (CRD_DIR / f"{r.plural}.{OLD}.json").exists():
        return copy.deepcopy(crd_schema(r.plural, OLD))
    out = copy.deepcopy(crd_schema(r.plural))
    props = out.get("properties") or {}
    spec = (props.get("spec") or {}).get("properties")
    status = (props.get("status") or {}).get("properties")
    if r.kind == "ClusterQueue" and spec is not None:
        _rename(spec, "cohortName", "cohort")
        spec["admissionChecks"] = {"type": "array", "items": {"type": "string"}}
        fungibility = (spec.get("flavorFungibility") or {}).get("properties") or {}
        for field, old in (("whenCanBorrow", "Borrow"), ("whenCanPreempt", "Preempt")):
            if field in fungibility:
                fungibility[field] = {**fungibility[field], "enum": ["MayStopSearch", "TryNextFlavor", old]}
        spec.pop("concurrentAdmissionPolicy", None)  # v1beta2 only
    if r.kind == "Workload" and spec is not None:
        spec.pop("priorityClassRef", None)
        spec["priorityClassName"] = {"type": "string"}
        spec["priorityClassSource"] = {"type": "string", "enum": [*_SOURCES, ""]}
    if r.kind == "LocalQueue" and status is not None:
        _rename(status, "flavorsUsage", "flavorUsage")
    return out


def _rename(obj: dict, old: str, new: str) -> None:
    if old in obj:
        obj[new] = obj.pop(old)
