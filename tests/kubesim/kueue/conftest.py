"""Fixtures for end-to-end Kueue scenarios: a served kubesim with the Kueue half, manual clock, official client."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest
from kubernetes import client

from kubesim.testing import InProcessKubesim, serve
from tests.kubesim.conftest import JOBSET, KUBEFLOW, TRAINER, jobset_body

KUEUE = ("kueue.x-k8s.io", "v1beta2")
GPU = "nvidia.com/gpu"
POOL_LABEL = "portal.gpu/pool"
_names = itertools.count()


def gpu_group(flavor: str, nominal: int | None, borrowing=None, lending=None) -> dict:
    """A resource group of one flavor's GPUs, quantities as given (tests/kubesim/kueue/sim.py's quota_spec sends
    them as strings, the form the scheduler core reads from the API server)."""
    resource: dict = {"name": GPU, "nominalQuota": nominal}
    if borrowing is not None:
        resource["borrowingLimit"] = borrowing
    if lending is not None:
        resource["lendingLimit"] = lending
    return {"coveredResources": [GPU], "flavors": [{"name": flavor, "resources": [resource]}]}


class Cluster:
    """The official client against a served kubesim, plus helpers that speak Kueue objects."""

    def __init__(self, ks: InProcessKubesim, api_client: client.ApiClient) -> None:
        self.ks = ks
        self.client = api_client
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    def settle(self, seconds: float = 0) -> None:
        self.ks.advance(seconds)

    # -- Kueue objects ---------------------------------------------------------------------------------------

    def create(self, plural: str, body: dict, namespace: str | None = None) -> dict:
        body = {"apiVersion": "kueue.x-k8s.io/v1beta2", **body}
        if namespace:
            return self.custom.create_namespaced_custom_object(*KUEUE, namespace, plural, body)
        return self.custom.create_cluster_custom_object(*KUEUE, plural, body)

    def get(self, plural: str, name: str, namespace: str | None = None) -> dict:
        if namespace:
            return self.custom.get_namespaced_custom_object(*KUEUE, namespace, plural, name)
        return self.custom.get_cluster_custom_object(*KUEUE, plural, name)

    def flavor(self, name: str = "h100", pool: str = "h100", **spec: object) -> dict:
        return self.create(
            "resourceflavors",
            {"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {"nodeLabels": {POOL_LABEL: pool}, **spec}},
        )

    def cluster_queue(
        self,
        name: str,
        nominal: int | None = None,
        *,
        flavor: str = "h100",
        borrowing=None,
        lending=None,
        groups: list | None = None,
        **spec: object,
    ) -> dict:
        if groups is None:
            groups = [gpu_group(flavor, nominal, borrowing, lending)]
        body = {"namespaceSelector": {}, "resourceGroups": groups, **spec}
        return self.create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": body})

    def cohort(
        self,
        name: str,
        parent: str | None = None,
        nominal: int | None = None,
        *,
        flavor: str = "h100",
        borrowing=None,
        weight: str | None = None,
    ) -> dict:
        spec: dict = {}
        if parent:
            spec["parentName"] = parent
        if nominal is not None:
            spec["resourceGroups"] = [gpu_group(flavor, nominal, borrowing)]
        if weight is not None:
            spec["fairSharing"] = {"weight": weight}
        return self.create("cohorts", {"kind": "Cohort", "metadata": {"name": name}, "spec": spec})

    def local_queue(self, name: str, cq: str, namespace: str) -> dict:
        return self.create(
            "localqueues", {"kind": "LocalQueue", "metadata": {"name": name}, "spec": {"clusterQueue": cq}}, namespace
        )

    def priority_class(self, name: str, value: int) -> dict:
        return self.create(
            "workloadpriorityclasses", {"kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}
        )

    def namespace(self) -> str:
        name = f"kq{next(_names)}"
        self.core.create_namespace({"metadata": {"name": name}})
        return name

    # -- Jobs and Workloads ------------------------------------------------------------------------------------

    def job(
        self,
        namespace: str,
        name: str,
        queue: str,
        gpu: int = 1,
        *,
        seconds: int = 600,
        parallelism: int = 1,
        priority_class: str | None = None,
        labels: dict | None = None,
        annotations: dict | None = None,
        node_selector: dict | None = None,
    ):
        """A Kueue-labelled Job (created unsuspended: the webhook suspends it)."""
        all_labels = {"kueue.x-k8s.io/queue-name": queue, **(labels or {})}
        if priority_class:
            all_labels["kueue.x-k8s.io/priority-class"] = priority_class
        pod_spec: dict = {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "command": ["sleep", str(seconds)],
                    "resources": {"requests": {GPU: str(gpu), "cpu": "1"}, "limits": {GPU: str(gpu)}},
                }
            ],
        }
        if node_selector:
            pod_spec["nodeSelector"] = node_selector
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": all_labels, "annotations": annotations or {}},
            "spec": {"parallelism": parallelism, "completions": parallelism, "template": {"spec": pod_spec}},
        }
        return self.batch.create_namespaced_job(namespace, body)

    def workload(self, namespace: str, job_name: str) -> dict:
        job = self.batch.read_namespaced_job(job_name, namespace)
        items = self.custom.list_namespaced_custom_object(
            *KUEUE, namespace, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={job.metadata.uid}"
        )["items"]
        assert len(items) == 1, items
        return items[0]

    def condition(self, namespace: str, job_name: str, ctype: str) -> dict | None:
        wl = self.workload(namespace, job_name)
        return next((c for c in wl.get("status", {}).get("conditions", []) if c["type"] == ctype), None)

    def admitted(self, namespace: str, job_name: str) -> bool:
        c = self.condition(namespace, job_name, "Admitted")
        return c is not None and c["status"] == "True"

    def running(self, namespace: str, names: list[str]) -> set[str]:
        return {n for n in names if self.admitted(namespace, n)}

    def pending_lq(self, namespace: str, lq: str, **query: int) -> list[dict]:
        path = f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{namespace}/localqueues/{lq}/pendingworkloads"
        return self._get(path, query)["items"]

    def pending_cq(self, cq: str, **query: int) -> list[dict]:
        return self._get(f"/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/{cq}/pendingworkloads", query)["items"]

    def _get(self, path: str, query: dict) -> dict:
        """GET through the official client's serialisation and connection (kubernetes client >= 33 API)."""
        method, url, headers, body, _ = self.client.param_serialize(
            "GET", path, query_params=list(query.items()), auth_settings=["BearerToken"]
        )
        resp = self.client.call_api(method, url, header_params=headers, body=body)
        resp.read()
        return json.loads(resp.data)

    # -- JobSets ------------------------------------------------------------------------------------------------

    def jobset(
        self,
        namespace: str,
        name: str,
        queue: str | None,
        *rjobs: dict,
        priority_class: str | None = None,
        labels: dict | None = None,
        **spec: object,
    ) -> dict:
        """A JobSet naming `queue` (created unsuspended unless spec says: Kueue's webhook suspends it); rjobs are
        tests.kubesim.conftest.replicated_job()s."""
        all_labels = dict(labels or {})
        if queue:
            all_labels["kueue.x-k8s.io/queue-name"] = queue
        if priority_class:
            all_labels["kueue.x-k8s.io/priority-class"] = priority_class
        body = jobset_body(name, *rjobs, labels=all_labels, **spec)
        return self.custom.create_namespaced_custom_object(*JOBSET, namespace, "jobsets", body)

    def read_jobset(self, namespace: str, name: str) -> dict:
        return self.custom.get_namespaced_custom_object(*JOBSET, namespace, "jobsets", name)

    def jobset_workloads(self, namespace: str, name: str) -> list[dict]:
        uid = self.read_jobset(namespace, name)["metadata"]["uid"]
        selector = f"kueue.x-k8s.io/job-uid={uid}"
        found = self.custom.list_namespaced_custom_object(*KUEUE, namespace, "workloads", label_selector=selector)
        return found["items"]

    def jobset_workload(self, namespace: str, name: str) -> dict:
        [wl] = self.jobset_workloads(namespace, name)
        return wl

    # -- TrainJobs and PyTorchJobs -------------------------------------------------------------------------------

    def submit(self, namespace: str, body: dict, queue: str | None = None) -> dict:
        """Create a TrainJob or PyTorchJob body (tests.kubesim.conftest.trainjob_body / pytorchjob_body) naming
        `queue`."""
        if queue:
            body["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = queue
        group_version, plural = _KUBEFLOW_KINDS[body["kind"]]
        return self.custom.create_namespaced_custom_object(*group_version, namespace, plural, body)

    def read(self, kind: str, namespace: str, name: str) -> dict:
        group_version, plural = _KUBEFLOW_KINDS[kind]
        return self.custom.get_namespaced_custom_object(*group_version, namespace, plural, name)

    def patch(self, kind: str, namespace: str, name: str, body: dict) -> dict:
        group_version, plural = _KUBEFLOW_KINDS[kind]
        return self.custom.patch_namespaced_custom_object(*group_version, namespace, plural, name, body)

    def patch_status(self, kind: str, namespace: str, name: str, status: dict) -> None:
        """Write a status as upstream's integration tests do (the operator is told to keep away by managedBy)."""
        group_version, plural = _KUBEFLOW_KINDS[kind]
        self.custom.patch_namespaced_custom_object_status(*group_version, namespace, plural, name, {"status": status})
        self.settle()

    def owned_workloads(self, kind: str, namespace: str, name: str) -> list[dict]:
        uid = self.read(kind, namespace, name)["metadata"]["uid"]
        selector = f"kueue.x-k8s.io/job-uid={uid}"
        return self.custom.list_namespaced_custom_object(*KUEUE, namespace, "workloads", label_selector=selector)[
            "items"
        ]

    def owned_workload(self, kind: str, namespace: str, name: str) -> dict:
        [wl] = self.owned_workloads(kind, namespace, name)
        return wl

    def events(self, namespace: str, name: str) -> list[tuple[str, str]]:
        evs = self.core.list_namespaced_event(namespace).items
        return [(e.reason, e.message) for e in evs if e.involved_object.name == name]


_KUBEFLOW_KINDS = {"TrainJob": (TRAINER, "trainjobs"), "PyTorchJob": (KUBEFLOW, "pytorchjobs")}


def _cluster(**kwargs: object) -> Iterator[Cluster]:
    with serve(clock="manual", **kwargs) as ks:
        api_client = ks.api_client()
        try:
            yield Cluster(ks, api_client)
        finally:
            api_client.close()


@pytest.fixture(scope="module")
def cluster_module() -> Iterator[Cluster]:
    yield from _cluster()


@pytest.fixture
def kc(cluster_module: Cluster) -> Cluster:
    """A reset cluster (empty apart from nodes) per test."""
    cluster_module.ks.reset()
    return cluster_module


@pytest.fixture(scope="module")
def kc_ready() -> Iterator[Cluster]:
    """A cluster with waitForPodsReady (timeout 60s, backoff base 10s, limit 1 requeue)."""
    config = {
        "waitForPodsReady": {
            "enable": True,
            "timeout": "60s",
            "requeuingStrategy": {"backoffLimitCount": 1, "backoffBaseSeconds": 10, "backoffMaxSeconds": 100},
        }
    }
    yield from _cluster(kueue_config=config)
