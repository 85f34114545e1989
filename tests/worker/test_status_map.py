"""The watcher's status mapping for a workload whose quota is reserved while its admission checks are not all Ready,
on the objects a served kubesim returns through the official client (a ProvisioningRequest-style check kubesim
satisfies after 60 s)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from apps.workloads.models import Status
from tests.kubesim.kueue.conftest import Cluster, _cluster
from worker.status_map import observe


@pytest.fixture(scope="module")
def kc() -> Iterator[Cluster]:
    yield from _cluster(kueue_config={"kubesim": {"provisioningRequestDelay": "60s"}})


def _objects(kc: Cluster, ns: str, name: str) -> tuple[dict, dict]:
    job = kc.client.sanitize_for_serialization(kc.batch.read_namespaced_job(name, ns))
    return job, kc.workload(ns, name)


def test_reserved_workload_waiting_on_its_provisioning_check(kc: Cluster):
    kc.create(
        "admissionchecks",
        {
            "kind": "AdmissionCheck",
            "metadata": {"name": "capacity"},
            "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"},
        },
    )
    kc.flavor()
    kc.cluster_queue("cq", 4, admissionChecksStrategy={"admissionChecks": [{"name": "capacity"}]})
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    kc.job(ns, "train", "lq", 2)
    kc.settle(1)
    job, workload = _objects(kc, ns, "train")
    seen = observe(job, workload)
    request = f"{workload['metadata']['name']}-capacity-1"
    assert (seen.status, seen.reason) == (Status.QUEUED, "UnsatisfiedAdmissionChecks")
    assert seen.message == f"capacity: Pending (Waiting for ProvisioningRequest {request} to be provisioned)"
    assert seen.cluster_queue == "cq"
    waiting = f"Waiting for ProvisioningRequest {request} to be provisioned"
    assert seen.admission["checks"] == [{"name": "capacity", "state": "Pending", "message": waiting}]
    kc.settle(60)
    seen = observe(*_objects(kc, ns, "train"))
    assert seen.status in (Status.ADMITTED, Status.RUNNING)
