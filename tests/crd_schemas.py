"""Validate generated objects against Kueue's own CRD schemas in ../shared/reference/kueue-crds/, and KAI Scheduler's
(Queue, PodGroup) against the release schemas kubesim vendors (kubesim/apiserver/registry/crds/SOURCES.md).

The OpenAPI schemas are made strict the way an API server with fieldValidation=Strict is: an object schema with
`properties` accepts no other keys unless it says x-kubernetes-preserve-unknown-fields. Tests that need the
schemas skip with a clear message where ../shared is absent.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from kubesim.apiserver.registry.resources import KAI_GROUP, crd_schema

CRD_DIR = Path(__file__).resolve().parents[2] / "shared" / "reference" / "kueue-crds"
KINDS = {
    "ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml",
    "Cohort": "kueue.x-k8s.io_cohorts.yaml",
    "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml",
    "LocalQueue": "kueue.x-k8s.io_localqueues.yaml",
    "WorkloadPriorityClass": "kueue.x-k8s.io_workloadpriorityclasses.yaml",
    "Workload": "kueue.x-k8s.io_workloads.yaml",
}


def strict_schema(schema: Any) -> Any:
    """`schema` as an API server with fieldValidation=Strict applies it (also for other projects' CRDs' schemas)."""
    if isinstance(schema, dict):
        schema = {key: strict_schema(value) for key, value in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [strict_schema(item) for item in schema]
    return schema


@functools.cache
def _validator(kind: str, version: str) -> jsonschema.Draft7Validator:
    if not CRD_DIR.is_dir():
        pytest.skip(f"Kueue CRD schemas not found at {CRD_DIR} (../shared is absent); schema checks skipped")
    crd = yaml.safe_load((CRD_DIR / KINDS[kind]).read_text())
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = strict_schema(served["schema"]["openAPIV3Schema"])
    # metadata is not described by CRDs; the API server checks it itself.
    schema["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema)


def validate_kueue_object(obj: dict[str, Any]) -> None:
    """Raise AssertionError listing every schema violation of a kueue.x-k8s.io/v1beta2 object."""
    group, version = obj["apiVersion"].split("/")
    assert group == "kueue.x-k8s.io", obj["apiVersion"]
    errors = sorted(_validator(obj["kind"], version).iter_errors(obj), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{obj['kind']} {obj['metadata']['name']}: {'.'.join(map(str, e.path))}: {e.message}"
                                 for e in errors)


KAI_KINDS = {"Queue": ("v2", "queues"), "PodGroup": ("v2alpha2", "podgroups")}


@functools.cache
def _kai_validator(kind: str) -> jsonschema.Draft7Validator:
    schema = strict_schema(crd_schema(KAI_KINDS[kind][1]))
    schema["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema)


def validate_kai_object(obj: dict[str, Any]) -> None:
    """Raise AssertionError listing every schema violation of a KAI Queue (scheduling.run.ai/v2) or PodGroup
    (scheduling.run.ai/v2alpha2)."""
    version, _ = KAI_KINDS[obj["kind"]]
    assert obj["apiVersion"] == f"{KAI_GROUP}/{version}", obj["apiVersion"]
    errors = sorted(_kai_validator(obj["kind"]).iter_errors(obj), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{obj['kind']} {obj['metadata']['name']}: {'.'.join(map(str, e.path))}: {e.message}"
                                 for e in errors)
