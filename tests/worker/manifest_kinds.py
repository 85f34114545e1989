"""One manifest per kind the portal submits, as a user would write it (no namespace, no queue, no portal label):
what the end-to-end tests send through the API and through `gpu submit -f`, with what each should come to in
the cluster (its collection, its GPU units) and whether it finishes on its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apps.workloads.models import Kind

GPU = "nvidia.com/gpu"


def pod_spec(seconds: int, gpus: int, *, restart: str | None = "Never") -> dict[str, Any]:
    return {**({"restartPolicy": restart} if restart else {}), "containers": [{
        "name": "main", "image": "pytorch/pytorch:2.4.0", "command": ["sleep", str(seconds)],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi", GPU: gpus}, "limits": {GPU: gpus}}}]}


def job_manifest(seconds: int) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "plain-job"},
            "spec": {"parallelism": 2, "completions": 2, "template": {"spec": pod_spec(seconds, 1)}}}


def jobset_manifest(seconds: int) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "my-jobset"},
            "spec": {"replicatedJobs": [
                {"name": "leader", "replicas": 1, "template": {"spec": {"template": {"spec": pod_spec(seconds, 2)}}}},
                {"name": "workers", "replicas": 2, "template": {"spec": {
                    "template": {"spec": pod_spec(seconds, 1)}}}}]}}


def pod_manifest(seconds: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "one-pod"}, "spec": pod_spec(seconds, 2)}


def trainjob_manifest(seconds: int) -> dict[str, Any]:
    """Two nodes of the cluster's torch-distributed runtime, 2 GPUs each."""
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "my-trainjob"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {
                "numNodes": 2, "command": ["sh", "-c", f"sleep {seconds}"],
                "resourcesPerNode": {"requests": {GPU: 2}, "limits": {GPU: 2}}}}}


def pytorchjob_manifest(seconds: int) -> dict[str, Any]:
    def replicas(count: int, gpus: int) -> dict[str, Any]:
        spec = pod_spec(seconds, gpus, restart=None)
        spec["containers"][0]["name"] = "pytorch"
        return {"replicas": count, "restartPolicy": "Never", "template": {"spec": spec}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "my-pytorchjob"},
            "spec": {"pytorchReplicaSpecs": {"Master": replicas(1, 2), "Worker": replicas(2, 1)}}}


def _ray_group(container: str, requests: dict[str, Any]) -> dict[str, Any]:
    limits = {name: value for name, value in requests.items() if "/" in name}
    return {"spec": {"containers": [{"name": container, "image": "rayproject/ray:2.41.0",
                                     "resources": {"requests": requests, **({"limits": limits} if limits else {})}}]}}


def _ray_cluster(workers: int, gpus: int) -> dict[str, Any]:
    return {"headGroupSpec": {"rayStartParams": {}, "template": _ray_group("ray-head", {"cpu": "1"})},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": workers, "rayStartParams": {},
                                  "template": _ray_group("ray-worker", {"cpu": "1", GPU: gpus})}]}


def rayjob_manifest(seconds: int) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "my-rayjob"},
            "spec": {"entrypoint": f"sleep {seconds}", "shutdownAfterJobFinishes": True,
                     "rayClusterSpec": _ray_cluster(2, 2)}}


def raycluster_manifest(seconds: int) -> dict[str, Any]:
    """A RayCluster runs until it is deleted: `seconds` does not end it."""
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "my-raycluster"},
            "spec": _ray_cluster(2, 1)}


def leaderworkerset_manifest(seconds: int) -> dict[str, Any]:
    """One group of a leader and a worker, serving until it is deleted."""
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "my-lws"},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {
                "size": 2, "leaderTemplate": {"spec": pod_spec(3600, 1, restart=None)},
                "workerTemplate": {"spec": pod_spec(3600, 1, restart=None)}}}}


@dataclass(frozen=True)
class KindCase:
    build: Callable[[int], dict[str, Any]]
    root: str  # the API root of its collection
    plural: str
    units: int  # GPU units Kueue admits for it
    finishes: bool  # ends on its own (a RayCluster or a LeaderWorkerSet serves until stopped)


CASES: dict[Kind, KindCase] = {
    Kind.JOB: KindCase(job_manifest, "/apis/batch/v1", "jobs", 2, True),
    Kind.JOBSET: KindCase(jobset_manifest, "/apis/jobset.x-k8s.io/v1alpha2", "jobsets", 4, True),
    Kind.POD: KindCase(pod_manifest, "/api/v1", "pods", 2, True),
    Kind.TRAINJOB: KindCase(trainjob_manifest, "/apis/trainer.kubeflow.org/v1alpha1", "trainjobs", 4, True),
    Kind.PYTORCHJOB: KindCase(pytorchjob_manifest, "/apis/kubeflow.org/v1", "pytorchjobs", 4, True),
    Kind.RAYJOB: KindCase(rayjob_manifest, "/apis/ray.io/v1", "rayjobs", 4, True),
    Kind.RAYCLUSTER: KindCase(raycluster_manifest, "/apis/ray.io/v1", "rayclusters", 2, False),
    Kind.LEADERWORKERSET: KindCase(leaderworkerset_manifest, "/apis/leaderworkerset.x-k8s.io/v1", "leaderworkersets",
                                   2, False),
}


def follow_to_the_end(*, kubesim: Any, cluster: Any, workload_id: int, kind: Kind, stop: Callable[[], Any],
                      owner_id: int) -> None:
    """A submitted manifest of `kind`, from the worker's create to its GPU-hours: created as the prepared object
    (wl-<id>, the portal's queue), admitted by Kueue in that queue, mirrored as the portal's own row of that kind,
    finished (or stopped with `stop`, for a kind that serves until deleted) and counted once, at its GPUs."""
    from apps.usage.models import UsageInterval
    from apps.workloads.models import Origin, Status, Workload
    from tests.worker.conftest import wait_for

    case = CASES[kind]

    def row() -> Workload:
        return Workload.objects.get(pk=workload_id)

    wait_for(lambda: row().k8s_uid, describe=lambda: (row().status, row().status_message))
    name = row().job_name
    labels = cluster.raw_get(f"{case.root}/namespaces/proj-vision/{case.plural}/{name}")["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "guaranteed-h100"
    assert labels["portal.gpu/workload-id"] == str(workload_id)
    kubesim.advance(1)
    admitted = wait_for(lambda: (found := row()).admitted_at and found, timeout=60,
                        describe=lambda: (row().status, row().status_message))
    assert admitted.cluster_queue == "proj-vision-h100-guaranteed" and admitted.gpu_units == case.units
    assert admitted.origin == Origin.PORTAL and admitted.kind == kind
    if case.finishes:
        kubesim.advance(310)
        wait_for(lambda: row().status == Status.SUCCEEDED, timeout=60,
                 describe=lambda: (row().status, row().status_message))
    else:
        kubesim.advance(300)
        stop()
        wait_for(lambda: row().status == Status.STOPPED, timeout=60,
                 describe=lambda: (row().status, row().status_message))
    interval = wait_for(lambda: UsageInterval.objects.filter(workload_id=workload_id, ended_at__isnull=False).first(),
                        timeout=60)
    held = (interval.ended_at - interval.started_at).total_seconds()
    assert interval.units == case.units and interval.user_id == owner_id
    assert 300 <= held <= 312, held
    # Counted once, on one row: the watcher never mirrored the portal's own object as work from outside.
    assert UsageInterval.objects.filter(workload_id=workload_id).count() == 1
    assert Workload.objects.count() == 1
