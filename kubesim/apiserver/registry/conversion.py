"""Deprecated versions still served, converted to and from the stored version: Kueue's kueue.x-k8s.io/v1beta1 (stored
v1beta2), as Kueue's conversion webhook does (Kueue 0.19/0.20 still serve it), and KubeRay's ray.io/v1alpha1 (stored
v1), which KubeRay's CRDs serve without a conversion webhook (strategy None: only apiVersion changes; each request is
judged by the old version's own vendored schema). Every response of a deprecated version carries its CRD's
deprecation warning. Kueue's conversions are its documented field renames (Kueue's 0.15 release notes):

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
import json
from functools import cache
from typing import Any

from kubesim.apiserver.registry.resources import CRD_DIR, KUEUE_GROUP, RESOURCES, Resource, crd_schema

STORAGE = "v1beta2"
OLD = "v1beta1"
DEPRECATION_WARNING = "This version is deprecated. Use v1beta2 instead."
SERVED_OLD = {KUEUE_GROUP: (OLD, STORAGE), "ray.io": ("v1alpha1", "v1")}
"""group -> (deprecated version served, stored version)."""
_SOURCES = {
    "kueue.x-k8s.io/workloadpriorityclass": (KUEUE_GROUP, "WorkloadPriorityClass"),
    "scheduling.k8s.io/priorityclass": ("scheduling.k8s.io", "PriorityClass"),
}


def old_version_resource(group: str, version: str, plural: str) -> Resource | None:
    """The stored resource behind a path of a deprecated version kubesim converts (None for anything else)."""
    if SERVED_OLD.get(group, ("",))[0] != version:
        return None
    r = RESOURCES.get(plural)
    return r if r is not None and r.group == group else None


def old_versions() -> list[Resource]:
    """The deprecated face of every kind that has one (Kueue's v1beta1, KubeRay's v1alpha1), for discovery and
    OpenAPI."""
    return [dataclasses.replace(r, version=SERVED_OLD[r.group][0]) for r in RESOURCES.values() if r.group in SERVED_OLD]


@cache
def warning(r: Resource) -> str:
    """The deprecation warning of a kind's deprecated version (its CRD's deprecationWarning)."""
    if r.group == KUEUE_GROUP:
        return DEPRECATION_WARNING
    return json.loads((CRD_DIR / f"{r.plural}.{SERVED_OLD[r.group][0]}.json").read_text())["deprecationWarning"]


def _versions(kind: str) -> tuple[str, str, str] | None:
    """(group, deprecated version, stored version) of a kind served in a deprecated version."""
    r = next((r for r in RESOURCES.values() if r.kind == kind and r.group in SERVED_OLD), None)
    return None if r is None else (r.group, *SERVED_OLD[r.group])


def to_storage(kind: str, obj: Any) -> Any:
    """A v1beta1 object (or patch) as v1beta2."""
    if not isinstance(obj, dict):
        return obj
    out = copy.deepcopy(obj)
    versions = _versions(kind)
    if versions is not None and out.get("apiVersion") == f"{versions[0]}/{versions[1]}":
        out["apiVersion"] = f"{versions[0]}/{versions[2]}"
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
    versions = _versions(kind)
    if versions is not None and out.get("apiVersion") == f"{versions[0]}/{versions[2]}":
        out["apiVersion"] = f"{versions[0]}/{versions[1]}"
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
        versions = _versions(kind)
        api_version = f"{versions[0]}/{versions[1]}" if versions is not None else body.get("apiVersion")
        return {**body, "apiVersion": api_version, "items": [from_storage(kind, i) for i in body["items"]]}
    if "type" in body and isinstance(body.get("object"), dict):  # a watch event
        return {**body, "object": from_storage(kind, body["object"])}
    return from_storage(kind, body)


def schema(r: Resource) -> dict:
    """The deprecated version's structural schema: the CRD's own (vendored), else (Kueue) derived from the stored
    version's."""
    old = SERVED_OLD[r.group][0]
    if (CRD_DIR / f"{r.plural}.{old}.json").exists():
        return copy.deepcopy(crd_schema(r.plural, old))
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
