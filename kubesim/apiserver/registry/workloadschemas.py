"""Structural schemas for what real workloads attach: volume sources, env and envFrom sources, image pull
secrets (refining the pod spec of coreschemas), PersistentVolumeClaims, Endpoints, Ingress rules and Gateway API
HTTPRoutes. Field names follow the Kubernetes API reference (core/v1, networking.k8s.io/v1, gateway.networking.k8s.io
/v1); unknown fields are reported under fieldValidation=Strict, as a real API server does.

Kept apart from coreschemas.py so these refinements stay in one place: `SCHEMAS` overrides CORE_SCHEMAS by resource.
"""

from __future__ import annotations

import copy

from kubesim.apiserver.registry import coreschemas as core
from kubesim.apiserver.registry.coreschemas import ANY, I32, QMAP, TOP, B, S, arr, enum, obj

KEY_TO_PATH = arr(obj({"key": S, "path": S, "mode": I32}, ["key", "path"]))
LOCAL_REF = obj({"name": S})

VOLUME = obj(
    {
        "name": S,
        "persistentVolumeClaim": obj({"claimName": S, "readOnly": B}, ["claimName"]),
        "nfs": obj({"server": S, "path": S, "readOnly": B}, ["server", "path"]),
        "emptyDir": obj({"medium": S, "sizeLimit": {"x-kubernetes-int-or-string": True}}),
        "secret": obj({"secretName": S, "items": KEY_TO_PATH, "defaultMode": I32, "optional": B}),
        "configMap": obj({"name": S, "items": KEY_TO_PATH, "defaultMode": I32, "optional": B}),
        "hostPath": obj({"path": S, "type": S}, ["path"]),
        "projected": ANY,
        "downwardAPI": ANY,
        "csi": ANY,
        "ephemeral": ANY,
        "image": ANY,
    },
    ["name"],
)
KEY_SELECTOR = obj({"name": S, "key": S, "optional": B}, ["key"])
ENV_VAR = obj(
    {
        "name": S,
        "value": S,
        "valueFrom": obj(
            {
                "secretKeyRef": KEY_SELECTOR,
                "configMapKeyRef": KEY_SELECTOR,
                "fieldRef": obj({"apiVersion": S, "fieldPath": S}, ["fieldPath"]),
                "resourceFieldRef": obj({"containerName": S, "resource": S, "divisor": ANY}, ["resource"]),
                "fileKeyRef": ANY,
            }
        ),
    },
    ["name"],
)
ENV_FROM = obj(
    {
        "prefix": S,
        "secretRef": obj({"name": S, "optional": B}),
        "configMapRef": obj({"name": S, "optional": B}),
    }
)


def _refined_pod_spec() -> dict:
    spec = copy.deepcopy(core.POD_SPEC)
    spec["properties"]["volumes"] = arr(VOLUME)
    spec["properties"]["imagePullSecrets"] = arr(LOCAL_REF)
    for key in ("containers", "initContainers"):
        container = spec["properties"][key]["items"]
        container["properties"]["env"] = arr(ENV_VAR)
        container["properties"]["envFrom"] = arr(ENV_FROM)
    return spec


POD_SPEC = _refined_pod_spec()
POD_TEMPLATE = obj({"metadata": core.TEMPLATE_METADATA, "spec": POD_SPEC}, ["spec"])
POD = obj({**TOP, "spec": POD_SPEC, "status": ANY}, ["spec"])
JOB = copy.deepcopy(core.JOB)
JOB["properties"]["spec"]["properties"]["template"] = POD_TEMPLATE

PERSISTENT_VOLUME_CLAIM = obj(
    {
        **TOP,
        "spec": obj(
            {
                "accessModes": arr(enum("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")),
                "resources": obj({"requests": QMAP, "limits": QMAP}),
                "storageClassName": S,
                "volumeMode": enum("Filesystem", "Block"),
                "volumeName": S,
                "selector": ANY,
                "dataSource": ANY,
                "dataSourceRef": ANY,
                "volumeAttributesClassName": S,
            }
        ),
        "status": ANY,
    }
)
OBJECT_REFERENCE = obj(
    {"kind": S, "namespace": S, "name": S, "uid": S, "apiVersion": S, "resourceVersion": S, "fieldPath": S}
)
ENDPOINT_ADDRESS = obj({"ip": S, "hostname": S, "nodeName": S, "targetRef": OBJECT_REFERENCE}, ["ip"])
ENDPOINTS = obj(
    {
        **TOP,
        "subsets": arr(
            obj(
                {
                    "addresses": arr(ENDPOINT_ADDRESS),
                    "notReadyAddresses": arr(ENDPOINT_ADDRESS),
                    "ports": arr(obj({"name": S, "port": I32, "protocol": S, "appProtocol": S}, ["port"])),
                }
            )
        ),
    }
)
SERVICE_BACKEND = obj({"name": S, "port": obj({"name": S, "number": I32})}, ["name"])
BACKEND = obj({"service": SERVICE_BACKEND, "resource": ANY})
INGRESS = obj(
    {
        **TOP,
        "spec": obj(
            {
                "ingressClassName": S,
                "defaultBackend": BACKEND,
                "tls": arr(obj({"hosts": arr(S), "secretName": S})),
                "rules": arr(
                    obj(
                        {
                            "host": S,
                            "http": obj(
                                {
                                    "paths": arr(
                                        obj(
                                            {
                                                "path": S,
                                                "pathType": enum("Exact", "Prefix", "ImplementationSpecific"),
                                                "backend": BACKEND,
                                            },
                                            ["pathType", "backend"],
                                        )
                                    )
                                },
                                ["paths"],
                            ),
                        }
                    )
                ),
            }
        ),
        "status": ANY,
    }
)
PARENT_REF = obj({"group": S, "kind": S, "namespace": S, "name": S, "sectionName": S, "port": I32}, ["name"])
HTTP_ROUTE = obj(
    {
        **TOP,
        "spec": obj(
            {
                "parentRefs": arr(PARENT_REF),
                "hostnames": arr(S),
                "rules": arr(
                    obj(
                        {
                            "name": S,
                            "matches": arr(
                                obj(
                                    {
                                        "path": obj(
                                            {"type": enum("Exact", "PathPrefix", "RegularExpression"), "value": S}
                                        ),
                                        "headers": arr(ANY),
                                        "queryParams": arr(ANY),
                                        "method": S,
                                    }
                                )
                            ),
                            "filters": arr(ANY),
                            "backendRefs": arr(
                                obj(
                                    {
                                        "group": S,
                                        "kind": S,
                                        "name": S,
                                        "namespace": S,
                                        "port": I32,
                                        "weight": I32,
                                        "filters": arr(ANY),
                                    },
                                    ["name"],
                                )
                            ),
                            "timeouts": obj({"request": S, "backendRequest": S}),
                            "sessionPersistence": ANY,
                            "retry": ANY,
                        }
                    )
                ),
            }
        ),
        "status": ANY,
    }
)

SCHEMAS: dict[str, dict] = {
    "pods": POD,
    "jobs": JOB,
    "persistentvolumeclaims": PERSISTENT_VOLUME_CLAIM,
    "endpoints": ENDPOINTS,
    "ingresses": INGRESS,
    "httproutes": HTTP_ROUTE,
}
