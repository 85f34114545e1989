"""A submission through the API becomes the Job it describes: quantities, env, labels and queue survive the trip."""


from apps.workloads.models import Status, Workload
from tests.api_support import call
from worker import tasks


def test_api_submission_becomes_the_job_it_describes(synced, client_for, kubesim, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:  # captured, not run: the task is applied below
        response = call(client_for("alice"), "POST", "workloads/", {
            "project": "vision", "kind": "training", "name": "api-run", "image": "pytorch/pytorch:2.4.0",
            "command": ["sleep", "600"], "env": {"EPOCHS": "3"}, "node_pool": "h100", "gpus": 2, "pods": 2,
            "cpu": "500m", "memory": "512Mi", "preemptible": False,
            "labels": {"model": "resnet50", "data_class": "public"},
        })
    assert response.status_code == 201, response.content
    assert len(callbacks) == 1
    workload_id = response.json()["id"]
    assert tasks.workload_submit.apply(args=[workload_id]).get() == "submitted"
    workload = Workload.objects.get(pk=workload_id)
    assert workload.status == Status.QUEUED
    job = synced.get("Job", workload.job_name, namespace="proj-vision")
    labels = job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "guaranteed-h100"
    assert labels["kueue.x-k8s.io/priority-class"] == "build"
    assert job["spec"]["parallelism"] == 2
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "EPOCHS", "value": "3"} in container["env"]
    assert container["resources"]["requests"]["cpu"] == "500m"
    assert container["resources"]["requests"]["memory"] == "512Mi"
    assert container["resources"]["limits"]["nvidia.com/gpu"] in (2, "2")
    detail = call(client_for("alice"), "GET", f"workloads/{workload_id}/").json()
    assert detail["status"] == "queued" and detail["k8s_uid"] == job["metadata"]["uid"]
    assert detail["manifest"]["metadata"]["name"] == workload.job_name
