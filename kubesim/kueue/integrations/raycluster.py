"""Kueue's RayCluster integration (upstream pkg/controller/jobs/raycluster, framework `ray.io/raycluster`): what the
jobframework needs to know of a ray.io/v1 RayCluster, and the pod sets a RayJob shares with it (upstream common.go).

Pod sets: `head` (one pod, the head group's template), then one per worker group named after it (lowercased), of
replicas x numOfHosts pods. Admission is merged into the head and each worker template and the cluster unsuspended;
KubeRay then creates the pods from those templates (kubesim.apiserver.controllers.raycluster_controller). A
RayCluster is never finished: it holds its quota until deleted. It is active, and its pods ready, while its state is
`ready`. A RayCluster controlled by a RayJob Kueue manages gets no Workload of its own (the jobframework's managed
ancestor rule).
"""

from __future__ import annotations

from kubesim.kernel.store import clone
from kubesim.kueue.integrations.podsets import PodSetConflict, PodSetInfo, merge_into, restore_template

FRAMEWORK = "ray.io/raycluster"


def worker_groups(cluster_spec: dict) -> list[dict]:
    return cluster_spec.get("workerGroupSpecs") or []


def worker_count(group: dict) -> int:
    """A worker group's pods: replicas (1 when unset) times numOfHosts when above 1."""
    replicas = int(group["replicas"]) if group.get("replicas") is not None else 1
    hosts = int(group.get("numOfHosts", 1))
    return replicas * hosts if hosts > 1 else replicas


def head_template(cluster_spec: dict) -> dict:
    return cluster_spec.setdefault("headGroupSpec", {}).setdefault("template", {})


def cluster_pod_sets(cluster_spec: dict) -> list[dict]:
    """BuildPodSets: the head, then each worker group."""
    out = [{"name": "head", "count": 1, "template": clone(head_template(clone(cluster_spec)))}]
    for group in worker_groups(cluster_spec):
        out.append(
            {
                "name": str(group.get("groupName", "")).lower(),
                "count": worker_count(group),
                "template": clone(group.get("template") or {}),
            }
        )
    return out


def cluster_templates(cluster_spec: dict) -> list[dict]:
    """The pod templates the cluster's pod sets come from, in pod set order (live, for merging)."""
    return [head_template(cluster_spec)] + [g.setdefault("template", {}) for g in worker_groups(cluster_spec)]


def run_cluster(cluster_spec: dict, infos: list[PodSetInfo]) -> None:
    """updateRayClusterSpecToRunWithPodSetsInfo: one info per head and worker group (more belong to the caller)."""
    for template, info in zip(cluster_templates(cluster_spec), infos, strict=False):
        merge_into(template, info)


def restore_cluster(cluster_spec: dict, infos: list[PodSetInfo]) -> None:
    for template, info in zip(cluster_templates(cluster_spec), infos, strict=False):
        restore_template(template, info)


class RayCluster:
    """The jobframework's view of a RayCluster (kubesim.kueue.integrations.jobframework.JobKind)."""

    framework = FRAMEWORK
    resource = "rayclusters"
    inputs: tuple[str, ...] = ()
    api_version = "ray.io/v1"
    kind = "RayCluster"
    group = "ray.io"

    def pod_sets(self, store, job: dict) -> list[dict]:
        return cluster_pod_sets(job.get("spec") or {})

    def suspended(self, job: dict) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def suspend(self, job: dict) -> None:
        job["spec"]["suspend"] = True

    def active(self, job: dict) -> bool:
        return (job.get("status") or {}).get("state") == "ready"

    def finished(self, job: dict) -> tuple[bool, bool, str]:
        return False, True, ""

    def pods_ready(self, store, job: dict, wl: dict) -> bool:
        return (job.get("status") or {}).get("state") == "ready"

    def reclaimable_pods(self, store, job: dict) -> list[dict]:
        return []

    def run(self, job: dict, infos: list[PodSetInfo]) -> None:
        expected = 1 + len(worker_groups(job["spec"]))
        if len(infos) != expected:
            raise PodSetConflict(f"invalid podset infos: expecting {expected} podset, got {len(infos)}")
        run_cluster(job["spec"], infos)
        job["spec"]["suspend"] = False

    def restore(self, job: dict, infos: list[PodSetInfo]) -> None:
        if len(infos) != 1 + len(worker_groups(job["spec"])):
            return
        restore_cluster(job["spec"], infos)
