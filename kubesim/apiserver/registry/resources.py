"""Registry of the resource types kubesim serves: group/version/kind, scope and discovery data."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

CRD_DIR = Path(__file__).parent / "crds"  # Kueue's, KAI's and the workload operators' CRD schemas (SOURCES.md)
KUEUE_GROUP = "kueue.x-k8s.io"
JOBSET_GROUP = "jobset.x-k8s.io"
KAI_GROUP = "scheduling.run.ai"
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
VISIBILITY_VERSIONS = ("v1beta2", "v1beta1")  # Kueue v0.20 serves both (preferred first), answering each in its own
# Connect subresources of a pod: exec and attach refused (kubesim's containers run nothing), portforward served
STREAMS = ("exec", "attach", "portforward")
RBAC_GROUP = "rbac.authorization.k8s.io"
NETWORKING_GROUP = "networking.k8s.io"
AUTHORIZATION_GROUP = "authorization.k8s.io"
AUTHENTICATION_GROUP = "authentication.k8s.io"
GATEWAY_GROUP = "gateway.networking.k8s.io"
ADMISSION_GROUP = "admissionregistration.k8s.io"
COORDINATION_GROUP = "coordination.k8s.io"
SCHEDULING_GROUP = "scheduling.k8s.io"

SCALED_CRDS = frozenset({"leaderworkersets"})
"""The CRDs whose `scale` subresource kubesim serves (spec.replicas, status.hpaPodSelector)."""

ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class Resource:
    """One served resource type, as discovery describes it."""

    plural: str
    singular: str
    kind: str
    group: str  # "" for core
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = tuple(ALL_VERBS)
    crd: bool = False
    categories: tuple[str, ...] = field(default=())

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def _crd(plural: str, categories: tuple[str, ...] | None = None) -> Resource:
    """A kind served from its vendored CRD; categories as the CRD names them unless given."""
    data = json.loads((CRD_DIR / f"{plural}.json").read_text())
    return Resource(
        plural=data["plural"],
        singular=data["singular"],
        kind=data["kind"],
        group=data["group"],
        version=data["version"],
        namespaced=data["namespaced"],
        short_names=tuple(data["shortNames"]),
        # kubesim serves a CRD's status subresource, and scale only for the kinds verbs.scale knows (PyTorchJob
        # declares one too; nothing here scales it)
        subresources=tuple(
            s for s in data["subresources"] if s == "status" or (s == "scale" and data["plural"] in SCALED_CRDS)
        ),
        crd=True,
        categories=tuple(data.get("categories", ())) if categories is None else categories,
    )


@cache
def crd_schema(plural: str, version: str | None = None) -> dict:
    """The vendored OpenAPI v3 schema of a CRD: the stored version's, or a served older version's when given
    and vendored (`<plural>.<version>.json`)."""
    if version is not None and (CRD_DIR / f"{plural}.{version}.json").exists():
        return json.loads((CRD_DIR / f"{plural}.{version}.json").read_text())["schema"]
    return json.loads((CRD_DIR / f"{plural}.json").read_text())["schema"]


CORE = [
    Resource("namespaces", "namespace", "Namespace", "", "v1", False, ("ns",), ("status",)),
    Resource("nodes", "node", "Node", "", "v1", False, ("no",), ("status",)),
    Resource("pods", "pod", "Pod", "", "v1", True, ("po",), ("status", "log", *STREAMS)),
    Resource("services", "service", "Service", "", "v1", True, ("svc",), ("status",)),
    Resource("events", "event", "Event", "", "v1", True, ("ev",)),
    Resource("jobs", "job", "Job", "batch", "v1", True, (), ("status",)),
    Resource("configmaps", "configmap", "ConfigMap", "", "v1", True, ("cm",)),
    Resource("podtemplates", "podtemplate", "PodTemplate", "", "v1", True),
    Resource("secrets", "secret", "Secret", "", "v1", True),
    Resource("endpoints", "endpoints", "Endpoints", "", "v1", True, ("ep",)),
    Resource("httproutes", "httproute", "HTTPRoute", GATEWAY_GROUP, "v1", True, (), ("status",)),
    Resource("serviceaccounts", "serviceaccount", "ServiceAccount", "", "v1", True, ("sa",), ("token",)),
    Resource(
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        "",
        "v1",
        True,
        ("pvc",),
        ("status",),
    ),
    Resource("deployments", "deployment", "Deployment", "apps", "v1", True, ("deploy",), ("status", "scale")),
    Resource("replicasets", "replicaset", "ReplicaSet", "apps", "v1", True, ("rs",), ("status",)),
    Resource("ingresses", "ingress", "Ingress", NETWORKING_GROUP, "v1", True, ("ing",), ("status",)),
    Resource("ingressclasses", "ingressclass", "IngressClass", NETWORKING_GROUP, "v1", False),
    Resource("networkpolicies", "networkpolicy", "NetworkPolicy", NETWORKING_GROUP, "v1", True, ("netpol",)),
    Resource("leases", "lease", "Lease", COORDINATION_GROUP, "v1", True),
    # Read by KAI Scheduler (a pod's spec.priorityClassName) and resolved into the pod's spec.priority at creation.
    Resource("priorityclasses", "priorityclass", "PriorityClass", SCHEDULING_GROUP, "v1", False, ("pc",)),
    Resource("roles", "role", "Role", RBAC_GROUP, "v1", True),
    Resource("clusterroles", "clusterrole", "ClusterRole", RBAC_GROUP, "v1", False),
    Resource("rolebindings", "rolebinding", "RoleBinding", RBAC_GROUP, "v1", True),
    Resource("clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", RBAC_GROUP, "v1", False),
    Resource(
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        "apiextensions.k8s.io",
        "v1",
        False,
        ("crd", "crds"),
        ("status",),
    ),
    # Honoured on create and update (kubesim.apiserver.admission_policies); Kubernetes 1.34 serves v1beta1.
    Resource(
        "mutatingadmissionpolicies", "mutatingadmissionpolicy", "MutatingAdmissionPolicy", ADMISSION_GROUP, "v1beta1",
        False,
    ),
    Resource(
        "mutatingadmissionpolicybindings",
        "mutatingadmissionpolicybinding",
        "MutatingAdmissionPolicyBinding",
        ADMISSION_GROUP,
        "v1beta1",
        False,
    ),
]
KUEUE = [
    _crd(p, ("kueue",))
    for p in (
        "resourceflavors",
        "cohorts",
        "clusterqueues",
        "localqueues",
        "workloadpriorityclasses",
        "workloads",
        "admissionchecks",
        "provisioningrequestconfigs",
    )
]
OPERATORS = [
    _crd(p)
    for p in (
        "jobsets",
        "leaderworkersets",
        "trainjobs",
        "clustertrainingruntimes",
        "trainingruntimes",
        "pytorchjobs",
        "rayclusters",
        "rayjobs",
        "provisioningrequests",
    )
]
"""The kinds of the workload operators installed beside Kubernetes' own controllers (JobSet, LWS, Kubeflow Trainer v2,
Kubeflow training-operator v1, KubeRay); served with or without the Kueue half, as a cluster has them whether or not
Kueue manages them."""
KAI = [_crd("queues"), _crd("podgroups")]
"""KAI Scheduler's kinds (Queue at scheduling.run.ai/v2, the group's preferred version, then PodGroup at v2alpha2):
installed in every cluster, as KAI schedules only the pods that ask for it on the nodes of its pools."""
RESOURCES: dict[str, Resource] = {r.plural: r for r in CORE + KUEUE + OPERATORS + KAI}
"""plural -> Resource; plurals are unique across the served groups."""


def by_group_version(group: str, version: str) -> list[Resource]:
    return [r for r in RESOURCES.values() if r.group == group and r.version == version]


def lookup(group: str, version: str, plural: str) -> Resource | None:
    r = RESOURCES.get(plural)
    if r is None or r.group != group or r.version != version:
        return None
    return r
