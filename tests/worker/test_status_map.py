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
    config = {"provisioningClassName": "queued-provisioning.gke.io"}
    kc.create(
        "provisioningrequestconfigs",
        {"kind": "ProvisioningRequestConfig", "metadata": {"name": "capacity"}, "spec": config},
    )
    ref = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "capacity"}
    kc.create(
        "admissionchecks",
        {
            "kind": "AdmissionCheck",
            "metadata": {"name": "capacity"},
            "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request", "parameters": ref},
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


def test_requeued_after_preemption_waits_in_plain_words():
    """Until its next scheduling attempt, a preempted Workload's QuotaReserved=False carries the preemption's own
    message (UIDs, cohort paths), as Kueue's eviction sets it: the wait reads plainly, the preemption keeps the raw
    words (the watcher records those on the preemption event)."""
    raw = (
        "Preempted to accommodate a workload (UID: 3f2c, JobUID: 9a1b) due to reclamation within the cohort; "
        "preemptor path: /portal-h100/proj-nlp-h100; preemptee path: /portal-h100/proj-vision-h100"
    )
    at = "2026-12-02T10:00:00Z"
    conditions = [
        {"type": "QuotaReserved", "status": "False", "reason": "Preempted", "message": raw, "lastTransitionTime": at},
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": raw, "lastTransitionTime": at},
        {
            "type": "Preempted",
            "status": "True",
            "reason": "InCohortReclamation",
            "message": raw,
            "lastTransitionTime": at,
        },
        {"type": "Requeued", "status": "True", "reason": "Preempted", "message": raw, "lastTransitionTime": at},
    ]
    workload = {"metadata": {"name": "job-train-1"}, "status": {"conditions": conditions}}
    seen = observe(None, workload)
    assert seen.status == Status.QUEUED and seen.reason == "Preempted"
    assert seen.message == "Back in the queue after a preemption, waiting for its next scheduling attempt"
    assert seen.preemption.message == raw and seen.preemption.preemptor_job_uid == "9a1b"
