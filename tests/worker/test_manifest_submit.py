"""A manifest through the API, end to end, for every kind the portal submits: the real Celery worker creates the
prepared object in kubesim with fieldValidation=Strict, Kueue admits it in the queue the portal chose, the real
watcher follows it as the portal's own workload (origin portal, the manifest's kind, never a second row from
outside), it finishes (or, serving until deleted, is stopped through the portal), its GPU-hours are its admitted time
times its GPUs, and a stop through the portal deletes the object."""

from __future__ import annotations

import pytest
import yaml

from apps.workloads.manifests import MANIFEST_KINDS
from apps.workloads.models import Status, Workload
from tests.api_support import call
from tests.worker.conftest import signed_in, wait_for
from tests.worker.manifest_kinds import CASES, follow_to_the_end, jobset_manifest

pytestmark = pytest.mark.slow


def test_every_kind_the_portal_submits_has_a_case():
    assert set(CASES) == {entry.kind for entry in MANIFEST_KINDS.values()}


@pytest.mark.parametrize("kind", list(CASES))
def test_a_manifest_is_created_admitted_finished_and_counted(org, cluster, kubesim, celery_worker, watcher, kind):
    alice = signed_in(org["alice"])
    response = call(alice, "POST", "workloads/", {
        "project": "vision", "kind": "manifest", "manifest": yaml.safe_dump(CASES[kind].build(300)),
        "node_pool": "h100", "preemptible": False, "labels": {"model": "resnet", "data_class": "public"}})
    assert response.status_code == 201, response.content
    workload_id = response.json()["id"]

    def stop() -> None:
        assert call(alice, "POST", f"workloads/{workload_id}/stop/").status_code == 202

    follow_to_the_end(kubesim=kubesim, cluster=cluster, workload_id=workload_id, kind=kind, stop=stop,
                      owner_id=org["alice"].pk)


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
