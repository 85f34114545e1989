"""Training on a framework, end to end in kubesim with the real Celery worker and watcher: PyTorch through the API as
a Trainer TrainJob on the runtime for torch the watcher found (a JobSet where it found none), through the form as a
JobSet on a cluster without Trainer, Ray through the API and through the form as a RayJob. Each
is admitted as one gang in the queue the portal chose, its pods carry what the framework reads (torchrun's PET_*
rendezvous, Ray's GPU workers), the watcher follows it as the portal's own workload (one row), a preempted gang is
requeued and admitted again, and its GPU-hours are its admitted time times its GPUs."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.cluster import services as mirror
from apps.cluster.selectors import served_for_training
from apps.org.models import NodePool, Project
from apps.usage.models import UsageInterval
from apps.workloads import services
from apps.workloads.models import Framework, Kind, Origin, Status, Workload, WorkloadEvent
from tests.api_support import call
from tests.apps.workloads.helpers import submit_payload
from tests.worker.conftest import signed_in, wait_for
from tests.worker.test_watcher import submit
from worker import tasks
from worker.watcher import Watcher

pytestmark = pytest.mark.slow
INDEX = "batch.kubernetes.io/job-completion-index"


def row(workload_id: int) -> Workload:
    return Workload.objects.get(pk=workload_id)


def pods_of(cluster, workload_id: int) -> list[dict]:
    return cluster.raw_get("/api/v1/namespaces/proj-vision/pods",
                           query=[("labelSelector", f"portal.gpu/workload-id={workload_id}")])["items"]


def env_of(container: dict) -> dict:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container.get("env") or []}


def finished_and_counted(kubesim, workload_id: int, *, units: int, seconds: int) -> None:
    kubesim.advance(seconds + 10)
    wait_for(lambda: row(workload_id).status == Status.SUCCEEDED,
             describe=lambda: (row(workload_id).status, row(workload_id).status_message))
    interval = wait_for(lambda: UsageInterval.objects.filter(workload_id=workload_id, ended_at__isnull=False).first())
    held = (interval.ended_at - interval.started_at).total_seconds()
    assert interval.units == units
    assert seconds <= held <= seconds + 12


def test_pytorch_through_the_api_is_a_trainjob_whose_pods_rendezvous_with_torchrun(org, cluster, kubesim,
                                                                                    celery_worker, watcher):
    wait_for(watcher.synced.is_set)
    # The watcher found Trainer's runtime for torch (kubesim installs it as Trainer does).
    assert served_for_training()[1] == "torch-distributed"
    alice = signed_in(org["alice"])
    response = call(alice, "POST", "workloads/", {
        "project": "vision", "kind": "training", "framework": "pytorch", "name": "ddp",
        "image": "pytorch/pytorch:2.4.0", "command": ["sleep", "300"], "node_pool": "h100", "gpus": 2, "pods": 2,
        "preemptible": False,
        "labels": {"model": "resnet", "data_class": "public"}})
    assert response.status_code == 201, response.content
    assert response.json()["framework"] == "pytorch"
    workload_id = response.json()["id"]
    wait_for(lambda: row(workload_id).k8s_uid, describe=lambda: row(workload_id).status_message)
    name = row(workload_id).job_name
    trainjob = cluster.raw_get(f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/proj-vision/trainjobs/{name}")
    assert trainjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "guaranteed-h100"
    assert trainjob["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "build"
    assert call(alice, "GET", f"workloads/{workload_id}/").json()["object"] == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": name}
    assert trainjob["spec"]["runtimeRef"]["name"] == "torch-distributed"
    kubesim.advance(1)
    admitted = wait_for(lambda: (found := row(workload_id)).admitted_at and found,
                        describe=lambda: row(workload_id).status)
    assert admitted.cluster_queue == "proj-vision-h100-guaranteed" and admitted.gpu_units == 4
    # One gang: both nodes' pods at once, each with its rank from its index and rank 0's address.
    pods = wait_for(lambda: len(found := pods_of(cluster, workload_id)) == 2 and found)
    assert sorted(pod["metadata"]["annotations"][INDEX] for pod in pods) == ["0", "1"]
    for pod in pods:
        (container,) = pod["spec"]["containers"]
        env = env_of(container)
        assert env["PET_NNODES"] == "2" and env["PET_NPROC_PER_NODE"] == "2" and env["PET_MASTER_PORT"] == "29500"
        assert env["PET_MASTER_ADDR"] == f"{name}-node-0-0.{name}"
        assert env["PET_NODE_RANK"] == {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX}']"}}
        assert env["PORTAL_WORKLOAD_ID"] == str(workload_id)
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    finished_and_counted(kubesim, workload_id, units=4, seconds=300)
    # One row: the watcher never mirrored the TrainJob (or the JobSet the Trainer made of it) as outside work.
    assert Workload.objects.count() == 1
    assert Workload.objects.get().origin == Origin.PORTAL and Workload.objects.get().kind == Kind.TRAINING


def test_pytorch_is_a_trainjob_on_the_runtime_the_watcher_found_and_a_jobset_without_one(org, cluster, kubesim):
    alice = org["alice"]
    runtimes = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes"
    installed = cluster.raw_get(f"{runtimes}/torch-distributed")
    # The cluster's admins replaced Trainer's runtime with their own, labelled for torch (next to one that is not).
    for name, framework in (("torch-h100", "torch"), ("jax-tpu", "jax")):
        labels = {"trainer.kubeflow.org/framework": framework}
        kubesim.apply({**installed, "metadata": {"name": name, "labels": labels}})
    cluster.delete_path(f"{runtimes}/torch-distributed")
    Watcher(cluster, resync_seconds=3600).resync()
    assert served_for_training()[1] == "torch-h100"
    on_runtime = framework_submitted(alice, name="on-runtime")
    assert on_runtime.training_runtime == "torch-h100"
    trainjob = cluster.raw_get(f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/proj-vision/trainjobs/"
                               f"{on_runtime.job_name}")
    assert trainjob["spec"]["runtimeRef"]["name"] == "torch-h100"

    # Without a runtime for torch Trainer would refuse a TrainJob: the next resync says so, PyTorch runs as a JobSet.
    cluster.delete_path(f"{runtimes}/torch-h100")
    Watcher(cluster, resync_seconds=3600).resync()
    served, runtime = served_for_training()
    assert served is not None and "trainjob" in served and runtime == ""
    without = framework_submitted(alice, name="without-runtime")
    assert (without.object_api_version, without.training_runtime) == ("jobset.x-k8s.io/v1alpha2", "")
    assert cluster.raw_get(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/proj-vision/jobsets/{without.job_name}")
    # The row submitted on the runtime keeps it: a retried submit creates the same TrainJob.
    assert row(on_runtime.pk).training_runtime == "torch-h100"


def framework_submitted(user, *, name: str) -> Workload:
    workload = services.workload_submit(
        actor=user, project=Project.objects.get(slug="vision"), kind=Kind.TRAINING, framework=Framework.PYTORCH,
        name=name, image="pytorch/pytorch:2.4.0", command=["sleep", "60"], node_pool=NodePool.objects.get(slug="h100"),
        gpus=1, pods=2, model_label="resnet", data_class="public", preemptible=True)
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    return row(workload.pk)


def test_pytorch_through_the_form_without_trainer_is_a_jobset_preempted_requeued_and_finished(org, cluster, kubesim,
                                                                                               celery_worker, watcher):
    wait_for(watcher.synced.is_set)
    # This cluster's Trainer is away: the watcher last saw JobSet served, not TrainJob.
    mirror.watcher_served_kinds(kinds=["job", "jobset", "pod", "rayjob"], at=timezone.now())
    # Forecasting fills Data Science's cards; Vision borrows NLP's idle deserved cards with its elastic gang.
    ds = submit(kubesim, org["carol"], project="forecasting", name="ds")
    wait_for(lambda: row(ds.pk).status == Status.RUNNING)
    payload = submit_payload("training", framework="pytorch", gpus="4", pods="2", command="sleep 300", args="")
    response = signed_in(org["alice"]).post(reverse("workloads:submit", args=["training"]), payload)
    assert response.status_code == 302, response.content
    borrower = Workload.objects.get(name="my-training")
    assert borrower.framework == Framework.PYTORCH
    wait_for(lambda: row(borrower.pk).k8s_uid, describe=lambda: row(borrower.pk).status_message)
    jobset = cluster.raw_get(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/proj-vision/jobsets/{borrower.job_name}")
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "elastic-h100"
    kubesim.advance(1)
    wait_for(lambda: row(borrower.pk).admitted_at, describe=lambda: row(borrower.pk).status)
    assert row(borrower.pk).gpu_units == 8
    pods = wait_for(lambda: len(found := pods_of(cluster, borrower.pk)) == 2 and found)
    for pod in pods:
        env = env_of(pod["spec"]["containers"][0])
        assert env["PET_MASTER_ADDR"] == f"{borrower.job_name}-node-0-0.{borrower.job_name}"
        assert env["PET_NNODES"] == "2" and env["PET_NPROC_PER_NODE"] == "4"
    # NLP takes its deserved cards back: the whole gang goes back to the queue.
    reclaimer = submit(kubesim, org["bob"], project="nlp", preemptible=False, gpus=4, seconds=60, name="reclaim")
    wait_for(lambda: row(reclaimer.pk).status == Status.RUNNING, describe=lambda: row(reclaimer.pk).status)
    event = wait_for(lambda: WorkloadEvent.objects.filter(workload=borrower, to_status=Status.PREEMPTED).first())
    assert event.details["preemptor_job_uid"] == row(reclaimer.pk).k8s_uid
    wait_for(lambda: row(borrower.pk).status == Status.REQUEUED, describe=lambda: row(borrower.pk).status)
    first = UsageInterval.objects.filter(workload_id=borrower.pk).order_by("started_at").first()
    assert first.units == 8 and first.ended_at == event.cluster_at
    kubesim.advance(70)  # the reclaimer ends; the gang is admitted again and runs to its end
    # A JobSet reads as running only once Kueue says its pods are ready (waitForPodsReady, off here): admitted.
    wait_for(lambda: row(borrower.pk).status in (Status.ADMITTED, Status.RUNNING),
             describe=lambda: row(borrower.pk).status)
    kubesim.advance(310)
    wait_for(lambda: row(borrower.pk).status == Status.SUCCEEDED,
             describe=lambda: (row(borrower.pk).status, row(borrower.pk).status_message))
    intervals = wait_for(lambda: (found := list(UsageInterval.objects.filter(workload_id=borrower.pk).order_by(
        "started_at"))) and len(found) == 2 and found[1].ended_at and found)
    assert [interval.units for interval in intervals] == [8, 8]
    assert 300 <= (intervals[1].ended_at - intervals[1].started_at).total_seconds() <= 312
    assert Workload.objects.filter(origin=Origin.OUTSIDE).count() == 0


def test_ray_through_the_api_is_a_rayjob_with_gpu_workers_that_runs_its_entrypoint(org, cluster, kubesim,
                                                                                     celery_worker, watcher):
    alice = signed_in(org["alice"])
    response = call(alice, "POST", "workloads/", {
        "project": "vision", "kind": "training", "framework": "ray", "name": "tune", "image": "rayproject/ray:2.41.0",
        "ray_entrypoint": "sleep 300", "ray_working_dir": "/home/ray/work", "node_pool": "h100", "gpus": 2,
        "pods": 2, "preemptible": False, "labels": {"model": "resnet", "data_class": "public"}})
    assert response.status_code == 201, response.content
    workload_id = response.json()["id"]
    wait_for(lambda: row(workload_id).k8s_uid, describe=lambda: row(workload_id).status_message)
    name = row(workload_id).job_name
    rayjob = cluster.raw_get(f"/apis/ray.io/v1/namespaces/proj-vision/rayjobs/{name}")
    assert rayjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "guaranteed-h100"
    assert rayjob["spec"]["entrypoint"] == "sleep 300"
    kubesim.advance(1)
    admitted = wait_for(lambda: (found := row(workload_id)).admitted_at and found,
                        describe=lambda: row(workload_id).status)
    assert admitted.cluster_queue == "proj-vision-h100-guaranteed" and admitted.gpu_units == 4
    # The head without GPUs and both workers with theirs, started together.
    pods = wait_for(lambda: len(found := [pod for pod in pods_of(cluster, workload_id)
                                          if "ray-job-submitter" not in pod["metadata"]["name"]]) == 3 and found,
                    describe=lambda: [pod["metadata"]["name"] for pod in pods_of(cluster, workload_id)])
    gpus = sorted(pod["spec"]["containers"][0]["resources"].get("limits", {}).get("nvidia.com/gpu", "0")
                  for pod in pods)
    assert gpus == ["0", "2", "2"]
    kubesim.advance(30)
    finished_and_counted(kubesim, workload_id, units=4, seconds=300)
    assert Workload.objects.count() == 1


def test_ray_through_the_form_is_a_rayjob_preempted_requeued_and_finished(org, cluster, kubesim, celery_worker,
                                                                          watcher):
    wait_for(watcher.synced.is_set)
    # Forecasting fills Data Science's cards; Vision's Ray job borrows NLP's idle deserved cards.
    ds = submit(kubesim, org["carol"], project="forecasting", name="ds")
    wait_for(lambda: row(ds.pk).status == Status.RUNNING)
    # The form as a browser without the script sends it: Ray's fields filled, command and arguments left empty.
    payload = submit_payload("training", framework="ray", gpus="4", pods="2", command="", args="",
                             image="rayproject/ray:2.41.0", ray_entrypoint="sleep 300", ray_version="",
                             ray_working_dir="/home/ray/work")
    response = signed_in(org["alice"]).post(reverse("workloads:submit", args=["training"]), payload)
    assert response.status_code == 302, response.content
    borrower = Workload.objects.get(name="my-training")
    assert borrower.framework == Framework.RAY
    assert borrower.framework_settings == {"ray_version": "2.41.0", "ray_entrypoint": "sleep 300",
                                           "ray_working_dir": "/home/ray/work"}
    wait_for(lambda: row(borrower.pk).k8s_uid, describe=lambda: row(borrower.pk).status_message)
    rayjob = cluster.raw_get(f"/apis/ray.io/v1/namespaces/proj-vision/rayjobs/{borrower.job_name}")
    assert rayjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "elastic-h100"
    assert rayjob["spec"]["entrypoint"] == "sleep 300"
    assert rayjob["spec"]["rayClusterSpec"]["rayVersion"] == "2.41.0"
    assert "working_dir: /home/ray/work" in rayjob["spec"]["runtimeEnvYAML"]
    kubesim.advance(1)
    wait_for(lambda: row(borrower.pk).admitted_at, describe=lambda: row(borrower.pk).status)
    assert row(borrower.pk).gpu_units == 8  # the workers' cards; the head has none
    # NLP takes its deserved cards back: the whole Ray cluster goes back to the queue.
    reclaimer = submit(kubesim, org["bob"], project="nlp", preemptible=False, gpus=4, seconds=60, name="reclaim")
    wait_for(lambda: row(reclaimer.pk).status == Status.RUNNING, describe=lambda: row(reclaimer.pk).status)
    event = wait_for(lambda: WorkloadEvent.objects.filter(workload=borrower, to_status=Status.PREEMPTED).first())
    assert event.details["preemptor_job_uid"] == row(reclaimer.pk).k8s_uid
    wait_for(lambda: row(borrower.pk).status == Status.REQUEUED, describe=lambda: row(borrower.pk).status)
    first = UsageInterval.objects.filter(workload_id=borrower.pk).order_by("started_at").first()
    assert first.units == 8 and first.ended_at == event.cluster_at
    kubesim.advance(70)  # the reclaimer ends; the Ray job is admitted again and runs its entrypoint to the end
    wait_for(lambda: row(borrower.pk).status in (Status.ADMITTED, Status.RUNNING),
             describe=lambda: row(borrower.pk).status)
    kubesim.advance(30)  # the new Ray cluster comes up; then the entrypoint runs again, from its start
    kubesim.advance(310)
    wait_for(lambda: row(borrower.pk).status == Status.SUCCEEDED,
             describe=lambda: (row(borrower.pk).status, row(borrower.pk).status_message))
    intervals = wait_for(lambda: (found := list(UsageInterval.objects.filter(workload_id=borrower.pk).order_by(
        "started_at"))) and len(found) == 2 and found[1].ended_at and found)
    assert [interval.units for interval in intervals] == [8, 8]
    assert 300 <= (intervals[1].ended_at - intervals[1].started_at).total_seconds() <= 342
    assert Workload.objects.filter(origin=Origin.OUTSIDE).count() == 0
