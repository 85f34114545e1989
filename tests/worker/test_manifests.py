"""Job and Service manifests: pure functions of the workload row; every field name one Kubernetes knows."""

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model

from apps.org.models import Department, NodePool, PriorityClass, Project
from apps.workloads.models import Kind, Workload
from tests.k8s_fields import unknown_fields
from worker.manifests import job_manifest, notebook_service


def make(kind=Kind.TRAINING, **overrides):
    department = Department(slug="research", name="Research")
    project = Project(slug="vision", name="Vision", namespace="proj-vision", department=department)
    pool = NodePool(slug="h100", name="H100", gpu_resource="nvidia.com/gpu", capacity=16)
    values = {"pk": 42, "project": project, "owner": get_user_model()(pk=7, username="alice"), "kind": kind,
              "name": "resnet", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["python", "train.py"],
              "args": ["--epochs", "3"], "env": [{"name": "SEED", "value": "1"}], "node_pool": pool, "gpus": 2,
              "cpu": Decimal("4"), "memory_gib": Decimal("32"), "pods": 1, "completions": 1, "parallelism": 1,
              "priority_class": PriorityClass(name="train", value=50), "preemptible": True,
              "model_label": "resnet50", "data_class": "public"}
    values.update(overrides)
    return Workload(**values)


def test_training_job_is_suspended_and_labelled_for_kueue():
    job = job_manifest(make(pods=4, max_runtime_seconds=3600))
    assert job["metadata"]["name"] == "wl-42" and job["metadata"]["namespace"] == "proj-vision"
    labels = job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "elastic-h100"
    assert labels["kueue.x-k8s.io/priority-class"] == "train"
    assert labels["kueue.x-k8s.io/max-exec-time-seconds"] == "3600"
    assert labels["portal.gpu/workload-id"] == "42" and labels["portal.gpu/model"] == "resnet50"
    assert labels["portal.gpu/data-class"] == "public" and labels["app.kubernetes.io/managed-by"] == "gpu-portal"
    spec = job["spec"]
    assert spec["suspend"] is True
    assert (spec["parallelism"], spec["completions"], spec["completionMode"]) == (4, 4, "Indexed")
    container = spec["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == container["resources"]["limits"]["nvidia.com/gpu"]
    assert container["resources"]["requests"] == {"cpu": "4000m", "memory": "32768Mi", "nvidia.com/gpu": "2"}
    assert container["command"] == ["python", "train.py"] and container["args"] == ["--epochs", "3"]
    assert {"name": "SEED", "value": "1"} in container["env"]


def test_non_preemptible_work_goes_to_the_guaranteed_queue():
    job = job_manifest(make(preemptible=False, priority_class=PriorityClass(name="build", value=100,
                                                                               preemptible=False)))
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "guaranteed-h100"
    assert "kueue.x-k8s.io/max-exec-time-seconds" not in job["metadata"]["labels"]
    assert "completionMode" not in job["spec"]


def test_mig_pool_requests_its_own_resource_name():
    pool = NodePool(slug="a100-mig-3g40gb", name="MIG", gpu_resource="nvidia.com/mig-3g.40gb", capacity=16)
    container = job_manifest(make(node_pool=pool, gpus=1))["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/mig-3g.40gb"] == "1"
    assert "nvidia.com/gpu" not in container["resources"]["limits"]


def test_batch_counts():
    spec = job_manifest(make(kind=Kind.BATCH, completions=10, parallelism=3))["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (10, 3, 2)


def test_notebook_job_and_service():
    workload = make(kind=Kind.NOTEBOOK, notebook_port=8888, command=[], args=[])
    job = job_manifest(workload)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"] == [{"name": "http", "containerPort": 8888, "protocol": "TCP"}]
    assert "command" not in container
    service = notebook_service(workload, "uid-1")
    assert service["spec"]["selector"] == {"portal.gpu/workload-id": "42"}
    assert service["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert unknown_fields(service, "V1Service") == []


@pytest.mark.parametrize("kind", [Kind.TRAINING, Kind.NOTEBOOK, Kind.BATCH])
def test_every_field_is_a_batch_v1_job_field(kind):
    assert unknown_fields(job_manifest(make(kind=kind, pods=2 if kind == Kind.TRAINING else 1)), "V1Job") == []


def test_field_check_catches_a_typo():
    job = job_manifest(make())
    job["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    assert unknown_fields(job, "V1Job") == ["spec.template.spec.containers[0].resource"]
