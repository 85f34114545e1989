"""OpenAPI documents of what kubesim serves: `/openapi/v3` (index + one document per group-version) and `/openapi/v2`.

Built from the schemas kubesim validates with (Kueue's vendored CRD schemas, `coreschemas.py` for the built-in
kinds), so kubectl's validation, `explain`, `apply`, `create -f` and `edit` see the same structure admission
enforces. Every write operation lists the `fieldValidation` query parameter: kubectl then leaves validation to the
server (as against kube-apiserver) and sends `fieldValidation=Strict`.
"""

from __future__ import annotations

import copy
import hashlib
import json
from functools import cache
from typing import Any

from kubesim.apiserver.registry import conversion
from kubesim.apiserver.registry.coreschemas import CORE_SCHEMAS, METADATA
from kubesim.apiserver.registry.discovery import VERSION
from kubesim.apiserver.registry.resources import RESOURCES, Resource, crd_schema

V3_PREFIX = "/openapi/v3"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
STATUS = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
_BUILTIN_PACKAGES = {
    "": "io.k8s.api.core",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
}
PATCH_TYPES = [
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
]
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")


def definition_name(r: Resource) -> str:
    """kube's schema name of a kind: io.k8s.api.batch.v1.Job, io.x-k8s.kueue.v1beta2.ClusterQueue."""
    if r.crd:
        return ".".join(reversed(r.group.split("."))) + f".{r.version}.{r.kind}"
    package = _BUILTIN_PACKAGES.get(r.group, "io.k8s.api." + r.group.split(".", 1)[0])
    return f"{package}.{r.version}.{r.kind}"


def _kind_schema(r: Resource, ref_prefix: str) -> dict:
    if r.crd:
        stored = RESOURCES[r.plural].version == r.version
        schema = copy.deepcopy(crd_schema(r.plural)) if stored else conversion.schema(r)
    else:
        # a kind served without a schema of its own (Endpoints, HTTPRoute) is documented as an open object
        schema = copy.deepcopy(CORE_SCHEMAS.get(r.plural, {"x-kubernetes-preserve-unknown-fields": True}))
    schema.setdefault("type", "object")
    props = schema.setdefault("properties", {})
    props["apiVersion"] = {
        "type": "string",
        "description": "APIVersion defines the versioned schema of this representation of an object.",
    }
    props["kind"] = {"type": "string", "description": "Kind is a string value representing the REST resource."}
    props["metadata"] = {
        "allOf": [{"$ref": ref_prefix + OBJECT_META}],
        "description": "Standard object's metadata.",
    }
    scope = "namespaced" if r.namespaced else "cluster-scoped"
    schema["description"] = f"{r.kind} ({r.api_version}, {scope}), as kubesim serves and validates it."
    schema["x-kubernetes-group-version-kind"] = [{"group": r.group, "version": r.version, "kind": r.kind}]
    return schema


def _common_schemas() -> dict[str, dict]:
    meta = copy.deepcopy(METADATA)
    meta["description"] = "ObjectMeta is metadata that all persisted resources must have."
    status = {
        "type": "object",
        "description": "Status is a return value for calls that don't return other objects.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "status": {"type": "string"},
            "message": {"type": "string"},
            "reason": {"type": "string"},
            "code": {"type": "integer", "format": "int32"},
            "details": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Status"}],
    }
    return {OBJECT_META: meta, STATUS: status}


def _query(name: str) -> dict:
    return {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}


def _operation(r: Resource, action: str, ref: str, params: tuple[str, ...], v3: bool, body: list[str]) -> dict:
    op: dict[str, Any] = {
        "operationId": f"{action}{r.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
        "parameters": [_query(p) if v3 else {"name": p, "in": "query", "type": "string"} for p in params],
    }
    if v3:
        op["responses"] = {"200": {"content": {"application/json": {"schema": {"$ref": ref}}}}}
        if body:
            op["requestBody"] = {"content": {t: {"schema": {"$ref": ref}} for t in body}}
    else:
        op["responses"] = {"200": {"schema": {"$ref": ref}}}
        if body:
            op["consumes"] = body
            op["parameters"].append({"name": "body", "in": "body", "required": True, "schema": {"$ref": ref}})
    return op


def _paths(r: Resource, ref: str, v3: bool) -> dict[str, dict]:
    base = "/api/v1" if not r.group else f"/apis/{r.group}/{r.version}"
    collection = f"{base}/namespaces/{{namespace}}/{r.plural}" if r.namespaced else f"{base}/{r.plural}"
    item = collection + "/{name}"
    json_only = ["application/json"]
    patch_types = PATCH_TYPES if not r.crd else [t for t in PATCH_TYPES if "strategic" not in t]
    return {
        collection: {
            "get": _operation(r, "list", ref, ("labelSelector", "fieldSelector", "limit", "continue"), v3, []),
            "post": _operation(r, "post", ref, _WRITE_PARAMS, v3, json_only),
            "delete": _operation(r, "deletecollection", ref, ("labelSelector", "fieldSelector", "dryRun"), v3, []),
        },
        item: {
            "get": _operation(r, "get", ref, (), v3, []),
            "put": _operation(r, "put", ref, _WRITE_PARAMS, v3, json_only),
            "patch": _operation(r, "patch", ref, (*_WRITE_PARAMS, "force"), v3, patch_types),
            "delete": _operation(r, "delete", ref, ("dryRun", "propagationPolicy"), v3, []),
        },
    }


def _served() -> list[Resource]:
    return [*RESOURCES.values(), *conversion.old_versions()]


def _doc_key(r: Resource) -> str:
    return "api/v1" if not r.group else f"apis/{r.group}/{r.version}"


@cache
def v3_document(key: str) -> dict | None:
    """The OpenAPI 3.0 document of one group-version (`api/v1`, `apis/batch/v1`), None for one kubesim lacks."""
    served = [r for r in _served() if _doc_key(r) == key]
    if not served:
        return None
    prefix = "#/components/schemas/"
    schemas = _common_schemas()
    paths: dict[str, dict] = {}
    for r in served:
        schemas[definition_name(r)] = _kind_schema(r, prefix)
        paths.update(_paths(r, prefix + definition_name(r), v3=True))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (kubesim)", "version": VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }


@cache
def _hash(key: str) -> str:
    return hashlib.sha512(json.dumps(v3_document(key), sort_keys=True).encode()).hexdigest()[:64].upper()


def v3_index() -> dict:
    keys = sorted({_doc_key(r) for r in _served()})
    return {"paths": {k: {"serverRelativeURL": f"{V3_PREFIX}/{k}?hash={_hash(k)}"} for k in keys}}


@cache
def v2_document() -> dict:
    """Swagger 2.0 of everything kubesim serves, in JSON (kube also offers it as protobuf; kubesim does not)."""
    prefix = "#/definitions/"
    definitions = _common_schemas()
    paths: dict[str, dict] = {}
    for r in _served():
        definitions[definition_name(r)] = _v2_schema(_kind_schema(r, prefix))
        paths.update(_paths(r, prefix + definition_name(r), v3=False))
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes (kubesim)", "version": VERSION["gitVersion"]},
        "paths": paths,
        "definitions": definitions,
    }


def _v2_schema(schema: Any) -> Any:
    """Swagger 2.0 has no `nullable` and no `anyOf`/`oneOf`: dropped, the structure stays."""
    if isinstance(schema, dict):
        return {k: _v2_schema(v) for k, v in schema.items() if k not in ("nullable", "anyOf", "oneOf")}
    if isinstance(schema, list):
        return [_v2_schema(v) for v in schema]
    return schema


def document(path: str) -> dict | None:
    """The body for an /openapi/... path, None if there is no such document."""
    if path == "/openapi/v2":
        return v2_document()
    if path == V3_PREFIX:
        return v3_index()
    if path.startswith(V3_PREFIX + "/"):
        return v3_document(path[len(V3_PREFIX) + 1 :])
    return None
