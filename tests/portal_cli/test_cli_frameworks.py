"""`gpu submit` on a framework, against the served portal with the real worker and watcher: `--framework pytorch`
from flags becomes a TrainJob whose pods carry torchrun's rendezvous, admitted as one gang; `framework: ray` from a
job file becomes a RayJob running its entrypoint."""

from __future__ import annotations

import pytest

from apps.workloads.models import Status, Workload
from tests.portal_cli.support import gpu_json
from tests.portal_cli.test_cli import SUBMIT
from tests.worker.conftest import wait_for

pytestmark = pytest.mark.slow


def test_submit_on_pytorch_from_flags_and_on_ray_from_a_job_file(signed_in, kubesim, cluster, celery_worker,
                                                                  watcher, tmp_path):
    created = gpu_json("submit", *SUBMIT, "-n", "cli-ddp", "--framework", "pytorch", "--pods", "2", "--",
                       "sleep", "60")
    assert created["framework"] == "pytorch" and created["gpu_units"] == 2
    wait_for(lambda: Workload.objects.get(pk=created["id"]).k8s_uid,
             describe=lambda: Workload.objects.get(pk=created["id"]).status_message)
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=created["id"]).admitted_at)
    pods = wait_for(lambda: len(found := cluster.raw_get("/api/v1/namespaces/proj-vision/pods", query=[
        ("labelSelector", f"portal.gpu/workload-id={created['id']}")])["items"]) == 2 and found)
    ranks = sorted(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for pod in pods)
    assert ranks == ["0", "1"]
    assert all({"name": "PET_NNODES", "value": "2"} in pod["spec"]["containers"][0]["env"] for pod in pods)
    assert gpu_json("status", str(created["id"]))["object"]["kind"] == "TrainJob"

    job = tmp_path / "ray.yaml"
    job.write_text("project: vision\nkind: training\nframework: ray\nname: cli-ray\nimage: rayproject/ray:2.41.0\n"
                   "ray_entrypoint: sleep 30\nnode_pool: h100\ngpus: 1\npods: 1\n"
                   "labels: {model: resnet50, data_class: public}\n")
    from_file = gpu_json("submit", "-f", str(job))
    assert from_file["framework"] == "ray"
    wait_for(lambda: Workload.objects.get(pk=from_file["id"]).k8s_uid,
             describe=lambda: Workload.objects.get(pk=from_file["id"]).status_message)
    rayjob = cluster.raw_get(f"/apis/ray.io/v1/namespaces/proj-vision/rayjobs/wl-{from_file['id']}")
    assert rayjob["spec"]["entrypoint"] == "sleep 30"
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=from_file["id"]).admitted_at)
    kubesim.advance(100)
    wait_for(lambda: {Workload.objects.get(pk=pk).status for pk in (created["id"], from_file["id"])}
             == {Status.SUCCEEDED},
             describe=lambda: [Workload.objects.get(pk=pk).status for pk in (created["id"], from_file["id"])])
