"""Reading work submitted outside the portal (docs/architecture.md, Work submitted outside the portal), as pure
functions: a Kueue Workload and the object it belongs to -> the `OutsideWork` the workloads app mirrors, or why it
cannot be mirrored (`Unmapped`).

Kueue's Workload is the common record of every kind it manages: its pod sets (counts, pod templates with their
requests), its LocalQueue, its priority, its conditions and its owner reference. So the portal reads every kind the
same way; the owner object is read only for who submitted it (a label, the admission stamp, the field manager).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from apps.core.kueue_names import (
    GROUP_WORKLOAD_ANNOTATION,
    JOB_UID_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    POD_GROUP_LABEL,
    PORTAL_USER_LABEL,
    QUEUE_NAME_LABEL,
    SUBMITTED_BY_ANNOTATION,
)
from apps.core.quantities import quantity
from apps.workloads.models import Kind
from apps.workloads.observation import OutsideWork, PodSet, Unmapped

from .status_map import parse_time


@dataclass(frozen=True)
class OwnerKind:
    """A kind Kueue integrates, as an owner reference names it: the portal's kind and its API resource."""

    kind: Kind
    plural: str
    framework: str  # Kueue's `integrations.frameworks` name (docs/real-cluster.md lists what to enable)
    version: str  # the API version the watcher lists and watches it at (Kueue v0.20's)

    def list_path(self, group: str) -> str:
        """The cluster-wide list (and watch) path of the kind."""
        return f"/apis/{group}/{self.version}/{self.plural}" if group else f"/api/{self.version}/{self.plural}"


# (API group, kind) -> what the portal knows of it. Kueue v0.20's integrations: docs/research/job-integrations/.
OWNER_KINDS: dict[tuple[str, str], OwnerKind] = {
    ("batch", "Job"): OwnerKind(Kind.JOB, "jobs", "batch/job", "v1"),
    ("jobset.x-k8s.io", "JobSet"): OwnerKind(Kind.JOBSET, "jobsets", "jobset.x-k8s.io/jobset", "v1alpha2"),
    ("trainer.kubeflow.org", "TrainJob"): OwnerKind(Kind.TRAINJOB, "trainjobs", "trainer.kubeflow.org/trainjob",
                                                    "v1alpha1"),
    ("kubeflow.org", "PyTorchJob"): OwnerKind(Kind.PYTORCHJOB, "pytorchjobs", "kubeflow.org/pytorchjob", "v1"),
    ("ray.io", "RayJob"): OwnerKind(Kind.RAYJOB, "rayjobs", "ray.io/rayjob", "v1"),
    ("ray.io", "RayCluster"): OwnerKind(Kind.RAYCLUSTER, "rayclusters", "ray.io/raycluster", "v1"),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): OwnerKind(Kind.LEADERWORKERSET, "leaderworkersets",
                                                               "leaderworkerset.x-k8s.io/leaderworkerset", "v1"),
    ("", "Pod"): OwnerKind(Kind.POD, "pods", "pod", "v1"),
}
# The owners the watcher keeps watching: what Kueue queues (the queue-name label; a pod group's pods carry it too)
# and the portal did not submit. An owner Kueue manages without the label (manageJobsWithoutQueueName) is read when
# its Workload comes (`owner_lookup`).
OWNER_SELECTOR = f"{QUEUE_NAME_LABEL},{MANAGED_BY_LABEL}!={MANAGED_BY}"


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def owner_reference(workload: dict[str, Any]) -> dict[str, Any] | None:
    """The object a Kueue Workload stands for: its controller owner, else its first owner (a pod group's Workload
    is owned by every pod of the group, none of them its controller)."""
    references = (workload.get("metadata") or {}).get("ownerReferences") or []
    references = [ref for ref in references if isinstance(ref, dict) and ref.get("kind") and ref.get("name")]
    return next((ref for ref in references if ref.get("controller")), references[0] if references else None)


def _resource_root(reference: dict[str, Any]) -> tuple[str, str] | None:
    """(API root, plural) of an owner reference's kind, when it is a kind the portal reads."""
    api_version = str(reference.get("apiVersion", ""))
    known = OWNER_KINDS.get((group_of(api_version), str(reference.get("kind", ""))))
    if known is None:
        return None
    return (f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"), known.plural


def owner_path(namespace: str, reference: dict[str, Any]) -> str | None:
    """The API path of an owner reference's object, when it is of a kind the portal reads."""
    resource = _resource_root(reference)
    return f"{resource[0]}/namespaces/{namespace}/{resource[1]}/{reference['name']}" if resource else None


def owner_lookup(namespace: str, reference: dict[str, Any]) -> tuple[str, list[tuple[str, Any]]] | None:
    """The list path and query that find an owner reference's object by name (a list, the verb the watcher holds
    for its owner kinds, not a get), when it is of a kind the portal reads."""
    resource = _resource_root(reference)
    if resource is None:
        return None
    return (f"{resource[0]}/namespaces/{namespace}/{resource[1]}",
            [("fieldSelector", f"metadata.name={reference['name']}")])


_CONTAINER_FIELDS = ("name", "image", "resources")


def compact(workload: dict[str, Any]) -> dict[str, Any]:
    """What the watcher keeps of an outside Workload (thousands are held at once): its status, its metadata without
    managedFields, its spec with each pod template cut to its containers' names, images and resources, all that
    `read_outside` and the status map read."""
    metadata = {key: value for key, value in (workload.get("metadata") or {}).items() if key != "managedFields"}
    spec = dict(workload.get("spec") or {})
    pod_sets = []
    for entry in spec.get("podSets") or []:
        if not isinstance(entry, dict):
            pod_sets.append(entry)
            continue
        template_spec = (entry.get("template") or {}).get("spec") or {}
        kept = {group: [{key: container[key] for key in _CONTAINER_FIELDS if key in container}
                        if isinstance(container, dict) else container for container in template_spec[group]]
                for group in ("containers", "initContainers") if isinstance(template_spec.get(group), list)}
        pod_sets.append({**{key: value for key, value in entry.items() if key != "template"},
                         "template": {"spec": kept}})
    if "podSets" in spec:
        spec["podSets"] = pod_sets
    return {**workload, "metadata": metadata, "spec": spec}


def submitter_fields(owner: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the watcher keeps of an owner object: only what says who submitted it (a cache of thousands)."""
    if owner is None:
        return None
    metadata = owner.get("metadata") or {}
    labels, annotations = metadata.get("labels") or {}, metadata.get("annotations") or {}
    managers = [entry.get("manager", "") for entry in metadata.get("managedFields") or [] if isinstance(entry, dict)]
    return {"metadata": {
        "uid": metadata.get("uid", ""),
        "labels": {key: value for key, value in labels.items() if key == PORTAL_USER_LABEL},
        "annotations": {key: value for key, value in annotations.items() if key == SUBMITTED_BY_ANNOTATION},
        "managedFields": [{"manager": manager} for manager in managers[:1]],
    }}


def stop_target(*, namespace: str, api_version: str, kind: str, name: str) -> tuple[str, str | None] | None:
    """What deleting outside work means, as (API path, label selector): its owner object, or for a pod group every
    pod of the group; None for a kind the portal does not know how to stop."""
    if kind == Kind.POD_GROUP:
        return f"/api/v1/namespaces/{namespace}/pods", f"{POD_GROUP_LABEL}={name}"
    for (group, kind_name), known in OWNER_KINDS.items():
        if known.kind == kind and group == group_of(api_version):
            path = owner_path(namespace, {"apiVersion": api_version, "kind": kind_name, "name": name})
            return (path, None) if path else None
    return None


def _requests(container: dict[str, Any]) -> dict[str, str]:
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}  # a limit alone is the request
    return {str(name): str(value) for name, value in merged.items()}


def _pod_set(entry: dict[str, Any]) -> PodSet:
    """A pod set's per-pod requests as the scheduler counts them: its containers' summed, or its largest init
    container's where that is more."""
    spec = ((entry.get("template") or {}).get("spec")) or {}
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    totals: dict[str, Decimal] = {}
    for container in containers:
        for name, value in _requests(container).items():
            totals[name] = totals.get(name, Decimal(0)) + quantity(value)
    for container in spec.get("initContainers") or []:
        if isinstance(container, dict):
            for name, value in _requests(container).items():
                totals[name] = max(totals.get(name, Decimal(0)), quantity(value))
    count = entry.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ValueError(f"pod set {entry.get('name')!r} has a count that is not a number of pods")
    image = next((str(c.get("image", "")) for c in containers if c.get("image")), "")
    return PodSet(name=str(entry.get("name", "")), count=count, requests={n: str(v) for n, v in totals.items()},
                  image=image)


def _submitter(owner: dict[str, Any] | None) -> tuple[str, str, str]:
    """(portal user label, admission-stamped Kubernetes user, creating field manager) of the owner object."""
    metadata = (owner or {}).get("metadata") or {}
    labels, annotations = metadata.get("labels") or {}, metadata.get("annotations") or {}
    managers = [entry.get("manager", "") for entry in metadata.get("managedFields") or [] if isinstance(entry, dict)]
    return (str(labels.get(PORTAL_USER_LABEL, "")), str(annotations.get(SUBMITTED_BY_ANNOTATION, "")),
            str(next((m for m in managers if m), "")))


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def read_outside(workload: dict[str, Any], owner: dict[str, Any] | None) -> OutsideWork | Unmapped:
    """What the portal mirrors of a Kueue Workload it did not submit; `owner` is the object it belongs to, when the
    watcher could read it."""
    metadata = workload.get("metadata") or {}
    spec = workload.get("spec") or {}
    uid, namespace, name = str(metadata.get("uid", "")), str(metadata.get("namespace", "")), str(
        metadata.get("name", ""))
    reference = owner_reference(workload)
    if reference is None:
        return Unmapped(uid=uid, namespace=namespace, name=name, reason="no_owner", object_kind="Workload",
                        detail="a Workload with no owner object: created by hand, not by a job's integration")
    api_version, kind_name = str(reference.get("apiVersion", "")), str(reference["kind"])
    known = OWNER_KINDS.get((group_of(api_version), kind_name))
    kind = known.kind if known else Kind.OTHER
    object_name = str(reference["name"])
    if kind == Kind.POD and (metadata.get("annotations") or {}).get(GROUP_WORKLOAD_ANNOTATION) == "true":
        # A pod group's Workload is named after the group. An LWS group's Workload is a group Workload too, but
        # owned by its LeaderWorkerSet first: that is the object it stands for.
        kind, object_name = Kind.POD_GROUP, name
    try:
        pod_sets = tuple(_pod_set(entry) for entry in spec.get("podSets") or [] if isinstance(entry, dict))
    except ValueError as error:
        return Unmapped(uid=uid, namespace=namespace, name=name, reason="malformed", object_kind=kind_name,
                        detail=str(error))
    priority_source = spec.get("priorityClassSource", "")
    portal_user, cluster_user, manager = _submitter(owner)
    return OutsideWork(
        kueue_uid=uid, kueue_name=name, namespace=namespace, queue_name=str(spec.get("queueName", "")),
        kind=kind, object_api_version=api_version, object_name=object_name, pod_sets=pod_sets,
        priority_class=str(spec.get("priorityClassName", "")) if priority_source.endswith("workloadpriorityclass")
        else "",
        priority=spec["priority"] if isinstance(spec.get("priority"), int) else None,
        max_runtime_seconds=_positive(spec.get("maximumExecutionTimeSeconds")),
        object_uid=str((metadata.get("labels") or {}).get(JOB_UID_LABEL) or reference.get("uid", "")),
        created_at=parse_time(metadata.get("creationTimestamp")), portal_user=portal_user,
        cluster_user=cluster_user, manager=manager,
    )


def _pod_gpus(pod: dict[str, Any]) -> int:
    spec = pod.get("spec") or {}
    total = Decimal(0)
    for container in spec.get("containers") or []:
        if isinstance(container, dict):
            for name, value in _requests(container).items():
                if name.startswith("nvidia.com/") or name.endswith("/gpu"):
                    try:
                        total += quantity(value)
                    except ValueError:
                        continue
    return int(total)


def unqueued_gpu_pods(pods: list[dict[str, Any]], *, namespaces: set[str]) -> list[Unmapped]:
    """GPU pods of project namespaces that hold or wait for GPUs outside Kueue's queues (no pod set label: Kueue
    never started them), one entry per pod."""
    found = []
    for pod in pods:
        metadata = pod.get("metadata") or {}
        phase = (pod.get("status") or {}).get("phase", "")
        if metadata.get("namespace") not in namespaces or phase in ("Succeeded", "Failed"):
            continue
        gpus = _pod_gpus(pod)
        if gpus <= 0:
            continue
        owner = owner_reference(pod) or {}
        found.append(Unmapped(
            uid=str(metadata.get("uid", "")), namespace=str(metadata["namespace"]), name=str(metadata.get("name", "")),
            reason="outside_queue", object_kind=str(owner.get("kind", "Pod")), gpus=gpus,
            detail=f"{phase or 'Pending'} with {gpus} GPUs and no queue"
                   + (f" ({owner.get('kind')} {owner.get('name')})" if owner else "")))
    return found
