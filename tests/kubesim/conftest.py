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
