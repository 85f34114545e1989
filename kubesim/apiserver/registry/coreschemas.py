"""Hand-written structural schemas for the core and batch kinds kubesim serves.

They cover the fields a portal commonly sets; deep, rarely used structures (probes, affinity, security
contexts) are accepted as-is. Unknown fields at the top level, in spec, in containers and in metadata are
reported, as a real API server does under fieldValidation=Strict.
"""

from __future__ import annotations

from typing import Any

S: dict = {"type": "string"}
I32: dict = {"type": "integer", "format": "int32"}
I64: dict = {"type": "integer", "format": "int64"}
B: dict = {"type": "boolean"}
ANY: dict = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
STRMAP: dict = {"type": "object", "additionalProperties": S}
QUANTITY: dict = {"x-kubernetes-int-or-string": True}  # parsed by kubesim.apiserver.validation.core like kube's decoder
QMAP: dict = {"type": "object", "additionalProperties": QUANTITY}


def obj(props: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict:
    out: dict = {"type": "object", "properties": props, **extra}
    if required:
        out["required"] = required
    return out


def arr(items: dict, **extra: Any) -> dict:
    return {"type": "array", "items": items, **extra}


def enum(*values: str) -> dict:
    return {"type": "string", "enum": list(values)}


METADATA = obj(
    {
        "name": S,
        "generateName": S,
        "namespace": S,
        "labels": STRMAP,
        "annotations": STRMAP,
        "ownerReferences": arr(
            obj(
                {"apiVersion": S, "kind": S, "name": S, "uid": S, "controller": B, "blockOwnerDeletion": B},
                ["apiVersion", "kind", "name", "uid"],
            )
        ),
        "finalizers": arr(S),
        "uid": S,
        "resourceVersion": S,
        "generation": I64,
        "creationTimestamp": S,
        "deletionTimestamp": S,
        "deletionGracePeriodSeconds": I64,
        "managedFields": {"type": "array", "items": ANY},
        "selfLink": S,
    }
)

TOLERATION = obj(
    {
        "key": S,
        "operator": enum("Exists", "Equal"),
        "value": S,
        "effect": enum("NoSchedule", "PreferNoSchedule", "NoExecute"),
        "tolerationSeconds": I64,
    }
)
ENV_VAR = obj({"name": S, "value": S, "valueFrom": ANY}, ["name"])
CONTAINER = obj(
    {
        "name": S,
        "image": S,
        "command": arr(S),
        "args": arr(S),
        "workingDir": S,
        "env": arr(ENV_VAR),
        "envFrom": arr(ANY),
        "resources": obj({"limits": QMAP, "requests": QMAP, "claims": arr(ANY)}),
        "ports": arr(
            obj(
                {"name": S, "containerPort": I32, "protocol": enum("TCP", "UDP", "SCTP"), "hostPort": I32, "hostIP": S},
                ["containerPort"],
            )
        ),
        "volumeMounts": arr(
            obj(
                {
                    "name": S,
                    "mountPath": S,
                    "readOnly": B,
                    "subPath": S,
                    "subPathExpr": S,
                    "mountPropagation": S,
                    "recursiveReadOnly": S,
                },
                ["name", "mountPath"],
            )
        ),
        "volumeDevices": arr(ANY),
        "imagePullPolicy": enum("Always", "Never", "IfNotPresent"),
        "securityContext": ANY,
        "livenessProbe": ANY,
        "readinessProbe": ANY,
        "startupProbe": ANY,
        "lifecycle": ANY,
        "resizePolicy": arr(ANY),
        "restartPolicy": S,
        "restartPolicyRules": arr(ANY),
        "stdin": B,
        "stdinOnce": B,
        "tty": B,
        "terminationMessagePath": S,
        "terminationMessagePolicy": enum("File", "FallbackToLogsOnError"),
    },
    ["name", "image"],
)
POD_SPEC = obj(
    {
        "containers": arr(CONTAINER),  # an empty list: kubesim.apiserver.validation.core
        "initContainers": arr(CONTAINER),
        "ephemeralContainers": arr(ANY),
        "restartPolicy": enum("Always", "OnFailure", "Never"),
        "nodeSelector": STRMAP,
        "nodeName": S,
        "tolerations": arr(TOLERATION),
        "affinity": ANY,
        "volumes": arr(
            {
                "type": "object",
                "properties": {"name": S},
                "required": ["name"],
                "x-kubernetes-preserve-unknown-fields": True,
            }
        ),
        "serviceAccountName": S,
        "serviceAccount": S,
        "automountServiceAccountToken": B,
        "priorityClassName": S,
        "priority": I32,
        "preemptionPolicy": S,
        "schedulerName": S,
        "terminationGracePeriodSeconds": I64,
        "activeDeadlineSeconds": I64,
        "securityContext": ANY,
        "imagePullSecrets": arr(obj({"name": S})),
        "hostname": S,
        "subdomain": S,
        "dnsPolicy": enum("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"),
        "dnsConfig": ANY,
        "hostNetwork": B,
        "hostIPC": B,
        "hostPID": B,
        "hostUsers": B,
        "hostAliases": arr(ANY),
        "shareProcessNamespace": B,
        "runtimeClassName": S,
        "schedulingGates": arr(obj({"name": S}, ["name"])),
        "enableServiceLinks": B,
        "topologySpreadConstraints": arr(ANY),
        "overhead": QMAP,
        "readinessGates": arr(ANY),
        "setHostnameAsFQDN": B,
        "os": ANY,
        "resourceClaims": arr(ANY),
    },
    ["containers"],
)
# A PodTemplateSpec's metadata is a whole ObjectMeta in Kubernetes' OpenAPI (the same type as an object's):
# kube-apiserver takes every field of it under fieldValidation=Strict, e.g. `creationTimestamp: null` as kubectl writes
# it out, or finalizers, which the Job and ReplicaSet controllers copy onto the pods they create.
TEMPLATE_METADATA = METADATA
POD_TEMPLATE = obj({"metadata": TEMPLATE_METADATA, "spec": POD_SPEC}, ["spec"])

TOP = {"apiVersion": S, "kind": S, "metadata": {"type": "object"}}

POD = obj({**TOP, "spec": POD_SPEC, "status": ANY}, ["spec"])
JOB = obj(
    {
        **TOP,
        "spec": obj(
            {
                "template": POD_TEMPLATE,
                "parallelism": I32,
                "completions": I32,
                "activeDeadlineSeconds": I64,
                "backoffLimit": {**I32, "default": 6},
                "backoffLimitPerIndex": I32,
                "maxFailedIndexes": I32,
                "completionMode": {**enum("NonIndexed", "Indexed"), "default": "NonIndexed"},
                "suspend": {**B, "default": False},
                "selector": ANY,
                "manualSelector": B,
                "ttlSecondsAfterFinished": I32,
                "podFailurePolicy": ANY,
                "successPolicy": ANY,
                "podReplacementPolicy": {**enum("TerminatingOrFailed", "Failed"), "default": "TerminatingOrFailed"},
                "managedBy": S,
            },
            ["template"],
        ),
        "status": ANY,
    },
    ["spec"],
)
NAMESPACE = obj({**TOP, "spec": obj({"finalizers": arr(S)}), "status": ANY})
NODE = obj(
    {
        **TOP,
        "spec": obj(
            {
                "podCIDR": S,
                "podCIDRs": arr(S),
                "providerID": S,
                "unschedulable": B,
                "taints": arr(ANY),
                "configSource": ANY,
                "externalID": S,
            }
        ),
        "status": ANY,
    }
)
SERVICE = obj(
    {
        **TOP,
        "spec": obj(
            {
                "ports": arr(
                    obj(
                        {
                            "name": S,
                            "protocol": enum("TCP", "UDP", "SCTP"),
                            "port": I32,
                            "targetPort": {"x-kubernetes-int-or-string": True},
                            "nodePort": I32,
                            "appProtocol": S,
                        },
                        ["port"],
                    )
                ),
                "selector": STRMAP,
                "clusterIP": S,
                "clusterIPs": arr(S),
                "type": {**enum("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"), "default": "ClusterIP"},
                "externalName": S,
                "externalIPs": arr(S),
                "sessionAffinity": {**enum("ClientIP", "None"), "default": "None"},
                "sessionAffinityConfig": ANY,
                "ipFamilies": arr(S),
                "ipFamilyPolicy": S,
                "publishNotReadyAddresses": B,
                "internalTrafficPolicy": S,
                "externalTrafficPolicy": S,
                "loadBalancerIP": S,
                "loadBalancerSourceRanges": arr(S),
                "loadBalancerClass": S,
                "allocateLoadBalancerNodePorts": B,
                "healthCheckNodePort": I32,
                "trafficDistribution": S,
            }
        ),
        "status": ANY,
    }
)
EVENT = obj(
    {
        **TOP,
        "involvedObject": ANY,
        "reason": S,
        "message": S,
        "type": S,
        "source": ANY,
        "firstTimestamp": S,
        "lastTimestamp": S,
        "eventTime": {"type": "string", "nullable": True},
        "count": I32,
        "action": S,
        "related": ANY,
        "reportingComponent": S,
        "reportingInstance": S,
        "series": ANY,
    },
    ["involvedObject"],
)

LABEL_SELECTOR = obj({"matchLabels": STRMAP, "matchExpressions": arr(ANY)})
PERSISTENT_VOLUME_CLAIM = obj(
    {
        **TOP,
        "spec": obj(
            {
                "accessModes": arr(enum("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")),
                "selector": LABEL_SELECTOR,
                "resources": obj({"requests": QMAP, "limits": QMAP}),
                "volumeName": S,
                "storageClassName": S,
                "volumeMode": {**enum("Filesystem", "Block"), "default": "Filesystem"},
                "dataSource": ANY,
                "dataSourceRef": ANY,
                "volumeAttributesClassName": S,
            }
        ),
        "status": ANY,
    },
    ["spec"],
)
LEASE = obj(
    {
        **TOP,
        "spec": obj(
            {
                "holderIdentity": S,
                "leaseDurationSeconds": I32,
                "acquireTime": S,
                "renewTime": S,
                "leaseTransitions": I32,
                "strategy": S,
                "preferredHolder": S,
            }
        ),
    }
)
CONFIG_MAP = obj({**TOP, "data": STRMAP, "binaryData": STRMAP, "immutable": B})
POD_TEMPLATE_OBJECT = obj({**TOP, "template": POD_TEMPLATE})
SECRET = obj({**TOP, "data": STRMAP, "stringData": STRMAP, "type": S, "immutable": B})
SERVICE_ACCOUNT = obj(
    {**TOP, "secrets": arr(ANY), "imagePullSecrets": arr(obj({"name": S})), "automountServiceAccountToken": B}
)
DEPLOYMENT = obj(
    {
        **TOP,
        "spec": obj(
            {
                "replicas": I32,
                "selector": LABEL_SELECTOR,
                "template": POD_TEMPLATE,
                "strategy": obj({"type": enum("Recreate", "RollingUpdate"), "rollingUpdate": ANY}),
                "minReadySeconds": I32,
                "revisionHistoryLimit": I32,
                "paused": B,
                "progressDeadlineSeconds": I32,
            },
            ["selector", "template"],
        ),
        "status": ANY,
    },
    ["spec"],
)
REPLICA_SET = obj(
    {
        **TOP,
        "spec": obj(
            {"replicas": I32, "minReadySeconds": I32, "selector": LABEL_SELECTOR, "template": POD_TEMPLATE},
            ["selector"],
        ),
        "status": ANY,
    },
    ["spec"],
)
INGRESS = obj(
    {
        **TOP,
        "spec": obj({"ingressClassName": S, "defaultBackend": ANY, "tls": arr(ANY), "rules": arr(ANY)}),
        "status": ANY,
    }
)
PRIORITY_CLASS = obj(
    {
        **TOP,
        "value": I32,
        "globalDefault": B,
        "description": S,
        "preemptionPolicy": enum("Never", "PreemptLowerPriority"),
    },
    ["value"],
)
INGRESS_CLASS = obj({**TOP, "spec": obj({"controller": S, "parameters": ANY})})
NETWORK_POLICY = obj(
    {
        **TOP,
        "spec": obj(
            {
                "podSelector": LABEL_SELECTOR,
                "policyTypes": arr(enum("Ingress", "Egress")),
                "ingress": arr(obj({"from": arr(ANY), "ports": arr(ANY)})),
                "egress": arr(obj({"to": arr(ANY), "ports": arr(ANY)})),
            }
        ),
    }
)
POLICY_RULE = obj(
    {
        "apiGroups": arr(S),
        "resources": arr(S),
        "verbs": arr(S),
        "resourceNames": arr(S),
        "nonResourceURLs": arr(S),
    },
    ["verbs"],
)
ROLE = obj({**TOP, "rules": arr(POLICY_RULE)})
CLUSTER_ROLE = obj({**TOP, "rules": arr(POLICY_RULE), "aggregationRule": ANY})
SUBJECT = obj(
    {"kind": enum("ServiceAccount", "User", "Group"), "apiGroup": S, "name": S, "namespace": S}, ["kind", "name"]
)
ROLE_REF = obj({"apiGroup": S, "kind": enum("Role", "ClusterRole"), "name": S}, ["apiGroup", "kind", "name"])
BINDING = obj({**TOP, "subjects": arr(SUBJECT), "roleRef": ROLE_REF}, ["roleRef"])
CRD = obj({**TOP, "spec": ANY, "status": ANY}, ["spec"])
# admissionregistration.k8s.io/v1beta1 (Kubernetes 1.34): MutatingAdmissionPolicy and its binding, every field the
# API defines (paramRef's and paramKind's parameters are stored, not honoured: kubesim/README.md).
SELECTOR_REQUIREMENT = obj({"key": S, "operator": enum("In", "NotIn", "Exists", "DoesNotExist"), "values": arr(S)},
                           ["key", "operator"])
FULL_LABEL_SELECTOR = obj({"matchLabels": STRMAP, "matchExpressions": arr(SELECTOR_REQUIREMENT)})
NAMED_RULE = obj(
    {
        "apiGroups": arr(S),
        "apiVersions": arr(S),
        "operations": arr(enum("*", "CREATE", "UPDATE", "DELETE", "CONNECT")),
        "resources": arr(S),
        "resourceNames": arr(S),
        "scope": enum("Cluster", "Namespaced", "*"),
    }
)
MATCH_RESOURCES = obj(
    {
        "namespaceSelector": FULL_LABEL_SELECTOR,
        "objectSelector": FULL_LABEL_SELECTOR,
        "resourceRules": arr(NAMED_RULE),
        "excludeResourceRules": arr(NAMED_RULE),
        "matchPolicy": enum("Exact", "Equivalent"),
    }
)
NAMED_EXPRESSION = obj({"name": S, "expression": S}, ["name", "expression"])
EXPRESSION = obj({"expression": S})
MUTATING_ADMISSION_POLICY = obj(
    {
        **TOP,
        "spec": obj(
            {
                "paramKind": obj({"apiVersion": S, "kind": S}),
                "matchConstraints": MATCH_RESOURCES,
                "variables": arr(NAMED_EXPRESSION),
                "mutations": arr(
                    obj(
                        {
                            "patchType": enum("ApplyConfiguration", "JSONPatch"),
                            "applyConfiguration": EXPRESSION,
                            "jsonPatch": EXPRESSION,
                        },
                        ["patchType"],
                    )
                ),
                "failurePolicy": enum("Ignore", "Fail"),
                "matchConditions": arr(NAMED_EXPRESSION),
                "reinvocationPolicy": enum("Never", "IfNeeded"),
            }
        ),
    }
)
MUTATING_ADMISSION_POLICY_BINDING = obj(
    {
        **TOP,
        "spec": obj(
            {
                "policyName": S,
                "paramRef": obj(
                    {
                        "name": S,
                        "namespace": S,
                        "selector": FULL_LABEL_SELECTOR,
                        "parameterNotFoundAction": enum("Allow", "Deny"),
                    }
                ),
                "matchResources": MATCH_RESOURCES,
            }
        ),
    }
)

CORE_SCHEMAS: dict[str, dict] = {
    "pods": POD,
    "jobs": JOB,
    "namespaces": NAMESPACE,
    "nodes": NODE,
    "services": SERVICE,
    "events": EVENT,
    "configmaps": CONFIG_MAP,
    "podtemplates": POD_TEMPLATE_OBJECT,
    "leases": LEASE,
    "priorityclasses": PRIORITY_CLASS,
    "persistentvolumeclaims": PERSISTENT_VOLUME_CLAIM,
    "secrets": SECRET,
    "serviceaccounts": SERVICE_ACCOUNT,
    "deployments": DEPLOYMENT,
    "replicasets": REPLICA_SET,
    "ingresses": INGRESS,
    "ingressclasses": INGRESS_CLASS,
    "networkpolicies": NETWORK_POLICY,
    "roles": ROLE,
    "clusterroles": CLUSTER_ROLE,
    "rolebindings": BINDING,
    "clusterrolebindings": BINDING,
    "customresourcedefinitions": CRD,
    "mutatingadmissionpolicies": MUTATING_ADMISSION_POLICY,
    "mutatingadmissionpolicybindings": MUTATING_ADMISSION_POLICY_BINDING,
}
