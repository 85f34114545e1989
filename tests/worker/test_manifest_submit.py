"""A manifest through the API, end to end: the real Celery worker creates the prepared object in kubesim with
fieldValidation=Strict, Kueue admits it in the queue the portal chose, the real watcher follows it as the portal's
own workload (origin portal, the manifest's kind, never a second row from outside), it finishes, its GPU-hours are
its admitted time times its GPUs, and a stop through the portal deletes the object."""

from __future__ import annotations

import pytest
import yaml

from apps.usage.models import UsageInterval
from apps.workloads.models import Kind, Origin, Status, Workload
from tests.api_support import call
from tests.worker.conftest import signed_in, wait_for

pytestmark = pytest.mark.slow
GPU = "nvidia.com/gpu"


def pod_spec(seconds: int, gpus: int) -> dict:
    return {"restartPolicy": "Never", "containers": [{
        "name": "main", "image": "pytorch/pytorch:2.4.0", "command": ["sleep", str(seconds)],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi", GPU: gpus}, "limits": {GPU: gpus}}}]}


def job_manifest(seconds: int) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "plain-job"},
            "spec": {"parallelism": 2, "completions": 2, "template": {"spec": pod_spec(seconds, 1)}}}


def jobset_manifest(seconds: int) -> dict:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "my-jobset"},
            "spec": {"replicatedJobs": [
                {"name": "leader", "replicas": 1, "template": {"spec": {"template": {"spec": pod_spec(seconds, 2)}}}},
                {"name": "workers", "replicas": 2, "template": {"spec": {
                    "template": {"spec": pod_spec(seconds, 1)}}}}]}}


CASES = {
    Kind.JOB: (job_manifest, "jobs", "/apis/batch/v1", 2),
    Kind.JOBSET: (jobset_manifest, "jobsets", "/apis/jobset.x-k8s.io/v1alpha2", 4),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_a_manifest_is_created_admitted_finished_and_counted(org, cluster, kubesim, celery_worker, watcher, kind):
    build, plural, root, units = CASES[kind]
    alice = signed_in(org["alice"])
    response = call(alice, "POST", "workloads/", {
        "project": "vision", "kind": "manifest", "manifest": yaml.safe_dump(build(300)), "node_pool": "h100",
        "preemptible": False, "labels": {"model": "resnet", "data_class": "public"}})
    assert response.status_code == 201, response.content
    workload = Workload.objects.get(pk=response.json()["id"])
    wait_for(lambda: Workload.objects.get(pk=workload.pk).k8s_uid, describe=lambda: Workload.objects.get(
        pk=workload.pk).status_message)
    obj = cluster.raw_get(f"{root}/namespaces/proj-vision/{plural}/{workload.job_name}")
    labels = obj["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "guaranteed-h100"
    assert labels["portal.gpu/workload-id"] == str(workload.pk)
    kubesim.advance(1)
    admitted = wait_for(lambda: (row := Workload.objects.get(pk=workload.pk)).admitted_at and row,
                        describe=lambda: Workload.objects.get(pk=workload.pk).status)
    assert admitted.cluster_queue == "proj-vision-h100-guaranteed" and admitted.gpu_units == units
    assert admitted.origin == Origin.PORTAL and admitted.kind == kind
    if kind == Kind.JOB:  # a JobSet reads as running once Kueue says its pods are ready (waitForPodsReady)
        wait_for(lambda: Workload.objects.get(pk=workload.pk).status == Status.RUNNING)
    kubesim.advance(310)
    wait_for(lambda: Workload.objects.get(pk=workload.pk).status == Status.SUCCEEDED,
             describe=lambda: (Workload.objects.get(pk=workload.pk).status,
                               Workload.objects.get(pk=workload.pk).status_message))
    interval = wait_for(lambda: UsageInterval.objects.filter(workload_id=workload.pk, ended_at__isnull=False).first())
    held = (interval.ended_at - interval.started_at).total_seconds()
    assert interval.units == units and interval.user_id == org["alice"].pk
    assert 300 <= held <= 312
    # One row: the watcher never mirrored the portal's own object as work from outside.
    assert Workload.objects.count() == 1


def test_a_jobset_manifest_stopped_through_the_portal_is_deleted(org, cluster, kubesim, celery_worker, watcher):
    alice = signed_in(org["alice"])
    response = call(alice, "POST", "workloads/", {
        "project": "vision", "kind": "manifest", "manifest": yaml.safe_dump(jobset_manifest(600)),
        "node_pool": "h100", "labels": {"model": "resnet", "data_class": "public"}})
    assert response.status_code == 201, response.content
    workload_id = response.json()["id"]
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=workload_id).admitted_at,
             describe=lambda: Workload.objects.get(pk=workload_id).status)
    assert call(alice, "POST", f"workloads/{workload_id}/stop/").status_code == 202
    wait_for(lambda: Workload.objects.get(pk=workload_id).status == Status.STOPPED,
             describe=lambda: Workload.objects.get(pk=workload_id).status)
    kubesim.advance(30)
    wait_for(lambda: not cluster.raw_get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/proj-vision/jobsets")["items"])
    assert Workload.objects.count() == 1
