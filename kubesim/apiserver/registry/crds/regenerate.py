"""Regenerate the vendored Kueue CRD schemas so kubesim never reads /work/shared at run time.

Usage: python -m kubesim.apiserver.registry.crds.regenerate /path/to/kueue-crds
Keeps the v1beta2 version of each CRD (`<plural>.json`) and the served v1beta1's schema (`<plural>.v1beta1.json`,
against which kubesim validates v1beta1 requests); below a Workload's podSets[].template.spec the embedded PodSpec
(over 1 MB) is replaced by a permissive preserve-unknown-fields object, the Workload's own fields stay strict.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).parent
# Kinds the reference CRD directory lacks: their schema is written from Kueue's v1beta2 API types (AdmissionCheck:
# spec.controllerName, immutable, and spec.parameters; status.conditions), so regenerating leaves them alone.
WRITTEN_BY_HAND = frozenset({"admissionchecks"})


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


def main(src: str) -> None:
    for path in sorted(Path(src).glob("kueue.x-k8s.io_*.yaml")):
        crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe loaders only
        version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2")
        schema = version["schema"]["openAPIV3Schema"]
        names = crd["spec"]["names"]
        if names["plural"] == "workloads":
            _trim_pod_spec(schema)
        out = {
            "group": crd["spec"]["group"],
            "version": "v1beta2",
            "kind": names["kind"],
            "plural": names["plural"],
            "singular": names["singular"],
            "shortNames": names.get("shortNames", []),
            "namespaced": crd["spec"]["scope"] == "Namespaced",
            "subresources": sorted(version.get("subresources", {})),
            "printerColumns": _strip(version.get("additionalPrinterColumns", [])),
            "schema": _strip(schema),
        }
        (HERE / f"{names['plural']}.json").write_text(json.dumps(out, separators=(",", ":"), sort_keys=True))
        old = next((v for v in crd["spec"]["versions"] if v["name"] == "v1beta1" and v.get("served")), None)
        if old is not None:  # requests to the deprecated version are validated against its own schema
            old_schema = old["schema"]["openAPIV3Schema"]
            if names["plural"] == "workloads":
                _trim_pod_spec(old_schema)
            (HERE / f"{names['plural']}.v1beta1.json").write_text(
                json.dumps({"version": "v1beta1", "schema": _strip(old_schema)}, separators=(",", ":"), sort_keys=True)
            )


if __name__ == "__main__":
    main(sys.argv[1])
