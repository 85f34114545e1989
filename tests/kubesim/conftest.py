"""Fixtures for kubesim's server half: one in-process kubesim per test module, reached via the official client."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from kubernetes import client

from kubesim.testing import InProcessKubesim, serve

_ns_counter = itertools.count()


@pytest.fixture(scope="module")
def ks() -> Iterator[InProcessKubesim]:
    """A manual-clock kubesim without the Kueue half, so these tests pin the plain Kubernetes behaviour."""
    with serve(clock="manual", kueue=None, bookmark_interval=0.2) as server:
        yield server


@pytest.fixture(scope="module")
def api(ks: InProcessKubesim) -> Iterator[SimpleNamespace]:
    api_client = ks.api_client()
    yield SimpleNamespace(
        client=api_client,
        core=client.CoreV1Api(api_client),
        batch=client.BatchV1Api(api_client),
        custom=client.CustomObjectsApi(api_client),
    )
    api_client.close()


@pytest.fixture
def ns(api: SimpleNamespace) -> str:
    """A fresh namespace per test so tests in one module do not see each other's objects."""
    name = f"t{next(_ns_counter)}"
    api.core.create_namespace({"metadata": {"name": name}})
    return name


def job_body(name: str, command: str = "sleep 30", **spec: object) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", command]}],
                }
            },
            **spec,
        },
    }


def pod_body(name: str, command: str = "sleep 3600", **meta: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **meta},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", command]}],
        },
    }


def cluster_queue(name: str, **spec: object) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}],
                }
            ],
            **spec,
        },
    }


def local_queue_body(name: str, cluster_queue: str) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name},
        "spec": {"clusterQueue": cluster_queue},
    }


def workload_body(name: str, queue: str = "lq") -> dict:
    """A Kueue Workload of one busybox pod."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {
            "queueName": queue,
            "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
            ],
        },
    }


KUEUE = ("kueue.x-k8s.io", "v1beta2")


def http(api: SimpleNamespace, method: str, path: str, body: object = None, content_type: str = "application/json"):
    """A request the typed client refuses to send (it validates bodies), over the client's own connection pool."""
    data = json.dumps(body).encode() if body is not None else None
    return api.client.rest_client.pool_manager.request(
        method, api.client.configuration.host + path, body=data, headers={"Content-Type": content_type}
    )


def raw(api: SimpleNamespace, method: str, path: str, body: object = None, content_type: str = "application/json"):
    """(status, JSON body) of http()."""
    resp = http(api, method, path, body, content_type)
    try:
        return resp.status, json.loads(resp.data)
    except ValueError:
        return resp.status, resp.data.decode()


JOBSET = ("jobset.x-k8s.io", "v1alpha2")


def replicated_job(
    name: str,
    replicas: int = 1,
    parallelism: int = 1,
    command: str = "sleep 30",
    requests: dict | None = None,
    **pod_spec: object,
) -> dict:
    """One replicatedJob of a JobSet: `replicas` Jobs of `parallelism` busybox pods (completions = parallelism), each
    requesting `requests` (extended resources such as GPUs are limited to the same amount, as Kubernetes requires)."""
    container: dict = {"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", command]}
    if requests:
        limits = {name: value for name, value in requests.items() if "/" in name}
        container["resources"] = {"requests": requests, **({"limits": limits} if limits else {})}
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": parallelism,
                "completions": parallelism,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container], **pod_spec}},
            }
        },
    }


def jobset_body(name: str, *rjobs: dict, labels: dict | None = None, **spec: object) -> dict:
    """A JobSet (jobset.x-k8s.io/v1alpha2) of the given replicatedJobs (one `sleep 30` pod when none are given)."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"replicatedJobs": list(rjobs) or [replicated_job("main")], **spec},
    }


TRAINER = ("trainer.kubeflow.org", "v1alpha1")
KUBEFLOW = ("kubeflow.org", "v1")


def pytorch_replica(replicas: int | None = 1, command: str = "sleep 30", requests: dict | None = None,
                    **pod_spec: object) -> dict:
    """One replica type of a PyTorchJob: `replicas` pods of a busybox `pytorch` container (extended resources
    limited to their requests, as Kubernetes requires)."""
    container: dict = {"name": "pytorch", "image": "busybox:1.36", "command": ["sh", "-c", command]}
    if requests:
        limits = {name: value for name, value in requests.items() if "/" in name}
        container["resources"] = {"requests": requests, **({"limits": limits} if limits else {})}
    out: dict = {"template": {"spec": {"containers": [container], **pod_spec}}}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def pytorchjob_body(name: str, master: dict | None = None, worker: dict | None = None,
                    labels: dict | None = None, **run_policy: object) -> dict:
    """A PyTorchJob (kubeflow.org/v1) of the given Master and Worker replica specs (pytorch_replica())."""
    specs = {k: v for k, v in (("Master", master), ("Worker", worker)) if v is not None}
    spec: dict = {"pytorchReplicaSpecs": specs}
    if run_policy:
        spec["runPolicy"] = dict(run_policy)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec}


def trainjob_body(name: str, runtime: str = "torch-distributed", kind: str | None = None,
                  labels: dict | None = None, **trainer: object) -> dict:
    """A TrainJob (trainer.kubeflow.org/v1alpha1) of `runtime` (a ClusterTrainingRuntime unless kind says), with the
    given spec.trainer fields."""
    ref: dict = {"name": runtime}
    if kind:
        ref["kind"] = kind
    spec: dict = {"runtimeRef": ref}
    if trainer:
        spec["trainer"] = dict(trainer)
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def training_runtime_body(name: str, *rjobs: dict, kind: str = "TrainingRuntime", ml_policy: dict | None = None
                          ) -> dict:
    """A (Cluster)TrainingRuntime whose JobSet template has the given replicatedJobs (replicated_job())."""
    spec: dict = {"template": {"spec": {"replicatedJobs": list(rjobs)}}}
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}
