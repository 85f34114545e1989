"""Regenerate the vendored CRD schemas so kubesim never reads CRD YAML at run time.

Usage: python -m kubesim.apiserver.registry.crds.regenerate DIR [DIR ...]
Each DIR is searched for Kueue's CRDs (`kueue.x-k8s.io_*.yaml`) and for the workload operators' CRDs listed in
UPSTREAM (JobSet; LeaderWorkerSet; Kubeflow Trainer's TrainJob and training runtimes; training-operator's PyTorchJob;
KubeRay's RayJob and RayCluster; cluster-autoscaler's ProvisioningRequest; KAI Scheduler's Queue and PodGroup);
SOURCES.md says where each comes from. An operator's file must be the exact upstream release file (its sha256 is
checked), so the JSON here is always derived from the release SOURCES.md names.

Kueue: keeps the v1beta2 version of each CRD (`<plural>.json`) and the served v1beta1's schema
(`<plural>.v1beta1.json`, against which kubesim validates v1beta1 requests); below a Workload's
podSets[].template.spec the embedded PodSpec (over 1 MB) is replaced by a permissive preserve-unknown-fields object,
the Workload's own fields stay strict. Operators: the storage version, whole (a JobSet's pod templates are validated
strictly, as kube-apiserver does with the CRD installed), and a served deprecated version's schema and warning
(`<plural>.<version>.json`; KubeRay's v1alpha1). Descriptions are dropped from every schema.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).parent
# Kinds the reference CRD directory lacks: their schema is written from Kueue's v1beta2 API types (AdmissionCheck:
# spec.controllerName, immutable, and spec.parameters; status.conditions), so regenerating leaves them alone.
WRITTEN_BY_HAND = frozenset({"admissionchecks", "provisioningrequestconfigs"})
# The operators' CRD files kubesim vendors: file name -> sha256 of the release file (SOURCES.md).
UPSTREAM = {
    "jobset.x-k8s.io_jobsets.yaml": "d022b87624512cf0b6741b31b24a2bea9945b5a838b50713af29332c878bb6fe",
    "leaderworkerset.x-k8s.io_leaderworkersets.yaml": (
        "c5dcad8ed943e495490241f00b9a1b45d51203b6d484020db3636d5bf553568e"
    ),
    "trainer.kubeflow.org_trainjobs.yaml": "a742cafc5b5582640c7e0b7467c024fc237256fbca5ba0a9f0531dfb66d64416",
    "trainer.kubeflow.org_clustertrainingruntimes.yaml": (
        "ec84dc3388fcdbe8c61d3c247a773d14458dd9438e995bea8e50d2a18080eef9"
    ),
    "trainer.kubeflow.org_trainingruntimes.yaml": "69b8dbdf60a18e28cddcc2b8dfc4ce72a943e14b531b9389d593118faee4919f",
    "kubeflow.org_pytorchjobs.yaml": "8b8a8a719cc94173169290251e817f7ac2bb425c20b6c2fa813397bcf4e932ed",
    "ray.io_rayjobs.yaml": "01a5cf3b17c1769fda44af7e82debcd98722f0c27b9ab84d084681c6649121f5",
    "ray.io_rayclusters.yaml": "c44704442eef0c6721ad40c1d66782c8bd3fdab9d3344306a5820910a679baa1",
    "autoscaling.x-k8s.io_provisioningrequests.yaml": (
        "7f523beb246ceaa3ba4d924cd7c7d82d625419d03932be658784935802836e85"
    ),
    "scheduling.run.ai_queues.yaml": "42ba49d1f593f605f18ca03f3e18d36f853aacbf7fac7287689a31c0de620a93",
    "scheduling.run.ai_podgroups.yaml": "e960c08a186a0c9fc386f2cdd7a61063c32e87e31eb001005257bc0fb9b31dd6",
}


def _trim_pod_spec(schema: dict) -> None:
    """Swap the embedded PodSpec under podSets[].template.spec for a permissive object."""
    template = schema["properties"]["spec"]["properties"]["podSets"]["items"]["properties"]["template"]
    template["properties"]["spec"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _strip(node: object) -> object:
    """Drop documentation strings (not a property named description): most of the bytes, never used.
    Printer column descriptions go too: Table column definitions carry an empty description."""
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if not (k == "description" and isinstance(v, str))}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _load(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe loaders only


def _entry(crd: dict, version: dict, schema: dict) -> dict:
    names = crd["spec"]["names"]
    return {
        "group": crd["spec"]["group"],
        "version": version["name"],
        "kind": names["kind"],
        "plural": names["plural"],
        "singular": names["singular"],
        "shortNames": names.get("shortNames", []),
        "categories": names.get("categories", []),
        "namespaced": crd["spec"]["scope"] == "Namespaced",
        "subresources": sorted(version.get("subresources", {})),
        "printerColumns": _strip(version.get("additionalPrinterColumns", [])),
        "schema": _strip(schema),
    }


def _write(plural: str, data: dict) -> None:
    (HERE / f"{plural}.json").write_text(json.dumps(data, separators=(",", ":"), sort_keys=True))


def kueue(path: Path) -> None:
    crd = _load(path)
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2")
    schema = version["schema"]["openAPIV3Schema"]
    plural = crd["spec"]["names"]["plural"]
    if plural == "workloads":
        _trim_pod_spec(schema)
    entry = _entry(crd, version, schema)
    del entry["categories"]  # kubesim files Kueue's kinds under category `kueue` itself
    _write(plural, entry)
    old = next((v for v in crd["spec"]["versions"] if v["name"] == "v1beta1" and v.get("served")), None)
    if old is not None:  # requests to the deprecated version are validated against its own schema
        old_schema = old["schema"]["openAPIV3Schema"]
        if plural == "workloads":
            _trim_pod_spec(old_schema)
        _write(f"{plural}.v1beta1", {"version": "v1beta1", "schema": _strip(old_schema)})


def operator(path: Path) -> None:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != UPSTREAM[path.name]:
        raise SystemExit(f"{path}: sha256 {digest} is not the release file's ({UPSTREAM[path.name]}); see SOURCES.md")
    crd = _load(path)
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    plural = crd["spec"]["names"]["plural"]
    _write(plural, _entry(crd, version, version["schema"]["openAPIV3Schema"]))
    for old in crd["spec"]["versions"]:
        if old.get("served") and not old.get("storage"):
            _write(
                f"{plural}.{old['name']}",
                {
                    "version": old["name"],
                    "deprecationWarning": old.get("deprecationWarning", ""),
                    "printerColumns": _strip(old.get("additionalPrinterColumns", [])),
                    "schema": _strip(old["schema"]["openAPIV3Schema"]),
                },
            )


def main(*sources: str) -> None:
    for src in sources:
        for path in sorted(Path(src).glob("kueue.x-k8s.io_*.yaml")):
            kueue(path)
        for name in UPSTREAM:
            if (Path(src) / name).exists():
                operator(Path(src) / name)


if __name__ == "__main__":
    main(*sys.argv[1:])
