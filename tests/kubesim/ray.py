"""KubeRay bodies for the tests (ray.io/v1 RayCluster and RayJob) and reads that speak them over the official client."""

from __future__ import annotations

from kubernetes import client

RAY = ("ray.io", "v1")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
IMAGE = "rayproject/ray:2.41.0"
GPU = "nvidia.com/gpu"


def group_template(container: str, requests: dict | None = None, **pod_spec: object) -> dict:
    """A Ray node's pod template: one Ray container requesting `requests` (extended resources limited alike)."""
    spec: dict = {"name": container, "image": IMAGE}
    if requests:
        limits = {name: value for name, value in requests.items() if "/" in name}
        spec["resources"] = {"requests": requests, **({"limits": limits} if limits else {})}
    return {"spec": {"containers": [spec], **pod_spec}}


def worker_group(name: str, replicas: int = 1, requests: dict | None = None, **group: object) -> dict:
    return {
        "groupName": name,
        "replicas": replicas,
        "rayStartParams": {},
        "template": group_template("ray-worker", requests),
        **group,
    }


def cluster_spec(*workers: dict, head_requests: dict | None = None) -> dict:
    """A RayCluster spec: a head of `head_requests` (1 CPU by default) and the given worker groups."""
    head = {"rayStartParams": {}, "template": group_template("ray-head", head_requests or {"cpu": "1"})}
    return {"headGroupSpec": head, "workerGroupSpecs": list(workers)}


def raycluster_body(name: str, *workers: dict, labels: dict | None = None, **spec: object) -> dict:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {**cluster_spec(*workers), **spec},
    }


def rayjob_body(
    name: str, *workers: dict, entrypoint: str = "sleep 30", labels: dict | None = None, **spec: object
) -> dict:
    """A RayJob (K8sJobMode, the CRD's default) on a cluster of the given worker groups, shut down when it ends."""
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "entrypoint": entrypoint,
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": cluster_spec(*workers),
            **spec,
        },
    }


def queued(queue: str | None, labels: dict | None = None) -> dict:
    return {**(labels or {}), **({"kueue.x-k8s.io/queue-name": queue} if queue else {})}


def create(custom: client.CustomObjectsApi, namespace: str, body: dict) -> dict:
    plural = "rayclusters" if body["kind"] == "RayCluster" else "rayjobs"
    return custom.create_namespaced_custom_object(*RAY, namespace, plural, body)


def read(custom: client.CustomObjectsApi, namespace: str, plural: str, name: str) -> dict:
    return custom.get_namespaced_custom_object(*RAY, namespace, plural, name)


def patch(custom: client.CustomObjectsApi, namespace: str, plural: str, name: str, body: dict) -> dict:
    return custom.patch_namespaced_custom_object(*RAY, namespace, plural, name, body)


def workloads(custom: client.CustomObjectsApi, namespace: str, plural: str, name: str) -> list[dict]:
    """The Workloads Kueue made for the named RayCluster or RayJob (by its uid)."""
    uid = read(custom, namespace, plural, name)["metadata"]["uid"]
    selector = f"kueue.x-k8s.io/job-uid={uid}"
    return custom.list_namespaced_custom_object(*KUEUE, namespace, "workloads", label_selector=selector)["items"]


def condition(obj: dict, type_: str) -> dict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def cluster_pods(core: client.CoreV1Api, namespace: str, cluster: str) -> list:
    return core.list_namespaced_pod(namespace, label_selector=f"ray.io/cluster={cluster}").items
