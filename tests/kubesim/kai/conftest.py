"""A kubesim per test whose nodes form KAI pools, reached through the official client, and the objects KAI reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import SimpleNamespace

import pytest
from kubernetes import client

from kubesim.testing import serve

GROUP = "scheduling.run.ai"


def kai_nodes(pool: str, count: int, gpus: int, *, sharing: bool = False) -> list[dict]:
    labels = {"kai.scheduler/node-pool": pool, **({"kubesim.io/kai-gpu-sharing": "true"} if sharing else {})}
    return [{"name": f"{pool}-{i}", "labels": labels,
             "allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "64", "memory": "512Gi"}} for i in range(count)]


@pytest.fixture
def cluster() -> Iterator[Callable[[list[dict]], SimpleNamespace]]:
    """cluster(nodes) starts a kubesim with those nodes (no Kueue) and answers its clients."""
    stack: list = []

    def start(nodes: list[dict]) -> SimpleNamespace:
        cm = serve(clock="manual", kueue=None, nodes=nodes)
        ks = cm.__enter__()
        stack.append(cm)
        api_client = ks.api_client()
        stack.append(api_client)
        api = SimpleNamespace(ks=ks, core=client.CoreV1Api(api_client), batch=client.BatchV1Api(api_client),
                              custom=client.CustomObjectsApi(api_client))
        api.core.create_namespace({"metadata": {"name": "team"}})
        return api

    yield start
    for item in reversed(stack):
        item.close() if hasattr(item, "close") else item.__exit__(None, None, None)


def make_queue(api: SimpleNamespace, name: str, *, pool: str = "kai", parent: str = "", priority: int | None = None,
               quota: float = 0, limit: float = -1, weight: float = 1) -> None:
    spec: dict = {"resources": {"gpu": {"quota": quota, "limit": limit, "overQuotaWeight": weight},
                                "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                                "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}}
    if parent:
        spec["parentQueue"] = parent
    if priority is not None:
        spec["priority"] = priority
    body = {"apiVersion": f"{GROUP}/v2", "kind": "Queue",
            "metadata": {"name": name, "labels": {"kai.scheduler/node-pool": pool}}, "spec": spec}
    api.custom.create_cluster_custom_object(GROUP, "v2", "queues", body, field_validation="Strict")


def make_pod(api: SimpleNamespace, name: str, queue: str, *, gpus: int = 1, fraction: str = "", pool: str = "kai",
             priority_class: str = "", group: str = "", preemptibility: str = "") -> None:
    labels = {"kai.scheduler/queue": queue, "kai.scheduler/node-pool": pool}
    if preemptibility:
        labels["kai.scheduler/preemptibility"] = preemptibility
    if priority_class:
        labels["priorityClassName"] = priority_class
    annotations = {}
    if fraction:
        annotations["gpu-fraction"] = fraction
    if group:
        annotations["pod-group-name"] = group
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus and not fraction else {}
    api.core.create_namespaced_pod("team", {
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"schedulerName": "kai-scheduler", "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"],
                                 "resources": resources}]},
    })


def bound(api: SimpleNamespace) -> dict[str, str]:
    """Pod name -> node of the bound pods in namespace team."""
    return {p.metadata.name: p.spec.node_name for p in api.core.list_namespaced_pod("team").items if p.spec.node_name}


def queue_status(api: SimpleNamespace, name: str) -> dict:
    return api.custom.get_cluster_custom_object(GROUP, "v2", "queues", name).get("status", {})


def pod_group_of(api: SimpleNamespace, pod: str) -> dict:
    name = api.core.read_namespaced_pod(pod, "team").metadata.annotations["pod-group-name"]
    return api.custom.get_namespaced_custom_object(GROUP, "v2alpha2", "team", "podgroups", name)
